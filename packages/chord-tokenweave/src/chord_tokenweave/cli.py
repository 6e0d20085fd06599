"""``chord-tokenweave``: split math, the offline profiler, and the benchmarks.

    chord-tokenweave split --model llama-3.3-70b --world-size 2 --tokens 1024,8192
    chord-tokenweave profile --model llama-3.3-70b --world-size 2 --tokens 1024,2048,4096,8192 \\
        --output tables/llama-tp2-h200.json
    chord-tokenweave bench kernel --world-size 2 --out results/
    chord-tokenweave bench layer --model llama-3.3-70b --world-size 2 --out results/

Multi-GPU commands start one process per GPU themselves (NCCL), with the no-multicast
environment forced in every process and a wall-clock timeout.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from chord_tokenweave.env import disable_multicast


def _ints(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from exc
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def _positive(kind: type[int] | type[float]) -> Callable[[str], Any]:
    """An argparse type: a finite ``kind`` above zero."""
    what = "a positive integer" if kind is int else "a positive number"

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if not 0 < value < float("inf"):
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return value

    return parse


_positive_int, _positive_float = _positive(int), _positive(float)


def _parser() -> argparse.ArgumentParser:
    from chord_tokenweave.model import MODELS

    p = argparse.ArgumentParser(prog="chord-tokenweave", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("split", help="print the wave-aware split for token counts (no GPU)")
    s.add_argument("--model", choices=sorted(MODELS), default="llama-3.3-70b")
    s.add_argument("--world-size", type=_positive_int, default=2)
    s.add_argument("--tokens", type=_ints, default=[1024, 2048, 4096, 8192])
    s.add_argument("--num-sms", type=_positive_int, default=132)

    pr = sub.add_parser("profile", help="measure splits/CTA counts and write the JSON table")
    pr.add_argument("--model", choices=sorted(MODELS), default="llama-3.3-70b")
    pr.add_argument("--world-size", type=_positive_int, default=2)
    pr.add_argument("--tokens", type=_ints, default=[512, 1024, 2048, 4096, 8192, 16384])
    pr.add_argument("--layers", type=_positive_int, default=2, help="layers to time (weights are random)")
    pr.add_argument("--output", type=Path, required=True)
    pr.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    pr.add_argument("--scale", choices=["full", "tiny"], default="full",
                    help="tiny: small look-alike shapes (CPU smoke runs)")
    pr.add_argument("--timeout", type=_positive_float, default=900.0)

    b = sub.add_parser("bench", help="kernel-level or layer-level benchmarks on N GPUs")
    b.add_argument("what", choices=["kernel", "layer"])
    b.add_argument("--world-size", type=_positive_int, default=2)
    b.add_argument("--model", choices=sorted(MODELS), default="llama-3.3-70b")
    b.add_argument("--tokens", type=_ints, default=None)
    b.add_argument("--hidden", type=_positive_int, default=8192)
    b.add_argument("--ctas", type=_ints, default=None)
    b.add_argument("--layers", type=_positive_int, default=2)
    b.add_argument("--table", type=Path, default=None, help="profiler table for the layer bench")
    b.add_argument("--out", type=Path, default=Path("bench-results"))
    b.add_argument("--timeout", type=_positive_float, default=900.0)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    disable_multicast()
    parser = _parser()
    args = parser.parse_args(argv)
    from chord_tokenweave.errors import TableError, TokenWeaveInputError
    from chord_tokenweave.model import MODELS, TINY_DENSE, TINY_MOE

    try:
        # Arguments that cannot work are refused before any process starts.
        if not (args.command == "bench" and args.what == "kernel"):
            cfg = MODELS[args.model]
            if getattr(args, "scale", "full") == "tiny":
                cfg = TINY_MOE if cfg.is_moe else TINY_DENSE
            cfg.check_world_size(args.world_size)
        if getattr(args, "table", None) is not None:
            from chord_tokenweave.table import SplitTable

            SplitTable.load(args.table, world_size=args.world_size)
    except (TokenWeaveInputError, TableError) as exc:
        parser.error(str(exc))
    if args.command != "split" and getattr(args, "device", "cuda") == "cuda":
        found = _visible_gpus()
        if found < args.world_size:
            hint = "; `profile --device cpu --scale tiny` runs on CPUs" if args.command == "profile" else ""
            parser.error(f"--world-size {args.world_size} needs {args.world_size} CUDA GPUs, found {found}{hint}")
    if args.command == "split":
        return _split(args)
    if args.command == "profile":
        return _profile(args)
    return _bench(args)


def _visible_gpus() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _split(args: argparse.Namespace) -> int:
    from chord_tokenweave.model import MODELS
    from chord_tokenweave.split import layer_waves, wave_aware_split, wave_penalty

    cfg = MODELS[args.model]
    gemms = cfg.gemm_shapes(args.world_size)
    print(f"{'tokens':>8} {'split':>7} {'waves(T)':>9} {'waves(A)+waves(B)':>18} {'penalty':>8}")
    for t in args.tokens:
        s = wave_aware_split(t, gemms, num_sms=args.num_sms)
        if s is None:
            print(f"{t:>8} {'-':>7} {layer_waves(t, gemms, args.num_sms):>9}")
            continue
        both = layer_waves(s, gemms, args.num_sms) + layer_waves(t - s, gemms, args.num_sms)
        print(f"{t:>8} {s:>7} {layer_waves(t, gemms, args.num_sms):>9} {both:>18} "
              f"{wave_penalty(t, s, gemms, args.num_sms):>8}")
    return 0


def _profile(args: argparse.Namespace) -> int:
    from chord_tokenweave.bench import profile_worker
    from chord_tokenweave.distributed import launch

    backend = "nccl" if args.device == "cuda" else "gloo"
    results = launch(
        profile_worker, args.world_size, args.model, args.tokens, args.layers,
        str(args.output), args.device, args.scale, backend=backend, timeout_s=args.timeout,
    )
    for line in results[0]["log"]:
        print(line)
    print(f"threshold: {results[0]['table']['threshold']}; wrote {args.output}")
    return 0


def _bench(args: argparse.Namespace) -> int:
    from chord_tokenweave.bench import DEFAULT_CTAS, DEFAULT_TOKENS, kernel_worker, layer_worker
    from chord_tokenweave.distributed import launch

    args.out.mkdir(parents=True, exist_ok=True)
    result: Any
    if args.what == "kernel":
        tokens = args.tokens or list(DEFAULT_TOKENS)
        result = launch(kernel_worker, args.world_size, args.hidden, tokens,
                        args.ctas or list(DEFAULT_CTAS), backend="nccl",
                        timeout_s=args.timeout)[0]
        path = args.out / f"kernel_tp{args.world_size}.json"
    else:
        tokens = args.tokens or [1024, 2048, 4096, 8192]
        result = launch(layer_worker, args.world_size, args.model, tokens, args.layers, 16,
                        str(args.table) if args.table else None, backend="nccl",
                        timeout_s=args.timeout)[0]
        path = args.out / f"layer_{args.model}_tp{args.world_size}.json"
    path.write_text(json.dumps(result, indent=1, default=str))
    print(json.dumps(result.get("rows", result), indent=1, default=str)[:20000])
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
