// Encoding: the result of tokenizing one text or text pair, plus truncation
// parameters. Plain value types; no threading concerns.
#ifndef INFERD_RUNTIME_TOKENIZER_ENCODING_H_
#define INFERD_RUNTIME_TOKENIZER_ENCODING_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace inferd {

struct Encoding {
  std::vector<int32_t> ids;
  std::vector<int32_t> type_ids;
  std::vector<std::string> tokens;  // Vocabulary strings.
  // Byte offsets [start, end) into the original input text (for pairs: into
  // the text the token came from). Template-added specials have (0, 0).
  std::vector<std::pair<uint32_t, uint32_t>> offsets;
  // 1 for tokens added by the post-processor and special added tokens.
  std::vector<uint8_t> special_tokens_mask;
  // 0/1 for the pair member a token came from; -1 for template specials.
  std::vector<int32_t> sequence_ids;

  size_t size() const { return ids.size(); }
};

enum class TruncationStrategy { kLongestFirst, kOnlyFirst, kOnlySecond };
enum class TruncationSide { kRight, kLeft };

struct TruncationParams {
  size_t max_length = 512;
  TruncationStrategy strategy = TruncationStrategy::kLongestFirst;
  TruncationSide side = TruncationSide::kRight;
};

}  // namespace inferd

#endif  // INFERD_RUNTIME_TOKENIZER_ENCODING_H_
