# ruff: noqa
"""Compile (in parallel) the kernels the GPU tests will ask for, roughly: every configuration the
planner may pick for each test case's (N, K, block_m), with its SiLU, tensor-copy-row and top-k-sum
twins, plus every explicit WgmmaConfig in the test modules, each also with its one-fma twin. argv: threads."""
import dataclasses, importlib, sys, time
from concurrent.futures import ThreadPoolExecutor
sys.path.insert(0, "packages/chord-kernels/tests")
from chord_kernels.indexed import planner as P
from chord_kernels.indexed.wgmma import WgmmaConfig
from chord_kernels.indexed.heuristics import WGMMA_BLOCK_MS
mods = ["test_indexed_gpu", "test_indexed_wgmma_gpu", "test_indexed_silu_mul_gpu", "test_indexed_topk_sum_gpu", "test_grouped_gpu", "test_subnormal_gpu"]
triples, explicit = set(), set()
for m in mods:
    mod = importlib.import_module(m)
    for v in vars(mod).values():
        if not isinstance(v, list):
            continue
        for x in v:
            case = getattr(x, "case", x)
            cfg = getattr(x, "config", None)
            if isinstance(cfg, WgmmaConfig):
                explicit.add(cfg)
            if hasattr(case, "block_m") and hasattr(case, "n"):
                triples.add((case.n, case.k, case.block_m))
            elif isinstance(x, tuple) and len(x) >= 4 and all(isinstance(t, int) for t in x[2:4]):
                for bm in (8, 16, 24, 32, 40, 48, 56, 64, 80):
                    triples.add((x[2], x[3], bm))
cfgs = set(explicit)
for n, k, bm in triples:
    try:
        found = list(P.configs_for(n, k, bm, "sm_90a"))
    except Exception:
        continue
    for c in found:
        cfgs.add(c)
        if isinstance(c, WgmmaConfig):
            if c.fits_silu_mul(n):
                cfgs.add(dataclasses.replace(c, silu_mul=True))
                cfgs.add(dataclasses.replace(c, silu_mul=True, tma_rows=True))
            t = c.topk_sum_twin(n)
            if t is not None:
                cfgs.add(t)
            if c.items * (c.bk // 64) <= 32:
                cfgs.add(dataclasses.replace(c, tma_rows=True))
for c in list(explicit):
    if c.fits_silu_mul(2 * 64 * c.mt * c.consumers) and not c.topk_sum:
        cfgs.add(dataclasses.replace(c, silu_mul=True))
cfgs |= {dataclasses.replace(c, subnormal=True) for c in cfgs}  # session 30: small-scale weights' twins
ks = {}
for c in cfgs:
    try:
        k = c.kernel()
        ks[k.source] = k
    except Exception as e:
        print("skip", c, e)
t0 = time.time()
n = int(sys.argv[1]) if len(sys.argv) > 1 else 16
def comp(k):
    try:
        k.compile("sm_90a")
    except Exception as e:
        print("FAIL", k.name, str(e)[:300], flush=True)
with ThreadPoolExecutor(n) as ex:
    list(ex.map(comp, ks.values()))
print(len(ks), "kernels ready for the tests in", round(time.time() - t0), "s", flush=True)
