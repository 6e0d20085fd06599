"""The humming-kernels adapter and the bench command line, without a GPU or humming installed.

vLLM's choices (configuration range, routing block sizes, re-alignment, which paths run where)
are tested directly; the data plumbing of each path is tested against a CPU stand-in for
``humming_gemm`` that computes what humming's contract says, checked against the reference.
"""

from __future__ import annotations

import json

import pytest
import torch
from _problems import SIDS, problems_for

from chord_bench import scenarios as S
from chord_bench.__main__ import main, parse_args
from chord_bench.peers import humming as H
from chord_bench.peers import make_peers
from chord_bench.problems import check_output
from chord_kernels import ChordInputError, reference


def cfg(block_m: int, n: int = 256, stages: int = 4, **extra) -> dict:
    return {"block_shape": [block_m, n, 64], "warp_shape": [block_m, 64, 64], "num_stages": stages,
            "num_ctas_per_sm": 1, "mma_type": "wgmma", "use_tma": False, **extra}


# Shaped like get_heuristics_config(..., gemm_type=...) without a shape: contiguous (lo, hi]
# ranges from 0, the last one open-ended.
UP = [[0, 304, cfg(8, 128)], [304, 504, cfg(16, stages=5)], [504, 776, cfg(24, 512)], [776, 1 << 30, cfg(32, 512)]]
DOWN = [[0, 8, cfg(8, 256, 3)], [8, 304, cfg(8)], [304, 640, cfg(16, 512)], [640, 1 << 30, cfg(24, 512)]]


@pytest.mark.parametrize(("m", "lo", "block"), [(1, 0, 8), (304, 0, 8), (305, 304, 16), (504, 304, 16),
                                               (505, 504, 24), (10**6, 776, 32)])
def test_range_for_takes_lo_exclusive_hi_inclusive(m, lo, block):
    got = H.range_for(UP, m)
    assert got is not None and got[0] == lo and got[2]["block_shape"][0] == block
    assert H.block_size(UP, m) == block


def test_no_range_means_vllms_default_block_of_64():
    assert H.range_for(UP, 0) is None and H.range_for([], 5) is None
    assert H.block_size(UP, 0) == H.DEFAULT_BLOCK_SIZE == 64


@pytest.mark.parametrize(("m", "up", "down", "realigned"), [
    (160, 8, 8, False),     # decode: both GEMMs share gate_up's routing
    (400, 16, 16, False),
    (600, 24, 16, True),    # down asks for another block size: vLLM aligns again for it
    (700, 24, 24, False),
    (2064, 32, 24, True),
])
def test_indexed_block_sizes_and_realignment(m, up, down, realigned):
    assert H.indexed_block_sizes(UP, DOWN, m) == (up, down, realigned)


def test_sweep_takes_the_chosen_range_and_its_neighbours_once_each():
    picked = H.sweep_ranges(UP, 600)
    assert picked[0] == (504, 776, UP[2][2])  # vLLM's choice first
    assert [r[0] for r in picked[1:]] == [0, 304, 776]
    assert H.sweep_ranges(UP, 600, neighbours=0) == [(504, 776, UP[2][2])]
    same = [[0, 8, cfg(8)], [8, 16, cfg(8)], [16, 1 << 30, cfg(16)]]
    assert [r[2]["block_shape"][0] for r in H.sweep_ranges(same, 12)] == [8, 16]  # one per config
    assert H.sweep_ranges(UP, 0) == []


def test_paths_apply_where_vllm_uses_them():
    expect = {"indexed": ("indexed",), "masked": ("indexed", "grouped_masked"),
              "contiguous": ("indexed", "grouped_contiguous")}
    for s in S.SCENARIOS.values():
        got = H.applicable_gemm_types(s)
        if s.family == "indexed" and s.parallel == "ep":
            assert got == ("indexed", "grouped_contiguous"), s.id  # vLLM's EP default is contiguous
        else:
            assert got == expect[s.family], s.id
    assert H.valid_shape_m(S.SCENARIOS["tp8_1024"]) == 8192  # rows x top_k
    assert H.valid_shape_m(S.SCENARIOS["ep8_masked32"]) == 48 * 32


def test_describe_names_shape_stages_switches_and_range():
    text = H.describe(cfg(16, 512, 5, use_warp_spec=True), 304, 504)
    assert text == "wgmma block=16x512x64 warp=16x64x64 stages=5 ctas/SM=1 warp_spec [m in (304, 504]]"


class FakeLayer:
    def __init__(self, e: int, n: int, k: int) -> None:
        self.key = (e, n, k)
        self.b_dtype = "uint4"

    def to_str(self) -> str:
        return json.dumps(self.key)


class FakeHumming(H.HummingKernels):
    """humming's contract on the CPU: the test's ranges, and a ``humming_gemm`` that computes what
    humming computes for each gemm type from the reference's dequantized weight."""

    def __init__(self) -> None:
        super().__init__()
        self.version = "0.1.19"
        self.api = {"module": None, "humming_gemm": self.gemm}
        self.calls: list[dict] = []

    def layer_config(self, num_experts, n, k, schema=None):
        return FakeLayer(num_experts, n, k)

    def ranges(self, layer_config, gemm_type):
        return UP if layer_config.key[1] < layer_config.key[2] else DOWN  # gate_up: N < K here

    def weight(self, weight):
        layer = FakeLayer(weight.num_experts, weight.n, weight.k)
        return H.HummingWeight(layer, layer.to_str(), {"weight": weight.dequantized(), "weight_scale": weight.scales},
                               "uint4")

    def locks(self, device):
        return torch.zeros(8, dtype=torch.int32)

    def gemm(self, *, layer_config, compute_config, tuning_config, inputs, weight, weight_scale, outputs,
             locks, valid_shape_m, top_k, sorted_ids=None, expert_ids=None, num_tokens_padded=None,
             expert_layout=None):
        compute = json.loads(compute_config)
        ((lo, hi, config),) = json.loads(tuning_config)
        assert lo < valid_shape_m <= hi and compute["use_f16_accum"] is False
        self.calls.append({"gemm_type": compute["gemm_type"], "block": config["block_shape"][0]})
        if compute["gemm_type"] == "indexed":
            got = reference.indexed_gemm(inputs, weight, sorted_ids, expert_ids, num_tokens_padded,
                                         block_m=config["block_shape"][0], top_k=top_k)
            outputs.copy_(got)
            return
        if compute["gemm_type"] == "grouped_contiguous":
            assert expert_layout.dtype == torch.int64 and expert_layout.numel() == weight.shape[0] + 1
            spans = [(e, int(expert_layout[e]), int(expert_layout[e + 1])) for e in range(weight.shape[0])]
        else:
            assert expert_layout.dtype == torch.int32 and expert_layout.numel() == weight.shape[0]
            per = inputs.shape[0] // weight.shape[0]
            spans = [(e, e * per, e * per + int(c)) for e, c in enumerate(expert_layout)]
        for e, start, end in spans:
            outputs[start:end] = (inputs[start:end].float() @ weight[e].float().T).to(torch.bfloat16)


@pytest.mark.parametrize("sid", SIDS)
@pytest.mark.parametrize("draw", ["uniform", "skewed"])
def test_every_applicable_path_computes_the_reference(sid, draw):
    lib = FakeHumming()
    for gemm_type in H.applicable_gemm_types(S.SCENARIOS[sid]):
        path = H.HummingPath(lib, gemm_type)
        for problem in problems_for(sid, draw, seed=3):
            assert path.unsupported(problem) is None
            (cand,) = list(path.candidates(problem))
            assert cand.error is None and cand.graphable
            cand.run()
            assert check_output(cand.result(), problem) is None, (gemm_type, problem.name)
            m = H.valid_shape_m(problem.scenario)
            assert lib.calls[-1] == {"gemm_type": gemm_type, "block": H.range_for(lib.ranges(
                lib.weight(problem.weight).layer_config, gemm_type), m)[2]["block_shape"][0]}
            assert cand.detail["gemm_type"] == gemm_type and cand.detail["config"]["block_shape"]


def test_indexed_down_label_says_whether_the_routing_was_realigned(monkeypatch):
    lib = FakeHumming()
    path = H.HummingPath(lib, "indexed")
    up, down = problems_for("tp8_1024")  # m = 320: gate_up block 16, down block 16
    assert "gate_up's routing (block 16)" in next(path.candidates(down)).config
    assert "routing" not in next(path.candidates(up)).config
    monkeypatch.setattr(H, "valid_shape_m", lambda scenario: 600)  # gate_up block 24, down 16
    cand = next(path.candidates(down))
    assert "routing re-aligned 24->16" in cand.config
    cand.run()
    assert check_output(cand.result(), down) is None and lib.calls[-1]["block"] == 16


def test_warm_up_compiles_each_launched_kernel_once_for_all_paths(monkeypatch):
    lib = FakeHumming()
    paths = [H.HummingPath(lib, t) for t in H.GEMM_TYPES]
    compiled = []
    monkeypatch.setattr(lib, "compile", lambda layer, gemm_type, ranges, device: compiled.append(
        (layer, gemm_type, sorted(r[2]["block_shape"][0] for r in ranges))))
    scenarios = [S.SCENARIOS[sid] for sid in ("tp8_1024", "ep8_tok16", "ep8_masked8", "ep8_masked16")]
    lib.warm_up(scenarios, torch.device("cpu"), log=lambda _: None)
    lib.warm_up(scenarios, torch.device("cpu"), log=lambda _: None)  # a second path's call: nothing new
    by_group = {(*json.loads(layer)[:2], t): blocks for layer, t, blocks in compiled}
    assert len(compiled) == len(by_group) == 8  # one compile call per (layer, gemm type)
    # gate_up: TP at m = 8192; EP at m = 768 (ep8_tok16, ep8_masked16) and 384 (ep8_masked8)
    assert by_group[(384, 512, "indexed")] == [32] and by_group[(48, 4096, "indexed")] == [16, 24]
    assert by_group[(48, 4096, "grouped_contiguous")] == [24]  # EP indexed scenarios only
    assert by_group[(48, 4096, "grouped_masked")] == [16, 24]  # masked scenarios only
    assert all(p.lib is lib for p in paths) and len(lib.paths) == 3


def test_ranges_are_computed_once_and_kept_on_disk(tmp_path, monkeypatch):
    import types

    monkeypatch.setenv("CHORD_BENCH_CACHE", str(tmp_path))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda i: types.SimpleNamespace(name="NVIDIA H200", multi_processor_count=132))
    calls = []

    def heuristics(layer_config, use_f16_accum, use_batch_invariant, gemm_type):
        calls.append(gemm_type)
        return [(0, 1 << 30, cfg(8))]  # tuples, as humming returns them

    def fresh(version: str = "0.1.19") -> H.HummingKernels:
        lib = H.HummingKernels()
        lib.version, lib.api = version, {"get_heuristics_config": heuristics}
        return lib

    layer = FakeLayer(48, 4096, 7168)
    assert fresh().ranges(layer, "indexed") == [[0, 1 << 30, cfg(8)]] and calls == ["indexed"]
    assert fresh().ranges(layer, "indexed") == [[0, 1 << 30, cfg(8)]] and calls == ["indexed"]  # from disk
    fresh().ranges(layer, "grouped_masked")
    fresh("0.1.20").ranges(layer, "indexed")  # another version: computed again
    assert calls == ["indexed", "grouped_masked", "indexed"]
    assert len(list((tmp_path / "humming-ranges").glob("*.json"))) == 3
    assert not list((tmp_path / "humming-ranges").glob("*.tmp"))


def test_a_path_declines_scenarios_vllm_would_not_run_it_on():
    lib = FakeHumming()
    up, _ = problems_for("tp8_1024")
    assert "does not run humming grouped_masked" in H.HummingPath(lib, "grouped_masked").unsupported(up)
    assert "grouped_contiguous" in H.HummingPath(lib, "grouped_contiguous").unsupported(up)
    assert H.HummingPath(lib, "indexed").unsupported(up) is None


def test_sweep_paths_time_several_configs_under_their_own_names():
    lib = FakeHumming()
    path = H.HummingPath(lib, "indexed", sweep=True)
    assert path.name == "humming-indexed-sweep" and path.group == "humming sweep"
    up, _ = problems_for("ep8_tok16")
    cands = list(path.candidates(up))
    assert len(cands) == len(H.sweep_ranges(UP, H.valid_shape_m(up.scenario))) >= 2
    for c in cands:
        c.run()
        assert check_output(c.result(), up) is None  # each config aligned with its own block size


def test_no_range_is_an_excluded_candidate_not_a_guess(monkeypatch):
    lib = FakeHumming()
    monkeypatch.setattr(lib, "ranges", lambda layer, gemm_type: [[0, 4, cfg(8)]])
    (cand,) = list(H.HummingPath(lib, "indexed").candidates(problems_for("ep8_tok16")[0]))
    assert "valid_shape_m=40" in cand.error


def test_unavailable_without_the_package(monkeypatch):
    monkeypatch.setattr(H, "installed_version", lambda: None)
    paths = make_peers(["humming-kernels"])
    assert [p.name for p in paths] == ["humming-indexed", "humming-contiguous", "humming-masked"]
    assert all(p.role == "peer" and p.group == "humming" for p in paths)
    assert "not installed" in paths[0].unavailable() and "pip install humming-kernels==0.1.19" in paths[0].unavailable()
    assert paths[0].version == "humming-kernels (not installed)"


def test_version_is_the_installed_package_version(monkeypatch):
    monkeypatch.setattr(H, "installed_version", lambda: "0.1.19")
    path = make_peers(["humming"])[0]
    assert path.version == "humming-kernels 0.1.19"
    info = path.describe()
    assert info["gemm_type"] == "indexed" and "vLLM 0.33 default" in info["mode"] and info["group"] == "humming"


def test_make_peers_parses_names_once_each_and_rejects_checkouts():
    assert len(make_peers(["humming-kernels", "HUMMING"])) == 3
    assert [p.name for p in make_peers(["humming-kernels"], sweep=True)][3:] == [
        "humming-indexed-sweep", "humming-contiguous-sweep", "humming-masked-sweep"]
    with pytest.raises(ChordInputError, match="checkout adapter is gone"):
        make_peers(["humming=/src/humming"])
    with pytest.raises(ChordInputError, match="unknown peer"):
        make_peers(["marlin"])


def test_cli_list_needs_no_gpu(capsys):
    assert main(["--list", "--scenarios", "tp8"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out] == ["tp8_decode160", "tp8_1024", "tp8_8192"]


def test_cli_rejects_bad_input(capsys):
    assert main(["--list", "--scenarios", "nope"]) == 2
    assert main(["--draws", "zipf", "--list"]) == 2
    assert main(["--impls", "cutlass"]) == 2
    assert main(["--peer", "humming=/src/humming"]) == 2
    assert main(["--peer-sweep"]) == 2
    assert "error:" in capsys.readouterr().err


def test_cli_says_it_needs_a_gpu(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["--quick", "--scenarios", "ep8_decode", "--out", str(tmp_path)]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err


def test_cli_defaults():
    args = parse_args(["--quick", "--peer", "humming-kernels", "--peer-sweep", "--out", "o"])
    assert args.quick and args.peer == ["humming-kernels"] and args.peer_sweep and str(args.out) == "o"
    assert args.impls == "reference,bf16-ceiling,chord-indexed"


def test_triton_copy_kernel_copies_exactly_in_the_interpreter(tmp_path):
    """The SM copy kernel that defines the copy ceiling, run by Triton's CPU interpreter."""
    pytest.importorskip("triton")
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "triton_copy_check.py"
    script.write_text(
        "import torch\n"
        "from chord_bench.ceilings import COPY_BLOCK, copy_methods\n"
        "src = torch.randn(2 * COPY_BLOCK + 77).to(torch.bfloat16)\n"
        "for name, fn in copy_methods(src, dst := torch.zeros_like(src)).items():\n"
        "    dst.zero_(); fn(); assert torch.equal(src, dst), name\n"
        "print('ok')\n"
    )
    src_dir = Path(__file__).resolve().parents[1] / "src"
    env = {**os.environ, "TRITON_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join([str(src_dir), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
