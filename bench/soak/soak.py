#!/usr/bin/env python3
"""Soak: N concurrent client streams against inferd for a while, then check
that nothing leaked.

The streams (256 by default) loop until the time is up, each picking a call
at random: Generate (plain prompt or chat messages), a bidi Embed stream,
EmbedBatch, Rerank or Tokenize, on the models `scripts/serve.sh` serves
(smollm2, stories, minilm, reranker-random, classifier-random). About 20% of
the calls are cancelled at a random point (before the first answer, after a
few chunks, mid-stream), some get random short deadlines, and some clients
stop reading a Generate stream for a while before cancelling it.

Afterwards it checks, and prints as JSON:
  - inferd is alive and healthy;
  - inferd_rpc_in_flight, inferd_num_requests_running/_waiting are 0 and no
    KV cache block is used (inferd_kv_cache_blocks{state="used"});
  - the RSS grew by at most --rss-growth-mb over its value after warm-up,
    besides the KV cache pages committed meanwhile (inferd_kv_cache_bytes
    resident: the cache is committed as blocks are first written);
  - a greedy request still gives the tokens it gave before the soak;
  - no call ended with a status other than OK, CANCELLED,
    DEADLINE_EXCEEDED or RESOURCE_EXHAUSTED (queue full under load).
Exits 0 when all hold.

Usage (starts inferd itself, with the default models):
  soak.py --inferd build/service/inferd --stubs build/python \\
          --models build/models --demo-models build/demo_models \\
          [--seconds 600] [--streams 256]
"""
import argparse
import json
import os
import random
import re
import subprocess
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "service"))
import inferd_testlib as lib  # noqa: E402

OK_CODES = {"OK", "CANCELLED", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED"}
SENTENCES = [
    "A man is playing a guitar.", "The cat sleeps on the warm windowsill.",
    "Quarterly revenue grew by twelve percent.", "How do I reset my password?",
    "Die Katze schläft.", "雨が降っています。", "Paris is the capital of France.",
]


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--stubs", required=True)
    ap.add_argument("--models", required=True,
                    help="scripts/fetch-models.sh's directory (build/models)")
    ap.add_argument("--demo-models", required=True,
                    help="directory with xlmr-reranker and bert-classifier "
                         "(tools/make_test_models.py output)")
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--streams", type=int, default=256)
    ap.add_argument("--cancel-fraction", type=float, default=0.2)
    ap.add_argument("--stall-fraction", type=float, default=0.02,
                    help="Generate calls whose client stops reading")
    ap.add_argument("--rss-growth-mb", type=float, default=256,
                    help="allowed RSS growth over the post-warm-up value")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", default="", help="also write the report here")
    return ap.parse_args()


def default_models(args):
    smol = os.path.join(args.models, "smollm2-135m-instruct",
                        "SmolLM2-135M-Instruct.Q4_1.gguf")
    return [("smollm2", smol), ("stories", lib.stories_dir()),
            ("minilm", os.path.join(args.models, "all-minilm-l6-v2")),
            ("reranker-random", os.path.join(args.demo_models,
                                             "xlmr-reranker")),
            ("classifier-random", os.path.join(args.demo_models,
                                               "bert-classifier"))]


def kv_resident_mb(metrics_text):
    """KV cache memory committed so far, over every model (MiB)."""
    return sum(v for k, v in gauges(metrics_text, "inferd_kv_cache_bytes")
               .items() if 'state="resident"' in k) / (1 << 20)


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def gauges(text, name):
    """{labels-string: value} of every sample of `name`."""
    out = {}
    for line in text.splitlines():
        m = re.match(rf"^{name}(\{{[^}}]*\}})?\s+(\S+)$", line)
        if m:
            out[m.group(1) or ""] = float(m.group(2))
    return out


class Soak:
    def __init__(self, args, server):
        import grpc
        (self.grpc, self.ipb, ipb_grpc, _, _) = lib.import_stubs(args.stubs)
        self.args = args
        self.server = server
        # A few channels (HTTP/2 connections) shared by the streams.
        self.channels = [grpc.insecure_channel(server.address)
                         for _ in range(8)]
        self.stubs = [ipb_grpc.InferenceStub(c) for c in self.channels]
        self.lock = threading.Lock()
        self.counts = {}
        self.bad = []
        self.cancelled = 0
        self.stalled = 0
        self.calls = 0

    def count(self, op, code):
        with self.lock:
            key = f"{op}:{code}"
            self.counts[key] = self.counts.get(key, 0) + 1
            self.calls += 1
            if code not in OK_CODES and len(self.bad) < 20:
                self.bad.append(key)

    def greedy(self):
        req = self.ipb.GenerateRequest(model="stories",
                                       prompt="Once upon a time")
        req.sampling.max_tokens = 24
        req.sampling.temperature = 0.0
        req.sampling.ignore_eos = True
        ids = []
        for c in self.stubs[0].Generate(req, timeout=120):
            ids.extend(c.token_ids)
        return ids

    def generate_request(self, rng):
        ipb = self.ipb
        if rng.random() < 0.5:
            req = ipb.GenerateRequest(
                model="smollm2", messages=[ipb.ChatMessage(
                    role="user", content=rng.choice(SENTENCES))])
        else:
            req = ipb.GenerateRequest(model=rng.choice(["stories", "smollm2"]),
                                      prompt=rng.choice(SENTENCES))
        req.sampling.max_tokens = rng.randint(1, 64)
        req.sampling.temperature = rng.choice([0.0, 0.7, 1.0])
        req.sampling.seed = rng.randint(0, 2**32)
        return req

    def one_call(self, rng):
        stub = rng.choice(self.stubs)
        ipb = self.ipb
        cancel = rng.random() < self.args.cancel_fraction
        timeout = rng.uniform(0.05, 2.0) if rng.random() < 0.1 else 60
        op = rng.choices(["generate", "embed_stream", "embed_batch", "rerank",
                          "classify", "tokenize"],
                         weights=[40, 15, 15, 10, 10, 10])[0]
        try:
            if op == "generate":
                call = stub.Generate(self.generate_request(rng),
                                     timeout=timeout)
                if rng.random() < self.args.stall_fraction:
                    # A client that stops reading, then goes away.
                    with self.lock:
                        self.stalled += 1
                    time.sleep(rng.uniform(0.5, 3.0))
                    call.cancel()
                    with self.lock:
                        self.cancelled += 1
                    raise _Cancelled()
                stop_after = rng.randint(0, 8) if cancel else None
                for i, _ in enumerate(call):
                    if stop_after is not None and i >= stop_after:
                        call.cancel()
                        with self.lock:
                            self.cancelled += 1
                        raise _Cancelled()
            elif op == "embed_stream":
                n = rng.randint(1, 6)
                reqs = [ipb.EmbedRequest(model="minilm",
                                         texts=rng.sample(SENTENCES, 2))
                        for _ in range(n)]
                call = stub.Embed(iter(reqs), timeout=timeout)
                stop_after = rng.randint(0, n) if cancel else None
                for i, _ in enumerate(call):
                    if stop_after is not None and i + 1 >= stop_after:
                        call.cancel()
                        with self.lock:
                            self.cancelled += 1
                        raise _Cancelled()
            else:
                req, fn = {
                    "embed_batch": (ipb.EmbedRequest(
                        model="minilm", texts=rng.sample(SENTENCES, 3)),
                        stub.EmbedBatch),
                    "rerank": (ipb.RerankRequest(
                        model="reranker-random", query=rng.choice(SENTENCES),
                        documents=rng.sample(SENTENCES, 4)), stub.Rerank),
                    "classify": (ipb.ClassifyRequest(
                        model="classifier-random",
                        texts=rng.sample(SENTENCES, 2)), stub.Classify),
                    "tokenize": (ipb.TokenizeRequest(
                        model=rng.choice(["smollm2", "minilm", "stories"]),
                        text=rng.choice(SENTENCES)), stub.Tokenize),
                }[op]
                if cancel:
                    fut = fn.future(req, timeout=timeout)
                    time.sleep(rng.uniform(0, 0.05))
                    fut.cancel()
                    with self.lock:
                        self.cancelled += 1
                    try:
                        fut.result()
                    except self.grpc.FutureCancelledError:
                        raise _Cancelled()
                else:
                    fn(req, timeout=timeout)
            self.count(op, "OK")
        except _Cancelled:
            self.count(op, "CANCELLED")
        except self.grpc.RpcError as e:
            self.count(op, e.code().name)

    def worker(self, seed, deadline):
        rng = random.Random(seed)
        while time.time() < deadline:
            self.one_call(rng)

    def run(self):
        a = self.args
        known = self.greedy()
        # Warm-up: every model once, then the RSS baseline.
        for i in range(3):
            self.one_call(random.Random(i))
        rss_start = rss_mb(self.server.proc.pid)
        kv_start = kv_resident_mb(self.server.scrape())
        deadline = time.time() + a.seconds
        threads = [threading.Thread(target=self.worker,
                                    args=(a.seed * 100003 + i, deadline))
                   for i in range(a.streams)]
        t0 = time.time()
        rss_peak = rss_start
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):
            rss_peak = max(rss_peak, rss_mb(self.server.proc.pid))
            time.sleep(1)
        for t in threads:
            t.join()
        elapsed = time.time() - t0
        # Drained: nothing in flight, no KV block used.
        settle_deadline = time.time() + 60
        while True:
            text = self.server.scrape()
            busy = {}
            for name in ("inferd_rpc_in_flight", "inferd_num_requests_running",
                         "inferd_num_requests_waiting"):
                busy.update({name + k: v for k, v in gauges(text, name).items()
                             if v != 0})
            used = {k: v for k, v in
                    gauges(text, "inferd_kv_cache_blocks").items()
                    if 'state="used"' in k and v != 0}
            busy.update(used)
            if not busy or time.time() > settle_deadline:
                break
            time.sleep(0.2)
        kv = gauges(text, "inferd_kv_cache_blocks")
        rss_end = rss_mb(self.server.proc.pid)
        # KV cache pages are committed as blocks are first written: their
        # growth is use, not a leak.
        kv_growth = kv_resident_mb(self.server.scrape()) - kv_start
        after = self.greedy()
        health = lib.HealthClient(self.channels[0],
                                  lib.load_health_pb2(a.stubs))
        health.wait_serving(30)
        report = {
            "seconds": round(elapsed, 1), "streams": a.streams,
            "calls": self.calls, "cancelled_by_client": self.cancelled,
            "stalled_readers": self.stalled,
            "calls_per_second": round(self.calls / max(elapsed, 1e-9), 1),
            "outcomes": dict(sorted(self.counts.items())),
            "unexpected_statuses": self.bad,
            "rss_mb": {"start": round(rss_start, 1),
                       "peak": round(rss_peak, 1), "end": round(rss_end, 1),
                       "kv_cache_committed": round(kv_growth, 1),
                       "allowed_growth": a.rss_growth_mb},
            "kv_cache_blocks_after": kv,
            "not_drained": busy,
            "greedy_unchanged": after == known,
            "alive": self.server.proc.poll() is None,
        }
        ok = (not self.bad and not busy and after == known and
              report["alive"] and
              rss_end - rss_start - kv_growth <= a.rss_growth_mb)
        report["pass"] = ok
        for c in self.channels:
            c.close()
        return report


class _Cancelled(Exception):
    pass


def main():
    args = parse_args()
    models = default_models(args)
    for name, path in models:
        if not os.path.exists(path):
            print(f"SKIP: model {name} missing at {path}")
            return 77
    server = lib.InferdProcess(args.inferd, models,
                               ["--metrics-listen", "127.0.0.1:0"],
                               log_prefix="inferd-soak-")
    try:
        server.wait_ready(args.stubs, [n for n, _ in models])
        report = Soak(args, server).run()
    finally:
        code = server.stop(timeout=120)
    report["exit_code"] = code
    report["pass"] = report["pass"] and code == 0
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    if not report["pass"]:
        print(server.output()[-4000:], file=sys.stderr)
    return 0 if report["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
