# ruff: noqa
import csv
exec(open("ncu_an2.py").read().split("for name in")[0])
for name in ("one","pairs"):
    hdr,d=load(f"source_{name}.csv")
    idx=[i for i,r in enumerate(d) if "HGMMA.64x24" in r["Source"]]
    a,b=idx[0]-60, idx[-1]+5
    rest=[(i,r) for i,r in enumerate(d) if not a<=i<b]
    top=sorted(rest, key=lambda x:-num(x[1]["Warp Stall Sampling (All Samples)"]))[:14]
    print("==",name, a, b)
    for i,r in sorted(top):
        print(f"{i:6d} {r['Source'].strip()[:70]:70s} samp {num(r['Warp Stall Sampling (All Samples)']):6.0f} exec {num(r['Instructions Executed']):9.0f} lsb {num(r['stall_long_sb']):5.0f}")
