// Shared setup of the GenerateEngine tests: the 8-word vocabulary and its
// tokenizer, the engine built from the standard components (prompt
// tokenizer, continuous-batching scheduler, sampler) around a fake
// StepRunner, and BigramRunner, a fake paged model whose logits depend on
// the last two tokens as read back from its KV cache blocks. Header-only;
// the runners are used on the engine loop thread only.
#ifndef INFERD_TESTS_RUNTIME_ENGINE_GENERATE_TEST_UTIL_H_
#define INFERD_TESTS_RUNTIME_ENGINE_GENERATE_TEST_UTIL_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/engine/generate_engine.h"
#include "runtime/engine/input_processor.h"
#include "runtime/gen/sampler.h"
#include "runtime/gen/scheduler.h"
#include "runtime/tokenizer/tokenizer.h"

namespace inferd {
namespace testing_internal {

inline constexpr int32_t kVocab = 8;
inline constexpr int32_t kEos = 1;

// Ids 0..7 as whole words: <unk> </s> a b c d e f.
inline std::unique_ptr<Tokenizer> WordTokenizer() {
  auto t = Tokenizer::FromJson(R"({
    "model": {"type": "WordLevel", "unk_token": "<unk>",
              "vocab": {"<unk>": 0, "</s>": 1, "a": 2, "b": 3, "c": 4,
                        "d": 5, "e": 6, "f": 7}},
    "pre_tokenizer": {"type": "WhitespaceSplit"}})");
  EXPECT_TRUE(t.ok()) << t.status();
  return std::move(t).value();
}

// A GenerateEngine over `runner` with `options` (vocab_size and
// eos_token_ids are set here; options.scheduler must be filled) and the
// prompt tokenizer over `tokenizer` with `io` (max_input_tokens set to the
// scheduler's max_model_len).
inline std::unique_ptr<GenerateEngine> MakeEngine(
    const Tokenizer* tokenizer, GenerateEngineOptions options,
    std::unique_ptr<StepRunner> runner, InputProcessorOptions io = {},
    std::unique_ptr<InputProcessor> input = nullptr) {
  options.vocab_size = kVocab;
  options.eos_token_ids = {kEos};
  io.max_input_tokens = options.scheduler.max_model_len;
  GenerateComponents c;
  c.input = input != nullptr
                ? std::move(input)
                : std::make_unique<TokenizingInputProcessor>(
                      "prompt_tokenizer", TokenizingInputProcessor::kPrompt,
                      tokenizer, std::move(io));
  c.scheduler = std::make_unique<ContinuousBatchingScheduler>(options.scheduler);
  c.sampler = std::make_unique<Sampler>(kVocab);
  return std::make_unique<GenerateEngine>(std::move(options), tokenizer,
                                          std::move(c), std::move(runner));
}

// The favourite next token after (previous, last): falls into 6-token
// cycles after a short transient, so prompt lookup finds drafts.
inline constexpr int32_t kBigramTable[8][8] = {
    {5, 5, 2, 4, 6, 5, 5, 4}, {5, 4, 6, 3, 6, 3, 4, 3},
    {2, 6, 4, 6, 7, 6, 3, 4}, {2, 7, 2, 7, 4, 5, 6, 2},
    {4, 5, 4, 6, 7, 3, 6, 5}, {5, 6, 4, 2, 6, 2, 2, 7},
    {5, 7, 7, 7, 2, 6, 5, 4}, {3, 7, 4, 7, 2, 3, 6, 3},
};

// The model's logits after (previous, last).
inline std::vector<float> BigramLogits(int32_t prev, int32_t last) {
  std::vector<float> l(kVocab);
  l[0] = -4.0f;
  l[kEos] = -3.0f;
  for (int32_t j = 2; j < kVocab; ++j) {
    l[j] = 0.3f * static_cast<float>((j * 5 + prev + 2 * last) % 4);
  }
  l[kBigramTable[prev][last]] = 3.0f;
  return l;
}

// A fake paged model: each plan's tokens are written into the slots of its
// block table (its "KV cache"), and the tokens before them are read back
// from there, so a wrong block table, a block shared where it should not
// be, or rejected drafts left in place change the answers. Answers
// kLastLogits and kAllLogits (a row per new token) with BigramLogits of
// each position; counts its calls.
class BigramRunner : public StepRunner {
 public:
  BigramRunner(std::atomic<int64_t>* calls, int32_t num_blocks,
               int32_t block_size)
      : calls_(calls),
        block_size_(block_size),
        slots_(static_cast<size_t>(num_blocks) * block_size, -1) {}

  absl::StatusOr<BatchResult> Execute(const BatchPlan& plan) override {
    calls_->fetch_add(1);
    BatchResult r;
    for (const SequencePlan& s : plan.seqs) {
      const int32_t end =
          s.start_pos + static_cast<int32_t>(s.token_ids.size());
      EXPECT_GE(static_cast<int64_t>(s.block_table.size()) * block_size_, end);
      auto slot = [&](int32_t pos) -> int32_t& {
        return slots_[static_cast<size_t>(s.block_table[pos / block_size_]) *
                          block_size_ +
                      pos % block_size_];
      };
      for (int32_t j = 0; j < static_cast<int32_t>(s.token_ids.size()); ++j) {
        slot(s.start_pos + j) = s.token_ids[j];
      }
      SequenceResult out;
      out.seq_id = s.seq_id;
      out.output = s.output;
      int32_t first = end;
      if (s.output == StepOutput::kLastLogits) first = end - 1;
      if (s.output == StepOutput::kAllLogits) first = s.start_pos;
      out.rows = end - first;
      out.cols = kVocab;
      for (int32_t pos = first; pos < end; ++pos) {
        const std::vector<float> l =
            BigramLogits(pos > 0 ? slot(pos - 1) : 0, slot(pos));
        out.values.insert(out.values.end(), l.begin(), l.end());
      }
      r.seqs.push_back(std::move(out));
    }
    return r;
  }

 private:
  std::atomic<int64_t>* calls_;
  const int32_t block_size_;
  std::vector<int32_t> slots_;  // token id per KV slot; engine thread only
};

}  // namespace testing_internal
}  // namespace inferd

#endif  // INFERD_TESTS_RUNTIME_ENGINE_GENERATE_TEST_UTIL_H_
