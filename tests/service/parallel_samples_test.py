#!/usr/bin/python3
"""Parallel samples (SamplingParams.n) and prompt logprobs
(SamplingParams.prompt_logprobs) over real gRPC against the inferd binary,
on the random-weight tiny decoders (tools/make_test_models.py):

- greedy: every sample is the n = 1 output (also with speculative
  decoding); each message names its sample; each sample ends once with its
  own usage (prompt_tokens = the prompt's length);
- with a response_format (a choice list) every sample is one of the
  choices;
- seeded sampling: sample i is the n = 1 output with seed + i, the samples
  differ, and the same seed repeats them;
- n = 0 is one sample; n = 17 and prompt_logprobs = 21 are
  INVALID_ARGUMENT saying the limit;
- prompt logprobs against the NumPy reference forward pass
  (tests/reference/reference.py): log-softmax of the reference logits,
  tolerance 1e-4 absolute (float32 model vs float64 reference; measured
  max error 8e-6), top-k the reference's best k (compared by value, so
  near-ties may swap), token
  strings filled (for ids the tokenizer knows); only in the first message;
- cancelling an n = 4 stream gives every KV block back (/metrics).
Exit 77 (ctest skip) when the generated models are missing.
"""
import argparse
import os
import sys
import time
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import inferd_testlib as lib  # noqa: E402

P = None
REF = None
GRPC = IPB = IRPC = None
DECODERS = ["llama-tiny", "qwen2-tiny"]
# 37 ids: two full 16-token KV blocks and a partial one.
PROMPT = [(i * 37 + 11) % 200 + 3 for i in range(37)]


class ParallelSamplesTest(unittest.TestCase):
    server = None

    @classmethod
    def setUpClass(cls):
        models = [(n, os.path.join(P.test_models, n)) for n in DECODERS]
        cls.server = lib.InferdProcess(
            P.inferd, models, ["--metrics-listen", "127.0.0.1:0"],
            log_prefix="inferd-nsamp-")
        cls.server.wait_ready(P.stubs, DECODERS)
        cls.channel = GRPC.insecure_channel(cls.server.address)
        cls.stub = IRPC.InferenceStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        if cls.server is not None:
            cls.channel.close()
            code = cls.server.stop()
            assert code == 0, cls.server.output()

    def request(self, model, n, drafts=None, **sampling):
        req = IPB.GenerateRequest(model=model)
        req.prompt_token_ids.ids.extend(PROMPT)
        req.sampling.n = n
        req.sampling.ignore_eos = True
        if drafts is not None:
            req.speculative.num_draft_tokens = drafts
        for k, v in sampling.items():
            setattr(req.sampling, k, v)
        return req

    def samples(self, req):
        """Tokens by sample, the final message by sample, all messages."""
        msgs = list(self.stub.Generate(req, timeout=300))
        tokens, finals = {}, {}
        for m in msgs:
            tokens.setdefault(m.sample_index, []).extend(m.token_ids)
            if m.finish_reason != IPB.FINISH_REASON_UNSPECIFIED:
                self.assertNotIn(m.sample_index, finals)
                finals[m.sample_index] = m
        self.assertNotEqual(msgs[-1].finish_reason,
                            IPB.FINISH_REASON_UNSPECIFIED)
        return tokens, finals, msgs

    def test_greedy_samples_are_the_greedy_output(self):
        for model in DECODERS:
            one, _, _ = self.samples(self.request(model, 1, temperature=0.0,
                                                  max_tokens=10))
            for drafts in (0, 4):
                tokens, finals, msgs = self.samples(self.request(
                    model, 3, drafts, temperature=0.0, max_tokens=10))
                self.assertEqual(sorted(tokens), [0, 1, 2])
                for i in range(3):
                    self.assertEqual(tokens[i], one[0], (model, i, drafts))
                    f = finals[i]
                    self.assertEqual(f.finish_reason, IPB.FINISH_REASON_LENGTH)
                    self.assertEqual(f.usage.prompt_tokens, len(PROMPT))
                    self.assertEqual(f.usage.completion_tokens, 10)
                self.assertEqual(len(msgs), 30)

    def test_seeded_samples_are_reproducible_and_distinct(self):
        model = "llama-tiny"
        req = self.request(model, 4, temperature=1.0, seed=11, max_tokens=16)
        a, _, _ = self.samples(req)
        b, _, _ = self.samples(req)
        self.assertEqual(a, b)
        for i in range(4):
            alone, _, _ = self.samples(self.request(
                model, 1, temperature=1.0, seed=11 + i, max_tokens=16))
            self.assertEqual(a[i], alone[0], i)
        self.assertGreaterEqual(len({tuple(t) for t in a.values()}), 2)

    def test_each_sample_keeps_to_the_response_format(self):
        choices = ["yes", "no", "maybe", "never"]
        req = self.request("qwen2-tiny", 6, temperature=1.5, seed=2,
                           max_tokens=20)
        req.sampling.ignore_eos = False
        req.response_format.choice.values.extend(choices)
        msgs = list(self.stub.Generate(req, timeout=300))
        texts, finals = {}, {}
        for m in msgs:
            texts[m.sample_index] = texts.get(m.sample_index, "") + m.text
            if m.finish_reason != IPB.FINISH_REASON_UNSPECIFIED:
                finals[m.sample_index] = m.finish_reason
        self.assertEqual(sorted(texts), list(range(6)))
        for i, text in texts.items():
            self.assertIn(text, choices, i)
            self.assertEqual(finals[i], IPB.FINISH_REASON_STOP, i)

    def test_counts_outside_the_limits(self):
        tokens, finals, _ = self.samples(self.request(
            "llama-tiny", 0, temperature=0.0, max_tokens=2))
        self.assertEqual(list(tokens), [0])
        for field, value, words in (("n", 17, "at most 16 samples"),
                                    ("prompt_logprobs", 21,
                                     "sampling.prompt_logprobs = 21 is "
                                     "outside [0, 20]")):
            req = self.request("llama-tiny", 1, max_tokens=2)
            setattr(req.sampling, field, value)
            lib.assert_generate_rejected(self, self.stub, GRPC, req, words)

    def test_prompt_logprobs_match_the_reference(self):
        k = 4
        for model in DECODERS:
            _, logits = REF.Model(os.path.join(P.test_models, model)).forward(
                PROMPT)
            logits = np.asarray(logits, np.float64)
            logits -= logits.max(axis=1, keepdims=True)
            logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
            _, _, msgs = self.samples(self.request(
                model, 2, temperature=0.0, max_tokens=3, prompt_logprobs=k))
            self.assertEqual([len(m.prompt_logprobs) for m in msgs],
                             [len(PROMPT) - 1] + [0] * (len(msgs) - 1))
            self.assertEqual(msgs[0].sample_index, 0)
            for pos, lp in enumerate(msgs[0].prompt_logprobs, start=1):
                row = logp[pos - 1]
                what = (model, pos)
                self.assertEqual(lp.sampled.token_id, PROMPT[pos], what)
                self.assertNotEqual(lp.sampled.token, "", what)
                self.assertAlmostEqual(lp.sampled.logprob, row[PROMPT[pos]],
                                       delta=1e-4, msg=what)
                self.assertEqual(len(lp.top), k, what)
                best = np.sort(row)[::-1][:k]
                for j, t in enumerate(lp.top):
                    # The tiny tokenizers know ~460 of the 12000 ids; the
                    # others (padded rows) have no string.
                    if t.token_id < 400:
                        self.assertNotEqual(t.token, "", what)
                    self.assertAlmostEqual(t.logprob, row[t.token_id],
                                           delta=1e-4, msg=what)
                    self.assertAlmostEqual(t.logprob, best[j], delta=1e-4,
                                           msg=what)

    def test_zz_cancelling_frees_every_samples_blocks(self):
        req = self.request("qwen2-tiny", 4, temperature=1.0, seed=5,
                           max_tokens=400)
        call = self.stub.Generate(req, timeout=300)
        seen = set()
        for m in call:
            seen.add(m.sample_index)
            if len(seen) == 4 and len(m.token_ids) > 0:
                break
        call.cancel()
        with self.assertRaises(GRPC.RpcError) as cm:
            for _ in call:
                pass
        self.assertEqual(cm.exception.code(), GRPC.StatusCode.CANCELLED)
        # The engine frees the blocks in its next step; the gauge is read at
        # scrape time.
        deadline = time.time() + 10
        while True:
            used = lib.metric_value(self.server.scrape(),
                                    "inferd_kv_cache_blocks",
                                    {"model": "qwen2-tiny", "state": "used"})
            if used == 0 or time.time() > deadline:
                break
            time.sleep(0.05)
        self.assertEqual(used, 0)


def main():
    global P, REF, GRPC, IPB, IRPC
    parser = argparse.ArgumentParser()
    lib.add_common_args(parser)
    args, rest = parser.parse_known_args()
    P = lib.Paths(args)
    if not lib.models_present(P.test_models, DECODERS):
        return 77
    REF = lib.import_reference()
    GRPC, IPB, IRPC, _, _ = lib.import_stubs(P.stubs)
    return lib.run_unittest([sys.argv[0]] + rest)


if __name__ == "__main__":
    sys.exit(main())
