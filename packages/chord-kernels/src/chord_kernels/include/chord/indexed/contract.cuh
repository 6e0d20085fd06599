// The host-device contract of the indexed kernels: the packed-atom geometry (kAtomN, kAtomK,
// kAtomBytes, kAtomWords, kTileRows, kTileGroups) and the kernel argument struct
// chord::indexed::Args, passed by value as one __grid_constant__ parameter.
//
// Both are defined once, on the host (chord_kernels/indexed/layout.py and args.py), and emitted at
// the top of every generated kernel source, followed by static_asserts that the device struct has
// the byte layout of the host's ctypes struct. This header only refuses sources that skipped that
// prelude.
#pragma once

#ifndef CHORD_INDEXED_CONTRACT
#error "chord::indexed::Args and the atom geometry are generated: start the kernel source with chord_kernels.indexed.args.prelude()"
#endif
