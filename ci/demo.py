"""Chord's main job on an embedded default: `nox -s demo`.

Builds a tiny checkpoint in the exact Kimi K2-Thinking INT4 format, converts it with chord-pack
to the kernel layout, verifies the conversion, and checks that the reference MoE layer gives
bit-identical output from the source and the converted weights. On a CUDA GPU it then runs the
GPU paths (exact dequant kernel, indexed MoE kernel) against the reference. Finally it says what
was shown, where the checkpoints are, and what to run next. The checkpoints go to a temporary
directory that is deleted at the end, unless --workdir names one to keep them in.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import torch
from rich.console import Console
from rich.markup import escape
from rich.table import Table


def _gpu_checks(converted: Path, moe_layers: list[int]) -> list[tuple[str, str, bool]]:
    from chord_kernels.formats import dequantize, random_quantized
    from chord_kernels.ops import dequantize_gpu
    from chord_kernels.reference import moe_layer
    from chord_pack.load import read_packed

    rows = []
    packed, scales = random_quantized(4096, 7168, device="cuda")
    exact = torch.equal(dequantize_gpu(packed, scales).cpu(), dequantize(packed.cpu(), scales.cpu()))
    rows.append(("GPU dequant 4096×7168", "bit-exact" if exact else "MISMATCH", exact))
    try:
        from chord_kernels.indexed import fused_moe
    except ImportError as exc:
        rows.append(("GPU indexed MoE", f"not available ({exc})", True))
        return rows
    w13 = read_packed(converted, moe_layers[0], "w13")
    w2 = read_packed(converted, moe_layers[0], "w2")
    g = torch.Generator().manual_seed(7)
    hidden = (torch.randn(5, w13.k, generator=g) * 0.5).bfloat16()
    topk_ids = torch.stack([torch.randperm(w13.num_experts, generator=g)[:2] for _ in range(5)]).int()
    topk_weights = torch.rand(5, 2, generator=g).softmax(-1)
    want = moe_layer(hidden, w13, w2, topk_weights, topk_ids)
    got = fused_moe(hidden.cuda(), w13.to("cuda"), w2.to("cuda"), topk_weights.cuda(), topk_ids.cuda()).cpu()
    rel = float((got.float() - want.float()).norm() / want.float().norm())
    rows.append(("GPU indexed MoE vs reference", f"rel. error {rel:.1e}", rel <= 5e-3))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workdir", type=Path,
                        help="new or empty directory to keep the checkpoints in (default: a temporary "
                             "directory, deleted at the end)")
    parser.add_argument("--style", choices=["k2-thinking", "k2.5"], default="k2-thinking")
    args = parser.parse_args()

    from chord_pack.demo import explain, run_demo

    console = Console(soft_wrap=True)  # paths are printed whole, whatever the terminal width
    with tempfile.TemporaryDirectory(prefix="chord-demo-") as tmp:
        workdir = args.workdir or Path(tmp) / "demo"
        console.print(f"[bold]Chord demo[/]: tiny {args.style} INT4 MoE checkpoint in {escape(str(workdir))}")
        summary = run_demo(workdir, style=args.style)
        table = Table(title="Chord — main job on the embedded tiny Kimi checkpoint")
        table.add_column("step")
        table.add_column("result")
        table.add_column("ok", justify="center")
        rows = [
            ("detect", f"{summary['family']}, int4 group-32 symmetric", True),
            ("convert", f"layout {summary['layout']} / {summary['profile']}, {summary['shards']} shards, "
                        f"{summary['bytes']:,} bytes", True),
            ("verify", f"{summary['verified_experts']} expert projections unpack to the exact source codes and scales", True),
            ("reference MoE", "source vs converted weights: "
                              + ("bit-identical" if summary["moe_output_equal"] else "DIFFERENT"),
             bool(summary["moe_output_equal"])),
        ]
        if torch.cuda.is_available():
            rows += _gpu_checks(Path(summary["output"]), summary["moe_layers"])
        else:
            rows.append(("GPU paths", "skipped: no CUDA GPU visible", True))
        for step, result, ok in rows:
            table.add_row(step, result, "[green]✓[/]" if ok else "[red]✗[/]")
        console.print(table)
        ok = all(r[2] for r in rows)
        console.print("[bold green]demo passed[/]" if ok else "[bold red]demo FAILED[/]")
        keep = "to keep them, run `nox -s demo -- --workdir DIR` (or `python ci/demo.py --workdir DIR`)"
        for line in explain(summary, kept=args.workdir is not None, keep_hint=keep):
            console.print(line, markup=False, highlight=False)
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
