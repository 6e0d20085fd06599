"""Launch a function on ``world_size`` local processes (gloo on CPU, NCCL on GPUs) with a timeout.

Used by the tests, the profiler and the benchmarks so that nothing can hang: every process gets
the no-multicast environment before torch touches CUDA, the process group gets a timeout, and the
parent kills the children when the wall-clock limit passes.
"""

from __future__ import annotations

import os
import pickle
import socket
import tempfile
import time
import traceback
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from chord_tokenweave.env import disable_multicast
from chord_tokenweave.errors import TokenWeaveError, TokenWeaveInputError


def free_port() -> int:
    """A TCP port that was free a moment ago (for MASTER_PORT)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _worker(
    rank: int,
    fn: Callable[..., Any],
    world_size: int,
    backend: str,
    port: int,
    pg_timeout_s: float,
    result_dir: str,
    args: tuple[Any, ...],
) -> None:
    disable_multicast()
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
        WORLD_SIZE=str(world_size), LOCAL_RANK=str(rank),
    )
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    kwargs: dict[str, Any] = {}
    if backend == "nccl":
        torch.cuda.set_device(rank)
        kwargs["device_id"] = torch.device("cuda", rank)
    path = Path(result_dir) / f"rank{rank}.pkl"
    try:
        dist.init_process_group(
            backend, rank=rank, world_size=world_size,
            timeout=timedelta(seconds=pg_timeout_s), **kwargs,
        )
        result = fn(rank, world_size, *args)
        path.write_bytes(pickle.dumps(("ok", result)))
    except BaseException as exc:  # report every failure to the parent, then exit non-zero
        path.write_bytes(pickle.dumps(("error", f"{exc!r}\n{traceback.format_exc()}")))
        raise
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def launch(
    fn: Callable[..., Any],
    world_size: int,
    *args: Any,
    backend: str = "gloo",
    timeout_s: float = 120.0,
) -> list[Any]:
    """Run ``fn(rank, world_size, *args)`` on ``world_size`` processes; return their results.

    ``fn`` must be importable (module level). Raises :class:`TokenWeaveError` with the failing
    rank's traceback, or on timeout (after killing the processes).
    """
    import multiprocessing

    import torch.multiprocessing as mp

    if not isinstance(world_size, int) or world_size < 1:
        raise TokenWeaveInputError(f"world_size must be a positive int, got {world_size!r}")

    disable_multicast()
    # A fork server imports torch once and forks every rank from a process that never ran an
    # OpenMP region (plain fork after torch compute can deadlock; spawn re-imports torch per rank,
    # seconds each). CUDA is never initialised in the server.
    method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    if method == "forkserver":
        multiprocessing.get_context("forkserver").set_forkserver_preload(
            ["torch", "torch.distributed", "chord_tokenweave.model"]
        )
    with tempfile.TemporaryDirectory(prefix="chord-tw-") as tmp:
        ctx = mp.start_processes(
            _worker,
            args=(fn, world_size, backend, free_port(), max(10.0, timeout_s), tmp, args),
            nprocs=world_size,
            join=False,
            start_method=method,
        )
        deadline = time.monotonic() + timeout_s
        try:
            while not ctx.join(timeout=max(0.1, min(1.0, deadline - time.monotonic()))):
                if time.monotonic() > deadline:
                    raise TokenWeaveError(f"{world_size} processes did not finish in {timeout_s} s")
        except mp.ProcessRaisedException as exc:
            raise TokenWeaveError(_collect_errors(tmp, world_size) or str(exc)) from None
        except mp.ProcessExitedException as exc:
            raise TokenWeaveError(_collect_errors(tmp, world_size) or str(exc)) from None
        finally:
            for proc in ctx.processes:
                if proc.is_alive():
                    proc.kill()
                    proc.join(5)
        results = []
        for rank in range(world_size):
            status, value = pickle.loads((Path(tmp) / f"rank{rank}.pkl").read_bytes())
            if status != "ok":
                raise TokenWeaveError(f"rank {rank} failed:\n{value}")
            results.append(value)
        return results


def _collect_errors(tmp: str, world_size: int) -> str:
    lines = []
    for rank in range(world_size):
        path = Path(tmp) / f"rank{rank}.pkl"
        if path.exists():
            status, value = pickle.loads(path.read_bytes())
            if status != "ok":
                lines.append(f"rank {rank} failed:\n{value}")
    return "\n".join(lines)
