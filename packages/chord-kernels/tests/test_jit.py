"""JIT runtime: nvcc discovery, the content-hash cache, failure reporting, GPU launch."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import torch

from chord_kernels import (
    ChordCompileError,
    ChordInputError,
    ChordUnsupportedError,
    NvccNotFoundError,
)
from chord_kernels.__main__ import main as cli_main
from chord_kernels.jit import CudaKernel, compile_all, i32, nvcc
from chord_kernels.jit.nvcc import arch_flags, arch_of_capability

try:
    nvcc.find_nvcc()
    HAVE_NVCC = True
except NvccNotFoundError:
    HAVE_NVCC = False
needs_nvcc = pytest.mark.skipif(not HAVE_NVCC, reason="needs nvcc")

ADD_ONE = r"""
extern "C" __global__ void add_one(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}
"""


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHORD_CACHE_DIR", str(tmp_path / "jit"))


@needs_nvcc
def test_compile_is_cached_and_reused(monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = CudaKernel(name="add_one", source=ADD_ONE, entry="add_one")
    first = kernel.compile("sm_90a")
    assert first.read_bytes()[:4] == b"\x7fELF"

    def refuse(*args, **kwargs):
        raise AssertionError("nvcc must not run for a cached kernel")

    monkeypatch.setattr(subprocess, "run", refuse)
    assert kernel.compile("sm_90a") == first
    # A different source is a different entry.
    monkeypatch.undo()
    monkeypatch.setenv("CHORD_CACHE_DIR", str(first.parent))
    other = CudaKernel(name="add_one", source=ADD_ONE + "\n// v2\n", entry="add_one").compile("sm_90a")
    assert other != first


@needs_nvcc
def test_corrupt_cache_entry_is_rebuilt() -> None:
    kernel = CudaKernel(name="add_one", source=ADD_ONE, entry="add_one")
    path = kernel.compile("sm_90a")
    good = path.read_bytes()
    for corrupt in (good[: len(good) // 2], b"garbage", b""):
        path.write_bytes(corrupt)
        rebuilt = kernel.compile("sm_90a")
        assert rebuilt == path
        data = path.read_bytes()
        assert data[:4] == b"\x7fELF" and len(data) == len(good)


@needs_nvcc
def test_compile_error_surfaces_the_nvcc_log() -> None:
    broken = CudaKernel(name="broken", source="extern \"C\" __global__ void k() { this is not c++; }", entry="k")
    with pytest.raises(ChordCompileError, match=r"nvcc failed to compile kernel 'broken'[\s\S]*error"):
        broken.compile("sm_90a")


@needs_nvcc
def test_compile_all_runs_nvcc_side_by_side_and_keeps_the_order(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading
    import time

    kernels = [CudaKernel(name=f"add_one_{i}", source=ADD_ONE + f"\n// {i}\n", entry="add_one") for i in range(4)]
    running, most = 0, 0
    lock = threading.Lock()
    run = subprocess.run

    def counted(*args, **kwargs):
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.3)  # long enough for the pool's other threads to start theirs
        try:
            return run(*args, **kwargs)
        finally:
            with lock:
                running -= 1

    monkeypatch.setattr(subprocess, "run", counted)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    cubins = compile_all(kernels, "sm_90a")
    assert cubins == [k.compile("sm_90a") for k in kernels] and len(set(cubins)) == 4
    assert most == 2  # at most one nvcc per CPU, and more than one
    broken = CudaKernel(name="broken", source="extern \"C\" __global__ void k() { not c++; }", entry="k")
    with pytest.raises(ChordCompileError, match="nvcc failed to compile kernel 'broken'"):
        compile_all([kernels[0], broken], "sm_90a")


@needs_nvcc
@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a", "sm_103a"])
def test_dequant_kernel_compiles_for_every_arch(arch: str) -> None:
    from chord_kernels.ops.dequant import _kernel

    assert _kernel().compile(arch).stat().st_size > 0


@pytest.mark.skipif(not nvcc._wheel_candidates(), reason="the nvidia-cuda-nvcc wheel is not installed")
def test_wheel_nvcc_compiles_the_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    """A newcomer without a CUDA toolkit gets nvcc, runtime headers and CCCL from PyPI (the nox
    sessions install them): the bf16 headers need CCCL's <nv/target>."""
    from chord_kernels.ops.dequant import _kernel

    monkeypatch.setenv("CHORD_NVCC", str(nvcc._wheel_candidates()[0]))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no toolkit nvcc to fall back on
    assert _kernel().compile("sm_90a").read_bytes()[:4] == b"\x7fELF"


@needs_nvcc
def test_precompile_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["precompile", "--arch", "sm_90a", "--family", "dequant"]) == 0
    assert "cubins ready for sm_90a" in capsys.readouterr().out
    assert cli_main(["precompile", "--family", "no-such-family"]) == 2


def test_a_chord_nvcc_that_is_not_there_is_an_error_not_a_fallback(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    monkeypatch.setenv("CHORD_NVCC", str(tmp_path / "no-such-nvcc"))
    with pytest.raises(NvccNotFoundError, match=r"CHORD_NVCC=.*no-such-nvcc: expected an executable nvcc"):
        nvcc.find_nvcc()


def test_missing_nvcc_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in ("CHORD_NVCC", "CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(nvcc, "_wheel_candidates", lambda: [])
    monkeypatch.setattr(nvcc, "nvcc_candidates", lambda: [tmp_path / "nvcc"])
    with pytest.raises(NvccNotFoundError, match=r"pip install 'chord-kernels\[nvcc\]'"):
        CudaKernel(name="add_one", source=ADD_ONE, entry="add_one").compile("sm_90a")


@needs_nvcc
def test_a_host_without_nvcc_runs_what_precompile_cached(monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """docs/vllm.md: precompile where nvcc is, then serve where it is not (one cache)."""
    from chord_kernels.families import precompile

    assert cli_main(["precompile", "--arch", "sm_90a", "--family", "dequant"]) == 0
    with_nvcc = precompile(("sm_90a",), ["dequant"])
    kernel = CudaKernel(name="add_one", source=ADD_ONE, entry="add_one")
    cubin = kernel.compile("sm_90a")
    monkeypatch.setattr(nvcc, "nvcc_candidates", lambda: [])  # the serving host
    assert precompile(("sm_90a",), ["dequant"]) == with_nvcc
    assert kernel.compile("sm_90a") == cubin
    with pytest.raises(NvccNotFoundError, match=r"found none[\s\S]*Nor is kernel 'add_one' for sm_100a in the cache"):
        kernel.compile("sm_100a")  # never compiled for that architecture
    with pytest.raises(NvccNotFoundError, match="chord-kernels precompile"):
        CudaKernel(name="add_one", source=ADD_ONE + "// v2\n", entry="add_one").compile("sm_90a")
    cubin.write_bytes(b"garbage")  # a corrupt entry is never returned
    with pytest.raises(NvccNotFoundError):
        kernel.compile("sm_90a")


@needs_nvcc
def test_a_read_only_cache_serves_its_hits(monkeypatch: pytest.MonkeyPatch) -> None:
    from chord_kernels.jit import cache

    kernel = CudaKernel(name="add_one", source=ADD_ONE, entry="add_one")
    cubin = kernel.compile("sm_90a")
    for ref in cubin.parent.glob("*.any"):
        ref.unlink()  # as a cache filled before the refs existed

    def read_only(path: Path, data: bytes) -> None:
        raise PermissionError(f"read-only file system: {path}")

    monkeypatch.setattr(cache, "_atomic_write", read_only)
    assert kernel.compile("sm_90a") == cubin


def test_info_names_the_cache_and_what_it_holds(monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(nvcc, "nvcc_candidates", lambda: [])
    assert cli_main(["info"]) == 0
    out = capsys.readouterr().out
    assert "nvcc: not found" in out and "kernels run only from the cache" in out
    assert re.search(r"JIT cache: .*jit \(0 cubins\)", out), out


def test_chord_nvcc_variable_wins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = tmp_path / "my-nvcc"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("CHORD_NVCC", str(fake))
    assert nvcc.find_nvcc() == fake


def test_arch_validation() -> None:
    assert arch_flags("sm_90a") == ["-gencode=arch=compute_90a,code=sm_90a"]
    with pytest.raises(ChordUnsupportedError, match="sm_90a"):
        arch_flags("sm_80")
    assert arch_of_capability(10, 3) == "sm_103a"
    with pytest.raises(ChordUnsupportedError, match="compute capability 8.0"):
        arch_of_capability(8, 0)


def test_launch_rejects_untyped_scalars_and_cpu_tensors() -> None:
    kernel = CudaKernel(name="add_one", source=ADD_ONE, entry="add_one")
    with pytest.raises(ChordInputError, match="expected CUDA tensors"):
        kernel.launch((1,), (32,), (torch.zeros(4), i32(4)))
    if torch.cuda.is_available():
        with pytest.raises(ChordInputError, match="typed scalar"):
            kernel.launch((1,), (32,), (torch.zeros(4, device="cuda"), 4))


def test_tensor_map_names_what_it_expects() -> None:
    from chord_kernels.jit.tma import rows_descriptor

    a = torch.zeros(64, 128, dtype=torch.bfloat16)
    with pytest.raises(ChordInputError, match=r"1..256 box rows and a box row of 16..128 bytes, got 300 x 64"):
        rows_descriptor(a, 300)
    with pytest.raises(ChordInputError, match=r"got 64 x 72"):
        rows_descriptor(a, 64, box_cols=72)  # 144-byte box rows: wider than the 128-byte swizzle
    with pytest.raises(ChordInputError, match=r"contiguous 2-D bf16 CUDA tensor, got torch.bfloat16 \[64, 128\] on cpu"):
        rows_descriptor(a, 64)
    with pytest.raises(ChordInputError, match=r"got torch.float32"):
        rows_descriptor(a.float(), 64)


@pytest.mark.gpu
def test_launch_on_gpu_and_under_graph_capture() -> None:
    kernel = CudaKernel(name="add_one", source=ADD_ONE, entry="add_one")
    x = torch.zeros(1000, device="cuda")
    kernel.launch(((1000 + 255) // 256,), (256,), (x, i32(1000)))
    torch.cuda.synchronize()
    assert bool((x == 1).all())
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
        kernel.launch((4,), (256,), (x, i32(1000)))
    graph.replay()
    graph.replay()
    torch.cuda.synchronize()
    assert bool((x == 3).all())


def test_an_unusable_cache_dir_is_a_typed_error_and_a_cli_error(tmp_path, monkeypatch, capsys):
    from chord_kernels.jit import cache

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("CHORD_CACHE_DIR", str(blocker / "jit"))
    with pytest.raises(ChordInputError, match="JIT cache .* expected a directory Chord can create and write"):
        cache.cache_dir()
    assert cli_main(["precompile", "--family", "dequant"]) == 2
    assert "error: JIT cache" in capsys.readouterr().err
    monkeypatch.setenv("CHORD_CACHE_DIR", str(blocker))
    assert cli_main(["info"]) == 0
    assert "JIT cache: unusable" in capsys.readouterr().out
