# ruff: noqa
"""ptxas (spills, C75xx) of the planned runs with row widths at 40-56 tokens (TP8's down) and their twins."""
exec(open(".dev/s38/ptx_runs.py").read().split("cfgs = []")[0])
from chord_kernels.indexed.api import _tma_rows_twin
cfgs = []
for bm in (40, 48, 56):
    c = W.choose_wgmma_config(7168, 256, bm)
    for sub in (False, True):
        b = dataclasses.replace(c, subnormal=sub)
        for x in (b, b.topk_sum_twin(7168), _tma_rows_twin(b)):
            if x is not None and x not in cfgs:
                cfgs.append(x)
with cf.ThreadPoolExecutor(2) as ex:
    for c, r in zip(cfgs, ex.map(report, cfgs)):
        print(("ok  " if isinstance(r, tuple) and r[:2] == (0, []) else "BAD ") + str(r) + " " + c.template_args(), flush=True)
