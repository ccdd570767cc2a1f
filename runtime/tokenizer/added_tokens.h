// Added tokens (special or not) and the leftmost-longest matcher that splits
// them out of the text before the model runs, honouring lstrip, rstrip and
// single_word. Immutable after construction; thread-safe.
#ifndef INFERD_RUNTIME_TOKENIZER_ADDED_TOKENS_H_
#define INFERD_RUNTIME_TOKENIZER_ADDED_TOKENS_H_

#include <bitset>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "runtime/tokenizer/normalized_string.h"

namespace inferd {
namespace tokenizer_internal {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
  bool normalized = false;
};

// One piece of a split: `token` is the index into the matcher's token list
// for an added token, or -1 for ordinary text.
struct AddedSplit {
  Range range;
  int token;
};

class AddedTokenMatcher {
 public:
  // `patterns[i]` is what to look for in the text for `tokens[i]`.
  AddedTokenMatcher(std::vector<std::string> patterns,
                    std::vector<AddedToken> tokens);
  bool empty() const { return tokens_.empty(); }
  const AddedToken& token(int i) const { return tokens_[i]; }
  // Covering, ordered split of `text` into added tokens and the rest.
  std::vector<AddedSplit> Split(absl::string_view text) const;

 private:
  // Longest pattern starting at `pos`: (pattern index, length) or (-1, 0).
  std::pair<int, size_t> LongestAt(absl::string_view text, size_t pos) const;

  std::vector<AddedToken> tokens_;
  absl::flat_hash_map<uint64_t, uint32_t> edges_;  // (node << 8 | byte) -> node
  std::vector<int> terminal_;                      // Node -> pattern or -1.
  std::bitset<256> first_bytes_;
};

}  // namespace tokenizer_internal
}  // namespace inferd

#endif  // INFERD_RUNTIME_TOKENIZER_ADDED_TOKENS_H_
