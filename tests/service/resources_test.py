#!/usr/bin/env python3
"""inferd sized from its container, configured from a file, and aging its
connections (issue 24):

- MemoryTest: with the default models of scripts/serve.sh and default
  flags, resident memory after loading stays below the weights + 512 MiB
  (the KV cache is reserved, not written); inside a memory cgroup limited to
  3 GiB (v2 where one can be made, else v1; skipped with a message when
  neither is writable) the server reports the cgroup's limit, becomes
  SERVING, answers 32 concurrent generations and is never OOM-killed.
- ConfigTest: a --config file, INFERD_* variables and flags give the same
  --print-config and the same ListModels; flags > env > file; a bad config
  names the key and the file.
- ConnectionAgeTest: with --max-connection-age the server closes a
  client's connection after that age, and the client's next call succeeds
  on a new connection (seen by a counting TCP proxy in between).

Usage: resources_test.py --inferd BIN --stubs DIR --shared DIR
         --test-models DIR --real-models DIR
"""
import argparse
import concurrent.futures
import json
import os
import re
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import inferd_testlib as lib  # noqa: E402

ARGS = None
MIB = 1 << 20


def default_models():
    """The models scripts/serve.sh serves, or None when one is missing."""
    real, tm = ARGS.real_models, ARGS.test_models
    models = [
        ("smollm2", os.path.join(real, "smollm2-135m-instruct",
                                 "SmolLM2-135M-Instruct.Q4_1.gguf")),
        ("stories", lib.stories_dir()),
        ("minilm", os.path.join(real, "all-minilm-l6-v2")),
        ("reranker-random", os.path.join(tm, "xlmr-reranker")),
        ("classifier-random", os.path.join(tm, "bert-classifier")),
        ("m3-random", os.path.join(tm, "bge-m3")),
    ]
    for _, path in models:
        if not os.path.exists(path):
            return None
    return models


def list_models(address):
    grpc, _, _, mpb, mrpc = lib.import_stubs(ARGS.stubs)
    with grpc.insecure_channel(address) as ch:
        return mrpc.ModelsStub(ch).ListModels(mpb.ListModelsRequest(),
                                              timeout=30).models


def wait_serving(address, timeout=600):
    grpc = lib.import_stubs(ARGS.stubs)[0]
    with grpc.insecure_channel(address) as ch:
        lib.HealthClient(ch, lib.load_health_pb2(ARGS.stubs)) \
            .wait_serving(timeout)


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def generate_many(address, n, max_tokens):
    """n concurrent chat generations on smollm2; returns their texts."""
    grpc, ipb, irpc, _, _ = lib.import_stubs(ARGS.stubs)
    topics = ["the sea", "a cat", "bread", "the moon", "rain", "trains",
              "music", "a garden"]

    def one(i):
        with grpc.insecure_channel(address) as ch:
            req = ipb.GenerateRequest(
                model="smollm2",
                messages=[ipb.ChatMessage(
                    role="user",
                    content=f"Write two sentences about {topics[i % 8]}.")],
                sampling=ipb.SamplingParams(max_tokens=max_tokens,
                                            temperature=0.7, seed=i))
            chunks = list(irpc.InferenceStub(ch).Generate(req, timeout=600))
            return "".join(c.text for c in chunks), chunks[-1].usage

    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        return list(pool.map(one, range(n)))


# ---------------------------------------------------------------- cgroups

class MemoryCgroup:
    """A fresh memory cgroup (v2 if one can be made here, else v1) with a
    limit; `wrapper` runs a command inside it."""

    def __init__(self, limit):
        self.path = None
        self.version = None
        name = f"inferd-test-{os.getpid()}"
        for version, root in self.roots():
            path = os.path.join(root, name)
            limit_file = "memory.max" if version == 2 else "memory.limit_in_bytes"
            try:
                os.mkdir(path)
            except OSError:
                continue
            try:
                with open(os.path.join(path, limit_file), "w") as f:
                    f.write(str(limit))
                # v1 with swap accounting: no swap either.
                swap = os.path.join(path, "memory.memsw.limit_in_bytes")
                if version == 1 and os.path.exists(swap):
                    with open(swap, "w") as f:
                        f.write(str(limit))
                self.path, self.version = path, version
                return
            except OSError:
                os.rmdir(path)

    @staticmethod
    def roots():
        """(version, directory) where a child cgroup could be made."""
        found = []
        with open("/proc/self/mountinfo") as f:
            for line in f:
                parts = line.split()
                dash = parts.index("-")
                fstype, opts = parts[dash + 1], parts[dash + 3]
                mount = parts[4]
                if fstype == "cgroup2" and os.path.exists(
                        os.path.join(mount, "cgroup.controllers")):
                    with open(os.path.join(mount, "cgroup.controllers")) as c:
                        if "memory" in c.read().split():
                            found.insert(0, (2, mount))
                elif fstype == "cgroup" and "memory" in opts.split(","):
                    found.append((1, mount))
        return found

    def wrapper(self):
        procs = os.path.join(self.path, "cgroup.procs")
        return ["/bin/sh", "-c", f'echo $$ > "{procs}" && exec "$@"', "sh"]

    def read(self, name):
        try:
            with open(os.path.join(self.path, name)) as f:
                return f.read()
        except OSError:
            return ""

    def oom_kills(self):
        text = self.read("memory.events" if self.version == 2
                         else "memory.oom_control")
        m = re.search(r"oom_kill (\d+)", text)
        return int(m.group(1)) if m else 0

    def peak(self):
        text = self.read("memory.peak" if self.version == 2
                         else "memory.max_usage_in_bytes").strip()
        return int(text) if text.isdigit() else 0

    def remove(self):
        if self.path:
            os.rmdir(self.path)


class MemoryTest(unittest.TestCase):
    def setUp(self):
        self.models = default_models()
        if self.models is None:
            self.skipTest("the default models are missing (fetch_real_models "
                          "and make_test_models fixtures)")

    def test_resident_memory_after_load_is_weights_plus_little(self):
        with lib.InferdProcess(ARGS.inferd, self.models,
                               log_prefix="inferd-rss-") as s:
            wait_serving(s.address)
            models = list_models(s.address)
            weights = sum(m.weight_bytes for m in models)
            kv = sum(m.kv_cache_bytes for m in models)
            rss = rss_bytes(s.proc.pid)
            print(f"default models, default flags: RSS {rss / MIB:.0f} MiB, "
                  f"weights {weights / MIB:.0f} MiB, KV reserved "
                  f"{kv / MIB:.0f} MiB")
            self.assertGreater(weights, 150 * MIB)  # SmolLM2 + MiniLM
            self.assertLess(rss, weights + 512 * MIB, s.output())
            # The reserved cache is not resident: it is larger than what
            # would fit beside the weights in the bound above.
            smol = next(m for m in models if m.name == "smollm2")
            self.assertGreater(smol.kv_cache_tokens, 8192)
            self.assertIn("model 'smollm2': KV cache", s.output())
            self.assertEqual(s.stop(), 0, s.output())

    def test_serves_inside_a_3_gib_memory_cgroup(self):
        limit = 3 << 30
        cg = MemoryCgroup(limit)
        if cg.path is None:
            self.skipTest("no writable memory cgroup (v2 or v1) here: run as "
                          "root on a host with cgroups mounted read-write")
        try:
            s = lib.InferdProcess(ARGS.inferd, self.models,
                                  log_prefix="inferd-cgroup-",
                                  wrapper=cg.wrapper())
            try:
                wait_serving(s.address)
                log = s.output()
                # The limit found is the cgroup's, and each generator's KV
                # cache was sized from it.
                self.assertRegex(log, rf"cgroup v{cg.version} memory\.",
                                 log)
                self.assertRegex(log, r"limit 3072 MiB", log)
                models = list_models(s.address)
                weights = sum(m.weight_bytes for m in models)
                kv = sum(m.kv_cache_bytes for m in models)
                print(f"3 GiB cgroup v{cg.version}: weights "
                      f"{weights / MIB:.0f} MiB, KV reserved {kv / MIB:.0f} "
                      f"MiB, RSS after load "
                      f"{rss_bytes(s.proc.pid) / MIB:.0f} MiB")
                self.assertGreater(kv, 0)
                self.assertLess(weights + kv, limit)
                outs = generate_many(s.address, 32, 48)
                self.assertEqual(len(outs), 32)
                for text, usage in outs:
                    self.assertGreater(usage.completion_tokens, 0)
                    self.assertTrue(text.strip())
                self.assertIsNone(s.proc.poll(), "inferd died: " + s.output())
                print(f"32 concurrent generations answered; cgroup peak "
                      f"{cg.peak() / MIB:.0f} MiB of {limit / MIB:.0f}")
                self.assertEqual(cg.oom_kills(), 0)
                self.assertEqual(s.stop(), 0, s.output())
            finally:
                s.kill()
        finally:
            cg.remove()


# ----------------------------------------------------------------- config

def print_config(extra, env=None, files=None):
    """`inferd ... --print-config`: (exit code, parsed YAML or stderr)."""
    full_env = dict(os.environ)
    for k in list(full_env):
        if k.startswith("INFERD_") and k != "INFERD_SHARED_DIR":
            del full_env[k]
    full_env.update(env or {})
    r = subprocess.run([ARGS.inferd] + extra + ["--print-config"],
                       capture_output=True, text=True, env=full_env,
                       timeout=60)
    if r.returncode != 0:
        return r.returncode, r.stderr
    return 0, r.stdout


def parse_yaml(text):
    import yaml  # Debian python3-yaml (a reference parser, not inferd's)
    return yaml.safe_load(text)


class ConfigTest(unittest.TestCase):
    def setUp(self):
        self.embed = os.path.join(ARGS.test_models, "bert-embed")
        if not os.path.isfile(os.path.join(self.embed, "config.json")):
            self.skipTest("generated test models missing")
        self.tmp = tempfile.mkdtemp(prefix="inferd-config-")

    def tearDown(self):
        import shutil
        shutil.rmtree(self.tmp, ignore_errors=True)

    def write(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def three_ways(self):
        """The same settings as flags, as a file, as env + flags."""
        stories = lib.stories_dir()
        flags = ["--listen", "127.0.0.1:0", "--max-seqs", "8",
                 "--max-batched-tokens", "512", "--max-queue-requests", "100",
                 "--kv-cache-memory", "64MiB",
                 "--model", f"stories={stories},max-seqs=4,block-size=8",
                 "--model", f"embed={self.embed},pooling=mean,replicas=1"]
        config = self.write("inferd.yaml", f"""
listen: 127.0.0.1:0
max-seqs: 8
max-batched-tokens: 512
max-queue-requests: 100
kv-cache-memory: 64MiB
models:
  - name: stories
    path: {stories}
    max-seqs: 4
    block-size: 8
  - name: embed
    path: {self.embed}
    pooling: mean
    replicas: 1
""")
        json_config = self.write("inferd.json", json.dumps({
            "listen": "127.0.0.1:0", "max-seqs": 8, "max-batched-tokens": 512,
            "max-queue-requests": 100, "kv-cache-memory": "64MiB",
            "models": [
                {"name": "stories", "path": stories, "max-seqs": 4,
                 "block-size": 8},
                {"name": "embed", "path": self.embed, "pooling": "mean",
                 "replicas": 1}]}))
        env = {"INFERD_LISTEN": "127.0.0.1:0", "INFERD_MAX_SEQS": "8",
               "INFERD_MAX_BATCHED_TOKENS": "512", "INFERD_MAX_QUEUE_REQUESTS": "100",
               "INFERD_KV_CACHE_MEMORY": "64MiB"}
        env_flags = ["--model", f"stories={stories},max-seqs=4,block-size=8",
                     "--model", f"embed={self.embed},pooling=mean,replicas=1"]
        return [("flags", flags, None), ("yaml file", ["--config", config], None),
                ("json file", ["--config", json_config], None),
                ("env", env_flags, env)]

    def test_file_env_and_flags_print_the_same_config(self):
        printed = {}
        for name, extra, env in self.three_ways():
            code, out = print_config(extra, env)
            self.assertEqual(code, 0, f"{name}: {out}")
            printed[name] = (parse_yaml(out), out)
        want = printed["flags"][0]
        self.assertEqual(want["max-seqs"], 8)
        self.assertEqual(want["kv-cache-memory"], 64 * MIB)
        self.assertEqual(want["models"][0]["max-seqs"], 4)
        for name, (cfg, _) in printed.items():
            self.assertEqual(cfg, want, name)
        # Each value says where it came from.
        self.assertRegex(printed["flags"][1], r"max-seqs: 8\s+# flag")
        self.assertRegex(printed["yaml file"][1],
                         r"max-seqs: 8\s+# --config .*inferd\.yaml")
        self.assertRegex(printed["env"][1], r"max-seqs: 8\s+# env INFERD_MAX_SEQS")
        self.assertRegex(printed["flags"][1], r"max-queue-tokens: 1048576\s+# default")

    def test_flags_override_env_which_overrides_the_file(self):
        config = self.write("p.yaml", "max-seqs: 8\nmax-batched-tokens: 100\n"
                            f"models:\n  - {{name: s, path: {lib.stories_dir()}}}\n")
        code, out = print_config(["--config", config, "--max-seqs", "32"],
                                 {"INFERD_MAX_SEQS": "16",
                                  "INFERD_MAX_BATCHED_TOKENS": "200"})
        self.assertEqual(code, 0, out)
        cfg = parse_yaml(out)
        self.assertEqual(cfg["max-seqs"], 32)
        self.assertEqual(cfg["max-batched-tokens"], 200)
        code, out = print_config(["--config", config], {"INFERD_MAX_SEQS": "16"})
        self.assertEqual(parse_yaml(out)["max-seqs"], 16)
        self.assertEqual(parse_yaml(out)["max-batched-tokens"], 100)
        # A --model replaces the file's model of that name.
        code, out = print_config(["--config", config, "--model",
                                  f"s={self.embed},pooling=cls"])
        self.assertEqual(code, 0, out)
        models = parse_yaml(out)["models"]
        self.assertEqual([(m["name"], m["path"]) for m in models],
                         [("s", self.embed)])

    def test_print_config_round_trips(self):
        code, out = print_config(self.three_ways()[0][1])
        self.assertEqual(code, 0, out)
        again = self.write("printed.yaml", out)
        code, out2 = print_config(["--config", again])
        self.assertEqual(code, 0, out2)
        self.assertEqual(parse_yaml(out2), parse_yaml(out))

    def test_bad_configs_name_the_key_and_the_file(self):
        cases = {
            "unknown key": ("max-seq: 8\n", "unknown key 'max-seq'"),
            "bad value": ("max-seqs: lots\n", "key 'max-seqs'"),
            "bad model option": (
                f"models:\n  - {{name: a, path: /x, dtype: fp7}}\n",
                "models[0]: --dtype=fp7"),
            "unknown model option": (
                f"models:\n  - {{name: a, path: /x, colour: red}}\n",
                "unknown model option 'colour'"),
            "model without path": ("models:\n  - {name: a}\n",
                                   "models[0] needs both name and path"),
            "a list for a value": ("listen: [a, b]\n",
                                   "'listen' must be a single value"),
            "syntax": ("models: [\n", "line "),
        }
        for name, (text, want) in cases.items():
            with self.subTest(case=name):
                path = self.write("bad.yaml", text)
                code, err = print_config(["--config", path])
                self.assertEqual(code, 2, err)
                self.assertIn(path, err)
                self.assertIn(want, err)
        code, err = print_config(["--model", f"s={lib.stories_dir()}"],
                                 {"INFERD_MAX_SEQS": "-3"})
        self.assertEqual(code, 2)
        self.assertIn("INFERD_MAX_SEQS", err)
        code, err = print_config(["--config", os.path.join(self.tmp, "none")])
        self.assertEqual(code, 2)
        self.assertIn("cannot read", err)

    def test_the_three_ways_serve_the_same_models(self):
        listed = {}
        for name, extra, env in self.three_ways():
            full_env = dict(os.environ)
            full_env.update(env or {})
            with lib.InferdProcess(ARGS.inferd, [], extra, env=full_env,
                                   log_prefix="inferd-config-") as s:
                wait_serving(s.address, 300)
                models = list_models(s.address)
                listed[name] = sorted(
                    (m.name, m.path, m.max_input_tokens, m.pooling,
                     m.kv_cache_tokens, m.kv_cache_bytes, m.workflow)
                    for m in models)
                self.assertEqual(s.stop(), 0, s.output())
        want = listed["flags"]
        self.assertEqual(len(want), 2)
        self.assertEqual(dict((m[0], m[3]) for m in want)["embed"], "mean")
        # stories: 64 MiB / its block size -> the same cache every way.
        self.assertGreater(dict((m[0], m[4]) for m in want)["stories"], 0)
        for name, got in listed.items():
            self.assertEqual(got, want, name)


# ------------------------------------------------------- connection age

class CountingProxy:
    """A TCP proxy on 127.0.0.1:0 to `target`: counts connections and
    records which side closed each first."""

    def __init__(self, target_port):
        self.target = ("127.0.0.1", target_port)
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.lock = threading.Lock()
        self.connections = 0
        self.closed_by = []  # "server" or "client", in order
        self.closed = threading.Condition(self.lock)
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            with self.lock:
                self.connections += 1
            threading.Thread(target=self.pump, args=(client, server),
                             daemon=True).start()

    def pump(self, client, server):
        first = None
        socks = [client, server]
        while True:
            r, _, _ = select.select(socks, [], [])
            done = False
            for s in r:
                data = s.recv(65536)
                other = server if s is client else client
                if not data:
                    first = "client" if s is client else "server"
                    done = True
                    break
                other.sendall(data)
            if done:
                break
        client.close()
        server.close()
        with self.lock:
            self.closed_by.append(first)
            self.closed.notify_all()

    def wait_closed(self, n, timeout):
        with self.lock:
            ok = self.closed.wait_for(lambda: len(self.closed_by) >= n,
                                      timeout)
            return ok, list(self.closed_by)


class ConnectionAgeTest(unittest.TestCase):
    def test_server_closes_old_connections_and_clients_reconnect(self):
        grpc, ipb, irpc, _, _ = lib.import_stubs(ARGS.stubs)
        with lib.InferdProcess(ARGS.inferd, [("stories", lib.stories_dir())],
                               ["--max-connection-age", "1",
                                "--max-connection-age-grace", "1"],
                               log_prefix="inferd-age-") as s:
            wait_serving(s.address, 120)
            proxy = CountingProxy(s.port)
            with grpc.insecure_channel(f"127.0.0.1:{proxy.port}") as ch:
                stub = irpc.InferenceStub(ch)
                req = ipb.TokenizeRequest(model="stories", text="Once upon")
                first = stub.Tokenize(req, timeout=30)
                self.assertGreater(len(first.token_ids), 0)
                self.assertEqual(proxy.connections, 1)
                # The server ends the connection at its age (1 s, jittered
                # by gRPC, + 1 s grace).
                ok, closed_by = proxy.wait_closed(1, timeout=60)
                self.assertTrue(ok, "the server never closed the connection")
                self.assertEqual(closed_by[0], "server")
                again = stub.Tokenize(req, timeout=30)
                self.assertEqual(list(again.token_ids), list(first.token_ids))
                self.assertEqual(proxy.connections, 2)
            self.assertEqual(s.stop(), 0, s.output())


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    lib.add_common_args(ap)
    ap.add_argument("--real-models", required=True)
    ARGS, rest = ap.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
