#!/usr/bin/env python3
"""Models by Hub name, downloaded by inferd, and models loaded, swapped and
unloaded while serving (issue 40), against the real inferd binary:

1. A local Hugging Face Hub (hub_server.py: revision and tree APIs, resolve
   with LFS redirects, ETag / X-Linked-Etag / X-Repo-Commit, Range) serves
   test models; inferd starts with HF_ENDPOINT pointing at it and an empty
   HF_HUB_CACHE and downloads them itself:
   - every file body is cut once mid-transfer: the downloads resume (Range)
     and the models serve the same greedy tokens as their directory, among
     them `--model chat=HuggingFaceTB/SmolLM2-135M-Instruct` (a repo holding
     the real SmolLM2 GGUF);
   - a gated repo without HF_TOKEN, a file whose bytes do not match its
     sha256, a repo the Hub does not have, and a full disk (the blob's
     .incomplete is /dev/full) each leave a FAILED model whose error says
     what happened and what to do, while the others serve;
   - huggingface_hub (build/venv) reads the cache inferd wrote back
     (scan_cache_dir without warnings; hf_hub_download with
     local_files_only gives the snapshot inferd serves), and inferd leaves
     no .incomplete file behind;
   - a Hub model loaded while serving (LoadModel, no_wait) shows its
     download in GetModel and becomes READY.
2. 16 Generate streams on model A run while model B (the real
   all-MiniLM-L6-v2) is loaded, swapped (replace) and unloaded 20 times
   through LoadModel / UnloadModel: every stream of A completes with the
   expected tokens, B answers embeddings after each load, and the
   process's RSS after each unload stays within 5% of what it was before B
   first loaded (warmed up: one cycle ran before).
3. A config file with `load: on_demand`, `keep_alive` and
   `max_loaded_models`: the on-demand model is UNLOADED at start with
   health SERVING, loads on its first request, goes NOT_SERVING on its
   per-model health Watch when keep_alive unloads it, and the metrics count
   the loads and unloads; HTTP POST /v1/models loads and DELETE
   /v1/models/{id} unloads (API key required on both).

usage: model_lifecycle_test.py --inferd BIN --stubs DIR --shared DIR
       --test-models DIR --minilm DIR --smollm2 GGUF --venv-python PY
"""
import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import inferd_testlib as lib  # noqa: E402
from hub_server import HubServer  # noqa: E402

KEY = "lifecycle-key"

HF_CHECK = r'''
import json, sys
from huggingface_hub import scan_cache_dir, hf_hub_download
cache = sys.argv[1]
info = scan_cache_dir(cache)
out = {"repos": sorted(r.repo_id for r in info.repos),
       "warnings": [str(w) for w in info.warnings], "config": {}}
for repo in sys.argv[2:]:
    out["config"][repo] = hf_hub_download(repo, "config.json", cache_dir=cache,
                                          local_files_only=True)
print(json.dumps(out))
'''


class Checker:
    def __init__(self):
        self.failures = []

    def __call__(self, cond, what):
        print(("ok    " if cond else "FAIL  ") + what, flush=True)
        if not cond:
            self.failures.append(what)
        return cond


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def wait_state(stub, mpb, name, states, timeout=300):
    """GetModel until the model is in one of `states` (bounded)."""
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = stub.GetModel(mpb.GetModelRequest(name=name), timeout=30,
                             metadata=[("authorization", "Bearer " + KEY)])
        if last.state in states:
            return last
        time.sleep(0.05)
    raise RuntimeError(f"model {name} never reached {states}: {last}")


def hub_part(a, check, grpc, ipb, irpc, mpb, mrpc):
    tiny = os.path.join(a.test_models, "qwen2-tiny")
    embed = os.path.join(a.test_models, "bert-embed")
    weights = os.path.join(embed, "model.safetensors")
    with open(weights, "rb") as f:
        weights_sha = hashlib.sha256(f.read()).hexdigest()
    smollm2_dir = os.path.dirname(a.smollm2)
    held = threading.Event()
    hub = HubServer(
        {"org/tiny": tiny, "org/gated": tiny, "org/corrupt": embed,
         "org/full": embed, "org/late": embed,
         "HuggingFaceTB/SmolLM2-135M-Instruct": smollm2_dir,
         "org/held": embed},
        hold={"org/held": held},
        gated={"org/gated"}, token="hf_right_token",
        corrupt={"org/corrupt/model.safetensors"}, cut_after=700,
        cut_times=1)
    base = hub.start()
    cache = tempfile.mkdtemp(prefix="inferd-lifecycle-cache-")
    try:
        # A full disk for org/full: its weights' partial blob is /dev/full.
        blobs = os.path.join(cache, "models--org--full", "blobs")
        os.makedirs(blobs)
        os.symlink("/dev/full", os.path.join(blobs, weights_sha + ".incomplete"))
        env = dict(os.environ, HF_ENDPOINT=base, HF_HUB_CACHE=cache)
        env.pop("HF_TOKEN", None)
        env.pop("HF_HUB_OFFLINE", None)
        models = [("direct", tiny), ("tiny", "org/tiny"),
                  ("chat", "HuggingFaceTB/SmolLM2-135M-Instruct"),
                  ("chat-local", a.smollm2), ("gated", "org/gated"),
                  ("corrupt", "org/corrupt"), ("missing", "org/no-such-repo"),
                  ("full", "org/full")] + [
                      (f"od{i}", "org/held,load=on_demand") for i in range(4)]
        with lib.InferdProcess(a.inferd, models, log_prefix="inferd-lifecycle-hub-",
                               extra=["--allow-partial-start", "--api-key", KEY],
                               env=env) as srv:
            srv.wait_for(r"(\d+) of \d+ model\(s\) ready after", timeout=300)
            auth = [("authorization", "Bearer " + KEY)]
            with grpc.insecure_channel(srv.address) as ch:
                models_stub = mrpc.ModelsStub(ch)
                inf = irpc.InferenceStub(ch)
                got = {m.name: m for m in models_stub.ListModels(
                    mpb.ListModelsRequest(), metadata=auth, timeout=30).models}
                t = got["tiny"]
                check(t.state == mpb.MODEL_STATE_READY and t.source == "org/tiny"
                      and t.path.startswith(os.path.join(
                          cache, "models--org--tiny", "snapshots")),
                      f"org/tiny downloaded into the cache and READY: "
                      f"{t.state} {t.source} {t.path} {t.error}")
                check(t.download_bytes_total > 0 and
                      t.download_bytes_done == t.download_bytes_total,
                      f"its download counted {t.download_bytes_done} of "
                      f"{t.download_bytes_total} bytes")
                ranges = [r for r in hub.requests if r[2]]
                check(len(ranges) > 0,
                      f"cut transfers resumed with Range requests: {ranges[:3]}")

                def greedy(name):
                    req = lib.generate_request(ipb, name, prompt="Hello world",
                                               max_tokens=16, temperature=0,
                                               ignore_eos=True)
                    return [t for c in inf.Generate(req, metadata=auth,
                                                    timeout=120)
                            for t in c.token_ids]
                check(greedy("tiny") == greedy("direct") and
                      len(greedy("direct")) == 16,
                      "the downloaded model serves the directory's greedy tokens")
                c = got["chat"]
                check(c.state == mpb.MODEL_STATE_READY and
                      c.path.endswith("SmolLM2-135M-Instruct.Q4_1.gguf") and
                      greedy("chat") == greedy("chat-local"),
                      f"--model chat=HuggingFaceTB/SmolLM2-135M-Instruct (a "
                      f"GGUF repo) downloads its one .gguf and serves its "
                      f"greedy tokens: {c.path} {c.error}")

                def failed(name, *words):
                    m = got[name]
                    ok = m.state == mpb.MODEL_STATE_FAILED and all(
                        w.lower() in m.error.lower() for w in words)
                    check(ok, f"{name} FAILED saying {words}: {m.error}")
                failed("gated", "HF_TOKEN", "401", base)
                failed("corrupt", "sha256", "model.safetensors")
                failed("missing", "org/no-such-repo", "404")
                failed("full", "space")
                check(not [m for m in got.values()
                           if m.state == mpb.MODEL_STATE_FAILED and
                           m.name in ("tiny", "direct")],
                      "the other models serve")

                # A Hub model loaded while serving, without waiting.
                first = models_stub.LoadModel(
                    mpb.LoadModelRequest(name="late", path="org/late",
                                         no_wait=True),
                    metadata=auth, timeout=60)
                check(first.state == mpb.MODEL_STATE_LOADING and
                      first.source == "org/late",
                      f"LoadModel no_wait answers LOADING at once: {first.state}")
                late = wait_state(models_stub, mpb, "late",
                                  (mpb.MODEL_STATE_READY, mpb.MODEL_STATE_FAILED))
                check(late.state == mpb.MODEL_STATE_READY and
                      late.download_bytes_done == late.download_bytes_total > 0,
                      f"org/late downloaded and READY: {late.error}")
                e = inf.Embed(iter([ipb.EmbedRequest(model="late", texts=["hi"])]),
                              metadata=auth, timeout=60)
                vec = [list(x.values) for r in e for x in r.embeddings]
                check(len(vec) == 1 and len(vec[0]) > 0, "it embeds")

                # Four requests for on-demand models whose download the Hub
                # holds (unary, stream, Tokenize, Generate-less embedder):
                # they wait, and every other call goes on meanwhile.
                answers = {}

                def od(i):
                    try:
                        if i == 1:
                            r = list(inf.Embed(iter([ipb.EmbedRequest(
                                model="od1", texts=["x"])]), metadata=auth,
                                timeout=300))
                        elif i == 2:
                            r = inf.Tokenize(ipb.TokenizeRequest(
                                model="od2", text="x"), metadata=auth,
                                timeout=300)
                        else:
                            r = inf.EmbedBatch(ipb.EmbedRequest(
                                model=f"od{i}", texts=["x"]), metadata=auth,
                                timeout=300)
                        answers[i] = r is not None
                    except grpc.RpcError as err:
                        answers[i] = err.code()
                waiting = [threading.Thread(target=od, args=(i,))
                           for i in range(4)]
                for t in waiting:
                    t.start()
                for i in range(4):
                    wait_state(models_stub, mpb, f"od{i}",
                               (mpb.MODEL_STATE_LOADING,))
                during = greedy("tiny")
                states = [models_stub.GetModel(
                    mpb.GetModelRequest(name=f"od{i}"), metadata=auth,
                    timeout=30).state for i in range(4)]
                check(len(during) == 16 and not answers and
                      all(st == mpb.MODEL_STATE_LOADING for st in states),
                      f"a Generate on another model completes while four "
                      f"requests wait for on-demand loads: {states} {answers}")
                held.set()
                for t in waiting:
                    t.join()
                check(answers == {0: True, 1: True, 2: True, 3: True},
                      f"and the four are answered once loaded: {answers}")

        leftovers = [os.path.join(r, f) for r, _, fs in os.walk(cache)
                     for f in fs if f.endswith(".incomplete") and
                     "models--org--full" not in r and
                     "models--org--corrupt" not in r]
        check(leftovers == [], f"no partial file left behind: {leftovers}")
        p = subprocess.run(
            [a.venv_python, "-c", HF_CHECK, cache, "org/tiny", "org/late"],
            capture_output=True, text=True, timeout=300,
            env=dict(os.environ, HF_HUB_OFFLINE="1"))
        hf = json.loads(p.stdout) if p.returncode == 0 else {}
        check(p.returncode == 0 and {"org/tiny", "org/late"} <= set(hf["repos"])
              and not [w for w in hf["warnings"]
                       if "org--tiny" in w or "org--late" in w],
              f"huggingface_hub's scan_cache_dir reads inferd's cache: "
              f"{hf or p.stderr[-400:]}")
        cfg = hf.get("config", {}).get("org/tiny", "")
        check(cfg.startswith(os.path.join(cache, "models--org--tiny", "snapshots"))
              and os.path.isfile(cfg),
              f"hf_hub_download(local_files_only) finds inferd's snapshot: {cfg}")
    finally:
        held.set()
        hub.stop()
        shutil.rmtree(cache, ignore_errors=True)


def load_under_load_part(a, check, grpc, ipb, irpc, mpb, mrpc):
    tiny = os.path.join(a.test_models, "qwen2-tiny")
    mean = os.path.join(a.test_models, "bert-mean")
    with lib.InferdProcess(a.inferd, [("a", tiny)],
                           log_prefix="inferd-lifecycle-load-",
                           extra=["--api-key", KEY]) as srv:
        auth = [("authorization", "Bearer " + KEY)]
        with grpc.insecure_channel(srv.address) as ch:
            ms = mrpc.ModelsStub(ch)
            inf = irpc.InferenceStub(ch)
            wait_state(ms, mpb, "a", (mpb.MODEL_STATE_READY,))
            req = lib.generate_request(ipb, "a", prompt="Once upon a time",
                                       max_tokens=48, temperature=0,
                                       ignore_eos=True)

            def run():
                return [t for c in inf.Generate(req, metadata=auth, timeout=300)
                        for t in c.token_ids]
            expected = run()

            def embed_b():
                r = inf.Embed(iter([ipb.EmbedRequest(model="b",
                                                     texts=["a cat sat"])]),
                              metadata=auth, timeout=120)
                return [list(x.values) for m in r for x in m.embeddings]

            def cycle():
                info = ms.LoadModel(mpb.LoadModelRequest(name="b", path=a.minilm),
                                    metadata=auth, timeout=300)
                ok = info.state == mpb.MODEL_STATE_READY and len(embed_b()) == 1
                info = ms.LoadModel(mpb.LoadModelRequest(
                    name="b", path=mean, replace=True), metadata=auth, timeout=300)
                ok = ok and info.state == mpb.MODEL_STATE_READY and \
                    len(embed_b()) == 1
                gone = ms.UnloadModel(mpb.UnloadModelRequest(name="b"),
                                      metadata=auth, timeout=300)
                return ok and gone.state == mpb.MODEL_STATE_UNLOADED

            # Warm-up: A's streams and one cycle of B before the baseline.
            warm = [threading.Thread(target=run) for _ in range(16)]
            for t in warm:
                t.start()
            check(cycle(), "a first load / swap / unload cycle of B")
            for t in warm:
                t.join()

            stop = threading.Event()
            results = []
            lock = threading.Lock()
            cond = threading.Condition(lock)

            def stream_loop():
                while not stop.is_set():
                    try:
                        got = run()
                    except grpc.RpcError as e:
                        got = e.code()
                    with cond:
                        results.append(got)
                        cond.notify_all()
            streams = [threading.Thread(target=stream_loop) for _ in range(16)]
            for t in streams:
                t.start()
            # The baseline under the same load: the RSS while A's 16 streams
            # run (each sampled after another stream ended), before B loads.
            samples = []
            with cond:
                for n in range(1, 33):
                    cond.wait_for(lambda: len(results) >= n, timeout=300)
                    samples.append(rss_bytes(srv.proc.pid))
            baseline = max(samples)
            cycles_ok = 0
            rss = []
            try:
                for _ in range(20):
                    cycles_ok += bool(cycle())
                    rss.append(rss_bytes(srv.proc.pid))
            finally:
                stop.set()
                for t in streams:
                    t.join()
            check(cycles_ok == 20, f"B loaded, swapped and unloaded 20 times "
                                   f"({cycles_ok} cycles answered right)")
            bad = [r for r in results if r != expected]
            check(len(results) >= 16 and not bad,
                  f"A's {len(results)} streams all completed with the expected "
                  f"tokens while B cycled ({len(bad)} did not: {bad[:2]})")
            worst = max(rss)
            check(worst <= baseline * 1.05,
                  f"RSS after each unload within 5% of before: baseline "
                  f"{baseline >> 20} MiB, worst {worst >> 20} MiB, all "
                  f"{[r >> 20 for r in rss]}")
            listed = [m.name for m in ms.ListModels(
                mpb.ListModelsRequest(), metadata=auth, timeout=30).models]
            check(listed == ["a"], f"B is gone from the list: {listed}")


def on_demand_part(a, check, grpc, ipb, irpc, mpb, mrpc):
    tiny = os.path.join(a.test_models, "qwen2-tiny")
    embed = os.path.join(a.test_models, "bert-embed")
    health_pb2 = lib.load_health_pb2(a.stubs)
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(f"""models:
  - {{name: a, path: {tiny}}}
  - {{name: lazy, path: {embed}, load: on_demand, keep_alive: 1s}}
max_loaded_models: 3
api-key: {KEY}
""")
        config = f.name
    try:
        with lib.InferdProcess(a.inferd, [], log_prefix="inferd-lifecycle-od-",
                               extra=["--config", config, "--http-listen",
                                      "127.0.0.1:0", "--metrics-listen",
                                      "127.0.0.1:0"]) as srv:
            auth = [("authorization", "Bearer " + KEY)]
            with grpc.insecure_channel(srv.address) as ch:
                ms = mrpc.ModelsStub(ch)
                inf = irpc.InferenceStub(ch)
                health = lib.HealthClient(ch, health_pb2)
                health.wait_serving()
                lazy = ms.GetModel(mpb.GetModelRequest(name="lazy"),
                                   metadata=auth, timeout=30)
                check(lazy.state == mpb.MODEL_STATE_UNLOADED and lazy.on_demand
                      and lazy.keep_alive_seconds == 1 and lazy.loads == 0,
                      f"the on-demand model is UNLOADED at start while health "
                      f"is SERVING: {lazy.state} {lazy.on_demand} {lazy.loads}")
                watch = health.Watch(health_pb2.HealthCheckRequest(
                    service="inferd.v1.Model/lazy"), timeout=120)
                first = next(watch).status
                r = inf.Embed(iter([ipb.EmbedRequest(model="lazy",
                                                     texts=["hello"])]),
                              metadata=auth, timeout=120)
                vecs = [x for m in r for x in m.embeddings]
                check(len(vecs) == 1, "its first request loads it and is answered")
                # SERVING once loaded, NOT_SERVING once keep_alive unloaded it.
                seen = [first]
                for msg in watch:
                    seen.append(msg.status)
                    if msg.status == health_pb2.HealthCheckResponse.NOT_SERVING \
                            and health_pb2.HealthCheckResponse.SERVING in seen:
                        break
                watch.cancel()
                check(seen[0] == health_pb2.HealthCheckResponse.NOT_SERVING and
                      health_pb2.HealthCheckResponse.SERVING in seen and
                      seen[-1] == health_pb2.HealthCheckResponse.NOT_SERVING,
                      f"its health went SERVING, then NOT_SERVING after "
                      f"keep_alive: {seen}")
                lazy = wait_state(ms, mpb, "lazy", (mpb.MODEL_STATE_UNLOADED,))
                check(lazy.loads == 1, f"listed UNLOADED after 1 load: {lazy}")
                metrics = srv.scrape()
                check(lib.metric_value(metrics, "inferd_model_loads_total",
                                       {"model": "lazy", "result": "ready"}) == 1
                      and lib.metric_value(metrics, "inferd_model_unloads_total",
                                           {"model": "lazy"}) == 1,
                      "metrics count its load and its unload")

            base = f"http://127.0.0.1:{srv.http_port}"

            def http(method, path, body=None, key=KEY):
                req = urllib.request.Request(
                    base + path, method=method,
                    data=None if body is None else json.dumps(body).encode(),
                    headers={"Content-Type": "application/json",
                             **({"Authorization": "Bearer " + key} if key else {})})
                try:
                    with urllib.request.urlopen(req, timeout=300) as f:
                        return f.status, json.load(f)
                except urllib.error.HTTPError as e:
                    return e.code, json.load(e)
            code, _ = http("POST", "/v1/models", {"name": "c", "path": embed},
                           key=None)
            check(code == 401, f"POST /v1/models needs the API key: {code}")
            code, body = http("POST", "/v1/models",
                              {"name": "c", "path": embed,
                               "options": {"pooling": "mean"}})
            check(code == 200 and body.get("state") == "ready" and
                  body.get("id") == "c",
                  f"POST /v1/models loads a model: {code} {body}")
            code, body = http("POST", "/v1/models", {"name": "c", "path": embed})
            check(code == 409, f"loading it again without replace is 409: "
                               f"{code} {body}")
            code, body = http("POST", "/v1/models",
                              {"name": "d", "path": embed,
                               "options": {"max-seqs": "x"}})
            check(code == 400 and "max-seqs" in json.dumps(body),
                  f"a bad option is a 400 naming it: {code} {body}")
            code, body = http("DELETE", "/v1/models/c")
            check(code == 200 and body.get("deleted") is True and
                  body.get("state") == "unloaded",
                  f"DELETE /v1/models/c unloads it: {code} {body}")
            code, body = http("GET", "/v1/models/c")
            check(code == 404, f"and it is gone: {code}")
            code, body = http("DELETE", "/v1/models/nope")
            check(code == 404, f"unloading an unknown model is 404: {code}")
    finally:
        os.unlink(config)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inferd", required=True)
    ap.add_argument("--stubs", required=True)
    ap.add_argument("--test-models", required=True)
    ap.add_argument("--minilm", required=True)
    ap.add_argument("--smollm2", required=True)
    ap.add_argument("--venv-python", required=True)
    ap.add_argument("--shared")  # passed to every TEST_MODELS test; unused
    a = ap.parse_args()
    check = Checker()
    stubs = lib.import_stubs(a.stubs)
    hub_part(a, check, *stubs)
    load_under_load_part(a, check, *stubs)
    on_demand_part(a, check, *stubs)
    if check.failures:
        print(f"{len(check.failures)} failure(s)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
