"""The indexed decode kernel compiles for every supported architecture without register spills.

Needs nvcc (skipped without it), not a GPU: Blackwell (sm_100a, sm_103a) is compile-checked only.
"""

from __future__ import annotations

import json
import re

import pytest

from chord_kernels.errors import NvccNotFoundError
from chord_kernels.indexed.ops import _SOURCE, default_configs
from chord_kernels.jit import SUPPORTED_ARCHS, CudaKernel, find_nvcc

try:
    find_nvcc()
    HAVE_NVCC = True
except NvccNotFoundError:
    HAVE_NVCC = False

pytestmark = pytest.mark.skipif(not HAVE_NVCC, reason="needs nvcc")


@pytest.mark.parametrize("arch", SUPPORTED_ARCHS)
def test_default_configs_compile_without_spills(arch: str) -> None:
    assert set(SUPPORTED_ARCHS) >= {"sm_90a", "sm_100a", "sm_103a"}
    for cfg in default_configs():
        source = _SOURCE.format(template_args=cfg.template_args(), min_blocks=cfg.ctas_per_sm)
        kernel = CudaKernel(name="indexed_decode_check", source=source, entry="chord_indexed_decode",
                            flags=("-Xptxas", "-v"))
        cubin = kernel.compile(arch)
        assert cubin.read_bytes()[:4] == b"\x7fELF"
        log = json.loads(cubin.with_suffix(".json").read_text())["log"]
        spills = [int(x) for x in re.findall(r"(\d+) bytes spill", log)]
        assert spills and not any(spills), f"{cfg} on {arch} spills registers:\n{log}"
        regs = int(re.search(r"Used (\d+) registers", log).group(1))
        assert regs * cfg.threads * cfg.ctas_per_sm <= 65536, f"{cfg}: {regs} registers limit occupancy"
