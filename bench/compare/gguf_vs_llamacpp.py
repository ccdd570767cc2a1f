#!/usr/bin/env python3
"""inferd vs llama.cpp (through llama-cpp-python) on the same GGUF files.

For benchmarks only, never in CI. Run it with the venv that
bench/compare/llamacpp_setup.sh makes (llama_cpp, gguf, numpy):

  PY=$(bench/compare/llamacpp_setup.sh)
  $PY bench/compare/gguf_vs_llamacpp.py            # fidelity + speed

inferd is the real server binary (build/service/inferd), one process per
model, driven over gRPC by a client that runs under the system Python
(/usr/bin/python3, which has grpcio) with the generated stubs of
build/python: this file started with --client, speaking JSON lines on
stdin/stdout. llama.cpp runs in this process.

Fidelity: the real SmolLM2-135M-Instruct GGUF (Q4_1; scripts/fetch-models.sh),
10 chat conversations rendered and tokenized by inferd's Tokenize RPC; the
same prompt ids go to both engines; 32 greedy tokens each (inferd: Generate
with prompt_token_ids, temperature 0; llama.cpp: eval + argmax of the last
logits). Per prompt: identical, or the first index where they differ (with
llama.cpp's top-1/top-2 logit gap there: a near-tie flips on rounding);
with --reference-python (build/venv's, default) also both against the
float64 NumPy reference of tests/gguf/gguf_reference.py.

Speed: batch-1 decode, both on 2 threads, the same file, alternating runs
(inferd, llama.cpp, llama.cpp, inferd, ...): --tokens greedy tokens after a
short prompt (EOS ignored), decode ms/token = time from the first to the
last generated token / (tokens - 1) (inferd: chunk arrival times at the
gRPC client; llama.cpp: wall time of its per-token eval calls, the argmax
in NumPy included). Prefill: a --prefill-token prompt, one generated token:
inferd's time to first token (server Timings, queue excluded) vs llama.cpp's
eval of the prompt; prefix caching off. Models: SmolLM2 Q4_1 and
TinyLlama-1.1B-shaped GGUFs with random weights (written here with the
`gguf` package into build/bench-compare/) at Q4_0, Q8_0 and F16.
GB/s = bytes of the weights a decode step reads (every tensor but the
token embedding, which is read once per token as a row, unless it is
also the output projection) x tokens/s.

Prints the tables (markdown) and writes --json.
"""
import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# The conversations of the CI fidelity test (tests/gguf/smollm2_test.py),
# so both compare the same prompts.
sys.path.insert(0, os.path.join(ROOT, "tests", "gguf"))
from smollm2_test import CONVERSATIONS  # noqa: E402

# TinyLlama-1.1B's shape.
TINYLLAMA = dict(hidden=2048, layers=22, heads=32, kv_heads=4, ffn=5632,
                 vocab=32000, ctx=2048)
SYNTH_NAME = "inferd-bench tinyllama-shape random v1"


# ---------------------------------------------------------------- gRPC client
# Runs under /usr/bin/python3 (grpcio + the generated stubs).

def client_main(args):
    sys.path.insert(0, args.stubs)
    import grpc
    from inferd.v1 import inference_pb2 as pb
    from inferd.v1 import inference_pb2_grpc as rpc
    from inferd.v1 import models_pb2 as mpb
    from inferd.v1 import models_pb2_grpc as mrpc
    channel = grpc.insecure_channel(args.address)
    stub = rpc.InferenceStub(channel)
    mstub = mrpc.ModelsStub(channel)

    def handle(req):
        op = req["op"]
        if op == "wait_ready":
            deadline = time.time() + req.get("timeout", 300)
            while time.time() < deadline:
                try:
                    r = mstub.ListModels(mpb.ListModelsRequest(), timeout=5)
                    for m in r.models:
                        if m.state == mpb.MODEL_STATE_FAILED:
                            return {"error": f"{m.name}: {m.error}"}
                    if r.models and all(m.state == mpb.MODEL_STATE_READY
                                        for m in r.models):
                        return {"ok": True}
                except grpc.RpcError:
                    pass
                time.sleep(0.2)
            return {"error": "models never became ready"}
        if op == "tokenize":
            msgs = [pb.ChatMessage(role=r, content=c) for r, c in req["messages"]]
            t = stub.Tokenize(pb.TokenizeRequest(model=req["model"],
                                                 messages=msgs))
            return {"ids": list(t.token_ids), "rendered": t.rendered_prompt}
        if op == "generate":
            kw = dict(max_tokens=req["max_tokens"], temperature=0)
            if req.get("ignore_eos"):
                kw["ignore_eos"] = True
            sampling = pb.SamplingParams(**kw)
            ids, times, timings = [], [], None
            t0 = time.perf_counter()
            for chunk in stub.Generate(pb.GenerateRequest(
                    model=req["model"],
                    prompt_token_ids=pb.TokenIds(ids=req["ids"]),
                    sampling=sampling, disable_prefix_cache=True)):
                now = time.perf_counter()
                for t in chunk.token_ids:
                    ids.append(t)
                    times.append(now - t0)
                if chunk.HasField("timings"):
                    timings = {
                        "queue": chunk.timings.queue_seconds,
                        "ttft": chunk.timings.time_to_first_token_seconds,
                        "total": chunk.timings.total_seconds}
            return {"ids": ids, "times": times, "timings": timings}
        return {"error": "unknown op " + op}

    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            out = handle(json.loads(line))
        except Exception as e:  # reported to the driver
            out = {"error": repr(e)}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()
    return 0


# ------------------------------------------------------------- inferd server

class Inferd:
    """One inferd process serving one model, and its gRPC client."""

    def __init__(self, binary, stubs, client_python, name, path, threads):
        self.name = name
        self.log = tempfile.NamedTemporaryFile(prefix="inferd-compare-",
                                               suffix=".log", delete=False)
        cmd = [binary, "--listen", "127.0.0.1:0", "--threads", str(threads),
               "--kv-cache-memory", "1GiB", "--model", f"{name}={path}"]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=self.log)
        port = None
        deadline = time.time() + 120
        while time.time() < deadline and port is None:
            m = re.search(r"\(port (\d+)\)", self.output())
            if m:
                port = int(m.group(1))
            elif self.proc.poll() is not None:
                raise RuntimeError("inferd exited: " + self.output())
            else:
                time.sleep(0.05)
        if port is None:
            log = self.output()
            self.stop()
            raise RuntimeError("inferd never listened: " + log)
        self.client = subprocess.Popen(
            [client_python, os.path.abspath(__file__), "--client",
             "--stubs", stubs, "--address", f"127.0.0.1:{port}"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        r = self.call(op="wait_ready")
        if "error" in r:
            log = self.output()
            self.stop()
            raise RuntimeError("inferd: " + r["error"] + "\n" + log)

    def output(self):
        with open(self.log.name, errors="replace") as f:
            return f.read()

    def call(self, **req):
        self.client.stdin.write(json.dumps(req) + "\n")
        self.client.stdin.flush()
        r = json.loads(self.client.stdout.readline())
        return r

    def generate(self, ids, max_tokens, ignore_eos=False):
        r = self.call(op="generate", model=self.name, ids=ids,
                      max_tokens=max_tokens, ignore_eos=ignore_eos)
        if "error" in r:
            raise RuntimeError("inferd Generate: " + r["error"])
        return r

    def version(self):
        return subprocess.run([self.proc.args[0], "--version"],
                              capture_output=True, text=True).stdout.strip()

    def stop(self):
        if getattr(self, "client", None) and self.client.poll() is None:
            self.client.stdin.close()
            self.client.wait(timeout=30)
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=60)
        os.unlink(self.log.name)


# ----------------------------------------------------------------- llama.cpp

class LlamaCpp:
    def __init__(self, path, threads, seed=1234):
        import llama_cpp
        self.llm = llama_cpp.Llama(
            model_path=path, n_threads=threads, n_threads_batch=threads,
            n_ctx=2048, n_batch=512, seed=seed, logits_all=False,
            verbose=False)
        self.eos = self.llm.token_eos()

    def _last(self):
        """The last evaluated token's logits (llama-cpp-python no longer
        copies them into Llama.scores without logits_all)."""
        import llama_cpp
        import numpy as np
        ptr = llama_cpp.llama_get_logits_ith(self.llm.ctx, -1)
        return np.ctypeslib.as_array(ptr, shape=(self.llm.n_vocab(),))

    def greedy(self, ids, n, stop_at_eos=True):
        """Greedy tokens after `ids`; with the logit gap top1 - top2 of
        each step and per-token wall times (from the end of the prompt)."""
        import numpy as np
        llm = self.llm
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(ids)
        t_prompt = time.perf_counter() - t0
        out, gaps, times = [], [], []
        t0 = time.perf_counter()
        for i in range(n):
            logits = self._last()
            tok = int(np.argmax(logits))
            top2 = np.partition(logits, -2)[-2:]
            out.append(tok)
            gaps.append(float(top2[1] - top2[0]))
            times.append(time.perf_counter() - t0)
            if (stop_at_eos and tok == self.eos) or i == n - 1:
                break
            llm.eval([tok])
        return out, gaps, times, t_prompt


# ------------------------------------------------------------ synthetic GGUF

def tensor_bytes(path):
    """(all tensor bytes, bytes one decode step streams) of a GGUF."""
    import gguf
    r = gguf.GGUFReader(path)
    sizes = {t.name: int(t.n_bytes) for t in r.tensors}
    total = sum(sizes.values())
    step = total
    if "output.weight" in sizes:
        step -= sizes.get("token_embd.weight", 0)
    return total, step


def synth_ok(path):
    if not os.path.isfile(path):
        return False
    try:
        import gguf
        r = gguf.GGUFReader(path)
        f = r.fields.get("general.name")
        return f is not None and bytes(f.parts[f.data[0]]).decode() == SYNTH_NAME
    except Exception:
        return False


def write_tinyllama(path, qtype_name, seed=0):
    """TinyLlama-1.1B shape, random normal weights x 0.02, every 2-D weight
    (token_embd and output too) in `qtype_name`, norms F32; a SentencePiece
    (`llama`) vocabulary like TinyLlama's: <unk> <s> </s>, 256 byte tokens,
    then synthetic pieces."""
    import gguf
    import numpy as np
    s = TINYLLAMA
    tmp = path + ".tmp"
    w = gguf.GGUFWriter(tmp, "llama")
    w.add_name(SYNTH_NAME)
    w.add_context_length(s["ctx"])
    w.add_embedding_length(s["hidden"])
    w.add_block_count(s["layers"])
    w.add_feed_forward_length(s["ffn"])
    w.add_head_count(s["heads"])
    w.add_head_count_kv(s["kv_heads"])
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_rope_dimension_count(s["hidden"] // s["heads"])
    w.add_vocab_size(s["vocab"])
    tokens = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    types = ([gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL,
              gguf.TokenType.CONTROL] + [gguf.TokenType.BYTE] * 256)
    letters = "abcdefghijklmnopqrstuvwxyz"
    i = 0
    while len(tokens) < s["vocab"]:
        word, k = "", i
        while True:
            word = letters[k % 26] + word
            k = k // 26 - 1
            if k < 0:
                break
        tokens.append(("\u2581" if i % 2 == 0 else "") + word)
        types.append(gguf.TokenType.NORMAL)
        i += 1
    scores = [0.0] * 259 + [-float(j) for j in range(len(tokens) - 259)]
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)

    rng = np.random.default_rng(seed)
    qt = gguf.GGMLQuantizationType[qtype_name]
    h, f, hd = s["hidden"], s["ffn"], s["hidden"] // s["heads"]

    def mat(name, rows, cols):
        a = rng.standard_normal((rows, cols), dtype=np.float32) * 0.02
        if qt == gguf.GGMLQuantizationType.F16:
            w.add_tensor(name, a.astype(np.float16))
        else:
            w.add_tensor(name, gguf.quants.quantize(a, qt), raw_dtype=qt)

    mat("token_embd.weight", s["vocab"], h)
    for layer in range(s["layers"]):
        p = f"blk.{layer}."
        w.add_tensor(p + "attn_norm.weight", np.ones(h, np.float32))
        mat(p + "attn_q.weight", h, h)
        mat(p + "attn_k.weight", s["kv_heads"] * hd, h)
        mat(p + "attn_v.weight", s["kv_heads"] * hd, h)
        mat(p + "attn_output.weight", h, h)
        w.add_tensor(p + "ffn_norm.weight", np.ones(h, np.float32))
        mat(p + "ffn_gate.weight", f, h)
        mat(p + "ffn_up.weight", f, h)
        mat(p + "ffn_down.weight", h, f)
    w.add_tensor("output_norm.weight", np.ones(h, np.float32))
    mat("output.weight", s["vocab"], h)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, path)


# ------------------------------------------------------------------ measuring

def busy_ticks():
    """Clock ticks all CPUs spent busy (not idle or iowait) so far."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v) - v[3] - v[4]


def proc_ticks(pids):
    """User + system clock ticks of these processes (all threads)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except OSError:
            pass
    return total


class OthersCpu:
    """CPU cores other processes kept busy between start() and stop(): the
    machine's busy time less this benchmark's own processes'."""

    def __init__(self, pids):
        self.pids = [os.getpid()] + list(pids)

    def start(self):
        self.t0, self.b0, self.p0 = (time.time(), busy_ticks(),
                                     proc_ticks(self.pids))

    def stop(self):
        hz = os.sysconf("SC_CLK_TCK")
        dt = time.time() - self.t0
        others = (busy_ticks() - self.b0) - (proc_ticks(self.pids) - self.p0)
        return max(0.0, others / hz / dt)


def wait_quiet(max_busy, max_wait):
    """Waits (up to max_wait s) until other processes keep fewer than
    max_busy cores busy (sampled over 5 s while this benchmark is idle);
    returns that figure and the load averages."""
    deadline = time.time() + max_wait
    probe = OthersCpu([])
    while True:
        probe.start()
        time.sleep(5)
        busy = probe.stop()
        if busy <= max_busy or time.time() > deadline:
            return {"others_cores_busy": busy, "loadavg": os.getloadavg()}
        print(f"  other processes busy on {busy:.2f} cores > {max_busy}: "
              f"waiting", file=sys.stderr)
        time.sleep(10)


def fidelity(args, gguf_path):
    server = Inferd(args.inferd, args.stubs, args.client_python, "smollm2",
                    gguf_path, args.threads)
    try:
        prompts = [server.call(op="tokenize", model="smollm2",
                               messages=conv)["ids"]
                   for conv in CONVERSATIONS]
        inferd_out = [server.generate(ids, args.fidelity_tokens)["ids"]
                      for ids in prompts]
    finally:
        server.stop()
    reference = None
    if args.reference_python and os.path.exists(args.reference_python):
        # tests/gguf/gguf_reference.py: float64 NumPy on weights dequantized
        # by gguf-py (the reference inferd's tests hold it to).
        r = subprocess.run(
            [args.reference_python,
             os.path.join(ROOT, "tests/gguf/gguf_reference.py"),
             "--gguf", gguf_path, "--prompts", json.dumps(prompts),
             "--tokens", str(args.fidelity_tokens)],
            capture_output=True, text=True, timeout=3600)
        if r.returncode == 0:
            reference = json.loads(r.stdout)["greedy"]
        else:
            print("float64 reference failed:", r.stderr[-2000:], file=sys.stderr)
    llama = LlamaCpp(gguf_path, args.threads)
    rows = []
    for i, ids in enumerate(prompts):
        ref, gaps, _, _ = llama.greedy(ids, args.fidelity_tokens)
        got = inferd_out[i]
        first = first_difference(ref, got)
        row = {"prompt": i, "prompt_ids": ids, "inferd": got,
               "llama_cpp": ref, "identical": first is None,
               "first_divergence": first}
        if first is not None and first < len(gaps):
            row["llama_cpp_top2_gap_at_divergence"] = gaps[first]
        if reference is not None:
            row["float64_reference"] = reference[i]
            row["inferd_vs_reference"] = first_difference(reference[i], got)
            row["llama_cpp_vs_reference"] = first_difference(reference[i], ref)
        rows.append(row)
    del llama
    return rows


def first_difference(a, b):
    """The first index where the token lists differ (one ending counts),
    or None when equal."""
    for j in range(max(len(a), len(b))):
        if j >= len(a) or j >= len(b) or a[j] != b[j]:
            return j
    return None


def speed_one(args, label, path):
    total_bytes, step_bytes = tensor_bytes(path)
    prompt = [1] + [1000 + 37 * i % 20000 for i in range(15)]
    long_prompt = [1] + [300 + (7919 * i) % 30000 for i in range(
        args.prefill_tokens - 1)]
    vocab_cap = 49000 if "smollm2" in label else 31999
    long_prompt = [t % vocab_cap for t in long_prompt]
    res = {"model": label, "file": path, "tensor_bytes": total_bytes,
           "decode_step_bytes": step_bytes, "inferd": [], "llama_cpp": [],
           "inferd_pp": [], "llama_cpp_pp": [], "load": [], "others": []}
    res["before"] = wait_quiet(args.max_busy, args.max_wait)
    print(f"  before: {res['before']}", file=sys.stderr)
    server = Inferd(args.inferd, args.stubs, args.client_python, "m", path,
                    args.threads)
    llama = LlamaCpp(path, args.threads)
    others = OthersCpu([server.proc.pid, server.client.pid])
    try:
        # Warm-up: page the file in for both, first-call costs.
        server.generate(prompt, 8, ignore_eos=True)
        llama.greedy(prompt, 8, stop_at_eos=False)
        n = args.tokens
        for r in range(args.runs):
            order = ["inferd", "llama"] if r % 2 == 0 else ["llama", "inferd"]
            others.start()
            for who in order:
                time.sleep(0.5)
                if who == "inferd":
                    g = server.generate(prompt, n, ignore_eos=True)
                    t = g["times"]
                    assert len(t) == n, f"inferd gave {len(t)} tokens"
                    res["inferd"].append((t[-1] - t[0]) / (n - 1) * 1e3)
                    if g["timings"]:
                        res.setdefault("inferd_server_ms", []).append(
                            (g["timings"]["total"] - g["timings"]["ttft"]) /
                            (n - 1) * 1e3)
                else:
                    _, _, t, _ = llama.greedy(prompt, n, stop_at_eos=False)
                    assert len(t) == n
                    res["llama_cpp"].append((t[-1] - t[0]) / (n - 1) * 1e3)
            res["others"].append(others.stop())
            res["load"].append(os.getloadavg()[0])
            print(f"  {label} run {r}: inferd {res['inferd'][-1]:.1f} ms/tok, "
                  f"llama.cpp {res['llama_cpp'][-1]:.1f} ms/tok, "
                  f"load {res['load'][-1]:.2f}, others busy "
                  f"{res['others'][-1]:.2f} cores", file=sys.stderr)
        if args.prefill_tokens:
            for r in range(args.prefill_runs):
                order = ["inferd", "llama"] if r % 2 == 0 else ["llama", "inferd"]
                for who in order:
                    time.sleep(0.5)
                    if who == "inferd":
                        g = server.generate(long_prompt, 1, ignore_eos=True)
                        tm = g["timings"]
                        res["inferd_pp"].append(
                            len(long_prompt) / (tm["ttft"] - tm["queue"]))
                    else:
                        _, _, _, tp = llama.greedy(long_prompt, 1,
                                                   stop_at_eos=False)
                        res["llama_cpp_pp"].append(len(long_prompt) / tp)
                print(f"  {label} pp run {r}: inferd "
                      f"{res['inferd_pp'][-1]:.0f} tok/s, llama.cpp "
                      f"{res['llama_cpp_pp'][-1]:.0f} tok/s", file=sys.stderr)
    finally:
        server.stop()
        del llama
    return res


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def versions(args):
    import llama_cpp
    v = {"llama_cpp_python": llama_cpp.__version__,
         "python": platform.python_version()}
    try:
        v["llama_cpp_system_info"] = llama_cpp.llama_print_system_info().decode()
    except Exception:
        pass
    try:
        from importlib.metadata import version
        v["gguf"] = version("gguf")
        v["numpy"] = version("numpy")
    except Exception:
        pass
    v["inferd"] = subprocess.run([args.inferd, "--version"],
                                 capture_output=True, text=True).stdout.strip()
    try:
        v["inferd_commit"] = subprocess.run(
            ["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True).stdout.strip()
    except Exception:
        pass
    try:
        with open("/proc/cpuinfo") as f:
            v["cpu"] = re.search(r"model name\s*:\s*(.*)", f.read()).group(1)
    except Exception:
        pass
    return v


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--address", help=argparse.SUPPRESS)
    ap.add_argument("--inferd", default=os.path.join(ROOT, "build/service/inferd"))
    ap.add_argument("--stubs", default=os.path.join(ROOT, "build/python"))
    ap.add_argument("--client-python", default="/usr/bin/python3",
                    help="a Python with grpcio for the inferd client")
    ap.add_argument("--smollm2", default=os.path.join(
        ROOT, "build/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--model-dir", default=os.path.join(ROOT, "build/bench-compare"),
                    help="where the synthetic TinyLlama-shape GGUFs are written")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--fidelity-tokens", type=int, default=32)
    ap.add_argument("--reference-python",
                    default=os.path.join(ROOT, "build/venv/bin/python"),
                    help="the test venv's python (scripts/python-deps.sh): "
                    "also run the float64 reference of tests/gguf; '' skips")
    ap.add_argument("--tokens", type=int, default=128, help="decode tokens per run")
    ap.add_argument("--runs", type=int, default=5, help="decode runs per engine")
    ap.add_argument("--prefill-tokens", type=int, default=512, help="0: no prefill")
    ap.add_argument("--prefill-runs", type=int, default=3)
    ap.add_argument("--models", default="smollm2,q4_0,q8_0,f16",
                    help="speed models: smollm2 and/or q4_0,q8_0,f16 (TinyLlama shape)")
    ap.add_argument("--skip-fidelity", action="store_true")
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument("--make-models-only", action="store_true")
    ap.add_argument("--max-busy", type=float, default=0.3,
                    help="before each model, wait until other processes "
                    "keep fewer cores than this busy")
    ap.add_argument("--max-wait", type=float, default=300,
                    help="longest wait for a quiet machine, seconds")
    ap.add_argument("--json", default=os.path.join(ROOT, "build/bench-compare/result.json"))
    args = ap.parse_args()
    if args.client:
        return client_main(args)

    models = [m for m in args.models.split(",") if m]
    synth = {q: os.path.join(args.model_dir, f"tinyllama-shape-{q}.gguf")
             for q in ("q4_0", "q8_0", "f16")}
    os.makedirs(args.model_dir, exist_ok=True)
    for q in [m for m in models if m in synth]:
        if not synth_ok(synth[q]):
            print(f"writing {synth[q]} ...", file=sys.stderr)
            t0 = time.time()
            write_tinyllama(synth[q], q.upper())
            print(f"  {time.time() - t0:.0f} s", file=sys.stderr)
    if args.make_models_only:
        return 0

    out = {"versions": versions(args), "threads": args.threads,
           "load_start": os.getloadavg()}
    print("## versions")
    for k, v in out["versions"].items():
        print(f"- {k}: {v}")
    print(f"- load average at start: {out['load_start']}")

    if not args.skip_fidelity:
        out["fidelity"] = fidelity(args, args.smollm2)
        print(f"\n## fidelity: SmolLM2-135M-Instruct Q4_1, "
              f"{args.fidelity_tokens} greedy tokens\n")
        def show(j):
            return "identical" if j is None else f"differ from token {j}"
        has_ref = "float64_reference" in out["fidelity"][0]
        print("| prompt | prompt tokens | inferd vs llama.cpp | llama.cpp "
              "top-2 logit gap there |" +
              (" inferd vs float64 ref | llama.cpp vs float64 ref |"
               if has_ref else ""))
        print("|---|---|---|---|" + ("---|---|" if has_ref else ""))
        for r in out["fidelity"]:
            gap = r.get("llama_cpp_top2_gap_at_divergence")
            line = (f"| {r['prompt']} | {len(r['prompt_ids'])} | "
                    f"{show(r['first_divergence'])} | "
                    f"{'' if gap is None else f'{gap:.3f}'} |")
            if has_ref:
                line += (f" {show(r['inferd_vs_reference'])} | "
                         f"{show(r['llama_cpp_vs_reference'])} |")
            print(line)
        same = sum(r["identical"] for r in out["fidelity"])
        print(f"\n{same}/{len(out['fidelity'])} identical")

    if not args.skip_speed:
        out["speed"] = []
        labels = {"smollm2": "SmolLM2-135M Q4_1", "q4_0": "TinyLlama-shape Q4_0",
                  "q8_0": "TinyLlama-shape Q8_0", "f16": "TinyLlama-shape F16"}
        for m in models:
            path = args.smollm2 if m == "smollm2" else synth[m]
            print(f"speed: {labels[m]}", file=sys.stderr)
            out["speed"].append(speed_one(args, labels[m], path))
        print(f"\n## batch-1 decode, {args.threads} threads, {args.tokens} tokens, "
              f"medians of {args.runs} alternating runs\n")
        print("| model | weights streamed/token | inferd ms/tok (tok/s, GB/s) | "
              "llama.cpp ms/tok (tok/s, GB/s) | inferd/llama.cpp speed | "
              "pp{0} inferd tok/s | pp{0} llama.cpp tok/s | pp ratio | "
              "load avg | others' cores |"
              .format(args.prefill_tokens))
        print("|---|---|---|---|---|---|---|---|---|---|")
        for r in out["speed"]:
            a, b = med(r["inferd"]), med(r["llama_cpp"])
            gb = r["decode_step_bytes"] / 1e9
            pa, pb_ = med(r["inferd_pp"]), med(r["llama_cpp_pp"])
            print(f"| {r['model']} | {gb * 1e3:.0f} MB | {a:.1f} ({1e3 / a:.1f}, "
                  f"{gb * 1e3 / a:.1f}) | {b:.1f} ({1e3 / b:.1f}, "
                  f"{gb * 1e3 / b:.1f}) | {b / a:.2f}x | {pa:.0f} | {pb_:.0f} | "
                  f"{pa / pb_:.2f}x | {min(r['load']):.2f}-{max(r['load']):.2f} | "
                  f"{min(r['others']):.2f}-{max(r['others']):.2f} |")
        print("\nload avg: 1-minute load average after each pair of runs "
              "(this benchmark's own 2 threads included); others' cores: "
              "CPU cores kept busy by other processes during each pair.")
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(out, f, indent=1)
    print(f"\n(raw figures: {args.json})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
