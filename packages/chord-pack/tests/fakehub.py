"""A loopback HTTP server speaking the subset of the Hugging Face Hub API that huggingface_hub
uses to create a repo, upload a folder (regular files inline, ``*.safetensors`` through the LFS
"basic" transfer) and download a snapshot. Tests start it on 127.0.0.1 and point HF_ENDPOINT at it.
:class:`SilentHub` is a Hub that accepts connections and never answers.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlparse

_REPO = r"(?P<repo>[^/]+/[^/]+?)"


class FakeHub:
    """State of the fake Hub: repos (path -> bytes at the head commit), LFS objects, commits."""

    def __init__(self) -> None:
        self.repos: dict[str, dict[str, bytes]] = {}
        self.private: dict[str, bool] = {}
        self.lfs: dict[str, bytes] = {}
        self.commits: list[dict] = []
        self.sha: dict[str, str] = {}
        self.requests: list[str] = []
        self.validated: list[str] = []
        self.tokens: set[str | None] = set()
        self._lock = threading.Lock()
        handler = type("Handler", (_Handler,), {"hub": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeHub:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)

    def add_repo(self, repo_id: str, files: dict[str, bytes]) -> str:
        """Seed a repo (for download tests); returns its commit sha."""
        with self._lock:
            self.repos[repo_id] = dict(files)
            self.sha[repo_id] = hashlib.sha1(json.dumps(sorted(files)).encode() + repo_id.encode()).hexdigest()
            return self.sha[repo_id]


def _is_lfs(path: str) -> bool:
    return path.endswith((".safetensors", ".bin"))


class _Handler(BaseHTTPRequestHandler):
    hub: FakeHub
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # keep pytest output clean
        pass

    # -- helpers -------------------------------------------------------------------------------
    def _body(self) -> bytes:
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            return self.rfile.read(n)
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = b""
            while True:
                size = int(self.rfile.readline().strip(), 16)
                if size == 0:
                    self.rfile.readline()
                    return out
                out += self.rfile.read(size)
                self.rfile.readline()
        return b""

    def _send(self, status: int, body: bytes = b"", headers: dict | None = None, head: bool = False) -> None:
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _json(self, status: int, doc, headers: dict | None = None) -> None:
        self._send(status, json.dumps(doc).encode(), {"Content-Type": "application/json", **(headers or {})})

    def _not_found(self, what: str) -> None:
        self._json(404, {"error": f"{what} not found"}, {"X-Error-Code": "RepoNotFound"})

    # -- routes --------------------------------------------------------------------------------
    def do_HEAD(self) -> None:
        self._get(head=True)

    def do_GET(self) -> None:
        self._get(head=False)

    def _get(self, head: bool) -> None:
        hub = self.hub
        hub.tokens.add(self.headers.get("Authorization"))
        path = unquote(urlparse(self.path).path)
        hub.requests.append(f"{self.command} {path}")
        m = re.fullmatch(rf"/api/models/{_REPO}(?:/revision/(?P<rev>[^/]+))?", path)
        if m:
            repo = m["repo"]
            if repo not in hub.repos:
                return self._not_found(repo)
            files = hub.repos[repo]
            return self._json(200, {"id": repo, "modelId": repo, "sha": hub.sha[repo],
                                    "private": hub.private.get(repo, False),
                                    "siblings": [{"rfilename": p} for p in sorted(files)]})
        m = re.fullmatch(rf"/api/models/{_REPO}/tree/(?P<rev>[^/]+)(?P<sub>/.*)?", path)
        if m:
            repo = m["repo"]
            if repo not in hub.repos:
                return self._not_found(repo)
            entries = []
            for p, data in sorted(hub.repos[repo].items()):
                entry = {"type": "file", "path": p, "size": len(data),
                         "oid": hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()}
                if _is_lfs(p):
                    entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
                entries.append(entry)
            return self._json(200, entries)
        m = re.fullmatch(rf"/{_REPO}/resolve/(?P<rev>[^/]+)/(?P<file>.+)", path)
        if m:
            repo, fname = m["repo"], m["file"]
            data = hub.repos.get(repo, {}).get(fname)
            if data is None:
                return self._json(404, {"error": "entry not found"}, {"X-Error-Code": "EntryNotFound"})
            etag = hashlib.sha256(data).hexdigest() if _is_lfs(fname) else hashlib.sha1(data).hexdigest()
            headers = {"X-Repo-Commit": hub.sha[repo], "ETag": f'"{etag}"',
                       "Content-Type": "application/octet-stream"}
            if _is_lfs(fname):
                headers.update({"X-Linked-Etag": f'"{etag}"', "X-Linked-Size": str(len(data))})
            return self._send(200, data, headers, head=head)
        self._not_found(path)

    def do_PUT(self) -> None:
        path = urlparse(self.path).path
        self.hub.requests.append(f"PUT {path}")
        m = re.fullmatch(r"/lfs-upload/(?P<oid>[0-9a-f]{64})", path)
        data = self._body()
        if not m or hashlib.sha256(data).hexdigest() != m["oid"]:
            return self._json(400, {"error": "LFS object does not match its oid"})
        self.hub.lfs[m["oid"]] = data
        self._send(200)

    def do_POST(self) -> None:
        hub = self.hub
        hub.tokens.add(self.headers.get("Authorization"))
        path = unquote(urlparse(self.path).path)
        hub.requests.append(f"POST {path}")
        body = self._body()
        if path == "/api/repos/create":
            doc = json.loads(body)
            repo = f"{doc['organization']}/{doc['name']}" if doc.get("organization") else doc["name"]
            with hub._lock:
                if repo in hub.repos:
                    return self._json(409, {"error": "You already created this model repo", "url": f"{hub.url}/{repo}"})
                hub.repos[repo] = {}
                hub.sha[repo] = "0" * 40
                hub.private[repo] = doc.get("visibility") == "private" or bool(doc.get("private"))
            return self._json(200, {"url": f"{hub.url}/{repo}", "name": repo})
        if path == "/api/validate-yaml":  # README.md front matter check before a commit
            doc = json.loads(body)
            hub.validated.append(doc.get("content", ""))
            return self._json(200, {"errors": [], "warnings": []})
        m = re.fullmatch(rf"/api/models/{_REPO}/preupload/(?P<rev>[^/]+)", path)
        if m:
            if m["repo"] not in hub.repos:
                return self._not_found(m["repo"])
            files = json.loads(body)["files"]
            return self._json(200, {"files": [
                {"path": f["path"], "uploadMode": "lfs" if _is_lfs(f["path"]) else "regular",
                 "shouldIgnore": False, "oid": None} for f in files]})
        m = re.fullmatch(rf"/{_REPO}\.git/info/lfs/objects/batch", path)
        if m:
            doc = json.loads(body)
            objects = [{"oid": o["oid"], "size": o["size"],
                        "actions": {"upload": {"href": f"{hub.url}/lfs-upload/{o['oid']}"}}}
                       for o in doc["objects"]]
            return self._json(200, {"transfer": "basic", "objects": objects})
        m = re.fullmatch(rf"/api/models/{_REPO}/commit/(?P<rev>[^/]+)", path)
        if m:
            repo = m["repo"]
            if repo not in hub.repos:
                return self._not_found(repo)
            staged = dict(hub.repos[repo])
            header = {}
            for line in body.decode().splitlines():
                if not line.strip():
                    continue
                op = json.loads(line)
                key, value = op["key"], op["value"]
                if key == "header":
                    header = value
                elif key == "file":
                    staged[value["path"]] = base64.b64decode(value["content"])
                elif key == "lfsFile":
                    if value["oid"] not in hub.lfs:
                        return self._json(400, {"error": f"LFS object {value['oid']} was never uploaded"})
                    staged[value["path"]] = hub.lfs[value["oid"]]
                elif key in ("deletedFile", "deletedFolder"):
                    staged.pop(value["path"], None)
            with hub._lock:
                sha = hashlib.sha1(f"{len(hub.commits)}{repo}".encode()).hexdigest()
                hub.repos[repo] = staged
                hub.sha[repo] = sha
                hub.commits.append({"repo": repo, "revision": m["rev"], "summary": header.get("summary"),
                                    "sha": sha, "files": sorted(staged)})
            return self._json(200, {"success": True, "commitOid": sha,
                                    "commitUrl": f"{hub.url}/{repo}/commit/{sha}"})
        self._not_found(path)


class SilentHub:
    """A Hub that accepts connections on 127.0.0.1 and never answers (reads nothing, writes nothing).

    It keeps listening until the test process ends: a client thread that chord-pack abandoned after
    its timeout then waits quietly, instead of retrying against a closed port and logging about it.
    """

    def __init__(self) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._server.getsockname()[1]}"
        self.accepted: list[socket.socket] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            self.accepted.append(conn)

    def __enter__(self) -> SilentHub:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        pass  # see the class docstring; the accept loop is a daemon thread
