// Structured output on llguidance (crates.io, built by runtime/gen/llg):
// a ResponseFormat (JSON Schema, regex, choice list, Lark grammar) becomes a
// TokenConstraint whose masks llguidance computes over the model's
// vocabulary. The mask for a sequence's next token is computed on a worker
// thread as soon as the previous token is known, so it overlaps the next
// forward pass; Mask() only waits for it when it is not ready yet.
// ConstraintCompiler is thread-safe; each TokenConstraint belongs to one
// request (not thread-safe; its background work is joined before it is
// touched or destroyed).
#ifndef INFERD_RUNTIME_GEN_STRUCTURED_OUTPUT_H_
#define INFERD_RUNTIME_GEN_STRUCTURED_OUTPUT_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "runtime/gen/sampler.h"
#include "runtime/gen/sampling_params.h"

struct LlgTokenizer;
struct LlgMatcher;

namespace inferd {

// What llguidance needs to know of a model's vocabulary.
struct ConstraintVocabulary {
  // The bytes each token id appends to the output; empty for special tokens
  // and padding rows (never allowed inside a constrained output).
  std::vector<std::string> token_bytes;
  // End-of-sequence ids (EOS; the first is llguidance's end token).
  std::vector<int32_t> eos_ids;
  // Tokenizes bytes as the model would (no special tokens added).
  // Thread-safe. llguidance uses it for forced text (fast-forward tokens).
  std::function<std::vector<int32_t>(absl::string_view)> tokenize;
};

// The text llguidance gets for a format: (constraint type, data). JSON
// Schemas are rewritten as the proto documents: compact separators unless
// flexible whitespace is asked for, objects closed under `strict`, formats
// llguidance does not know dropped (JSON Schema makes format an annotation
// unless a validator opts in). INVALID_ARGUMENT for a schema that is not
// JSON.
absl::StatusOr<std::pair<std::string, std::string>> LlguidanceGrammar(
    const ResponseFormat& format);

// A small pool of threads that compute masks ahead of the sampler.
class MaskWorkers {
 public:
  explicit MaskWorkers(int threads);
  ~MaskWorkers();
  void Run(std::function<void()> task);

 private:
  void Loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

class ConstraintCompiler {
 public:
  // `make_vocab` runs once, when the first format is compiled. `threads`:
  // mask workers (0 = masks computed in Mask() on the caller's thread).
  explicit ConstraintCompiler(std::function<ConstraintVocabulary()> make_vocab,
                              int threads = 1, size_t max_cached = 32);
  ~ConstraintCompiler();
  ConstraintCompiler(const ConstraintCompiler&) = delete;
  ConstraintCompiler& operator=(const ConstraintCompiler&) = delete;

  // A fresh constraint at the start of `format`. INVALID_ARGUMENT naming
  // the field (response_format.json_schema / regex / choice / grammar) and
  // llguidance's message for a format it cannot compile (an unsupported
  // keyword, a bad pattern, a grammar error, a schema too large to compile
  // within llguidance's limits).
  absl::StatusOr<std::unique_ptr<TokenConstraint>> NewConstraint(
      const ResponseFormat& format);

 private:
  struct Compiled;

  std::function<ConstraintVocabulary()> make_vocab_;
  const size_t max_cached_;
  mutable absl::Mutex mu_;
  // The llguidance tokenizer (structured_output.cc's TokenizerHandle),
  // shared with every compiled format and constraint.
  std::shared_ptr<const void> tokenizer_ ABSL_GUARDED_BY(mu_);
  // Compiled formats (a matcher at the start, cloned per request), most
  // recent first.
  std::list<std::pair<std::string, std::shared_ptr<Compiled>>> lru_
      ABSL_GUARDED_BY(mu_);
  // Shared with the constraints, whose queued masks may still run.
  std::shared_ptr<MaskWorkers> workers_;
};

}  // namespace inferd

#endif  // INFERD_RUNTIME_GEN_STRUCTURED_OUTPUT_H_
