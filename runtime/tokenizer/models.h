// Tokenization models of tokenizer.json: BPE (merges by rank, byte fallback,
// word cache), WordPiece (greedy longest-match-first), WordLevel and Unigram
// (Viterbi over the piece lattice). A model turns one pre-tokenized piece
// into token ids with byte offsets inside that piece.
// Immutable after construction and thread-safe (the BPE word cache is
// internally synchronized).
#ifndef INFERD_RUNTIME_TOKENIZER_MODELS_H_
#define INFERD_RUNTIME_TOKENIZER_MODELS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "runtime/tokenizer/json_util.h"

namespace inferd {
namespace tokenizer_internal {

struct ModelToken {
  int32_t id;
  uint32_t start;  // Byte offsets into the piece given to Tokenize.
  uint32_t end;
};

class Model {
 public:
  virtual ~Model() = default;
  // Appends the tokens of `piece` to `out`. Fails only when the model cannot
  // represent the piece (no unknown token configured).
  virtual absl::Status Tokenize(absl::string_view piece,
                                std::vector<ModelToken>* out) const = 0;
  virtual absl::optional<int32_t> TokenToId(absl::string_view token) const = 0;
  // Null when `id` is not in the model's vocabulary.
  virtual const std::string* IdToToken(int32_t id) const = 0;
  // Max id + 1.
  virtual size_t VocabSize() const = 0;
};

// A string -> id vocabulary with its reverse table.
class Vocab {
 public:
  void Add(std::string token, int32_t id);
  absl::optional<int32_t> Find(absl::string_view token) const {
    auto it = map_.find(token);
    if (it == map_.end()) return absl::nullopt;
    return it->second;
  }
  const std::string* Token(int32_t id) const {
    if (id < 0 || static_cast<size_t>(id) >= tokens_.size() || !present_[id]) {
      return nullptr;
    }
    return &tokens_[id];
  }
  size_t size() const { return tokens_.size(); }

 private:
  absl::flat_hash_map<std::string, int32_t> map_;
  std::vector<std::string> tokens_;
  std::vector<bool> present_;
};

// Builds the model from tokenizer.json's "model" object. A missing "type" is
// inferred from the fields present, as the reference loader does.
absl::StatusOr<std::unique_ptr<Model>> MakeModel(const Json& j);

absl::StatusOr<std::unique_ptr<Model>> MakeBpeModel(const Json& j);
absl::StatusOr<std::unique_ptr<Model>> MakeWordPieceModel(const Json& j);
absl::StatusOr<std::unique_ptr<Model>> MakeWordLevelModel(const Json& j);
absl::StatusOr<std::unique_ptr<Model>> MakeUnigramModel(const Json& j);

}  // namespace tokenizer_internal
}  // namespace inferd

#endif  // INFERD_RUNTIME_TOKENIZER_MODELS_H_
