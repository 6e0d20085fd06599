# ruff: noqa
"""Session 72: the kernels of test_four_consumer_runs_bit_identical_to_two (its four configurations, gathered rows and
tensor copies) and test_runs_bit_identical_to_items, compiled here for the device run."""
import dataclasses, sys
from concurrent.futures import ThreadPoolExecutor
from chord_kernels.indexed.wgmma import choose_wgmma_config

n, k = 7168, 256
ks = {}
for bm, tok_e in [(32, 21.3), (40, 26.7), (56, 42.7), (96, 85.0), (104, 100.0), (64, 100.0)]:
    four = choose_wgmma_config(n, k, bm, tok_e)
    two = dataclasses.replace(four, consumers=2, mt=2, pingpong=True, consumer_regs=208, stages=2)
    for cfg in (four, two, dataclasses.replace(four, stream_out=False), dataclasses.replace(four, pingpong=True)):
        for c in (cfg, cfg.with_tma_rows()):
            kk = c.kernel()
            ks[(kk.source, kk.flags)] = kk
print(len(ks), "kernels", flush=True)
with ThreadPoolExecutor(int(sys.argv[1]) if len(sys.argv) > 1 else 2) as ex:
    list(ex.map(lambda kk: kk.compile("sm_90a"), ks.values()))
