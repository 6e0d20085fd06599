# ruff: noqa
exec(open(".dev/s38/ptx_runs.py").read().split("cfgs = []")[0])
cfgs = []
for bm in (48, 56):
    c = W._choose_wgmma_config(7168, 256, bm, 0)
    c = dataclasses.replace(c, subnormal=True)
    for regs in (208, 200, 192):
        cfgs += [dataclasses.replace(c, row_widths=(bm - 16, bm - 8), consumer_regs=regs), dataclasses.replace(c, row_widths=(bm - 8,), consumer_regs=regs)]
with cf.ThreadPoolExecutor(2) as ex:
    for c, r in zip(cfgs, ex.map(report, cfgs)):
        print(("ok  " if isinstance(r, tuple) and r[:2] == (0, []) else "BAD ") + str(r) + " " + c.template_args(), flush=True)
