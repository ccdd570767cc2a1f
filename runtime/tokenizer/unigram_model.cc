// Unigram language-model tokenization (Kudo 2018): the segmentation with the
// highest total piece log-probability, found by Viterbi over the lattice of
// vocabulary pieces; characters no piece covers become the unknown piece
// (consecutive unknowns fused) or byte-fallback pieces.
#include <cstdio>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/tokenizer/models.h"
#include "runtime/tokenizer/unicode_util.h"

namespace inferd {
namespace tokenizer_internal {
namespace {

constexpr double kUnkPenalty = 10.0;

class UnigramModel : public Model {
 public:
  absl::Status Init(const Json& j) {
    if (!Has(j, "vocab") || !j.at("vocab").is_array()) {
      return absl::InvalidArgumentError(
          "tokenizer.json: Unigram model needs a \"vocab\" array");
    }
    const Json& v = j.at("vocab");
    scores_.reserve(v.size());
    nodes_.push_back(-1);  // Root.
    double min_score = std::numeric_limits<double>::infinity();
    int32_t id = 0;
    for (const Json& e : v) {
      if (!e.is_array() || e.size() != 2) {
        return absl::InvalidArgumentError(
            "tokenizer.json: Unigram vocab entries must be [piece, score]");
      }
      const std::string piece = e[0].get<std::string>();
      const double score = e[1].get<double>();
      vocab_.Add(piece, id);
      scores_.push_back(score);
      min_score = std::min(min_score, score);
      InsertTrie(piece, id);
      ++id;
    }
    unk_score_ = (scores_.empty() ? 0.0 : min_score) - kUnkPenalty;
    if (Has(j, "unk_id")) {
      unk_id_ = static_cast<int32_t>(GetInt(j, "unk_id", -1));
      if (unk_id_ < 0 || unk_id_ >= id) {
        return absl::InvalidArgumentError(
            "tokenizer.json: Unigram unk_id is out of range");
      }
    }
    byte_fallback_ = GetBool(j, "byte_fallback", false);
    if (byte_fallback_) {
      for (int b = 0; b < 256; ++b) {
        char buf[8];
        std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
        auto bid = vocab_.Find(buf);
        byte_ids_[b] = bid ? *bid : -1;
      }
    }
    return absl::OkStatus();
  }

  absl::Status Tokenize(absl::string_view s,
                        std::vector<ModelToken>* out) const override {
    if (s.empty()) return absl::OkStatus();
    struct Best {
      int32_t id = -1;
      double score = 0;
      int32_t start = -1;  // -1: not reached.
    };
    const size_t n = s.size();
    thread_local std::vector<Best> best_buffer;
    std::vector<Best>& best = best_buffer;
    best.assign(n + 1, Best());
    best[0].start = 0;
    size_t pos = 0;
    while (pos < n) {
      const size_t mblen =
          std::min(Utf8CharLen(static_cast<unsigned char>(s[pos])), n - pos);
      const double base = best[pos].score;
      bool has_single = false;
      // Walk the trie along s[pos..].
      uint32_t node = 0;
      for (size_t k = pos; k < n; ++k) {
        auto it = edges_.find(EdgeKey(node, static_cast<unsigned char>(s[k])));
        if (it == edges_.end()) break;
        node = it->second;
        const int32_t pid = nodes_[node];
        if (pid < 0) continue;
        const size_t end = k + 1;
        const double cand = base + scores_[pid];
        Best& b = best[end];
        if (b.start < 0 || cand > b.score) {
          b.score = cand;
          b.start = static_cast<int32_t>(pos);
          b.id = pid;
        }
        if (end - pos == mblen) has_single = true;
      }
      if (!has_single) {
        if (unk_id_ < 0) {
          return absl::InvalidArgumentError(
              "Unigram: text has a character outside the vocabulary and the "
              "model has no unk_id");
        }
        Best& b = best[pos + mblen];
        const double cand = base + unk_score_;
        if (b.start < 0 || cand > b.score) {
          b.score = cand;
          b.start = static_cast<int32_t>(pos);
          b.id = unk_id_;
        }
      }
      pos += mblen;
    }
    // Backtrack, fusing consecutive unknown pieces.
    thread_local std::vector<ModelToken> rev_buffer;
    std::vector<ModelToken>& rev = rev_buffer;
    rev.clear();
    size_t end = n;
    while (end > 0) {
      const Best& b = best[end];
      const size_t start = static_cast<size_t>(b.start);
      if (b.id == unk_id_ && !rev.empty() && rev.back().id == unk_id_) {
        rev.back().start = static_cast<uint32_t>(start);
      } else {
        rev.push_back(
            {b.id, static_cast<uint32_t>(start), static_cast<uint32_t>(end)});
      }
      end = start;
    }
    for (auto it = rev.rbegin(); it != rev.rend(); ++it) {
      ModelToken t = *it;
      const absl::string_view piece = s.substr(t.start, t.end - t.start);
      if (t.id != unk_id_) {
        out->push_back(t);
        continue;
      }
      // A (fused) unknown span: its own text may still be a piece.
      if (auto id = vocab_.Find(piece)) {
        t.id = *id;
        out->push_back(t);
        continue;
      }
      if (byte_fallback_) {
        bool all = true;
        for (unsigned char c : piece) all = all && byte_ids_[c] >= 0;
        if (all) {
          for (unsigned char c : piece)
            out->push_back({byte_ids_[c], t.start, t.end});
          continue;
        }
      }
      out->push_back(t);
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
  static uint64_t EdgeKey(uint32_t node, unsigned char c) {
    return (static_cast<uint64_t>(node) << 8) | c;
  }

  void InsertTrie(const std::string& piece, int32_t id) {
    uint32_t node = 0;
    for (unsigned char c : piece) {
      auto [it, inserted] = edges_.try_emplace(EdgeKey(node, c), 0);
      if (inserted) {
        it->second = static_cast<uint32_t>(nodes_.size());
        nodes_.push_back(-1);
      }
      node = it->second;
    }
    if (!piece.empty() && nodes_[node] < 0) nodes_[node] = id;
  }

  Vocab vocab_;
  std::vector<double> scores_;
  absl::flat_hash_map<uint64_t, uint32_t> edges_;
  std::vector<int32_t> nodes_;  // Piece id ending at each trie node, or -1.
  double unk_score_ = 0;
  int32_t unk_id_ = -1;
  bool byte_fallback_ = false;
  int32_t byte_ids_[256] = {};
};

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> MakeUnigramModel(const Json& j) {
  auto m = std::make_unique<UnigramModel>();
  absl::Status s = m->Init(j);
  if (!s.ok()) return s;
  return std::unique_ptr<Model>(std::move(m));
}

}  // namespace tokenizer_internal
}  // namespace inferd
