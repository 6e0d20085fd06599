# ruff: noqa
"""Session 46: wide items of 16-row blocks (up to ten per item, K loops at 8, 9, 10 blocks = 128 / 144 / 160 tokens)
for the contiguous mode, against the 32-row blocks in fives (2, 4, 5): ptxas, and (with a GPU) an interleaved A/B
on Poisson rows, the same bits."""
import dataclasses, json, os, re, sys
from concurrent.futures import ThreadPoolExecutor
from chord_kernels.indexed.wgmma import _wide_items, block_rows_wide_config, WIDE_CONSUMER_REGS

SHAPES = ((4096, 7168), (7168, 2048))
VARIANTS = {"w16_8_9_10": (16, 10, (8, 9, 10)), "w16_4_8_9_10": (16, 10, (4, 8, 9, 10)), "w16_6_8_9_10": (16, 10, (6, 8, 9, 10))}


def configs(name, n, k, silu=False):
    bm, items, widths = VARIANTS[name]
    c = dataclasses.replace(_wide_items(n, k, bm, items, widths, WIDE_CONSUMER_REGS, tma_rows=True), subnormal=True)
    return dataclasses.replace(c, silu_mul=True) if silu else c


if __name__ == "__main__" and sys.argv[1] == "ptxas":
    from chord_kernels.jit import CudaKernel
    todo = [(v, n, k, configs(v, n, k)) for v in sys.argv[2:] for n, k in SHAPES]
    def go(t):
        v, n, k, c = t
        kern = CudaKernel(name="w16_check", source=c.source(), entry=c.kernel().entry, flags=("-Xptxas", "-v"))
        log = json.loads(kern.compile("sm_90a").with_suffix(".json").read_text())["log"]
        spills = re.findall(r"(\d+) bytes spill", log)
        ser = "C7512" in log or "C7511" in log
        return f"{v} {n}x{k}: spills {spills} serialized {ser}"
    with ThreadPoolExecutor(2) as p:
        for line in p.map(go, todo):
            print(line, flush=True)


if __name__ == "__main__" and sys.argv[1] == "compile":  # what the A/B launches (random weights: one-fma twins)
    todo = [configs(v, n, k, silu) for v in sys.argv[2:] for n, k in SHAPES for silu in (False, True)]
    with ThreadPoolExecutor(2) as p:
        list(p.map(lambda c: c.kernel().compile("sm_90a"), todo))
    print(len(todo), "compiled")


if __name__ == "__main__" and sys.argv[1] == "ab":
    import torch
    import chord_kernels
    from chord_kernels import grouped, indexed, routing
    from chord_kernels.formats import random_quantized
    from chord_kernels.indexed.api import ContiguousRows, run_gemm
    from chord_bench.timing import interleaved

    dev = torch.device("cuda")
    OUT = os.environ.get("OUT", "/tmp")
    variants = sys.argv[2:]
    res = []
    points = [int(x) for x in os.environ.get("POINTS", "121,128,135,142,150").split(",")]
    for per_expert, seed in [(p, s) for p in points for s in range(int(os.environ.get("DRAWS", "1")))]:
        for gname, (n, k), act in (("gate_up", SHAPES[0], None), ("gate_up+silu", SHAPES[0], "silu"), ("down", SHAPES[1], None)):
            if act and not os.environ.get("SILU"):
                continue
            e = 48
            g = torch.Generator(device=dev).manual_seed(n + per_expert + 1000 * seed)
            ids = torch.randint(0, e, (e * per_expert,), generator=g, device=dev, dtype=torch.int32).view(-1, 1)
            layout = routing.contiguous_layout(ids, e)
            real = layout.row_slots >= 0
            m = layout.m_indices.numel()
            w = chord_kernels.pack("contiguous", *random_quantized(e, n, k, generator=g, device=dev), profile="h200_ep8")
            a = (torch.randn(m, k, generator=g, device=dev) * 0.5).to(torch.bfloat16)
            ws = indexed.new_workspace(indexed.max_workspace_bytes(w, device=dev) * 4, dev)
            cfgs = {"w32": block_rows_wide_config(n, k), **{v: dataclasses.replace(configs(v, n, k), subnormal=False) for v in variants}}
            n_out = n // 2 if act else n
            outs = {t: torch.full((m, n_out), float("nan"), dtype=torch.bfloat16, device=dev) for t in ("plan64", *cfgs)}
            fns = {"plan64": lambda: grouped.contiguous(a, w, layout.m_indices, out=outs["plan64"], workspace=ws, activation=act)}
            for t, c in cfgs.items():
                fns[t] = (lambda t=t, c=c: run_gemm(a, w, ContiguousRows(layout.m_indices), block_m=c.block_m, top_k=1,
                                                     out=outs[t], workspace=ws, block_rows=True, config=c, activation=act))
            for f in fns.values():
                f()
            torch.cuda.synchronize()
            same = all(torch.equal(outs["plan64"][real], o[real]) for o in outs.values())
            clean = all(not o[real].isnan().any() and o[~real].isnan().all() for o in outs.values())
            runs = []
            for rep in range(5):
                order = list(fns) if rep % 2 == 0 else list(fns)[::-1]
                tm = interleaved({t: fns[t] for t in order}, rounds=11)
                runs.append({t: tm[t].median_us() for t in fns})
            res.append({"per_expert": per_expert, "draw": seed, "gemm": gname, "m": m, "us": runs, "same": same, "clean": clean,
                        "configs": {t: str(c) for t, c in cfgs.items()}})
            line = f"{per_expert:4d}/{seed} {gname:12s} w32 " + " ".join(f"{x['w32']:7.1f}" for x in runs)
            for t in ("plan64", *variants):
                line += f" | {t} " + " ".join(f"{100 * (x[t] / x['w32'] - 1):+5.1f}" for x in runs)
            print(line + " %" + ("" if same and clean else " DIFF/NAN"), flush=True)
            json.dump(res, open(f"{OUT}/w16_ab.json", "w"), indent=1)
