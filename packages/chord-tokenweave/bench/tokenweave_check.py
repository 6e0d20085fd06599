#!/usr/bin/env python3
"""One command for an N-GPU NVLink machine: GPU tests, kernel benchmark, profiler, layer benchmark.

    export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1; \\
    PYTHONPATH=packages/chord-tokenweave/src timeout 590 \\
        python3 packages/chord-tokenweave/bench/tokenweave_check.py --world-size 2 --out "$OUT"

Stages share one wall-clock budget (``--budget``); a stage that does not fit is skipped and
recorded. Every rank process forces the no-multicast variables before torch initialises CUDA.
Writes ``tokenweave_tp{N}.json`` (+ profiler tables) under ``--out`` and prints a short table last.
"""

from __future__ import annotations

import os

# The rule comes first, before torch/NCCL/symmetric memory can read the environment.
for _k, _v in {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
               "NVSHMEM_DISABLE_NVLS": "1"}.items():
    os.environ[_k] = _v

import argparse  # noqa: E402
import json  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

HERE = Path(__file__).resolve().parent
PKG = HERE.parent
sys.path.insert(0, str(PKG / "src"))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--world-size", type=int, default=2)
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench-results")))
    p.add_argument("--budget", type=float, default=540.0,
                   help="seconds for all stages (keep below the outer timeout)")
    p.add_argument("--skip-tests", action="store_true")
    p.add_argument("--tests", default="", metavar="EXPR",
                   help="only the GPU tests matching this pytest -k expression")
    p.add_argument("--skip-kernel", action="store_true", help="no kernel-level benchmark")
    p.add_argument("--eager", action="store_true",
                   help="time the layer stack eagerly instead of in CUDA graphs")
    p.add_argument("--quick", action="store_true", help="fewer token counts and CTA counts")
    args = p.parse_args()
    start = time.monotonic()
    args.out.mkdir(parents=True, exist_ok=True)

    def left() -> float:
        return args.budget - (time.monotonic() - start)

    import torch

    from chord_tokenweave.bench import (
        DEFAULT_CTAS,
        DEFAULT_TOKENS,
        kernel_worker,
        layer_worker,
        profile_worker,
    )
    from chord_tokenweave.distributed import launch
    from chord_tokenweave.env import multicast_env_ok

    assert multicast_env_ok(), "no-multicast environment not in force"
    w = args.world_size
    report: dict[str, Any] = {
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "world_size": w, "torch": torch.__version__,
        "gpus": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
        "env": {k: os.environ[k] for k in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST",
                                           "NVSHMEM_DISABLE_NVLS")},
        "stages": {},
    }
    try:
        report["topology"] = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True,
                                            text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        report["topology"] = repr(exc)
    if torch.cuda.device_count() < w:
        print(f"need {w} GPUs, found {torch.cuda.device_count()}")
        return 2

    def stage(name: str, need: float, fn: Any) -> Any:
        if left() < need:
            report["stages"][name] = {"skipped": f"{left():.0f} s left, needs ~{need:.0f} s"}
            print(f"[{name}] skipped (budget)", flush=True)
            return None
        t0 = time.monotonic()
        print(f"[{name}] start ({left():.0f} s left)", flush=True)
        try:
            value = fn()
            report["stages"][name] = {"ok": True, "seconds": round(time.monotonic() - t0, 1)}
            return value
        except Exception as exc:
            report["stages"][name] = {"ok": False, "seconds": round(time.monotonic() - t0, 1),
                                      "error": f"{exc!r}"[:4000],
                                      "traceback": traceback.format_exc()[-4000:]}
            print(f"[{name}] FAILED: {exc!r}"[:2000], flush=True)
            return None
        finally:
            (args.out / f"tokenweave_tp{w}.json").write_text(json.dumps(report, indent=1,
                                                                        default=str))

    if not args.skip_tests:
        def run_tests() -> dict[str, Any]:
            env = dict(os.environ, PYTHONPATH=f"{PKG / 'src'}:{os.environ.get('PYTHONPATH', '')}")
            # Own session: on timeout the whole tree (pytest, fork server, ranks) is killed, so
            # no stray rank keeps a GPU busy for the benchmarks.
            select = ["-k", args.tests] if args.tests else []
            proc = subprocess.Popen(
                [sys.executable, "-m", "pytest", "-q", "-rA", "-m", "gpu", "-p",
                 "no:cacheprovider", *select, str(PKG / "tests")],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                text=True, env=env, cwd=PKG, start_new_session=True,
            )
            try:
                # Leave about 70 s for the profiler and the layer benchmark.
                out, _ = proc.communicate(timeout=max(45.0, min(200.0, left() - 70)))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                out, _ = proc.communicate()
                out += "\n[gpu tests killed: time limit]"
            tail = out[-6000:]
            print(tail, flush=True)
            return {"returncode": proc.returncode, "tail": tail}

        report["gpu_tests"] = stage("gpu_tests", 60, run_tests)

    tokens = [1024, 4096, 16384] if args.quick else list(DEFAULT_TOKENS)
    ctas = [8, 16, 32, 64] if args.quick else list(DEFAULT_CTAS)
    if not args.skip_kernel:
        report["kernel"] = stage("kernel", 90, lambda: launch(
            kernel_worker, w, 8192, tokens, ctas, backend="nccl",
            timeout_s=max(60.0, min(240.0, left() - 120)))[0])

    tables: dict[str, str] = {}
    for model in ("llama-3.3-70b", "mixtral-8x22b"):
        path = args.out / f"table_{model}_tp{w}.json"

        def prof(model: str = model, path: Path = path) -> dict[str, Any]:
            res = launch(profile_worker, w, model, [512, 1024, 2048, 4096, 8192], 2, str(path),
                         backend="nccl", timeout_s=max(30.0, min(120.0, left() - 25)))[0]
            tables[model] = str(path)
            return res

        report[f"profile_{model}"] = stage(f"profile_{model}", 30, prof)
        report[f"layer_{model}"] = stage(f"layer_{model}", 20, lambda model=model: launch(
            layer_worker, w, model, [1024, 2048, 4096, 8192], 2, 16, tables.get(model),
            "cuda", "full", not args.eager,
            backend="nccl", timeout_s=max(30.0, min(120.0, left() - 5)))[0])

    (args.out / f"tokenweave_tp{w}.json").write_text(json.dumps(report, indent=1, default=str))
    _print_summary(report)
    return 0


def _fmt(v: Any, nd: int = 1) -> str:
    return f"{v:.{nd}f}" if isinstance(v, (int, float)) else "-"


def _print_summary(report: dict[str, Any]) -> None:
    w = report["world_size"]
    print(f"\n==== chord-tokenweave summary (TP{w}, {', '.join(report['gpus'][:w])}) ====")
    for name, st in report["stages"].items():
        print(f"stage {name}: {st}"[:300])
    kernel = report.get("kernel") or {}
    bw = kernel.get("p2p_gbps")
    if bw:
        print("P2P GB/s per direction  " + "  ".join(
            f"{n}CTA pull {bw['pull'][n]:.0f}/push {bw['push'][n]:.0f}" for n in bw["pull"]))
    if kernel.get("rows"):
        print(f"{'tokens':>6} {'nccl+norm':>10} {'2shot+norm':>10} {'fused':>8} {'cfg':>14} "
              f"{'fewCTA<=10%':>12} {'1shot':>8} {'floor':>8} {'t/floor':>7} {'xNCCL':>6} "
              f"{'x2shot':>6}")
        for r in kernel["rows"]:
            few = r.get("fused_fewest_ctas_within_10pct") or {}
            print(f"{r['tokens']:>6} {_fmt(r.get('nccl_norm_us')):>10} "
                  f"{_fmt(r.get('two_shot_norm_us')):>10} {_fmt(r.get('fused_best_us')):>8} "
                  f"{r.get('fused_best_config', '-'):>14} "
                  f"{(str(few.get('ctas', '-')) + '@' + _fmt(few.get('us'))):>12} "
                  f"{_fmt(r.get('oneshot_best_us')):>8} {_fmt(r.get('floor_us')):>8} "
                  f"{_fmt(r.get('fused_floor_ratio'), 2):>7} "
                  f"{_fmt(r.get('speedup_vs_nccl_norm'), 2):>6} "
                  f"{_fmt(r.get('speedup_vs_two_shot_norm'), 2):>6}")
            if r.get("errors"):
                print(f"       errors: {list(r['errors'])[:6]}")
    for model in ("llama-3.3-70b", "mixtral-8x22b"):
        prof = report.get(f"profile_{model}")
        if prof:
            print(f"profile {model}: threshold {prof['table']['threshold']}; " + "; ".join(
                f"{k}: split {e['split']} ctas {e['num_ctas']} weave {e['weave']}"
                for k, e in prof["table"]["entries"].items()))
            for line in prof.get("log", []):
                print(f"    {line}")
        layer = report.get(f"layer_{model}")
        if layer:
            print(f"layer {model} ({layer['num_layers']} layers, us/forward): tokens sequential "
                  "fused tokenweave nocomm table | tw/seq table/seq nocomm/tw split | graphs")
            for r in layer["rows"]:
                graphs = "".join("G" if g else "e" for g in (r.get("graph") or {}).values())
                table_speedup = (r["sequential_us"] / r["table_us"]
                                 if r.get("table_us") and r.get("sequential_us") else None)
                print(f"  {r['tokens']:>6} {_fmt(r.get('sequential_us')):>9} "
                      f"{_fmt(r.get('fused_us')):>9} {_fmt(r.get('tokenweave_us')):>9} "
                      f"{_fmt(r.get('nocomm_us')):>9} {_fmt(r.get('table_us')):>9} | "
                      f"{_fmt(r.get('speedup_vs_sequential'), 3)} {_fmt(table_speedup, 3)} "
                      f"{_fmt(r.get('fraction_of_nocomm'), 3)} {r.get('split')} | {graphs}")
                print(f"         check_ok {r.get('check_ok')} x_same {r.get('x_same_on_ranks')} "
                      f"err fused {_fmt(r.get('fused_max_err'), 4)} tw "
                      f"{_fmt(r.get('tokenweave_max_err'), 4)} (free {_fmt(r.get('fused_free_err'), 3)}"
                      f"/{_fmt(r.get('tokenweave_free_err'), 3)}, flips "
                      f"{r.get('fused_routing_flips', '-')}/{r.get('tokenweave_routing_flips', '-')}) "
                      f"boundary y {_fmt(r.get('boundary_fused_max_y_err'), 4)}/"
                      f"{_fmt(r.get('boundary_tokenweave_max_y_err'), 4)} bad "
                      f"{r.get('boundary_fused_bad')}/{r.get('boundary_tokenweave_bad')}"[:600])
                if r.get("errors"):
                    print(f"         errors: {str(r['errors'])[:800]}")


if __name__ == "__main__":
    sys.exit(main())
