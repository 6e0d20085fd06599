"""A reference tensor-parallel transformer layer stack in plain PyTorch.

Llama-3.3-70B (dense) and Mixtral-8x22B (MoE) shapes with random weights, Megatron TP sharding
(QKV and gate/up column-parallel, O and down row-parallel, router replicated, every expert's
intermediate dimension sharded), a causal prefill over ``T`` tokens (no RoPE: positions matter
only through the causal mask, which is all the split needs to respect). Four ways to run:

* ``"sequential"``: library all-reduce, then add + RMSNorm (replicated residual);
* ``"fused"``: the fused AllReduce+add+RMSNorm on the whole batch (sharded residual);
* ``"tokenweave"``: two splits woven across a compute and a comm stream (fused op per split),
  or fused-only when the decision says the batch is too small (selective enabling);
* ``"nocomm"``: the same compute with the communication replaced by a local add + RMSNorm — the
  speed bound; its output is the unreduced model (equal to the others only at world size 1).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from typing import Literal

import torch
import torch.distributed as dist
import torch.nn.functional as F

from chord_tokenweave.errors import TokenWeaveInputError
from chord_tokenweave.fused import (
    add_rmsnorm_,
    allreduce_add_rmsnorm,
    fused_allreduce_rmsnorm,
    uses_gpu_path,
)
from chord_tokenweave.numerics import rmsnorm, shard_range
from chord_tokenweave.overlap import (
    CommFn,
    Stage,
    StreamPair,
    TraceEvent,
    check_consistent,
    run_weave,
)
from chord_tokenweave.split import GemmShape, wave_aware_split
from chord_tokenweave.table import Decision, SplitTable
from chord_tokenweave.verify import BoundaryCheck, RoutingLog, boundary_checked
from chord_tokenweave.workspace import SymmetricWorkspace

Variant = Literal["sequential", "fused", "tokenweave", "nocomm"]
VARIANTS: tuple[Variant, ...] = ("sequential", "fused", "tokenweave", "nocomm")
MoeImpl = Literal["auto", "grouped", "loop"]


@dataclass(frozen=True)
class ModelConfig:
    """Shapes of one decoder layer (full model, before TP sharding)."""

    name: str
    hidden: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate: int
    num_layers: int
    rms_eps: float = 1e-5
    num_experts: int = 0  # 0: dense MLP
    top_k: int = 0

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    def check_world_size(self, world_size: int) -> None:
        """TP needs heads, KV heads and the intermediate size divisible by the world size."""
        if not isinstance(world_size, int) or world_size <= 0:
            raise TokenWeaveInputError(f"world size must be a positive int, got {world_size!r}")
        for what, value in (
            ("num_heads", self.num_heads),
            ("num_kv_heads", self.num_kv_heads),
            ("intermediate", self.intermediate),
        ):
            if value % world_size:
                raise TokenWeaveInputError(
                    f"{self.name}: {what}={value} is not divisible by world size {world_size}"
                )

    def gemm_shapes(self, world_size: int, tokens_per_expert_fraction: float = 1.0) -> list[GemmShape]:
        """Per-rank token-parallel GEMMs of one layer (for wave-aware splitting).

        For MoE the expert GEMMs see ``top_k / num_experts`` of the tokens each; we model the
        layer with the dense-equivalent shapes (top_k experts' worth of rows), which is what
        decides the wave count when routing is balanced.
        """
        self.check_world_size(world_size)
        w = world_size
        qkv = (self.num_heads + 2 * self.num_kv_heads) * self.head_dim // w
        inter = self.intermediate // w
        scale = self.top_k if self.is_moe else 1
        return [
            GemmShape(n=qkv, k=self.hidden, name="qkv"),
            GemmShape(n=self.hidden, k=self.num_heads * self.head_dim // w, name="o"),
            GemmShape(n=2 * inter * scale, k=self.hidden, name="gate_up"),
            GemmShape(n=self.hidden * scale, k=inter, name="down"),
        ]

    def scaled(self, **changes: int | float | str) -> ModelConfig:
        """A copy with some fields changed (small configs for tests)."""
        return replace(self, **changes)  # type: ignore[arg-type]


LLAMA_3_3_70B = ModelConfig("llama-3.3-70b", 8192, 64, 8, 128, 28672, 80)
MIXTRAL_8X22B = ModelConfig("mixtral-8x22b", 6144, 48, 8, 128, 16384, 56, num_experts=8, top_k=2)
MODELS: dict[str, ModelConfig] = {c.name: c for c in (LLAMA_3_3_70B, MIXTRAL_8X22B)}

# Small look-alikes for CPU tests (divisible by world sizes up to 8).
TINY_DENSE = LLAMA_3_3_70B.scaled(
    name="tiny-dense", hidden=64, num_heads=8, num_kv_heads=8, head_dim=8, intermediate=128,
    num_layers=2,
)
TINY_MOE = MIXTRAL_8X22B.scaled(
    name="tiny-moe", hidden=64, num_heads=8, num_kv_heads=8, head_dim=8, intermediate=64,
    num_layers=2, num_experts=4, top_k=2,
)


@dataclass
class LayerShard:
    """One rank's weights of one layer."""

    input_norm: torch.Tensor  # [H]
    post_attn_norm: torch.Tensor  # [H]
    wqkv: torch.Tensor  # [(hq + 2 hkv) hd / W, H]
    wo: torch.Tensor  # [H, hq hd / W]
    w13: torch.Tensor  # dense [2 I/W, H]; MoE [E, 2 I/W, H]
    w2: torch.Tensor  # dense [H, I/W]; MoE [E, H, I/W]
    router: torch.Tensor | None  # MoE [E, H], replicated


def make_shards(
    cfg: ModelConfig,
    world_size: int,
    rank: int,
    *,
    num_layers: int | None = None,
    seed: int = 0,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.bfloat16,
) -> tuple[list[LayerShard], torch.Tensor]:
    """Random full weights (same on every rank for a seed), sliced to ``rank``'s shard.

    Returns the layer shards and the final norm weight.
    """
    cfg.check_world_size(world_size)
    device = torch.device(device)
    gen = torch.Generator(device=device)
    hq, hkv, hd, H, inter = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.hidden, cfg.intermediate
    w = world_size

    def rand(*shape: int, fan_in: int) -> torch.Tensor:
        t = torch.randn(*shape, generator=gen, device=device, dtype=torch.float32)
        return t.mul_(fan_in**-0.5).to(dtype)

    def norm_weight() -> torch.Tensor:
        t = 1.0 + 0.1 * torch.randn(H, generator=gen, device=device, dtype=torch.float32)
        return t.to(dtype)

    def rows(t: torch.Tensor, total: int, dim: int) -> torch.Tensor:
        n = total // w
        return t.narrow(dim, rank * n, n)

    layers = []
    for layer in range(num_layers or cfg.num_layers):
        gen.manual_seed(seed * 1_000_003 + layer)
        input_norm, post_norm = norm_weight(), norm_weight()
        wq = rand(hq * hd, H, fan_in=H)
        wk = rand(hkv * hd, H, fan_in=H)
        wv = rand(hkv * hd, H, fan_in=H)
        wqkv = torch.cat([rows(wq, hq * hd, 0), rows(wk, hkv * hd, 0), rows(wv, hkv * hd, 0)])
        wo = rows(rand(H, hq * hd, fan_in=hq * hd), hq * hd, 1).contiguous()
        experts = max(cfg.num_experts, 1)
        gate = rand(experts, inter, H, fan_in=H)
        up = rand(experts, inter, H, fan_in=H)
        down = rand(experts, H, inter, fan_in=inter)
        w13 = torch.cat([rows(gate, inter, 1), rows(up, inter, 1)], dim=1)
        w2 = rows(down, inter, 2)
        router = rand(cfg.num_experts, H, fan_in=H) if cfg.is_moe else None
        if not cfg.is_moe:
            w13, w2 = w13[0], w2[0]
        layers.append(
            LayerShard(input_norm, post_norm, wqkv.contiguous(), wo, w13.contiguous(),
                       w2.contiguous(), router)
        )
        del gate, up, down, wq, wk, wv
    gen.manual_seed(seed * 1_000_003 + 999_983)
    return layers, norm_weight()


def _causal_bottom_right(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Attention where query i of the last ``Lq`` positions sees keys ``<= Lk - Lq + i``."""
    lq, lk = q.shape[-2], k.shape[-2]
    if lq == lk:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    try:
        from torch.nn.attention.bias import causal_lower_right

        return F.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(lq, lk))
    except ImportError:  # pragma: no cover - torch < 2.2
        mask = torch.ones(lq, lk, dtype=torch.bool, device=q.device).tril(lk - lq)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


class TPModel:
    """The layer stack on one rank of ``group`` (``group=None``: a single unsharded process)."""

    def __init__(
        self,
        cfg: ModelConfig,
        group: dist.ProcessGroup | None = None,
        *,
        num_layers: int | None = None,
        seed: int = 0,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.bfloat16,
        shard: tuple[int, int] | None = None,
    ) -> None:
        """``shard=(world_size, rank)`` builds that rank's weights in a single process (no
        communication at all: every variant then behaves like ``nocomm``)."""
        self.cfg, self.group = cfg, group
        distributed = shard is None and (
            group is not None or (dist.is_available() and dist.is_initialized())
        )
        if shard is not None:
            self.world_size, self.rank = shard
        else:
            self.world_size = dist.get_world_size(group) if distributed else 1
            self.rank = dist.get_rank(group) if distributed else 0
        self.distributed = distributed
        self.device, self.dtype = torch.device(device), dtype
        self.layers, self.final_norm = make_shards(
            cfg, self.world_size, self.rank, num_layers=num_layers, seed=seed,
            device=self.device, dtype=dtype,
        )
        self.eps = cfg.rms_eps
        self.q_heads = cfg.num_heads // self.world_size
        self.kv_heads = cfg.num_kv_heads // self.world_size
        self._workspace: SymmetricWorkspace | None = None
        self._kv: dict[tuple[int, int], tuple[torch.Tensor, torch.Tensor]] = {}
        self._bounds: list[int] = []
        self._routing: RoutingLog | None = None
        # "auto": grouped GEMMs (torch._grouped_mm: no host sync, capturable) where they run,
        # else the per-expert loop (its nonzero() syncs the host every expert).
        self.moe_impl: MoeImpl = "auto"
        self._grouped_ok: bool | None = None
        self._comm_stream: torch.cuda.Stream | None = None

    # ---- decisions -------------------------------------------------------------------------
    def decide(
        self,
        num_tokens: int,
        table: SplitTable | None = None,
        *,
        threshold: int = 1024,
        num_ctas: int = 16,
        num_sms: int = 132,
    ) -> Decision:
        """Split decision for ``num_tokens``: from the profiler table, else wave-aware math."""
        if table is not None:
            return table.decide(num_tokens)
        split = None
        if num_tokens >= threshold:
            split = wave_aware_split(
                num_tokens, self.cfg.gemm_shapes(self.world_size), num_sms=num_sms
            )
        return Decision(num_tokens, split is not None, split, num_ctas, None)

    # ---- compute blocks ----------------------------------------------------------------------
    def _attention(
        self, layer: int, split: int, h: torch.Tensor, out: torch.Tensor | None
    ) -> torch.Tensor:
        w = self.layers[layer]
        hd, hq, hkv = self.cfg.head_dim, self.q_heads, self.kv_heads
        qkv = h @ w.wqkv.t()
        q, k, v = qkv.split([hq * hd, hkv * hd, hkv * hd], dim=-1)
        t = h.shape[0]
        q = q.view(t, hq, hd).transpose(0, 1)
        k = k.view(t, hkv, hd).transpose(0, 1)
        v = v.view(t, hkv, hd).transpose(0, 1)
        self._kv[(layer, split)] = (k, v)
        if split > 0:  # this split's queries also see every earlier split's keys/values
            keys = [self._kv[(layer, s)] for s in range(split + 1)]
            k = torch.cat([kv[0] for kv in keys], dim=1)
            v = torch.cat([kv[1] for kv in keys], dim=1)
        if hq != hkv:
            k = k.repeat_interleave(hq // hkv, dim=0)
            v = v.repeat_interleave(hq // hkv, dim=0)
        # 4-D [1, heads, tokens, head_dim]: the layout the flash / memory-efficient kernels take.
        attn = _causal_bottom_right(q[None], k[None], v[None])[0]
        attn = attn.transpose(0, 1).reshape(t, hq * hd)
        if out is None:
            return attn @ w.wo.t()
        return torch.matmul(attn, w.wo.t(), out=out)

    def _mlp(self, layer: int, split: int, h: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
        w = self.layers[layer]
        if w.router is None:
            gate, up = (h @ w.w13.t()).chunk(2, dim=-1)
            act = F.silu(gate) * up
            if out is None:
                return act @ w.w2.t()
            return torch.matmul(act, w.w2.t(), out=out)
        topi, topw = self._route(layer, split, h)
        acc = self._experts(w, h, topi, topw)
        if out is None:
            return acc.to(h.dtype)
        return out.copy_(acc)

    def _route(self, layer: int, split: int, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Top-k experts and their renormalised weights; recorded or replayed via the log."""
        log = self._routing
        a, b = self._bounds[split], self._bounds[split + 1]
        if log is not None and log.replay:
            return log.topi[layer][a:b], log.topw[layer][a:b]
        w = self.layers[layer]
        assert w.router is not None
        probs = torch.softmax((h @ w.router.t()).float(), dim=-1)
        topw, topi = probs.topk(self.cfg.top_k, dim=-1)
        topw = topw / topw.sum(-1, keepdim=True)
        if log is not None:
            total = self._bounds[-1]
            if layer not in log.topi or log.topi[layer].shape[0] != total:
                log.topi[layer] = topi.new_empty(total, topi.shape[1])
                log.topw[layer] = topw.new_empty(total, topw.shape[1])
            log.topi[layer][a:b] = topi
            log.topw[layer][a:b] = topw
        return topi, topw

    def _experts(
        self, w: LayerShard, h: torch.Tensor, topi: torch.Tensor, topw: torch.Tensor,
        impl: MoeImpl | None = None,
    ) -> torch.Tensor:
        """fp32 ``sum_k topw[:, k] * expert_{topi[:, k]}(h)`` ([T, H])."""
        impl = impl or self.moe_impl
        if impl != "loop" and self._grouped_ok is not False and hasattr(torch, "_grouped_mm"):
            try:
                acc = self._experts_grouped(w, h, topi, topw)
                self._grouped_ok = True
                return acc
            except (RuntimeError, NotImplementedError, TypeError):
                if impl == "grouped":
                    raise
                self._grouped_ok = False  # unsupported here (device, dtype, torch version)
        acc = torch.zeros(h.shape, dtype=torch.float32, device=h.device)
        for e in range(self.cfg.num_experts):
            tok, slot = (topi == e).nonzero(as_tuple=True)
            if tok.numel() == 0:
                continue
            gate, up = (h[tok] @ w.w13[e].t()).chunk(2, dim=-1)
            y = (F.silu(gate) * up) @ w.w2[e].t()
            acc.index_add_(0, tok, y.float() * topw[tok, slot, None])
        return acc

    def _experts_grouped(
        self, w: LayerShard, h: torch.Tensor, topi: torch.Tensor, topw: torch.Tensor
    ) -> torch.Tensor:
        """The same sum with the (token, slot) rows sorted by expert and two grouped GEMMs.

        Everything stays on the device (no nonzero(), no host sync), so it overlaps with the
        comm stream and can be captured in a CUDA graph.
        """
        t, k = topi.shape
        flat = topi.reshape(-1)
        order = torch.argsort(flat, stable=True)
        experts = torch.arange(self.cfg.num_experts, device=h.device)
        offs = (flat[:, None] == experts[None, :]).sum(0).cumsum(0).to(torch.int32)
        rows = h.index_select(0, order // k)
        gate, up = torch._grouped_mm(rows, w.w13.transpose(1, 2), offs=offs).chunk(2, dim=-1)
        y = torch._grouped_mm(F.silu(gate) * up, w.w2.transpose(1, 2), offs=offs)
        back = torch.empty_like(y).index_copy_(0, order, y)  # row j = (token j // k, slot j % k)
        # Slot 0 then slot 1 (fp32, a + b is exact-order independent for top_k = 2), as the loop.
        return (back.view(t, k, -1).float() * topw[..., None]).sum(1)

    def stages(self) -> list[Stage]:
        """Attention and MLP of every layer, each ending in the norm that follows it."""
        result = []
        for i in range(len(self.layers)):
            nxt = self.layers[i + 1].input_norm if i + 1 < len(self.layers) else self.final_norm
            result.append(Stage("attn", i, lambda s, h, o, i=i: self._attention(i, s, h, o),
                                self.layers[i].post_attn_norm))
            result.append(Stage("mlp", i, lambda s, h, o, i=i: self._mlp(i, s, h, o), nxt))
        return result

    # ---- running -----------------------------------------------------------------------------
    def workspace(self, max_tokens: int) -> SymmetricWorkspace:
        """The model's symmetric workspace (two channels, sharded residual), grown on demand."""
        if self._workspace is None or self._workspace.max_tokens < max_tokens:
            self._workspace = SymmetricWorkspace(
                self.group, max_tokens=max_tokens, hidden=self.cfg.hidden, dtype=self.dtype,
                device=self.device, channels=2, residual_mode="sharded",
            )
        return self._workspace

    def forward(
        self,
        x: torch.Tensor,
        variant: Variant = "sequential",
        *,
        decision: Decision | None = None,
        trace: list[TraceEvent] | None = None,
        check_decision: bool = True,
        routing: RoutingLog | None = None,
        checks: list[BoundaryCheck] | None = None,
    ) -> torch.Tensor:
        """Run the stack on ``x`` ([T, H], same on every rank); returns the final normed hidden.

        ``routing``: record the MoE routing into an empty log, or replay a frozen one.
        ``checks``: for the fused variants, check every AllReduce+add+RMSNorm against the exact
        reference computed from the same inputs (all-gathers: slow, diagnostics and tests).
        Both come from :mod:`chord_tokenweave.verify`.
        """
        if variant not in VARIANTS:
            raise TokenWeaveInputError(f"variant must be one of {VARIANTS}, got {variant!r}")
        if x.ndim != 2 or x.shape[1] != self.cfg.hidden or x.dtype != self.dtype:
            raise TokenWeaveInputError(
                f"x must be [T, {self.cfg.hidden}] {self.dtype}, got {list(x.shape)} {x.dtype}"
            )
        num_tokens = x.shape[0]
        self._kv.clear()
        bounds = [0, num_tokens]
        if variant == "tokenweave":
            decision = decision or self.decide(num_tokens)
            if decision.num_tokens != num_tokens:
                raise TokenWeaveInputError(
                    f"the decision is for {decision.num_tokens} tokens, this batch has {num_tokens}"
                )
            if decision.weave and not (
                decision.split is not None and 0 < decision.split < num_tokens
            ):
                raise TokenWeaveInputError(
                    f"a woven decision needs a split in (0, {num_tokens}), got {decision.split}"
                )
            if self.distributed and check_decision:
                check_consistent(decision, self.group)
            if decision.library:
                variant = "sequential"  # the profiler found the library path fastest here
            elif decision.weave and decision.split is not None:
                bounds = [0, decision.split, num_tokens]
        num_ctas = decision.num_ctas if decision is not None else None
        if routing is not None and routing.replay:
            held = {t.shape[0] for t in routing.topi.values()}
            if held - {num_tokens}:
                raise TokenWeaveInputError(
                    f"the routing log was recorded for {sorted(held)} tokens, this batch has "
                    f"{num_tokens}"
                )
        self._bounds, self._routing = bounds, routing
        splits = list(itertools.pairwise(bounds))
        first_norm = self.layers[0].input_norm
        hiddens = [rmsnorm(x[a:b], first_norm, self.eps) for a, b in splits]
        sharded = variant in ("fused", "tokenweave") and self.distributed
        residuals = []
        for a, b in splits:
            if sharded:
                lo, hi = shard_range(b - a, self.world_size, self.rank)
                residuals.append(x[a + lo : a + hi].clone())
            else:
                residuals.append(x[a:b].clone())

        gpu = sharded and uses_gpu_path(x, self.group)
        ws = self.workspace(num_tokens) if gpu else None

        def comm(split: int, partial: torch.Tensor, residual: torch.Tensor,
                 weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            if variant == "nocomm" or not self.distributed:
                return add_rmsnorm_(partial, residual, weight, self.eps), residual
            if variant == "sequential":
                return allreduce_add_rmsnorm(partial, residual, weight, self.eps, self.group)
            return fused_allreduce_rmsnorm(
                partial, residual, weight, self.eps, self.group, residual_mode="sharded",
                workspace=ws, channel=split, num_ctas=num_ctas,
            )

        checked: CommFn = comm
        if checks is not None and sharded:
            checked = boundary_checked(comm, checks, group=self.group, world_size=self.world_size,
                                       rank=self.rank, eps=self.eps)
        streams = self._streams(overlap=len(splits) > 1)
        try:
            hiddens, _ = run_weave(
                self.stages(), hiddens, residuals, checked, streams,
                out_buffer=lambda split, n: ws.input_buffer(n, split) if ws is not None else None,
                trace=trace,
            )
        finally:
            self._kv.clear()
            self._routing = None
        return torch.cat(hiddens, dim=0) if len(hiddens) > 1 else hiddens[0].clone()

    def _streams(self, *, overlap: bool) -> StreamPair:
        """Compute = the current stream (a capture stream under CUDA-graph capture); the comm
        stream is created once per model (a fresh stream per call would leak under capture)."""
        if self.device.type == "cuda" and overlap and self._comm_stream is None:
            low, high = torch.cuda.Stream.priority_range()
            self._comm_stream = torch.cuda.Stream(device=self.device, priority=min(low, high))
        return StreamPair(self.device, overlap=overlap, comm_stream=self._comm_stream)
