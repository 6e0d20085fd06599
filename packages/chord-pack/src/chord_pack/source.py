"""Resolve SRC (a local directory or a Hugging Face Hub repo id) to a directory on disk.

Hub downloads go through ``huggingface_hub`` (``hf_hub_download`` for the two metadata files
that ``inspect`` needs, ``snapshot_download`` with ``allow_patterns`` for a conversion), each
announced and bounded in time by :mod:`chord_pack.hub`. The environment is read at call time:
``HF_HUB_OFFLINE`` (cache only), ``HF_TOKEN``, ``HF_ENDPOINT``, ``CHORD_PACK_HUB_TIMEOUT``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from chord_pack import hub
from chord_pack.errors import ChordPackError, SourceError
from chord_pack.progress import Progress

INDEX_NAME = "model.safetensors.index.json"
METADATA_FILES = ("config.json", INDEX_NAME)
CONVERT_PATTERNS = [
    "*.json", "*.safetensors", "*.py", "*.model", "*.tiktoken", "*.txt", "*.jinja", "*.md",
    "LICENSE*",
]
"""Files a conversion needs: weights, index, configs, tokenizer, remote code, chat template, card."""

_REPO_RE = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_CACHE_RE = re.compile(r"models--(?P<org>[^/]+?)--(?P<name>[^/]+)/snapshots/(?P<rev>[0-9a-f]{40})/?$")


@dataclass(frozen=True)
class Source:
    """A checkpoint directory and where it came from."""

    path: Path
    repo_id: str | None = None
    revision: str | None = None
    """Commit hash when known (Hub downloads and HF-cache snapshot paths)."""

    def describe(self) -> str:
        if self.repo_id:
            return f"{self.repo_id}@{self.revision[:12] if self.revision else 'main'}"
        return str(self.path)


def offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def _hub_kwargs(cache_only: bool) -> dict:
    return {
        "token": os.environ.get("HF_TOKEN") or None,
        "endpoint": os.environ.get("HF_ENDPOINT") or None,
        "local_files_only": cache_only,
    }


def _hub_error(repo_id: str, revision: str | None, exc: Exception) -> SourceError:
    where = f"{repo_id}@{revision or 'main'}"
    if offline():
        return SourceError(
            f"HF_HUB_OFFLINE is set and {where} is not (fully) in the Hugging Face cache "
            f"({type(exc).__name__}: {exc}); run once online or pass a local directory"
        )
    return SourceError(f"cannot download {where} from the Hub ({type(exc).__name__}: {exc})")


def resolve(src: str, revision: str | None = None, *, metadata_only: bool = False,
            cache_only: bool = False, progress: Progress | None = None) -> Source:
    """Turn SRC into a :class:`Source`.

    ``metadata_only`` fetches just config.json and the index; ``cache_only`` never downloads.
    """
    local = Path(src).expanduser()
    if local.is_dir():
        if revision:  # silently reading whatever the directory holds would not be that revision
            raise SourceError(f"--revision {revision} applies to a Hub SRC, but {src} is a local directory; "
                              "drop --revision, or check out that revision there")
        m = _CACHE_RE.search(local.resolve().as_posix())
        if m:  # a snapshot inside the HF cache: we know the repo and the exact commit
            return Source(local, f"{m['org']}/{m['name']}", m["rev"])
        return Source(local)
    if not _REPO_RE.match(src):
        raise SourceError(f"SRC {src!r} is neither an existing directory nor a Hub repo id (org/name)")
    from huggingface_hub import hf_hub_download, snapshot_download

    cache_only = cache_only or offline()
    where = f"{src}@{revision or 'main'}"

    def fetch(what: str, fn, small: bool):
        if cache_only:  # no network: nothing to wait for
            return fn()
        return hub.call(what, fn, progress=progress, small=small)

    kwargs = {**_hub_kwargs(cache_only), "etag_timeout": hub.hub_timeout()}
    try:
        if metadata_only:
            paths = [
                Path(fetch(f"downloading {name} of {where}",
                           lambda name=name: hf_hub_download(src, name, revision=revision, **kwargs), True))
                for name in METADATA_FILES
            ]
            folder = paths[0].parent
        else:
            folder = Path(fetch(
                f"downloading {where} (weights, configs, tokenizer)",
                lambda: snapshot_download(src, revision=revision, allow_patterns=CONVERT_PATTERNS, **kwargs),
                False))
    except ChordPackError:
        raise
    except Exception as exc:  # huggingface_hub raises many types (HTTP, offline, auth)
        raise _hub_error(src, revision, exc) from exc
    m = _CACHE_RE.search(folder.resolve().as_posix()) or _CACHE_RE.search(folder.as_posix())
    return Source(folder, src, m["rev"] if m else revision)
