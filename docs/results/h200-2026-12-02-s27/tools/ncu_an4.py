# ruff: noqa
exec(open("ncu_an2.py").read().split("for name in")[0])
for name in ("one","pairs"):
    hdr,d=load(f"source_{name}.csv")
    top=sorted(enumerate(d), key=lambda x:-num(x[1]["stall_long_sb"]))[:8]
    print("==",name)
    for i,r in sorted(top):
        print(f"{i:6d} {r['Source'].strip()[:60]:60s} samp {num(r['Warp Stall Sampling (All Samples)']):6.0f} exec {num(r['Instructions Executed']):9.0f} lsb {num(r['stall_long_sb']):5.0f}")
        if "BRA" in r["Source"]:
            for j in range(i-3,i):
                print(f"        {d[j]['Source'].strip()[:70]}")
