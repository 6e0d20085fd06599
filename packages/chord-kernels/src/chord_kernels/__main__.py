"""``chord-kernels`` / ``python -m chord_kernels``: warm the JIT cache and describe the setup."""

from __future__ import annotations

import argparse
import sys

from chord_kernels.errors import ChordError
from chord_kernels.version import __version__


def _info() -> int:
    import torch

    from chord_kernels.jit import cache, nvcc
    from chord_kernels.packed import available_layouts

    print(f"chord-kernels {__version__}, torch {torch.__version__}")
    try:
        compiler = nvcc.find_nvcc()
        print(f"nvcc: {compiler} ({nvcc.nvcc_version(compiler)})")
    except ChordError as exc:
        print(f"nvcc: not found ({exc}); kernels run only from the cache")
    try:
        root = cache.cache_dir()
        print(f"JIT cache: {root} ({sum(1 for _ in root.glob('*.cubin'))} cubins)")
    except ChordError as exc:
        print(f"JIT cache: unusable ({exc})")
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            cap = torch.cuda.get_device_capability(i)
            print(f"GPU {i}: {torch.cuda.get_device_name(i)} (compute capability {cap[0]}.{cap[1]})")
    else:
        print("GPU: none visible (reference paths only)")
    print(f"layouts: {', '.join(sorted(available_layouts()))}")
    return 0


def _precompile(archs: list[str], families: list[str] | None) -> int:
    from chord_kernels.families import precompile

    print(f"compiling {', '.join(families) if families else 'every family'}'s kernels for {', '.join(archs)} "
          "(several nvcc at a time; minutes on a fresh cache, cached kernels are instant)", flush=True)
    paths = precompile(archs, families)
    cubins = len(set(paths))  # kernels whose configurations generate the same source share one
    print(f"{cubins} cubins ready for {', '.join(archs)} ({len(paths)} kernels)")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``chord-kernels`` command."""
    from chord_kernels.jit.nvcc import DEFAULT_ARCH, SUPPORTED_ARCHS

    parser = argparse.ArgumentParser(prog="chord-kernels", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="versions, nvcc, JIT cache, GPUs, layouts")
    pre = sub.add_parser("precompile", help="compile every kernel config into the JIT cache")
    pre.add_argument("--arch", action="append", choices=SUPPORTED_ARCHS,
                     help=f"target architecture (repeatable; default {DEFAULT_ARCH})")
    pre.add_argument("--family", action="append", help="only these kernel families (repeatable; see chord_kernels.families)")
    args = parser.parse_args(argv)
    try:
        if args.command == "info":
            return _info()
        return _precompile(args.arch or [DEFAULT_ARCH], args.family)
    except ChordError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
