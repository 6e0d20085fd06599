# ruff: noqa
"""Session 69: ptxas (registers, spills, serialized wgmmas) on every default configuration with stream_out (TP8's down)."""
import json, re
from chord_kernels.indexed.planner import default_configs
from chord_kernels.indexed.wgmma import WgmmaConfig
from chord_kernels.jit import CudaKernel, compile_all
cs = [c for c in default_configs("sm_90a") if isinstance(c, WgmmaConfig) and c.stream_out]
cs += [c.with_tma_rows() for c in cs]
ks = [CudaKernel(name="s69_stream", source=c.source(), entry=c.kernel().entry, flags=("-Xptxas", "-v")) for c in cs]
for c, cubin in zip(cs, compile_all(ks, "sm_90a"), strict=True):
    log = json.loads(cubin.with_suffix(".json").read_text())["log"]
    sp = max(int(x) for x in re.findall(r"(\d+) bytes spill", log))
    regs = re.findall(r"Used (\d+) registers", log)
    print(f"bm {c.block_m:3d} x{c.items} cons {c.consumers} runs {c.n_run} tma {int(c.tma_rows)} sub {int(c.subnormal)} spill {sp} "
          f"regs {regs} serial {'C751' in log}", flush=True)
