// A test plug-in sampler, "sample_runner_up": after the request's logits
// processors, it picks the second most likely token (ties: lower id
// first). Deterministic and unlike any built-in choice, so a test can tell
// from the tokens that the plug-in's sampler ran, and check each one
// against the built-in sampler's top_logprobs at the same position
// (plugin_integration_test.py). It uses only the TokenSampler and
// SamplingContext interfaces (virtual: no inferd symbol is linked).
#include <cmath>
#include <memory>
#include <vector>

#include "runtime/engine/plugin_api.h"

namespace {

class RunnerUpSampler : public inferd::TokenSampler {
 public:
  absl::Status SampleRow(absl::Span<float> logits,
                         inferd::SamplingContext* state,
                         inferd::SampleResult* result) override {
    state->ProcessLogits(logits);
    int32_t best = -1;
    int32_t second = -1;
    auto better = [&](int32_t a, int32_t b) {
      return b < 0 || logits[a] > logits[b] ||
             (logits[a] == logits[b] && a < b);
    };
    for (int32_t i = 0; i < static_cast<int32_t>(logits.size()); ++i) {
      if (!std::isfinite(logits[i])) continue;
      if (better(i, best)) {
        second = best;
        best = i;
      } else if (better(i, second)) {
        second = i;
      }
    }
    if (best < 0) {
      return absl::InvalidArgumentError(
          "sample_runner_up: no token of the vocabulary is allowed here");
    }
    // With one allowed token (a constraint), it is the only choice.
    const int32_t token = second >= 0 ? second : best;
    result->token_id = token;
    result->top_logprobs.clear();
    result->logprob = 0.0f;
    if (state->params().logprobs > 0) {
      double sum = 0.0;
      for (float x : logits) {
        if (std::isfinite(x)) sum += std::exp(x - logits[best]);
      }
      result->logprob = static_cast<float>(logits[token] - logits[best] -
                                           std::log(sum));
      result->top_logprobs.push_back({token, result->logprob});
    }
    state->Accept(token);
    return absl::OkStatus();
  }
};

absl::Status Register(inferd::PluginRegistrar& registrar) {
  return registrar.AddSampler(
      "sample_runner_up",
      "test sampler: the second most likely token after the logits "
      "processors",
      [](int32_t) -> std::unique_ptr<inferd::TokenSampler> {
        return std::make_unique<RunnerUpSampler>();
      });
}

}  // namespace

INFERD_PLUGIN(Register)
