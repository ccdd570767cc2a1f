#include "runtime/tokenizer/models.h"

#include "absl/status/status.h"

namespace inferd {
namespace tokenizer_internal {

void Vocab::Add(std::string token, int32_t id) {
  if (id < 0) return;
  if (static_cast<size_t>(id) >= tokens_.size()) {
    tokens_.resize(id + 1);
    present_.resize(id + 1, false);
  }
  tokens_[id] = token;
  present_[id] = true;
  map_[std::move(token)] = id;
}

absl::StatusOr<std::unique_ptr<Model>> MakeModel(const Json& j) {
  if (!j.is_object()) {
    return absl::InvalidArgumentError(
        "tokenizer.json: model must be an object");
  }
  std::string type = TypeOf(j);
  if (type.empty()) {
    const bool list_vocab = Has(j, "vocab") && j.at("vocab").is_array();
    if (Has(j, "merges")) {
      type = "BPE";
    } else if (list_vocab) {
      type = "Unigram";
    } else if (Has(j, "continuing_subword_prefix") ||
               Has(j, "max_input_chars_per_word")) {
      type = "WordPiece";
    } else {
      type = "WordLevel";
    }
  }
  if (type == "BPE") return MakeBpeModel(j);
  if (type == "WordPiece") return MakeWordPieceModel(j);
  if (type == "WordLevel") return MakeWordLevelModel(j);
  if (type == "Unigram") return MakeUnigramModel(j);
  return UnknownType("model", type);
}

}  // namespace tokenizer_internal
}  // namespace inferd
