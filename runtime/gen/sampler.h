// Sampler: turns a batch of LM-head logits ([num_seqs x vocab] F32) into one
// token per row under each request's SamplingParams: min_tokens masking,
// repetition / presence / frequency penalties, temperature, top-k, top-p,
// min-p, and a per-request seeded generator (the same seed gives the same
// tokens whatever the batch composition). SamplingState is the per-request
// part (generator, penalty counts); Sampler holds reusable scratch buffers.
// Not thread-safe; both are owned by the engine loop.
#ifndef INFERD_RUNTIME_GEN_SAMPLER_H_
#define INFERD_RUNTIME_GEN_SAMPLER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "runtime/gen/sampling_params.h"

namespace inferd {

// xoshiro256** seeded through splitmix64: small, fast, and reproducible
// across platforms and library versions (unlike std:: distributions).
class SamplerRng {
 public:
  explicit SamplerRng(uint64_t seed);
  uint64_t Next();
  double Uniform();  // in [0, 1), 53 random bits

 private:
  uint64_t s_[4];
};

// A per-request rule on which token may come next (structured output:
// runtime/gen/token_grammar.h). Not thread-safe; owned by its SamplingState.
class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // Sets the logits (vocab_size of them) of the tokens that may not come
  // next to -inf. `end_ids` (EOS, stop ids) keep their value only where the
  // output may end.
  virtual void Mask(absl::Span<float> logits,
                    absl::Span<const int32_t> end_ids) = 0;
  // Moves past `token_id`, a token Mask allowed.
  virtual void Advance(int32_t token_id) = 0;
  // Moves past tokens ForcedTokens gave, in order (one mask computation
  // for all of them, where Advance would start one per token).
  virtual void AdvanceForced(absl::Span<const int32_t> token_ids) {
    for (int32_t id : token_ids) Advance(id);
  }
  // The output is complete: only an end token could follow.
  virtual bool Complete() const = 0;
  // Replaces *out with the tokens the format forces next (the only
  // continuation it allows, e.g. a property name), at most `max`; empty
  // when the next token is a choice. The engine feeds them as drafts, so
  // they cost one forward pass together instead of one each.
  virtual void ForcedTokens(int32_t max, std::vector<int32_t>* out) {
    (void)max;
    out->clear();
  }
};

// What a sampler sees of one request's decoding (SamplingState implements
// it). Virtual, so a plug-in's sampler uses it without linking inferd.
class SamplingContext {
 public:
  virtual ~SamplingContext() = default;
  virtual const SamplingParams& params() const = 0;
  // The request's logits processors, in place on one row (vocab_size
  // logits): logit_bias, EOS / stop ids masked until min_tokens, repetition /
  // presence / frequency penalties, then the structured-output mask (last,
  // so neither a bias nor a penalty lets a disallowed token through).
  virtual void ProcessLogits(absl::Span<float> logits) const = 0;
  // The request's seeded generator (SamplingParams.seed): 64 random bits.
  virtual uint64_t NextRandom() = 0;
  // Records the chosen token (penalty counts, min_tokens, the constraint).
  virtual void Accept(int32_t token_id) = 0;
  virtual bool has_constraint() const = 0;
};

// A uniform double in [0, 1) from 64 random bits (53 of them).
inline double UniformFromBits(uint64_t bits) {
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

// Per-request sampling state.
class SamplingState : public SamplingContext {
 public:
  // `eos_token_ids`: the model's EOS ids (masked until min_tokens). An unset
  // params.seed draws a random one.
  SamplingState(const SamplingParams& params,
                absl::Span<const int32_t> prompt_token_ids,
                absl::Span<const int32_t> eos_token_ids);

  const SamplingParams& params() const override { return params_; }
  void ProcessLogits(absl::Span<float> logits) const override;
  uint64_t NextRandom() override { return rng_.Next(); }
  uint64_t seed() const { return seed_; }
  int32_t num_output_tokens() const { return num_output_tokens_; }

  // Records a generated token for the penalties, min_tokens and the
  // constraint. Sampler calls it for every token it samples.
  void Accept(int32_t token_id) override;
  // Records forced tokens (ForcedTokens' output) at once.
  void AcceptForced(absl::Span<const int32_t> token_ids);

  // Constrains every later sample (applied after the penalties, before
  // temperature and truncation; greedy included).
  void set_constraint(std::unique_ptr<TokenConstraint> constraint) {
    constraint_ = std::move(constraint);
  }
  // The constraint is satisfied and nothing may follow: the engine ends the
  // sequence (FinishReason::kStop).
  bool constraint_complete() const {
    return constraint_ != nullptr && constraint_->Complete();
  }
  bool has_constraint() const override { return constraint_ != nullptr; }
  // TokenConstraint::ForcedTokens of the constraint (none without one).
  void ForcedTokens(int32_t max, std::vector<int32_t>* out) {
    out->clear();
    if (constraint_ != nullptr && max > 0) constraint_->ForcedTokens(max, out);
  }

 private:
  // The penalties' and min_tokens' bookkeeping of one output token.
  void Record(int32_t token_id);

  SamplingParams params_;
  std::vector<int32_t> eos_token_ids_;
  uint64_t seed_;
  SamplerRng rng_;
  int32_t num_output_tokens_ = 0;
  // Prompt and output tokens (repetition penalty only).
  absl::flat_hash_set<int32_t> seen_;
  // Output token -> occurrences (presence / frequency penalties only).
  absl::flat_hash_map<int32_t, int32_t> output_counts_;
  std::unique_ptr<TokenConstraint> constraint_;
  std::vector<int32_t> end_ids_;  // EOS and stop ids, for the constraint
};

struct TokenLogprob {
  int32_t token_id = 0;
  float logprob = 0.0f;
};

struct SampleResult {
  int32_t token_id = -1;
  // Only when params.logprobs > 0. Log-softmax of the processed logits:
  // after min_tokens masking, penalties and temperature (greedy: temperature
  // 1), before top-k / top-p / min-p truncation, so they describe the full
  // distribution the truncation then cuts.
  float logprob = 0.0f;
  std::vector<TokenLogprob> top_logprobs;  // best first, params.logprobs
};

// The generate workflow's sampler: one token from one row of logits. The
// built-in is Sampler; a plug-in registers its own (PluginRegistrar::
// AddSampler) and a model picks it with `sampler=NAME`. Not thread-safe; one
// per engine, called by its loop.
class TokenSampler {
 public:
  virtual ~TokenSampler() = default;
  // One row (vocab_size logits, overwritten) -> one token into `result`
  // (token_id; logprob and top_logprobs when state->params().logprobs > 0),
  // recorded with state->Accept. A sampler applies state->ProcessLogits
  // first unless it has reasons not to (the structured-output mask is
  // there). INVALID_ARGUMENT when no token can be chosen.
  virtual absl::Status SampleRow(absl::Span<float> logits,
                                 SamplingContext* state,
                                 SampleResult* result) = 0;
  // Speculative decoding: the token for a row at which a deterministic
  // proposer put `draft`, distributed exactly as SampleRow's; `*accepted`
  // tells whether it is the draft. The default samples the row and accepts
  // the draft when the sample is it (exact for any sampler; a sampler that
  // knows its distribution can accept more often, as Sampler does).
  virtual absl::Status VerifyRow(absl::Span<float> logits,
                                 SamplingContext* state, int32_t draft,
                                 SampleResult* result, bool* accepted) {
    const absl::Status s = SampleRow(logits, state, result);
    *accepted = s.ok() && result->token_id == draft;
    return s;
  }
};

// The built-in sampler ("sample_detokenize").
class Sampler : public TokenSampler {
 public:
  explicit Sampler(int32_t vocab_size);

  int32_t vocab_size() const { return vocab_size_; }

  // Samples one token per row of `logits` (row-major [states.size() x
  // vocab_size]; overwritten with the processed logits) with row i using
  // states[i], which also records the token. `results` is resized to
  // states.size(); its elements' buffers are reused across calls.
  // INVALID_ARGUMENT on a size mismatch or a row without a finite logit.
  absl::Status Sample(absl::Span<float> logits,
                      absl::Span<SamplingState* const> states,
                      std::vector<SampleResult>* results);

  // One row (vocab_size logits, overwritten).
  absl::Status SampleRow(absl::Span<float> logits, SamplingContext* state,
                         SampleResult* result) override;

  // Speculative decoding: the token for one row given a draft token that a
  // deterministic proposer put there. Greedy: the argmax (the draft is
  // accepted when it is the argmax). Sampling: the draft with probability
  // p(draft), else a token drawn from p without the draft, where p is the
  // row's processed distribution (penalties, constraint, temperature,
  // truncation), so the result is distributed exactly as SampleRow's.
  // `*accepted` tells whether the result is the draft. The state records
  // the token, and logprobs are filled, as in SampleRow.
  absl::Status VerifyRow(absl::Span<float> logits, SamplingContext* state,
                         int32_t draft, SampleResult* result,
                         bool* accepted) override;

  // Tokens the request's constraint forces (the only ones its masks allow,
  // so every sampler would pick them): recorded by the state without
  // logits, one result each. Not for requests with logprobs (they need the
  // rows).
  static void AcceptForced(SamplingState* state,
                           absl::Span<const int32_t> tokens,
                           std::vector<SampleResult>* results);

  // Prompt logprobs: the log-softmax of one row of raw model logits
  // (vocab_size values; no temperature, bias or penalties) at `token` and
  // its `n` most likely tokens (best first, ties: lower id first) into
  // `result` (token_id = `token`). INVALID_ARGUMENT on a size mismatch, an
  // id outside the vocabulary or a row without a finite logit.
  absl::Status RawLogprobs(absl::Span<const float> logits, int32_t token,
                           int32_t n, SampleResult* result);

 private:
  // A processed row: probs_ holds exp(x - max) for every token; when
  // truncated, idx_[0, n) holds the candidates (top-k / top-p / min-p).
  struct RowDist {
    int32_t argmax = 0;
    float log_normalizer = 0.0f;
    double sum = 0.0;  // of probs_ over the whole vocabulary
    bool truncated = false;
    int32_t n = 0;
  };
  // Penalties, constraint and temperature applied to `logits` in place;
  // probabilities and candidates into the scratch buffers.
  absl::Status ProcessRow(absl::Span<float> logits,
                          const SamplingContext& state, RowDist* d);
  // Unnormalized probability of `token` among the candidates (0 outside).
  double CandidateMass(const RowDist& d, int32_t token) const;
  // Draws a candidate other than `excluded` (-1: none) in proportion to its
  // probability.
  int32_t Draw(const RowDist& d, int32_t excluded, SamplingContext* state);
  // Sets the result (logprobs) and records `token` in the state.
  void Finish(const float* x, const RowDist& d, int32_t token,
              SamplingContext* state, SampleResult* result);
  void FillLogprobs(const float* x, int32_t token, float log_normalizer,
                    int32_t n, SampleResult* result);

  const int32_t vocab_size_;
  std::vector<float> probs_;  // unnormalized exp(x - max)
  std::vector<int32_t> idx_;  // candidate token ids
  std::vector<int32_t> top_;  // top-n scratch for logprobs
};

}  // namespace inferd

#endif  // INFERD_RUNTIME_GEN_SAMPLER_H_
