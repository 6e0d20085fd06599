# ruff: noqa
import csv, sys, re
from collections import defaultdict
def load(f):
    rows=list(csv.reader(open(f)))
    hdr=rows[1]; data=[dict(zip(hdr,r)) for r in rows[2:] if len(r)==len(hdr)]
    return hdr,data
def num(x):
    try: return float(x)
    except: return 0.0
for name in ("one","pairs"):
    hdr,d=load(f"source_{name}.csv")
    stalls=[h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
    tot_exec=sum(num(r["Instructions Executed"]) for r in d)
    tot_samp=sum(num(r["Warp Stall Sampling (All Samples)"]) for r in d)
    print(name, "instr executed", tot_exec, "samples", tot_samp)
    agg={s:sum(num(r[s]) for r in d) for s in stalls}
    print("  ", {k:int(v) for k,v in sorted(agg.items(), key=lambda x:-x[1])[:10]})
    # per opcode executed
    op=defaultdict(float); ops=defaultdict(float)
    for r in d:
        o=r["Source"].split()
        if not o: continue
        o=o[1] if o[0].startswith("@") else o[0]
        o=o.split(".")[0]
        op[o]+=num(r["Instructions Executed"]); ops[o]+=num(r["Warp Stall Sampling (All Samples)"])
    globals()[name]=(op,ops,d)
op1,s1,d1=one; op2,s2,d2=pairs
print(f"{'op':10s} {'exec one':>12s} {'exec pairs':>12s} {'diff':>10s} {'samp one':>9s} {'samp pairs':>9s}")
for o in sorted(set(op1)|set(op2), key=lambda o: -abs(op1.get(o,0)-op2.get(o,0)))[:25]:
    print(f"{o:10s} {op1.get(o,0):12.0f} {op2.get(o,0):12.0f} {op1.get(o,0)-op2.get(o,0):10.0f} {s1.get(o,0):9.0f} {s2.get(o,0):9.0f}")
