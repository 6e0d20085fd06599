"""The plugin package imports without initializing CUDA or importing vLLM."""

from __future__ import annotations

import subprocess
import sys

import chord_vllm


def test_import_touches_neither_cuda_nor_vllm() -> None:
    code = (
        "import sys, chord_vllm, torch\n"
        "assert 'vllm' not in sys.modules, 'vllm imported'\n"
        "assert not torch.cuda.is_initialized(), 'CUDA initialized'\n"
        "print(chord_vllm.__version__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == chord_vllm.__version__
