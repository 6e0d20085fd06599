"""One call on a CUDA host: compile every kernel, run every package's GPU tests, print a table.

Usage: python3 ci/gpu_check.py [--out DIR] [-k EXPR]. Writes gpu_check.json (per-package counts,
and the log tail of any failing package) under --out (default $OUT or ./gpu-check).
`nox -s gpu` calls it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("chord-kernels", "chord-pack", "chord-vllm", "chord-tokenweave", "chord-bench")


def _environment() -> dict[str, str]:
    import torch

    info = {"python": sys.version.split()[0], "torch": torch.__version__,
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
        info["gpus"] = str(torch.cuda.device_count())
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True, check=False).stdout.strip()
    info["commit"] = commit or "unknown"
    return info


def _precompile() -> tuple[int, float]:
    from chord_kernels.families import precompile

    start = time.perf_counter()
    paths = precompile()
    return len(paths), time.perf_counter() - start


def _run_tests(package: str, scratch: Path, select: str | None) -> dict[str, object]:
    junit = scratch / f"junit-{package}.xml"
    cmd = [sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider",
           f"--junitxml={junit}", "tests"]
    if select:
        cmd += ["-k", select]
    start = time.perf_counter()
    # Tests run from their package directory: give them every package's source by absolute path.
    sources = [str(ROOT / "packages" / p / "src") for p in PACKAGES]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*sources, os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(cmd, cwd=ROOT / "packages" / package, capture_output=True, text=True, check=False, env=env)
    seconds = time.perf_counter() - start
    result: dict[str, object] = {"package": package, "exit": proc.returncode, "seconds": round(seconds, 1)}
    if junit.exists():
        suite = ET.parse(junit).getroot()
        suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
        for key in ("tests", "failures", "errors", "skipped"):
            result[key] = int(suite.get(key, 0))
    if proc.returncode not in (0, 5):  # 5: no GPU tests in this package
        result["log_tail"] = proc.stdout[-6000:] + proc.stderr[-2000:]
        print(result["log_tail"])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "gpu-check")))
    parser.add_argument("-k", dest="select", help="pytest -k expression")
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():  # every GPU test would skip, and a table of skips is no check
        print(f"GPU CHECK NOT RUN: torch {torch.__version__} sees no CUDA GPU", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    report: dict[str, object] = {"environment": _environment()}
    count, seconds = _precompile()
    report["precompile"] = {"cubins": count, "seconds": round(seconds, 1)}
    with tempfile.TemporaryDirectory(prefix="chord-gpu-check-") as scratch:
        report["tests"] = [_run_tests(p, Path(scratch), args.select) for p in PACKAGES]
    (args.out / "gpu_check.json").write_text(json.dumps(report, indent=1))

    env = report["environment"]
    print(f"\n{env.get('gpu', 'no GPU')} | torch {env['torch']} | commit {env['commit']} | {env['date']}")
    print(f"precompile: {count} cubins in {seconds:.1f}s")
    print(f"{'package':<18}{'tests':>7}{'failed':>8}{'skipped':>9}{'seconds':>9}")
    ok = True
    for row in report["tests"]:
        failed = int(row.get("failures", 0)) + int(row.get("errors", 0))
        ok &= row["exit"] in (0, 5) and failed == 0
        print(f"{row['package']:<18}{row.get('tests', 0):>7}{failed:>8}{row.get('skipped', 0):>9}{row['seconds']:>9}")
    print("GPU CHECK", "PASSED" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
