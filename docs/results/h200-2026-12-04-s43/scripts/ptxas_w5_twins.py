# ruff: noqa
"""ptxas -v of the adopted contiguous wide items and their twins (SiLU fused, one-fma, one tile per warpgroup)."""
import dataclasses, re
from pathlib import Path
from chord_kernels.indexed.wgmma import block_rows_wide_config
from chord_kernels.jit import CudaKernel
for n, k in ((4096, 7168), (7168, 2048), (200, 1056), (72, 1056)):
    base = block_rows_wide_config(n, k)
    for f in {base, dataclasses.replace(base, subnormal=True),
              *((dataclasses.replace(base, silu_mul=True), dataclasses.replace(base, silu_mul=True, subnormal=True)) if base.fits_silu_mul(n) else ())}:
        kk = f.kernel()
        v = CudaKernel(name=kk.name + "_v", source=kk.source, entry=kk.entry, arch=kk.arch, flags=("-Xptxas", "-v"))
        txt = Path(str(v.compile("sm_90a")).replace(".cubin", ".json")).read_text()
        print(n, k, "mt", f.mt, "silu", f.silu_mul, "subnormal", f.subnormal, "dynamic", f.dynamic,
              "spill", re.findall(r"(\d+) bytes spill stores", txt), "serialized", "C751" in txt, flush=True)
