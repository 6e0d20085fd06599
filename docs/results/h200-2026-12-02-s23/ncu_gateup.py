# ruff: noqa
"""Session 23: ncu of the gate_up GEMMs (K = 7168) of tp8_8192, ep8_tok341, ep8_tok43. From session 21's ncu of TP8 down (K = 256) at 8192 tokens. Adapted from s15: ncu of Chord's WGMMA kernels on the middle shapes (default configs): gate_up then down of
ep8_masked16 and ep8_masked32 (grouped masked), ep8_tok43 (indexed). With --target: the launches;
without: runs ncu on itself and prints the sections and hottest SASS (ci/indexed_check.py's filters)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "ci"))
TARGETS = (("tp8_8192", "chord-indexed"), ("ep8_tok341", "chord-indexed"), ("ep8_tok43", "chord-indexed"))


def target() -> None:
    from chord_bench import scenarios as S
    from chord_bench.impls import ChordGroupedImpl, ChordIndexedImpl
    from chord_bench.problems import WeightCache, scenario_problems
    weights = WeightCache(0, torch.device("cuda"))
    for sid, impl_name in TARGETS:
        impl = ChordGroupedImpl() if impl_name == "chord-grouped" else ChordIndexedImpl()
        _, problems = scenario_problems(S.SCENARIOS[sid], "uniform", 0, weights)
        for p in problems:
            if p.shape.k != 7168:
                continue  # gate_up only
            c = impl.candidate(p)
            c.run(); torch.cuda.synchronize()  # compile + warm
            torch.cuda.profiler.start(); c.run(); torch.cuda.synchronize(); torch.cuda.profiler.stop()
            print(sid, c.label, flush=True)


def main() -> None:
    import indexed_check as IC
    IC.NCU_METRICS = IC.NCU_METRICS + ("L2 Cache Throughput", "L1/TEX Cache Throughput", "Compute (SM) Throughput")
    out_dir = Path(os.environ.get("OUT", "/tmp"))
    tool = shutil.which("ncu") or "/usr/local/cuda/bin/ncu"
    report = Path("/tmp/chord_gateup_ncu")
    cmd = [tool, "--clock-control", "none", "--set", "full", "--profile-from-start", "off", "-k", "regex:chord_indexed",
           "-f", "-o", str(report), sys.executable, __file__, "--target"]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=400)
    print((r.stdout + r.stderr)[-1500:], flush=True)
    keep = []
    for page, extra in (("details", ["--print-details", "all"]), ("raw", []), ("source", ["--print-source", "sass", "--csv"])):
        text = subprocess.run([tool, "-i", f"{report}.ncu-rep", "--page", page, *extra], capture_output=True, text=True,
                              timeout=120).stdout
        (out_dir / f"ncu_gateup_{page}.txt").write_text(text)
        if page == "details":
            section = ""
            for line in text.splitlines():
                if "Section:" in line or "chord_indexed" in line:
                    section = line.strip()
                    if "chord_indexed" in line:
                        keep.append(line.rstrip())
                    continue
                if any(x in section for x in IC.NCU_SECTIONS) and any(m in line for m in IC.NCU_METRICS):
                    keep.append(line.rstrip())
        elif page == "raw":
            keep += [l.rstrip() for l in text.splitlines() if "issue_stalled" in l and "ratio" in l and "average" in l]
        else:
            keep += IC.hottest_sass(text, top=40)
    (out_dir / "ncu_gateup_summary.txt").write_text("\n".join(keep))
    print("\n".join(keep[:400]), flush=True)


if __name__ == "__main__":
    target() if "--target" in sys.argv else main()
