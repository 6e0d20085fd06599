"""Tensor-memory-accelerator descriptors (``CUtensorMap``) of row-major bf16 matrices.

A descriptor is encoded on the host (``cuTensorMapEncodeTiled`` through ``cuda.bindings``; no
device work, so it is safe during CUDA-graph capture) and passed to a kernel as a
``__grid_constant__`` parameter (:data:`chord_kernels.jit.args.TMA_DESCRIPTOR`). It holds only the
address, the shape and the box, so descriptors are memoized on those.
"""

from __future__ import annotations

import ctypes
import functools

import torch

from chord_kernels.errors import ChordInputError
from chord_kernels.jit.args import TMA_DESCRIPTOR_BYTES

SWIZZLE_BYTES = 128
"""The box's rows land 128-byte swizzled (16-byte chunk c of row r at c ^ (r % 8)), the layout of
the K-major wgmma operand tiles (``chord::wgmma::sw128_offset``); a box row is at most 128 bytes."""
MAX_BOX_ROWS = 256


def rows_descriptor(t: torch.Tensor, box_rows: int, box_cols: int = SWIZZLE_BYTES // 2) -> bytes:
    """The descriptor of a contiguous bf16 CUDA matrix ``t`` ``[rows, cols]`` loaded in boxes of
    ``box_rows`` rows x ``box_cols`` columns (128-byte swizzled; out-of-bounds elements read as 0)."""
    if not 1 <= box_rows <= MAX_BOX_ROWS or not 8 <= box_cols <= SWIZZLE_BYTES // 2 or box_cols % 8:
        raise ChordInputError(f"tensor map: expected 1..{MAX_BOX_ROWS} box rows and a box row of 16..128 bytes, "
                              f"got {box_rows} x {box_cols}")
    if t.dtype != torch.bfloat16 or t.dim() != 2 or not t.is_contiguous() or t.device.type != "cuda":
        raise ChordInputError(f"tensor map: expected a contiguous 2-D bf16 CUDA tensor, got {t.dtype} "
                              f"{list(t.shape)} on {t.device}")
    rows, cols = t.shape
    if rows == 0 or cols % 8 or t.data_ptr() % 16:
        raise ChordInputError(f"tensor map: expected rows > 0, columns a multiple of 8 (16-byte rows) and a "
                              f"16-byte aligned address, got {list(t.shape)} at {t.data_ptr():#x}")
    return _encode(t.data_ptr(), rows, cols, box_rows, box_cols)


@functools.lru_cache(maxsize=1024)
def _encode(address: int, rows: int, cols: int, box_rows: int, box_cols: int) -> bytes:
    from chord_kernels.jit.driver import _driver, check

    drv = _driver()
    tensor_map = check(drv.cuTensorMapEncodeTiled(
        drv.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, address,
        [drv.cuuint64_t(cols), drv.cuuint64_t(rows)], [drv.cuuint64_t(cols * 2)],
        [drv.cuuint32_t(box_cols), drv.cuuint32_t(box_rows)], [drv.cuuint32_t(1), drv.cuuint32_t(1)],
        drv.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        drv.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
        drv.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        drv.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
    ), "cuTensorMapEncodeTiled")
    return ctypes.string_at(tensor_map.getPtr(), TMA_DESCRIPTOR_BYTES)
