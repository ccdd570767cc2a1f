// Input processors of the prefill-only workflows: text -> token ids with the
// model's tokenizer, special tokens, prompt prefixes, pair encoding for
// cross-encoders, EOS for decoder embedders, and truncation or a clear
// INVALID_ARGUMENT when an input is longer than the model takes.
// Immutable after construction; thread-safe (run on the callers' threads so
// tokenization overlaps the engine's compute).
#ifndef INFERD_RUNTIME_ENGINE_INPUT_PROCESSOR_H_
#define INFERD_RUNTIME_ENGINE_INPUT_PROCESSOR_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/engine/prefill_scheduler.h"
#include "runtime/engine/requests.h"
#include "runtime/engine/workflow.h"
#include "runtime/loader/st_config.h"
#include "runtime/tokenizer/tokenizer.h"

namespace inferd {

struct InputProcessorOptions {
  int64_t max_input_tokens = 512;
  // Decoder embedders: make every input end with this id (EOS), as
  // gte-Qwen2 / e5-mistral style models are trained.
  std::optional<int32_t> append_eos;
  bool include_prompt_in_pooling = true;
  std::map<std::string, std::string> prompts;  // name -> prefix
  std::string default_prompt_name;
};

class InputProcessor {
 public:
  InputProcessor(const Tokenizer* tokenizer, InputProcessorOptions options);

  absl::StatusOr<std::vector<PrefillSequence>> ProcessEmbed(
      const EmbedParams& params) const;
  absl::StatusOr<std::vector<PrefillSequence>> ProcessClassify(
      const ClassifyParams& params) const;
  absl::StatusOr<std::vector<PrefillSequence>> ProcessRerank(
      const RerankParams& params) const;

  const InputProcessorOptions& options() const { return options_; }

 private:
  // Enforces the length limit on ids already tokenized: truncates when
  // allowed (keeping a trailing EOS for decoder embedders), else
  // INVALID_ARGUMENT naming the input, its length and the limit.
  absl::Status FitLength(size_t index, bool truncate, bool left,
                         PrefillSequence* seq) const;
  absl::StatusOr<PrefillSequence> FromEncoding(const Encoding& e) const;

  const Tokenizer* tokenizer_;
  InputProcessorOptions options_;
};

}  // namespace inferd

#endif  // INFERD_RUNTIME_ENGINE_INPUT_PROCESSOR_H_
