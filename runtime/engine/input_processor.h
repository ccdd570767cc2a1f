// The built-in input processors: text -> token ids with the model's
// tokenizer, special tokens, prompt prefixes, pair encoding for
// cross-encoders, EOS for decoder embedders, and truncation or a clear
// INVALID_ARGUMENT when an input is longer than the model takes.
// Immutable after construction; thread-safe.
#ifndef INFERD_RUNTIME_ENGINE_INPUT_PROCESSOR_H_
#define INFERD_RUNTIME_ENGINE_INPUT_PROCESSOR_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/engine/components.h"
#include "runtime/engine/prefill_scheduler.h"
#include "runtime/engine/requests.h"
#include "runtime/engine/workflow.h"
#include "runtime/loader/st_config.h"
#include "runtime/tokenizer/tokenizer.h"

namespace inferd {

// The built-in input processors: one tokenizer-driven implementation, told
// which tasks it prepares ("embed_tokenizer" embeds, "pair_tokenizer"
// reranks and classifies pairs, "prompt_tokenizer" tokenizes prompts, ...).
class TokenizingInputProcessor : public InputProcessor {
 public:
  enum TaskBit : unsigned {
    kEmbed = 1u << 0,
    kClassify = 1u << 1,
    kRerank = 1u << 2,
    kPrompt = 1u << 3,
  };
  // `tasks`: TaskBit flags.
  TokenizingInputProcessor(std::string name, unsigned tasks,
                           const Tokenizer* tokenizer,
                           InputProcessorOptions options);

  absl::string_view name() const override { return name_; }
  absl::StatusOr<std::vector<PrefillSequence>> ProcessEmbed(
      const EmbedParams& params) const override;
  absl::StatusOr<std::vector<PrefillSequence>> ProcessClassify(
      const ClassifyParams& params) const override;
  absl::StatusOr<std::vector<PrefillSequence>> ProcessRerank(
      const RerankParams& params) const override;
  absl::StatusOr<std::vector<int32_t>> ProcessPrompt(
      const GenerateParams& params) const override;

  const InputProcessorOptions& options() const { return options_; }

 private:
  // Enforces the length limit on ids already tokenized: truncates when
  // allowed (keeping a trailing EOS for decoder embedders), else
  // INVALID_ARGUMENT naming the input, its length and the limit.
  absl::Status FitLength(size_t index, bool truncate, bool left,
                         PrefillSequence* seq) const;
  absl::StatusOr<PrefillSequence> FromEncoding(const Encoding& e) const;
  // FAILED_PRECONDITION without a tokenizer (token-id-only tests).
  absl::Status NeedTokenizer() const;

  const std::string name_;
  const unsigned tasks_;
  const Tokenizer* tokenizer_;
  InputProcessorOptions options_;
};

// Decoder rerankers ("decoder_rerank_prompt"): each (query, document) pair
// as options.rerank_format's prefix + pair + suffix, tokenized apart without
// special tokens; a pair longer than the model takes is cut at its end when
// the request allows truncation. Reranks only.
std::unique_ptr<InputProcessor> NewDecoderRerankInput(
    const Tokenizer* tokenizer, InputProcessorOptions options);

}  // namespace inferd

#endif  // INFERD_RUNTIME_ENGINE_INPUT_PROCESSOR_H_
