"""Peer adapters: ``--peer NAME=PATH`` drives a user-supplied checkout of a peer library."""

from __future__ import annotations

from chord_bench.impls import Implementation
from chord_kernels import ChordInputError

KNOWN_PEERS = ("humming",)


def make_peer(spec: str) -> Implementation:
    """Build a peer adapter from ``"humming=/path/to/checkout"``."""
    name, sep, path = spec.partition("=")
    name = name.strip().lower()
    if not sep or not path.strip():
        raise ChordInputError(f"--peer: expected NAME=PATH (e.g. humming=/src/humming), got {spec!r}")
    if name == "humming":
        from chord_bench.peers.humming import HummingPeer

        return HummingPeer(path.strip())
    raise ChordInputError(f"--peer: unknown peer {name!r}; known: {', '.join(KNOWN_PEERS)}")
