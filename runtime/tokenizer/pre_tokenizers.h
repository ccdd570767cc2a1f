// Pre-tokenizers of the tokenizer.json pipeline (ByteLevel, Metaspace,
// BertPreTokenizer, Whitespace, WhitespaceSplit, Split, Digits, Punctuation,
// CharDelimiterSplit, Sequence): they cut normalized text into pieces the
// model tokenizes independently. Immutable after construction; thread-safe.
#ifndef INFERD_RUNTIME_TOKENIZER_PRE_TOKENIZERS_H_
#define INFERD_RUNTIME_TOKENIZER_PRE_TOKENIZERS_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/tokenizer/json_util.h"
#include "runtime/tokenizer/normalized_string.h"

namespace inferd {
namespace tokenizer_internal {

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces `pieces` by their sub-pieces, in order.
  virtual void PreTokenize(std::vector<NormalizedString>* pieces) const = 0;

  // True when the last step maps every byte to the byte-level alphabet
  // (ByteLevel). PreTokenizeUnmapped then does everything but that mapping,
  // which the caller applies itself (cheaper than keeping per-byte
  // alignments for the mapped text).
  virtual bool EndsWithByteMap() const { return false; }
  virtual void PreTokenizeUnmapped(
      std::vector<NormalizedString>* pieces) const {
    PreTokenize(pieces);
  }
};

absl::StatusOr<std::unique_ptr<PreTokenizer>> MakePreTokenizer(const Json& j);

// The GPT-2 pre-tokenization regex.
extern const char kGpt2Pattern[];

}  // namespace tokenizer_internal
}  // namespace inferd

#endif  // INFERD_RUNTIME_TOKENIZER_PRE_TOKENIZERS_H_
