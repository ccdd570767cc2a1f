#!/usr/bin/python3
"""Checks of the NumPy reference itself (run by ctest).

- stories260K (a real pretrained Llama in examples/models) decodes "Once
  upon a time" greedily into the continuation published in its README.md;
  this validates the decoder path end to end.
- Structural properties that hold for any weights: causality, sliding-window
  reach, rotary relative-position invariance, XLM-R position ids, pooling,
  and the bf16 writer/reader pair.

Usage: test_reference.py [--shared DIR] [--models DIR]   (unittest args after --)
"""

import argparse
import json
import os
import re
import sys
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
import reference as ref  # noqa: E402

SHARED = os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared"))
MODELS = os.environ.get("INFERD_TEST_MODELS_DIR", "")


def stories_dir():
    """The real stories260K shipped in the repository."""
    return os.path.join(HERE, "..", "..", "examples", "models", "stories260K")


class Stories260KTest(unittest.TestCase):
    def setUp(self):
        if not os.path.isfile(os.path.join(stories_dir(), "model.safetensors")):
            self.skipTest("examples/models/stories260K absent (%s)" % stories_dir())

    def prompt_ids(self):
        """BOS + the ids of "Once upon a time", checked against the vocab and
        the SentencePiece reference ids in shared/tokenizers/cases."""
        with open(os.path.join(stories_dir(), "tokenizer.json")) as f:
            vocab = json.load(f)["model"]["vocab"]
        ids = [vocab[p] for p in ("\u2581Once", "\u2581upon", "\u2581a", "\u2581time")]
        cases = os.path.join(SHARED, "tokenizers", "cases")
        inp, out = (os.path.join(cases, "stories260K." + e) for e in ("inp", "out"))
        if os.path.isfile(inp) and os.path.isfile(out):
            with open(inp, encoding="utf-8") as f:
                texts = f.read().split("\n__ggml_vocab_test__\n")
            with open(out) as f:
                lines = f.read().split("\n")
            for text, line in zip(texts, lines):
                if text.startswith("Once upon a time,"):
                    self.assertEqual([int(t) for t in line.split()][:4], ids)
        return [1] + ids

    def test_greedy_decoding_reproduces_published_story(self):
        with open(os.path.join(stories_dir(), "README.md")) as f:
            readme = f.read()
        m = re.search(r"continues, per an independent implementation.*?:\n\n(.*?)\n\n",
                      readme, re.S)
        self.assertIsNotNone(m, "README no longer has the expected passage")
        expected = " ".join(m.group(1).split())
        model = ref.Model(stories_dir())
        with open(os.path.join(stories_dir(), "tokenizer.json")) as f:
            inv = {v: k for k, v in json.load(f)["model"]["vocab"].items()}
        prompt = self.prompt_ids()
        generated = []
        text = ""
        while len(text) < len(expected) and len(generated) < 120:
            generated += model.greedy(prompt + generated, 1)
            text = "".join(inv[i] for i in prompt[1:] + generated)
            text = " ".join(text.replace("\u2581", " ").split())
        self.assertEqual(text[:len(expected)], expected)


def tiny(name):
    path = os.path.join(MODELS, name) if MODELS else ""
    if not path or not os.path.isfile(os.path.join(path, "model.safetensors")):
        raise unittest.SkipTest("test model %s not generated (INFERD_TEST_MODELS_DIR=%r)"
                                % (name, MODELS))
    return ref.Model(path)


class PropertyTest(unittest.TestCase):
    def test_causal_decoder_prefix_is_unaffected_by_later_tokens(self):
        m = tiny("llama-tiny")
        ids = [1, 100, 200, 300, 400, 500]
        h_short, _ = m.forward(ids[:3])
        h_long, _ = m.forward(ids)
        np.testing.assert_allclose(h_long[:3], h_short, rtol=0, atol=1e-12)

    def test_bidirectional_decoder_sees_later_tokens(self):
        m = tiny("llama-tiny")
        h_short, _ = m.forward([1, 100, 200], bidirectional=True)
        h_long, _ = m.forward([1, 100, 200, 300], bidirectional=True)
        self.assertGreater(np.abs(h_long[:3] - h_short).max(), 1e-6)

    def test_sliding_window_limits_reach(self):
        m = tiny("mistral-tiny")
        window = m.cfg["sliding_window"]
        self.assertEqual(window, 16)
        ids = [1] + list(range(100, 100 + 2 * window))
        changed = list(ids)
        changed[1] = 5000
        a, _ = m.forward(ids)
        b, _ = m.forward(changed)
        # Two layers: position 1 reaches i - j < window per layer, so the
        # edit is invisible beyond 1 + 2 * (window - 1).
        reach = 1 + 2 * (window - 1)
        self.assertGreater(np.abs(a[reach] - b[reach]).max(), 1e-9)
        np.testing.assert_allclose(a[reach + 1:], b[reach + 1:], rtol=0, atol=1e-12)

    def test_rope_scores_depend_only_on_relative_position(self):
        rng = np.random.default_rng(0)
        q = rng.standard_normal((1, 1, 16))
        k = rng.standard_normal((1, 1, 16))
        for cfg in ({"rope_theta": 10000.0},
                    {"rope_theta": 500000.0, "max_position_embeddings": 2048,
                     "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
                                      "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                      "original_max_position_embeddings": 64}},
                    {"rope_theta": 10000.0, "max_position_embeddings": 64,
                     "rope_scaling": {"type": "yarn", "factor": 4.0}}):
            inv, scale = ref.rope_inv_freq(cfg, 16, 8)

            def score(pq, pk):
                a = ref.apply_rope(q, np.array([pq], float), inv, scale)
                b = ref.apply_rope(k, np.array([pk], float), inv, scale)
                return float((a * b).sum())

            self.assertAlmostEqual(score(3, 1), score(10, 8), places=9)
            self.assertNotAlmostEqual(score(3, 1), score(3, 2), places=3)

    def test_llama3_scaling_slows_only_low_frequencies(self):
        cfg = {"rope_theta": 500000.0, "rope_scaling": {
            "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}
        base, _ = ref.rope_inv_freq({"rope_theta": 500000.0}, 64, 8)
        scaled, _ = ref.rope_inv_freq(cfg, 64, 8)
        wavelen = 2 * np.pi / base
        np.testing.assert_allclose(scaled[wavelen < 8192 / 4], base[wavelen < 8192 / 4])
        np.testing.assert_allclose(scaled[wavelen > 8192], base[wavelen > 8192] / 8)

    def test_xlmr_positions_start_after_padding_idx(self):
        cfg = {"model_type": "xlm-roberta", "pad_token_id": 1}
        pos = ref.encoder_position_ids(cfg, np.array([0, 5, 6, 2, 1, 1]))
        self.assertEqual(pos.tolist(), [2, 3, 4, 5, 1, 1])

    def test_pooling_modes(self):
        h = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 0.0]])
        self.assertEqual(ref.pool(h, "cls").tolist(), [1.0, 2.0])
        self.assertEqual(ref.pool(h, "mean").tolist(), [3.0, 2.0])
        self.assertEqual(ref.pool(h, "lasttoken", [1, 1, 0]).tolist(), [3.0, 4.0])
        self.assertAlmostEqual(float(np.linalg.norm(ref.normalize(h[1]))), 1.0)

    def test_bf16_written_by_generator_reads_back_within_rounding(self):
        import tempfile
        import make_test_models as mtm
        rng = np.random.default_rng(1)
        a = rng.standard_normal((7, 5)).astype(np.float32)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "t.safetensors")
            mtm.write_safetensors(path, [("a", (7, 5), "bf16"), ("b", (7, 5), "f32")],
                                  lambda n: a)
            back = ref.read_safetensors(path)
        np.testing.assert_array_equal(back["b"], a.astype(np.float64))
        np.testing.assert_allclose(back["a"], a, rtol=2 ** -8, atol=0)
        self.assertGreater(np.abs(back["a"] - a).max(), 0)

    def test_sequence_classifiers_have_one_logit_per_label(self):
        for name, labels in (("bert-classifier", 3), ("bert-multilabel", 4),
                             ("xlmr-reranker", 1)):
            m = tiny(name)
            _, logits = m.forward([0, 100, 200, 2] if "xlmr" in name else [101, 2023, 102])
            self.assertEqual(logits.shape, (labels,))
            self.assertTrue(np.all(np.isfinite(logits)))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=SHARED)
    ap.add_argument("--models", default=MODELS)
    args, rest = ap.parse_known_args()
    SHARED, MODELS = os.environ.get("INFERD_SHARED_DIR") or args.shared, args.models
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
