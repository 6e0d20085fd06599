"""One-off GPU check of the issue-13 refactor of chord_kernels.indexed against the code before it.

Step 1, on a checkout with git history (CPU is enough), bundle the pre-refactor device code:

    python packages/chord-kernels/tests/refactor_check_gpu.py bundle --commit 346da84

writes ``packages/chord-kernels/tests/old_decode_346da84.cuh`` (every header the old kernel
included, inlined, so that it compiles beside the new headers). Step 2, on the H200, from the
repo root with PYTHONPATH set to the packages' src dirs:

    python packages/chord-kernels/tests/refactor_check_gpu.py all --out $OUT

runs the package's GPU suite, compute-sanitizer memcheck on small shapes (split-K, caller-owned
workspace, M = 0 and M = 1), and times the decode scenarios' GEMMs with the old kernel (old
source, old 17-argument launch, old-style workspace) and the new ``indexed.gemm`` in alternating
rounds of CUDA-graph replays, after checking that both give bit-identical outputs. It prints a
table and writes ``refactor_check.json``. Delete this file and the bundle once the check is done.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent.parent
INCLUDE = "packages/chord-kernels/src/chord_kernels/include"
OLD_ENTRY = r"""
using Cfg = chord::indexed::DecodeConfig<{template_args}>;

extern "C" __global__ void __launch_bounds__(Cfg::kThreads, {min_blocks}) chord_indexed_decode(
    const int32_t* __restrict__ tiles, const __nv_bfloat16* __restrict__ a, __nv_bfloat16* out,
    const int32_t* __restrict__ sorted_token_ids, const int32_t* __restrict__ expert_ids,
    const int32_t* __restrict__ num_tokens_post_padded, const float* __restrict__ topk_weights,
    int32_t* counters, float* partials, int32_t* flags, int n, int k, int num_experts, int num_slots, int top_k, int num_blocks,
    int list_cap) {{
  const chord::indexed::DecodeArgs args{{tiles, a, out, sorted_token_ids, expert_ids,
                                         num_tokens_post_padded, topk_weights, counters, partials,
                                         flags, n, k,
                                         num_experts, num_slots, top_k, num_blocks, list_cap}};
  chord::indexed::decode_kernel<Cfg>(args);
}}
"""
OLD_SCHEDULES = ("strided", "dynamic", "balanced")
# (name, experts, tokens, top_k, gate_up (N, K), down (N, K), profile), as in the benchmark.
SCENARIOS = {
    "ep8_decode": (48, 160, 1, (4096, 7168), (7168, 2048), "h200_ep8"),
    "tp8_decode160": (384, 160, 8, (512, 7168), (7168, 256), "h200_tp8"),
    "ep8_tok16": (48, 768, 1, (4096, 7168), (7168, 2048), "h200_ep8"),
    "tp8_1024": (384, 1024, 8, (512, 7168), (7168, 256), "h200_tp8"),
}


def bundle(commit: str) -> Path:
    """Inline the old kernel's headers from ``git show <commit>:...`` into one file."""
    seen: set[str] = set()

    def inline(path: str) -> str:
        if path in seen:
            return ""
        seen.add(path)
        text = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:{INCLUDE}/{path}"], check=True,
                              capture_output=True, text=True).stdout
        return re.sub(r'#include "(chord/[^"]+)"', lambda m: inline(m.group(1)), text.replace("#pragma once", ""))

    out = HERE / f"old_decode_{commit}.cuh"
    out.write_text(f"// chord/indexed/decode.cuh of {commit} with its headers inlined\n" + inline("chord/indexed/decode.cuh"))
    print(f"wrote {out}")
    return out


def run_suite() -> dict:
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider", "tests"],
                          cwd=HERE.parent, capture_output=True, text=True, check=False)
    tail = proc.stdout.strip().splitlines()[-1:] or [proc.stderr[-300:]]
    print(f"GPU suite: exit {proc.returncode}: {tail[0]}")
    if proc.returncode:
        print(proc.stdout[-6000:])
    return {"exit": proc.returncode, "summary": tail[0]}


def sanitize_target() -> None:
    """Small shapes for compute-sanitizer: every schedule, split items, caller workspace, M = 0/1."""
    import dataclasses

    import torch

    import chord_kernels
    from chord_kernels import indexed
    from chord_kernels.formats import random_quantized
    from chord_kernels.routing import align_block_size

    g = torch.Generator(device="cuda").manual_seed(1)
    cases = [(6, 40, 96, 9, 2, 8, False, None), (8, 64, 320, 12, 3, 16, True, "dynamic"),
             (6, 264, 1056, 20, 2, 8, True, None), (6, 200, 1056, 40, 3, 24, True, None),
             (4, 264, 1056, 90, 2, 64, True, None), (8, 64, 2048, 12, 2, 8, True, "balanced")]
    for e, n, k, m, top_k, bm, mapped, schedule in cases:
        pw = chord_kernels.pack("indexed", *random_quantized(e, n, k, generator=g, device="cuda"), profile="h200_ep8")
        ge = 4 * e if mapped else e
        emap = None
        if mapped:
            emap = torch.full((ge,), -1, dtype=torch.int32, device="cuda")
            emap[::4] = torch.arange(e, dtype=torch.int32, device="cuda")
        ids = torch.randint(0, ge, (m, top_k), generator=g, device="cuda")
        r = align_block_size(ids, bm, ge, emap)
        a = torch.randn(m, k, generator=g, device="cuda").to(torch.bfloat16)
        tw = torch.rand(m, top_k, generator=g, device="cuda")
        args = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
        config = None if schedule is None else dataclasses.replace(indexed.choose_config(n, k, bm), schedule=schedule)
        indexed.gemm(a, pw, *args, block_m=bm, top_k=top_k, topk_weights=tw, config=config)
        ws = indexed.new_workspace(indexed.max_workspace_bytes(pw), "cuda")
        indexed.gemm(a, pw, *args, block_m=bm, top_k=top_k, topk_weights=tw, config=config, workspace=ws)
    w13 = chord_kernels.pack("indexed", *random_quantized(8, 128, 256, generator=g, device="cuda"), profile="h200_ep8")
    w2 = chord_kernels.pack("indexed", *random_quantized(8, 256, 64, generator=g, device="cuda"), profile="h200_ep8")
    for m in (0, 1):
        hidden = torch.randn(m, 256, generator=g, device="cuda").to(torch.bfloat16)
        ids = torch.randint(0, 8, (m, 2), generator=g, device="cuda")
        assert indexed.fused_moe(hidden, w13, w2, torch.rand(m, 2, device="cuda"), ids).shape == (m, 256)
    torch.cuda.synchronize()
    print("sanitize target ok")


def run_memcheck() -> dict:
    tool = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
    if not Path(tool).exists():
        print("memcheck: compute-sanitizer not found")
        return {"skipped": "compute-sanitizer not found"}
    proc = subprocess.run([tool, "--tool", "memcheck", "--report-api-errors", "no", sys.executable, __file__,
                           "sanitize-target"], capture_output=True, text=True, check=False, timeout=400)
    text = proc.stdout + proc.stderr
    summary = [line for line in text.splitlines() if "ERROR SUMMARY" in line]
    result = {"exit": proc.returncode, "target_ok": "sanitize target ok" in text, "summary": summary[-1:]}
    print(f"memcheck: {result}")
    if proc.returncode or not result["target_ok"]:
        print(text[-4000:])
    return result


def _timer():
    try:
        from chord_bench.timing import interleaved
    except ImportError:
        from chord_kernels.bench.timing import interleaved
    return interleaved


def time_old_vs_new(bundle_path: Path, scenarios: list[str]) -> list[dict]:
    import torch

    import chord_kernels
    from chord_kernels import hardware, indexed
    from chord_kernels.formats import random_quantized
    from chord_kernels.jit import CudaKernel, i32
    from chord_kernels.routing import align_block_size

    old_header = bundle_path.read_text()
    interleaved = _timer()
    sms = hardware.num_sms(0)
    gen = torch.Generator(device="cuda").manual_seed(2026)
    rows = []
    for name in scenarios:
        experts, tokens, top_k, gate_up, down, profile = SCENARIOS[name]
        ids = torch.rand(tokens, experts, generator=gen, device="cuda").argsort(dim=1)[:, :top_k]
        slots = tokens * top_k
        for proj, (n, k) in (("gate_up", gate_up), ("down", down)):
            w = chord_kernels.pack("indexed", *random_quantized(experts, n, k, generator=gen, device="cuda"),
                                   profile=profile)
            rows_a, addr_top_k = (tokens, top_k) if proj == "gate_up" else (slots, 1)
            a = torch.randn(rows_a, k, generator=gen, device="cuda").to(torch.bfloat16)
            tw = None if proj == "gate_up" else torch.rand(slots, generator=gen, device="cuda")
            block_m = indexed.choose_block_m(w, slots)
            r = align_block_size(ids, block_m, experts)
            args = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
            plan = indexed.plan(w, block_m=block_m, capacity=indexed.routing_capacity(args[0], args[1], block_m))
            cfg = plan.config
            template = f"{cfg.warps}, {cfg.mt}, {cfg.block_m}, {cfg.bk}, {cfg.stages}, {OLD_SCHEDULES.index(cfg.schedule)}"
            old = CudaKernel(name="indexed_decode_old", entry="chord_indexed_decode",
                             source=old_header + OLD_ENTRY.format(template_args=template, min_blocks=cfg.ctas_per_sm))
            ctas = sms * cfg.ctas_per_sm  # the old per-device workspace sizes
            counters = torch.zeros(2, dtype=torch.int32, device="cuda")
            partials = torch.empty(2 * ctas * cfg.partial_floats, dtype=torch.float32, device="cuda")
            flags = torch.zeros(ctas * cfg.warps, dtype=torch.int32, device="cuda")
            out_old = torch.empty(rows_a * addr_top_k, n, dtype=torch.bfloat16, device="cuda")
            out_new = torch.empty_like(out_old)
            tiles = w.tensors["tiles"]

            balanced = cfg.schedule == "balanced"
            old_args = (tiles, a, out_old, *args, tw, counters if cfg.dynamic else None,
                        partials if balanced else None, flags if balanced else None, i32(n), i32(k),
                        i32(experts), i32(rows_a * addr_top_k), i32(addr_top_k), i32(plan.capacity),
                        i32(plan.list_cap))

            def run_old(old=old, old_args=old_args, plan=plan) -> None:
                old.launch((plan.grid,), (plan.threads,), old_args, smem=plan.smem)

            def run_new(out_new=out_new, w=w, a=a, args=args, tw=tw, block_m=block_m, addr_top_k=addr_top_k) -> None:
                indexed.gemm(a, w, *args, block_m=block_m, top_k=addr_top_k, topk_weights=tw, out=out_new)

            run_old()
            run_new()
            torch.cuda.synchronize()
            same = torch.equal(out_old, out_new)
            timers = interleaved({"old": run_old, "new": run_new})
            row = {"scenario": name, "gemm": proj, "config": str(cfg), "bit_identical": same,
                   "old_us": round(timers["old"].median_us(), 1), "new_us": round(timers["new"].median_us(), 1)}
            row["new_over_old"] = round(row["new_us"] / row["old_us"], 3)
            print(f"{name:14} {proj:7} old {row['old_us']:8.1f} us  new {row['new_us']:8.1f} us  "
                  f"ratio {row['new_over_old']:.3f}  bit-identical {same}", flush=True)
            rows.append(row)
            del w, tiles
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("bundle")
    b.add_argument("--commit", default="346da84")
    sub.add_parser("sanitize-target")
    for name in ("time", "all"):
        p = sub.add_parser(name)
        p.add_argument("--bundle", type=Path, default=HERE / "old_decode_346da84.cuh")
        p.add_argument("--scenarios", default="ep8_decode,tp8_decode160,ep8_tok16,tp8_1024")
        p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    opts = parser.parse_args()
    if opts.command == "bundle":
        bundle(opts.commit)
        return 0
    if opts.command == "sanitize-target":
        sanitize_target()
        return 0
    report: dict = {}
    if opts.command == "all":
        report["suite"] = run_suite()
        report["memcheck"] = run_memcheck()
    report["timing"] = time_old_vs_new(opts.bundle, opts.scenarios.split(","))
    opts.out.mkdir(parents=True, exist_ok=True)
    (opts.out / "refactor_check.json").write_text(json.dumps(report, indent=1))
    ok = all(r["bit_identical"] for r in report["timing"]) and report.get("suite", {}).get("exit", 0) == 0 \
        and report.get("memcheck", {}).get("exit", 0) == 0
    print("REFACTOR CHECK", "OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
