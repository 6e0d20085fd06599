"""One-call device check of the indexed decode kernel (H200): compile, GPU tests, sanitizers, sweeps, ncu.

    PYTHONPATH=packages/chord-kernels/src:packages/chord-bench/src python3 ci/indexed_check.py --out $OUT

Prints a short table last and writes ``indexed_check.json`` to ``--out``. This script orchestrates;
the benchmark knowledge lives in chord_bench: scenarios, routing draws, seeded weights and
problems (``chord_bench.problems``), floors (``GemmCost.floor_us``), the output check against the
reference, Chord's candidate with an overridden configuration (``ChordIndexedImpl.candidate``) and
the interleaved CUDA-graph timing (``chord_bench.timing``). The sweep below only chooses which
configurations to try besides the default.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ("ep8_decode", "tp8_decode160", "ep8_tok16", "tp8_1024", "ep8_tok43", "tp8_8192")
"""chord_bench scenario ids the sweep and the summary cover."""
SANITIZE_SNIPPET = r"""
import torch, chord_kernels
from chord_kernels.formats import random_quantized
from chord_kernels.indexed import gemm
from chord_kernels.routing import align_block_size
g = torch.Generator(device="cuda").manual_seed(1)
# The last three shapes take the wide configs (256-, 128- and 192-channel tiles, balanced schedule, split items).
for e, n, k, m, top_k, bm, mapped in [(6, 40, 96, 9, 2, 8, False), (8, 64, 320, 12, 3, 16, True),
                                      (6, 264, 1056, 20, 2, 8, True), (6, 200, 1056, 40, 3, 24, True),
                                      (4, 264, 1056, 90, 2, 64, True)]:
    pw = chord_kernels.pack("indexed", *random_quantized(e, n, k, generator=g, device="cuda"), profile="h200_ep8")
    ge = 4 * e if mapped else e
    emap = None
    if mapped:
        emap = torch.full((ge,), -1, dtype=torch.int32, device="cuda")
        emap[::4] = torch.arange(e, dtype=torch.int32, device="cuda")
    ids = torch.randint(0, ge, (m, top_k), generator=g, device="cuda")
    r = align_block_size(ids, bm, ge, emap)
    a = torch.randn(m, k, generator=g, device="cuda").to(torch.bfloat16)
    tw = torch.rand(m, top_k, generator=g, device="cuda")
    gemm(a, pw, r.sorted_token_ids, r.expert_ids, r.num_tokens_post_padded, block_m=bm, top_k=top_k, topk_weights=tw)
torch.cuda.synchronize()
print("sanitize target ok")
"""


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def environment() -> dict:
    info = {"date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "torch": torch.__version__, "python": sys.version.split()[0],
            "gpu": torch.cuda.get_device_name(0), "sms": torch.cuda.get_device_properties(0).multi_processor_count}
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
        info["driver"] = out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        info["driver"] = "unknown"
    return info


def run_tests(env: dict) -> dict:
    t0 = time.time()
    cmd = [sys.executable, "-m", "pytest", "-q", "-m", "gpu", "packages/chord-kernels/tests", "-p", "no:cacheprovider"]
    try:
        out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
    except subprocess.TimeoutExpired as exc:
        print(str(exc.stdout or "")[-3000:], flush=True)
        return {"rc": "timeout", "summary": "pytest timed out after 300 s", "seconds": 300}
    text = out.stdout + out.stderr
    print(text[-6000:], flush=True)
    summary = [line for line in text.splitlines() if " passed" in line or " failed" in line or " error" in line]
    return {"rc": out.returncode, "summary": summary[-1] if summary else text[-300:], "seconds": round(time.time() - t0, 1)}


def hazard_pairs(text: str) -> dict[str, int]:
    """Racecheck hazards counted by kind and (writing function, reading function): the producer ->
    consumer pairs are mbarrier-ordered (racecheck does not model mbarriers); any other pair is a
    real finding."""
    import re
    from collections import Counter

    def function(line: str) -> str:
        return re.sub(r"<.*", "", line.split(" at ", 1)[-1]).replace("void ", "").strip()

    pairs: Counter = Counter()
    hazard: dict[str, str] = {}

    def flush() -> None:
        if hazard:
            pairs[f"{hazard.get('kind')} {hazard.get('write')} -> {hazard.get('read')}"] += 1
            hazard.clear()

    for line in text.splitlines():
        if "hazard detected" in line:
            flush()
            hazard["kind"] = line.split("Potential ", 1)[-1].split(" hazard", 1)[0]
        elif "Write Thread" in line and hazard:
            hazard["write"] = function(line)
        elif "Read Thread" in line and hazard:
            hazard["read"] = function(line)
    flush()
    return dict(pairs)


def run_sanitizers(env: dict, checks: tuple[str, ...] = ("memcheck", "racecheck")) -> dict:
    tool = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
    if not Path(tool).exists():
        return {"skipped": "compute-sanitizer not found"}
    results = {}
    for check in checks:
        t0 = time.time()
        extra = (["--report-api-errors", "no"] if check == "memcheck"
                 else ["--racecheck-report", "all", "--print-limit", "1000000"])
        try:
            out = subprocess.run([tool, "--tool", check, *extra, "--target-processes", "all", sys.executable, "-c",
                                  SANITIZE_SNIPPET], cwd=ROOT, capture_output=True, text=True, env=env, timeout=150)
        except subprocess.TimeoutExpired:
            results[check] = {"rc": "timeout"}
            continue
        text = out.stdout + out.stderr
        summary = [line for line in text.splitlines() if "ERROR SUMMARY" in line or "RACECHECK SUMMARY" in line]
        ok = "sanitize target ok" in text
        details = [line for line in text.splitlines() if line.startswith("=========")][:60]
        results[check] = {"rc": out.returncode, "target_ok": ok, "summary": summary[-3:],
                          "seconds": round(time.time() - t0, 1), "details": details,
                          "hazards_by_function": hazard_pairs(text)}
        print(f"{check}: rc={out.returncode} ok={ok} {summary[-3:]}", flush=True)
        print("\n".join(details[:40]), flush=True)
    return results


def graph_time_us(fn, launches: int = 10, reps: int = 15) -> float:
    from chord_bench.timing import GraphTimer

    timer = GraphTimer(fn, launches=launches)
    timer.run(reps)
    return timer.median_us()


_STREAM_SOURCE = r"""
#include "chord/common/ptx.cuh"

// Read-only streaming ceiling: 16-byte non-allocating loads, four in flight per thread.
extern "C" __global__ void __launch_bounds__(512) ldg_stream(const uint4* __restrict__ src, long long n,
                                                             unsigned* sink) {
  unsigned acc = 0;
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    uint4 v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                   : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w) : "l"(src + i + u * stride));
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n; i += stride) acc ^= src[i].x;
  if (acc == 0x9e3779b9u) sink[0] = acc;
}

// Bulk-copy streaming: one thread keeps `stages` chunks of `chunk` bytes in flight per CTA.
extern "C" __global__ void __launch_bounds__(32) bulk_stream(const unsigned char* __restrict__ src,
                                                             long long chunks, int chunk, int stages) {
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t base = chord::ptx::smem_addr(smem);
  const uint32_t bars = base + stages * chunk;
  if (threadIdx.x != 0) return;
  for (int s = 0; s < stages; ++s) chord::ptx::mbarrier_init(bars + 8 * s, 1);
  chord::ptx::fence_mbarrier_init();
  const uint64_t policy = chord::ptx::policy_evict_first();
  long long used = 0;
  for (long long c = blockIdx.x; c < chunks; c += gridDim.x, ++used) {
    const int s = static_cast<int>(used % stages);
    const uint32_t round = static_cast<uint32_t>(used / stages);
    if (round > 0) chord::ptx::mbarrier_wait(bars + 8 * s, (round - 1) & 1);
    chord::ptx::mbarrier_arrive_expect_tx(bars + 8 * s, chunk);
    chord::ptx::bulk_copy_g2s(base + s * chunk, src + c * chunk, chunk, bars + 8 * s, policy);
  }
  for (long long u = used > stages ? used - stages : 0; u < used; ++u) {
    chord::ptx::mbarrier_wait(bars + 8 * static_cast<int>(u % stages), static_cast<uint32_t>(u / stages) & 1);
  }
}
"""


def stream_ceilings() -> dict:
    """Read bandwidth this GPU reaches with plain loads and with 1-D bulk copies of various shapes."""
    from chord_kernels.jit import CudaKernel, i32, i64

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    nbytes = 2 << 30
    buf = torch.randint(-(1 << 31), (1 << 31) - 1, (nbytes // 4,), dtype=torch.int32, device="cuda")
    sink = torch.zeros(1, dtype=torch.int32, device="cuda")
    ldg = CudaKernel(name="stream_ldg", source=_STREAM_SOURCE, entry="ldg_stream")
    bulk = CudaKernel(name="stream_bulk", source=_STREAM_SOURCE, entry="bulk_stream")
    res: dict = {}
    us = graph_time_us(lambda: ldg.launch((sms * 4,), (512,), (buf, i64(nbytes // 16), sink)), launches=3, reps=5)
    res["ldg_read_tbps"] = round(nbytes / (us * 1e-6) / 1e12, 3)
    f = torch.empty(nbytes // 8, dtype=torch.float32, device="cuda")
    g = torch.empty_like(f)
    us = graph_time_us(lambda: g.copy_(f), launches=3, reps=5)
    res["torch_copy_tbps"] = round(2 * f.numel() * 4 / (us * 1e-6) / 1e12, 3)
    for chunk, stages, cps in ((1152, 8, 4), (2304, 6, 4), (4608, 6, 4), (9216, 3, 4), (9216, 5, 4),
                               (18432, 3, 3), (18432, 2, 4), (9216, 2, 8), (4608, 3, 8)):
        smem = chunk * stages + 8 * stages
        us = graph_time_us(lambda c=chunk, s=stages, k=cps, m=smem: bulk.launch(
            (sms * k,), (32,), (buf, i64(nbytes // c), i32(c), i32(s)), smem=m), launches=3, reps=5)
        res[f"bulk_{chunk}B_x{stages}_cta{cps}_tbps"] = round(nbytes // chunk * chunk / (us * 1e-6) / 1e12, 3)
    log(f"stream ceilings: {res}")
    return res


def sweep_variants(scenario_id: str, base, n: int, k: int) -> list[tuple[str, object]]:
    """Configurations to time besides the default ``base`` (a ``DecodeConfig``), per scenario."""
    from chord_kernels.indexed import choose_config
    from chord_kernels.indexed.heuristics import DecodeConfig, general_config, max_stages

    def deepest(block_m: int, **kw) -> DecodeConfig:
        fields = {"block_m": block_m, "warps": 4, "mt": 1, "bk": 256, "ctas_per_sm": 4, "schedule": "strided", **kw}
        stages = max_stages(block_m, warps=fields["warps"], mt=fields["mt"], bk=fields["bk"],
                            ctas_per_sm=fields["ctas_per_sm"])
        return DecodeConfig(**{"stages": stages, **fields})

    if scenario_id in ("ep8_decode", "tp8_decode160"):
        return [(s, dataclasses.replace(base, schedule=s)) for s in ("strided", "dynamic", "balanced")] + [
            ("w4mt2c4", deepest(base.block_m, schedule="balanced", mt=2, ctas_per_sm=4)),
            ("default2", base),  # the default again: what "equal" looks like in this run
        ]
    if scenario_id in ("ep8_tok16", "tp8_1024"):
        other = "balanced" if base.schedule == "strided" else "strided"
        return [(other, dataclasses.replace(base, schedule=other)),
                ("general", general_config(base.block_m)), ("bm32", choose_config(n, k, 32)),
                ("bm16", choose_config(n, k, 16)), ("general16", general_config(16))]
    if scenario_id in ("ep8_tok43", "tp8_8192"):
        bm64 = choose_config(n, k, 64)
        return [("bm64", bm64), ("bm64_str", dataclasses.replace(bm64, schedule="strided")),
                ("bm48", choose_config(n, k, 48))]
    return []


def bench(sweep: bool, seed: int, clocks=None) -> list[dict]:
    """Chord's default (and with ``sweep`` the variants) per GEMM of :data:`SCENARIOS`, each checked
    against the reference, then all timed in interleaved rounds (v1 v2 ... v1 v2 ...): the H200
    runs these kernels at its power cap, where the SM clock wanders by up to ~20 %, so back-to-back
    blocks of one variant would compare clock states, not kernels."""
    from chord_bench import scenarios as S
    from chord_bench.impls import ChordIndexedImpl
    from chord_bench.problems import WeightCache, scenario_problems
    from chord_bench.timing import interleaved
    from chord_kernels.indexed import DecodeConfig

    impl = ChordIndexedImpl()
    weights = WeightCache(seed, torch.device("cuda"))
    rows = []
    for sid in SCENARIOS:
        routing, problems = scenario_problems(S.SCENARIOS[sid], "uniform", seed, weights)
        for p in problems:
            default = impl.candidate(p)  # the configuration gemm plans; detail holds its fields
            base = DecodeConfig(**default.detail)
            variants = sweep_variants(sid, base, p.shape.n, p.shape.k) if sweep else []
            cands = {"default": default}
            for label, v in variants:
                try:
                    cands[label] = impl.candidate(p, v, label)
                except Exception as exc:  # keep benchmarking the other variants
                    log(f"{sid} {p.name} {label}: FAILED {type(exc).__name__}: {exc}")
            checked = {}
            for label, c in cands.items():
                try:
                    wrong = c.check(p)
                except Exception as exc:
                    wrong = f"{type(exc).__name__}: {exc}"
                if wrong:
                    log(f"{sid} {p.name} {label}: EXCLUDED {wrong}")
                    rows.append({"scenario": sid, "proj": p.name, "variant": label, "excluded": wrong})
                    continue
                checked[label] = c
            timers = interleaved({label: c.run for label, c in checked.items()}, rounds=5 if len(checked) > 1 else 3,
                                 clocks=clocks)
            floor_us = p.cost.floor_us(S.NOMINAL_H200)
            for label, timer in timers.items():
                us, mhz = timer.median_us(), timer.median_mhz()
                row = {"scenario": sid, "proj": p.name, "variant": label, "config": checked[label].detail,
                       "us": round(us, 2), "us_min": round(min(timer.samples), 2), "floor_us": round(floor_us, 2),
                       "frac_floor": round(floor_us / us, 3), "tbps": round(p.cost.bytes / (us * 1e-6) / 1e12, 3),
                       "active_experts": routing.experts_used, "slots": p.num_slots, "sm_mhz": mhz}
                rows.append(row)
                log(f"{sid:14s} {p.name:7s} {label:9s} {us:8.1f} us (min {min(timer.samples):7.1f})  floor "
                    f"{floor_us:7.1f}  {100 * floor_us / us:5.1f}%  {row['tbps']:.2f} TB/s  SM {mhz} MHz  "
                    f"{checked[label].config}")
            del cands, checked, timers
        del problems
        torch.cuda.empty_cache()
    return rows


def run_phase(phase: str, out_dir: Path, env: dict, timeout: int, extra: tuple[str, ...] = ()) -> dict:
    """Run one phase in a child process, so a hung kernel costs its timeout, not the whole check."""
    t0 = time.time()
    cmd = [sys.executable, __file__, "--phase", phase, "--out", str(out_dir), *extra]
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, timeout=timeout)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        rc = "timeout"
    result_file = out_dir / f"phase_{phase}.json"
    result = json.loads(result_file.read_text()) if result_file.exists() else {}
    log(f"phase {phase}: rc={rc} in {time.time() - t0:.0f} s")
    return {"rc": rc, "result": result}


def ncu_target(seed: int) -> None:
    """Two launches for ncu, default configs: ep8_decode gate_up, then tp8_decode160 down."""
    from chord_bench import scenarios as S
    from chord_bench.impls import ChordIndexedImpl
    from chord_bench.problems import WeightCache, scenario_problems

    impl = ChordIndexedImpl()
    weights = WeightCache(seed, torch.device("cuda"))
    for sid, gemm in (("ep8_decode", 0), ("tp8_decode160", 1)):
        _, problems = scenario_problems(S.SCENARIOS[sid], "uniform", seed, weights)
        impl.candidate(problems[gemm]).run()
        torch.cuda.synchronize()


NCU_SECTIONS = ("Speed Of Light Throughput", "Compute Workload Analysis", "Memory Workload Analysis",
                "Scheduler Statistics", "Warp State Statistics", "Occupancy", "Launch Statistics")
NCU_METRICS = ("Duration", "DRAM Throughput", "Memory Throughput", "Achieved Occupancy", "Theoretical Occupancy",
               "Registers Per Thread", "Executed Ipc Active", "Issue Slots Busy", "No Eligible", "Active Warps Per Scheduler",
               "Eligible Warps Per Scheduler", "Warp Cycles Per Issued Instruction", "SM Frequency", "DRAM Frequency",
               "Block Limit", "L2 Hit Rate", "One or More Eligible", "Stall", "L1/TEX Hit", "ALU", "FMA", "Tensor",
               "Waves Per SM", "Elapsed Cycles", "SM Busy", "Max Bandwidth", "Mem Busy")


def hottest_sass(csv_text: str, top: int = 25) -> list[str]:
    """The SASS lines with the most warp-stall samples, per kernel, from ``ncu --page source --csv``."""
    import csv
    import io

    out: list[str] = []
    rows = list(csv.reader(io.StringIO(csv_text)))
    header_at = [i for i, r in enumerate(rows) if r and any("Source" == c.strip() for c in r)]
    for n, start in enumerate(header_at):
        header = [c.strip() for c in rows[start]]
        end = header_at[n + 1] if n + 1 < len(header_at) else len(rows)
        samples_col = next((i for i, c in enumerate(header) if c.startswith("Warp Stall Sampling (All")), None)
        if samples_col is None:
            out.append(f"(ncu source page: no stall-sampling column in {header[:8]})")
            continue
        body = [r for r in rows[start + 1:end] if len(r) == len(header)]

        def samples(r: list[str], col: int = samples_col) -> float:
            try:
                return float(r[col].replace(",", ""))
            except ValueError:
                return 0.0

        total = sum(samples(r) for r in body) or 1.0
        out.append(f"-- kernel {n}: {len(body)} SASS lines, {total:.0f} stall samples; hottest:")
        addr_col = next((i for i, c in enumerate(header) if c == "Address"), 0)
        src_col = header.index("Source")
        for r in sorted(body, key=samples, reverse=True)[:top]:
            out.append(f"{100 * samples(r) / total:5.1f}%  {r[addr_col]}  {r[src_col].strip()[:90]}")
    return out


def run_ncu(env: dict, out_dir: Path, seed: int) -> dict:
    tool = shutil.which("ncu") or "/usr/local/cuda/bin/ncu"
    if not Path(tool).exists():
        return {"skipped": "ncu not found"}
    t0 = time.time()
    report = Path("/tmp/chord_indexed_ncu")
    cmd = [tool, "--clock-control", "none", "--set", "full", "-k", "regex:chord_indexed", "-c", "2", "-f",
           "-o", str(report), sys.executable, __file__, "--phase", "ncu_target", "--seed", str(seed),
           "--out", str(out_dir)]
    try:
        out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env, timeout=120)
    except subprocess.TimeoutExpired:
        return {"rc": "timeout"}
    result: dict = {"rc": out.returncode, "log": (out.stdout + out.stderr)[-2000:]}
    keep: list[str] = []
    for page, extra in (("details", ["--print-details", "all"]), ("raw", []),
                        ("source", ["--print-source", "sass", "--csv"])):
        try:
            text = subprocess.run([tool, "-i", f"{report}.ncu-rep", "--page", page, *extra], capture_output=True,
                                  text=True, timeout=60).stdout
        except subprocess.TimeoutExpired:
            continue
        (out_dir / f"ncu_{page}.txt").write_text(text)
        if page == "details":
            section = ""
            for line in text.splitlines():
                if "Section:" in line or "chord_indexed" in line:
                    section = line.strip()
                    if "chord_indexed" in line:
                        keep.append(line.rstrip())
                    continue
                if any(x in section for x in NCU_SECTIONS) and any(m in line for m in NCU_METRICS):
                    keep.append(line.rstrip())
        elif page == "raw":
            keep += [line.rstrip() for line in text.splitlines()
                     if "issue_stalled" in line and "ratio" in line and "average" in line]
        else:
            keep += hottest_sass(text)
    print("\n== ncu (default configs: ep8_decode gate_up, then tp8_decode160 down) ==\n" + "\n".join(keep[:200]), flush=True)
    result.update(seconds=round(time.time() - t0, 1), lines=keep)
    return result


def smoke() -> dict:
    exec(compile(SANITIZE_SNIPPET, "smoke", "exec"), {})
    return {"ok": True}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    parser.add_argument("--phase", choices=("smoke", "bench", "ncu_target"), default=None)
    parser.add_argument("--seed", type=int, default=0, help="chord_bench seed of weights, activations and routing")
    parser.add_argument("--skip-tests", action="store_true")
    parser.add_argument("--skip-sanitizers", action="store_true")
    parser.add_argument("--no-sweep", action="store_true")
    parser.add_argument("--stream-ceilings", action="store_true",
                        help="also measure read-only and bulk-copy streaming ceilings (docs/optimization.md)")
    parser.add_argument("--sanitizers", default="memcheck,racecheck",
                        help="comma-separated compute-sanitizer tools to run")
    parser.add_argument("--ncu", action="store_true",
                        help="profile ep8_decode gate_up and tp8_decode160 down (defaults) with ncu --set full")
    opts = parser.parse_args()
    out_dir = Path(opts.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    if opts.phase == "ncu_target":
        ncu_target(opts.seed)
        return 0
    if opts.phase == "smoke":
        (out_dir / "phase_smoke.json").write_text(json.dumps(smoke()))
        return 0
    if opts.phase == "bench":
        from chord_bench import ceilings
        from chord_bench.clocks import ClockSampler, cuda_uuid

        measured = ceilings.measure()
        rows: dict = {"ceilings": dataclasses.asdict(measured)}
        if opts.stream_ceilings:
            rows["stream_ceilings"] = stream_ceilings()
        log(f"ceilings: {rows['ceilings']}")
        with ClockSampler(torch.cuda.current_device(), uuid=cuda_uuid(torch.cuda.current_device())) as clocks:
            rows["bench"] = bench(sweep=not opts.no_sweep, seed=opts.seed, clocks=clocks)
        rows["clocks"] = clocks.summary()
        log(f"clocks: {rows['clocks']}")
        (out_dir / "phase_bench.json").write_text(json.dumps(rows))
        return 0

    env = dict(os.environ)
    env.setdefault("PYTHONPATH", os.pathsep.join(str(ROOT / "packages" / p / "src") for p in ("chord-kernels", "chord-bench")))
    report: dict = {"env": environment()}
    log(f"env: {report['env']}")

    from chord_kernels.families import precompile

    t0 = time.time()
    precompile()
    report["compile_s"] = round(time.time() - t0, 1)
    log(f"default configs compiled in {report['compile_s']} s")

    report["smoke"] = run_phase("smoke", out_dir, env, timeout=90)
    if report["smoke"]["rc"] != 0:
        (out_dir / "indexed_check.json").write_text(json.dumps(report, indent=1))
        print(f"SMOKE FAILED ({report['smoke']}); skipping tests and benchmarks")
        return 1
    if not opts.skip_tests:
        report["tests"] = run_tests(env)
        log(f"tests: {report['tests']}")
    if not opts.skip_sanitizers:
        report["sanitizers"] = run_sanitizers(env, tuple(c for c in opts.sanitizers.split(",") if c))
    extra = ("--seed", str(opts.seed), *(("--no-sweep",) if opts.no_sweep else ()),
             *(("--stream-ceilings",) if opts.stream_ceilings else ()))
    bench_phase = run_phase("bench", out_dir, env, timeout=300, extra=extra)
    for key in ("ceilings", "stream_ceilings", "clocks"):
        report[key] = bench_phase["result"].get(key)
    report["bench"] = bench_phase["result"].get("bench", [])
    report["bench_rc"] = bench_phase["rc"]
    if opts.ncu:
        report["ncu"] = run_ncu(env, out_dir, opts.seed)
    (out_dir / "indexed_check.json").write_text(json.dumps(report, indent=1))

    print("\n== indexed decode kernel, H200, CUDA-graph median per GEMM (interleaved rounds) ==")
    print(f"{'scenario':14s} {'proj':7s} {'variant':9s} {'us':>8s} {'floor':>7s} {'%floor':>6s} {'TB/s':>5s} {'SM MHz':>6s}")
    default: dict[tuple[str, str], dict] = {}
    for row in report["bench"]:
        if "excluded" in row:
            print(f"{row['scenario']:14s} {row['proj']:7s} {row['variant']:9s} EXCLUDED: {row['excluded']}")
            continue
        print(f"{row['scenario']:14s} {row['proj']:7s} {row['variant']:9s} {row['us']:8.1f} {row['floor_us']:7.1f} "
              f"{100 * row['frac_floor']:5.1f}% {row['tbps']:5.2f} {row.get('sm_mhz')!s:>6s}")
        if row["variant"] == "default":
            default[(row["scenario"], row["proj"])] = row
    for sid in SCENARIOS:
        pair = [default.get((sid, p)) for p in ("gate_up", "down")]
        if all(pair):
            us = sum(p["us"] for p in pair)
            fl = sum(p["floor_us"] for p in pair)
            print(f"{sid:14s} sum(default) {us:8.1f} us  floor {fl:7.1f}  {100 * fl / us:5.1f}% of floor")
    tests = report.get("tests", {})
    print(f"tests: {tests.get('summary')}  rc={tests.get('rc')}  bench rc={report['bench_rc']}")
    for name, res in report.get("sanitizers", {}).items():
        print(f"{name}: {res}")
    print(f"ceilings: {report.get('ceilings')}  stream: {report.get('stream_ceilings')}")
    print(f"clocks: {report.get('clocks')}")
    return 0 if tests.get("rc", 0) == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
