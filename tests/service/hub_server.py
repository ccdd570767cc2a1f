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
directory. Files over 1 KiB count as LFS (like the Hub's weights). A
revision is "main", the repo's commit, or a name `refs` lists for the repo;
any other is 404 with X-Error-Code RevisionNotFound, and an unknown repo is
404 with X-Error-Code RepositoryNotFound, as on the Hub. Every request is
logged in `requests` (method, path, Range) and its headers in
`request_headers` (same order) for the tests.
Runs in a thread: HubServer(repos).start() -> base URL; stop().

Fault switches (keyword arguments, also attributes the test may change
between requests):
  refs            {"org/name": ["v1", "dev"]}: more revision names.
  cut_after       a GET of a file's bytes (resolve or /lfs/) closes the
                  connection after this many body bytes, with the full
                  Content-Length announced ...
  cut_times       ... the first `cut_times` times that file is fetched
                  (default 1).
  corrupt         repo paths ("config.json", or "org/name/config.json" for
                  one repo) whose served bytes differ from the true file
                  while the headers keep its true sha256 / size.
  gated, token    repo ids whose files (resolve) answer 401 with
                  X-Error-Code GatedRepo unless the request carries
                  `Authorization: Bearer <token>` (a wrong token: 401
                  "Invalid credentials"); the API stays public, as on the
                  Hub, and so does /lfs/ (the CDN's URLs are signed).
  tree_page_size  the tree API answers at most that many entries per
                  request with a `Link: <...>; rel="next"` header (cursor).
  hold            {"org/name": threading.Event()}: a GET of that repo's
                  LFS bytes waits until the event is set (a download that
                  stays under way until the test lets it finish).
  cdn_host        LFS redirects go to http://<cdn_host>:<port>/lfs/...
                  (e.g. "localhost": another host for the same server, to
                  see that the token is not sent to the CDN).
"""
import hashlib
import http.server
import json
import os
import socket
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
    def __init__(self, repos, refs=None, cut_after=None, cut_times=1,
                 corrupt=(), gated=(), token=None, tree_page_size=None,
                 cdn_host=None, hold=None):
        self.repos = {rid: Repo(rid, d) for rid, d in repos.items()}
        self.refs = {rid: set(names) for rid, names in (refs or {}).items()}
        self.cut_after = cut_after
        self.cut_times = cut_times
        self.corrupt = set(corrupt)
        self.gated = set(gated)
        self.token = token
        self.tree_page_size = tree_page_size
        self.cdn_host = cdn_host
        self.hold = dict(hold or {})
        self.requests = []
        self.request_headers = []
        self._fetches = {}  # (repo id, path) -> GETs of its bytes so far
        self._lock = threading.Lock()
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

    @property
    def port(self):
        return self.httpd.server_address[1]

    def start(self):
        self.thread.start()
        return f"http://127.0.0.1:{self.port}"

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def _json(self, h, status, obj, head, headers=()):
        body = json.dumps(obj).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            h.send_header(k, v)
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

    def _known_revision(self, repo, rev):
        return rev in ("main", repo.sha) or rev in self.refs.get(repo.id, ())

    def _no_repo(self, h, head):
        return self._json(h, 404, {"error": "Repository not found"}, head,
                          [("X-Error-Code", "RepositoryNotFound")])

    def _no_revision(self, h, head, rev):
        return self._json(h, 404, {"error": f"Invalid rev id: {rev}"}, head,
                          [("X-Error-Code", "RevisionNotFound")])

    def _serve(self, h, head):
        url = urllib.parse.urlsplit(h.path)
        path = urllib.parse.unquote(url.path)
        with self._lock:
            self.requests.append((h.command, path, h.headers.get("Range")))
            self.request_headers.append(dict(h.headers.items()))
        if path.startswith("/api/models/"):
            repo, rest = self._find(path[len("/api/models/"):])
            if repo is None:
                return self._no_repo(h, head)
            if rest.startswith("revision/"):
                rev = rest[len("revision/"):]
                if not self._known_revision(repo, rev):
                    return self._no_revision(h, head, rev)
                return self._json(h, 200, {
                    "id": repo.id, "modelId": repo.id, "sha": repo.sha,
                    "siblings": [{"rfilename": f} for f in sorted(repo.files)]},
                    head)
            if rest.startswith("tree/"):
                rev = rest[len("tree/"):].split("/")[0]
                if not self._known_revision(repo, rev):
                    return self._no_revision(h, head, rev)
                return self._tree(h, repo, rev, url.query, head)
            return self._json(h, 404, {"error": "not found"}, head)
        if path.startswith("/lfs/"):
            repo, rest = self._find(path[len("/lfs/"):])
            return self._file(h, repo, rest, head, lfs=True)
        repo, rest = self._find(path[1:])
        if repo is None:
            return self._no_repo(h, head)
        if not rest.startswith("resolve/"):
            return self._json(h, 404, {"error": "not found"}, head)
        rev, _, rel = rest[len("resolve/"):].partition("/")
        if not self._known_revision(repo, rev):
            return self._no_revision(h, head, rev)
        if repo.id in self.gated:
            auth = h.headers.get("Authorization")
            if auth != f"Bearer {self.token}":
                if auth:
                    return self._json(
                        h, 401,
                        {"error": "Invalid credentials in Authorization header"},
                        head)
                return self._json(
                    h, 401,
                    {"error": f"Access to model {repo.id} is restricted. You "
                              "must have access to it and be authenticated "
                              "to access it. Please log in."},
                    head, [("X-Error-Code", "GatedRepo")])
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
            location = f"/lfs/{repo.id}/{rel}"
            if self.cdn_host:
                location = f"http://{self.cdn_host}:{self.port}{location}"
            h.send_response(302)
            h.send_header("Location", location)
            h.send_header("X-Repo-Commit", repo.sha)
            h.send_header("X-Linked-Etag", '"%s"' % e["lfs"]["oid"])
            h.send_header("X-Linked-Size", str(e["size"]))
            h.send_header("ETag", '"%s"' % e["oid"])
            h.send_header("Content-Length", "0")
            h.end_headers()
            return None
        return self._file(h, repo, rel, head, lfs=False)

    def _tree(self, h, repo, rev, query, head):
        entries = [repo.entry(f) for f in sorted(repo.files)]
        if not self.tree_page_size:
            return self._json(h, 200, entries, head)
        params = urllib.parse.parse_qs(query)
        start = int(params.get("cursor", ["0"])[0])
        end = start + self.tree_page_size
        headers = []
        if end < len(entries):
            host = h.headers.get("Host") or f"127.0.0.1:{self.port}"
            nxt = (f"http://{host}/api/models/{repo.id}/tree/"
                   f"{urllib.parse.quote(rev, safe='')}?recursive=true&cursor={end}")
            headers.append(("Link", f'<{nxt}>; rel="next"'))
        return self._json(h, 200, entries[start:end], head, headers)

    def _file(self, h, repo, rel, head, lfs):
        if repo is None or rel not in repo.files:
            return self._json(h, 404, {"error": "not found"}, head)
        if lfs and not head and repo.id in self.hold:
            self.hold[repo.id].wait()
        data = repo.files[rel]
        e = repo.entry(rel)
        served = data
        if rel in self.corrupt or f"{repo.id}/{rel}" in self.corrupt:
            served = bytes(b ^ 0x5A for b in data[:16]) + data[16:]
        start, status = 0, 200
        rng = h.headers.get("Range")
        if rng and rng.startswith("bytes="):
            start = int(rng[6:].split("-")[0] or 0)
            status = 206
        body = served[start:]
        cut = None
        if not head:
            with self._lock:
                n = self._fetches.get((repo.id, rel), 0) + 1
                self._fetches[(repo.id, rel)] = n
            if (self.cut_after is not None and n <= self.cut_times and
                    self.cut_after < len(body)):
                cut = self.cut_after
        h.send_response(status)
        h.send_header("X-Repo-Commit", repo.sha)
        h.send_header("ETag", '"%s"' % (e["lfs"]["oid"] if lfs else e["oid"]))
        h.send_header("Content-Length", str(len(body)))
        if status == 206:
            h.send_header("Content-Range",
                          f"bytes {start}-{len(data) - 1}/{len(data)}")
        h.end_headers()
        if head:
            return None
        if cut is None:
            h.wfile.write(body)
            return None
        # The connection breaks off mid-body.
        h.wfile.write(body[:cut])
        h.wfile.flush()
        h.close_connection = True
        try:
            h.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        return None
