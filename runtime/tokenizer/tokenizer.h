// Tokenizer: loads a Hugging Face tokenizer.json and encodes/decodes text
// id-for-id as the reference `tokenizers` library does (normalizer, added
// tokens, pre-tokenizer, model, post-processor, decoder, truncation).
// Immutable after load; thread-safe to share between threads.
#ifndef INFERD_RUNTIME_TOKENIZER_TOKENIZER_H_
#define INFERD_RUNTIME_TOKENIZER_TOKENIZER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "absl/types/span.h"
#include "runtime/tokenizer/encoding.h"

namespace inferd {

namespace tokenizer_internal {
class Normalizer;
class PreTokenizer;
class Model;
class PostProcessor;
class Decoder;
class AddedTokenMatcher;
class NormalizedString;
struct AddedToken;
}  // namespace tokenizer_internal

class Tokenizer {
 public:
  // INVALID_ARGUMENT for unreadable files, malformed JSON, a missing model
  // or an unknown component "type"; NOT_FOUND when the file is missing.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromFile(
      const std::string& path);
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromJson(
      absl::string_view json);

  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // INVALID_ARGUMENT when the text is not valid UTF-8.
  absl::StatusOr<Encoding> Encode(absl::string_view text,
                                  bool add_special_tokens) const;
  absl::StatusOr<Encoding> EncodePair(absl::string_view a, absl::string_view b,
                                      bool add_special_tokens) const;
  // Truncation is applied before the post-processor; room for the special
  // tokens it adds is reserved. INVALID_ARGUMENT when the strategy cannot
  // reach max_length.
  absl::StatusOr<Encoding> Encode(absl::string_view text,
                                  bool add_special_tokens,
                                  const TruncationParams& t) const;
  absl::StatusOr<Encoding> EncodePair(absl::string_view a, absl::string_view b,
                                      bool add_special_tokens,
                                      const TruncationParams& t) const;

  // INVALID_ARGUMENT when an id is out of range.
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids,
                                     bool skip_special_tokens) const;

  // Including added tokens (max id + 1).
  size_t vocab_size() const { return vocab_size_; }
  absl::optional<int32_t> TokenToId(absl::string_view token) const;
  // Empty when the id has no token.
  std::string IdToToken(int32_t id) const;
  bool IsSpecial(int32_t id) const { return special_ids_.contains(id); }
  // Special tokens the post-processor adds to a single text or a pair.
  int NumSpecialTokensToAdd(bool pair) const;

 private:
  Tokenizer();

  absl::Status EncodeSequence(absl::string_view text, int32_t type_id,
                              int32_t sequence_id, Encoding* out) const;
  void AppendPieceTokens(tokenizer_internal::NormalizedString piece,
                         int32_t type_id, int32_t sequence_id, Encoding* out,
                         absl::Status* status) const;
  // Tokenizes one pre-tokenized piece; `byte_map` applies the byte-level
  // alphabet first (offsets still point into the unmapped piece).
  absl::Status AppendModelTokens(
      const tokenizer_internal::NormalizedString& sub, bool byte_map,
      int32_t type_id, int32_t sequence_id, Encoding* out) const;
  absl::StatusOr<Encoding> EncodeImpl(absl::string_view a,
                                      const absl::string_view* b,
                                      bool add_special_tokens,
                                      const TruncationParams* t) const;

  std::unique_ptr<tokenizer_internal::Normalizer> normalizer_;
  std::unique_ptr<tokenizer_internal::PreTokenizer> pre_tokenizer_;
  std::unique_ptr<tokenizer_internal::Model> model_;
  std::unique_ptr<tokenizer_internal::PostProcessor> post_processor_;
  std::unique_ptr<tokenizer_internal::Decoder> decoder_;

  std::vector<tokenizer_internal::AddedToken> added_tokens_;
  absl::flat_hash_map<std::string, int32_t> added_token_to_id_;
  absl::flat_hash_map<int32_t, std::string> added_id_to_token_;
  absl::flat_hash_set<int32_t> special_ids_;
  // Added tokens matched on the raw text / on the normalized text.
  std::unique_ptr<tokenizer_internal::AddedTokenMatcher> raw_matcher_;
  std::unique_ptr<tokenizer_internal::AddedTokenMatcher> normalized_matcher_;
  size_t vocab_size_ = 0;
  // Token string of every id (added tokens take precedence), so encoding
  // does one indexed load per token.
  std::vector<std::string> id_to_token_;
  // The pre-tokenizer ends with the byte-level mapping, done at tokenize
  // time (see PreTokenizer::EndsWithByteMap).
  bool defer_byte_map_ = false;
};

}  // namespace inferd

#endif  // INFERD_RUNTIME_TOKENIZER_TOKENIZER_H_
