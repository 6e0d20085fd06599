# ruff: noqa
import csv, sys
from collections import defaultdict
def num(x):
    try: return float(x)
    except: return 0.0
def load(f):
    rows=list(csv.reader(open(f))); hdr=rows[1]
    return hdr,[dict(zip(hdr,r)) for r in rows[2:] if len(r)==len(hdr)]
for name in ("one","pairs"):
    hdr,d=load(f"source_{name}.csv")
    stalls=[h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
    idx=[i for i,r in enumerate(d) if "HGMMA.64x24" in r["Source"]]
    a,b=idx[0]-60, idx[-1]+5
    reg=d[a:b]
    agg={s:sum(num(r[s]) for r in reg) for s in stalls}
    tot=sum(num(r["Warp Stall Sampling (All Samples)"]) for r in reg)
    allt=sum(num(r["Warp Stall Sampling (All Samples)"]) for r in d)
    print(name, "kloop samples", tot, "of", allt, "exec", sum(num(r["Instructions Executed"]) for r in reg))
    print("  ", {k[6:]:int(v) for k,v in sorted(agg.items(), key=lambda x:-x[1])[:9]})
    rest=[r for i,r in enumerate(d) if not a<=i<b]
    agg2={s:sum(num(r[s]) for r in rest) for s in stalls}
    print("  rest", {k[6:]:int(v) for k,v in sorted(agg2.items(), key=lambda x:-x[1])[:9]}, "exec", sum(num(r["Instructions Executed"]) for r in rest))
