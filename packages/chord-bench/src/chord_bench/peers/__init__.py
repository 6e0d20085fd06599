"""Peers: the libraries a user would run instead of Chord, driven from their installed packages.

``--peer humming-kernels`` adds humming-kernels' three MoE paths (``humming-indexed``,
``humming-contiguous``, ``humming-masked``), each where vLLM 0.33 would use it.
"""

from __future__ import annotations

from chord_bench.impls import Implementation
from chord_kernels import ChordInputError

KNOWN_PEERS = ("humming-kernels",)
_ALIASES = {"humming-kernels": "humming-kernels", "humming": "humming-kernels"}


def make_peers(names: list[str], *, sweep: bool = False) -> list[Implementation]:
    """The implementations of the named peers (``sweep``: also their small configuration sweeps)."""
    peers = []
    for raw in names:
        name = raw.strip().lower()
        if "=" in name or "/" in name:
            raise ChordInputError(
                f"--peer: {raw!r} names a source checkout; peers are installed packages now "
                f"(the inclusionAI/humming checkout adapter is gone): use --peer humming-kernels"
            )
        if name not in _ALIASES:
            raise ChordInputError(f"--peer: unknown peer {raw!r}; known: {', '.join(KNOWN_PEERS)}")
        peers.append(_ALIASES[name])
    impls: list[Implementation] = []
    for peer in dict.fromkeys(peers):  # each once, in the order given
        if peer == "humming-kernels":
            from chord_bench.peers.humming import humming_paths

            impls += humming_paths(sweep=sweep)
    return impls
