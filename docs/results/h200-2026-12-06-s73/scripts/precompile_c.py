# ruff: noqa
"""Session 73 call c: the four-warpgroup runs' kernels of the new plan (runs of four N tiles, dynamic) at every block TP8's
down plans them, with tensor copies and with gathered rows, with and without streamed output, compiled here."""
import dataclasses, sys
from concurrent.futures import ThreadPoolExecutor
from chord_kernels.indexed.wgmma import choose_wgmma_config

ks = {}
for bm, tok_e in [(32, 21.3), (40, 26.7), (48, 32.0), (56, 42.7), (72, 53.3), (80, 64.0), (88, 90.0), (96, 170.7),
                  (104, 85.3), (64, 106.7), (64, 213.3), (64, 256.0)]:
    cfg = choose_wgmma_config(7168, 256, bm, tok_e)
    assert cfg.n_run == 4 and cfg.dynamic and cfg.consumers == 4, cfg
    for c in (cfg, dataclasses.replace(cfg, stream_out=False)):
        for c2 in (c, c.with_tma_rows()):
            kk = c2.kernel()
            ks[(kk.source, kk.flags)] = kk
# test_four_consumer_runs_bit_identical_to_two's configurations (with the strided runs of seven, the plan before)
for bm, tok_e in [(32, 21.3), (40, 26.7), (56, 42.7), (96, 85.0), (104, 100.0), (64, 100.0)]:
    four = choose_wgmma_config(7168, 256, bm, tok_e)
    two = dataclasses.replace(four, consumers=2, mt=2, pingpong=True, consumer_regs=208, stages=2)
    for cfg in (four, two, dataclasses.replace(four, stream_out=False), dataclasses.replace(four, dynamic=False, n_run=7)):
        for c in (cfg, cfg.with_tma_rows()):
            kk = c.kernel()
            ks[(kk.source, kk.flags)] = kk
print(len(ks), "kernels", flush=True)
with ThreadPoolExecutor(int(sys.argv[1]) if len(sys.argv) > 1 else 2) as ex:
    list(ex.map(lambda kk: kk.compile("sm_90a"), ks.values()))
