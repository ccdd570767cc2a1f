#!/usr/bin/python3
"""BGE-M3's three embedding outputs over real gRPC, against the NumPy
reference (tests/reference/reference.py).

The generated tiny bge-m3 (XLM-R encoder + sparse_linear.pt and
colbert_linear.pt written in torch's zip format) and bge-m3-st (the same
heads as safetensors) are served by one inferd next to xlmr-embed (no
heads). Tolerances:
- dense and every ColBERT vector: cosine >= 0.999 and max abs error
  <= 1e-4 (unit vectors);
- sparse: the same token ids as the reference, weights within 1e-4 abs.
Also: any combination of outputs from one request (EmbedBatch and the Embed
stream), dense left out when only sparse / multi_vector are asked for,
sparse token strings, ModelInfo.embed_outputs, a ColBERT MaxSim ranking
computed from the returned vectors, and FAILED_PRECONDITION naming the
missing file on a model without the heads.
Exit 77 (ctest skip) when the generated models are missing.
"""
import argparse
import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import inferd_testlib as lib  # noqa: E402

P = None
REF = None
GRPC = IPB = IRPC = MPB = MRPC = None

M3 = ["bge-m3", "bge-m3-st"]
PLAIN = "xlmr-embed"
TEXTS = [
    "hello world",
    "the quick brown fox jumps over the lazy dog and the dog sleeps",
    "what is the capital of france? paris is the capital of france.",
    "a",
]


def cosine(a, b):
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-30))


class M3Test(unittest.TestCase):
    server = None

    @classmethod
    def setUpClass(cls):
        models = [(n, os.path.join(P.test_models, n)) for n in M3 + [PLAIN]]
        # float32: compared with the F32 reference (dtype=auto serves
        # encoders in bfloat16 on AVX512_BF16 CPUs).
        lib.serve(cls, P, models, ["--dtype", "float32"], ready=False)
        lib.HealthClient(cls.channel, lib.load_health_pb2(P.stubs)).wait_serving()
        models_stub = MRPC.ModelsStub(cls.channel)
        cls.info = {m.name: m for m in
                    models_stub.ListModels(MPB.ListModelsRequest()).models}
        cls.ref = {n: REF.Model(os.path.join(P.test_models, n)) for n in M3}

    @classmethod
    def tearDownClass(cls):
        lib.unserve(cls)

    def tokenize(self, name, text):
        return list(self.stub.Tokenize(IPB.TokenizeRequest(model=name, text=text)).token_ids)

    def reference(self, name, ids, normalize=True):
        hidden, _ = self.ref[name].forward(ids)
        return REF.m3_outputs(os.path.join(P.test_models, name), hidden, ids,
                              normalize)

    def assert_vectors(self, got, ref, what):
        got = np.asarray(got, np.float64)
        self.assertEqual(got.shape, ref.shape, what)
        self.assertGreaterEqual(cosine(got, ref), 0.999, what)
        self.assertLessEqual(float(np.max(np.abs(got - ref))), 1e-4, what)

    def assert_outputs(self, name, e, ids, normalize=True, dense=True):
        ref = self.reference(name, ids, normalize)
        self.assertEqual(e.tokens, len(ids))
        if dense:
            self.assert_vectors(e.values, ref["dense"], f"{name} dense")
        else:
            self.assertEqual(len(e.values), 0)
            self.assertEqual(e.dims, 0)
        # Sparse: same ids (ascending), weights within 1e-4.
        self.assertEqual(list(e.sparse.token_ids), sorted(ref["sparse"]), name)
        for tid, w in zip(e.sparse.token_ids, e.sparse.weights):
            self.assertAlmostEqual(w, ref["sparse"][tid], delta=1e-4)
            self.assertGreater(w, 0)
        # ColBERT: tokens - 1 rows (CLS left out), each close to the reference.
        d = e.multi_vector_dims
        self.assertEqual(d, ref["colbert"].shape[1])
        mv = np.asarray(e.multi_vector, np.float64).reshape(-1, d)
        self.assertEqual(mv.shape[0], len(ids) - 1)
        for row, (g, r) in enumerate(zip(mv, ref["colbert"])):
            self.assertGreaterEqual(cosine(g, r), 0.999, f"{name} colbert {row}")
            self.assertLessEqual(float(np.max(np.abs(g - r))), 1e-4)
        return mv

    # -------------------------------------------------------------- tests

    def test_model_info_lists_the_outputs(self):
        for name in M3:
            self.assertEqual(list(self.info[name].embed_outputs),
                             ["dense", "sparse", "multi_vector"])
        self.assertEqual(list(self.info[PLAIN].embed_outputs), ["dense"])

    def test_three_outputs_in_one_call_match_the_reference(self):
        for name in M3:  # torch .pt heads and safetensors heads
            r = self.stub.EmbedBatch(IPB.EmbedRequest(
                model=name, texts=TEXTS,
                outputs=IPB.EmbedOutputs(dense=True, sparse=True,
                                         multi_vector=True)))
            self.assertEqual(len(r.embeddings), len(TEXTS))
            for text, e in zip(TEXTS, r.embeddings):
                ids = self.tokenize(name, text)
                self.assert_outputs(name, e, ids)
            # Specials never appear in the lexical weights.
            specials = REF.m3_special_ids(os.path.join(P.test_models, name))
            for e in r.embeddings:
                self.assertFalse(specials & set(e.sparse.token_ids))
            # The random heads give some tokens positive weights.
            self.assertGreater(sum(len(e.sparse.token_ids) for e in r.embeddings), 5)

    def test_sparse_and_multi_vector_without_dense(self):
        r = self.stub.EmbedBatch(IPB.EmbedRequest(
            model="bge-m3", texts=TEXTS[:2],
            outputs=IPB.EmbedOutputs(sparse=True, multi_vector=True)))
        for text, e in zip(TEXTS[:2], r.embeddings):
            self.assert_outputs("bge-m3", e, self.tokenize("bge-m3", text),
                                dense=False)
        # Sparse alone: nothing else.
        r = self.stub.EmbedBatch(IPB.EmbedRequest(
            model="bge-m3", texts=[TEXTS[1]],
            outputs=IPB.EmbedOutputs(sparse=True, sparse_tokens=True)))
        e = r.embeddings[0]
        self.assertEqual(len(e.values), 0)
        self.assertEqual(len(e.multi_vector), 0)
        self.assertGreater(len(e.sparse.token_ids), 0)
        toks = self.stub.Tokenize(IPB.TokenizeRequest(model="bge-m3",
                                                      text=TEXTS[1]))
        vocab = dict(zip(toks.token_ids, toks.tokens))
        self.assertEqual(list(e.sparse.tokens),
                         [vocab[t] for t in e.sparse.token_ids])

    def test_unnormalized_colbert_vectors_and_pre_tokenized_inputs(self):
        ids = [0, 40, 41, 40, 42, 2]  # a repeated id: max weight kept
        r = self.stub.EmbedBatch(IPB.EmbedRequest(
            model="bge-m3-st", token_ids=[IPB.TokenIds(ids=ids)],
            normalize=False,
            outputs=IPB.EmbedOutputs(dense=True, sparse=True, multi_vector=True)))
        mv = self.assert_outputs("bge-m3-st", r.embeddings[0], ids,
                                 normalize=False)
        self.assertTrue(np.any(np.abs(np.linalg.norm(mv, axis=1) - 1) > 1e-3))

    def test_bidi_stream_carries_the_same_outputs(self):
        reqs = [IPB.EmbedRequest(model="bge-m3", id=str(i), texts=[t],
                                 outputs=IPB.EmbedOutputs(sparse=True,
                                                          multi_vector=True,
                                                          dense=True))
                for i, t in enumerate(TEXTS)]
        got = {r.id: r for r in self.stub.Embed(iter(reqs))}
        self.assertEqual(sorted(got), [str(i) for i in range(len(TEXTS))])
        for i, t in enumerate(TEXTS):
            self.assert_outputs("bge-m3", got[str(i)].embeddings[0],
                                self.tokenize("bge-m3", t))

    def test_colbert_maxsim_ranks_like_the_reference(self):
        query = "what is the capital of france?"
        docs = TEXTS
        r = self.stub.EmbedBatch(IPB.EmbedRequest(
            model="bge-m3", texts=[query] + docs,
            outputs=IPB.EmbedOutputs(multi_vector=True)))
        d = r.embeddings[0].multi_vector_dims
        vecs = [np.asarray(e.multi_vector).reshape(-1, d) for e in r.embeddings]
        got = [REF.colbert_score(vecs[0], v) for v in vecs[1:]]
        ref_q = self.reference("bge-m3", self.tokenize("bge-m3", query))["colbert"]
        want = [REF.colbert_score(ref_q, self.reference(
            "bge-m3", self.tokenize("bge-m3", t))["colbert"]) for t in docs]
        np.testing.assert_allclose(got, want, atol=1e-4)
        self.assertEqual(list(np.argsort(got)), list(np.argsort(want)))

    def test_model_without_heads_is_failed_precondition_naming_the_file(self):
        for outputs, file in ((IPB.EmbedOutputs(sparse=True), "sparse_linear.pt"),
                              (IPB.EmbedOutputs(multi_vector=True, dense=True),
                               "colbert_linear.pt")):
            with self.assertRaises(GRPC.RpcError) as cm:
                self.stub.EmbedBatch(IPB.EmbedRequest(
                    model=PLAIN, texts=["x"], outputs=outputs))
            self.assertEqual(cm.exception.code(),
                             GRPC.StatusCode.FAILED_PRECONDITION)
            self.assertIn(os.path.join(P.test_models, PLAIN, file),
                          cm.exception.details())
        with self.assertRaises(GRPC.RpcError) as cm:
            self.stub.EmbedBatch(IPB.EmbedRequest(
                model="bge-m3", texts=["x"],
                outputs=IPB.EmbedOutputs(sparse_tokens=True)))
        self.assertEqual(cm.exception.code(), GRPC.StatusCode.INVALID_ARGUMENT)
        self.assertIn("outputs.sparse_tokens", cm.exception.details())


def main():
    global P, REF, GRPC, IPB, IRPC, MPB, MRPC
    parser = argparse.ArgumentParser()
    lib.add_common_args(parser)
    args, rest = parser.parse_known_args()
    P = lib.Paths(args)
    if not lib.models_present(P.test_models, M3 + [PLAIN]):
        return 77
    REF = lib.import_reference()
    GRPC, IPB, IRPC, MPB, MRPC = lib.import_stubs(P.stubs)
    return lib.run_unittest([sys.argv[0]] + rest)


if __name__ == "__main__":
    sys.exit(main())
