#!/usr/bin/python3
"""Speculative decoding by prompt lookup (GenerateRequest.speculative,
--speculative-draft-tokens) over real gRPC against the inferd binary:

- greedy outputs are the same tokens with and without drafts on the
  random-weight tiny decoders (tools/make_test_models.py) and on the real
  stories260K (when present), for plain and repetitive prompts, and drafts
  were accepted (usage.accepted_draft_tokens > 0, so the multi-token
  verification path ran); one message per token either way; logprobs agree
  (tolerance 1e-4: the verification pass batches rows differently);
- stop strings, stop token ids, max_tokens and structured output end at the
  same token with the same text;
- a model whose engine speculates by default (per-model option
  speculative-draft-tokens=4) does so unless a request says 0;
- bad settings are INVALID_ARGUMENT naming the field;
- /metrics counts drafts and accepted drafts, and every KV block is free
  afterwards.
Exit 77 (ctest skip) when the generated models are missing.
"""
import argparse
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import inferd_testlib as lib  # noqa: E402

P = None
GRPC = IPB = None
DECODERS = ["llama-tiny", "qwen2-tiny", "qwen3-tiny", "mistral-tiny"]
PROMPTS = [
    "The meaning of life is",
    "one two three four one two three four one two three four one two",
    "Copy this: the cat sat on the mat. Copy this: the cat sat on the mat.",
]
STORY_PROMPTS = [
    "Once upon a time",
    "Lily had a red ball. Lily had a red ball. Lily had a red",
    "Tom said: I like the big dog. Sue said: I like the big",
]


class SpeculativeTest(unittest.TestCase):
    server = None

    @classmethod
    def setUpClass(cls):
        models = [(n, os.path.join(P.test_models, n)) for n in DECODERS]
        cls.has_stories = os.path.isfile(
            os.path.join(lib.stories_dir(), "config.json"))
        if cls.has_stories:
            models.append(("stories", lib.stories_dir()))
        # qwen2-tiny falls into repeating itself: drafts get accepted.
        models.append(("tiny-spec", os.path.join(P.test_models, "qwen2-tiny") +
                       ",speculative-draft-tokens=4"))
        lib.serve(cls, P, models, ["--metrics-listen", "127.0.0.1:0"],
                  log_prefix="inferd-spec-")

    @classmethod
    def tearDownClass(cls):
        lib.unserve(cls)

    def generate(self, model, prompt, drafts=None, **sampling):
        req = lib.generate_request(IPB, model, prompt=prompt, drafts=drafts,
                                   **sampling)
        return lib.generate(self.stub, req, timeout=300)

    def same(self, model, prompt, drafts=5, **sampling):
        """Generates without and with drafts; checks they agree; returns the
        accepted draft count."""
        a_tokens, a_text, a = self.generate(model, prompt, 0, **sampling)
        b_tokens, b_text, b = self.generate(model, prompt, drafts, **sampling)
        what = f"{model} {prompt!r} {sampling}"
        self.assertEqual(b_tokens, a_tokens, what)
        self.assertEqual(b_text, a_text, what)
        self.assertTrue(all(len(c.token_ids) <= 1 for c in b), what)
        self.assertEqual(len(b), len(a), what)
        for x, y in zip(a, b):
            self.assertEqual(len(x.logprobs), len(y.logprobs), what)
            for lx, ly in zip(x.logprobs, y.logprobs):
                self.assertEqual(lx.sampled.token_id, ly.sampled.token_id)
                self.assertAlmostEqual(lx.sampled.logprob, ly.sampled.logprob,
                                       delta=1e-4)
        self.assertEqual(b[-1].finish_reason, a[-1].finish_reason, what)
        self.assertEqual(b[-1].stop_reason, a[-1].stop_reason, what)
        self.assertEqual(b[-1].usage.completion_tokens,
                         a[-1].usage.completion_tokens, what)
        self.assertEqual(a[-1].usage.draft_tokens, 0, what)
        self.assertLessEqual(b[-1].usage.accepted_draft_tokens,
                             b[-1].usage.draft_tokens, what)
        self.stats = getattr(self, "stats", [0, 0])
        self.stats[0] += b[-1].usage.draft_tokens
        self.stats[1] += b[-1].usage.accepted_draft_tokens
        return b[-1].usage.accepted_draft_tokens, b_tokens

    def test_greedy_is_identical_on_random_models(self):
        # Random weights rarely copy their input; qwen2-tiny soon repeats one
        # token, so its drafts (after some rejected ones from the prompt)
        # get accepted.
        self.stats = [0, 0]
        for model in DECODERS:
            for prompt in PROMPTS:
                self.same(model, prompt, temperature=0.0, max_tokens=48,
                          ignore_eos=True, logprobs=2)
        drafts, accepted = self.stats
        self.assertGreater(accepted, 0)
        self.assertGreater(drafts, accepted)

    def test_greedy_is_identical_on_stories260k(self):
        if not self.has_stories:
            self.skipTest("examples/models/stories260K absent")
        accepted = 0
        for prompt in STORY_PROMPTS:
            for drafts in (3, 8):
                got, _ = self.same("stories", prompt, drafts, temperature=0.0,
                                   max_tokens=160, logprobs=1)
                accepted += got
        self.assertGreater(accepted, 50)

    def test_stops_limits_and_structured_output_cut_at_the_same_token(self):
        model = "stories" if self.has_stories else "qwen2-tiny"
        prompt = STORY_PROMPTS[1] if self.has_stories else PROMPTS[1]
        _, text, _ = self.generate(model, prompt, 0, temperature=0.0,
                                   max_tokens=80, ignore_eos=True)
        _, tokens = self.same(model, prompt, temperature=0.0, max_tokens=80,
                              ignore_eos=True)
        accepted = 0
        for max_tokens in (1, 2, 3, 9, 33):
            accepted += self.same(model, prompt, 8, temperature=0.0,
                                  max_tokens=max_tokens, ignore_eos=True)[0]
        # A stop string straddling tokens, deep into the output.
        mid = len(text) // 2
        stop = text[mid:mid + 5]
        for keep in (False, True):
            accepted += self.same(model, prompt, 8, temperature=0.0,
                                  max_tokens=80, stop=[stop], ignore_eos=True,
                                  include_stop_str_in_output=keep)[0]
        _, _, chunks = self.generate(model, prompt, 8, temperature=0.0,
                                     max_tokens=80, stop=[stop],
                                     ignore_eos=True)
        self.assertEqual(chunks[-1].finish_reason, IPB.FINISH_REASON_STOP)
        # Stop ids: a token of the middle of the output, with min_tokens.
        stop_id = tokens[len(tokens) // 2]
        for min_tokens in (0, 5):
            accepted += self.same(model, prompt, 8, temperature=0.0,
                                  max_tokens=80, stop_token_ids=[stop_id],
                                  min_tokens=min_tokens)[0]
        # Structured output: drafts the grammar forbids are rejected.
        self.same(model, prompt, 8, temperature=0.0, max_tokens=60,
                  regex=r"( ?[a-z]+){1,12}\.")
        self.assertGreater(accepted, 0)

    def test_sampling_with_drafts_streams_valid_outputs(self):
        model = "stories" if self.has_stories else "qwen2-tiny"
        prompt = STORY_PROMPTS[1] if self.has_stories else PROMPTS[1]
        drafts = 0
        for seed in range(4):
            _, _, chunks = self.generate(model, prompt, 6,
                                         temperature=0.7, top_p=0.95,
                                         seed=seed, max_tokens=40,
                                         ignore_eos=True, logprobs=1)
            drafts += chunks[-1].usage.draft_tokens
            self.assertEqual(chunks[-1].usage.completion_tokens, 40)
            self.assertEqual(sum(len(c.token_ids) for c in chunks), 40)
            self.assertEqual(sum(len(c.logprobs) for c in chunks), 40)
            self.assertLessEqual(chunks[-1].usage.accepted_draft_tokens,
                                 chunks[-1].usage.draft_tokens)
        self.assertGreater(drafts, 0)

    def test_server_default_and_request_opt_out(self):
        a, _, on = self.generate("tiny-spec", PROMPTS[1], None,
                                 temperature=0.0, max_tokens=48,
                                 ignore_eos=True)
        b, _, off = self.generate("tiny-spec", PROMPTS[1], 0,
                                  temperature=0.0, max_tokens=48,
                                  ignore_eos=True)
        self.assertEqual(a, b)
        self.assertGreater(on[-1].usage.draft_tokens, 0)
        self.assertEqual(off[-1].usage.draft_tokens, 0)
        # Without the option the model does not speculate.
        c, _, plain = self.generate("qwen2-tiny", PROMPTS[1], None,
                                    temperature=0.0, max_tokens=48,
                                    ignore_eos=True)
        self.assertEqual(c, a)
        self.assertEqual(plain[-1].usage.draft_tokens, 0)

    def test_bad_settings_are_invalid_argument(self):
        for spec, field in (({"num_draft_tokens": 17}, "num_draft_tokens"),
                            ({"num_draft_tokens": 2**32 - 1},
                             "num_draft_tokens = 2147483647 is outside [0, 16]"),
                            ({"min_ngram": 5, "max_ngram": 2}, "min_ngram"),
                            ({"max_ngram": 99}, "max_ngram")):
            req = IPB.GenerateRequest(model="llama-tiny", prompt="x")
            for k, v in spec.items():
                setattr(req.speculative, k, v)
            lib.assert_generate_rejected(self, self.stub, GRPC, req, field)

    def test_zz_metrics_count_drafts_and_blocks_are_free(self):
        # Runs last (name order): every earlier request has ended.
        self.same("qwen2-tiny", PROMPTS[1], temperature=0.0, max_tokens=32,
                  ignore_eos=True)
        text = self.server.scrape()
        model = {"model": "qwen2-tiny"}
        drafts = lib.metric_value(text, "inferd_spec_decode_draft_tokens_total",
                                  model)
        accepted = lib.metric_value(
            text, "inferd_spec_decode_accepted_tokens_total", model)
        self.assertGreater(drafts, 0)
        self.assertGreater(accepted, 0)
        self.assertLessEqual(accepted, drafts)
        # The engine frees a finished request's blocks in the step that
        # ends it; the gauge is read at scrape time.
        deadline = time.time() + 10
        for model in DECODERS + ["tiny-spec"]:
            while True:
                used = lib.metric_value(self.server.scrape(),
                                        "inferd_kv_cache_blocks",
                                        {"model": model, "state": "used"})
                if used == 0 or time.time() > deadline:
                    break
                time.sleep(0.05)
            self.assertEqual(used, 0, model)


def main():
    global P, GRPC, IPB
    parser = argparse.ArgumentParser()
    lib.add_common_args(parser)
    args, rest = parser.parse_known_args()
    P = lib.Paths(args)
    if not lib.models_present(P.test_models, DECODERS):
        return 77
    GRPC, IPB, _, _, _ = lib.import_stubs(P.stubs)
    return lib.run_unittest([sys.argv[0]] + rest)


if __name__ == "__main__":
    sys.exit(main())
