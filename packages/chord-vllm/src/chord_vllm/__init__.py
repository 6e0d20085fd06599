"""chord-vllm: the vLLM plugin for Chord kernels (not functional yet; see README).

Importing this package must stay free of CUDA and vLLM imports: vLLM loads plugins in every
process, including CPU-only front ends.
"""

__version__ = "0.0.1"
