// Normalizers of the tokenizer.json pipeline (NFC/NFD/NFKC/NFKD, Lowercase,
// Strip, StripAccents, BertNormalizer, Replace, Prepend, Precompiled, Nmt,
// ByteLevel, Sequence). Each rewrites a NormalizedString in place and keeps
// its alignment map. Immutable after construction; thread-safe.
#ifndef INFERD_RUNTIME_TOKENIZER_NORMALIZERS_H_
#define INFERD_RUNTIME_TOKENIZER_NORMALIZERS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "runtime/tokenizer/json_util.h"
#include "runtime/tokenizer/normalized_string.h"

namespace inferd {
namespace tokenizer_internal {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void Normalize(NormalizedString* s) const = 0;
};

// Builds a normalizer from its tokenizer.json object; INVALID_ARGUMENT for an
// unknown "type" or malformed fields.
absl::StatusOr<std::unique_ptr<Normalizer>> MakeNormalizer(const Json& j);

}  // namespace tokenizer_internal
}  // namespace inferd

#endif  // INFERD_RUNTIME_TOKENIZER_NORMALIZERS_H_
