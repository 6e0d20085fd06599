# ruff: noqa
"""Compile every family's default kernels (what precompile builds) in parallel. argv: threads."""
import importlib, sys, time
from concurrent.futures import ThreadPoolExecutor
from chord_kernels import families
ks = {}
for fam in families.FAMILIES:
    for k in importlib.import_module(fam.kernels).kernels("sm_90a"):
        ks[k.source] = k
t0 = time.time()
with ThreadPoolExecutor(int(sys.argv[1]) if len(sys.argv) > 1 else 2) as ex:
    list(ex.map(lambda k: k.compile("sm_90a"), ks.values()))
print(len(ks), "default kernels in", round(time.time() - t0), "s", flush=True)
