// Structured output: the token masks that keep a generation inside a
// response format. A ResponseFormat becomes a regular expression (JSON
// Schema via CompileJsonSchema, a choice list as an alternation of
// literals), then a ByteDfa; the tokens allowed at a DFA state are those
// whose bytes the DFA can walk from it without dying, found by walking a
// byte trie of the vocabulary along the DFA (pruned where the DFA dies) the
// first time a state is reached, then cached.
// TokenVocabulary and TokenGrammar are immutable after construction except
// for TokenGrammar's mask cache, which a mutex guards: thread-safe.
// GrammarConstraint is per request (not thread-safe). GrammarCompiler is
// thread-safe.
#ifndef INFERD_RUNTIME_GEN_TOKEN_GRAMMAR_H_
#define INFERD_RUNTIME_GEN_TOKEN_GRAMMAR_H_

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "runtime/gen/regex_dfa.h"
#include "runtime/gen/sampler.h"
#include "runtime/gen/sampling_params.h"

namespace inferd {

// The bytes each token id appends to the output, in a trie.
class TokenVocabulary {
 public:
  // token_bytes[id]: the token's bytes; empty for ids a constrained output
  // never uses (special tokens, padding rows). Ids past the end are unused
  // too.
  explicit TokenVocabulary(std::vector<std::string> token_bytes);

  int32_t size() const { return static_cast<int32_t>(bytes_.size()); }
  const std::string& bytes(int32_t id) const { return bytes_[id]; }

  // Trie: node 0 is the root; node n's children are edges
  // [child_begin_[n], child_begin_[n + 1]) (label, target), its tokens
  // token_ids_[token_begin_[n], token_begin_[n + 1]).
  int32_t num_nodes() const {
    return static_cast<int32_t>(child_begin_.size()) - 1;
  }

 private:
  friend class TokenGrammar;

  std::vector<std::string> bytes_;
  std::vector<int32_t> child_begin_;
  std::vector<uint8_t> edge_label_;
  std::vector<int32_t> edge_target_;
  std::vector<int32_t> token_begin_;
  std::vector<int32_t> token_ids_;
};

// The allowed tokens at one DFA state.
struct TokenMask {
  std::vector<uint64_t> bits;  // by token id, vocab_size bits
  int32_t count = 0;           // set bits
  // Ascending; only when few tokens are allowed (count * kSparse <= vocab
  // size), where keeping them beats a pass over the bits. Dense masks do
  // not hold them (a permissive state would cost 4 bytes per token).
  std::vector<int32_t> ids;
  static constexpr int32_t kSparse = 16;

  bool allowed(int32_t id) const {
    return id >= 0 && id < static_cast<int32_t>(bits.size()) * 64 &&
           ((bits[id >> 6] >> (id & 63)) & 1);
  }
};

class TokenGrammar {
 public:
  TokenGrammar(ByteDfa dfa, std::shared_ptr<const TokenVocabulary> vocab);

  const ByteDfa& dfa() const { return dfa_; }
  const TokenVocabulary& vocab() const { return *vocab_; }
  // The tokens allowed at `state` (built on first use). The reference stays
  // valid as long as the grammar.
  const TokenMask& Mask(int32_t state) const;

 private:
  TokenMask Build(int32_t state) const;

  const ByteDfa dfa_;
  const std::shared_ptr<const TokenVocabulary> vocab_;
  mutable absl::Mutex mu_;
  mutable std::vector<std::unique_ptr<TokenMask>> masks_ ABSL_GUARDED_BY(mu_);
};

// One request's position in a grammar.
class GrammarConstraint : public TokenConstraint {
 public:
  explicit GrammarConstraint(std::shared_ptr<const TokenGrammar> grammar);

  void Mask(absl::Span<float> logits,
            absl::Span<const int32_t> end_ids) override;
  void Advance(int32_t token_id) override;
  bool Complete() const override;

  int32_t state() const { return state_; }

 private:
  std::shared_ptr<const TokenGrammar> grammar_;
  int32_t state_;
  std::vector<float> saved_;  // scratch: logits kept through the mask
};

// The regular expression a format's output must fully match.
// INVALID_ARGUMENT naming the field (response_format.json_schema / regex /
// choice) and the problem.
absl::StatusOr<std::string> ResponseFormatRegex(const ResponseFormat& format);

// Compiles formats against one vocabulary, keeping the most recently used
// grammars (with their mask caches) for requests that repeat a format.
class GrammarCompiler {
 public:
  // `make_vocab` runs once, on the first format compiled.
  explicit GrammarCompiler(
      std::function<std::shared_ptr<const TokenVocabulary>()> make_vocab,
      size_t max_cached = 32);

  // INVALID_ARGUMENT naming the field for a bad or unsupported format.
  absl::StatusOr<std::shared_ptr<const TokenGrammar>> Compile(
      const ResponseFormat& format);
  // A fresh constraint at the grammar's start.
  absl::StatusOr<std::unique_ptr<TokenConstraint>> NewConstraint(
      const ResponseFormat& format);

 private:
  std::function<std::shared_ptr<const TokenVocabulary>()> make_vocab_;
  const size_t max_cached_;
  absl::Mutex mu_;
  std::shared_ptr<const TokenVocabulary> vocab_ ABSL_GUARDED_BY(mu_);
  // Key: type + '\0' + spec/choices; most recent first.
  std::list<std::pair<std::string, std::shared_ptr<const TokenGrammar>>> lru_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace inferd

#endif  // INFERD_RUNTIME_GEN_TOKEN_GRAMMAR_H_
