"""Clock sampling (chord_bench.clocks): line parsing, windows and the run summary, without a GPU."""

from __future__ import annotations

import sys
import time
import types

import pytest

from chord_bench.clocks import ClockSample, ClockSampler, decode_reasons


def test_decode_reasons_names_bits_and_keeps_unknown() -> None:
    assert decode_reasons(0) == []
    assert decode_reasons(0x4 | 0x20) == ["sw_power_cap", "sw_thermal"]
    assert decode_reasons(0x1000 | 0x1) == ["gpu_idle", "0x1000"]


def _sampler(samples: list[ClockSample]) -> ClockSampler:
    sampler = ClockSampler()
    sampler.samples = samples
    return sampler


def test_window_median_and_summary_drop_idle_samples() -> None:
    samples = [ClockSample(float(t), mhz, 2619.0, 400.0 + t, 50.0 + t, reasons)
               for t, mhz, reasons in [(0, 345.0, 0x1), (1, 1980.0, 0), (2, 1755.0, 0x4), (3, 1700.0, 0x4), (4, 1980.0, 0)]]
    sampler = _sampler(samples)
    assert sampler.median_sm_mhz(1.0, 3.0) == 1755
    assert sampler.median_sm_mhz(10.0, 11.0) is None
    summary = sampler.summary()
    assert summary["sm_mhz_min"] == 1700 and summary["sm_mhz_max"] == 1980  # the idle 345 MHz is left out
    assert summary["event_reasons"] == ["sw_power_cap"]
    assert summary["samples"] == 5 and summary["temp_c_max"] == 54.0


def test_sampler_without_nvml_records_nothing_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    with ClockSampler() as sampler:
        pass
    summary = sampler.summary()
    assert sampler.samples == [] and summary["samples"] == 0
    assert "nvidia-ml-py" in str(summary["error"])


def test_sampler_reads_through_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fake NVML module: the sampler's thread reads clocks, power (mW -> W) and reasons."""
    fake = types.SimpleNamespace(
        NVML_CLOCK_SM=1, NVML_CLOCK_MEM=2, NVML_TEMPERATURE_GPU=0,
        nvmlInit=lambda: None, nvmlDeviceGetHandleByIndex=lambda i: ("gpu", i),
        nvmlDeviceGetClockInfo=lambda h, which: 1755 if which == 1 else 3201,
        nvmlDeviceGetPowerUsage=lambda h: 650_500, nvmlDeviceGetTemperature=lambda h, s: 57,
        nvmlDeviceGetCurrentClocksEventReasons=lambda h: 0x4,
    )
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    with ClockSampler(index=3, interval_s=0.001) as sampler:
        deadline = time.monotonic() + 5
        while len(sampler.samples) < 3 and time.monotonic() < deadline:
            time.sleep(0.005)
    assert sampler.error is None and len(sampler.samples) >= 3
    s = sampler.samples[0]
    assert (s.sm_mhz, s.mem_mhz, s.power_w, s.temp_c, s.reasons) == (1755.0, 3201.0, 650.5, 57.0, 0x4)
    assert sampler.summary()["event_reasons"] == ["sw_power_cap"]


def test_sampler_finds_the_gpu_by_uuid(monkeypatch: pytest.MonkeyPatch) -> None:
    """CUDA_VISIBLE_DEVICES renumbers GPUs for CUDA but not for NVML: a UUID picks the right one."""
    asked: list[object] = []
    fake = types.SimpleNamespace(
        NVML_CLOCK_SM=1, NVML_CLOCK_MEM=2, NVML_TEMPERATURE_GPU=0, nvmlInit=lambda: None,
        nvmlDeviceGetHandleByIndex=lambda i: asked.append(("index", i)),
        nvmlDeviceGetHandleByUUID=lambda u: asked.append(("uuid", u)),
        nvmlDeviceGetClockInfo=lambda h, which: 1980, nvmlDeviceGetPowerUsage=lambda h: 400_000,
        nvmlDeviceGetTemperature=lambda h, s: 40, nvmlDeviceGetCurrentClocksEventReasons=lambda h: 0,
    )
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    with ClockSampler(index=5, uuid="1234abcd-0000-1111-2222-333344445555", interval_s=1.0):
        pass
    assert asked == [("uuid", "GPU-1234abcd-0000-1111-2222-333344445555")]
