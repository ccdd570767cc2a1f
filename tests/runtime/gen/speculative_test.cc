// Speculative decoding by prompt lookup, engine-free parts: the n-gram
// proposer, the accept/reject rule of Sampler::VerifyRow (greedy, and the
// sampled distribution against the exact one), KV rollback in the
// KVCacheManager, and the scheduler driven with drafts over a fake paged KV
// cache that reads every prefix back through the block tables.
#include <cmath>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gtest/gtest.h"
#include "runtime/gen/kv_cache_manager.h"
#include "runtime/gen/sampler.h"
#include "runtime/gen/scheduler.h"
#include "runtime/gen/speculative.h"

namespace inferd {
namespace {

using Ids = std::vector<int32_t>;

Ids Propose(const Ids& tokens, int32_t min_n, int32_t max_n, int32_t max) {
  Ids drafts = {99};  // replaced
  ProposeNgramDrafts(tokens, min_n, max_n, max, &drafts);
  return drafts;
}

TEST(NgramProposerTest, LongestSuffixMatchWinsAndProposesWhatFollowed) {
  // Suffix "3 4": the 2-gram matches at 1 (followed by 5 6 7); the 1-gram
  // "4" would also match at 7 (followed by 9), but longer n-grams come first.
  const Ids t = {1, 3, 4, 5, 6, 7, 2, 4, 9, 3, 4};
  EXPECT_EQ(Propose(t, 1, 3, 3), (Ids{5, 6, 7}));
  EXPECT_EQ(Propose(t, 1, 3, 2), (Ids{5, 6}));
  // Only 1-grams allowed: the most recent "4" with 3 tokens after it is at
  // position 7 ("9 3 4").
  EXPECT_EQ(Propose(t, 1, 1, 3), (Ids{9, 3, 4}));
}

TEST(NgramProposerTest, MostRecentMatchWithEnoughTokensElseTheEarliest) {
  // "1 2" occurs at 0, 4 and 8 (the suffix itself is at 10).
  const Ids t = {1, 2, 10, 11, 1, 2, 20, 21, 1, 2, 1, 2};
  // The most recent earlier match (8) is followed by only "1 2": with room
  // for 2 drafts it wins.
  EXPECT_EQ(Propose(t, 2, 2, 2), (Ids{1, 2}));
  // For 4 drafts it is too short; the match at 4 has "20 21 1 2".
  EXPECT_EQ(Propose(t, 2, 2, 4), (Ids{20, 21, 1, 2}));
  // For 10 drafts nothing has enough: the earliest match has the most.
  EXPECT_EQ(Propose(t, 2, 2, 10), (Ids{10, 11, 1, 2, 20, 21, 1, 2, 1, 2}));
}

TEST(NgramProposerTest, NoMatchOrNoRoomProposesNothing) {
  EXPECT_TRUE(Propose({1, 2, 3, 4}, 1, 3, 4).empty());
  EXPECT_TRUE(Propose({5}, 1, 3, 4).empty());
  EXPECT_TRUE(Propose({}, 1, 3, 4).empty());
  EXPECT_TRUE(Propose({7, 7, 7}, 1, 3, 0).empty());
  // A 2-gram must match in full: "8 7" never occurred before.
  EXPECT_TRUE(Propose({7, 1, 8, 7}, 2, 3, 4).empty());
  // A run of one token: the earliest match has the longest continuation.
  EXPECT_EQ(Propose({7, 7, 7, 7}, 1, 1, 4), (Ids{7, 7, 7}));
}

TEST(SpeculativeParamsTest, ValidatesRangesAndResolvesDefaults) {
  SpeculativeParams p;
  EXPECT_TRUE(p.Validate().ok());
  SpeculativeParams r = p.Resolved(5);
  EXPECT_EQ(r.num_draft_tokens, 5);
  EXPECT_EQ(r.min_ngram, kDefaultMinNgram);
  EXPECT_EQ(r.max_ngram, kDefaultMaxNgram);
  p.num_draft_tokens = 0;
  EXPECT_FALSE(p.Resolved(5).enabled());
  p.num_draft_tokens = kMaxDraftTokens + 1;
  EXPECT_NE(p.Validate().message().find("num_draft_tokens"),
            std::string::npos);
  p.num_draft_tokens = 4;
  p.min_ngram = 4;
  p.max_ngram = 2;
  EXPECT_NE(p.Validate().message().find("min_ngram (4) must be <= max_ngram"),
            std::string::npos);
  p.max_ngram = 0;  // default 3, raised to min_ngram
  EXPECT_TRUE(p.Validate().ok());
  EXPECT_EQ(p.Resolved(0).max_ngram, 4);
  p.min_ngram = 0;
  p.max_ngram = 17;
  EXPECT_NE(p.Validate().message().find("max_ngram"), std::string::npos);
}

// ---------------------------------------------------------------- sampler

TEST(VerifyRowTest, GreedyAcceptsExactlyTheArgmax) {
  Sampler sampler(5);
  SamplingParams params;
  params.temperature = 0.0f;
  params.logprobs = 2;
  const std::vector<float> logits = {0.5f, 3.0f, 1.0f, -2.0f, 2.9f};
  for (int32_t draft = 0; draft < 5; ++draft) {
    SamplingState verify_state(params, {}, {});
    SamplingState sample_state(params, {}, {});
    std::vector<float> a = logits, b = logits;
    SampleResult verified, sampled;
    bool accepted = false;
    ASSERT_TRUE(
        sampler.VerifyRow(absl::MakeSpan(a), &verify_state, draft, &verified,
                          &accepted)
            .ok());
    ASSERT_TRUE(sampler.SampleRow(absl::MakeSpan(b), &sample_state, &sampled)
                    .ok());
    EXPECT_EQ(verified.token_id, 1);
    EXPECT_EQ(accepted, draft == 1);
    EXPECT_EQ(verified.logprob, sampled.logprob);
    ASSERT_EQ(verified.top_logprobs.size(), 2u);
    EXPECT_EQ(verified.top_logprobs[1].token_id, 4);
    EXPECT_EQ(verify_state.num_output_tokens(), 1);
  }
}

// The exact distribution the sampler draws from: softmax(logits / T),
// restricted to the top k and renormalized.
std::vector<double> Exact(const std::vector<float>& logits, float t,
                          int32_t top_k) {
  const size_t v = logits.size();
  std::vector<double> p(v);
  double m = -INFINITY;
  for (float x : logits) m = std::max<double>(m, x / t);
  for (size_t i = 0; i < v; ++i) p[i] = std::exp(logits[i] / t - m);
  if (top_k > 0) {
    std::vector<double> sorted = p;
    std::sort(sorted.rbegin(), sorted.rend());
    const double cut = sorted[static_cast<size_t>(top_k) - 1];
    for (double& x : p) {
      if (x < cut) x = 0.0;
    }
  }
  double z = 0.0;
  for (double x : p) z += x;
  for (double& x : p) x /= z;
  return p;
}

// With sampling on, VerifyRow's token is distributed exactly as p whatever
// the draft (accepted with probability p(draft), else drawn from the
// residual): checked against the exact distribution with 200k draws per
// draft (standard error <= 0.0012; tolerance 0.006, five of them), for a
// plain softmax and a top-k truncated one, and drafts inside and outside
// the candidates.
TEST(VerifyRowTest, SampledTokensFollowTheExactDistributionForAnyDraft) {
  const std::vector<float> logits = {2.0f, 1.0f, 0.5f, 0.0f, -1.0f, 1.5f};
  const int32_t v = static_cast<int32_t>(logits.size());
  constexpr int kDraws = 200000;
  for (int32_t top_k : {0, 3}) {
    SamplingParams params;
    params.temperature = 0.8f;
    params.top_k = top_k;
    const std::vector<double> want = Exact(logits, 0.8f, top_k);
    Sampler sampler(v);
    for (int32_t draft = 0; draft < v; ++draft) {
      params.seed = 1000 + draft + 17 * top_k;
      SamplingState state(params, {}, {});
      std::vector<int> counts(v, 0);
      int accepted_count = 0;
      SampleResult r;
      for (int i = 0; i < kDraws; ++i) {
        std::vector<float> row = logits;
        bool accepted = false;
        ASSERT_TRUE(sampler
                        .VerifyRow(absl::MakeSpan(row), &state, draft, &r,
                                   &accepted)
                        .ok());
        ASSERT_EQ(accepted, r.token_id == draft);
        ++counts[r.token_id];
        accepted_count += accepted;
      }
      for (int32_t t = 0; t < v; ++t) {
        EXPECT_NEAR(counts[t] / static_cast<double>(kDraws), want[t], 0.006)
            << "top_k " << top_k << " draft " << draft << " token " << t;
      }
      EXPECT_NEAR(accepted_count / static_cast<double>(kDraws), want[draft],
                  0.006)
          << "top_k " << top_k << " draft " << draft;
    }
  }
}

// A draft the constraint / min_tokens rule forbids has probability 0: it is
// never accepted.
TEST(VerifyRowTest, AForbiddenDraftIsNeverAccepted) {
  SamplingParams params;
  params.temperature = 1.0f;
  params.min_tokens = 5;
  params.seed = 3;
  const int32_t eos = 2;
  SamplingState state(params, {}, {eos});
  Sampler sampler(4);
  for (int i = 0; i < 1000; ++i) {
    std::vector<float> row = {0.0f, 0.0f, 30.0f, 0.0f};  // EOS favoured
    SampleResult r;
    bool accepted = true;
    ASSERT_TRUE(
        sampler.VerifyRow(absl::MakeSpan(row), &state, eos, &r, &accepted)
            .ok());
    ASSERT_FALSE(accepted);
    ASSERT_NE(r.token_id, eos);
    if (state.num_output_tokens() >= 4) break;
  }
}

// ------------------------------------------------------------- KV cache

TEST(KVCacheTruncateTest, GivesBackTailBlocksButNeverPublishedOnes) {
  KVCacheConfig c;
  c.num_blocks = 8;
  c.block_size = 4;
  KVCacheManager kv(c);
  ASSERT_TRUE(kv.AllocateSlots(1, 18));  // 5 blocks
  EXPECT_EQ(kv.num_free_blocks(), 3);
  kv.Truncate(1, 9);  // 3 blocks
  EXPECT_EQ(kv.BlockTable(1).size(), 3u);
  EXPECT_EQ(kv.num_free_blocks(), 5);
  kv.Truncate(1, 12);  // no growth
  EXPECT_EQ(kv.BlockTable(1).size(), 3u);
  const Ids tokens = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  kv.CacheFullBlocks(1, tokens, 8);  // 2 published blocks
  kv.Truncate(1, 1);
  EXPECT_EQ(kv.BlockTable(1).size(), 2u);
  kv.Truncate(7, 1);  // unknown id: no-op
  kv.Free(1);
  EXPECT_TRUE(kv.AllBlocksFree());
}

// ------------------------------------------------------------- scheduler

constexpr int32_t kVocab = 13;

// A repetitive fake language model: the next token depends on the last
// two; from the test prompts it falls into a 9-token cycle after a
// transient of 1 to 51 tokens (where 1-gram drafts are often wrong).
int32_t NextToken(int32_t prev, int32_t last) {
  return ((prev * last + 8) % kVocab + kVocab) % kVocab;
}

std::vector<int32_t> Reference(Ids tokens, int32_t n) {
  Ids out;
  for (int32_t i = 0; i < n; ++i) {
    const size_t len = tokens.size();
    out.push_back(NextToken(len > 1 ? tokens[len - 2] : -1, tokens[len - 1]));
    tokens.push_back(out.back());
  }
  return out;
}

// A fake paged KV cache storing token ids per slot. Each step it writes
// the new tokens, then reads EVERY position of the sequence back through
// the block table and checks it against what the scheduler says the
// sequence is (known tokens plus this step's drafts): stale KV of rejected
// drafts, or a prefix-cache block holding other tokens, fails the test.
class FakePagedModel {
 public:
  FakePagedModel(int32_t num_blocks, int32_t block_size)
      : block_size_(block_size),
        slots_(static_cast<size_t>(num_blocks) * block_size, -1) {}

  // Predictions for each new token (kAllLogits) or the last (kLastLogits).
  Ids Execute(const SequencePlan& p, const SequenceState& seq) {
    const int32_t n = static_cast<int32_t>(p.token_ids.size());
    const int32_t end = p.start_pos + n;
    for (int32_t i = 0; i < n; ++i) {
      Slot(p.block_table, p.start_pos + i) = p.token_ids[i];
    }
    Ids expected = seq.token_ids;
    expected.insert(expected.end(), seq.draft_token_ids.begin(),
                    seq.draft_token_ids.end());
    for (int32_t pos = 0; pos < end; ++pos) {
      EXPECT_EQ(Slot(p.block_table, pos), expected[pos])
          << "seq " << p.seq_id << " position " << pos;
    }
    Ids next;
    if (p.output == StepOutput::kNone) return next;
    const int32_t first = p.output == StepOutput::kAllLogits ? p.start_pos
                                                             : end - 1;
    for (int32_t pos = first; pos < end; ++pos) {
      next.push_back(NextToken(pos > 0 ? Slot(p.block_table, pos - 1) : -1,
                               Slot(p.block_table, pos)));
    }
    return next;
  }

 private:
  int32_t& Slot(const std::vector<int32_t>& table, int32_t pos) {
    return slots_[static_cast<size_t>(table[pos / block_size_]) * block_size_ +
                  pos % block_size_];
  }
  int32_t block_size_;
  Ids slots_;
};

struct SpecRun {
  absl::flat_hash_map<int64_t, Ids> outputs;
  int64_t drafts = 0;
  int64_t accepted = 0;
  int64_t steps = 0;
  int64_t preemptions = 0;
};

// Runs every request to completion with greedy verification; `stop_on`
// (if >= 0) ends a sequence with kStop on that token, as the engine's stop
// checker would, cutting the step's tokens there.
SpecRun RunGreedy(ContinuousBatchingScheduler& sched, FakePagedModel& model,
                  int32_t stop_on = -1) {
  SpecRun run;
  while (sched.HasUnfinished() && run.steps < 100000) {
    ++run.steps;
    SchedulerOutput out = sched.Schedule();
    run.preemptions += static_cast<int64_t>(out.preempted_seq_ids.size());
    EXPECT_LE(out.num_scheduled_tokens, sched.config().max_batched_tokens);
    EXPECT_EQ(out.plan.num_tokens(), out.num_scheduled_tokens);
    std::vector<SampledToken> sampled;
    for (size_t i = 0; i < out.plan.seqs.size(); ++i) {
      const SequencePlan& p = out.plan.seqs[i];
      const SequenceState* seq = sched.Get(p.seq_id);
      const int32_t drafts = out.scheduled[i].num_draft_tokens;
      EXPECT_EQ(drafts, static_cast<int32_t>(seq->draft_token_ids.size()));
      EXPECT_LE(seq->num_tokens() + drafts + 1, seq->max_total_len);
      const Ids next = model.Execute(p, *seq);
      if (next.empty()) continue;
      EXPECT_EQ(static_cast<int32_t>(next.size()), drafts + 1);
      run.drafts += drafts;
      SampledToken t;
      t.seq_id = p.seq_id;
      Ids& outputs = run.outputs[p.seq_id];
      for (int32_t j = 0; j <= drafts; ++j) {
        const bool accept = j < drafts && p.token_ids[1 + j] == next[j];
        t.token_id = next[j];
        t.num_accepted_drafts = j;
        outputs.push_back(next[j]);
        run.accepted += accept;
        if (next[j] == stop_on) {
          t.finish_reason = FinishReason::kStop;
          break;
        }
        if (!accept) break;
      }
      sampled.push_back(t);
    }
    auto finished = sched.Update(sampled);
    EXPECT_TRUE(finished.ok()) << finished.status();
  }
  EXPECT_FALSE(sched.HasUnfinished());
  return run;
}

SchedulerConfig SpecConfig(int32_t budget, int32_t num_blocks,
                           int32_t block_size) {
  SchedulerConfig c;
  c.max_batched_tokens = budget;
  c.max_seqs = 8;
  c.max_model_len = 4096;
  c.kv_cache.num_blocks = num_blocks;
  c.kv_cache.block_size = block_size;
  return c;
}

SpeculativeParams Spec(int32_t drafts) {
  SpeculativeParams s;
  s.num_draft_tokens = drafts;
  return s.Resolved(0);
}

Ids PromptOf(int32_t seed, int32_t len) {
  Ids p;
  for (int32_t i = 0; i < len; ++i) p.push_back((seed * 7 + i * i) % kVocab);
  return p;
}

TEST(SpeculativeSchedulerTest, GreedyOutputsMatchTheReferenceAndDraftsPay) {
  for (int32_t drafts : {1, 3, 8}) {
    SchedulerConfig c = SpecConfig(/*budget=*/64, /*num_blocks=*/64, 4);
    ContinuousBatchingScheduler sched(c);
    std::vector<SamplingParams> params(6);
    for (int64_t id = 0; id < 6; ++id) {
      params[id].max_tokens = 20 + 7 * static_cast<int32_t>(id);
      ASSERT_TRUE(sched
                      .Add(id, PromptOf(static_cast<int32_t>(id), 5 + 3 * id),
                           &params[id], /*disable_prefix_cache=*/false,
                           Spec(drafts))
                      .ok());
    }
    FakePagedModel model(c.kv_cache.num_blocks, 4);
    SpecRun run = RunGreedy(sched, model);
    for (int64_t id = 0; id < 6; ++id) {
      EXPECT_EQ(run.outputs[id],
                Reference(PromptOf(static_cast<int32_t>(id), 5 + 3 * id),
                          params[id].max_tokens))
          << "drafts " << drafts << " seq " << id;
    }
    EXPECT_GT(run.accepted, 0) << drafts;
    EXPECT_LT(run.accepted, run.drafts) << drafts;  // some were rolled back
    EXPECT_TRUE(sched.kv_cache().AllBlocksFree()) << drafts;
  }
}

// The same requests without drafts take one step per token; with them,
// fewer steps and the same tokens.
TEST(SpeculativeSchedulerTest, FewerStepsThanWithoutDrafts) {
  int64_t steps[2];
  Ids outputs[2];
  for (int k = 0; k < 2; ++k) {
    SchedulerConfig c = SpecConfig(64, 64, 4);
    ContinuousBatchingScheduler sched(c);
    SamplingParams params;
    params.max_tokens = 60;
    ASSERT_TRUE(sched.Add(1, PromptOf(2, 6), &params, false,
                          Spec(k == 0 ? 0 : 6))
                    .ok());
    FakePagedModel model(64, 4);
    SpecRun run = RunGreedy(sched, model);
    steps[k] = run.steps;
    outputs[k] = run.outputs[1];
    if (k == 0) {
      EXPECT_EQ(run.drafts, 0);
    }
  }
  EXPECT_EQ(outputs[0], outputs[1]);
  EXPECT_EQ(steps[0], 60);
  EXPECT_LT(steps[1], 30);
}

// A KV cache too small for every sequence at once: drafts take only free
// blocks (leaving one per decode still to schedule), preempted sequences
// recompute, and the outputs are still the reference.
TEST(SpeculativeSchedulerTest, TightKvCacheStillGivesTheReference) {
  SchedulerConfig c = SpecConfig(/*budget=*/64, /*num_blocks=*/24, 4);
  ContinuousBatchingScheduler sched(c);
  std::vector<SamplingParams> params(8);
  for (int64_t id = 0; id < 8; ++id) {
    params[id].max_tokens = 30;
    ASSERT_TRUE(sched
                    .Add(id, PromptOf(static_cast<int32_t>(id), 8),
                         &params[id], false, Spec(6))
                    .ok());
  }
  FakePagedModel model(24, 4);
  SpecRun run = RunGreedy(sched, model);
  for (int64_t id = 0; id < 8; ++id) {
    EXPECT_EQ(run.outputs[id],
              Reference(PromptOf(static_cast<int32_t>(id), 8), 30))
        << "seq " << id;
  }
  EXPECT_GT(run.accepted, 0);
  EXPECT_GT(run.preemptions, 0);
  EXPECT_TRUE(sched.kv_cache().AllBlocksFree());
}

// Drafts stop at the length limit, and a stop on an accepted draft cuts
// the step's tokens there.
TEST(SpeculativeSchedulerTest, DraftsRespectMaxTokensAndStops) {
  SchedulerConfig c = SpecConfig(64, 64, 4);
  const Ids prompt = PromptOf(3, 8);
  const Ids want = Reference(prompt, 200);
  for (int32_t max_tokens : {1, 2, 5, 17, 40}) {
    ContinuousBatchingScheduler sched(c);
    SamplingParams params;
    params.max_tokens = max_tokens;
    ASSERT_TRUE(sched.Add(1, prompt, &params, false, Spec(8)).ok());
    FakePagedModel model(64, 4);
    SpecRun run = RunGreedy(sched, model);
    EXPECT_EQ(run.outputs[1], Ids(want.begin(), want.begin() + max_tokens));
    EXPECT_TRUE(sched.kv_cache().AllBlocksFree());
  }
  // Stop on the first occurrence of some token past the 10th output.
  const int32_t stop = want[10];
  const size_t at = static_cast<size_t>(
      std::find(want.begin(), want.end(), stop) - want.begin());
  ContinuousBatchingScheduler sched(c);
  SamplingParams params;
  params.max_tokens = 100;
  ASSERT_TRUE(sched.Add(1, prompt, &params, false, Spec(8)).ok());
  FakePagedModel model(64, 4);
  SpecRun run = RunGreedy(sched, model, stop);
  EXPECT_EQ(run.outputs[1], Ids(want.begin(), want.begin() + at + 1));
  EXPECT_TRUE(sched.kv_cache().AllBlocksFree());
}

// Prefix-cache blocks published by a speculating request hold only
// verified tokens: a second request whose prompt is the first one's whole
// text reuses them (the fake cache checks every slot it reads back) and
// continues exactly.
TEST(SpeculativeSchedulerTest, PublishedBlocksHoldOnlyVerifiedTokens) {
  SchedulerConfig c = SpecConfig(64, 64, 4);
  ContinuousBatchingScheduler sched(c);
  FakePagedModel model(64, 4);
  const Ids prompt = PromptOf(5, 7);
  SamplingParams params;
  params.max_tokens = 41;
  ASSERT_TRUE(sched.Add(1, prompt, &params, false, Spec(6)).ok());
  SpecRun first = RunGreedy(sched, model);
  ASSERT_GT(first.accepted, 0);
  ASSERT_LT(first.accepted, first.drafts);
  Ids text = prompt;
  text.insert(text.end(), first.outputs[1].begin(), first.outputs[1].end());
  SamplingParams params2;
  params2.max_tokens = 10;
  ASSERT_TRUE(sched.Add(2, text, &params2, false, Spec(6)).ok());
  SpecRun second = RunGreedy(sched, model);
  // Every full block of the first request's KV (prompt + 41 outputs, the
  // last one never fed back) was published.
  EXPECT_EQ(sched.kv_cache().prefix_hit_tokens(), (7 + 41 - 1) / 4 * 4);
  EXPECT_EQ(second.outputs[2], Reference(text, 10));
  EXPECT_TRUE(sched.kv_cache().AllBlocksFree());
}

}  // namespace
}  // namespace inferd
