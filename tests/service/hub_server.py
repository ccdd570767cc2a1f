#!/usr/bin/env python3
"""A local Hugging Face Hub for tests: serves model directories from disk
under Hub repo ids, with the HTTP API huggingface_hub (and inferd) use:

  GET  /api/models/{repo}/revision/{rev}   {"id", "sha", "siblings"}
  GET  /api/models/{repo}/tree/{rev}?recursive=true
                                            [{"type": "file", "path", "size",
                                              "oid", "lfs"?}]
  HEAD/GET /{repo}/resolve/{rev}/{path}    X-Repo-Commit, ETag (git blob
                                            sha1; LFS files: X-Linked-Etag =
                                            sha256, X-Linked-Size), Range
                                            (206), a 302 to /lfs/... for LFS
                                            files as the Hub redirects to
                                            its CDN

Repos and their commit are fixed at start: `repos` maps "org/name" to a
directory. Files over 1 KiB count as LFS (like the Hub's weights). Every
request is logged in `requests` (method, path, Range) for the tests.
Runs in a thread: HubServer(repos).start() -> base URL; stop().
"""
import hashlib
import http.server
import json
import os
import threading
import urllib.parse

LFS_MIN = 1024


def git_blob_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Repo:
    def __init__(self, repo_id, directory):
        self.id = repo_id
        self.files = {}
        for root, _, names in os.walk(directory, followlinks=True):
            for n in sorted(names):
                full = os.path.join(root, n)
                rel = os.path.relpath(full, directory)
                if rel.startswith("."):
                    continue
                with open(full, "rb") as f:
                    data = f.read()
                self.files[rel] = data
        h = hashlib.sha1(repo_id.encode())
        for rel in sorted(self.files):
            h.update(rel.encode() + hashlib.sha1(self.files[rel]).digest())
        self.sha = h.hexdigest()

    def entry(self, rel):
        data = self.files[rel]
        e = {"type": "file", "path": rel, "size": len(data),
             "oid": git_blob_sha1(data)}
        if len(data) >= LFS_MIN:
            e["lfs"] = {"oid": hashlib.sha256(data).hexdigest(),
                        "size": len(data), "pointerSize": 134}
        return e


class HubServer:
    def __init__(self, repos):
        self.repos = {rid: Repo(rid, d) for rid, d in repos.items()}
        self.requests = []
        hub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_HEAD(self):
                hub._serve(self, head=True)

            def do_GET(self):
                hub._serve(self, head=False)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever,
                                       daemon=True)

    def start(self):
        self.thread.start()
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def _json(self, h, status, obj, head):
        body = json.dumps(obj).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if not head:
            h.wfile.write(body)

    def _find(self, repo_path):
        """'org/name/rest' -> (Repo, rest) or (None, None)."""
        parts = repo_path.split("/", 2)
        if len(parts) < 2:
            return None, None
        repo = self.repos.get(parts[0] + "/" + parts[1])
        return repo, (parts[2] if len(parts) > 2 else "")

    def _serve(self, h, head):
        url = urllib.parse.urlsplit(h.path)
        path = urllib.parse.unquote(url.path)
        self.requests.append((h.command, path, h.headers.get("Range")))
        if path.startswith("/api/models/"):
            repo, rest = self._find(path[len("/api/models/"):])
            if repo is None:
                return self._json(h, 404, {"error": "Repository not found"}, head)
            if rest.startswith("revision/"):
                return self._json(h, 200, {
                    "id": repo.id, "modelId": repo.id, "sha": repo.sha,
                    "siblings": [{"rfilename": f} for f in sorted(repo.files)]},
                    head)
            if rest.startswith("tree/"):
                return self._json(h, 200, [repo.entry(f) for f in sorted(repo.files)],
                                  head)
            return self._json(h, 404, {"error": "not found"}, head)
        if path.startswith("/lfs/"):
            repo, rest = self._find(path[len("/lfs/"):])
            return self._file(h, repo, rest, head, lfs=True)
        repo, rest = self._find(path[1:])
        if repo is None or "/resolve/" not in "/" + rest:
            return self._json(h, 404, {"error": "Repository not found"}, head)
        _, _, tail = rest.partition("resolve/")
        _, _, rel = tail.partition("/")
        if rel not in repo.files:
            h.send_response(404)
            h.send_header("X-Error-Code", "EntryNotFound")
            h.send_header("X-Repo-Commit", repo.sha)
            h.send_header("Content-Length", "0")
            h.end_headers()
            return None
        e = repo.entry(rel)
        if "lfs" in e:
            # The Hub answers LFS files with a redirect to its CDN, carrying
            # the linked file's etag and size.
            h.send_response(302)
            h.send_header("Location", f"/lfs/{repo.id}/{rel}")
            h.send_header("X-Repo-Commit", repo.sha)
            h.send_header("X-Linked-Etag", '"%s"' % e["lfs"]["oid"])
            h.send_header("X-Linked-Size", str(e["size"]))
            h.send_header("ETag", '"%s"' % e["oid"])
            h.send_header("Content-Length", "0")
            h.end_headers()
            return None
        return self._file(h, repo, rel, head, lfs=False)

    def _file(self, h, repo, rel, head, lfs):
        if repo is None or rel not in repo.files:
            return self._json(h, 404, {"error": "not found"}, head)
        data = repo.files[rel]
        e = repo.entry(rel)
        start, status = 0, 200
        rng = h.headers.get("Range")
        if rng and rng.startswith("bytes="):
            start = int(rng[6:].split("-")[0] or 0)
            status = 206
        body = data[start:]
        h.send_response(status)
        h.send_header("X-Repo-Commit", repo.sha)
        h.send_header("ETag", '"%s"' % (e["lfs"]["oid"] if lfs else e["oid"]))
        h.send_header("Content-Length", str(len(body)))
        if status == 206:
            h.send_header("Content-Range",
                          f"bytes {start}-{len(data) - 1}/{len(data)}")
        h.end_headers()
        if not head:
            h.wfile.write(body)
        return None
