// WordPiece (greedy longest-match-first subword split, as in BERT) and
// WordLevel (whole-word lookup) models.
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/tokenizer/models.h"
#include "runtime/tokenizer/unicode_util.h"

namespace inferd {
namespace tokenizer_internal {
namespace {

absl::Status ReadDictVocab(const Json& j, const char* model, Vocab* vocab) {
  if (!Has(j, "vocab") || !j.at("vocab").is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tokenizer.json: ", model, " model needs a \"vocab\" object"));
  }
  for (const auto& kv : j.at("vocab").items()) {
    vocab->Add(kv.key(), kv.value().get<int32_t>());
  }
  return absl::OkStatus();
}

class WordPieceModel : public Model {
 public:
  absl::Status Init(const Json& j) {
    absl::Status s = ReadDictVocab(j, "WordPiece", &vocab_);
    if (!s.ok()) return s;
    prefix_ = GetString(j, "continuing_subword_prefix", "##");
    max_chars_ =
        static_cast<size_t>(GetInt(j, "max_input_chars_per_word", 100));
    unk_token_ = GetString(j, "unk_token", "[UNK]");
    if (auto id = vocab_.Find(unk_token_)) unk_id_ = *id;
    // Continuation pieces indexed without their prefix, so lookups need no
    // string building.
    for (size_t id = 0; id < vocab_.size(); ++id) {
      const std::string* t = vocab_.Token(static_cast<int32_t>(id));
      if (t != nullptr && !prefix_.empty() &&
          t->compare(0, prefix_.size(), prefix_) == 0) {
        continuation_[t->substr(prefix_.size())] = static_cast<int32_t>(id);
      }
    }
    return absl::OkStatus();
  }

  absl::Status Tokenize(absl::string_view word,
                        std::vector<ModelToken>* out) const override {
    if (word.empty()) return absl::OkStatus();
    const uint32_t n = static_cast<uint32_t>(word.size());
    if (CountChars(word) > max_chars_) return PushUnk(n, out);
    const size_t first = out->size();
    size_t start = 0;
    while (start < word.size()) {
      size_t end = word.size();
      int32_t found = -1;
      while (start < end) {
        const absl::string_view sub = word.substr(start, end - start);
        if (start == 0) {
          if (auto id = vocab_.Find(sub)) found = *id;
        } else if (prefix_.empty()) {
          if (auto id = vocab_.Find(sub)) found = *id;
        } else {
          auto it = continuation_.find(sub);
          if (it != continuation_.end()) found = it->second;
        }
        if (found >= 0) break;
        // Step back one character.
        --end;
        while (end > start &&
               (static_cast<unsigned char>(word[end]) & 0xC0) == 0x80) {
          --end;
        }
      }
      if (found < 0) {
        out->resize(first);
        return PushUnk(n, out);
      }
      out->push_back(
          {found, static_cast<uint32_t>(start), static_cast<uint32_t>(end)});
      start = end;
    }
    return absl::OkStatus();
  }

  absl::optional<int32_t> TokenToId(absl::string_view token) const override {
    return vocab_.Find(token);
  }
  const std::string* IdToToken(int32_t id) const override {
    return vocab_.Token(id);
  }
  size_t VocabSize() const override { return vocab_.size(); }

 private:
  absl::Status PushUnk(uint32_t n, std::vector<ModelToken>* out) const {
    if (unk_id_ < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "WordPiece: unknown token \"", unk_token_, "\" is not in the vocab"));
    }
    out->push_back({unk_id_, 0, n});
    return absl::OkStatus();
  }

  Vocab vocab_;
  absl::flat_hash_map<std::string, int32_t> continuation_;
  std::string prefix_;
  std::string unk_token_;
  size_t max_chars_ = 100;
  int32_t unk_id_ = -1;
};

class WordLevelModel : public Model {
 public:
  absl::Status Init(const Json& j) {
    absl::Status s = ReadDictVocab(j, "WordLevel", &vocab_);
    if (!s.ok()) return s;
    unk_token_ = GetString(j, "unk_token", "<unk>");
    if (auto id = vocab_.Find(unk_token_)) unk_id_ = *id;
    return absl::OkStatus();
  }
  absl::Status Tokenize(absl::string_view word,
                        std::vector<ModelToken>* out) const override {
    if (word.empty()) return absl::OkStatus();
    const uint32_t n = static_cast<uint32_t>(word.size());
    if (auto id = vocab_.Find(word)) {
      out->push_back({*id, 0, n});
    } else if (unk_id_ >= 0) {
      out->push_back({unk_id_, 0, n});
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "WordLevel: unknown token \"", unk_token_, "\" is not in the vocab"));
    }
    return absl::OkStatus();
  }
  absl::optional<int32_t> TokenToId(absl::string_view token) const override {
    return vocab_.Find(token);
  }
  const std::string* IdToToken(int32_t id) const override {
    return vocab_.Token(id);
  }
  size_t VocabSize() const override { return vocab_.size(); }

 private:
  Vocab vocab_;
  std::string unk_token_;
  int32_t unk_id_ = -1;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> MakeWordPieceModel(const Json& j) {
  auto m = std::make_unique<WordPieceModel>();
  absl::Status s = m->Init(j);
  if (!s.ok()) return s;
  return std::unique_ptr<Model>(std::move(m));
}

absl::StatusOr<std::unique_ptr<Model>> MakeWordLevelModel(const Json& j) {
  auto m = std::make_unique<WordLevelModel>();
  absl::Status s = m->Init(j);
  if (!s.ok()) return s;
  return std::unique_ptr<Model>(std::move(m));
}

}  // namespace tokenizer_internal
}  // namespace inferd
