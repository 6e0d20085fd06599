# ruff: noqa
import re,sys
from collections import Counter
def analyze(path):
    lines=[l for l in open(path) if re.match(r'\s+/\*[0-9a-f]{4}\*/',l)]
    ops=[]
    for l in lines:
        s=re.sub(r'^\s+/\*[0-9a-f]+\*/\s+','',l).split(';')[0].strip()
        ops.append(s)
    idx=[i for i,s in enumerate(ops) if 'HGMMA' in s]
    # K-loop spans: consecutive HGMMAs within 120 instrs
    inside=Counter(); n=0
    for a,b in zip(idx,idx[1:]):
        if b-a<=120:
            for s in ops[a+1:b]:
                o=s.split()[0]
                if o.startswith('@'): o=s.split()[1]
                inside[o.split('.')[0]]+=1
    nh=len(idx)
    u=sum(v for k,v in inside.items() if k.startswith('U'))
    tot=sum(inside.values())
    return nh, tot/nh if nh else 0, u/nh if nh else 0, inside
if __name__=="__main__":
    for p in sys.argv[1:]:
        nh,t,u,c=analyze(p)
        print(f"{p}: hgmma {nh} instr/hgmma {t:.1f} uniform/hgmma {u:.2f}", dict((k,v) for k,v in c.items() if k.startswith('U')))
