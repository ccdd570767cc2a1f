// IncrementalDecoder: streaming detokenization for generation. Each Push
// returns only the newly completed text, holding back output while the tail
// is an incomplete UTF-8 / byte-fallback sequence; the concatenation of all
// deltas plus Flush equals Decode of all pushed ids.
// Not thread-safe; one per request. The Tokenizer must outlive it.
#ifndef INFERD_RUNTIME_TOKENIZER_INCREMENTAL_DECODER_H_
#define INFERD_RUNTIME_TOKENIZER_INCREMENTAL_DECODER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "runtime/tokenizer/tokenizer.h"

namespace inferd {

class IncrementalDecoder {
 public:
  // `prompt_ids` gives context (leading spaces, merges) for the first
  // generated tokens; it is never emitted.
  IncrementalDecoder(const Tokenizer& tok, bool skip_special_tokens,
                     absl::Span<const int32_t> prompt_ids = {});

  // Returns the new text delta (possibly empty). Ids the tokenizer cannot
  // decode are dropped.
  std::string Push(int32_t id);
  // Whatever is still held back at the end.
  std::string Flush();

 private:
  std::string DecodeRange(size_t begin, size_t end) const;

  const Tokenizer& tok_;
  bool skip_special_tokens_;
  std::vector<int32_t> ids_;
  size_t prefix_offset_ = 0;  // Start of the decoding window.
  size_t read_offset_ = 0;    // Ids before this are emitted.
};

}  // namespace inferd

#endif  // INFERD_RUNTIME_TOKENIZER_INCREMENTAL_DECODER_H_
