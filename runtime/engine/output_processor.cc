#include "runtime/engine/output_processor.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace inferd {
namespace {

absl::Status CheckHidden(const SequenceResult& r) {
  if (r.rows <= 0 || r.cols <= 0 ||
      r.values.size() != static_cast<size_t>(r.rows) * static_cast<size_t>(r.cols)) {
    return absl::InternalError("the model returned no hidden states");
  }
  return absl::OkStatus();
}

class PoolingProcessor : public OutputProcessor {
 public:
  explicit PoolingProcessor(Pooling pooling)
      : pooling_(pooling),
        name_(PoolingComponent(pooling == Pooling::kCls    ? "cls"
                               : pooling == Pooling::kMean ? "mean"
                                                           : "last")) {}
  absl::string_view name() const override { return name_; }
  // The runner pools on the device and returns one row per sequence.
  StepOutput step_output() const override {
    switch (pooling_) {
      case Pooling::kCls: return StepOutput::kFirstHiddenState;
      case Pooling::kMean: return StepOutput::kMeanHiddenState;
      case Pooling::kLast: break;
    }
    return StepOutput::kLastHiddenState;
  }
  absl::StatusOr<std::vector<float>> Process(
      const SequenceResult& r, const OutputRequest& request) const override {
    if (absl::Status s = CheckHidden(r); !s.ok()) return s;
    const int32_t rows = r.rows;
    const int32_t h = r.cols;
    std::vector<float> out(static_cast<size_t>(h));
    if (r.output != StepOutput::kHiddenStates) {
      // Pooled by the runner (the step output this processor asked for).
      if (rows != 1) return absl::InternalError("expected one pooled row");
      std::copy(r.values.begin(), r.values.begin() + h, out.begin());
    } else if (pooling_ == Pooling::kLast) {
      const float* row = r.values.data() + static_cast<size_t>(rows - 1) * h;
      std::copy(row, row + h, out.begin());
    } else if (pooling_ == Pooling::kCls) {
      std::copy(r.values.begin(), r.values.begin() + h, out.begin());
    } else {
      const int32_t start = std::clamp<int32_t>(request.pool_start, 0, rows - 1);
      std::vector<double> acc(static_cast<size_t>(h), 0.0);
      for (int32_t i = start; i < rows; ++i) {
        const float* row = r.values.data() + static_cast<size_t>(i) * h;
        for (int32_t j = 0; j < h; ++j) acc[j] += row[j];
      }
      const double inv = 1.0 / (rows - start);
      for (int32_t j = 0; j < h; ++j) out[j] = static_cast<float>(acc[j] * inv);
    }
    return out;
  }

 private:
  const Pooling pooling_;
  const std::string name_;
};

class LogitsProcessor : public OutputProcessor {
 public:
  explicit LogitsProcessor(std::string name) : name_(std::move(name)) {}
  absl::string_view name() const override { return name_; }
  StepOutput step_output() const override {
    return StepOutput::kClassifierLogits;
  }
  absl::StatusOr<std::vector<float>> Process(
      const SequenceResult& r, const OutputRequest&) const override {
    if (r.values.empty()) {
      return absl::InternalError("the model returned no score");
    }
    return r.values;
  }

 private:
  const std::string name_;
};

// Decoder rerankers: the score from the last position's LM logits of the
// format's tokens (two: logit(b) - logit(a), whose sigmoid is P(b) among the
// two; one: its logit).
class TokenLogitScores : public OutputProcessor {
 public:
  explicit TokenLogitScores(std::vector<int32_t> ids) : ids_(std::move(ids)) {}
  absl::string_view name() const override { return "token_logit_scores"; }
  StepOutput step_output() const override { return StepOutput::kLastLogits; }
  absl::StatusOr<std::vector<float>> Process(
      const SequenceResult& r, const OutputRequest&) const override {
    for (int32_t id : ids_) {
      if (id < 0 || id >= r.cols || r.values.size() < static_cast<size_t>(r.cols)) {
        return absl::InternalError(absl::StrCat(
            "token_logit_scores: token id ", id, " is outside the ", r.cols,
            " logits the model returned"));
      }
    }
    const float score = ids_.size() == 2 ? r.values[ids_[1]] - r.values[ids_[0]]
                                         : r.values[ids_[0]];
    return std::vector<float>{score};
  }

 private:
  const std::vector<int32_t> ids_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<OutputProcessor>> CreateTokenLogitScores(
    const std::vector<int32_t>& score_token_ids) {
  if (score_token_ids.empty() || score_token_ids.size() > 2) {
    return absl::FailedPreconditionError(absl::StrCat(
        "token_logit_scores needs one or two score tokens (the model's "
        "rerank format); got ", score_token_ids.size()));
  }
  return std::make_unique<TokenLogitScores>(score_token_ids);
}

std::unique_ptr<OutputProcessor> CreatePoolingProcessor(Pooling pooling) {
  return std::make_unique<PoolingProcessor>(pooling);
}

std::unique_ptr<OutputProcessor> CreateLogitsProcessor(std::string name) {
  return std::make_unique<LogitsProcessor>(std::move(name));
}

}  // namespace inferd
