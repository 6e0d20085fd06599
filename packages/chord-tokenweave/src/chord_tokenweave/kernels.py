"""Triton kernels of the GPU path (imported only where Triton and CUDA exist).

* ``fused_ar_rmsnorm_kernel``: two-shot AllReduce + residual add + RMSNorm over symmetric-memory
  peer pointers (plain NVLink loads and stores; never multimem), with entry/exit barriers on the
  symmetric-memory signal pads; and a one-shot variant (each rank reduces every row, no push).
* ``add_rmsnorm_kernel``: the plain add+RMSNorm the sequential baseline runs after NCCL.
* ``p2p_copy_kernel``: pull/push copies to all peers at once, to measure NVLink bandwidth (the
  floor of the fused kernel).

Barrier protocol. Every CTA ``b`` of rank ``r`` owns slot ``slot_base + b*W + r`` in each peer's
signal pad. A per-CTA counter (local memory, advanced by the kernel itself, so CUDA-graph replays
and back-to-back calls need no host reset) gives epoch ``e``; the entry barrier publishes ``e+1``
and waits until every peer's slot holds ``>= e+1``, the exit barrier does the same with ``e+2``.
Epochs only grow, so a fast peer that already published its exit epoch also satisfies our entry
wait, and a peer can never be a whole call ahead (its next entry needs our exit). Stores are
idempotent (all threads that replicate a lane write the same value), which a CAS protocol is not.
A wait that exceeds ``timeout_ns`` records (code, cta, missing-peer mask, rank) in ``status``;
with ``TRAP`` it then executes ``trap`` (the host gets a CUDA error at its next sync instead of a
hang, and never a silently wrong result); without it the CTA skips its work and the host reads
``status`` (diagnostics and tests).
"""

from __future__ import annotations

import triton
import triton.language as tl

MODE_SHARDED = 0  # two-shot; residual holds only this rank's rows, updated in place
MODE_REPLICATED = 1  # two-shot; residual rows pushed to every rank's residual plane
MODE_ONESHOT = 2  # one-shot; every rank reduces all rows, residual replicated, y local

STATUS_ENTRY_TIMEOUT = 1
STATUS_EXIT_TIMEOUT = 2


@triton.jit
def _ld_acquire_sys(ptrs):
    return tl.inline_asm_elementwise(
        "ld.acquire.sys.global.b32 $0, [$1];",
        "=r,l",
        [ptrs],
        dtype=tl.int32,
        is_pure=False,
        pack=1,
    )


@triton.jit
def _st_release_sys(ptrs, vals):
    return tl.inline_asm_elementwise(
        "st.release.sys.global.b32 [$1], $2;\n\tmov.b32 $0, 0;",
        "=r,l,r",
        [ptrs, vals],
        dtype=tl.int32,
        is_pure=False,
        pack=1,
    )


@triton.jit
def _globaltimer_ns(like):
    return tl.inline_asm_elementwise(
        "mov.u64 $0, %globaltimer;", "=l,r", [like], dtype=tl.int64, is_pure=False, pack=1
    )


@triton.jit
def _trap(like):
    return tl.inline_asm_elementwise(
        "trap;\n\tmov.b32 $0, $1;", "=r,r", [like], dtype=tl.int32, is_pure=False, pack=1
    )


@triton.jit
def _barrier(
    pad_ptrs,
    slot_base,
    pid,
    rank,
    epoch,
    status_ptr,
    timeout_ns,
    CODE: tl.constexpr,
    W: tl.constexpr,
    WP: tl.constexpr,
    TRAP: tl.constexpr,
):
    # Every thread's earlier global stores happen-before the release below (CTA barrier, then a
    # sys-scope release is cumulative), so peers that acquire the epoch see all of this CTA's rows.
    tl.debug_barrier()
    lanes = tl.arange(0, WP)
    peers = tl.where(lanes < W, lanes, 0)
    peer_pads = tl.load(pad_ptrs + peers).to(tl.pointer_type(tl.int32))
    zero = tl.zeros([WP], dtype=tl.int32)
    _st_release_sys(peer_pads + (slot_base + pid * W + rank), zero + epoch)
    my_pad = tl.load(pad_ptrs + rank).to(tl.pointer_type(tl.int32))
    waits = my_pad + (slot_base + pid * W) + peers
    start = _globaltimer_ns(epoch)
    seen = _ld_acquire_sys(waits)
    missing = tl.sum(((seen - epoch) < 0).to(tl.int32), axis=0)
    elapsed = start - start
    while (missing > 0) & (elapsed < timeout_ns):
        seen = _ld_acquire_sys(waits)
        missing = tl.sum(((seen - epoch) < 0).to(tl.int32), axis=0)
        elapsed = _globaltimer_ns(epoch) - start
    if missing > 0:
        late = tl.sum(tl.where((seen - epoch) < 0, 1 << lanes, 0), axis=0)
        tl.store(status_ptr + 0, CODE)
        tl.store(status_ptr + 1, pid)
        tl.store(status_ptr + 2, late)
        tl.store(status_ptr + 3, rank)
        if TRAP:
            _trap(epoch)
    tl.debug_barrier()
    return missing == 0


@triton.jit(
    do_not_specialize=["slot_base", "res_row_base", "row_start", "row_end", "rank", "timeout_ns"]
)
def fused_ar_rmsnorm_kernel(
    buf_ptrs,  # int64 [W]: base address of every rank's symmetric buffer
    x_off,  # element offset of this channel's x/y plane inside the buffer
    h_off,  # element offset of this channel's residual plane (MODE_REPLICATED)
    pad_ptrs,  # int64 [W]: every rank's signal pad
    slot_base,
    counters_ptr,  # int32 [ctas]: per-CTA epoch counters of this channel (local)
    status_ptr,  # int32 [4]
    residual_ptr,
    res_row_base,  # residual row of token ``row`` is ``row - res_row_base``
    weight_ptr,
    out_ptr,  # MODE_ONESHOT: local output rows
    row_start,
    row_end,
    rank,
    D,
    eps,
    timeout_ns,
    W: tl.constexpr,
    WP: tl.constexpr,
    BLOCK_D: tl.constexpr,
    ROWS: tl.constexpr,
    MODE: tl.constexpr,
    TRAP: tl.constexpr,
    STAGES: tl.constexpr = 1,  # > 1: software-pipeline the row loop (cp.async prefetch)
    SYNC: tl.constexpr = True,  # False only for single-process simulation (interpreter tests)
):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    dty = weight_ptr.dtype.element_ty
    epoch = tl.load(counters_ptr + pid) + 1
    ok = True
    if SYNC:
        ok = _barrier(pad_ptrs, slot_base, pid, rank, epoch, status_ptr, timeout_ns, 1, W, WP,
                      TRAP)
    # Without TRAP a timed-out CTA skips its rows and the exit barrier (status tells the host).
    row_stop = tl.where(ok, row_end, row_start)

    cols = tl.arange(0, BLOCK_D)
    cmask = cols < D
    w = tl.load(weight_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
    for base in tl.range(row_start + pid * ROWS, row_stop, nprog * ROWS, num_stages=STAGES):
        rows = base + tl.arange(0, ROWS)
        rmask = rows < row_stop
        m = rmask[:, None] & cmask[None, :]
        offs = rows.to(tl.int64)[:, None] * D + cols[None, :]
        # Fixed rank order 0..W-1, fp32: every rank would compute the same bits for a row.
        acc = tl.zeros([ROWS, BLOCK_D], dtype=tl.float32)
        # ".cg": cache in L2 only. The planes are rewritten between calls by other kernels
        # (GEMMs, often through TMA) and by the peers' pushes; an L1 line kept from an earlier
        # call would be stale, and each row is read once per call anyway.
        for p in tl.static_range(W):
            src = tl.load(buf_ptrs + p).to(tl.pointer_type(dty))
            src = tl.multiple_of(src, 16)
            acc += tl.load(src + x_off + offs, mask=m, other=0.0,
                           cache_modifier=".cg").to(tl.float32)
        roffs = (rows - res_row_base).to(tl.int64)[:, None] * D + cols[None, :]
        acc += tl.load(residual_ptr + roffs, mask=m, other=0.0,
                       cache_modifier=".cg").to(tl.float32)
        h = acc.to(dty)
        if MODE == 1:
            for p in tl.static_range(W):
                dst = tl.load(buf_ptrs + p).to(tl.pointer_type(dty))
                dst = tl.multiple_of(dst, 16)
                tl.store(dst + h_off + offs, h, mask=m)
        else:
            tl.store(residual_ptr + roffs, h, mask=m)
        hf = h.to(tl.float32)
        rstd = 1.0 / tl.sqrt(tl.sum(hf * hf, axis=1) / D + eps)
        y = (hf * rstd[:, None] * w[None, :]).to(dty)
        if MODE == 2:
            tl.store(out_ptr + offs, y, mask=m)
        else:
            for p in tl.static_range(W):
                dst = tl.load(buf_ptrs + p).to(tl.pointer_type(dty))
                dst = tl.multiple_of(dst, 16)
                tl.store(dst + x_off + offs, y, mask=m)

    if SYNC:
        if ok:
            _barrier(pad_ptrs, slot_base, pid, rank, epoch + 1, status_ptr, timeout_ns, 2, W, WP,
                     TRAP)
    tl.store(counters_ptr + pid, epoch + 1)


@triton.jit
def add_rmsnorm_kernel(x_ptr, residual_ptr, weight_ptr, out_ptr, D, eps, BLOCK_D: tl.constexpr):
    """One program per row: h = x + residual (stored into residual), out = rmsnorm(h) * weight."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_D)
    m = cols < D
    dty = weight_ptr.dtype.element_ty
    x = tl.load(x_ptr + row * D + cols, mask=m, other=0.0).to(tl.float32)
    r = tl.load(residual_ptr + row * D + cols, mask=m, other=0.0).to(tl.float32)
    h = (x + r).to(dty)
    tl.store(residual_ptr + row * D + cols, h, mask=m)
    hf = h.to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(hf * hf, axis=0) / D + eps)
    w = tl.load(weight_ptr + cols, mask=m, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * D + cols, (hf * rstd * w).to(dty), mask=m)


@triton.jit
def p2p_copy_kernel(src_ptrs, dst_ptrs, numel, NPEERS: tl.constexpr, BLOCK: tl.constexpr):
    """CTA ``c`` copies ``numel`` int32 words for peer ``c % NPEERS`` (grid a multiple of NPEERS).

    ``src_ptrs``/``dst_ptrs`` are int64 [NPEERS] raw addresses; either side may be a peer's
    symmetric buffer, so this measures pull (peer -> local) or push (local -> peer) bandwidth
    to all peers at once.
    """
    pid = tl.program_id(0)
    per_peer = tl.num_programs(0) // NPEERS
    peer = pid % NPEERS
    lane = pid // NPEERS
    src = tl.multiple_of(tl.load(src_ptrs + peer).to(tl.pointer_type(tl.int32)), 16)
    dst = tl.multiple_of(tl.load(dst_ptrs + peer).to(tl.pointer_type(tl.int32)), 16)
    offs = tl.arange(0, BLOCK)
    for base in tl.range(lane * BLOCK, numel, per_peer * BLOCK):
        idx = base + offs
        m = idx < numel
        tl.store(dst + idx, tl.load(src + idx, mask=m), mask=m)
