#!/usr/bin/env python3
"""inferd vs ONNX Runtime on the same BERT sentence encoder (embeddings/s).

For benchmarks only, never in CI. One command (it makes the venv itself):

  bench/compare/embed_vs_onnxruntime.sh [BUILD_DIR] [-- options]

which runs this file with the venv of bench/compare/onnxruntime_setup.sh
(onnxruntime, onnx, numpy). Needs BUILD_DIR/service/inferd,
BUILD_DIR/bench/inferd-bench and the real all-MiniLM-L6-v2
(scripts/fetch-models.sh all-minilm-l6-v2, into BUILD_DIR/models).

1. Export: tools/export_onnx.py writes the model's own safetensors weights
   as an ONNX graph (BUILD_DIR/bench-compare/<model>.onnx). Checked here:
   ONNX Runtime's embeddings of a few padded token sequences against the
   NumPy reference (tests/reference/reference.py), cosine >= 0.9999.
2. Speed, alternating runs (inferd dtype A, ORT, inferd dtype B, ORT, ...,
   --rounds times):
   - inferd: the server binary with the model on --threads cores (--layout
     replicas: that many single-threaded replicas, inferd's default for
     small encoders; threads: one replica), the given dtype, driven by inferd-bench over gRPC: --concurrency 8 clients,
     fixed 128-token inputs (token ids), --rpc embed-batch by default (one
     input per request), --duration seconds after a warmup;
   - ONNX Runtime: an InferenceSession in this process, 2 intra-op
     threads (1 inter-op, sequential, all graph optimizations), batches of
     B random 128-token sequences (no padding) for each B of --batch-sizes,
     run back to back for --duration seconds; its figure is the best B.
     --ort-dtypes float32 (the exported graph) and int8 (the same graph
     through onnxruntime.quantization.quantize_dynamic: int8 weights per
     output channel on the weight MatMuls, uint8 activations quantized per
     call; see quantize()).
   Ratios: each inferd run over each ORT run of the same round.
Prints a markdown table and writes --json.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def export(model_dir, out):
    import onnx
    import export_onnx
    if not os.path.isfile(out) or os.path.getmtime(out) < os.path.getmtime(
            os.path.join(model_dir, "model.safetensors")):
        model, _ = export_onnx.build_model(model_dir)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        onnx.save(model, out)
    return out


def make_session(path, threads):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def quantize(path):
    """ORT's own dynamic int8 quantization of the exported graph: the
    MatMuls with a weight (initializer) input, int8 weights per output
    channel. (quantize_dynamic's defaults, per-tensor weights and every
    MatMul and Gather, leave a worst cosine of 0.87 to the reference on
    this model; per channel on the weight MatMuls 0.986.)"""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic
    out = path[:-len(".onnx")] + ".int8.onnx"
    if not os.path.isfile(out) or os.path.getmtime(out) < os.path.getmtime(path):
        model = onnx.load(path)
        weights = {i.name for i in model.graph.initializer}
        nodes = [n.name for n in model.graph.node
                 if n.op_type == "MatMul" and any(i in weights for i in n.input)]
        quantize_dynamic(path, out, weight_type=QuantType.QInt8, per_channel=True,
                         nodes_to_quantize=nodes)
    return out


def check_fidelity(sess, model_dir):
    """Worst cosine of ORT vs the NumPy reference over padded sequences."""
    import reference as ref
    rm = ref.Model(model_dir)
    rng = np.random.default_rng(1)
    lengths = [7, 31, 128]
    S = max(lengths)
    ids = np.zeros((len(lengths), S), dtype=np.int64)
    mask = np.zeros_like(ids)
    for r, n in enumerate(lengths):
        ids[r, :n] = rng.integers(1000, rm.cfg["vocab_size"], size=n)
        mask[r, :n] = 1
    got = sess.run(None, {"input_ids": ids, "attention_mask": mask})[0]
    worst = 1.0
    for r, n in enumerate(lengths):
        hidden, _ = rm.forward(ids[r, :n])
        want = ref.st_embedding(model_dir, hidden)
        a = got[r].astype(np.float64)
        worst = min(worst, float(a @ want / (np.linalg.norm(a) * np.linalg.norm(want))))
    return worst


def run_ort(sess, vocab, batch, tokens, seconds):
    rng = np.random.default_rng(batch)
    ids = rng.integers(1000, vocab, size=(batch, tokens)).astype(np.int64)
    feed = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
    sess.run(None, feed)  # warmup
    n = 0
    t0 = time.perf_counter()
    while True:
        sess.run(None, feed)
        n += 1
        dt = time.perf_counter() - t0
        if dt >= seconds:
            return n * batch / dt


def run_inferd(args, dtype):
    log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)
    # Both layouts use --threads cores: one single-threaded replica per
    # core (inferd's default for small encoders) or one replica whose
    # kernels split across them.
    if args.layout == "replicas":
        layout = "replicas=%d,threads=1" % args.threads
    else:
        layout = "replicas=1,threads=%d" % args.threads
    cmd = [os.path.join(args.build, "service", "inferd"), "--listen", "127.0.0.1:0",
           "--model", "m=%s,%s,dtype=%s" % (args.model_dir, layout, dtype)]
    proc = subprocess.Popen(cmd, stdout=log, stderr=log)
    try:
        port = None
        deadline = time.time() + 120
        while port is None and time.time() < deadline:
            if proc.poll() is not None:
                raise SystemExit("inferd exited:\n" + open(log.name).read())
            text = open(log.name).read()
            m = re.search(r"\(port (\d+)\)", text)
            if m and "model 'm' ready" in text:
                port = m.group(1)
            else:
                time.sleep(0.1)
        if port is None:
            raise SystemExit("inferd did not start:\n" + open(log.name).read())
        out = os.path.join(tempfile.gettempdir(), "inferd-bench-%d.json" % os.getpid())
        bench = [os.path.join(args.build, "bench", "inferd-bench"),
                 "--address", "127.0.0.1:" + port, "--rpc", args.rpc, "--model", "m",
                 "--concurrency", str(args.concurrency), "--duration", str(args.duration),
                 "--warmup", str(args.concurrency), "--input-len", "fixed:%d" % args.tokens,
                 "--json", out]
        subprocess.run(bench, check=True, stdout=subprocess.DEVNULL)
        with open(out) as f:
            result = json.load(f)
        os.unlink(out)
        return result["throughput"]["embeddings_per_s"]
    finally:
        proc.terminate()
        proc.wait()
        os.unlink(log.name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--model-dir", default=None,
                    help="default BUILD/models/all-minilm-l6-v2")
    ap.add_argument("--dtypes", default="float32,int8",
                    help="inferd dtypes, comma-separated")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--rpc", default="embed-batch")
    ap.add_argument("--layout", choices=["replicas", "threads"], default="replicas",
                    help="inferd's use of --threads cores: that many single-threaded "
                         "replicas (its default for small encoders) or one replica")
    ap.add_argument("--ort-dtypes", default="float32,int8",
                    help="ONNX Runtime graphs: float32 and/or int8 (quantize_dynamic)")
    ap.add_argument("--batch-sizes", default="8,16,32")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    if args.model_dir is None:
        args.model_dir = os.path.join(args.build, "models", "all-minilm-l6-v2")
    if not os.path.isfile(os.path.join(args.model_dir, "model.safetensors")):
        raise SystemExit("no model at %s (scripts/fetch-models.sh all-minilm-l6-v2)"
                         % args.model_dir)
    import onnxruntime as ort

    name = os.path.basename(os.path.normpath(args.model_dir))
    path = export(args.model_dir, os.path.join(args.build, "bench-compare", name + ".onnx"))
    ort_dtypes = args.ort_dtypes.split(",")
    sessions = {}
    for od in ort_dtypes:
        graph = path if od == "float32" else quantize(path)
        sessions[od] = make_session(graph, args.threads)
        cos = check_fidelity(sessions[od], args.model_dir)
        print("ONNX Runtime %s %s, graph %s: worst cosine to the NumPy reference %.6f"
              % (ort.__version__, od, graph, cos))
        # The F32 graph must be the model; the int8 one is as close as
        # ORT's quantizer gets (reported, not required).
        if od == "float32" and cos < 0.9999:
            raise SystemExit("exported graph disagrees with the reference")
        if od != "float32" and cos < 0.98:
            raise SystemExit("ORT's int8 graph is far from the reference")
    with open(os.path.join(args.model_dir, "config.json")) as f:
        vocab = json.load(f)["vocab_size"]
    batches = [int(b) for b in args.batch_sizes.split(",")]
    dtypes = args.dtypes.split(",")

    rows = []
    for rnd in range(args.rounds):
        order = dtypes if rnd % 2 == 0 else list(reversed(dtypes))
        ort_order = ort_dtypes if rnd % 2 == 0 else list(reversed(ort_dtypes))
        ort_best = {}
        # inferd and ORT runs alternate within a round (both orders flip
        # from round to round).
        sequence = []
        for i in range(max(len(order), len(ort_order))):
            if i < len(order):
                sequence.append(("inferd", order[i]))
            if i < len(ort_order):
                sequence.append(("ort", ort_order[i]))
        for engine, what in sequence:
            load = loadavg()
            if engine == "ort":
                per = {b: run_ort(sessions[what], vocab, b, args.tokens, args.duration)
                       for b in batches}
                best = max(per, key=per.get)
                ort_best[what] = per[best]
                rows.append(dict(round=rnd + 1, engine="onnxruntime", dtype=what,
                                 emb_s=per[best], detail="batch %d (%s)" % (best, ", ".join(
                                     "%d: %.1f" % (b, v) for b, v in per.items())), load=load))
            else:
                e = run_inferd(args, what)
                rows.append(dict(round=rnd + 1, engine="inferd", dtype=what, emb_s=e,
                                 detail="%s, %d clients, %s" % (
                                     args.rpc, args.concurrency,
                                     "%d replicas x 1 thread" % args.threads
                                     if args.layout == "replicas"
                                     else "1 replica x %d threads" % args.threads),
                                 load=load))
            print("  round %d %-11s %-8s %7.1f emb/s  (load %s)" % (
                rows[-1]["round"], rows[-1]["engine"], rows[-1]["dtype"],
                rows[-1]["emb_s"], load), flush=True)
        for r in rows:
            if r["round"] == rnd + 1:
                r["ratio"] = {od: r["emb_s"] / v for od, v in ort_best.items()}

    print()
    heads = " | ".join("x ORT %s" % od for od in ort_dtypes)
    print("| round | engine | dtype | emb/s | %s | detail | load (1/5/15 min) |" % heads)
    print("|---|---|---|---|%s---|---|" % ("---|" * len(ort_dtypes)))
    for r in rows:
        print("| %d | %s | %s | %.1f | %s | %s | %s |" % (
            r["round"], r["engine"], r["dtype"], r["emb_s"],
            " | ".join("%.2f" % r["ratio"][od] for od in ort_dtypes), r["detail"], r["load"]))
    print()
    for dtype in dtypes:
        for od in ort_dtypes:
            ratios = [r["ratio"][od] for r in rows
                      if r["engine"] == "inferd" and r["dtype"] == dtype]
            print("inferd %s / ONNX Runtime %s: median %.2fx (runs: %s)" % (
                dtype, od, statistics.median(ratios), ", ".join("%.2f" % x for x in ratios)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(onnxruntime=ort.__version__,
                           args=vars(args), rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
