"""chord-vllm: serves Kimi K2.x INT4 MoE layers in vLLM 0.33 with Chord kernels.

``register`` is the ``vllm.general_plugins`` entry point. Importing this package stays free of CUDA
and vLLM: vLLM loads plugins in every process, CPU-only API servers included.
"""

from __future__ import annotations

import logging

__version__ = "0.1.0"

_registered = False


def register() -> None:
    """Install Chord's compressed-tensors config in this process's vLLM (idempotent, no CUDA).

    ``CHORD_VLLM=0`` makes it a no-op; a vLLM outside 0.33.x gets a warning and stock vLLM unless
    ``CHORD_VLLM=1``. A bad value of ``CHORD_VLLM`` or ``CHORD_VLLM_BATCHED`` leaves the plugin
    unloaded with an error line: vLLM does not catch exceptions from here, so it logs instead of raising.
    """
    global _registered
    if _registered:
        return
    from chord_vllm import _compat

    try:
        mode = _compat.mode()
        _compat.batched_wanted()  # a bad value is refused here too, not only by a DeepEP low-latency layer
    except ValueError as exc:
        _compat.logger.error("Chord plugin not loaded: %s", exc)
        return
    if mode == "off":
        _compat.logger.info("Chord plugin off (%s=0): vLLM serves every layer", _compat.ENV_SWITCH)
        return
    import vllm

    if not _compat.vllm_version_supported(vllm.__version__):
        tested = ".".join(map(str, _compat.TESTED_VLLM))
        if mode != "force":
            _compat.logger.warning(
                "Chord plugin not loaded: chord-vllm %s is tested with vLLM %s.x, this is vLLM %s "
                "(set %s=1 to try anyway)", __version__, tested, vllm.__version__, _compat.ENV_SWITCH)
            return
        _compat.logger.warning("Chord plugin forced onto untested vLLM %s (tested: %s.x)",
                               vllm.__version__, tested)
    from vllm.model_executor.layers.quantization import register_quantization_config

    from chord_vllm.config import ChordCompressedTensorsConfig

    register_quantization_config("compressed-tensors")(ChordCompressedTensorsConfig)
    _registered = True
    _compat.log_once(
        logging.INFO,
        f"Chord {__version__}: compressed-tensors int4 group-32 symmetric MoE experts run on Chord "
        f"kernels where supported, other layers stay vLLM's ({_compat.ENV_SWITCH}=0 turns this off)",
    )
