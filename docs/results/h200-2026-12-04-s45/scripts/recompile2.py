# ruff: noqa
"""Session 45: rebuild a kernel cache listing for the current headers and argument struct: each cached .cu
source gets the current chord::indexed::Args (its definition, the entry's parameters and values, replaced where
the listing's older struct stood), then compiles into $CHORD_CACHE_DIR under the key the runtime computes.
argv: LISTING_DIR THREADS OLD_ARGS_PY [check]"""
import json, sys, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from chord_kernels.indexed.args import ARGS as NEW
from chord_kernels.jit import cache, nvcc

src_dir, threads, old_py = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
ns = {"__name__": "old_args"}
exec(compile(Path(old_py).read_text(), old_py, "exec"), ns)
OLD = ns["ARGS"]


def parts(a):
    return (a.cpp(), ",\n    ".join(f.parameter() for f in a.fields), ", ".join(f.value() for f in a.fields))


def upgrade(src: str) -> str:
    if "chord::indexed::Args" not in src:
        return src
    for old, new in zip(parts(OLD), parts(NEW)):
        assert src.count(old) == 1, "old Args text not found once"
        src = src.replace(old, new)
    return src


if len(sys.argv) > 4:  # check: current sources of a few configurations, downgraded, are in the listing
    from chord_kernels.indexed import wgmma as W, decode as D
    have = {p.read_text() for p in src_dir.glob("*.cu")}
    for cfg in (W.WgmmaConfig(block_m=24, mt=2, bk=256, stages=2, consumers=4, items=2, dynamic=True, consumer_regs=104,
                              subnormal=True),):
        src = cfg.source()
        down = src
        for old, new in zip(parts(OLD), parts(NEW)):
            down = down.replace(new, old)
        print("found" if down in have else "MISSING", cfg)
    sys.exit(0)

compiler = nvcc.find_nvcc()
version = nvcc.nvcc_version(compiler)
jobs = []
for meta in sorted(src_dir.glob("*.json")):
    d = json.loads(meta.read_text())
    if "-I" in d["flags"]:
        continue
    jobs.append((d["name"], upgrade(meta.with_suffix(".cu").read_text()), d["flags"]))
print(len(jobs), "kernels", flush=True)
t0, done, failed = time.time(), [0], []


def build(job):
    try:
        cache.compile_cached(job[0], job[1], compiler, job[2], version)
    except Exception as exc:  # a stale experiment's source that today's headers refuse
        failed.append(str(exc).splitlines()[0])
    done[0] += 1
    if done[0] % 50 == 0:
        print(done[0], f"{time.time() - t0:.0f}s", flush=True)


with ThreadPoolExecutor(threads) as ex:
    list(ex.map(build, jobs))
print("done", f"{time.time() - t0:.0f}s", len(failed), "failed", flush=True)
