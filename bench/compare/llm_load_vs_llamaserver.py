#!/usr/bin/env python3
"""inferd vs llama.cpp's llama-server under a closed-loop generation load.

For benchmarks only, never in CI. One command (it builds what it needs):

  bench/compare/llm_load_vs_llamaserver.sh [BUILD_DIR] [-- options]

Both servers load the SAME GGUF file (default: the TinyLlama-1.1B-shaped F16
file of bench/compare/gguf_vs_llamacpp.py, random weights, 2.1 GB), run on
--threads threads, and get the same load: --streams closed-loop clients
(each sends its next request when the previous one has finished), prompts of
--input-len token ids, --output-len generated tokens with EOS ignored,
greedy, prompt caching off, for --seconds after one warm-up request per
stream. Alternating rounds: inferd, llama-server, llama-server, inferd, ...

- inferd: BUILD_DIR/service/inferd, driven over gRPC by
  BUILD_DIR/bench/inferd-bench (--rpc generate, prompt_token_ids).
- inferd-http: the same inferd over its OpenAI HTTP API (--http-listen),
  driven by the HTTP client in this file as llama-server is: POST
  /v1/completions with the prompt as token ids, stream=true, ignore_eos,
  max_tokens, temperature 0, stream_options.include_usage; every streamed
  chunk is a token (the final usage gives the count when a chunk was held
  back for partial UTF-8).
- llama-server: built from the llama.cpp that llama-cpp-python's sdist
  vendors (bench/compare/llamaserver_setup.sh), with --parallel = streams
  slots (its continuous batching), context streams x (input + output),
  driven by the HTTP client in this file: POST /completion with the prompt
  as token ids, stream=true, ignore_eos, n_predict, cache_prompt=false;
  every streamed event is a token (the time of each is recorded).

Per run: output tokens/s (generated tokens of the requests completed in the
window / window from the first timed send to the last answer), TTFT p50/p99,
TPOT p50 ((e2e - TTFT) / (n - 1)), longest gap between two tokens of one
request p50/p99. Ratios inferd / llama-server per round.

The machine bound the issue asks about (16-stream tokens/s the hardware
allows): one step of S streams reads every weight once (bytes at
--bandwidth-gbs) and computes its tokens (2 x parameters FLOP each at
--peak-gflops): S decoded tokens plus, on average, S x input / output
prompt tokens (every request brings its prompt for output-len steps);
bound = S / (bytes / bandwidth + S (1 + in / out) x 2 x params / peak).
Both are measured on this machine by inferd_kernels_bench at startup when
not given (stream read; the faster of the FP32 FMA and BF16 dot peaks).
"""
import argparse
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def gguf_weights(path):
    """(bytes one decode step streams, parameters) of a GGUF."""
    import gguf
    r = gguf.GGUFReader(path)
    sizes = {t.name: int(t.n_bytes) for t in r.tensors}
    elems = {t.name: int(t.n_elements) for t in r.tensors}
    step = sum(sizes.values())
    params = sum(elems.values())
    if "output.weight" in sizes:  # untied head: the embedding is a row lookup
        step -= sizes.get("token_embd.weight", 0)
        params -= elems.get("token_embd.weight", 0)
    return step, params


def wait_port(proc, log_path, pattern, what, timeout=600):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if proc.poll() is not None:
            sys.exit(f"{what} exited: see {log_path}")
        with open(log_path, errors="replace") as f:
            m = re.search(pattern, f.read())
        if m:
            return m
        time.sleep(0.2)
    sys.exit(f"{what} did not start within {timeout} s: see {log_path}")


# ------------------------------------------------------------------ inferd
def run_inferd(args, out_dir, tag):
    log = os.path.join(out_dir, f"inferd-{tag}.log")
    with open(log, "w") as lf:
        proc = subprocess.Popen(
            [os.path.join(args.build, "service/inferd"), "--listen", "127.0.0.1:0",
             "--threads", str(args.threads), "--kv-cache-memory", "2GiB",
             "--model", f"m={args.gguf}"] + args.inferd_flag,
            stdout=lf, stderr=subprocess.STDOUT)
    try:
        port = wait_port(proc, log, r"\(port (\d+)\)", "inferd").group(1)
        wait_port(proc, log, r"model\(s\) ready", "inferd")
        js = os.path.join(out_dir, f"inferd-{tag}.json")
        load = loadavg()
        subprocess.run(
            [os.path.join(args.build, "bench/inferd-bench"), "--address",
             f"127.0.0.1:{port}", "--rpc", "generate", "--model", "m",
             "--concurrency", str(args.streams), "--duration", str(args.seconds),
             "--warmup", str(args.streams), "--input-len", f"fixed:{args.input_len}",
             "--output-len", f"fixed:{args.output_len}", "--disable-prefix-cache",
             "--json", js], check=True, stdout=subprocess.DEVNULL)
        r = json.load(open(js))
        lat = r["latency_ms"]
        return {"out_tok_s": r["throughput"]["output_tokens_per_s"],
                "requests": r["requests"]["completed"],
                "ttft_p50": lat["ttft"]["p50"], "ttft_p99": lat["ttft"]["p99"],
                "tpot_p50": lat["tpot"]["p50"],
                "gap_p50": lat["itl_max"]["p50"], "gap_p99": lat["itl_max"]["p99"],
                "load": load}
    finally:
        proc.terminate()
        proc.wait()


# ------------------------------------------------------------ inferd HTTP
class InferdHttpClient:
    """inferd's OpenAI API: /v1/completions streamed, prompt as token ids."""

    def __init__(self, port):
        self.port = port

    def tokenize(self, text):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        c.request("POST", "/tokenize",
                  json.dumps({"model": "m", "prompt": text,
                              "add_special_tokens": False}),
                  {"Content-Type": "application/json"})
        r = json.loads(c.getresponse().read())
        c.close()
        return r["tokens"]

    def complete(self, ids, n):
        """Streams one completion; returns (send time, token arrival times)."""
        body = json.dumps({"model": "m", "prompt": ids, "max_tokens": n,
                           "stream": True, "ignore_eos": True,
                           "temperature": 0.0,
                           "stream_options": {"include_usage": True}})
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=1200)
        t0 = time.monotonic()
        c.request("POST", "/v1/completions", body,
                  {"Content-Type": "application/json"})
        resp = c.getresponse()
        if resp.status != 200:
            raise RuntimeError(f"inferd: HTTP {resp.status}: {resp.read()[:200]}")
        times = []
        total = None
        for line in resp:
            line = line.strip()
            if not line.startswith(b"data: "):
                continue
            if line == b"data: [DONE]":
                break
            ev = json.loads(line[6:])
            now = time.monotonic()
            if ev.get("usage"):
                total = ev["usage"]["completion_tokens"]
            if ev.get("choices"):
                times.append(now)
        c.close()
        if total is not None and total > len(times):
            times.extend([times[-1] if times else time.monotonic()] *
                         (total - len(times)))
        return t0, times


def run_inferd_http(args, out_dir, tag, prompts):
    log = os.path.join(out_dir, f"inferd-http-{tag}.log")
    with open(log, "w") as lf:
        proc = subprocess.Popen(
            [os.path.join(args.build, "service/inferd"), "--listen", "127.0.0.1:0",
             "--http-listen", f"127.0.0.1:{args.http_port}",
             "--threads", str(args.threads), "--kv-cache-memory", "2GiB",
             "--model", f"m={args.gguf}"] + args.inferd_flag,
            stdout=lf, stderr=subprocess.STDOUT)
    try:
        wait_port(proc, log, r"model\(s\) ready", "inferd")
        return closed_loop(args, InferdHttpClient(args.http_port), prompts)
    finally:
        proc.terminate()
        proc.wait()


def closed_loop(args, client, prompts):
    """--streams closed-loop clients of `client` for --seconds after one
    warm-up request each: the figures of the requests completed in time."""
    load = loadavg()
    results = []
    lock = threading.Lock()
    start = [None]
    stop_at = [None]
    barrier = threading.Barrier(args.streams)
    errors = []

    def stream(i):
        try:
            body(i)
        except Exception as e:  # noqa: BLE001 - reported after the join
            errors.append(e)
            barrier.abort()

    def body(i):
        k = i
        ids = prompts[k % len(prompts)]
        client.complete(ids, args.output_len)  # warm-up, not recorded
        barrier.wait()
        with lock:
            if start[0] is None:
                start[0] = time.monotonic()
                stop_at[0] = start[0] + args.seconds
        while time.monotonic() < stop_at[0]:
            k += args.streams
            t0, times = client.complete(prompts[k % len(prompts)], args.output_len)
            with lock:
                results.append((t0, times))

    threads = [threading.Thread(target=stream, args=(i,)) for i in range(args.streams)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    end = max(ts[-1] for _, ts in results)
    if args.trace:
        # One line per request: send time from the window's start, TTFT and
        # end-to-end (s), in send order.
        with open(args.trace, "a") as f:
            for t0, ts in sorted(results):
                f.write("%s %.3f %.3f %.3f\n" % (type(client).__name__, t0 - start[0],
                                                  ts[0] - t0, ts[-1] - t0))
    toks = sum(len(ts) for _, ts in results)
    ttft = [(ts[0] - t0) * 1e3 for t0, ts in results]
    tpot = [(ts[-1] - ts[0]) * 1e3 / (len(ts) - 1) for _, ts in results if len(ts) > 1]
    gaps = [max(b - a for a, b in zip(ts, ts[1:])) * 1e3 for _, ts in results if len(ts) > 1]
    # The first --streams requests leave together (the barrier after the
    # warm-ups): the last of that burst waits for every prompt before it
    # (streams x input-len prompt tokens at the prefill rate). The later
    # ones arrive as earlier requests finish.
    later = [(ts[0] - t0) * 1e3 for t0, ts in sorted(results)[args.streams:]]
    return {"out_tok_s": toks / (end - start[0]), "requests": len(results),
            "ttft_p50": pct(ttft, 50), "ttft_p99": pct(ttft, 99),
            "ttft_p99_after_burst": pct(later, 99) if later else float("nan"),
            "tpot_p50": pct(tpot, 50), "gap_p50": pct(gaps, 50),
            "gap_p99": pct(gaps, 99), "load": load}


# ------------------------------------------------------------ llama-server
class ServerClient:
    def __init__(self, port):
        self.port = port

    def tokenize(self, text):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        c.request("POST", "/tokenize", json.dumps({"content": text}),
                  {"Content-Type": "application/json"})
        r = json.loads(c.getresponse().read())
        c.close()
        return r["tokens"]

    def complete(self, ids, n):
        """Streams one completion; returns (send time, token arrival times)."""
        body = json.dumps({"prompt": ids, "n_predict": n, "stream": True,
                           "ignore_eos": True, "temperature": 0.0,
                           "cache_prompt": False, "samplers": ["top_k"],
                           "top_k": 1, "return_tokens": True})
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=1200)
        t0 = time.monotonic()
        c.request("POST", "/completion", body, {"Content-Type": "application/json"})
        resp = c.getresponse()
        if resp.status != 200:
            raise RuntimeError(f"llama-server: HTTP {resp.status}: {resp.read()[:200]}")
        times = []
        predicted = None
        for line in resp:
            line = line.strip()
            if not line.startswith(b"data: "):
                continue
            ev = json.loads(line[6:])
            # An event carries the tokens decoded since the last one (the
            # server holds back incomplete UTF-8, the last event may carry
            # tokens too): each counts at its event's arrival.
            now = time.monotonic()
            if ev.get("stop"):
                times.extend([now] * len(ev.get("tokens") or []))
                predicted = ev.get("timings", {}).get("predicted_n", ev.get("tokens_predicted"))
                # Tokens held back and flushed with the final text (partial
                # UTF-8 of byte tokens) arrive with this last event.
                if predicted is not None and predicted > len(times):
                    times.extend([now] * (predicted - len(times)))
                break
            times.extend([now] * (len(ev["tokens"]) if "tokens" in ev else 1))
        c.close()
        if predicted is not None and predicted != len(times):
            raise RuntimeError(f"llama-server streamed {len(times)} tokens but "
                               f"reports {predicted}")
        return t0, times


def run_llamaserver(args, out_dir, tag, prompts):
    log = os.path.join(out_dir, f"llama-server-{tag}.log")
    ctx = args.streams * (args.input_len + args.output_len + 16)
    with open(log, "w") as lf:
        proc = subprocess.Popen(
            [args.llama_server, "-m", args.gguf, "--host", "127.0.0.1",
             "--port", str(args.llama_port), "-t", str(args.threads), "-tb",
             str(args.threads), "-np", str(args.streams), "-c", str(ctx),
             "--no-webui"] + args.llama_flag,
            stdout=lf, stderr=subprocess.STDOUT)
    try:
        wait_port(proc, log, r"server is listening|HTTP server listening|llama_server: listening on",
                  "llama-server")
        return closed_loop(args, ServerClient(args.llama_port), prompts)
    finally:
        proc.terminate()
        proc.wait()


def cut_prompts(args, ids):
    """--input-len-token prompts from `ids`, each at another offset."""
    while len(ids) < 4 * args.input_len:
        ids = ids + ids
    step = max(1, (len(ids) - args.input_len) // 64)
    return [ids[o:o + args.input_len]
            for o in range(0, len(ids) - args.input_len, step)][:64]


def english_text():
    with open(os.path.join(ROOT, "bench/load/english_texts.txt")) as f:
        return " ".join(l.strip() for l in f if l.strip())


def inferd_prompts(args):
    """The prompts cut from English text tokenized by inferd's /tokenize
    (the same GGUF tokenizer llama-server uses)."""
    log = os.path.join(args.out, "inferd-tokenize.log")
    with open(log, "w") as lf:
        proc = subprocess.Popen(
            [os.path.join(args.build, "service/inferd"), "--listen", "127.0.0.1:0",
             "--http-listen", f"127.0.0.1:{args.http_port}",
             "--model", f"m={args.gguf}"], stdout=lf, stderr=subprocess.STDOUT)
    try:
        wait_port(proc, log, r"model\(s\) ready", "inferd")
        ids = InferdHttpClient(args.http_port).tokenize(english_text())
    finally:
        proc.terminate()
        proc.wait()
    return cut_prompts(args, ids)


def llama_prompts(args):
    """--input-len-token prompts cut from English text with the model's own
    tokenizer (llama-server's /tokenize), each starting at another offset."""
    log = os.path.join(args.out, "llama-server-tokenize.log")
    with open(log, "w") as lf:
        proc = subprocess.Popen(
            [args.llama_server, "-m", args.gguf, "--host", "127.0.0.1", "--port",
             str(args.llama_port), "-t", str(args.threads), "-c", "512", "--no-webui"],
            stdout=lf, stderr=subprocess.STDOUT)
    try:
        wait_port(proc, log, r"server is listening|HTTP server listening|llama_server: listening on", "llama-server")
        ids = ServerClient(args.llama_port).tokenize(english_text())
    finally:
        proc.terminate()
        proc.wait()
    return cut_prompts(args, ids)


def measure_machine(args):
    """(stream bandwidth GB/s, compute peak GFLOP/s) on args.threads threads,
    from inferd_kernels_bench's startup measurements unless given. The peak is
    the faster of the FP32 FMA and the vdpbf16ps peaks (the bound asks what
    the machine allows, whichever path reaches it)."""
    bw, peak = args.bandwidth_gbs, args.peak_gflops
    if bw is None or peak is None:
        out = subprocess.run(
            [os.path.join(args.build, "bench/inferd_kernels_bench"),
             "--benchmark_filter=BM_Linear/M:4096/N:384/K:384/bf16:0/threads:1/"],
            capture_output=True, text=True).stderr
        t = min(args.threads, 2)
        m = re.search(rf"machine, {t} thread\(s\): FP32 FMA peak ([0-9.]+) GFLOP/s, "
                      rf"BF16 dot peak ([0-9.]+) GFLOP/s, .*?stream read ([0-9.]+) GB/s", out)
        if not m:
            sys.exit("could not read the machine figures from inferd_kernels_bench; "
                     "pass --bandwidth-gbs and --peak-gflops")
        bw = bw if bw is not None else float(m.group(3))
        peak = peak if peak is not None else max(float(m.group(1)), float(m.group(2)))
    return bw, peak


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--gguf", default=None)
    ap.add_argument("--llama-server", default=None,
                    help="llama-server binary (needed when --engines has it)")
    ap.add_argument("--http-port", type=int, default=18732,
                    help="inferd's HTTP API port for the inferd-http engine")
    ap.add_argument("--llama-port", type=int, default=18731)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--streams", type=int, default=16)
    ap.add_argument("--input-len", type=int, default=128)
    ap.add_argument("--output-len", type=int, default=128)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--rounds", type=int, default=1,
                    help="rounds of (inferd, llama-server), order alternating")
    ap.add_argument("--bandwidth-gbs", type=float, default=None)
    ap.add_argument("--peak-gflops", type=float, default=None,
                    help="compute FLOP/s of all --threads threads together")
    ap.add_argument("--inferd-flag", action="append", default=[],
                    help="extra inferd flag (repeatable), e.g. --inferd-flag=--max-seqs=32")
    ap.add_argument("--llama-flag", action="append", default=[],
                    help="extra llama-server flag (repeatable)")
    ap.add_argument("--engines", default="inferd,llama-server",
                    help="which to run, comma-separated: inferd (gRPC), "
                         "inferd-http (the OpenAI API), llama-server")
    ap.add_argument("--trace", default=None,
                    help="HTTP-driven engines: append each request's send time, "
                         "TTFT and end-to-end seconds to this file")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    args.gguf = args.gguf or os.path.join(args.build, "bench-compare/tinyllama-shape-f16.gguf")
    args.out = args.out or os.path.join(args.build, "bench-compare/llm-load")
    os.makedirs(args.out, exist_ok=True)

    step_bytes, params = gguf_weights(args.gguf)
    bw, peak = measure_machine(args)
    # A step decodes one token of every stream and, on average, computes
    # input_len / output_len prompt tokens per decoded token (each request
    # brings input_len prompt tokens for output_len steps).
    step_tokens = args.streams * (1 + args.input_len / args.output_len)
    step_s = step_bytes / (bw * 1e9) + step_tokens * 2 * params / (peak * 1e9)
    bound = args.streams / step_s
    print(f"model {os.path.basename(args.gguf)}: {step_bytes / 1e9:.2f} GB read per step, "
          f"{params / 1e9:.2f} G parameters; machine {bw:.1f} GB/s, {peak:.0f} GFLOP/s "
          f"on {args.threads} threads -> bound {bound:.1f} tok/s at "
          f"{args.streams} streams ({step_s * 1e3:.0f} ms a step)", flush=True)

    engines = args.engines.split(",")
    if "llama-server" in engines and not args.llama_server:
        sys.exit("--engines has llama-server: pass --llama-server BIN")
    prompts = (llama_prompts(args) if "llama-server" in engines
               else inferd_prompts(args))
    rows = []
    all_engines = ["inferd", "inferd-http", "llama-server"]
    for rnd in range(args.rounds):
        order = all_engines if rnd % 2 == 0 else all_engines[::-1]
        res = {}
        for who in [o for o in order if o in engines]:
            tag = f"r{rnd}"
            if who == "inferd":
                res[who] = run_inferd(args, args.out, tag)
            elif who == "inferd-http":
                res[who] = run_inferd_http(args, args.out, tag, prompts)
            else:
                res[who] = run_llamaserver(args, args.out, tag, prompts)
            r = res[who]
            print(f"round {rnd} {who}: {r['out_tok_s']:.1f} out tok/s, TTFT p50/p99 "
                  f"{r['ttft_p50']:.0f}/{r['ttft_p99']:.0f} ms, TPOT p50 "
                  f"{r['tpot_p50']:.0f} ms, longest gap p50/p99 {r['gap_p50']:.0f}/"
                  f"{r['gap_p99']:.0f} ms, {r['requests']} requests [load {r['load']}]",
                  flush=True)
        rows.append(res)

    print()
    print("| round | engine | out tok/s | TTFT p50 / p99 ms | TTFT p99 after the "
          "first burst ms | TPOT p50 ms | "
          "longest gap p50 / p99 ms | gap p99 / TPOT p50 | requests | load |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for i, res in enumerate(rows):
        for who in [w for w in all_engines if w in res]:
            r = res[who]
            after = r.get("ttft_p99_after_burst")
            print(f"| {i} | {who} | {r['out_tok_s']:.1f} | {r['ttft_p50']:.0f} / "
                  f"{r['ttft_p99']:.0f} | "
                  f"{'%.0f' % after if after is not None else 'n/a (inferd-bench)'} | "
                  f"{r['tpot_p50']:.0f} | {r['gap_p50']:.0f} / "
                  f"{r['gap_p99']:.0f} | {r['gap_p99'] / r['tpot_p50']:.1f} | "
                  f"{r['requests']} | {r['load']} |")
    for a, b in (("inferd", "llama-server"), ("inferd-http", "llama-server"),
                 ("inferd-http", "inferd")):
        ratios = [res[a]["out_tok_s"] / res[b]["out_tok_s"]
                  for res in rows if a in res and b in res]
        if ratios:
            print(f"\nout tok/s {a} / {b} per round: "
                  + ", ".join(f"{x:.2f}x" for x in ratios))
    if all("inferd" in res for res in rows):
        inf = statistics.median(res["inferd"]["out_tok_s"] for res in rows)
        print(f"inferd median {inf:.1f} tok/s = {100 * inf / bound:.0f}% of the bound "
              f"{bound:.1f} tok/s")
    with open(os.path.join(args.out, "result.json"), "w") as f:
        json.dump({"rounds": rows, "bound_tok_s": bound, "bandwidth_gbs": bw,
                   "peak_gflops": peak, "step_bytes": step_bytes, "params": params,
                   "args": {k: v for k, v in vars(args).items()}}, f, indent=1)


if __name__ == "__main__":
    main()
