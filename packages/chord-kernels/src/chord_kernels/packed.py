"""Packed weights are objects, not bare tensors.

A :class:`PackedWeight` records which kernel family and mode its tensors were permuted for, the
hardware profile, the layout version and the logical shape, so that dispatch can refuse a
mismatch loudly (a prefill-packed weight handed to a decode kernel is an error, never a wrong
answer). Layouts register themselves in a small registry; every layout has an exact inverse.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import torch

from chord_kernels.errors import ChordInputError, ChordLayoutError, ChordUnsupportedError
from chord_kernels.formats import GROUP_SIZE, check_quantized
from chord_kernels.version import __version__

METADATA_PREFIX = "chord."


@dataclass
class PackedWeight:
    """Kernel-ready weights of ``num_experts`` experts of one projection (logical ``[E, N, K]``)."""

    layout: str
    """Registry name of the layout that produced it (for example ``"indexed"``)."""
    family: str
    """Kernel family: ``"reference"``, ``"indexed"`` or ``"grouped"``."""
    mode: str
    """``"reference"``, ``"indexed"``, ``"contiguous"`` or ``"masked"``."""
    profile: str
    """Hardware/parallelism profile, e.g. ``"h200_ep8"``."""
    layout_version: int
    num_experts: int
    n: int
    k: int
    group_size: int
    tensors: dict[str, torch.Tensor]
    options: dict[str, int | str | bool] = field(default_factory=dict)
    """Layout parameters that change the bytes (tile sizes, gate/up interleave...)."""
    small_scales: bool = False
    """Every scale's magnitude is below 2^-5, so the kernels may dequantize with one fma per pair of
    weights (the same bits: docs/formats.md, "Numerics"); False where unknown."""

    @property
    def device(self) -> torch.device:
        if not self.tensors:
            raise ChordInputError(f"{self.describe()} holds no tensors, so it has no device")
        return next(iter(self.tensors.values())).device

    def to(self, device: torch.device | str) -> PackedWeight:
        """A copy whose tensors live on ``device``."""
        moved = {name: t.to(device) for name, t in self.tensors.items()}
        return PackedWeight(**{**self.__dict__, "tensors": moved})

    def describe(self) -> str:
        opts = ", ".join(f"{k}={v}" for k, v in sorted(self.options.items()))
        return (
            f"PackedWeight(layout={self.layout} v{self.layout_version}, family={self.family}, "
            f"mode={self.mode}, profile={self.profile}, E={self.num_experts}, N={self.n}, "
            f"K={self.k}, group={self.group_size}{', ' + opts if opts else ''}"
            f"{', scales < 2^-5' if self.small_scales else ''})"
        )

    def require(
        self,
        *,
        family: str | None = None,
        mode: str | Iterable[str] | None = None,
        profile: str | Iterable[str] | None = None,
        layout_version: int | None = None,
        what: str = "this kernel",
    ) -> PackedWeight:
        """Raise :class:`ChordLayoutError` unless the weight was packed for ``what``."""
        checks = [("family", self.family, family), ("mode", self.mode, mode),
                  ("profile", self.profile, profile), ("layout_version", self.layout_version, layout_version)]
        for attr, have, want in checks:
            if want is None:
                continue
            allowed = (want,) if isinstance(want, str | int) else tuple(want)
            if have not in allowed:
                raise ChordLayoutError(
                    f"{what} needs a weight packed with {attr} in {list(allowed)}, got "
                    f"{self.describe()}; repack it with chord_kernels.packed.pack(...) for that "
                    f"{attr}"
                )
        return self

    def metadata(self) -> dict[str, str]:
        """String metadata describing the packing (for safetensors headers and config.json): the
        layout's parameters, not what the values are (``small_scales`` is read from the tensors
        again by :meth:`from_state_dict`)."""
        fields = {
            "layout": self.layout, "family": self.family, "mode": self.mode, "profile": self.profile,
            "layout_version": str(self.layout_version), "num_experts": str(self.num_experts),
            "n": str(self.n), "k": str(self.k), "group_size": str(self.group_size),
            "options": json.dumps(self.options, sort_keys=True),
        }
        return {METADATA_PREFIX + k: v for k, v in fields.items()}

    def state_dict(self, prefix: str = "") -> dict[str, torch.Tensor]:
        """Named tensors, ready for ``safetensors.torch.save_file``."""
        return {prefix + name: t for name, t in self.tensors.items()}

    @classmethod
    def from_state_dict(
        cls, metadata: dict[str, str], tensors: dict[str, torch.Tensor], prefix: str = ""
    ) -> PackedWeight:
        """Rebuild from :meth:`metadata` and :meth:`state_dict` output (reading the scales for
        ``small_scales`` where the layout is registered)."""
        try:
            m = {k[len(METADATA_PREFIX):]: v for k, v in metadata.items() if k.startswith(METADATA_PREFIX)}
            own = {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}
            # A layout whose kernels use PackedWeight.small_scales reads it from its tensors.
            reader = getattr(_LAYOUTS.get(m["layout"]), "small_scales", None)
            return cls(
                layout=m["layout"], family=m["family"], mode=m["mode"], profile=m["profile"],
                layout_version=int(m["layout_version"]), num_experts=int(m["num_experts"]),
                n=int(m["n"]), k=int(m["k"]), group_size=int(m["group_size"]), tensors=own,
                options=json.loads(m.get("options", "{}")),
                small_scales=bool(reader(own)) if reader is not None else False,
            )
        except KeyError as missing:
            raise ChordInputError(
                f"packed-weight metadata lacks {METADATA_PREFIX}{missing.args[0]}; got keys {sorted(metadata)}"
            ) from None
        except ValueError as bad:  # an int field that is not a number, options that are not JSON
            raise ChordInputError(f"packed-weight metadata: expected integer fields and JSON options, got "
                                  f"{ {k: v for k, v in metadata.items() if k.startswith(METADATA_PREFIX)} } ({bad})"
                                  ) from None


@runtime_checkable
class Layout(Protocol):
    """A reversible weight permutation for one kernel family/mode."""

    name: str
    family: str
    mode: str
    version: int
    profiles: tuple[str, ...]

    def pack(self, packed: torch.Tensor, scales: torch.Tensor, profile: str, **options) -> PackedWeight:
        """compressed-tensors (packed int32 ``[E, N, K/8]``, scales bf16 ``[E, N, K/32]``) -> kernel layout."""
        ...

    def unpack(self, weight: PackedWeight) -> tuple[torch.Tensor, torch.Tensor]:
        """Exact inverse of :meth:`pack`."""
        ...


_LAYOUTS: dict[str, Layout] = {}


def register_layout(layout: Layout) -> Layout:
    """Add a layout to the registry (idempotent for the same object)."""
    existing = _LAYOUTS.get(layout.name)
    if existing is not None and existing is not layout:
        raise ChordInputError(f"a layout named {layout.name!r} is already registered")
    _LAYOUTS[layout.name] = layout
    return layout


def available_layouts() -> dict[str, Layout]:
    """Registered layouts by name."""
    from chord_kernels.families import load_layouts

    load_layouts()
    return dict(_LAYOUTS)


def get_layout(name: str) -> Layout:
    """The layout registered under ``name``; a clear error names what this version supports."""
    layouts = available_layouts()
    if name not in layouts:
        raise ChordUnsupportedError(
            f"layout {name!r} is not yet supported by chord-kernels {__version__}; "
            f"available: {sorted(layouts)}"
        )
    return layouts[name]


def as_stacked(packed: torch.Tensor, scales: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Accept one expert ``[N, K/8]`` or a stack ``[E, N, K/8]``; always return the stacked form."""
    check_quantized(packed, scales)
    if packed.dim() == 2:
        return packed.unsqueeze(0), scales.unsqueeze(0)
    return packed, scales


def pack(layout: str, packed: torch.Tensor, scales: torch.Tensor, profile: str, **options) -> PackedWeight:
    """Pack compressed-tensors weights into the named layout."""
    target = get_layout(layout)
    if profile not in target.profiles:
        raise ChordUnsupportedError(
            f"layout {layout!r} has no profile {profile!r}; choose one of {list(target.profiles)}"
        )
    return target.pack(*as_stacked(packed, scales), profile, **options)


def unpack(weight: PackedWeight) -> tuple[torch.Tensor, torch.Tensor]:
    """Back to compressed-tensors form (packed int32 ``[E, N, K/8]``, scales bf16 ``[E, N, K/32]``)."""
    if not isinstance(weight, PackedWeight):
        raise ChordLayoutError(f"weight: expected a PackedWeight from chord_kernels.pack(...), got {type(weight).__name__}")
    return get_layout(weight.layout).unpack(weight)


class ReferenceLayout:
    """Identity layout: the compressed-tensors tensors, stacked. Read by the reference path."""

    name = "reference"
    family = "reference"
    mode = "reference"
    version = 1
    profiles = ("any",)

    def pack(self, packed: torch.Tensor, scales: torch.Tensor, profile: str = "any", **options) -> PackedWeight:
        if options:
            raise ChordInputError(f"the reference layout takes no options, got {sorted(options)}")
        e, n, _ = packed.shape
        return PackedWeight(
            layout=self.name, family=self.family, mode=self.mode, profile=profile,
            layout_version=self.version, num_experts=e, n=n, k=packed.shape[-1] * 8,
            group_size=GROUP_SIZE,
            tensors={"weight_packed": packed.contiguous(), "weight_scale": scales.contiguous()},
        )

    def unpack(self, weight: PackedWeight) -> tuple[torch.Tensor, torch.Tensor]:
        weight.require(family=self.family, what="the reference layout's unpack")
        packed, scales = weight.tensors.get("weight_packed"), weight.tensors.get("weight_scale")
        e, n, k = weight.num_experts, weight.n, weight.k
        want = {"weight_packed": (torch.int32, (e, n, k // 8)), "weight_scale": (torch.bfloat16, (e, n, k // GROUP_SIZE))}
        for name, t in (("weight_packed", packed), ("weight_scale", scales)):
            if t is None or (t.dtype, tuple(t.shape)) != want[name] or k % GROUP_SIZE:
                got = None if t is None else (t.dtype, list(t.shape))
                raise ChordInputError(f"{self.name} weight (E={e}, N={n}, K={k}): expected tensor {name!r} "
                                      f"{want[name][0]} {list(want[name][1])}, got {got}")
        return packed, scales


register_layout(ReferenceLayout())
