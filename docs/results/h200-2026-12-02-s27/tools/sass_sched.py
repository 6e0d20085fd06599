# ruff: noqa
import re, sys
from collections import Counter
def steps(path, width=None):
    ops=[]
    for l in open(path):
        if re.match(r'\s+/\*[0-9a-f]{4}\*/',l):
            ops.append(re.sub(r'^\s+/\*[0-9a-f]+\*/\s+','',l).split(';')[0].strip())
    # segments between DEPBAR and next ARRIVE: the ALU work issued while one wgmma group is in flight (overlap),
    # and between ARRIVE... we count per step: alu between previous DEPBAR and this step's first HGMMA
    res=[]
    last_dep=None
    for i,s in enumerate(ops):
        if 'WARPGROUP.DEPBAR' in s: last_dep=i
        if 'HGMMA' in s and (width is None or f'x{width}x' in s) and last_dep is not None and 'HGMMA' not in ops[i-1]:
            seg=ops[last_dep+1:i]
            alu=sum(1 for x in seg if re.match(r'(@\S+\s+)?(LOP3|SHF|HADD2|HMUL2|PRMT|IMAD|IADD3|LEA)',x))
            res.append(alu)
            last_dep=None
    return res
if __name__ == "__main__":
  for p in sys.argv[1:]:
    r=steps(p)
    c=Counter(r)
    print(p.split('/')[-1], "steps", len(r), "ALU between wait and next wgmma issue:", sorted(c.items()))
