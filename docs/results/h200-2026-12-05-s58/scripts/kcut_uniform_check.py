"""ptxas and SASS of the split-tail test configurations with kcut_uniform.patch applied: copy
packages/chord-kernels/src/chord_kernels to /tmp/uni_pkg, apply the patch there (patch -p4), then from the
repository root: PYTHONPATH=/tmp/uni_pkg python3 kcut_uniform_check.py. Prints, per configuration, the
bytes spilled, SASS lines, R2UR within 30 instructions of an HGMMA, and HGMMA count."""
import dataclasses
import json
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, "packages/chord-kernels/tests")

from test_indexed_split_tail_gpu import CASES

import chord_kernels
from chord_kernels.indexed.planner import configs_for
from chord_kernels.jit import CudaKernel

assert chord_kernels.__file__.startswith("/tmp/uni_pkg"), chord_kernels.__file__
cfgs = {c.name: dataclasses.replace(c.config, subnormal=True) for c in CASES}
cfgs["pairs_c4_silu"] = dataclasses.replace(cfgs["pairs_c4_k7168"], silu_mul=True)
cfgs["bm56_silu"] = dataclasses.replace(cfgs["bm56_mapped"], silu_mul=True)
cfgs["items64x2_topk"] = dataclasses.replace(cfgs["items64x2_down_weighted"], topk_sum=True, row_widths=())
cfgs["contig_down_tma_kcut4"] = dataclasses.replace(configs_for(7168, 2048, 64, "sm_90a")[0], tma_rows=True,
                                                    subnormal=True, tail_parts=4)


def one(item):
    name, c = item
    k = CudaKernel(name="uni_" + name, source=c.source(), entry=c.kernel().entry, flags=("-Xptxas", "-v"))
    path = k.compile("sm_90a")
    log = json.loads(path.with_suffix(".json").read_text())["log"]
    sass = subprocess.run(["cuobjdump", "-sass", str(path)], capture_output=True, text=True).stdout
    lines = [re.sub(r"\s*/\*[0-9a-f]+\*/\s*", "", line).split(";")[0] for line in sass.splitlines()
             if re.match(r"\s+/\*[0-9a-f]+\*/", line)]
    hgmma = [i for i, line in enumerate(lines) if "HGMMA" in line]
    near = {j for i in hgmma for j in range(max(0, i - 30), min(len(lines), i + 30)) if "R2UR" in lines[j]}
    return name, re.findall(r"(\d+) bytes spill stores", log), len(lines), len(near), len(hgmma)


with ThreadPoolExecutor(2) as ex:
    for r in ex.map(one, cfgs.items()):
        print(*r, flush=True)
