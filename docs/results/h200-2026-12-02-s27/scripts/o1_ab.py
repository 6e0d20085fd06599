# ruff: noqa
"""Session 27: ptxas -O1 against the default (-O3) for the planner's configurations: at -O3 ptxas
hoists the next K step's nibble extraction (SHF / LOP3) above the current step's wgmmas in most
per-step-commit configurations (16 / 44 ALU instructions between a wgmma wait and the next issue;
the paired 24-token items, faster, 28 / 33), at -O1 it does not (26 / 35). One GEMM at a time,
interleaved in one process, three timings, bit for bit. argv[1]: precompile [threads] | time."""
import dataclasses, json, math, os, sys

from chord_kernels.indexed import wgmma as W, planner as P
from chord_kernels.indexed.heuristics import choose_block_m
from chord_kernels.jit import CudaKernel

OLD_DIR = ".dev/s27/old"
_new_kernel = W.WgmmaConfig.kernel
USE = {"old": False}


def old_kernel(cfg):  # "old": the default -O3; "new": -O1 (kept the names of wf_ab.py)
    return CudaKernel(name="o1_wgmma", source=cfg.source(), entry=W.ENTRY, arch=W.ARCH, flags=("-Xptxas", "-O1"))


_old = {}


def _kernel(self):
    if not USE["old"]:
        if self not in _old:
            _old[self] = old_kernel(self)
        return _old[self]
    return _new_kernel(self)


W.WgmmaConfig.kernel = _kernel

# (name, experts, N, K, slots, top_k, gate_up)
EP8 = [(f"ep8_tok{t}_{g}", 48, 4096 if g == "gu" else 7168, 7168 if g == "gu" else 2048, 48 * t, 1, g == "gu")
       for t in (12, 16, 20, 32, 43, 64) for g in ("gu", "dn")]
TP8 = [(f"tp8_{m}_{g}", 384, 512 if g == "gu" else 7168, 7168 if g == "gu" else 256, 8 * m, 8, g == "gu")
       for m in (1024, 2048) for g in ("gu", "dn")]
CASES = EP8 + TP8


class _W:  # what choose_block_m reads
    def __init__(s, e):
        s.num_experts, s.profile = e, ("h200_tp8" if e == 384 else "h200_ep8")


def configs(case):
    name, e, n, k, slots, top_k, gu = case
    bm = choose_block_m(_W(e), slots)
    cfg = P._rows_config(n, k, bm, slots / e)
    out = {"new": (bm, cfg)}
    if name.startswith("ep8_tok12_gu") or name.startswith("ep8_tok16_gu"):
        one = dataclasses.replace(cfg, items=1)
        out["one_new"] = (bm, one)
    return out


def wgmma_cfgs():
    found = set()
    for case in CASES:
        for bm, cfg in configs(case).values():
            if isinstance(cfg, W.WgmmaConfig):
                found.add(dataclasses.replace(cfg, silu_mul=True) if case[6] else cfg)
    return found


if sys.argv[1] == "precompile":
    from concurrent.futures import ThreadPoolExecutor
    cs = sorted(wgmma_cfgs(), key=str)
    USE["old"] = True
    ks = [c.kernel() for c in cs] + [old_kernel(c) for c in cs]
    USE["old"] = False
    with ThreadPoolExecutor(int(sys.argv[2]) if len(sys.argv) > 2 else 2) as ex:
        list(ex.map(lambda k: k.compile("sm_90a"), ks))
    print(len(ks), "kernels")
    sys.exit(0)

import torch
import chord_kernels
from chord_kernels.indexed.api import run_gemm
from chord_kernels.formats import random_quantized
from chord_kernels.routing import align_block_size
from chord_bench.timing import interleaved

dev = torch.device("cuda")
OUT = os.environ.get("OUT", "/tmp")
ROUNDS = int(os.environ.get("ROUNDS", "9"))
res = []
for case in CASES:
    name, e, n, k, slots, top_k, gu = case
    g = torch.Generator(device=dev).manual_seed(slots + n)
    w = chord_kernels.pack("indexed", *random_quantized(e, n, k, generator=g, device=dev),
                           profile="h200_tp8" if e == 384 else "h200_ep8")
    tokens = slots // top_k
    a = (torch.randn(tokens, k, generator=g, device=dev) * 0.5).to(torch.bfloat16)
    ids = torch.rand(tokens, e, generator=g, device=dev).argsort(dim=1)[:, :top_k].to(torch.int32).contiguous()
    counts = torch.bincount(ids.reshape(-1).long(), minlength=e)
    fns, outs, label = {}, {}, {}
    for tag, (bm, cfg) in configs(case).items():
        r = align_block_size(ids, bm, e)
        route = (r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded)
        for hdr in ("old", "new"):
            t = tag.replace("new", hdr)
            outs[t] = torch.full((slots, n // 2 if gu else n), float("nan"), dtype=torch.bfloat16, device=dev)

            def fn(out=outs[t], cfg=cfg, route=route, bm=bm, old=hdr == "old"):
                USE["old"] = old
                run_gemm(a, w, route, block_m=bm, top_k=top_k, out=out, config=cfg,
                         activation="silu" if gu else None, zero_nonlocal=False)
                USE["old"] = False
            fns[t] = fn
            label[t] = str(cfg.template_args() if isinstance(cfg, W.WgmmaConfig) else cfg)
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    same = {t: torch.equal(outs["new"] if not t.startswith("one") else outs["one_new"], o) for t, o in outs.items()}
    same_pairs = torch.equal(outs["new"], outs["one_new"]) if "one_new" in outs else None
    runs = []
    for rep in range(3):
        order = list(fns) if rep % 2 == 0 else list(fns)[::-1]
        tm = interleaved({t: fns[t] for t in order}, rounds=ROUNDS)
        runs.append({t: tm[t].median_us() for t in fns})
    res.append({"name": name, "us": runs, "configs": label, "same_as_new": same, "pairs_vs_one_same": same_pairs,
                "max_rows": int(counts.max())})
    line = f"{name:14s} old " + " ".join(f"{r['old']:6.1f}" for r in runs) + " | new " + " ".join(
        f"{r['new'] / r['old'] - 1:+.1%}" for r in runs)
    if "one_old" in fns:
        line += " | one_old " + " ".join(f"{r['one_old'] / r['old'] - 1:+.1%}" for r in runs)
        line += " | one_new " + " ".join(f"{r['one_new'] / r['old'] - 1:+.1%}" for r in runs)
    line += ("" if all(same.values()) else " DIFF") + f" | max rows {int(counts.max())} | {label['new']}"
    print(line, flush=True)
    json.dump(res, open(f"{OUT}/o1_ab.json", "w"), indent=1)
