#include "runtime/gen/scheduler.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gtest/gtest.h"

namespace inferd {
namespace {

constexpr int32_t kVocab = 1000;

// next token = f(whole prefix).
int32_t NextToken(absl::Span<const int32_t> prefix) {
  uint64_t h = 1469598103934665603ULL;
  for (int32_t t : prefix) {
    h ^= static_cast<uint64_t>(t) + 0x9e37;
    h *= 1099511628211ULL;
  }
  return static_cast<int32_t>(h % kVocab);
}

std::vector<int32_t> Reference(std::vector<int32_t> tokens, int32_t n) {
  std::vector<int32_t> out;
  for (int32_t i = 0; i < n; ++i) {
    out.push_back(NextToken(tokens));
    tokens.push_back(out.back());
  }
  return out;
}

std::vector<int32_t> Prompt(int32_t len, int32_t seed) {
  std::vector<int32_t> p(len);
  for (int32_t i = 0; i < len; ++i) p[i] = (seed * 7919 + i * 31) % kVocab;
  return p;
}

// A fake model over a fake paged KV cache: each slot stores the token id
// written there, and the next token is computed from the prefix READ BACK
// through the block table. Wrong blocks (bad prefix reuse, stale blocks
// after preemption) therefore change the output.
class FakeModel {
 public:
  FakeModel(int32_t num_blocks, int32_t block_size)
      : block_size_(block_size),
        slots_(static_cast<size_t>(num_blocks) * block_size, -1) {}

  // Returns the sampled token for kLastLogits sequences, -1 otherwise.
  int32_t Execute(const SequencePlan& p) {
    const int32_t end = p.start_pos + static_cast<int32_t>(p.token_ids.size());
    EXPECT_GE(static_cast<int32_t>(p.block_table.size()) * block_size_, end);
    for (size_t i = 0; i < p.token_ids.size(); ++i) {
      Slot(p.block_table, p.start_pos + static_cast<int32_t>(i)) =
          p.token_ids[i];
    }
    if (p.output != StepOutput::kLastLogits) return -1;
    std::vector<int32_t> prefix(end);
    for (int32_t pos = 0; pos < end; ++pos)
      prefix[pos] = Slot(p.block_table, pos);
    return NextToken(prefix);
  }

 private:
  int32_t& Slot(const std::vector<int32_t>& table, int32_t pos) {
    return slots_[static_cast<size_t>(table[pos / block_size_]) * block_size_ +
                  pos % block_size_];
  }
  int32_t block_size_;
  std::vector<int32_t> slots_;
};

SchedulerConfig Config(int32_t budget, int32_t max_seqs, int32_t num_blocks,
                       int32_t block_size = 4, int32_t max_model_len = 4096) {
  SchedulerConfig c;
  c.max_batched_tokens = budget;
  c.max_seqs = max_seqs;
  c.max_model_len = max_model_len;
  c.kv_cache.num_blocks = num_blocks;
  c.kv_cache.block_size = block_size;
  return c;
}

// Drives a scheduler with the fake model, checking per-step invariants.
class Driver {
 public:
  explicit Driver(const SchedulerConfig& c)
      : sched_(c), model_(c.kv_cache.num_blocks, c.kv_cache.block_size) {}

  ContinuousBatchingScheduler& sched() { return sched_; }

  absl::Status Add(int64_t id, std::vector<int32_t> prompt, int32_t max_tokens,
                   bool disable_cache = false) {
    auto params = std::make_unique<SamplingParams>();
    params->max_tokens = max_tokens;
    const SamplingParams* p = params.get();
    params_.push_back(std::move(params));
    return sched_.Add(id, std::move(prompt), p, disable_cache);
  }

  // One step; `stop_at` maps seq id -> output length at which the
  // "stop checker" ends it with kStop.
  SchedulerOutput Step(
      const absl::flat_hash_map<int64_t, int32_t>& stop_at = {}) {
    SchedulerOutput out = sched_.Schedule();
    const SchedulerConfig& c = sched_.config();
    EXPECT_LE(out.num_scheduled_tokens, c.max_batched_tokens);
    EXPECT_LE(static_cast<int32_t>(out.plan.seqs.size()), c.max_seqs);
    EXPECT_EQ(out.plan.num_tokens(), out.num_scheduled_tokens);
    EXPECT_EQ(out.plan.seqs.size(), out.scheduled.size());
    EXPECT_EQ(out.num_decode_tokens + out.num_prefill_tokens,
              out.num_scheduled_tokens);
    if (out.num_decode_tokens > 0 && c.max_prefill_tokens_while_decoding > 0) {
      EXPECT_LE(out.num_prefill_tokens, c.max_prefill_tokens_while_decoding);
    }
    int32_t decodes = 0;
    for (const ScheduledSequence& s : out.scheduled) decodes += s.decode;
    EXPECT_EQ(decodes, out.num_decode_tokens);
    for (int64_t id : out.preempted_seq_ids) ++preemptions_[id];
    std::vector<SampledToken> sampled;
    for (const SequencePlan& p : out.plan.seqs) {
      const int32_t t = model_.Execute(p);
      if (t < 0) continue;
      SampledToken s;
      s.seq_id = p.seq_id;
      s.token_id = t;
      outputs_[p.seq_id].push_back(t);
      auto it = stop_at.find(p.seq_id);
      if (it != stop_at.end() &&
          static_cast<int32_t>(outputs_[p.seq_id].size()) >= it->second) {
        s.finish_reason = FinishReason::kStop;
      }
      sampled.push_back(s);
    }
    auto finished = sched_.Update(sampled);
    EXPECT_TRUE(finished.ok()) << finished.status();
    if (finished.ok()) {
      for (const FinishedSequence& f : *finished) finished_[f.seq_id] = f;
    }
    return out;
  }

  void RunToCompletion(
      const absl::flat_hash_map<int64_t, int32_t>& stop_at = {}) {
    for (int i = 0; i < 100000 && sched_.HasUnfinished(); ++i) Step(stop_at);
    EXPECT_FALSE(sched_.HasUnfinished());
  }

  const std::vector<int32_t>& output(int64_t id) { return outputs_[id]; }
  const FinishedSequence& finished(int64_t id) { return finished_[id]; }
  bool is_finished(int64_t id) const { return finished_.contains(id); }
  int preemptions(int64_t id) const {
    auto it = preemptions_.find(id);
    return it == preemptions_.end() ? 0 : it->second;
  }
  void DropOutput(int64_t id) { outputs_.erase(id); }

 private:
  ContinuousBatchingScheduler sched_;
  FakeModel model_;
  std::vector<std::unique_ptr<SamplingParams>> params_;
  absl::flat_hash_map<int64_t, std::vector<int32_t>> outputs_;
  absl::flat_hash_map<int64_t, FinishedSequence> finished_;
  absl::flat_hash_map<int64_t, int> preemptions_;
};

const ScheduledSequence* Find(const SchedulerOutput& out, int64_t id) {
  for (const ScheduledSequence& s : out.scheduled) {
    if (s.seq_id == id) return &s;
  }
  return nullptr;
}

TEST(ContinuousBatchingSchedulerTest,
     ManyRequestsRespectBudgetAndSeqCapAndMatchReference) {
  Driver d(Config(/*budget=*/32, /*max_seqs=*/4, /*num_blocks=*/256));
  std::mt19937 rng(7);
  std::vector<std::pair<std::vector<int32_t>, int32_t>> reqs;
  for (int64_t id = 0; id < 20; ++id) {
    std::vector<int32_t> p =
        Prompt(1 + static_cast<int32_t>(rng() % 70), static_cast<int32_t>(id));
    const int32_t n = 1 + static_cast<int32_t>(rng() % 12);
    ASSERT_TRUE(d.Add(id, p, n).ok());
    reqs.emplace_back(p, n);
  }
  d.RunToCompletion();
  for (int64_t id = 0; id < 20; ++id) {
    EXPECT_EQ(d.output(id), Reference(reqs[id].first, reqs[id].second))
        << "seq " << id;
    EXPECT_EQ(d.finished(id).reason, FinishReason::kLength);
    EXPECT_EQ(d.finished(id).num_output_tokens, reqs[id].second);
  }
  EXPECT_TRUE(d.sched().kv_cache().AllBlocksFree());
}

TEST(ContinuousBatchingSchedulerTest,
     ChunkedPrefillSplitsALongPromptAcrossSteps) {
  Driver d(Config(32, 8, 64));
  const std::vector<int32_t> prompt = Prompt(100, 3);
  ASSERT_TRUE(d.Add(1, prompt, 2).ok());
  std::vector<int32_t> seen;
  const std::vector<int32_t> expected_sizes = {32, 32, 32, 4};
  for (size_t step = 0; step < expected_sizes.size(); ++step) {
    SchedulerOutput out = d.Step();
    ASSERT_EQ(out.plan.seqs.size(), 1u);
    const SequencePlan& p = out.plan.seqs[0];
    EXPECT_EQ(p.start_pos, static_cast<int32_t>(seen.size()));
    EXPECT_EQ(static_cast<int32_t>(p.token_ids.size()), expected_sizes[step]);
    EXPECT_EQ(p.output, step + 1 == expected_sizes.size()
                            ? StepOutput::kLastLogits
                            : StepOutput::kNone);
    seen.insert(seen.end(), p.token_ids.begin(), p.token_ids.end());
  }
  EXPECT_EQ(seen, prompt);
  SchedulerOutput decode = d.Step();
  ASSERT_EQ(decode.plan.seqs.size(), 1u);
  EXPECT_EQ(decode.plan.seqs[0].token_ids.size(), 1u);
  EXPECT_EQ(decode.plan.seqs[0].start_pos, 100);
  EXPECT_EQ(d.output(1), Reference(prompt, 2));
  EXPECT_FALSE(d.sched().HasUnfinished());
}

TEST(ContinuousBatchingSchedulerTest,
     RunningDecodesGetTheirTokenWhileALongPromptPrefills) {
  Driver d(Config(16, 8, 256));
  ASSERT_TRUE(d.Add(1, Prompt(5, 1), 100).ok());
  ASSERT_TRUE(d.Add(2, Prompt(6, 2), 100).ok());
  d.Step();  // both prompts fit in one step
  ASSERT_EQ(d.output(1).size(), 1u);
  ASSERT_EQ(d.output(2).size(), 1u);

  const std::vector<int32_t> long_prompt = Prompt(200, 9);
  ASSERT_TRUE(d.Add(3, long_prompt, 1).ok());
  int prefill_steps = 0;
  while (d.output(3).empty()) {
    SchedulerOutput out = d.Step();
    const ScheduledSequence* a = Find(out, 1);
    const ScheduledSequence* b = Find(out, 2);
    const ScheduledSequence* c = Find(out, 3);
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(a->num_new_tokens, 1);
    EXPECT_EQ(b->num_new_tokens, 1);
    EXPECT_LE(c->num_new_tokens, 14);
    ++prefill_steps;
    ASSERT_LT(prefill_steps, 100);
  }
  EXPECT_EQ(prefill_steps, (200 + 13) / 14);
  EXPECT_EQ(d.output(3), Reference(long_prompt, 1));
  EXPECT_EQ(d.output(1).size(), 1u + prefill_steps);
}

TEST(ContinuousBatchingSchedulerTest, SeqCapLimitsAStepAndLaterRequestsWait) {
  Driver d(Config(1000, 2, 256));
  for (int64_t id = 0; id < 3; ++id)
    ASSERT_TRUE(d.Add(id, Prompt(4, id), 3).ok());
  SchedulerOutput out = d.Step();
  EXPECT_EQ(out.plan.seqs.size(), 2u);
  EXPECT_EQ(Find(out, 2), nullptr);
  EXPECT_EQ(d.sched().num_waiting(), 1);
  d.RunToCompletion();
  EXPECT_EQ(d.output(2), Reference(Prompt(4, 2), 3));
}

TEST(ContinuousBatchingSchedulerTest,
     PreemptsTheLatestAdmittedWhenBlocksRunOutAndItResumes) {
  // 6 blocks of 4 tokens. A and B each need 5 blocks eventually.
  Driver d(Config(64, 8, 6));
  const std::vector<int32_t> pa = Prompt(6, 1);
  const std::vector<int32_t> pb = Prompt(6, 2);
  ASSERT_TRUE(d.Add(1, pa, 14).ok());
  ASSERT_TRUE(d.Add(2, pb, 14).ok());
  bool saw_preemption = false;
  for (int i = 0; i < 1000 && d.sched().HasUnfinished(); ++i) {
    SchedulerOutput out = d.Step();
    if (!out.preempted_seq_ids.empty()) {
      if (!saw_preemption) {
        EXPECT_EQ(out.preempted_seq_ids[0], 2) << "the later admitted one";
        EXPECT_NE(Find(out, 1), nullptr);
      }
      saw_preemption = true;
    }
  }
  EXPECT_TRUE(saw_preemption);
  EXPECT_GE(d.finished(2).num_preemptions, 1);
  EXPECT_EQ(d.output(1), Reference(pa, 14));
  EXPECT_EQ(d.output(2), Reference(pb, 14));
  EXPECT_TRUE(d.sched().kv_cache().AllBlocksFree());
}

TEST(ContinuousBatchingSchedulerTest,
     PreemptedRunsGiveTheSameOutputsAsUnpreemptedRuns) {
  std::mt19937 rng(99);
  std::vector<std::pair<std::vector<int32_t>, int32_t>> reqs;
  for (int32_t id = 0; id < 12; ++id) {
    reqs.emplace_back(Prompt(3 + static_cast<int32_t>(rng() % 30), id % 5),
                      5 + static_cast<int32_t>(rng() % 30));
  }
  auto run = [&reqs](int32_t num_blocks, bool caching) {
    SchedulerConfig c = Config(24, 6, num_blocks);
    c.kv_cache.enable_prefix_caching = caching;
    auto d = std::make_unique<Driver>(c);
    for (size_t id = 0; id < reqs.size(); ++id) {
      EXPECT_TRUE(d->Add(id, reqs[id].first, reqs[id].second).ok());
    }
    d->RunToCompletion();
    return d;
  };
  auto roomy = run(1000, false);
  auto tight = run(18, true);
  int total_preemptions = 0;
  for (size_t id = 0; id < reqs.size(); ++id) {
    EXPECT_EQ(tight->output(id), roomy->output(id)) << "seq " << id;
    EXPECT_EQ(roomy->output(id), Reference(reqs[id].first, reqs[id].second));
    EXPECT_EQ(roomy->preemptions(id), 0);
    total_preemptions += tight->preemptions(id);
  }
  EXPECT_GT(total_preemptions, 0);
  EXPECT_TRUE(tight->sched().kv_cache().AllBlocksFree());
}

TEST(ContinuousBatchingSchedulerTest, PrefixHitSkipsCachedTokensAndCountsThem) {
  Driver d(Config(256, 8, 64, /*block_size=*/16));
  std::vector<int32_t> a = Prompt(40, 5);
  ASSERT_TRUE(d.Add(1, a, 3).ok());
  d.RunToCompletion();
  EXPECT_EQ(d.finished(1).num_cached_tokens, 0);

  std::vector<int32_t> b(a.begin(), a.begin() + 35);
  b.push_back(777);
  ASSERT_TRUE(d.Add(2, b, 3).ok());
  SchedulerOutput out = d.Step();
  ASSERT_EQ(out.plan.seqs.size(), 1u);
  EXPECT_EQ(out.plan.seqs[0].start_pos, 32);
  EXPECT_EQ(out.plan.seqs[0].token_ids,
            std::vector<int32_t>(b.begin() + 32, b.end()));
  EXPECT_EQ(out.scheduled[0].num_cached_tokens, 32);
  d.RunToCompletion();
  EXPECT_EQ(d.finished(2).num_cached_tokens, 32);
  EXPECT_EQ(d.output(2), Reference(b, 3));
  EXPECT_EQ(d.sched().kv_cache().prefix_hit_tokens(), 32);
}

TEST(ContinuousBatchingSchedulerTest,
     GeneratedTokensArePublishedForLaterRequests) {
  Driver d(Config(256, 8, 64, 4));
  const std::vector<int32_t> a = Prompt(6, 8);
  ASSERT_TRUE(d.Add(1, a, 10).ok());
  d.RunToCompletion();
  // Prompt + the first 7 outputs = 13 tokens: 3 full blocks were computed.
  std::vector<int32_t> b = a;
  const std::vector<int32_t> out_a = d.output(1);
  b.insert(b.end(), out_a.begin(), out_a.begin() + 7);
  b.push_back(1);
  ASSERT_TRUE(d.Add(2, b, 2).ok());
  SchedulerOutput out = d.Step();
  EXPECT_EQ(out.scheduled[0].num_cached_tokens, 12);
  d.RunToCompletion();
  EXPECT_EQ(d.output(2), Reference(b, 2));
}

TEST(ContinuousBatchingSchedulerTest, OptedOutRequestsNeitherLookUpNorPublish) {
  Driver d(Config(256, 8, 64, 4));
  const std::vector<int32_t> a = Prompt(20, 4);
  ASSERT_TRUE(d.Add(1, a, 2, /*disable_cache=*/true).ok());
  d.RunToCompletion();
  ASSERT_TRUE(d.Add(2, a, 2).ok());
  SchedulerOutput out = d.Step();
  EXPECT_EQ(out.plan.seqs[0].start_pos, 0);
  d.RunToCompletion();
  // Now published by request 2; an opted-out request still starts at 0.
  ASSERT_TRUE(d.Add(3, a, 2, /*disable_cache=*/true).ok());
  out = d.Step();
  EXPECT_EQ(out.plan.seqs[0].start_pos, 0);
  d.RunToCompletion();
  EXPECT_EQ(d.finished(3).num_cached_tokens, 0);
  EXPECT_EQ(d.output(3), Reference(a, 2));
  ASSERT_TRUE(d.Add(4, a, 2).ok());
  out = d.Step();
  EXPECT_EQ(out.plan.seqs[0].start_pos, 16);
}

TEST(ContinuousBatchingSchedulerTest, AbortFreesBlocksAtOnce) {
  Driver d(Config(256, 8, 64, 4));
  ASSERT_TRUE(d.Add(1, Prompt(30, 1), 50, /*disable_cache=*/true).ok());
  ASSERT_TRUE(d.Add(2, Prompt(10, 2), 50).ok());
  d.Step();
  d.Step();
  const KVCacheManager& kv = d.sched().kv_cache();
  const int32_t free_before = kv.num_free_blocks();
  ASSERT_TRUE(d.sched().Abort(1));
  EXPECT_EQ(kv.num_free_blocks(), free_before + kv.NumBlocksFor(32));
  EXPECT_EQ(d.sched().Get(1), nullptr);
  EXPECT_FALSE(d.sched().Abort(1));
  // Aborted between Schedule and Update: its token is ignored.
  SchedulerOutput out = d.sched().Schedule();
  ASSERT_TRUE(d.sched().Abort(2));
  EXPECT_TRUE(kv.AllBlocksFree());
  EXPECT_EQ(kv.num_requests(), 0);
  auto finished = d.sched().Update({SampledToken{2, 5, FinishReason::kNone}});
  ASSERT_TRUE(finished.ok());
  EXPECT_TRUE(finished->empty());
  EXPECT_FALSE(d.sched().HasUnfinished());
}

TEST(ContinuousBatchingSchedulerTest, AbortRemovesAWaitingRequest) {
  Driver d(Config(256, 8, 64, 4));
  ASSERT_TRUE(d.Add(1, Prompt(5, 1), 5).ok());
  EXPECT_EQ(d.sched().num_waiting(), 1);
  ASSERT_TRUE(d.sched().Abort(1));
  EXPECT_EQ(d.sched().num_waiting(), 0);
  EXPECT_TRUE(d.sched().Schedule().empty());
}

TEST(ContinuousBatchingSchedulerTest,
     FinishReasonFromTheStopCheckerEndsTheRequest) {
  Driver d(Config(256, 8, 64, 4));
  ASSERT_TRUE(d.Add(1, Prompt(5, 1), 50).ok());
  for (int i = 0; i < 10 && d.sched().HasUnfinished(); ++i) d.Step({{1, 3}});
  EXPECT_EQ(d.finished(1).reason, FinishReason::kStop);
  EXPECT_EQ(d.finished(1).num_output_tokens, 3);
  EXPECT_EQ(d.output(1), Reference(Prompt(5, 1), 3));
}

TEST(ContinuousBatchingSchedulerTest, RejectsRequestsThatCanNeverFit) {
  ContinuousBatchingScheduler s(Config(64, 8, /*num_blocks=*/4,
                                       /*block_size=*/4, /*max_model_len=*/32));
  SamplingParams p;
  p.max_tokens = 7;
  // 10 + 7 = 17 tokens, 16 of them fed back: exactly 4 blocks.
  EXPECT_TRUE(s.Add(1, Prompt(10, 1), &p).ok());
  p.max_tokens = 8;
  absl::Status st = s.Add(2, Prompt(10, 1), &p);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(st.message()).find("KV cache capacity"),
            std::string::npos)
      << st;
  p.max_tokens = 3;
  st = s.Add(3, Prompt(30, 1), &p);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(st.message()).find("max model length"),
            std::string::npos)
      << st;
  EXPECT_EQ(s.Add(4, {}, &p).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Add(1, Prompt(2, 1), &p).code(),
            absl::StatusCode::kAlreadyExists);
  // max_tokens unset: the cache capacity bounds the generation.
  EXPECT_TRUE(s.Add(5, Prompt(10, 1), nullptr).ok());
  EXPECT_EQ(s.Get(5)->max_total_len, 17);
}

TEST(ContinuousBatchingSchedulerTest, RejectsWhenTheWaitingQueueIsFull) {
  SchedulerConfig c = Config(64, 8, 64);
  c.max_waiting_requests = 2;
  ContinuousBatchingScheduler s(c);
  EXPECT_TRUE(s.Add(1, Prompt(3, 1), nullptr).ok());
  EXPECT_TRUE(s.Add(2, Prompt(3, 1), nullptr).ok());
  EXPECT_EQ(s.Add(3, Prompt(3, 1), nullptr).code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(ContinuousBatchingSchedulerTest, UpdateRejectsUnexpectedAndMissingTokens) {
  ContinuousBatchingScheduler s(Config(8, 8, 64));
  SamplingParams p;
  p.max_tokens = 5;
  ASSERT_TRUE(s.Add(1, Prompt(20, 1), &p).ok());
  SchedulerOutput out = s.Schedule();
  ASSERT_EQ(out.plan.seqs[0].output, StepOutput::kNone);
  EXPECT_EQ(s.Update({SampledToken{1, 3, FinishReason::kNone}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(s.Update({}).ok());
  s.Schedule();  // 8..16
  ASSERT_TRUE(s.Update({}).ok());
  out = s.Schedule();  // 16..20: samples
  ASSERT_EQ(out.plan.seqs[0].output, StepOutput::kLastLogits);
  EXPECT_EQ(s.Update({}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(s.Update({SampledToken{1, 3, FinishReason::kNone}}).ok());
  EXPECT_EQ(s.Get(1)->num_output_tokens(), 1);
}

// Random admissions, aborts, stops and preemptions; every finished output
// must match the reference and no block may leak.
void RandomAdmitAbortFinishPreempt(int32_t max_prefill_while_decoding) {
  std::mt19937 rng(2024);
  SchedulerConfig c = Config(20, 5, /*num_blocks=*/24, /*block_size=*/4);
  c.max_prefill_tokens_while_decoding = max_prefill_while_decoding;
  Driver d(c);
  absl::flat_hash_map<int64_t, std::pair<std::vector<int32_t>, int32_t>> reqs;
  absl::flat_hash_map<int64_t, int32_t> stop_at;
  std::vector<int64_t> aborted;
  int64_t next_id = 0;
  int total_preemptions = 0;
  for (int step = 0; step < 3000; ++step) {
    if (rng() % 3 == 0 && next_id < 600) {
      const int64_t id = next_id++;
      std::vector<int32_t> p =
          Prompt(1 + static_cast<int32_t>(rng() % 40),
                 static_cast<int32_t>(rng() % 6));  // shared prefixes
      const int32_t n = 1 + static_cast<int32_t>(rng() % 40);
      if (d.Add(id, p, n, rng() % 5 == 0).ok()) {
        reqs[id] = {p, n};
        if (rng() % 4 == 0) stop_at[id] = 1 + static_cast<int32_t>(rng() % n);
      }
    }
    if (rng() % 10 == 0 && next_id > 0) {
      const int64_t id = static_cast<int64_t>(rng() % next_id);
      if (d.sched().Abort(id)) {
        aborted.push_back(id);
        d.DropOutput(id);
      }
    }
    SchedulerOutput out = d.Step(stop_at);
    total_preemptions += static_cast<int>(out.preempted_seq_ids.size());
  }
  d.RunToCompletion(stop_at);
  EXPECT_GT(total_preemptions, 0);
  EXPECT_GT(aborted.size(), 0u);
  int checked = 0;
  for (const auto& [id, r] : reqs) {
    if (!d.is_finished(id)) continue;
    auto it = stop_at.find(id);
    const int32_t n = it != stop_at.end() ? it->second : r.second;
    ASSERT_EQ(d.output(id), Reference(r.first, n)) << "seq " << id;
    ++checked;
  }
  EXPECT_GT(checked, 100);
  const KVCacheManager& kv = d.sched().kv_cache();
  EXPECT_TRUE(kv.AllBlocksFree());
  EXPECT_EQ(kv.num_requests(), 0);
  for (int32_t b = 0; b < kv.num_blocks(); ++b) {
    EXPECT_EQ(kv.pool().ref_count(b), 0);
  }
}

TEST(ContinuousBatchingSchedulerTest,
     RandomAdmitAbortFinishPreemptNeverLeaksBlocks) {
  RandomAdmitAbortFinishPreempt(0);
}

TEST(ContinuousBatchingSchedulerTest,
     RandomWithAPrefillBudgetWhileDecodingNeverLeaksBlocks) {
  RandomAdmitAbortFinishPreempt(3);
}

TEST(ContinuousBatchingSchedulerTest,
     WhileDecodingALongPromptIsChunkedWithinThePrefillBudget) {
  SchedulerConfig c = Config(/*budget=*/256, /*max_seqs=*/8, 256);
  c.max_prefill_tokens_while_decoding = 8;
  Driver d(c);
  ASSERT_TRUE(d.Add(1, Prompt(5, 1), 100).ok());
  ASSERT_TRUE(d.Add(2, Prompt(3, 2), 100).ok());
  SchedulerOutput first = d.Step();  // nothing decodes yet: both fit in 8
  EXPECT_EQ(first.num_prefill_tokens, 8);
  EXPECT_EQ(first.num_decode_tokens, 0);

  const std::vector<int32_t> long_prompt = Prompt(50, 9);
  const std::vector<int32_t> next_prompt = Prompt(20, 4);
  ASSERT_TRUE(d.Add(3, long_prompt, 2).ok());
  ASSERT_TRUE(d.Add(4, next_prompt, 2).ok());
  int32_t prefilled = 0;  // of seqs 3 then 4, first come first served
  int steps = 0;
  while (prefilled < 70) {
    SchedulerOutput out = d.Step();
    ++steps;
    ASSERT_LT(steps, 100);
    // Both decodes, one token each, every step.
    for (int64_t id : {1, 2}) {
      const ScheduledSequence* s = Find(out, id);
      ASSERT_NE(s, nullptr) << "step " << steps;
      EXPECT_EQ(s->num_new_tokens, 1);
      EXPECT_TRUE(s->decode);
    }
    // Seqs 3 / 4 also decode once their prompt is done.
    EXPECT_GE(out.num_decode_tokens, 2);
    const int32_t prompt_tokens =
        (Find(out, 3) != nullptr && !Find(out, 3)->decode
             ? Find(out, 3)->num_new_tokens
             : 0) +
        (Find(out, 4) != nullptr && !Find(out, 4)->decode
             ? Find(out, 4)->num_new_tokens
             : 0);
    EXPECT_EQ(out.num_prefill_tokens, prompt_tokens);
    // The prefill budget is used in full until the prompts are done.
    EXPECT_EQ(prompt_tokens, std::min(8, 70 - prefilled));
    if (prefilled < 50) {
      // Seq 4 waits until seq 3's prompt is done, except for what is left
      // of the budget in seq 3's last chunk.
      const ScheduledSequence* s4 = Find(out, 4);
      if (s4 != nullptr) {
        EXPECT_EQ(Find(out, 3)->num_new_tokens + s4->num_new_tokens, 8);
      }
    }
    prefilled += prompt_tokens;
  }
  EXPECT_EQ(steps, (70 + 7) / 8);
  d.RunToCompletion();
  EXPECT_EQ(d.output(3), Reference(long_prompt, 2));
  EXPECT_EQ(d.output(4), Reference(next_prompt, 2));
  EXPECT_EQ(d.output(1), Reference(Prompt(5, 1), 100));
}

TEST(ContinuousBatchingSchedulerTest,
     PrefillProgressesEveryStepWhenDecodesFillMostOfTheBudget) {
  // 10 decodes in a 12-token step: the prompt still gets the 2 left.
  SchedulerConfig c = Config(/*budget=*/12, /*max_seqs=*/16, 256);
  c.max_prefill_tokens_while_decoding = 8;
  Driver d(c);
  for (int64_t id = 0; id < 10; ++id) {
    ASSERT_TRUE(d.Add(id, Prompt(1, static_cast<int32_t>(id)), 200).ok());
  }
  EXPECT_EQ(d.Step().num_prefill_tokens, 8);  // nothing decodes: 8 prompts
  SchedulerOutput second = d.Step();            // 8 decodes, the last 2
  EXPECT_EQ(second.num_decode_tokens, 8);
  EXPECT_EQ(second.num_prefill_tokens, 2);
  const std::vector<int32_t> prompt = Prompt(30, 5);
  ASSERT_TRUE(d.Add(99, prompt, 1).ok());
  for (int step = 0; step < 15; ++step) {
    SchedulerOutput out = d.Step();
    EXPECT_EQ(out.num_decode_tokens, 10);
    const ScheduledSequence* s = Find(out, 99);
    ASSERT_NE(s, nullptr) << "step " << step;
    EXPECT_EQ(s->num_new_tokens, 2);
    EXPECT_EQ(s->start_pos, 2 * step);
  }
  EXPECT_EQ(d.output(99), Reference(prompt, 1));
}

// With nothing decoding, the first prompt in line goes in whole (within
// the step budget); the prompts behind it wait for the decode-time budget.
TEST(ContinuousBatchingSchedulerTest,
     WithoutDecodesTheFirstPromptGoesInWhole) {
  SchedulerConfig c = Config(/*budget=*/64, /*max_seqs=*/8, 256);
  c.max_prefill_tokens_while_decoding = 4;
  Driver d(c);
  const std::vector<int32_t> prompt = Prompt(100, 3);
  ASSERT_TRUE(d.Add(1, prompt, 3).ok());
  SchedulerOutput a = d.Step();
  EXPECT_EQ(a.num_prefill_tokens, 64);
  SchedulerOutput b = d.Step();
  EXPECT_EQ(b.num_prefill_tokens, 36);
  EXPECT_EQ(b.num_decode_tokens, 0);
  // Seq 1 decodes now: a new prompt gets 4 tokens a step.
  ASSERT_TRUE(d.Add(2, Prompt(10, 8), 1).ok());
  SchedulerOutput c2 = d.Step();
  EXPECT_EQ(c2.num_decode_tokens, 1);
  EXPECT_EQ(c2.num_prefill_tokens, 4);
  d.RunToCompletion();
  EXPECT_EQ(d.output(1), Reference(prompt, 3));
  EXPECT_EQ(d.output(2), Reference(Prompt(10, 8), 1));

  // A burst of three prompts on an idle scheduler: the first whole, the
  // next ones 4 tokens a step beside its decodes.
  for (int64_t id = 10; id < 13; ++id) {
    ASSERT_TRUE(d.Add(id, Prompt(20, static_cast<int32_t>(id)), 5).ok());
  }
  SchedulerOutput burst = d.Step();
  EXPECT_EQ(burst.num_prefill_tokens, 20);
  ASSERT_EQ(burst.scheduled.size(), 1u);
  EXPECT_EQ(burst.scheduled[0].seq_id, 10);
  SchedulerOutput next = d.Step();
  EXPECT_EQ(next.num_decode_tokens, 1);
  EXPECT_EQ(next.num_prefill_tokens, 4);
  EXPECT_EQ(Find(next, 11)->num_new_tokens, 4);
  d.RunToCompletion();
  for (int64_t id = 10; id < 13; ++id) {
    EXPECT_EQ(d.output(id), Reference(Prompt(20, static_cast<int32_t>(id)), 5));
  }
}

// Parallel samples: forks at the parent's first token share its full
// prompt blocks by reference count (no new block), then each recomputes
// the prompt's partial last block in one block of its own: one prompt's
// blocks + one tail block per sample. Aborting the samples gives their
// blocks back and leaves the shared ones to the parent.
TEST(ContinuousBatchingSchedulerTest, ForkedSamplesShareTheFullPromptBlocks) {
  for (int32_t prompt_len : {10, 8, 3}) {
    SCOPED_TRACE(prompt_len);
    ContinuousBatchingScheduler s(Config(256, 8, 64, 4));
    const KVCacheManager& kv = s.kv_cache();
    SamplingParams p;
    p.max_tokens = 8;
    const std::vector<int32_t> prompt = Prompt(prompt_len, 3);
    ASSERT_TRUE(s.Add(1, prompt, &p).ok());
    SchedulerOutput out = s.Schedule();
    ASSERT_EQ(out.scheduled.size(), 1u);
    const int32_t prompt_blocks = kv.NumBlocksFor(prompt_len);
    EXPECT_EQ(kv.num_free_blocks(), 64 - prompt_blocks);
    const std::vector<int32_t> parent(kv.BlockTable(1).begin(),
                                      kv.BlockTable(1).end());
    const int32_t shared = prompt_len / 4;
    for (int64_t child = 2; child <= 3; ++child) {
      auto forked = s.Fork(1, child, 5, &p);
      ASSERT_TRUE(forked.ok()) << forked.status();
      EXPECT_TRUE(*forked);
    }
    EXPECT_EQ(s.Fork(1, 2, 5, &p).status().code(),
              absl::StatusCode::kAlreadyExists);
    EXPECT_EQ(kv.num_free_blocks(), 64 - prompt_blocks);
    for (int32_t b = 0; b < shared; ++b) {
      EXPECT_EQ(kv.pool().ref_count(parent[b]), 3);
    }
    ASSERT_TRUE(s.Update({SampledToken{1, 4, FinishReason::kNone}}).ok());
    EXPECT_EQ(s.Fork(1, 4, 5, &p).status().code(),
              absl::StatusCode::kFailedPrecondition);

    SchedulerOutput next = s.Schedule();
    ASSERT_EQ(next.scheduled.size(), 3u);
    for (int64_t child = 2; child <= 3; ++child) {
      const ScheduledSequence* c = Find(next, child);
      ASSERT_NE(c, nullptr);
      EXPECT_EQ(c->start_pos, shared * 4);
      EXPECT_EQ(c->num_new_tokens, prompt_len - shared * 4 + 1);
      EXPECT_TRUE(c->samples);
      const SequencePlan& plan = next.plan.seqs[c - next.scheduled.data()];
      EXPECT_EQ(plan.output, StepOutput::kLastLogits);
      EXPECT_EQ(plan.token_ids.back(), 5);
      ASSERT_EQ(plan.block_table.size(), static_cast<size_t>(shared + 1));
      for (int32_t b = 0; b < shared; ++b) {
        EXPECT_EQ(plan.block_table[b], parent[b]);
      }
      EXPECT_EQ(std::count(parent.begin(), parent.end(),
                           plan.block_table[shared]),
                0);
    }
    // The parent's decode (position prompt_len) may need a block too.
    const int32_t parent_blocks = kv.NumBlocksFor(prompt_len + 1);
    EXPECT_EQ(kv.num_free_blocks(), 64 - parent_blocks - 2);
    ASSERT_TRUE(s.Abort(2));
    ASSERT_TRUE(s.Abort(3));
    EXPECT_EQ(kv.num_free_blocks(), 64 - parent_blocks);
    for (int32_t b = 0; b < shared; ++b) {
      EXPECT_EQ(kv.pool().ref_count(parent[b]), 1);
    }
    ASSERT_TRUE(s.Abort(1));
    EXPECT_EQ(kv.num_requests(), 0);
  }
}

// Prompt logprobs: every chunk of prompt tokens asks for all its logits,
// sampling or not; decodes ask for the last row only.
TEST(ContinuousBatchingSchedulerTest, PromptLogprobChunksAskForEveryRow) {
  ContinuousBatchingScheduler s(Config(4, 8, 64, 4));
  SamplingParams p;
  p.max_tokens = 3;
  p.prompt_logprobs = 2;
  ASSERT_TRUE(s.Add(1, Prompt(6, 1), &p, /*disable_prefix_cache=*/true).ok());
  SchedulerOutput a = s.Schedule();
  ASSERT_EQ(a.plan.seqs.size(), 1u);
  EXPECT_EQ(a.plan.seqs[0].output, StepOutput::kAllLogits);
  EXPECT_FALSE(a.scheduled[0].samples);
  ASSERT_TRUE(s.Update({}).ok());
  SchedulerOutput b = s.Schedule();
  EXPECT_EQ(b.plan.seqs[0].output, StepOutput::kAllLogits);
  EXPECT_EQ(b.plan.seqs[0].token_ids.size(), 2u);
  EXPECT_TRUE(b.scheduled[0].samples);
  ASSERT_TRUE(s.Update({SampledToken{1, 4, FinishReason::kNone}}).ok());
  SchedulerOutput c = s.Schedule();
  EXPECT_EQ(c.plan.seqs[0].output, StepOutput::kLastLogits);
}


// A structured output's forced tokens are fed as the decode step's drafts,
// with speculation off, within the length limit, and ahead of prompt
// lookup; a step without forced tokens decodes one token.
TEST(ContinuousBatchingSchedulerTest, ForcedTokensAreFedAsDrafts) {
  ContinuousBatchingScheduler s(Config(64, 8, 64, 4));
  SamplingParams p;
  p.max_tokens = 6;
  std::vector<int32_t> forced = {11, 12, 13, 14, 15, 16, 17, 18};
  std::vector<int32_t> asked;
  ForcedTokenSource source = [&](int32_t max, std::vector<int32_t>* out) {
    asked.push_back(max);
    out->assign(forced.begin(),
                forced.begin() + std::min<size_t>(forced.size(), max));
  };
  ASSERT_TRUE(s.Add(1, Prompt(5, 1), &p, /*disable_prefix_cache=*/true,
                    SpeculativeParams{0, 0, 0}, source)
                  .ok());
  SchedulerOutput a = s.Schedule();  // the prompt: no drafts
  EXPECT_EQ(a.scheduled[0].num_draft_tokens, 0);
  EXPECT_TRUE(asked.empty());
  ASSERT_TRUE(s.Update({SampledToken{1, 7, FinishReason::kNone}}).ok());
  // 5 prompt + 1 output; max_total_len 11: the step's token and at most
  // 4 drafts leave room for the token sampled after them.
  SchedulerOutput b = s.Schedule();
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0], 4);
  ASSERT_EQ(b.scheduled.size(), 1u);
  EXPECT_EQ(b.scheduled[0].num_draft_tokens, 4);
  // Forced tokens need no rows of their own: the last row samples the
  // token after them.
  EXPECT_TRUE(b.scheduled[0].forced_drafts);
  EXPECT_EQ(b.plan.seqs[0].output, StepOutput::kLastLogits);
  EXPECT_EQ(b.plan.seqs[0].token_ids,
            (std::vector<int32_t>{7, 11, 12, 13, 14}));
  SampledToken t{1, 20, FinishReason::kNone};
  t.num_accepted_drafts = 4;
  auto done = s.Update({t});
  ASSERT_TRUE(done.ok());
  // 5 + 1 + 4 + 1 = 11 tokens: the length limit finishes it.
  ASSERT_EQ(done->size(), 1u);
  EXPECT_EQ((*done)[0].reason, FinishReason::kLength);
}

// With logprobs the forced tokens are verified on their own rows (the
// logprobs need them).
TEST(ContinuousBatchingSchedulerTest, ForcedTokensWithLogprobsGetRows) {
  ContinuousBatchingScheduler s(Config(64, 8, 64, 4));
  SamplingParams p;
  p.max_tokens = 8;
  p.logprobs = 1;
  ForcedTokenSource source = [](int32_t, std::vector<int32_t>* out) {
    *out = {11, 12};
  };
  ASSERT_TRUE(s.Add(1, Prompt(5, 1), &p, true, SpeculativeParams{0, 0, 0},
                    source)
                  .ok());
  s.Schedule();
  ASSERT_TRUE(s.Update({SampledToken{1, 7, FinishReason::kNone}}).ok());
  SchedulerOutput b = s.Schedule();
  EXPECT_EQ(b.scheduled[0].num_draft_tokens, 2);
  EXPECT_FALSE(b.scheduled[0].forced_drafts);
  EXPECT_EQ(b.plan.seqs[0].output, StepOutput::kAllLogits);
}

TEST(ContinuousBatchingSchedulerTest, NoForcedTokensMeansOneTokenSteps) {
  ContinuousBatchingScheduler s(Config(64, 8, 64, 4));
  SamplingParams p;
  p.max_tokens = 4;
  int calls = 0;
  ForcedTokenSource none = [&](int32_t, std::vector<int32_t>* out) {
    ++calls;
    out->clear();
  };
  ASSERT_TRUE(s.Add(1, Prompt(5, 1), &p, true, SpeculativeParams{0, 0, 0},
                    none)
                  .ok());
  s.Schedule();
  ASSERT_TRUE(s.Update({SampledToken{1, 7, FinishReason::kNone}}).ok());
  SchedulerOutput b = s.Schedule();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(b.scheduled[0].num_draft_tokens, 0);
  EXPECT_EQ(b.plan.seqs[0].output, StepOutput::kLastLogits);
}

}  // namespace
}  // namespace inferd
