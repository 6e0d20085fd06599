"""Importing this module registers every built-in layout with :mod:`chord_kernels.packed`.

Each kernel family's layout module calls :func:`chord_kernels.packed.register_layout` at import;
list it here so that ``available_layouts()`` sees it without importing kernels.
"""

from __future__ import annotations

import importlib

BUILTIN_LAYOUT_MODULES: tuple[str, ...] = (
    "chord_kernels.packed",
    # Family layout modules are appended here as the kernels land, e.g. "chord_kernels.indexed.layout".
    "chord_kernels.indexed.layout",
)

for _module in BUILTIN_LAYOUT_MODULES:
    importlib.import_module(_module)
