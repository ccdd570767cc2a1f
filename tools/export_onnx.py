#!/usr/bin/env python3
"""Writes a BERT sentence encoder as an ONNX graph, node by node.

  tools/export_onnx.py MODEL_DIR OUT.onnx [--check]

MODEL_DIR is a Hugging Face BERT directory (config.json, model.safetensors,
and for sentence-transformers models modules.json with a Pooling module
and optionally Normalize). The graph is built with onnx.helper from the
safetensors weights (read here, as float32), nothing else:

  inputs   input_ids int64 [batch, seq], attention_mask int64 [batch, seq]
  output   sentence_embedding float32 [batch, hidden]

  word + position (0..seq-1) + token-type-0 embeddings, LayerNorm;
  per layer: Q, K, V projections, scores = Q K^T / sqrt(head_dim) plus
  -1e9 where attention_mask is 0, Softmax, context, output projection,
  residual + LayerNorm; GELU (erf, or tanh for gelu_new) MLP, residual +
  LayerNorm; then the pooling of the directory's Pooling module (mean over
  the masked tokens, or the first token) and L2 normalization when
  modules.json has Normalize. Opset 17 (LayerNormalization is a standard
  op there). Weights are stored in the file (graphs above 2 GiB are not
  supported; BERT-base is 0.4 GiB).

--check evaluates the written graph with onnx's own NumPy evaluator
(onnx.reference) on a few token sequences and compares the embeddings with
the NumPy reference of tests/reference/reference.py (cosine >= 0.9999 per
sequence, exit 1 otherwise). Needs the `onnx` and `numpy` packages only.
"""
import argparse
import json
import math
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_ST_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64}


def read_safetensors(path):
    """name -> float32 numpy array."""
    with open(path, "rb") as f:
        data = f.read()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        raw = data[8 + n + b:8 + n + e]
        if info["dtype"] == "BF16":
            bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            arr = bits.view(np.float32)
        elif info["dtype"] in _ST_DTYPES:
            arr = np.frombuffer(raw, dtype=_ST_DTYPES[info["dtype"]])
        else:
            continue  # integer buffers (position_ids) are not weights
        out[name] = arr.astype(np.float32).reshape(info["shape"])
    return out


def load_json(path, default=None):
    if not os.path.isfile(path):
        return default
    with open(path) as f:
        return json.load(f)


def pooling_of(model_dir):
    """(pooling mode, normalize) from modules.json; mean + no norm without."""
    modules = load_json(os.path.join(model_dir, "modules.json"), [])
    mode, norm = "mean", False
    for m in modules:
        kind = m["type"].rsplit(".", 1)[-1]
        if kind == "Pooling":
            pc = load_json(os.path.join(model_dir, m["path"], "config.json"), {})
            if pc.get("pooling_mode_cls_token"):
                mode = "cls"
            elif pc.get("pooling_mode_mean_tokens"):
                mode = "mean"
            else:
                raise SystemExit("export_onnx: only mean or CLS pooling is supported")
        elif kind == "Normalize":
            norm = True
        elif kind != "Transformer":
            raise SystemExit("export_onnx: unsupported sentence-transformers module %s" % kind)
    return mode, norm


class GraphBuilder:
    """Collects nodes and initializers; names are made unique by counters."""

    def __init__(self, helper, numpy_helper):
        self.h = helper
        self.nh = numpy_helper
        self.nodes = []
        self.inits = []
        self.n = 0

    def name(self, base):
        self.n += 1
        return "%s_%d" % (base, self.n)

    def const(self, base, array):
        name = self.name(base)
        self.inits.append(self.nh.from_array(np.asarray(array), name))
        return name

    def op(self, op_type, inputs, base=None, **attrs):
        out = self.name(base or op_type.lower())
        self.nodes.append(self.h.make_node(op_type, inputs, [out], **attrs))
        return out


def build_model(model_dir):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    cfg = load_json(os.path.join(model_dir, "config.json"))
    if cfg is None or cfg.get("model_type") != "bert":
        raise SystemExit("export_onnx: %s is not a BERT model (config.json "
                         "model_type must be bert)" % model_dir)
    weights = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    prefix = next((p for p in ("", "bert.", "model.")
                   if p + "embeddings.word_embeddings.weight" in weights), None)
    if prefix is None:
        raise SystemExit("export_onnx: no embeddings.word_embeddings.weight")

    def w(name):
        return weights[prefix + name]

    H = cfg["hidden_size"]
    heads = cfg["num_attention_heads"]
    D = H // heads
    eps = float(cfg.get("layer_norm_eps", 1e-12))
    act = cfg.get("hidden_act", "gelu")
    if act not in ("gelu", "gelu_new", "gelu_pytorch_tanh"):
        raise SystemExit("export_onnx: unsupported hidden_act %s" % act)
    mode, norm = pooling_of(model_dir)

    g = GraphBuilder(helper, numpy_helper)
    ids, mask = "input_ids", "attention_mask"
    i64 = lambda v: np.asarray(v, dtype=np.int64)
    f32 = lambda v: np.asarray(v, dtype=np.float32)

    def linear(x, name):
        wt = g.const(name + "_wT", np.ascontiguousarray(w(name + ".weight").T))
        y = g.op("MatMul", [x, wt])
        return g.op("Add", [y, g.const(name + "_b", w(name + ".bias"))])

    def layer_norm(x, name):
        return g.op("LayerNormalization",
                    [x, g.const(name + "_g", w(name + ".weight")),
                     g.const(name + "_b", w(name + ".bias"))],
                    axis=-1, epsilon=eps)

    # Embeddings: word[ids] + position[0:seq] + token_type[0].
    word = g.op("Gather", [g.const("word_emb", w("embeddings.word_embeddings.weight")), ids],
                axis=0)
    shape = g.op("Shape", [ids])
    seq = g.op("Gather", [shape, g.const("one", i64(1))], axis=0)
    seq1 = g.op("Unsqueeze", [seq, g.const("zero_axis", i64([0]))])
    pos = g.op("Slice", [g.const("pos_emb", w("embeddings.position_embeddings.weight")),
                         g.const("zero_start", i64([0])), seq1,
                         g.const("axis0", i64([0]))])
    x = g.op("Add", [word, pos])
    if prefix + "embeddings.token_type_embeddings.weight" in weights:
        x = g.op("Add", [x, g.const("type0", w("embeddings.token_type_embeddings.weight")[0])])
    x = layer_norm(x, "embeddings.LayerNorm")

    # Additive mask [batch, 1, 1, seq]: 0 where attended, -1e9 elsewhere.
    maskf = g.op("Cast", [mask], to=TensorProto.FLOAT)
    bias = g.op("Mul", [g.op("Sub", [g.const("f_one", f32(1.0)), maskf]),
                        g.const("neg", f32(-1e9))])
    bias = g.op("Unsqueeze", [bias, g.const("axes12", i64([1, 2]))])
    split_shape = g.const("split_heads", i64([0, 0, heads, D]))
    merge_shape = g.const("merge_heads", i64([0, 0, H]))
    scale = g.const("scale", f32(1.0 / math.sqrt(D)))
    sqrt_half = g.const("rsqrt2", f32(1.0 / math.sqrt(2.0)))
    half = g.const("half", f32(0.5))
    one = g.const("f_one", f32(1.0))

    for i in range(cfg["num_hidden_layers"]):
        p = "encoder.layer.%d." % i
        q = g.op("Reshape", [linear(x, p + "attention.self.query"), split_shape])
        k = g.op("Reshape", [linear(x, p + "attention.self.key"), split_shape])
        v = g.op("Reshape", [linear(x, p + "attention.self.value"), split_shape])
        q = g.op("Transpose", [q], perm=[0, 2, 1, 3])  # [b, h, s, d]
        k = g.op("Transpose", [k], perm=[0, 2, 3, 1])  # [b, h, d, s]
        v = g.op("Transpose", [v], perm=[0, 2, 1, 3])
        scores = g.op("Mul", [g.op("MatMul", [q, k]), scale])
        probs = g.op("Softmax", [g.op("Add", [scores, bias])], axis=-1)
        ctx = g.op("Transpose", [g.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
        ctx = g.op("Reshape", [ctx, merge_shape])
        attn = linear(ctx, p + "attention.output.dense")
        x = layer_norm(g.op("Add", [attn, x]), p + "attention.output.LayerNorm")
        h = linear(x, p + "intermediate.dense")
        if act == "gelu":  # 0.5 h (1 + erf(h / sqrt 2))
            e = g.op("Erf", [g.op("Mul", [h, sqrt_half])])
        else:  # 0.5 h (1 + tanh(sqrt(2/pi) (h + 0.044715 h^3)))
            h3 = g.op("Mul", [g.op("Mul", [h, h]), h])
            inner = g.op("Add", [h, g.op("Mul", [h3, g.const("c", f32(0.044715))])])
            e = g.op("Tanh", [g.op("Mul", [inner, g.const("k", f32(math.sqrt(2 / math.pi)))])])
        h = g.op("Mul", [g.op("Mul", [h, half]), g.op("Add", [e, one])])
        out = linear(h, p + "output.dense")
        x = layer_norm(g.op("Add", [out, x]), p + "output.LayerNorm")

    if mode == "mean":
        m3 = g.op("Unsqueeze", [maskf, g.const("axis2", i64([2]))])  # [b, s, 1]
        total = g.op("ReduceSum", [g.op("Mul", [x, m3]), g.const("axis1", i64([1]))],
                     keepdims=0)
        count = g.op("ReduceSum", [m3, g.const("axis1", i64([1]))], keepdims=0)
        count = g.op("Max", [count, g.const("tiny", f32(1e-9))])
        pooled = g.op("Div", [total, count])
    else:
        pooled = g.op("Gather", [x, g.const("first", i64(0))], axis=1)
    if norm:
        l2 = g.op("ReduceL2", [pooled], axes=[-1], keepdims=1)  # axes: attribute in opset 17
        l2 = g.op("Max", [l2, g.const("eps_norm", f32(1e-12))])
        pooled = g.op("Div", [pooled, l2])
    g.nodes.append(helper.make_node("Identity", [pooled], ["sentence_embedding"]))

    graph = helper.make_graph(
        g.nodes, "inferd_bert_encoder",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT,
                                       ["batch", H])],
        initializer=g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="inferd tools/export_onnx.py")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model, cfg


def check(model, model_dir, cfg, sequences=3, seed=0):
    """Max over sequences of 1 - cosine(onnx.reference, NumPy reference)."""
    from onnx.reference import ReferenceEvaluator
    sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
    import reference as ref

    rm = ref.Model(model_dir)
    rng = np.random.default_rng(seed)
    ev = ReferenceEvaluator(model)
    lengths = [5, 17, 33][:sequences]
    # Batched with padding: the shorter rows test the attention mask.
    S = max(lengths)
    ids = np.zeros((len(lengths), S), dtype=np.int64)
    mask = np.zeros_like(ids)
    for r, n in enumerate(lengths):
        ids[r, :n] = rng.integers(1, cfg["vocab_size"], size=n)
        mask[r, :n] = 1
    got = ev.run(None, {"input_ids": ids, "attention_mask": mask})[0]
    worst = 0.0
    for r, n in enumerate(lengths):
        hidden, _ = rm.forward(ids[r, :n])
        want = ref.st_embedding(model_dir, hidden)
        if want is None:
            want = ref.pool(hidden, "mean")
        a = got[r].astype(np.float64)
        cos = float(a @ want / (np.linalg.norm(a) * np.linalg.norm(want)))
        print("export_onnx check: %d tokens: cosine %.7f" % (n, cos))
        worst = max(worst, 1.0 - cos)
    return worst


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("out")
    ap.add_argument("--check", action="store_true",
                    help="compare the graph (onnx.reference) with tests/reference")
    args = ap.parse_args()
    import onnx
    model, cfg = build_model(args.model_dir)
    onnx.save(model, args.out)
    print("export_onnx: wrote %s (%d nodes, %.1f MB)" % (
        args.out, len(model.graph.node), os.path.getsize(args.out) / 1e6))
    if args.check:
        worst = check(model, args.model_dir, cfg)
        if 1.0 - worst < 0.9999:
            print("export_onnx check: FAILED (cosine %.7f < 0.9999)" % (1.0 - worst))
            return 1
        print("export_onnx check: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
