"""Argument checks name the argument, what was expected and what was found."""

from __future__ import annotations

import pytest
import torch

from chord_kernels import ChordInputError
from chord_kernels.checks import require_multiple, require_same_device, require_tensor


def test_each_constraint_has_its_own_message() -> None:
    t = torch.zeros(4, 6, dtype=torch.bfloat16)
    assert require_tensor("a", t, dtype=torch.bfloat16, ndim=2, shape=(4, None), device="cpu", contiguous=True) is t
    cases = [
        (dict(dtype=torch.int32), r"a: expected dtype torch.int32, got torch.bfloat16"),
        (dict(ndim=3), r"a: expected 3 dimensions, got shape \(4, 6\)"),
        (dict(shape=(4, 8)), r"a: expected shape \[4, 8\], got \[4, 6\]"),
        (dict(shape=(None, 6, 1)), r"a: expected shape \[\*, 6, 1\], got \[4, 6\]"),
        (dict(device="cuda"), r"a: expected a tensor on cuda, got one on cpu"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ChordInputError, match=message):
            require_tensor("a", t, **kwargs)
    with pytest.raises(ChordInputError, match=r"a: expected a contiguous tensor.*\.contiguous\(\)"):
        require_tensor("a", t.t(), contiguous=True)
    with pytest.raises(ChordInputError, match="expected a torch.Tensor, got list"):
        require_tensor("a", [1, 2])


def test_same_device_and_multiples() -> None:
    a = torch.zeros(1)
    assert require_same_device(a=a, b=torch.ones(2)) == torch.device("cpu")
    with pytest.raises(ChordInputError, match="K: expected a positive multiple of 32 \\(group size\\), got 48"):
        require_multiple("K", 48, 32, "group size")
    with pytest.raises(ChordInputError, match="got 0"):
        require_multiple("K", 0, 32)


def test_a_host_without_a_gpu_gets_a_typed_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from chord_kernels import ChordUnsupportedError, formats, hardware, indexed, pack

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    w13 = pack("indexed", *formats.random_quantized(4, 128, 64)[:2], profile="h200_ep8")
    w2 = pack("indexed", *formats.random_quantized(4, 64, 64)[:2], profile="h200_ep8")
    calls = [
        lambda: hardware.cuda_device(),
        lambda: indexed.new_workspace(1024, "cuda"),
        lambda: indexed.prepare(w13, 16),
        lambda: indexed.prepare_layer(w13, w2),
        lambda: indexed.max_workspace_bytes([w13, w2]),
    ]
    for call in calls:
        with pytest.raises(ChordUnsupportedError, match=r"no CUDA GPU .*H100/H200"):
            call()
