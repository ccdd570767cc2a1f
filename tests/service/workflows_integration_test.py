#!/usr/bin/python3
"""End-to-end checks of inferd's workflows over real gRPC on loopback.

The generated tiny models (every architecture) and, when present, the real
stories260K are served by one `inferd`; results are compared with the
independent NumPy reference (tests/reference/reference.py):
- embeddings: cosine >= 0.99999 and max abs error <= 1e-4 x max|ref| for
  each pooling, Matryoshka cut, packed float32 output, batch invariance, a
  bidirectional stream of 200 requests;
- rerank and classify scores: abs error <= 1e-4;
- generation: identical greedy tokens for every tiny decoder, the README's
  stories260K text, the same tokens alone / in a batch of 16 / with chunked
  prefill of 7 / with a warm prefix cache; seeded sampling, top_k=1,
  stop strings, logprobs; 32 concurrent streams with a quarter cancelled.
Exit 77 (ctest skip) only when the generated models are missing.
"""
import argparse
import json
import math
import os
import random
import struct
import sys
import threading
import time
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import inferd_testlib as lib  # noqa: E402

P = None
REF = None
GRPC = IPB = IRPC = MPB = MRPC = None

EMBEDDERS = ["bert-embed", "bert-mean", "xlmr-embed", "roberta-embed",
             "mpnet-embed", "jina-embed", "nomic-embed", "gte-embed",
             "modernbert-embed",
             "qwen2-embed", "qwen3-embed", "mistral-embed"]
DECODERS = ["llama-tiny", "mistral-tiny", "qwen2-tiny", "qwen3-tiny"]
# Served and checked by their own tests (not every pooling: their
# sentence-transformers pipelines project after pooling).
ST_PIPELINES = ["embeddinggemma-tiny"]
HEADS = ["bert-classifier", "bert-multilabel", "xlmr-reranker",
         "roberta-classifier"]

TEXTS = [
    "hello world",
    "The quick brown fox jumps over the lazy dog.",
    "inferd serves embedding models over gRPC; short and long inputs mix.",
    "a",
    "Zwölf Boxkämpfer jagen Viktor quer über den großen Sylter Deich.",
    "Once upon a time there was a tiny model that computed embeddings " * 3,
]


def cosine(a, b):
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-30))


def model_dir(name):
    return os.path.join(P.test_models, name)


def load_cfg(name):
    with open(os.path.join(model_dir(name), "config.json")) as f:
        return json.load(f)


_REF_MODELS = {}


def ref_model(name):
    if name not in _REF_MODELS:
        path = model_dir(name) if name != "stories" else lib.stories_dir()
        _REF_MODELS[name] = REF.Model(path)
    return _REF_MODELS[name]


def eos_ids(cfg):
    e = cfg.get("eos_token_id")
    if e is None:
        return []
    return e if isinstance(e, list) else [e]


class WorkflowsTest(unittest.TestCase):
    server = None

    @classmethod
    def setUpClass(cls):
        models = [(n, model_dir(n))
                  for n in EMBEDDERS + DECODERS + HEADS + ST_PIPELINES]
        # A decoder reranker: a causal LM served with task=rerank (the
        # qwen3 rerank format is the default; named here to check the
        # option).
        models.append(("qwen3-reranker", model_dir("qwen3-reranker-tiny") +
                       ",task=rerank,rerank_format=qwen3,max-input-tokens=320"))
        models.append(("gemma-reranker", model_dir("gemma-reranker-tiny") +
                       ",task=rerank,rerank_format=bge_gemma"))
        cls.stories = lib.stories_dir()
        cls.has_stories = os.path.isfile(os.path.join(cls.stories, "config.json"))
        if cls.has_stories:
            models.append(("stories", cls.stories))
        # float32: the reference comparisons are F32's (dtype=auto serves
        # encoders in bfloat16 on AVX512_BF16 CPUs).
        lib.serve(cls, P, models,
                  ["--max-seqs", "32", "--metrics-listen", "127.0.0.1:0",
                   "--dtype", "float32"],
                  ready=False)
        cls.models = MRPC.ModelsStub(cls.channel)
        lib.HealthClient(cls.channel, lib.load_health_pb2(P.stubs)).wait_serving()
        infos = cls.models.ListModels(MPB.ListModelsRequest()).models
        for m in infos:
            assert m.state == MPB.MODEL_STATE_READY, (m.name, m.error)
        cls.info = {m.name: m for m in infos}

    @classmethod
    def tearDownClass(cls):
        lib.unserve(cls)

    # ------------------------------------------------------------ helpers

    def metric(self, name, labels):
        """The value of one sample of the Prometheus text exposition."""
        return lib.metric_value(self.server.scrape(), name, labels)

    def tokenize(self, model, text, special=True):
        r = self.stub.Tokenize(IPB.TokenizeRequest(
            model=model, text=text, add_special_tokens=special))
        return list(r.token_ids)

    def ref_embedding(self, name, text, pooling, normalize, dims=0):
        ids = self.tokenize(name, text)
        cfg = load_cfg(name)
        if name in ("qwen2-embed", "qwen3-embed", "mistral-embed"):
            eos = eos_ids(cfg)
            if eos and (not ids or ids[-1] != eos[0]):
                ids = ids + [eos[0]]
        hidden, _ = ref_model(name).forward(ids)
        v = REF.pool(hidden, {"cls": "cls", "mean": "mean",
                              "last": "lasttoken"}[pooling])
        if dims:
            v = v[:dims]
        if normalize:
            v = REF.normalize(v)
        return v, len(ids)

    def embed(self, name, texts, **kw):
        return self.stub.EmbedBatch(IPB.EmbedRequest(model=name, texts=texts,
                                                     **kw))

    def assert_close_embedding(self, got, ref, what):
        got = np.asarray(got, np.float64)
        self.assertEqual(got.shape, ref.shape, what)
        self.assertGreaterEqual(cosine(got, ref), 0.99999, what)
        self.assertLessEqual(np.max(np.abs(got - ref)),
                             1e-4 * max(np.max(np.abs(ref)), 1e-6), what)

    # --------------------------------------------------------- embeddings

    def test_embeddings_match_reference_for_each_pooling(self):
        for name in EMBEDDERS:
            default_pool = self.info[name].pooling
            for pooling, enum in (("cls", IPB.POOLING_CLS),
                                  ("mean", IPB.POOLING_MEAN),
                                  ("last", IPB.POOLING_LAST),
                                  (default_pool, IPB.POOLING_UNSPECIFIED)):
                r = self.embed(name, TEXTS, pooling=enum, normalize=True)
                self.assertEqual(len(r.embeddings), len(TEXTS))
                for text, e in zip(TEXTS, r.embeddings):
                    ref, ntok = self.ref_embedding(name, text, pooling, True)
                    self.assert_close_embedding(e.values, ref,
                                                f"{name}/{pooling}/{text[:20]}")
                    self.assertEqual(e.tokens, ntok)

    def test_embeddinggemma_pipeline_matches_reference(self):
        """EmbeddingGemma's layout: a Gemma 3 decoder with bidirectional
        attention (its sliding layer sees |i - j| < window / 2 + 1), mean
        pooling, two Dense projections and Normalize, as sentence-transformers
        runs them (the reference's st_embedding), on texts longer than the
        window; the model reports the last Dense's width."""
        name = "embeddinggemma-tiny"
        cfg = load_cfg(name)
        self.assertTrue(cfg["use_bidirectional_attention"])
        r = self.embed(name, TEXTS)
        eos = eos_ids(cfg)
        for text, e in zip(TEXTS, r.embeddings):
            ids = self.tokenize(name, text)
            if eos and ids[-1] != eos[0]:
                ids = ids + [eos[0]]  # decoder embedders end with EOS
            hidden, _ = ref_model(name).forward(ids)
            want = REF.st_embedding(model_dir(name), hidden)
            self.assertEqual(len(want), 64)
            self.assert_close_embedding(e.values, want, f"{name}/{text[:20]}")
            self.assertEqual(e.tokens, len(ids))
        # The prompt names come from config_sentence_transformers.json.
        q = self.embed(name, ["where is paris"], prompt_name="query")
        ids = self.tokenize(name, "task: search result | query: where is paris")
        if eos and ids[-1] != eos[0]:
            ids = ids + [eos[0]]
        hidden, _ = ref_model(name).forward(ids)
        self.assert_close_embedding(q.embeddings[0].values,
                                    REF.st_embedding(model_dir(name), hidden),
                                    f"{name}/query prompt")

    def test_mpnet_relative_bias_beyond_its_max_distance(self):
        """MPNet's relative-position buckets saturate at a distance of 128:
        a text of ~300 tokens sees every bucket, clamped ones included."""
        text = " ".join(f"w{i}" for i in range(150))
        r = self.embed("mpnet-embed", [text], pooling=IPB.POOLING_MEAN,
                       normalize=True)
        ref, ntok = self.ref_embedding("mpnet-embed", text, "mean", True)
        self.assertGreater(ntok, 260)
        self.assertEqual(r.embeddings[0].tokens, ntok)
        self.assert_close_embedding(r.embeddings[0].values, ref, "mpnet/long")

    def test_model_default_normalization_follows_sentence_transformers(self):
        # bert-embed ships a Normalize module; bert-mean does not.
        a = self.embed("bert-embed", ["hello world"]).embeddings[0].values
        self.assertAlmostEqual(float(np.linalg.norm(a)), 1.0, places=5)
        b = self.embed("bert-mean", ["hello world"]).embeddings[0].values
        ref, _ = self.ref_embedding("bert-mean", "hello world", "mean", False)
        self.assert_close_embedding(b, ref, "bert-mean unnormalized")
        self.assertNotAlmostEqual(float(np.linalg.norm(b)), 1.0, places=3)

    def test_matryoshka_dimensions_cut_before_normalizing(self):
        r = self.embed("bert-embed", TEXTS[:2], dimensions=8)
        for text, e in zip(TEXTS[:2], r.embeddings):
            self.assertEqual(e.dims, 8)
            ref, _ = self.ref_embedding("bert-embed", text, "cls", True, dims=8)
            self.assert_close_embedding(e.values, ref, "dims=8")
        with self.assertRaises(GRPC.RpcError) as cm:
            self.embed("bert-embed", ["x"], dimensions=10 ** 6)
        self.assertEqual(cm.exception.code(), GRPC.StatusCode.INVALID_ARGUMENT)
        self.assertIn("dimensions", cm.exception.details())

    def test_packed_float32_equals_repeated_floats(self):
        a = self.embed("xlmr-embed", TEXTS[:3])
        b = self.embed("xlmr-embed", TEXTS[:3],
                       encoding=IPB.EMBEDDING_ENCODING_PACKED_F32)
        for x, y in zip(a.embeddings, b.embeddings):
            self.assertEqual(len(y.values), 0)
            unpacked = struct.unpack("<%df" % y.dims, y.packed)
            self.assertEqual(list(unpacked), list(x.values))

    def test_prompt_name_prefixes_the_text(self):
        with_prompt = self.embed("bert-embed", ["tell me"], prompt_name="query")
        ref, _ = self.ref_embedding("bert-embed", "query: tell me", "cls", True)
        self.assert_close_embedding(with_prompt.embeddings[0].values, ref,
                                    "prompt_name=query")
        with self.assertRaises(GRPC.RpcError) as cm:
            self.embed("bert-embed", ["x"], prompt_name="nope")
        self.assertEqual(cm.exception.code(), GRPC.StatusCode.INVALID_ARGUMENT)
        self.assertIn("query", cm.exception.details())

    def test_long_input_is_rejected_unless_truncated(self):
        limit = self.info["bert-embed"].max_input_tokens
        text = "word " * (limit + 50)
        with self.assertRaises(GRPC.RpcError) as cm:
            self.embed("bert-embed", [text])
        self.assertEqual(cm.exception.code(), GRPC.StatusCode.INVALID_ARGUMENT)
        self.assertIn(str(limit), cm.exception.details())
        r = self.embed("bert-embed", [text], truncate=True)
        self.assertEqual(r.embeddings[0].tokens, limit)
        left = self.embed("bert-embed", [text], truncate=True,
                          truncation_side=IPB.TRUNCATION_SIDE_LEFT)
        self.assertEqual(left.embeddings[0].tokens, limit)

    def test_sparse_output_on_dense_model_is_failed_precondition(self):
        with self.assertRaises(GRPC.RpcError) as cm:
            self.embed("bert-embed", ["x"], outputs=IPB.EmbedOutputs(sparse=True))
        self.assertEqual(cm.exception.code(), GRPC.StatusCode.FAILED_PRECONDITION)
        self.assertIn("sparse_linear.pt", cm.exception.details())

    def test_identical_inputs_give_identical_vectors_in_any_batch(self):
        text = "the same sentence every time"
        alone = self.embed("bert-mean", [text]).embeddings[0].values
        mixed = self.embed("bert-mean", TEXTS + [text] * 5 + TEXTS).embeddings
        for e in mixed[len(TEXTS):len(TEXTS) + 5]:
            np.testing.assert_allclose(e.values, alone, rtol=0, atol=1e-6)
        # Concurrent requests land in batches of varying composition.
        results = [None] * 12

        def call(i):
            batch = TEXTS[: i % len(TEXTS)] + [text]
            results[i] = self.embed("bert-mean", batch).embeddings[-1].values

        threads = [threading.Thread(target=call, args=(i,)) for i in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for r in results:
            np.testing.assert_allclose(r, alone, rtol=0, atol=1e-6)

    def test_bidi_stream_of_200_requests_answers_every_id_once(self):
        rng = random.Random(7)
        requests = []
        for i in range(200):
            n = rng.randint(1, 4)
            texts = [("word " * rng.randint(1, 60)).strip() for _ in range(n)]
            requests.append(IPB.EmbedRequest(model="bert-embed", id=f"r{i}",
                                             texts=texts))
        answers = list(self.stub.Embed(iter(requests)))
        ids = [a.id for a in answers]
        self.assertEqual(sorted(ids), sorted(r.id for r in requests))
        self.assertEqual(len(set(ids)), 200)
        by_id = {r.id: r for r in requests}
        for a in answers:
            self.assertEqual(len(a.embeddings), len(by_id[a.id].texts))
            for e in a.embeddings:
                self.assertEqual(e.dims, self.info["bert-embed"].embedding_dims)

    def test_bidi_stream_bad_request_ends_the_stream_with_its_status(self):
        reqs = [IPB.EmbedRequest(model="bert-embed", id="ok", texts=["a"]),
                IPB.EmbedRequest(model="bert-embed", id="bad")]
        with self.assertRaises(GRPC.RpcError) as cm:
            list(self.stub.Embed(iter(reqs)))
        self.assertEqual(cm.exception.code(), GRPC.StatusCode.INVALID_ARGUMENT)
        self.assertIn("bad", cm.exception.details())

    # ---------------------------------------------------- rerank / classify

    def test_rerank_scores_match_reference(self):
        query = "what does a reranker do?"
        docs = ["it scores documents against a query",
                "bananas are yellow",
                "a cross-encoder reads the query and the document together " * 4]
        r = self.stub.Rerank(IPB.RerankRequest(
            model="xlmr-reranker", query=query, documents=docs,
            return_documents=True))
        self.assertEqual(len(r.results), 3)
        scores = [x.score for x in r.results]
        self.assertEqual(scores, sorted(scores, reverse=True))
        q = self.tokenize("xlmr-reranker", query, special=False)
        model = ref_model("xlmr-reranker")
        for res in r.results:
            d = self.tokenize("xlmr-reranker", docs[res.index], special=False)
            ids = [0] + q + [2, 2] + d + [2]  # XLM-R pair template
            _, logits = model.forward(ids)
            want = 1 / (1 + math.exp(-float(logits[0])))
            self.assertAlmostEqual(res.score, want, delta=1e-4)
            self.assertEqual(res.document, docs[res.index])
        top = self.stub.Rerank(IPB.RerankRequest(
            model="xlmr-reranker", query=query, documents=docs, top_n=1,
            raw_scores=True))
        self.assertEqual(len(top.results), 1)
        self.assertEqual(top.results[0].index, r.results[0].index)
        self.assertFalse(top.results[0].HasField("document"))

    def test_decoder_reranker_scores_match_reference(self):
        """Qwen3-Reranker's recipe: the pair in its prompt, tokenized apart
        (prefix, pair, suffix; no special tokens), scored by the sigmoid of
        logit("yes") - logit("no") at the last position (= P(yes) among the
        two), against the NumPy reference's logits; abs error <= 1e-4."""
        name = "qwen3-reranker"
        info = self.info[name]
        self.assertEqual(info.workflow, "decoder_rerank")
        self.assertEqual(info.components["input_processor"], "decoder_rerank_prompt")
        self.assertEqual(info.components["output_processor"], "token_logit_scores")
        prefix = ("<|im_start|>system\nJudge whether the Document meets the "
                  "requirements based on the Query and the Instruct provided. "
                  "Note that the answer can only be \"yes\" or \"no\"."
                  "<|im_end|>\n<|im_start|>user\n")
        suffix = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
        instruction = ("Given a web search query, retrieve relevant passages "
                       "that answer the query")
        query = "what does a reranker do?"
        docs = ["it scores documents against a query",
                "bananas are yellow",
                "a decoder reranker judges the query and the document " * 3]
        r = self.stub.Rerank(IPB.RerankRequest(
            model=name, query=query, documents=docs, raw_scores=True))
        self.assertEqual(len(r.results), 3)
        raw = {x.index: x.score for x in r.results}
        r = self.stub.Rerank(IPB.RerankRequest(
            model=name, query=query, documents=docs))
        model = ref_model("qwen3-reranker-tiny")
        # The score tokens' ids: the vocabulary's entries "yes" and "no"
        # (as transformers' convert_tokens_to_ids finds them).
        with open(os.path.join(model_dir("qwen3-reranker-tiny"),
                               "tokenizer.json"), encoding="utf-8") as f:
            vocab = json.load(f)["model"]["vocab"]
        yes, no = [vocab["yes"]], [vocab["no"]]
        head = self.tokenize(name, prefix, special=False)
        tail = self.tokenize(name, suffix, special=False)
        limit = info.max_input_tokens
        self.assertEqual(limit, 320)

        def prompt_ids(document):
            # The pair cut at its end to fit the model (the reference
            # implementation's truncation of the middle text).
            pair = (f"<Instruct>: {instruction}\n<Query>: {query}\n"
                    f"<Document>: {document}")
            ids = self.tokenize(name, pair, special=False)
            return head + ids[:limit - len(head) - len(tail)] + tail

        spread = []
        for res in r.results:
            ids = prompt_ids(docs[res.index])
            _, logits = model.forward(ids)
            diff = float(logits[-1][yes[0]]) - float(logits[-1][no[0]])
            self.assertAlmostEqual(raw[res.index], diff, delta=1e-4)
            self.assertAlmostEqual(res.score, 1 / (1 + math.exp(-diff)), delta=1e-4)
            spread.append(res.score)
        self.assertEqual(spread, sorted(spread, reverse=True))
        self.assertGreater(max(spread) - min(spread), 1e-6)  # not constant
        # A pair past the model's length is cut at its end when allowed...
        long_doc = "word " * (2 * limit)
        cut = self.stub.Rerank(IPB.RerankRequest(
            model=name, query=query, documents=[long_doc], raw_scores=True))
        ids = prompt_ids(long_doc)
        self.assertEqual(len(ids), limit)
        _, logits = model.forward(ids)
        self.assertAlmostEqual(cut.results[0].score,
                               float(logits[-1][yes[0]]) - float(logits[-1][no[0]]),
                               delta=1e-4)
        # ... and refused, naming the document, when not.
        with self.assertRaises(GRPC.RpcError) as cm:
            self.stub.Rerank(IPB.RerankRequest(
                model=name, query=query, documents=["ok", long_doc],
                truncate=False))
        self.assertEqual(cm.exception.code(), GRPC.StatusCode.INVALID_ARGUMENT)
        self.assertIn("document 1 has", cm.exception.details())
        self.assertIn("at most 320", cm.exception.details())

    def test_bge_gemma_reranker_scores_match_reference(self):
        """bge-reranker-v2-gemma's recipe (FlagEmbedding's LLM reranker) on
        a Gemma 1 model: BOS, "A: query", "\\n", "B: passage", "\\n" and the
        prompt, each tokenized without special tokens; the score is the
        logit of "Yes" at the last position (sigmoid when normalized),
        against the NumPy reference; abs error <= 1e-4."""
        name = "gemma-reranker"
        self.assertEqual(self.info[name].workflow, "decoder_rerank")
        cfg = load_cfg("gemma-reranker-tiny")
        self.assertEqual(cfg["model_type"], "gemma")
        prompt = ("Given a query A and a passage B, determine whether the "
                  "passage contains an answer to the query by providing a "
                  "prediction of either 'Yes' or 'No'.")
        with open(os.path.join(model_dir("gemma-reranker-tiny"),
                               "tokenizer.json"), encoding="utf-8") as f:
            yes = json.load(f)["model"]["vocab"]["Yes"]
        query = "which fruit is yellow?"
        docs = ["bananas are yellow", "the sky is blue",
                "lemons are yellow and sour " * 4]
        raw = self.stub.Rerank(IPB.RerankRequest(
            model=name, query=query, documents=docs, raw_scores=True))
        norm = self.stub.Rerank(IPB.RerankRequest(
            model=name, query=query, documents=docs))
        raw_by = {x.index: x.score for x in raw.results}
        model = ref_model("gemma-reranker-tiny")

        def tok(text):
            return self.tokenize(name, text, special=False)

        scores = []
        for res in norm.results:
            ids = ([cfg["bos_token_id"]] + tok(f"A: {query}") + tok("\n") +
                   tok(f"B: {docs[res.index]}") + tok("\n") + tok(prompt))
            _, logits = model.forward(ids)
            want = float(logits[-1][yes])
            self.assertAlmostEqual(raw_by[res.index], want, delta=1e-4)
            self.assertAlmostEqual(res.score, 1 / (1 + math.exp(-want)),
                                   delta=1e-4)
            scores.append(res.score)
        self.assertEqual(scores, sorted(scores, reverse=True))
        self.assertGreater(max(scores) - min(scores), 1e-6)

    def test_classify_probabilities_match_reference(self):
        for name, multi in (("bert-classifier", False), ("bert-multilabel", True),
                            ("roberta-classifier", False)):
            r = self.stub.Classify(IPB.ClassifyRequest(model=name, texts=TEXTS[:3]))
            cfg = load_cfg(name)
            labels = [cfg["id2label"][str(i)] for i in range(len(cfg["id2label"]))]
            for text, c in zip(TEXTS[:3], r.results):
                _, logits = ref_model(name).forward(self.tokenize(name, text))
                logits = np.asarray(logits, np.float64)
                if multi:
                    want = 1 / (1 + np.exp(-logits))
                else:
                    want = np.exp(logits - logits.max())
                    want /= want.sum()
                self.assertEqual(len(c.labels), len(labels))
                got = {l.index: l.score for l in c.labels}
                for i, w in enumerate(want):
                    self.assertAlmostEqual(got[i], w, delta=1e-4)
                for l in c.labels:
                    self.assertEqual(l.label, labels[l.index])
                scores = [l.score for l in c.labels]
                self.assertEqual(scores, sorted(scores, reverse=True))

    def test_embed_on_a_classifier_is_failed_precondition(self):
        with self.assertRaises(GRPC.RpcError) as cm:
            self.embed("bert-classifier", ["x"])
        self.assertEqual(cm.exception.code(),
                         GRPC.StatusCode.FAILED_PRECONDITION)

    # ----------------------------------------------------------- generate

    def generate(self, model, ids=None, prompt=None, timeout=120, **sampling):
        req = lib.generate_request(IPB, model, prompt=prompt, ids=ids,
                                   **sampling)
        return lib.generate(self.stub, req, timeout=timeout)

    def test_greedy_generation_matches_reference_for_every_decoder(self):
        for name in DECODERS:
            ids = self.tokenize(name, "The meaning of life is")
            want = ref_model(name).greedy(ids, 12)
            got, _, chunks = self.generate(name, ids=ids, temperature=0.0,
                                           max_tokens=12, ignore_eos=True)
            self.assertEqual(got, want, name)
            last = chunks[-1]
            self.assertEqual(last.finish_reason, IPB.FINISH_REASON_LENGTH)
            self.assertEqual(last.usage.prompt_tokens, len(ids))
            self.assertEqual(last.usage.completion_tokens, 12)

    def test_mistral_sliding_window_beyond_its_width(self):
        # mistral-tiny has a 16-token window: a 30-token prompt exercises it.
        ids = self.tokenize("mistral-tiny", "one two three four five six seven "
                            "eight nine ten eleven twelve thirteen fourteen "
                            "fifteen sixteen seventeen eighteen nineteen twenty")
        self.assertGreater(len(ids), 16)
        want = ref_model("mistral-tiny").greedy(ids, 8)
        got, _, _ = self.generate("mistral-tiny", ids=ids, temperature=0.0,
                                  max_tokens=8, ignore_eos=True)
        self.assertEqual(got, want)

    def stories_expected(self):
        with open(os.path.join(lib.stories_dir(), "README.md")) as f:
            text = f.read()
        block = text.split("continues, per an independent implementation", 1)[1]
        block = block.split("\n\n", 1)[1]
        lines = []
        for line in block.splitlines():
            if not line.startswith("    "):
                break
            lines.append(line.strip())
        return " ".join(lines)

    def test_stories260k_reproduces_the_reference_story(self):
        if not self.has_stories:
            self.skipTest("examples/models/stories260K absent")
        want = self.stories_expected()
        self.assertTrue(want.startswith("Once upon a time"))
        prompt = "Once upon a time"
        tokens, text, chunks = self.generate("stories", prompt=prompt,
                                             temperature=0.0, max_tokens=200)
        full = prompt + text
        self.assertTrue(full.startswith(want), (full, want))

    def test_same_tokens_alone_batched_and_with_warm_prefix_cache(self):
        name = "qwen2-tiny"
        prompt = "Tell me a story about a robot who learns to paint " * 3
        alone, _, first = self.generate(name, prompt=prompt, temperature=0.0,
                                        max_tokens=16, ignore_eos=True)
        # Warm prefix cache: the second identical request reuses blocks.
        warm, _, second = self.generate(name, prompt=prompt, temperature=0.0,
                                        max_tokens=16, ignore_eos=True)
        self.assertEqual(warm, alone)
        self.assertGreater(second[-1].usage.cached_prompt_tokens, 0)
        # In a batch of 16 mixed prompts running concurrently.
        rng = random.Random(3)
        prompts = [prompt if i == 5 else " ".join(
            rng.choice(["alpha", "beta", "gamma", "delta", "robot", "paint"])
            for _ in range(rng.randint(2, 40))) for i in range(16)]
        out = [None] * 16

        def call(i):
            out[i] = self.generate(name, prompt=prompts[i], temperature=0.0,
                                   max_tokens=16, ignore_eos=True)[0]

        threads = [threading.Thread(target=call, args=(i,)) for i in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(out[5], alone)
        self.assertTrue(all(o is not None and len(o) == 16 for o in out))

    def test_seeded_sampling_repeats_and_top_k_1_is_greedy(self):
        name = "llama-tiny"
        ids = self.tokenize(name, "Sampling check")
        a, _, _ = self.generate(name, ids=ids, temperature=1.0, seed=1234,
                                max_tokens=20, ignore_eos=True)
        b, _, _ = self.generate(name, ids=ids, temperature=1.0, seed=1234,
                                max_tokens=20, ignore_eos=True)
        self.assertEqual(a, b)
        c, _, _ = self.generate(name, ids=ids, temperature=1.0, seed=99,
                                max_tokens=20, ignore_eos=True)
        self.assertNotEqual(a, c)
        greedy, _, _ = self.generate(name, ids=ids, temperature=0.0,
                                     max_tokens=20, ignore_eos=True)
        top1, _, _ = self.generate(name, ids=ids, temperature=1.0, top_k=1,
                                   seed=5, max_tokens=20, ignore_eos=True)
        self.assertEqual(top1, greedy)

    def test_stop_string_across_token_boundaries(self):
        if not self.has_stories:
            self.skipTest("examples/models/stories260K absent")
        _, text, _ = self.generate("stories", prompt="Once upon a time",
                                   temperature=0.0, max_tokens=60)
        # A stop string that starts inside one token and ends in another.
        idx = text.index("little girl")
        stop = text[idx + 3: idx + 9]  # "tle gi"
        _, cut, chunks = self.generate("stories", prompt="Once upon a time",
                                       temperature=0.0, max_tokens=60,
                                       stop=[stop])
        self.assertEqual(cut, text[:idx + 3])
        self.assertEqual(chunks[-1].finish_reason, IPB.FINISH_REASON_STOP)
        self.assertEqual(chunks[-1].stop_reason, stop)
        _, kept, _ = self.generate("stories", prompt="Once upon a time",
                                   temperature=0.0, max_tokens=60, stop=[stop],
                                   include_stop_str_in_output=True)
        self.assertEqual(kept, text[:idx + 9])

    def test_logprobs_are_consistent(self):
        name = "qwen2-tiny"
        tokens, _, chunks = self.generate(name, prompt="Logprobs", temperature=0.7,
                                          seed=3, max_tokens=8, logprobs=5,
                                          ignore_eos=True)
        lps = [lp for c in chunks for lp in c.logprobs]
        self.assertEqual(len(lps), len(tokens))
        for tok, lp in zip(tokens, lps):
            self.assertEqual(lp.sampled.token_id, tok)
            self.assertLessEqual(lp.sampled.logprob, 1e-6)
            self.assertEqual(len(lp.top), 5)
            top = [t.logprob for t in lp.top]
            self.assertEqual(top, sorted(top, reverse=True))
            self.assertLessEqual(sum(math.exp(t) for t in top), 1.0 + 1e-4)
            for t in lp.top:
                if t.token_id == tok:
                    self.assertAlmostEqual(t.logprob, lp.sampled.logprob,
                                           places=5)
            self.assertGreaterEqual(lp.sampled.logprob, top[-1] - 50)

    def test_logprob_tokens_are_vocabulary_pieces(self):
        # stories260K's vocabulary (tokenizer.json) names every id.
        with open(os.path.join(lib.stories_dir(), "tokenizer.json")) as f:
            tok = json.load(f)
        piece = {v: k for k, v in tok["model"]["vocab"].items()}
        for a in tok.get("added_tokens", []):
            piece[a["id"]] = a["content"]
        tokens, _, chunks = self.generate("stories", prompt="Once upon a time",
                                          temperature=0.0, max_tokens=12,
                                          logprobs=3)
        lps = [lp for c in chunks for lp in c.logprobs]
        self.assertEqual(len(lps), len(tokens))
        for lp in lps:
            self.assertEqual(lp.sampled.token, piece[lp.sampled.token_id])
            for t in lp.top:
                self.assertEqual(t.token, piece[t.token_id])
        # Greedy: the sampled token is the best one.
        self.assertTrue(all(lp.top[0].token_id == lp.sampled.token_id
                            for lp in lps))

    def test_logit_bias_bans_and_forces_tokens(self):
        base, _, _ = self.generate("stories", prompt="Once upon a time",
                                   temperature=0.0, max_tokens=6)
        # Banning the greedy first token changes the first token.
        banned, _, _ = self.generate("stories", prompt="Once upon a time",
                                     temperature=0.0, max_tokens=6,
                                     logit_bias={base[0]: -100.0})
        self.assertNotEqual(banned[0], base[0])
        self.assertNotIn(base[0], banned)
        # Forcing a token makes greedy decoding repeat it.
        forced, _, _ = self.generate("stories", prompt="Once upon a time",
                                     temperature=0.0, max_tokens=5,
                                     ignore_eos=True, logit_bias={300: 100.0})
        self.assertEqual(forced, [300] * 5)
        # Ids outside the vocabulary and biases out of range are refused.
        for bias, what in (({512: 1.0}, "outside the vocabulary"),
                           ({5: 101.0}, "[-100, 100]")):
            with self.assertRaises(GRPC.RpcError) as cm:
                self.generate("stories", prompt="x", max_tokens=1,
                              logit_bias=bias)
            self.assertEqual(cm.exception.code(),
                             GRPC.StatusCode.INVALID_ARGUMENT)
            self.assertIn("logit_bias", cm.exception.details())
            self.assertIn(what, cm.exception.details())

    def test_prompt_longer_than_context_is_invalid_with_numbers(self):
        ctx = self.info["llama-tiny"].max_input_tokens
        with self.assertRaises(GRPC.RpcError) as cm:
            self.generate("llama-tiny", ids=[5] * (ctx + 3), max_tokens=1)
        self.assertEqual(cm.exception.code(), GRPC.StatusCode.INVALID_ARGUMENT)
        self.assertIn(str(ctx + 3), cm.exception.details())
        self.assertIn(str(ctx), cm.exception.details())

    def test_32_streams_with_a_quarter_cancelled(self):
        name = "llama-tiny"
        results = {}

        def run(i):
            req = IPB.GenerateRequest(model=name, prompt=f"stream {i} " * (i % 7 + 1))
            req.sampling.temperature = 0.0
            req.sampling.max_tokens = 48
            req.sampling.ignore_eos = True
            call = self.stub.Generate(req, timeout=300)
            got = 0
            try:
                for chunk in call:
                    got += len(chunk.token_ids)
                    if i % 4 == 0 and got >= 3:
                        call.cancel()
                        break
                    if chunk.finish_reason:
                        results[i] = ("done", got, chunk.finish_reason)
            except GRPC.RpcError as e:
                results[i] = ("error", got, e.code())
            if i % 4 == 0:
                results[i] = ("cancelled", got, None)

        threads = [threading.Thread(target=run, args=(i,)) for i in range(32)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for i in range(32):
            if i % 4 == 0:
                self.assertEqual(results[i][0], "cancelled", results[i])
            else:
                self.assertEqual(results[i], ("done", 48, IPB.FINISH_REASON_LENGTH))
        # Every KV block is free again (cancelled ones within a step); cached
        # prefix blocks count as free: they hold no request.
        deadline = time.time() + 10
        while True:
            used = self.metric("inferd_kv_cache_blocks",
                               {"model": name, "state": "used"})
            if used == 0 or time.time() > deadline:
                break
            time.sleep(0.05)
        self.assertEqual(used, 0)
        self.assertEqual(self.metric("inferd_num_requests_running",
                                     {"model": name}), 0)


def write_safetensors(path, tensors):
    """Minimal safetensors writer (F32) for test fixtures."""
    header, blobs, offset = {}, [], 0
    for name, arr in tensors.items():
        data = np.ascontiguousarray(arr, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw + b"".join(blobs))


class DenseModuleTest(unittest.TestCase):
    """A sentence-transformers model with a Dense module after pooling
    (Tanh, the default) and Normalize: inferd must apply it like the
    reference does."""

    def test_dense_module_is_applied_after_pooling(self):
        import shutil
        import tempfile
        src = model_dir("bert-embed")
        with tempfile.TemporaryDirectory() as d:
            for f in os.listdir(src):
                if os.path.isfile(os.path.join(src, f)):
                    shutil.copy(os.path.join(src, f), d)
            shutil.copytree(os.path.join(src, "1_Pooling"),
                            os.path.join(d, "1_Pooling"))
            hidden = load_cfg("bert-embed")["hidden_size"]
            out = 24
            rng = np.random.RandomState(5)
            os.makedirs(os.path.join(d, "2_Dense"))
            write_safetensors(os.path.join(d, "2_Dense", "model.safetensors"), {
                "linear.weight": rng.normal(0, 0.3, (out, hidden)),
                "linear.bias": rng.normal(0, 0.1, (out,))})
            with open(os.path.join(d, "2_Dense", "config.json"), "w") as f:
                json.dump({"in_features": hidden, "out_features": out,
                           "bias": True}, f)
            os.makedirs(os.path.join(d, "3_Normalize"))
            with open(os.path.join(d, "modules.json"), "w") as f:
                json.dump([
                    {"idx": 0, "name": "0", "path": "",
                     "type": "sentence_transformers.models.Transformer"},
                    {"idx": 1, "name": "1", "path": "1_Pooling",
                     "type": "sentence_transformers.models.Pooling"},
                    {"idx": 2, "name": "2", "path": "2_Dense",
                     "type": "sentence_transformers.models.Dense"},
                    {"idx": 3, "name": "3", "path": "3_Normalize",
                     "type": "sentence_transformers.models.Normalize"}], f)
            server = lib.InferdProcess(P.inferd, [("dense", d)], ["--dtype", "float32"])
            try:
                channel = GRPC.insecure_channel(server.address)
                lib.HealthClient(channel, lib.load_health_pb2(P.stubs)).wait_serving()
                stub = IRPC.InferenceStub(channel)
                info = MRPC.ModelsStub(channel).GetModel(
                    MPB.GetModelRequest(name="dense"))
                self.assertEqual(info.embedding_dims, out)
                text = "dense modules project the pooled vector"
                ids = list(stub.Tokenize(IPB.TokenizeRequest(
                    model="dense", text=text)).token_ids)
                got = stub.EmbedBatch(IPB.EmbedRequest(
                    model="dense", texts=[text])).embeddings[0]
                model = REF.Model(d)
                hidden_states, _ = model.forward(ids)
                want = REF.st_embedding(d, hidden_states)
                self.assertEqual(got.dims, out)
                self.assertGreaterEqual(cosine(got.values, want), 0.99999)
                np.testing.assert_allclose(got.values, want, atol=1e-4)
                channel.close()
            finally:
                self.assertEqual(server.stop(), 0, server.output())


class ChunkedPrefillTest(unittest.TestCase):
    """A server whose step budget is 7 tokens: every prompt is prefilled in
    chunks of 7, and must still give the same tokens as one-shot prefill."""

    def test_chunked_prefill_gives_the_same_tokens(self):
        name = "llama-tiny"
        ids = [int(x) for x in np.random.RandomState(1).randint(3, 500, size=40)]
        want = ref_model(name).greedy(ids, 10)
        server = lib.InferdProcess(
            P.inferd, [(name, model_dir(name))],
            ["--max-batched-tokens", "7", "--enable-prefix-caching", "false"])
        try:
            channel = GRPC.insecure_channel(server.address)
            lib.HealthClient(channel, lib.load_health_pb2(P.stubs)).wait_serving()
            stub = IRPC.InferenceStub(channel)
            req = IPB.GenerateRequest(model=name)
            req.prompt_token_ids.ids.extend(ids)
            req.sampling.temperature = 0.0
            req.sampling.max_tokens = 10
            req.sampling.ignore_eos = True
            got = [t for c in stub.Generate(req, timeout=120) for t in c.token_ids]
            self.assertEqual(got, want)
            channel.close()
        finally:
            self.assertEqual(server.stop(), 0, server.output())


def main():
    global P, REF, GRPC, IPB, IRPC, MPB, MRPC
    parser = argparse.ArgumentParser()
    lib.add_common_args(parser)
    args, rest = parser.parse_known_args()
    P = lib.Paths(args)
    if not lib.models_present(P.test_models,
                              EMBEDDERS + DECODERS + HEADS + ST_PIPELINES +
                              ["qwen3-reranker-tiny", "gemma-reranker-tiny"]):
        return 77
    REF = lib.import_reference()
    GRPC, IPB, IRPC, MPB, MRPC = lib.import_stubs(P.stubs)
    return lib.run_unittest([sys.argv[0]] + rest)


if __name__ == "__main__":
    sys.exit(main())
