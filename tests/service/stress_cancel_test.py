#!/usr/bin/env python3
"""Cancel storm against the real inferd binary (Debian python3-grpcio).

Hundreds of Generate streams and bidi Embed streams (plus EmbedBatch calls)
are cancelled at random points — before their first answer, right after it,
mid-stream — or given deadlines that expire, while normal requests run
beside them. Afterwards the server must still be alive and healthy, a greedy
generation must return exactly the tokens it returned before the storm, no
KV cache block may still be in use and no call may be left in flight.

This is the test that would have caught a server abort when an engine
delivered a chunk to a stream gRPC had already destroyed. Run it against an
AddressSanitizer build too: ctest runs it as asan_service_stress_cancel against
tests/sanitize's instrumented inferd_asan (label `sanitize`).

Usage: stress_cancel_test.py --inferd BIN --stubs DIR --test-models DIR
       [--shared DIR] [--generate N] [--embed N] [--batch N] [--seed S]
"""
import argparse
import os
import random
import re
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import inferd_testlib as tl  # noqa: E402

STORY_PREFIX = ", there was a little girl named Lily."


def parse_args():
    ap = argparse.ArgumentParser()
    tl.add_common_args(ap)
    ap.add_argument("--generate", type=int, default=400,
                    help="Generate streams in the storm")
    ap.add_argument("--embed", type=int, default=300,
                    help="bidi Embed streams in the storm")
    ap.add_argument("--batch", type=int, default=150,
                    help="EmbedBatch calls in the storm")
    ap.add_argument("--workers", type=int, default=48)
    ap.add_argument("--burst-threads", type=int, default=20,
                    help="burst phase: threads that each open "
                    "--burst-streams Generate streams at once, read one "
                    "chunk of each, then cancel them all")
    ap.add_argument("--burst-streams", type=int, default=25)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--timeout-scale", type=float, default=1.0,
                    help="scales the waits after the storm (sanitizer builds "
                    "are slower)")
    return ap.parse_args()


class Tally:
    """Outcome counts per (rpc, mode, outcome); thread-safe."""

    def __init__(self):
        self.mu = threading.Lock()
        self.counts = {}
        self.errors = []

    def add(self, key):
        with self.mu:
            self.counts[key] = self.counts.get(key, 0) + 1

    def fail(self, what):
        with self.mu:
            self.errors.append(what)


def main():
    args = parse_args()
    seed = args.seed if args.seed is not None else int(time.time())
    print(f"seed {seed}")
    rng = random.Random(seed)
    grpc, pb, rpc, _, _ = tl.import_stubs(args.stubs)
    health_pb = tl.load_health_pb2(args.stubs)

    stories = tl.stories_dir()
    embedder = os.path.join(args.test_models, "bert-embed")
    if not os.path.isfile(os.path.join(embedder, "config.json")):
        print(f"FAIL: test model {embedder} missing (make_test_models fixture)")
        return 1
    # A small KV cache so that leaked blocks cannot hide in a large pool, and
    # a small embedder queue so that overload answers (and the Embed
    # stream's backpressure when the queue is full) are part of the storm.
    server = tl.InferdProcess(
        args.inferd,
        [("stories", stories + ",kv-cache-memory=5MiB"),
         ("embed", embedder + ",max-queue-requests=96")],
        extra=["--metrics-listen", "127.0.0.1:0"],
        log_prefix="inferd-stress-")
    try:
        server.wait_ready(args.stubs, ["stories", "embed"])
        channel = grpc.insecure_channel(server.address)
        stub = rpc.InferenceStub(channel)
        health = tl.HealthClient(channel, health_pb)
        health.wait_serving()

        def greedy():
            req = pb.GenerateRequest(
                model="stories", prompt="Once upon a time",
                sampling=pb.SamplingParams(max_tokens=40, temperature=0))
            ids, text = [], ""
            for chunk in stub.Generate(req, timeout=120):
                ids.extend(chunk.token_ids)
                text += chunk.text
            return ids, text

        baseline_ids, baseline_text = greedy()
        if len(baseline_ids) != 40 or not baseline_text.startswith(STORY_PREFIX):
            print(f"FAIL: baseline greedy text {baseline_text!r}")
            return 1

        tally = Tally()
        jobs = []
        gen_modes = ["before_first", "after_first", "mid", "deadline",
                     "complete"]
        emb_modes = ["before_first", "after_first", "mid", "deadline",
                     "complete"]
        batch_modes = ["cancel", "deadline", "complete"]
        for i in range(args.generate):
            jobs.append(("gen", rng.choice(gen_modes), rng.randrange(1 << 30)))
        for i in range(args.embed):
            jobs.append(("emb", rng.choice(emb_modes), rng.randrange(1 << 30)))
        for i in range(args.batch):
            jobs.append(("batch", rng.choice(batch_modes),
                         rng.randrange(1 << 30)))
        # Normal greedy requests interleaved with the storm: their tokens
        # must not change.
        for i in range(12):
            jobs.append(("greedy", "complete", 0))
        rng.shuffle(jobs)

        ok_codes = {grpc.StatusCode.CANCELLED,
                    grpc.StatusCode.DEADLINE_EXCEEDED,
                    grpc.StatusCode.RESOURCE_EXHAUSTED}

        def record_error(kind, mode, e):
            """A call that ended with a status: counted, and a failure
            unless the mode allows it (overload is always an answer)."""
            code = e.code()
            tally.add((kind, mode, code.name))
            if mode == "complete" and code != grpc.StatusCode.RESOURCE_EXHAUSTED:
                tally.fail(f"{kind} complete ended with {code}: {e.details()}")
            elif code not in ok_codes:
                tally.fail(f"{kind} {mode} ended with {code}: {e.details()}")

        def run_generate(mode, s):
            r = random.Random(s)
            req = pb.GenerateRequest(
                model="stories",
                prompt=r.choice(["Once upon a time", "The cat", "Lily and Tom",
                                 "One day, a big dog"]),
                sampling=pb.SamplingParams(
                    max_tokens=r.randint(20, 200),
                    temperature=r.choice([0.0, 0.8]), seed=r.randrange(1000)))
            timeout = r.uniform(0.005, 0.3) if mode == "deadline" else 120
            call = stub.Generate(req, timeout=timeout)
            chunks = 0
            try:
                if mode == "before_first":
                    call.cancel()
                for chunk in call:
                    chunks += 1
                    if mode == "after_first" and chunks == 1:
                        call.cancel()
                    elif mode == "mid" and chunks == r.randint(2, 15):
                        call.cancel()
                    if chunk.finish_reason:
                        if mode == "complete" and not chunk.HasField("usage"):
                            tally.fail("gen: final chunk without usage")
                tally.add(("gen", mode, "OK"))
                if mode == "complete" and chunks == 0:
                    tally.fail("gen complete: no chunk")
            except grpc.RpcError as e:
                record_error("gen", mode, e)

        def run_embed(mode, s):
            r = random.Random(s)
            n = r.randint(1, 24)
            reqs = [pb.EmbedRequest(
                id=f"r{i}", model="embed",
                texts=[f"text number {i} of a stream " * r.randint(1, 6)
                       for _ in range(r.randint(1, 4))]) for i in range(n)]
            timeout = r.uniform(0.005, 0.2) if mode == "deadline" else 120
            call = stub.Embed(iter(reqs), timeout=timeout)
            got = []
            try:
                if mode == "before_first":
                    call.cancel()
                for resp in call:
                    got.append(resp.id)
                    if mode == "after_first" and len(got) == 1:
                        call.cancel()
                    elif mode == "mid" and len(got) == max(1, n // 2):
                        call.cancel()
                tally.add(("emb", mode, "OK"))
                if mode == "complete" and sorted(got) != sorted(q.id for q in reqs):
                    tally.fail(f"emb complete: answered {len(got)} of {n}")
            except grpc.RpcError as e:
                record_error("emb", mode, e)

        def run_batch(mode, s):
            r = random.Random(s)
            req = pb.EmbedRequest(model="embed", texts=[
                f"a batch text {i} " * r.randint(1, 20)
                for i in range(r.randint(1, 32))])
            timeout = r.uniform(0.002, 0.1) if mode == "deadline" else 120
            fut = stub.EmbedBatch.future(req, timeout=timeout)
            if mode == "cancel":
                time.sleep(r.uniform(0, 0.02))  # a random cancel point
                fut.cancel()
            try:
                resp = fut.result()
                tally.add(("batch", mode, "OK"))
                if len(resp.embeddings) != len(req.texts):
                    tally.fail("batch: wrong number of embeddings")
            except grpc.FutureCancelledError:
                tally.add(("batch", mode, "CANCELLED"))
            except grpc.RpcError as e:
                record_error("batch", mode, e)

        def run_greedy():
            ids, _ = greedy()
            tally.add(("greedy", "complete", "OK"))
            if ids != baseline_ids:
                tally.fail("greedy tokens changed during the storm")

        def run(job):
            kind, mode, s = job
            try:
                if kind == "gen":
                    run_generate(mode, s)
                elif kind == "emb":
                    run_embed(mode, s)
                elif kind == "batch":
                    run_batch(mode, s)
                else:
                    run_greedy()
            except Exception as e:  # noqa: BLE001 — reported, not hidden
                tally.fail(f"{kind} {mode}: {type(e).__name__}: {e}")

        def burst(t):
            # Many streams open at once, each cancelled after its first
            # chunk: the engine answers the aborted requests while gRPC
            # tears the calls down.
            r = random.Random(seed + t)
            calls = []
            try:
                for i in range(args.burst_streams):
                    calls.append(stub.Generate(pb.GenerateRequest(
                        model="stories", prompt="Once upon a time",
                        sampling=pb.SamplingParams(
                            max_tokens=200, temperature=0.8,
                            seed=r.randrange(1000))), timeout=120))
                for call in calls:
                    try:
                        next(call)
                    except (grpc.RpcError, StopIteration):
                        pass
                    call.cancel()
                    tally.add(("burst", "after_first", "CANCELLED"))
            except Exception as e:  # noqa: BLE001 — reported, not hidden
                tally.fail(f"burst: {type(e).__name__}: {e}")

        start = time.time()
        with ThreadPoolExecutor(max_workers=args.workers) as pool:
            bursts = [threading.Thread(target=burst, args=(t,))
                      for t in range(args.burst_threads)]
            for b in bursts:
                b.start()
            list(pool.map(run, jobs))
            for b in bursts:
                b.join()
        storm_seconds = time.time() - start
        for key in sorted(tally.counts):
            print(f"  {'/'.join(key)}: {tally.counts[key]}")
        print(f"storm: {len(jobs)} calls in {storm_seconds:.1f}s")

        failures = list(tally.errors)
        if server.proc.poll() is not None:
            print("FAIL: inferd died during the storm:\n" + server.output()[-4000:])
            return 1
        cancelled = sum(v for k, v in tally.counts.items()
                        if k[2] in ("CANCELLED", "DEADLINE_EXCEEDED"))
        if cancelled < len(jobs) // 4:
            failures.append(f"only {cancelled} calls were cancelled or expired: "
                            "the storm did not exercise cancellation")

        # Afterwards: healthy, same greedy tokens, nothing held.
        status = health.Check(health_pb.HealthCheckRequest(service=""),
                              timeout=10).status
        if status != health_pb.HealthCheckResponse.SERVING:
            failures.append(f"health is {status} after the storm")
        ids, _ = greedy()
        if ids != baseline_ids:
            failures.append("greedy tokens differ after the storm")
        try:
            emb = stub.EmbedBatch(pb.EmbedRequest(model="embed",
                                                  texts=["still serving"]),
                                  timeout=60 * args.timeout_scale)
            if len(emb.embeddings) != 1:
                failures.append("EmbedBatch after the storm: no embedding")
        except grpc.RpcError as e:
            failures.append(f"EmbedBatch after the storm: {e.code()} "
                            f"{e.details()}")

        def gauge(text, name, labels):
            for line in text.splitlines():
                if line.startswith(name + "{") and all(
                        f'{k}="{v}"' in line for k, v in labels.items()):
                    return float(line.rsplit(" ", 1)[1])
            return None

        # The engine frees blocks and gRPC finishes calls asynchronously:
        # wait (bounded) for the gauges to settle.
        deadline = time.time() + 30 * args.timeout_scale
        while True:
            text = server.scrape()
            used = gauge(text, "inferd_kv_cache_blocks",
                         {"model": "stories", "state": "used"})
            in_flight = None
            m = re.search(r"^inferd_rpc_in_flight(?:\{\})? (\S+)$", text,
                          re.MULTILINE)
            if m:
                in_flight = float(m.group(1))
            waiting = gauge(text, "inferd_num_requests_waiting",
                            {"model": "stories"})
            waiting_embed = gauge(text, "inferd_num_requests_waiting",
                                  {"model": "embed"})
            settled = (used == 0 and in_flight == 0 and waiting == 0 and
                       waiting_embed == 0)
            if settled or time.time() > deadline:
                break
            time.sleep(0.1)
        print(f"after: kv blocks used={used}, rpc in flight={in_flight}, "
              f"waiting stories={waiting} embed={waiting_embed}")
        if used != 0:
            failures.append(f"inferd_kv_cache_blocks{{state=\"used\"}} is {used}")
        if in_flight != 0:
            failures.append(f"inferd_rpc_in_flight is {in_flight}")
        if waiting != 0 or waiting_embed != 0:
            failures.append(f"inferd_num_requests_waiting is {waiting} "
                            f"(stories), {waiting_embed} (embed)")
        channel.close()
        rc = server.stop()
        if rc != 0:
            failures.append(f"inferd exited with {rc} on SIGTERM")
        out = server.output()
        if ("AddressSanitizer" in out or "runtime error:" in out or
                "ThreadSanitizer" in out):
            reports = out.count("WARNING: ThreadSanitizer")
            failures.append(f"sanitizer report ({reports} from TSan):\n" +
                            out[-6000:])
        if failures:
            for f in failures[:30]:
                print("FAIL:", f)
            print(f"{len(failures)} failure(s)")
            return 1
        print("PASS: server alive, greedy tokens unchanged, no KV block or "
              "call left")
        return 0
    finally:
        server.kill()


if __name__ == "__main__":
    sys.exit(main())
