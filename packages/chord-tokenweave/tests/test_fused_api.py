"""Argument checking and single-rank semantics of the fused op (gloo, world size 1)."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import pytest
import torch
import torch.distributed as dist

from chord_tokenweave.distributed import free_port
from chord_tokenweave.env import NO_MULTICAST_ENV, disable_multicast, multicast_env_ok
from chord_tokenweave.errors import TokenWeaveError, TokenWeaveInputError
from chord_tokenweave.fused import allreduce_add_rmsnorm, fused_allreduce_rmsnorm
from chord_tokenweave.numerics import add_rmsnorm_reference, shard_range


@pytest.fixture(scope="module")
def world1() -> Iterator[None]:
    if dist.is_initialized():
        yield
        return
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0,
                            world_size=1)
    yield
    dist.destroy_process_group()


def _inputs(t: int = 5, d: int = 16) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(t * 31 + d)
    x = torch.randn(t, d, generator=g).to(torch.bfloat16)
    r = torch.randn(t, d, generator=g).to(torch.bfloat16)
    w = (1 + 0.1 * torch.randn(d, generator=g)).to(torch.bfloat16)
    return x, r, w


def test_needs_an_initialised_group() -> None:
    if dist.is_initialized():
        pytest.skip("a process group is already initialised in this process")
    x, r, w = _inputs()
    with pytest.raises(TokenWeaveError, match="not initialised"):
        fused_allreduce_rmsnorm(x, r, w, 1e-5)


def test_shard_ranges_cover_every_row_once() -> None:
    for tokens in (0, 1, 2, 7, 8, 33):
        for world in (1, 2, 3, 4, 8):
            ranges = [shard_range(tokens, world, r) for r in range(world)]
            assert ranges[0][0] == 0 and ranges[-1][1] == tokens
            assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))
            sizes = [e - s for s, e in ranges]
            assert max(sizes) - min(sizes) <= 1
    with pytest.raises(TokenWeaveInputError):
        shard_range(4, 2, 2)


def test_single_rank_is_add_rmsnorm(world1: None) -> None:
    x, r, w = _inputs()
    y_ref, h_ref = add_rmsnorm_reference(x.float(), r, w, 1e-6)
    res = r.clone()
    y, h = fused_allreduce_rmsnorm(x, res, w, 1e-6)
    assert torch.equal(y, y_ref) and torch.equal(h, h_ref) and h.data_ptr() == res.data_ptr()
    y2, h2 = allreduce_add_rmsnorm(x.clone(), r.clone(), w, 1e-6)
    assert torch.equal(y2, y_ref) and torch.equal(h2, h_ref)
    out = torch.empty_like(x)
    y3, _ = fused_allreduce_rmsnorm(x, r.clone(), w, 1e-6, residual_mode="replicated",
                                    algo="one_shot", out=out)
    assert y3 is out and torch.equal(out, y_ref)


def test_rmsnorm_reference_is_the_formula() -> None:
    x, r, w = _inputs(3, 8)
    y, h = add_rmsnorm_reference(x.float(), r, w, 1e-5)
    hd = (x.double() + r.double()).to(torch.bfloat16).double()
    want = hd / torch.sqrt(hd.pow(2).mean(-1, keepdim=True) + 1e-5) * w.double()
    torch.testing.assert_close(y.double(), want, atol=0.02, rtol=0.01)
    assert torch.equal(h, (x.float() + r.float()).to(torch.bfloat16))


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda x, r, w: (x[0], r, w), "2-D"),
        (lambda x, r, w: (x.int(), r, w), "dtype"),
        (lambda x, r, w: (x, r, w[:-1]), "weight must be"),
        (lambda x, r, w: (x, r[:-1], w), "residual"),
        (lambda x, r, w: (x, r.float(), w), "residual"),
        (lambda x, r, w: (x, r.t().contiguous().t(), w), "contiguous"),
    ],
)
def test_bad_inputs_name_what_was_expected(world1: None, change, match: str) -> None:
    x, r, w = change(*_inputs(4, 4))
    with pytest.raises(TokenWeaveInputError, match=match):
        fused_allreduce_rmsnorm(x, r, w, 1e-5)


def test_bad_options(world1: None) -> None:
    x, r, w = _inputs()
    with pytest.raises(TokenWeaveInputError, match="eps"):
        fused_allreduce_rmsnorm(x, r, w, -1.0)
    with pytest.raises(TokenWeaveInputError, match="residual_mode"):
        fused_allreduce_rmsnorm(x, r, w, 1e-5, residual_mode="mirrored")  # type: ignore[arg-type]
    with pytest.raises(TokenWeaveInputError, match="one_shot"):
        fused_allreduce_rmsnorm(x, r, w, 1e-5, algo="one_shot")
    with pytest.raises(TokenWeaveInputError, match="algo"):
        fused_allreduce_rmsnorm(x, r, w, 1e-5, algo="three_shot")  # type: ignore[arg-type]
    with pytest.raises(TokenWeaveInputError, match="out"):
        fused_allreduce_rmsnorm(x, r, w, 1e-5, out=torch.empty(2, 2, dtype=x.dtype))


def test_disable_multicast_forces_and_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in NO_MULTICAST_ENV:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "1")
    with pytest.warns(RuntimeWarning, match="NCCL_NVLS_ENABLE=1"):
        disable_multicast()
    assert multicast_env_ok()
    assert os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1"


def test_importing_the_package_forces_no_multicast() -> None:
    """The library all-reduce (``allreduce_add_rmsnorm``, the model's sequential variant) creates
    NCCL communicators outside any workspace: importing the package must already have forced
    the no-multicast variables."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in NO_MULTICAST_ENV}
    env["NCCL_NVLS_ENABLE"] = "1"
    code = ("import os, warnings; warnings.simplefilter('ignore'); "
            "from chord_tokenweave.fused import allreduce_add_rmsnorm; "
            "print(','.join(os.environ.get(k, '-') for k in "
            "('NCCL_NVLS_ENABLE', 'TORCH_SYMM_MEM_DISABLE_MULTICAST', 'NVSHMEM_DISABLE_NVLS')))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert out.strip() == "0,1,1"
