# ruff: noqa
"""Session 63: ptxas on the one-block items (72-104 tokens) with whole stages and the pairs shifted: every planned
form (fused SiLU, plain, tensor copies, top-k-sum twins)."""
import dataclasses, json, re
from chord_kernels.indexed import WgmmaConfig, default_configs
from chord_kernels.jit import CudaKernel, compile_all
planned = [c for c in default_configs("sm_90a") if isinstance(c, WgmmaConfig) and c.mt * c.tile >= 128
           and c.consumers <= 3 and not c.n_run and not c.weight_ring and c.items == 1]
planned += [c.topk_sum_twin(7168) for c in planned if c.topk_sum_twin(7168)]
planned += [dataclasses.replace(c, tma_rows=True) for c in planned if not c.silu_mul and not c.topk_sum]
variants = list(dict.fromkeys(dataclasses.replace(c, whole_stages=True, shift_pairs=True) for c in planned))
kernels = [CudaKernel(name="shift_check", source=c.source(), entry=c.kernel().entry, flags=("-Xptxas", "-v")) for c in variants]
for c, cubin in zip(variants, compile_all(kernels, "sm_90a"), strict=True):
    log = json.loads(cubin.with_suffix(".json").read_text())["log"]
    sp = max(int(x) for x in re.findall(r"(\d+) bytes spill", log))
    regs = re.findall(r"Used (\d+) registers", log)
    print(f"bm {c.block_m:3d} silu {int(c.silu_mul)} tma {int(c.tma_rows)} topk {int(c.topk_sum)} sub {int(c.subnormal)} widths {c.row_widths} "
          f"spill {sp} serial {'C751' in log} regs {regs}", flush=True)
