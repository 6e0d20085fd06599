"""GPU clocks, power and clock-event reasons sampled in the background while a benchmark runs.

On the H200 a memory-bound kernel can draw the board to its power cap, and the driver then lowers
the SM clock (1.5-1.98 GHz seen in one run). A decode GEMM that issues many instructions per byte
slows down with it, so the same code can time several percent apart for reasons it does not
control. Every timing therefore records the median SM clock seen while it ran, read through NVML
(``nvidia-ml-py``, the ``bench`` extra); without NVML the sampler records nothing and says why.
"""

from __future__ import annotations

import statistics
import threading
import time
from dataclasses import dataclass
from typing import Any

# Bits of nvmlDeviceGetCurrentClocksEventReasons.
EVENT_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal",
    0x40: "hw_thermal",
    0x80: "hw_power_brake",
    0x100: "display_clocks",
}


def cuda_uuid(device: Any) -> str | None:
    """The UUID of a torch CUDA device (None where torch does not report it)."""
    try:
        import torch

        return str(torch.cuda.get_device_properties(device).uuid)
    except Exception:
        return None


@dataclass(frozen=True)
class ClockSample:
    t: float
    """time.monotonic() of the reading."""
    sm_mhz: float
    mem_mhz: float
    power_w: float
    temp_c: float
    reasons: int


def decode_reasons(mask: int) -> list[str]:
    """Names of the clock-event bits set in ``mask`` (unknown bits as hex)."""
    names = [name for bit, name in EVENT_REASONS.items() if mask & bit]
    unknown = mask & ~sum(EVENT_REASONS)
    return names + ([hex(unknown)] if unknown else [])


class ClockSampler:
    """Background NVML sampling of one GPU every ``interval_s``; use as a context manager.

    ``uuid`` (``torch.cuda.get_device_properties(d).uuid``) names the GPU unambiguously; NVML's
    ``index`` is the physical one and differs from CUDA's under ``CUDA_VISIBLE_DEVICES``."""

    def __init__(self, index: int = 0, interval_s: float = 0.05, uuid: str | None = None) -> None:
        self.index, self.interval_s, self.uuid = index, interval_s, uuid
        self.samples: list[ClockSample] = []
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> ClockSampler:
        try:
            import pynvml

            pynvml.nvmlInit()
            if self.uuid:
                uuid = self.uuid if self.uuid.startswith("GPU-") else f"GPU-{self.uuid}"
                handle = pynvml.nvmlDeviceGetHandleByUUID(uuid)
            else:
                handle = pynvml.nvmlDeviceGetHandleByIndex(self.index)
            self._read(pynvml, handle)  # fail here, not silently in the thread
        except Exception as exc:  # no nvidia-ml-py, no driver, or a query this GPU refuses
            self.error = f"NVML unavailable ({type(exc).__name__}: {exc}); pip install nvidia-ml-py"
            return self
        self._thread = threading.Thread(target=self._loop, args=(pynvml, handle), daemon=True)
        self._thread.start()
        return self

    def _read(self, nvml: Any, handle: Any) -> ClockSample:
        return ClockSample(
            time.monotonic(),
            float(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
            float(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM)),
            nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
            float(nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)),
            int(nvml.nvmlDeviceGetCurrentClocksEventReasons(handle)),
        )

    def _loop(self, nvml: Any, handle: Any) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.samples.append(self._read(nvml, handle))
            except Exception as exc:  # keep what was sampled; say why it stopped
                self.error = f"sampling stopped: {type(exc).__name__}: {exc}"
                return

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> ClockSampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def window(self, t0: float, t1: float) -> list[ClockSample]:
        return [s for s in list(self.samples) if t0 <= s.t <= t1]

    def median_sm_mhz(self, t0: float, t1: float) -> float | None:
        """Median SM clock of the samples taken between two ``time.monotonic()`` stamps."""
        window = self.window(t0, t1)
        return round(statistics.median(s.sm_mhz for s in window)) if window else None

    def summary(self) -> dict[str, object]:
        """Clock range, power, temperature and every clock-event reason seen while busy."""
        samples = list(self.samples)
        if not samples:
            return {"samples": 0, "error": self.error}
        busy = [s for s in samples if not s.reasons & 0x1] or samples  # drop idle moments
        mask = 0
        for s in busy:
            mask |= s.reasons
        sm = [s.sm_mhz for s in busy]
        return {"samples": len(samples), "sm_mhz_median": round(statistics.median(sm)), "sm_mhz_min": round(min(sm)),
                "sm_mhz_max": round(max(sm)), "mem_mhz_median": round(statistics.median(s.mem_mhz for s in busy)),
                "power_w_max": round(max(s.power_w for s in busy), 1),
                "temp_c_max": round(max(s.temp_c for s in busy), 1), "event_reasons": decode_reasons(mask)}
