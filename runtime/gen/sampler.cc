#include "runtime/gen/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "runtime/common/status_macros.h"

namespace inferd {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t ResolveSeed(const SamplingParams& params) {
  if (params.seed.has_value()) return *params.seed;
  absl::BitGen gen;
  return absl::Uniform<uint64_t>(gen);
}

}  // namespace

SamplerRng::SamplerRng(uint64_t seed) {
  uint64_t sm = seed;
  for (uint64_t& s : s_) s = SplitMix64(&sm);
}

uint64_t SamplerRng::Next() {
  const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = Rotl(s_[3], 45);
  return result;
}

double SamplerRng::Uniform() { return UniformFromBits(Next()); }

SamplingState::SamplingState(const SamplingParams& params,
                             absl::Span<const int32_t> prompt_token_ids,
                             absl::Span<const int32_t> eos_token_ids)
    : params_(params),
      eos_token_ids_(eos_token_ids.begin(), eos_token_ids.end()),
      seed_(ResolveSeed(params)),
      rng_(seed_) {
  if (params_.repetition_penalty != 1.0f) {
    seen_.insert(prompt_token_ids.begin(), prompt_token_ids.end());
  }
  end_ids_ = eos_token_ids_;
  end_ids_.insert(end_ids_.end(), params_.stop_token_ids.begin(),
                  params_.stop_token_ids.end());
}

void SamplingState::Record(int32_t token_id) {
  ++num_output_tokens_;
  if (params_.repetition_penalty != 1.0f) seen_.insert(token_id);
  if (params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f) {
    ++output_counts_[token_id];
  }
}

void SamplingState::Accept(int32_t token_id) {
  Record(token_id);
  if (constraint_ != nullptr) constraint_->Advance(token_id);
}

void SamplingState::AcceptForced(absl::Span<const int32_t> token_ids) {
  for (int32_t id : token_ids) Record(id);
  if (constraint_ != nullptr) constraint_->AdvanceForced(token_ids);
}

void SamplingState::ProcessLogits(absl::Span<float> logits) const {
  float* x = logits.data();
  const int32_t vocab = static_cast<int32_t>(logits.size());
  const SamplingParams& p = params_;
  auto in_vocab = [vocab](int32_t id) { return id >= 0 && id < vocab; };
  for (const auto& [id, bias] : p.logit_bias) {
    if (in_vocab(id)) x[id] += bias;
  }
  if (num_output_tokens_ < p.min_tokens) {
    for (int32_t id : eos_token_ids_) {
      if (in_vocab(id)) x[id] = kNegInf;
    }
    for (int32_t id : p.stop_token_ids) {
      if (in_vocab(id)) x[id] = kNegInf;
    }
  }
  // Repetition penalty (Keskar et al., 2019, as in HF transformers): divide
  // a positive logit, multiply a negative one.
  if (p.repetition_penalty != 1.0f) {
    const float rp = p.repetition_penalty;
    for (int32_t id : seen_) {
      if (!in_vocab(id)) continue;
      x[id] = x[id] > 0.0f ? x[id] / rp : x[id] * rp;
    }
  }
  // OpenAI semantics: logit -= count * frequency + (count > 0) * presence.
  if (p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) {
    for (const auto& [id, count] : output_counts_) {
      if (!in_vocab(id)) continue;
      x[id] -=
          static_cast<float>(count) * p.frequency_penalty + p.presence_penalty;
    }
  }
  // Last, so neither a bias nor a penalty lets a disallowed token through.
  if (constraint_ != nullptr) {
    constraint_->Mask(logits, end_ids_);
  }
}

Sampler::Sampler(int32_t vocab_size)
    : vocab_size_(std::max(vocab_size, 1)),
      probs_(static_cast<size_t>(vocab_size_)),
      idx_(static_cast<size_t>(vocab_size_)) {
  top_.reserve(kMaxLogprobs + 1);
}

absl::Status Sampler::Sample(absl::Span<float> logits,
                             absl::Span<SamplingState* const> states,
                             std::vector<SampleResult>* results) {
  if (logits.size() != states.size() * static_cast<size_t>(vocab_size_)) {
    return absl::InvalidArgumentError(
        absl::StrCat("logits hold ", logits.size(), " values; expected ",
                     states.size(), " rows x ", vocab_size_));
  }
  results->resize(states.size());
  for (size_t r = 0; r < states.size(); ++r) {
    absl::Status s = SampleRow(logits.subspan(r * vocab_size_, vocab_size_),
                               states[r], &(*results)[r]);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

void Sampler::FillLogprobs(const float* x, int32_t token, float log_normalizer,
                           int32_t n, SampleResult* result) {
  result->logprob = x[token] - log_normalizer;
  // Top n by logit (ties: lower id first) with an insertion list: O(V) for
  // the usual case and no allocation.
  top_.clear();
  auto better = [x](int32_t a, int32_t b) {
    return x[a] > x[b] || (x[a] == x[b] && a < b);
  };
  for (int32_t i = 0; i < vocab_size_; ++i) {
    if (static_cast<int32_t>(top_.size()) == n && !better(i, top_.back())) {
      continue;
    }
    auto pos = std::upper_bound(top_.begin(), top_.end(), i, better);
    top_.insert(pos, i);
    if (static_cast<int32_t>(top_.size()) > n) top_.pop_back();
  }
  result->top_logprobs.resize(top_.size());
  for (size_t j = 0; j < top_.size(); ++j) {
    result->top_logprobs[j].token_id = top_[j];
    result->top_logprobs[j].logprob = x[top_[j]] - log_normalizer;
  }
}

absl::Status Sampler::RawLogprobs(absl::Span<const float> logits,
                                  int32_t token, int32_t n,
                                  SampleResult* result) {
  if (logits.size() != static_cast<size_t>(vocab_size_)) {
    return absl::InvalidArgumentError(
        absl::StrCat("a logits row holds ", logits.size(), " values; expected ",
                     vocab_size_));
  }
  if (token < 0 || token >= vocab_size_) {
    return absl::InvalidArgumentError(
        absl::StrCat("token ", token, " is outside the vocabulary"));
  }
  float max = -std::numeric_limits<float>::infinity();
  for (float v : logits) {
    if (std::isfinite(v)) max = std::max(max, v);
  }
  if (!std::isfinite(max)) {
    return absl::InvalidArgumentError("a logits row has no finite value");
  }
  double sum = 0.0;
  for (float v : logits) {
    if (std::isfinite(v)) sum += std::exp(static_cast<double>(v) - max);
  }
  const float log_normalizer =
      max + static_cast<float>(std::log(sum));
  result->token_id = token;
  if (n <= 0) {
    result->logprob = logits[token] - log_normalizer;
    result->top_logprobs.clear();
    return absl::OkStatus();
  }
  FillLogprobs(logits.data(), token, log_normalizer, n, result);
  return absl::OkStatus();
}

absl::Status Sampler::ProcessRow(absl::Span<float> logits,
                                 const SamplingContext& state, RowDist* d) {
  if (logits.size() != static_cast<size_t>(vocab_size_)) {
    return absl::InvalidArgumentError(
        absl::StrCat("a logits row holds ", logits.size(), " values; expected ",
                     vocab_size_));
  }
  const SamplingParams& p = state.params();
  float* x = logits.data();
  const int32_t v = vocab_size_;
  state.ProcessLogits(logits);

  if (!p.greedy()) {
    const float inv_t = 1.0f / p.temperature;
    for (int32_t i = 0; i < v; ++i) x[i] *= inv_t;
  }
  int32_t argmax = 0;
  for (int32_t i = 1; i < v; ++i) {
    if (x[i] > x[argmax]) argmax = i;
  }
  const float max_logit = x[argmax];
  if (!std::isfinite(max_logit)) {
    if (state.has_constraint()) {
      return absl::InvalidArgumentError(
          "response_format: no token of the vocabulary can continue the "
          "output here (or min_tokens keeps it from ending)");
    }
    return absl::InvalidArgumentError("a logits row has no finite value");
  }
  // Unnormalized probabilities; the sum gives the log-normalizer.
  double sum = 0.0;
  for (int32_t i = 0; i < v; ++i) {
    probs_[i] = std::exp(x[i] - max_logit);
    sum += probs_[i];
  }
  d->argmax = argmax;
  d->log_normalizer = max_logit + static_cast<float>(std::log(sum));
  d->sum = sum;
  d->truncated = false;
  d->n = v;
  if (p.greedy()) return absl::OkStatus();
  auto better = [x](int32_t a, int32_t b) {
    return x[a] > x[b] || (x[a] == x[b] && a < b);
  };
  const int32_t k = p.top_k > 0 && p.top_k < v ? p.top_k : v;
  d->truncated = k < v || p.top_p < 1.0f || p.min_p > 0.0f;
  if (!d->truncated) return absl::OkStatus();
  int32_t n = v;
  std::iota(idx_.begin(), idx_.end(), 0);
  // Top-k, then top-p over the renormalized top-k set, then min-p (the HF
  // transformers order). min-p compares with the top probability, so
  // renormalization does not change it.
  if (k < v) {
    std::nth_element(idx_.begin(), idx_.begin() + k, idx_.end(), better);
    n = k;
  }
  if (p.top_p < 1.0f) {
    std::sort(idx_.begin(), idx_.begin() + n, better);
    double total = 0.0;
    for (int32_t j = 0; j < n; ++j) total += probs_[idx_[j]];
    const double target = static_cast<double>(p.top_p) * total;
    double cum = 0.0;
    for (int32_t j = 0; j < n; ++j) {
      cum += probs_[idx_[j]];
      if (cum >= target) {
        n = j + 1;
        break;
      }
    }
  }
  if (p.min_p > 0.0f) {
    float top = 0.0f;
    for (int32_t j = 0; j < n; ++j) top = std::max(top, probs_[idx_[j]]);
    const float threshold = p.min_p * top;
    int32_t w = 0;
    for (int32_t j = 0; j < n; ++j) {
      if (probs_[idx_[j]] >= threshold) idx_[w++] = idx_[j];
    }
    n = w;
  }
  d->n = n;
  return absl::OkStatus();
}

double Sampler::CandidateMass(const RowDist& d, int32_t token) const {
  if (token < 0 || token >= vocab_size_) return 0.0;
  if (!d.truncated) return probs_[token];
  for (int32_t j = 0; j < d.n; ++j) {
    if (idx_[j] == token) return probs_[token];
  }
  return 0.0;
}

int32_t Sampler::Draw(const RowDist& d, int32_t excluded,
                      SamplingContext* state) {
  if (d.truncated) {
    double z = 0.0;
    for (int32_t j = 0; j < d.n; ++j) {
      if (idx_[j] != excluded) z += probs_[idx_[j]];
    }
    const double u = UniformFromBits(state->NextRandom()) * z;
    double cum = 0.0;
    int32_t last_positive = -1;
    for (int32_t j = 0; j < d.n; ++j) {
      const int32_t id = idx_[j];
      const float q = probs_[id];
      if (q <= 0.0f || id == excluded) continue;
      last_positive = id;
      cum += q;
      if (u < cum) return id;
    }
    // Rounding at the very end (or nothing but `excluded` has mass).
    if (last_positive >= 0) return last_positive;
    return excluded >= 0 ? excluded : d.argmax;
  }
  double z = d.sum;
  if (excluded >= 0) {
    // Summed again rather than subtracted: p(excluded) may be close to 1.
    z = 0.0;
    for (int32_t i = 0; i < vocab_size_; ++i) {
      if (i != excluded) z += probs_[i];
    }
  }
  const double u = UniformFromBits(state->NextRandom()) * z;
  double cum = 0.0;
  int32_t last_positive = -1;
  for (int32_t i = 0; i < vocab_size_; ++i) {
    if (i == excluded || probs_[i] <= 0.0f) continue;
    last_positive = i;
    cum += probs_[i];
    if (u < cum) return i;
  }
  if (excluded < 0) return d.argmax;  // rounding at the very end
  if (last_positive >= 0) return last_positive;
  return excluded >= 0 ? excluded : d.argmax;
}

void Sampler::Finish(const float* x, const RowDist& d, int32_t token,
                     SamplingContext* state, SampleResult* result) {
  result->token_id = token;
  const int32_t logprobs = state->params().logprobs;
  if (logprobs > 0) {
    FillLogprobs(x, token, d.log_normalizer, logprobs, result);
  } else {
    result->logprob = 0.0f;
    result->top_logprobs.clear();
  }
  state->Accept(token);
}

absl::Status Sampler::SampleRow(absl::Span<float> logits,
                                SamplingContext* state, SampleResult* result) {
  RowDist d;
  RETURN_IF_ERROR(ProcessRow(logits, *state, &d));
  const int32_t token =
      state->params().greedy() ? d.argmax : Draw(d, -1, state);
  Finish(logits.data(), d, token, state, result);
  return absl::OkStatus();
}

void Sampler::AcceptForced(SamplingState* state,
                           absl::Span<const int32_t> tokens,
                           std::vector<SampleResult>* results) {
  for (int32_t token : tokens) {
    SampleResult& r = results->emplace_back();
    r.token_id = token;
  }
  state->AcceptForced(tokens);
}

absl::Status Sampler::VerifyRow(absl::Span<float> logits,
                                SamplingContext* state, int32_t draft,
                                SampleResult* result, bool* accepted) {
  RowDist d;
  RETURN_IF_ERROR(ProcessRow(logits, *state, &d));
  int32_t token = d.argmax;
  if (!state->params().greedy()) {
    // Speculative sampling (Leviathan et al., 2023; Chen et al., 2023) with
    // a one-hot draft distribution q: accept the draft with probability
    // min(1, p(draft) / q(draft)) = p(draft); otherwise sample from the
    // residual max(0, p - q), normalized: p without the draft. Either way
    // the token is distributed as p.
    double total = d.sum;
    if (d.truncated) {
      total = 0.0;
      for (int32_t j = 0; j < d.n; ++j) total += probs_[idx_[j]];
    }
    const double p_draft = total > 0.0 ? CandidateMass(d, draft) / total : 0.0;
    token = UniformFromBits(state->NextRandom()) < p_draft
                ? draft
                : Draw(d, draft, state);
  }
  *accepted = token == draft;
  Finish(logits.data(), d, token, state, result);
  return absl::OkStatus();
}

}  // namespace inferd
