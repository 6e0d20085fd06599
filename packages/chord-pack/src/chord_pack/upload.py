"""Push a converted checkpoint to the Hugging Face Hub, only after it passes ``verify``.

Each Hub call is announced and bounded in time by :mod:`chord_pack.hub`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from chord_pack import hub
from chord_pack.detect import load_json
from chord_pack.errors import ChordPackError, VerifyError
from chord_pack.progress import NullProgress, Progress
from chord_pack.verify import verify


def commit_message(path: Path) -> str:
    block = load_json(Path(path) / "config.json").get("chord_pack") or {}
    src = block.get("source") or {}
    origin = src.get("repo_id") or "a local checkpoint"
    rev = f"@{src['revision'][:12]}" if src.get("revision") else ""
    return (f"chord-pack {block.get('chord_pack_version')}: {origin}{rev} -> {block.get('layout')} layout "
            f"v{block.get('layout_version')}, profile {block.get('profile')} "
            f"(chord-kernels {block.get('chord_kernels_version')})")


def public_config(path: Path) -> bytes:
    """config.json as published: the local source path (if any) removed."""
    config = load_json(path / "config.json")
    (config.get("chord_pack") or {}).get("source", {}).pop("local_path", None)
    return (json.dumps(config, indent=2) + "\n").encode()


def _operations(path: Path) -> list:
    """One commit operation per file of the folder (dot-files skipped), config.json made public."""
    from huggingface_hub import CommitOperationAdd

    files = sorted(p for p in path.rglob("*") if p.is_file()
                   and not any(part.startswith(".") for part in p.relative_to(path).parts))
    return [CommitOperationAdd(path_in_repo=f.relative_to(path).as_posix(),
                               path_or_fileobj=public_config(path) if f == path / "config.json" else str(f))
            for f in files]


def upload(
    path: str | Path,
    repo_id: str,
    *,
    private: bool = False,
    revision: str | None = None,
    token: str | None = None,
    message: str | None = None,
    progress: Progress | None = None,
) -> str:
    """Verify ``path`` (hashes, per-expert unpack against the recorded source digests, and those
    digests against the source when it is on this machine), then create ``repo_id`` if needed and
    upload the folder in one commit. Returns the commit URL."""
    path = Path(path)
    progress = progress or NullProgress()
    report = verify(path, compare_experts=False, progress=progress)
    if not report.ok:
        raise VerifyError(f"{path} (refusing to upload)", report.problems)
    if report.unchecked:
        progress.note(f"not checked before upload: {report.unchecked}")
    from huggingface_hub import HfApi

    # Read the environment now rather than at huggingface_hub import time.
    api = HfApi(endpoint=os.environ.get("HF_ENDPOINT") or None,
                token=token or os.environ.get("HF_TOKEN") or None)
    try:
        hub.call(f"creating the repo {repo_id}", progress=progress,
                 fn=lambda: api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model"))
        if revision and revision != "main":
            hub.call(f"creating the branch {revision} of {repo_id}", progress=progress,
                     fn=lambda: api.create_branch(repo_id, branch=revision, exist_ok=True))
        info = hub.call(
            f"uploading {path} to {repo_id}", progress=progress, small=False,
            fn=lambda: api.create_commit(repo_id=repo_id, operations=_operations(path), repo_type="model",
                                         revision=revision, commit_message=message or commit_message(path)),
        )
    except ChordPackError:
        raise
    except Exception as exc:  # HTTP, auth, quota: say where it went wrong
        raise ChordPackError(f"upload of {path} to {repo_id} failed ({type(exc).__name__}: {exc})") from exc
    return str(getattr(info, "commit_url", info))
