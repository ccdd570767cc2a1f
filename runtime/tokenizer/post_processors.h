// Post-processors of tokenizer.json (TemplateProcessing, BertProcessing,
// RobertaProcessing, ByteLevel, Sequence): they add special tokens, set type
// ids and adjust offsets after the model ran. Immutable; thread-safe.
#ifndef INFERD_RUNTIME_TOKENIZER_POST_PROCESSORS_H_
#define INFERD_RUNTIME_TOKENIZER_POST_PROCESSORS_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/tokenizer/encoding.h"
#include "runtime/tokenizer/json_util.h"

namespace inferd {
namespace tokenizer_internal {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  // Number of special tokens Process adds for a single text or a pair.
  virtual size_t AddedTokens(bool pair) const = 0;
  // Rewrites the list of encodings (one per input text); processors that
  // add the template merge them into one.
  virtual void Process(std::vector<Encoding>* encodings,
                       bool add_special_tokens) const = 0;
};

absl::StatusOr<std::unique_ptr<PostProcessor>> MakePostProcessor(const Json& j);

// Concatenates all of `encodings` into one.
Encoding MergeEncodings(std::vector<Encoding>* encodings);

}  // namespace tokenizer_internal
}  // namespace inferd

#endif  // INFERD_RUNTIME_TOKENIZER_POST_PROCESSORS_H_
