"""Every network call chord-pack makes to the Hugging Face Hub: announced, and bounded in time.

A Hub (or ``HF_ENDPOINT``) that accepts the connection and never answers must not hang a
command. Before each call chord-pack says what it waits for, and two bounds apply:

* huggingface_hub's own settings: its shared HTTP client (``get_session``) gets ``timeout``
  seconds to connect and for each read or write, and downloads get ``etag_timeout``; so a
  stalled transfer fails, while a slow one that keeps moving goes on (a 5 GB shard may take
  minutes). Shard downloads also honour huggingface_hub's ``HF_HUB_DOWNLOAD_TIMEOUT``.
* chord-pack's: a *small* call (config.json and the index, creating a repo or a branch) must
  be over within ``timeout`` seconds in all, whatever huggingface_hub retries meanwhile. The
  call runs in a daemon thread that is abandoned when it overruns.

``timeout`` is ``CHORD_PACK_HUB_TIMEOUT`` in seconds (default 60), read at each call.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import TypeVar

from chord_pack.errors import ChordPackError, HubTimeoutError
from chord_pack.progress import NullProgress, Progress

TIMEOUT_ENV = "CHORD_PACK_HUB_TIMEOUT"
DEFAULT_TIMEOUT = 60.0
T = TypeVar("T")


def hub_timeout() -> float:
    """Seconds to wait for an answer from the Hub (``CHORD_PACK_HUB_TIMEOUT``)."""
    raw = os.environ.get(TIMEOUT_ENV, "").strip()
    if not raw:
        return DEFAULT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise ChordPackError(f"{TIMEOUT_ENV}: expected a positive number of seconds, got {raw!r}")
    return value


def endpoint() -> str:
    """The Hub chord-pack talks to (``HF_ENDPOINT``, read now, or huggingface.co)."""
    from huggingface_hub import constants

    return (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")


def _is_timeout(exc: BaseException) -> bool:
    """A timeout from any HTTP stack huggingface_hub may use (httpx, requests, sockets)."""
    while exc is not None:
        if isinstance(exc, TimeoutError) or any("Timeout" in c.__name__ for c in type(exc).__mro__):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _timeout_error(what: str, timeout: float) -> HubTimeoutError:
    return HubTimeoutError(
        f"no answer from {endpoint()} within {timeout:g} s while {what}; check the network and "
        f"HF_ENDPOINT, or set {TIMEOUT_ENV} to wait longer"
    )


def call(what: str, fn: Callable[[], T], *, progress: Progress | None = None, small: bool = True) -> T:
    """Run the Hub operation ``fn``, saying first what it waits for (``what``: "downloading X").

    A ``small`` operation must finish within the timeout in all; any other fails only when the
    connection stalls that long. A timeout raises :class:`HubTimeoutError` (one line).
    """
    from huggingface_hub import get_session

    timeout = hub_timeout()
    get_session().timeout = timeout  # huggingface_hub's shared client has no timeout by default
    (progress or NullProgress()).note(
        f"waiting for {endpoint()}: {what} (gives up after {timeout:g} s without an answer; {TIMEOUT_ENV})"
    )
    if not small:
        try:
            return fn()
        except Exception as exc:
            if _is_timeout(exc):
                raise _timeout_error(what, timeout) from exc
            raise
    done: dict = {}

    def run() -> None:
        try:
            done["value"] = fn()
        except BaseException as exc:  # handed to the caller's thread
            done["error"] = exc

    worker = threading.Thread(target=run, name="chord-pack-hub", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise _timeout_error(what, timeout)
    if "error" in done:
        if _is_timeout(done["error"]):
            raise _timeout_error(what, timeout) from done["error"]
        raise done["error"]
    return done["value"]
