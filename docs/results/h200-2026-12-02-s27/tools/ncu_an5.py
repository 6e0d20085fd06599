# ruff: noqa
exec(open("ncu_an2.py").read().split("for name in")[0])
for name in ("one","pairs"):
    hdr,d=load(f"source_{name}.csv")
    idx=[i for i,r in enumerate(d) if "HGMMA.64x24" in r["Source"]]
    # one K group: between the 5th and 7th HGMMA (2 steps)
    a,b=idx[4]-2, idx[8]+2
    print("==",name)
    for i in range(a,b):
        r=d[i]
        print(f"{i:5d} {r['Source'].strip()[:58]:58s} s{num(r['Warp Stall Sampling (All Samples)']):5.0f} math{num(r['stall_math']):4.0f} ns{num(r['stall_not_selected']):4.0f} w{num(r['stall_wait']):4.0f} d{num(r['stall_dispatch']):4.0f} sb{num(r['stall_short_sb']):4.0f} sel{num(r['stall_selected']):4.0f}")
