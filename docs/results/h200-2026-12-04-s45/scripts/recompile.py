# ruff: noqa
"""Session 45: recompile every kernel of a cache tarball's listing (its .cu sources and flags) against the
current headers into $CHORD_CACHE_DIR; entries compiled with extra -I flags (experiment variants) are skipped.
argv: LISTING_DIR THREADS"""
import json, sys, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from chord_kernels.jit import cache, nvcc

src_dir, threads = Path(sys.argv[1]), int(sys.argv[2])
compiler = nvcc.find_nvcc()
version = nvcc.nvcc_version(compiler)
jobs = []
for meta in sorted(src_dir.glob("*.json")):
    d = json.loads(meta.read_text())
    if "-I" in d["flags"]:
        continue
    jobs.append((d["name"], meta.with_suffix(".cu").read_text(), d["flags"]))
print(len(jobs), "kernels", flush=True)
t0, done = time.time(), [0]


def build(job):
    cache.compile_cached(job[0], job[1], compiler, job[2], version)
    done[0] += 1
    if done[0] % 50 == 0:
        print(done[0], f"{time.time() - t0:.0f}s", flush=True)


with ThreadPoolExecutor(threads) as ex:
    list(ex.map(build, jobs))
print("done", f"{time.time() - t0:.0f}s", flush=True)
