"""The indexed decode kernel compiles for every supported architecture without register spills.

Needs nvcc (skipped without it), not a GPU: Blackwell (sm_100a, sm_103a) is compile-checked only.
"""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from chord_kernels.errors import ChordCompileError, NvccNotFoundError
from chord_kernels.indexed import DecodeConfig, WgmmaConfig, default_configs
from chord_kernels.jit import SUPPORTED_ARCHS, CudaKernel, compile_all, find_nvcc

try:
    find_nvcc()
    HAVE_NVCC = True
except NvccNotFoundError:
    HAVE_NVCC = False

pytestmark = pytest.mark.skipif(not HAVE_NVCC, reason="needs nvcc")


@pytest.mark.parametrize("arch", SUPPORTED_ARCHS)
def test_default_configs_compile_without_spills(arch: str) -> None:
    assert set(SUPPORTED_ARCHS) >= {"sm_90a", "sm_100a", "sm_103a"}
    configs = default_configs(arch)
    # The opt-in top-k-sum twins of the Kimi down GEMMs' WGMMA configurations.
    configs += [c.topk_sum_twin(7168) for c in configs if isinstance(c, WgmmaConfig) and c.topk_sum_twin(7168)]
    # The grouped modes' tensor-copy twins (one of each item shape: their producers differ).
    configs += [c.with_tma_rows() for c in configs
                if isinstance(c, WgmmaConfig) and c.block_m in (16, 24, 32, 64, 80) and not c.topk_sum]
    kernels = [CudaKernel(name="indexed_decode_check", source=cfg.source(), entry=cfg.kernel().entry,
                          flags=("-Xptxas", "-v")) for cfg in configs]
    cubins = compile_all(kernels, arch)  # several nvcc at a time: ptxas takes tens of seconds on some
    for cfg, cubin in zip(configs, cubins, strict=True):
        assert cubin.read_bytes()[:4] == b"\x7fELF"
        log = json.loads(cubin.with_suffix(".json").read_text())["log"]
        spills = [int(x) for x in re.findall(r"(\d+) bytes spill", log)]
        assert spills and max(spills) == 0, f"{cfg} on {arch} spills registers:\n{log}"
        if isinstance(cfg, WgmmaConfig):
            # ptxas serializes every wgmma when the pipeline's registers do not fit (docs/optimization.md,
            # sessions 8, 14, 16 and 17): no default configuration does.
            assert "C7511" not in log and "C7512" not in log, f"{cfg}: wgmma serialized\n{log}"
        regs = int(re.search(r"Used (\d+) registers", log).group(1))
        assert regs * cfg.threads * cfg.ctas_per_sm <= 65536, f"{cfg}: {regs} registers limit occupancy"


def test_host_and_device_shared_memory_plans_must_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    """A host formula that drifts from decode_config.cuh fails to compile, never launches."""
    cfg = DecodeConfig(block_m=8, warps=4, mt=1, stages=2, ctas_per_sm=4)
    smem = DecodeConfig.smem_bytes
    monkeypatch.setattr(DecodeConfig, "smem_bytes", lambda self, list_cap: smem(self, list_cap) + 16)
    kernel = CudaKernel(name="indexed_decode_drift", source=cfg.source(), entry=cfg.kernel().entry)
    with pytest.raises(ChordCompileError, match="shared-memory plans differ"):
        kernel.compile("sm_90a")


def test_split_tail_twins_compile_without_serialized_wgmmas() -> None:
    """The split tail (``tail_parts``; planned on the narrow gate_up items) of the Kimi GEMMs' item
    shapes it takes: four warpgroups' 24 x 2 items (gate_up, fused SiLU), 64 x 2 items (also as the
    grouped contiguous mode runs them: tensor copies, the routing read from m_indices), 56-token
    one-block items, three warpgroups' down and a top-k-sum twin; and those of two blocks cut into
    blocks (``tail_blocks``). None spills, the four-warpgroup items at their 96 registers included."""
    from chord_kernels.indexed import choose_wgmma_config
    from chord_kernels.indexed.planner import silu_mul_twin

    plans = [silu_mul_twin(choose_wgmma_config(4096, 7168, 24, 16.0), 4096),
             silu_mul_twin(choose_wgmma_config(4096, 7168, 64, 128.0), 4096),
             silu_mul_twin(choose_wgmma_config(4096, 7168, 56, 43.0), 4096),
             choose_wgmma_config(7168, 2048, 24, 16.0), choose_wgmma_config(7168, 2048, 64, 128.0).topk_sum_twin(7168)]
    plans += [c.with_tma_rows() for c in (plans[1], choose_wgmma_config(7168, 2048, 64, None))]
    assert all(c.reads_contiguous_rows for c in plans[-2:])
    configs = [dataclasses.replace(c, tail_parts=8, subnormal=sub) for c in plans for sub in (False, True)]
    configs += [dataclasses.replace(c, tail_parts=c.items, tail_blocks=True, subnormal=True)  # (none spills)
                for c in plans if c.items > 1 and not c.widths]
    kernels = [CudaKernel(name="indexed_tail_check", source=cfg.source(), entry=cfg.kernel().entry,
                          flags=("-Xptxas", "-v")) for cfg in configs]
    for cfg, cubin in zip(configs, compile_all(kernels, "sm_90a"), strict=True):
        log = json.loads(cubin.with_suffix(".json").read_text())["log"]
        assert "C7511" not in log and "C7512" not in log, f"{cfg}: wgmma serialized\n{log}"
        spills = max(int(x) for x in re.findall(r"(\d+) bytes spill", log))
        assert spills == 0, f"{cfg}: {spills} bytes spilled\n{log}"


def test_wide_items_with_whole_stages_commit_per_k_group() -> None:
    """The 72-104-token one-block items and the 64 x 2 items commit per K step, but with ``whole_stages`` (K
    a multiple of the stage's: no bound in the K loop, two A buffers suffice) per K group (the 64 x 2 items
    without row widths), as planned since session 61 for the 64 x 2 gate_up and the 72-96-token downs, and
    ptxas pipelines every such form without spills: gate_up with the fused SiLU at every block, the plain
    and tensor-copy items to 96 tokens, the 64 x 2 items with tensor copies and their last round cut into
    blocks (at 104 tokens the plain items, from 80 the top-k-sum twins, and with row widths the 64 x 2
    items do not: docs/optimization.md, session 61)."""
    planned = [c for c in default_configs("sm_90a") if isinstance(c, WgmmaConfig) and c.mt * c.tile >= 128
               and c.consumers <= 3 and not c.n_run and not c.weight_ring]
    assert {(c.block_m, c.items) for c in planned} == {(72, 1), (80, 1), (88, 1), (96, 1), (104, 1), (64, 2)}
    assert any(c.whole_stages for c in planned) and any(c.commit_per_step for c in planned)
    variants = [dataclasses.replace(c, whole_stages=True, shift_pairs=False, row_widths=c.row_widths if c.items == 1 else ())
                for c in planned if c.silu_mul or c.block_m <= 96]
    variants += [c.with_tma_rows() for c in variants if not c.silu_mul or c.items > 1]
    variants += [dataclasses.replace(c, tail_parts=2, tail_blocks=True) for c in variants if c.items > 1 and c.tma_rows]
    variants = list(dict.fromkeys(variants))  # the planned whole-stage items are their own variants
    # (50: the gate_up items on two stages, with and without their next stage's rows prefetched, sessions 67 and 68)
    assert len(variants) == 50 and not any(c.commit_per_step for c in variants)
    kernels = [CudaKernel(name="indexed_group_commit_check", source=cfg.source(), entry=cfg.kernel().entry,
                          flags=("-Xptxas", "-v")) for cfg in variants]
    for cfg, cubin in zip(variants, compile_all(kernels, "sm_90a"), strict=True):
        log = json.loads(cubin.with_suffix(".json").read_text())["log"]
        assert "C751" not in log, f"{cfg}: wgmma serialized\n{log}"
        assert max(int(x) for x in re.findall(r"(\d+) bytes spill", log)) == 0, f"{cfg} spills registers:\n{log}"
