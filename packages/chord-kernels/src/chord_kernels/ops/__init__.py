"""Operations around the GEMMs: GPU dequantization, SiLU-and-mul and the top-k sum."""

from chord_kernels.ops.activation import silu_and_mul
from chord_kernels.ops.dequant import dequantize_gpu
from chord_kernels.ops.topk import local_topk_sum, topk_sum

__all__ = ["dequantize_gpu", "local_topk_sum", "silu_and_mul", "topk_sum"]
