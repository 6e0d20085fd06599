"""The kernel families Chord ships, one line each, and the commands that walk them.

A family is a package with a ``kernels(arch) -> list[CudaKernel]`` function (every kernel it can
launch for the shapes it serves) and, if it has one, a layout module that registers its packed
layout with :mod:`chord_kernels.packed` on import. Modules are named here, not imported, so that
neither the JIT runtime nor the layout registry depends on the kernels built on them: adding a
family is a folder plus one line below (docs/architecture.md walks through it).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from chord_kernels.errors import ChordInputError
from chord_kernels.jit.kernel import compile_all
from chord_kernels.jit.nvcc import DEFAULT_ARCH


@dataclass(frozen=True)
class Family:
    """A kernel family: its name, the module with its ``kernels(arch)`` hook, and its layout module."""

    name: str
    kernels: str
    layout: str | None = None


FAMILIES: tuple[Family, ...] = (
    Family("indexed", kernels="chord_kernels.indexed", layout="chord_kernels.indexed.layout"),
    Family("grouped", kernels="chord_kernels.grouped", layout="chord_kernels.grouped.layout"),
    Family("dequant", kernels="chord_kernels.ops.dequant"),
    Family("topk", kernels="chord_kernels.ops.topk"),
    Family("activation", kernels="chord_kernels.ops.activation"),
    Family("routing", kernels="chord_kernels.ops.align"),
)

LAYOUT_MODULES: tuple[str, ...] = ("chord_kernels.packed", *(f.layout for f in FAMILIES if f.layout))
"""Modules whose import registers the built-in layouts (the reference layout and each family's)."""


def load_layouts() -> None:
    """Import every built-in layout module (each registers its layout on import)."""
    for module in LAYOUT_MODULES:
        importlib.import_module(module)


def precompile(archs: Sequence[str] = (DEFAULT_ARCH,), families: Sequence[str] | None = None) -> list[Path]:
    """Compile every kernel of the named families (default: all) for ``archs``; returns the cubins."""
    known = {f.name: f for f in FAMILIES}
    unknown = sorted(set(families or ()) - set(known))
    if unknown:
        raise ChordInputError(f"families: unknown {unknown}; registered: {sorted(known)}")
    hooks = [importlib.import_module(f.kernels).kernels for f in FAMILIES if not families or f.name in families]
    return [path for arch in archs for path in compile_all([k for hook in hooks for k in hook(arch)], arch)]
