#include "runtime/gen/token_grammar.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "runtime/common/status_macros.h"
#include "runtime/gen/json_schema.h"

namespace inferd {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

}  // namespace

TokenVocabulary::TokenVocabulary(std::vector<std::string> token_bytes)
    : bytes_(std::move(token_bytes)) {
  // Build with per-node child lists, then flatten.
  struct Tmp {
    std::vector<std::pair<uint8_t, int32_t>> kids;
    std::vector<int32_t> tokens;
  };
  std::vector<Tmp> tmp(1);
  for (int32_t id = 0; id < static_cast<int32_t>(bytes_.size()); ++id) {
    int32_t node = 0;
    for (char ch : bytes_[id]) {
      const auto b = static_cast<uint8_t>(ch);
      int32_t next = -1;
      for (const auto& [label, target] : tmp[node].kids) {
        if (label == b) {
          next = target;
          break;
        }
      }
      if (next < 0) {
        next = static_cast<int32_t>(tmp.size());
        tmp[node].kids.push_back({b, next});
        tmp.emplace_back();
      }
      node = next;
    }
    if (node != 0) tmp[node].tokens.push_back(id);  // empty: never allowed
  }
  child_begin_.reserve(tmp.size() + 1);
  token_begin_.reserve(tmp.size() + 1);
  for (Tmp& t : tmp) {
    std::sort(t.kids.begin(), t.kids.end());
    child_begin_.push_back(static_cast<int32_t>(edge_label_.size()));
    token_begin_.push_back(static_cast<int32_t>(token_ids_.size()));
    for (const auto& [label, target] : t.kids) {
      edge_label_.push_back(label);
      edge_target_.push_back(target);
    }
    token_ids_.insert(token_ids_.end(), t.tokens.begin(), t.tokens.end());
  }
  child_begin_.push_back(static_cast<int32_t>(edge_label_.size()));
  token_begin_.push_back(static_cast<int32_t>(token_ids_.size()));
}

TokenGrammar::TokenGrammar(ByteDfa dfa,
                           std::shared_ptr<const TokenVocabulary> vocab)
    : dfa_(std::move(dfa)), vocab_(std::move(vocab)) {
  absl::MutexLock lock(&mu_);
  masks_.resize(dfa_.num_states());
}

const TokenMask& TokenGrammar::Mask(int32_t state) const {
  absl::MutexLock lock(&mu_);
  std::unique_ptr<TokenMask>& m = masks_[state];
  if (m == nullptr) m = std::make_unique<TokenMask>(Build(state));
  return *m;
}

TokenMask TokenGrammar::Build(int32_t state) const {
  const TokenVocabulary& v = *vocab_;
  TokenMask mask;
  mask.bits.assign((v.bytes_.size() + 63) / 64, 0);
  // Depth-first over (trie node, DFA state) pairs; a dead DFA transition
  // prunes the whole subtree.
  std::vector<std::pair<int32_t, int32_t>> stack = {{0, state}};
  while (!stack.empty()) {
    const auto [node, s] = stack.back();
    stack.pop_back();
    for (int32_t t = v.token_begin_[node]; t < v.token_begin_[node + 1]; ++t) {
      const int32_t id = v.token_ids_[t];
      mask.bits[id >> 6] |= uint64_t{1} << (id & 63);
      ++mask.count;
    }
    for (int32_t e = v.child_begin_[node]; e < v.child_begin_[node + 1]; ++e) {
      const int32_t next = dfa_.Next(s, v.edge_label_[e]);
      if (next != ByteDfa::kDead) stack.push_back({v.edge_target_[e], next});
    }
  }
  if (static_cast<int64_t>(mask.count) * TokenMask::kSparse <=
      static_cast<int64_t>(v.bytes_.size())) {
    mask.ids.reserve(mask.count);
    for (size_t w = 0; w < mask.bits.size(); ++w) {
      for (uint64_t b = mask.bits[w]; b != 0; b &= b - 1) {
        mask.ids.push_back(static_cast<int32_t>(w * 64) + __builtin_ctzll(b));
      }
    }
  }
  return mask;
}

GrammarConstraint::GrammarConstraint(std::shared_ptr<const TokenGrammar> grammar)
    : grammar_(std::move(grammar)), state_(grammar_->dfa().start()) {}

void GrammarConstraint::Mask(absl::Span<float> logits,
                             absl::Span<const int32_t> end_ids) {
  float* x = logits.data();
  const int32_t n = static_cast<int32_t>(logits.size());
  if (state_ == ByteDfa::kDead) {
    std::fill(logits.begin(), logits.end(), kNegInf);
    return;
  }
  const bool can_end = grammar_->dfa().accepting(state_);
  saved_.clear();
  for (int32_t id : end_ids) {
    saved_.push_back(id >= 0 && id < n ? x[id] : kNegInf);
  }
  const TokenMask& m = grammar_->Mask(state_);
  if (static_cast<int32_t>(m.ids.size()) == m.count) {
    // Few allowed tokens: keep them, clear the rest in one pass.
    const size_t keep = m.ids.size();
    saved_.resize(end_ids.size() + keep);
    for (size_t i = 0; i < keep; ++i) {
      saved_[end_ids.size() + i] = m.ids[i] < n ? x[m.ids[i]] : kNegInf;
    }
    std::fill(logits.begin(), logits.end(), kNegInf);
    for (size_t i = 0; i < keep; ++i) {
      if (m.ids[i] < n) x[m.ids[i]] = saved_[end_ids.size() + i];
    }
  } else {
    const int32_t words = (n + 63) / 64;
    for (int32_t w = 0; w < words; ++w) {
      const uint64_t bits =
          w < static_cast<int32_t>(m.bits.size()) ? m.bits[w] : 0;
      if (bits == ~uint64_t{0}) continue;
      const int32_t base = w * 64;
      const int32_t len = std::min(n - base, 64);
      float* xs = x + base;
      // Branchless, so the compiler can vectorize it.
      for (int32_t i = 0; i < len; ++i) {
        xs[i] = ((bits >> i) & 1) ? xs[i] : kNegInf;
      }
    }
  }
  for (size_t k = 0; k < end_ids.size(); ++k) {
    const int32_t id = end_ids[k];
    if (id < 0 || id >= n) continue;
    x[id] = can_end ? saved_[k] : kNegInf;
  }
}

void GrammarConstraint::Advance(int32_t token_id) {
  if (state_ == ByteDfa::kDead) return;
  const TokenVocabulary& v = grammar_->vocab();
  if (token_id < 0 || token_id >= v.size()) return;  // an end token
  for (char ch : v.bytes(token_id)) {
    state_ = grammar_->dfa().Next(state_, static_cast<uint8_t>(ch));
    if (state_ == ByteDfa::kDead) return;
  }
}

bool GrammarConstraint::Complete() const {
  if (state_ == ByteDfa::kDead) return false;
  return grammar_->dfa().accepting(state_) &&
         grammar_->Mask(state_).count == 0;
}

absl::StatusOr<std::string> ResponseFormatRegex(const ResponseFormat& format) {
  switch (format.type) {
    case ResponseFormat::Type::kText:
      return absl::InvalidArgumentError("response_format: no format is set");
    case ResponseFormat::Type::kRegex:
      return format.spec;
    case ResponseFormat::Type::kJsonSchema: {
      absl::StatusOr<std::string> r = CompileJsonSchema(format.spec);
      if (!r.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "response_format.json_schema: ", r.status().message()));
      }
      return r;
    }
    case ResponseFormat::Type::kChoice: {
      std::string alt;
      for (const std::string& c : format.choices) {
        if (!alt.empty()) alt.push_back('|');
        absl::StrAppend(&alt, "(", RegexEscape(c), ")");
      }
      return alt;
    }
  }
  return absl::InvalidArgumentError("response_format: unknown type");
}

GrammarCompiler::GrammarCompiler(
    std::function<std::shared_ptr<const TokenVocabulary>()> make_vocab,
    size_t max_cached)
    : make_vocab_(std::move(make_vocab)), max_cached_(max_cached) {}

absl::StatusOr<std::shared_ptr<const TokenGrammar>> GrammarCompiler::Compile(
    const ResponseFormat& format) {
  std::string key(1, static_cast<char>(format.type));
  key.push_back('\0');
  if (format.type == ResponseFormat::Type::kChoice) {
    for (const std::string& c : format.choices) {
      absl::StrAppend(&key, c.size(), ":", c);
    }
  } else {
    key += format.spec;
  }
  std::shared_ptr<const TokenVocabulary> vocab;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = lru_.begin(); it != lru_.end(); ++it) {
      if (it->first == key) {
        lru_.splice(lru_.begin(), lru_, it);
        return lru_.front().second;
      }
    }
    if (vocab_ == nullptr) vocab_ = make_vocab_();
    vocab = vocab_;
  }
  ASSIGN_OR_RETURN(std::string regex, ResponseFormatRegex(format));
  absl::StatusOr<ByteDfa> dfa = ByteDfa::Compile(regex);
  if (!dfa.ok()) {
    const char* field = format.type == ResponseFormat::Type::kRegex
                            ? "response_format.regex"
                        : format.type == ResponseFormat::Type::kChoice
                            ? "response_format.choice"
                            : "response_format.json_schema";
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", dfa.status().message()));
  }
  auto grammar =
      std::make_shared<const TokenGrammar>(*std::move(dfa), std::move(vocab));
  absl::MutexLock lock(&mu_);
  lru_.emplace_front(std::move(key), grammar);
  while (lru_.size() > max_cached_) lru_.pop_back();
  return grammar;
}

absl::StatusOr<std::unique_ptr<TokenConstraint>> GrammarCompiler::NewConstraint(
    const ResponseFormat& format) {
  ASSIGN_OR_RETURN(std::shared_ptr<const TokenGrammar> g, Compile(format));
  return std::make_unique<GrammarConstraint>(std::move(g));
}

}  // namespace inferd
