"""A kernel's arguments defined once, on the host, as one list of fields.

:class:`ArgStruct` takes one list of :class:`Field` (name, C++ type, meaning) and generates both
sides of a launch:

* :meth:`ArgStruct.cpp` emits the C++ struct that device code receives (``const Args&``), and
  :meth:`ArgStruct.entry` the ``extern "C"`` kernel whose parameters are the fields, in order,
  which builds that struct and calls the kernel template with it;
* :meth:`ArgStruct.pack` builds the host value, a ``ctypes`` struct of the same fields, which
  :meth:`chord_kernels.jit.CudaKernel.launch` passes field by field.

A field added, removed, reordered or retyped therefore changes both sides at once. The entry
takes the fields as separate parameters rather than the struct as one ``__grid_constant__``
parameter because only separate ``__restrict__`` parameters keep their no-alias guarantee
through inlining: the struct parameter changed the register count of most decode
configurations (docs/architecture.md).

A field of type :data:`TMA_DESCRIPTOR` (a ``CUtensorMap``, :mod:`chord_kernels.jit.tma`) is
passed by value as a ``__grid_constant__`` parameter, and the struct holds its address: the
tensor-memory accelerator reads descriptors from parameter, constant or global memory only, never
from a copy in registers.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from chord_kernels.errors import ChordInputError

_SCALARS: dict[str, tuple[type[ctypes._SimpleCData], int, int]] = {
    "int": (ctypes.c_int32, -(1 << 31), (1 << 31) - 1),
    "int32_t": (ctypes.c_int32, -(1 << 31), (1 << 31) - 1),
    "uint32_t": (ctypes.c_uint32, 0, (1 << 32) - 1),
    "int64_t": (ctypes.c_int64, -(1 << 63), (1 << 63) - 1),
}
TMA_DESCRIPTOR = "chord::TmaDescriptor"
"""C++ type of a tensor-map field: the 128 opaque bytes of a ``CUtensorMap``, 64-byte aligned."""
TMA_DESCRIPTOR_BYTES = 128
_TMA_DESCRIPTOR_CPP = (
    "#ifndef CHORD_TMA_DESCRIPTOR\n#define CHORD_TMA_DESCRIPTOR 1\n"
    "namespace chord {\nstruct alignas(64) TmaDescriptor {  // a CUtensorMap (cuTensorMapEncodeTiled)\n"
    "  unsigned long long opaque[16];\n};\n}  // namespace chord\n#endif"
)
HostDescriptor = ctypes.c_uint64 * (TMA_DESCRIPTOR_BYTES // 8)


@dataclass(frozen=True)
class Field:
    """One argument: its name, its C++ type (a pointer ``T*``, ``int``, ``int32_t``, ``uint32_t``,
    ``int64_t``, ``float`` or :data:`TMA_DESCRIPTOR`), what it holds (emitted as the C++ comment),
    and whether the kernel may assume no other argument aliases it (``__restrict__``, pointers
    only)."""

    name: str
    ctype: str
    doc: str = ""
    restrict: bool = False

    def __post_init__(self) -> None:
        if self.restrict and not self.is_pointer:
            raise ChordInputError(f"field {self.name}: only pointers can be __restrict__, got {self.ctype!r}")
        self.host_type()  # refuse an unsupported type at definition

    @property
    def is_pointer(self) -> bool:
        return self.ctype.endswith("*")

    @property
    def is_descriptor(self) -> bool:
        return self.ctype == TMA_DESCRIPTOR

    def host_type(self) -> type[ctypes._SimpleCData] | type[ctypes.Array]:
        if self.is_descriptor:
            return HostDescriptor
        if self.is_pointer:
            return ctypes.c_void_p
        if self.ctype == "float":
            return ctypes.c_float
        if self.ctype not in _SCALARS:
            raise ChordInputError(f"field {self.name}: unsupported C++ type {self.ctype!r}")
        return _SCALARS[self.ctype][0]

    def parameter(self) -> str:
        if self.is_descriptor:
            return f"const __grid_constant__ {self.ctype} {self.name}"
        return f"{self.ctype} __restrict__ {self.name}" if self.restrict else f"{self.ctype} {self.name}"

    def member(self) -> str:
        """The struct member's declaration (a descriptor's address, the others as they are)."""
        return f"const {self.ctype}* {self.name};" if self.is_descriptor else f"{self.ctype} {self.name};"

    def value(self) -> str:
        """What the entry puts in the struct member: the parameter, or a descriptor's address."""
        return f"&{self.name}" if self.is_descriptor else self.name


class ArgStruct:
    """The argument struct ``namespace::name`` of one or more kernels (see the module docstring)."""

    def __init__(self, name: str, namespace: str, fields: Sequence[Field]) -> None:
        names = [f.name for f in fields]
        if len(set(names)) != len(names):
            raise ChordInputError(f"struct {name}: duplicate field names in {names}")
        self.name = name
        self.namespace = namespace
        self.fields = tuple(fields)
        self._host = type(name, (ctypes.Structure,), {"_fields_": [(f.name, f.host_type()) for f in fields]})
        # The device struct: descriptors travel as parameters of their own and are held by address.
        self._device = type(name, (ctypes.Structure,), {"_fields_": [
            (f.name, ctypes.c_void_p if f.is_descriptor else f.host_type()) for f in fields]})
        self._by_name = {f.name: f for f in fields}

    @property
    def size(self) -> int:
        """Bytes of the struct on the device (checked at compile time): the host's value, with
        each descriptor's address in place of its bytes."""
        return ctypes.sizeof(self._device)

    @property
    def qualified_name(self) -> str:
        return f"{self.namespace}::{self.name}"

    def cpp(self) -> str:
        """The C++ definition, and a check that it has the size of the host struct."""
        width = max(len(f.member()) for f in self.fields)
        members = []
        for f in self.fields:
            decl = f.member()
            members.append(f"  {decl:<{width}}  // {f.doc}" if f.doc else f"  {decl}")
        types = [_TMA_DESCRIPTOR_CPP] if any(f.is_descriptor for f in self.fields) else []
        return "\n".join([
            *types, f"namespace {self.namespace} {{", f"struct {self.name} {{", *members, "};",
            f"}}  // namespace {self.namespace}",
            f'static_assert(sizeof({self.qualified_name}) == {self.size}, "host and device argument structs differ");',
        ])

    def entry(self, name: str, launch_bounds: str, call: str, attributes: str = "") -> str:
        """An ``extern "C"`` kernel ``name`` taking the fields as parameters; it runs ``call``
        (C++ that uses ``args``, e.g. ``chord::indexed::decode_kernel<Cfg>(args);``). ``attributes``:
        more kernel attributes, e.g. ``__cluster_dims__(2, 1, 1)``."""
        params = ",\n    ".join(f.parameter() for f in self.fields)
        values = ", ".join(f.value() for f in self.fields)
        attrs = f" {attributes}" if attributes else ""
        return (f'extern "C" __global__ void __launch_bounds__({launch_bounds}){attrs} {name}(\n    {params}) {{\n'
                f"  const {self.qualified_name} args{{{values}}};\n  {call}\n}}\n")

    def pack(self, device: torch.device, **values: torch.Tensor | int | float | None) -> ctypes.Structure:
        """The host value. Every field must be given: a pointer as a tensor on ``device`` (or None
        for null, or an ``int`` device address the caller vouches for, e.g. into a workspace it
        checked), a number within its C type's range, a descriptor as its 128 bytes (None: zeros,
        for a kernel that does not read it)."""
        if values.keys() != self._by_name.keys():
            missing = [f.name for f in self.fields if f.name not in values]
            raise ChordInputError(f"{self.name}: missing fields {missing}, unknown fields "
                                  f"{sorted(set(values) - set(self._by_name))}")
        return self._host(*[self._host_value(f, values[f.name], device) for f in self.fields])

    def _host_value(self, field: Field, value: object, device: torch.device) -> int | float | ctypes.Array:
        if field.is_descriptor:
            if value is None:
                return HostDescriptor()
            if isinstance(value, bytes) and len(value) == TMA_DESCRIPTOR_BYTES:
                return HostDescriptor.from_buffer_copy(value)
            raise ChordInputError(f"{self.name}.{field.name}: expected the {TMA_DESCRIPTOR_BYTES} bytes of a tensor "
                                  f"map (chord_kernels.jit.tma) or None, got {type(value).__name__}")
        if field.is_pointer:
            if value is None:
                return 0
            if isinstance(value, torch.Tensor):
                if value.device != device:
                    raise ChordInputError(f"{self.name}.{field.name}: expected a tensor on {device}, "
                                          f"got one on {value.device}")
                return value.data_ptr()
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                return value
            raise ChordInputError(f"{self.name}.{field.name}: expected a tensor, an address or None, "
                                  f"got {type(value).__name__}")
        if field.ctype == "float":
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ChordInputError(f"{self.name}.{field.name}: expected a number, got {value!r}")
            return float(value)
        _, low, high = _SCALARS[field.ctype]
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ChordInputError(
                f"{self.name}.{field.name}: expected an integer in [{low}, {high}] ({field.ctype}), got {value!r}"
            )
        return value
