"""Run every Python block of docs/getting-started.md in order, then check the GPU layer against
the reference."""
import re

src = open("docs/getting-started.md").read()
ns: dict = {}
for block in re.findall(r"```python\n(.*?)```", src, re.S):
    exec(block, ns)
from chord_kernels import reference  # noqa: E402

want = reference.moe_layer(ns["hidden"], ns["w13"], ns["w2"], ns["topk_weights"], ns["topk_ids"]).float()
err = ((ns["out"].float().cpu() - want).norm() / want.norm()).item()
print("getting-started blocks ran; fused_moe out", tuple(ns["out"].shape), ns["out"].dtype, "rel err", err)
assert err < 1e-2
