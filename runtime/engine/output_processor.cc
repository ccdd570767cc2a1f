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

class ScoresProcessor : public OutputProcessor {
 public:
  ScoresProcessor(std::string name, ScoreFunction fn)
      : name_(std::move(name)), fn_(fn) {}
  absl::string_view name() const override { return name_; }
  StepOutput step_output() const override {
    return StepOutput::kClassifierLogits;
  }
  absl::StatusOr<std::vector<float>> Process(
      const SequenceResult& r, const OutputRequest& request) const override {
    if (r.values.empty()) {
      return absl::InternalError("the model returned no score");
    }
    return ScoreLogits(r.values, request.raw_scores ? ScoreFunction::kRaw : fn_);
  }

 private:
  const std::string name_;
  const ScoreFunction fn_;
};

}  // namespace

std::unique_ptr<OutputProcessor> CreatePoolingProcessor(Pooling pooling) {
  return std::make_unique<PoolingProcessor>(pooling);
}

std::unique_ptr<OutputProcessor> CreateScoresProcessor(std::string name,
                                                       ScoreFunction fn) {
  return std::make_unique<ScoresProcessor>(std::move(name), fn);
}

absl::StatusOr<std::vector<float>> FinishEmbedding(
    const std::vector<float>& pooled, const EmbedOutputOptions& o) {
  std::vector<double> acc(pooled.begin(), pooled.end());
  if (o.dense != nullptr) {
    for (const DenseLayer& d : *o.dense) {
      if (static_cast<int64_t>(acc.size()) != d.in_features) {
        return absl::InternalError(absl::StrCat(
            "Dense module expects ", d.in_features, " inputs, got ",
            acc.size()));
      }
      std::vector<double> y(d.out_features);
      for (int64_t r = 0; r < d.out_features; ++r) {
        const float* row = d.weight.data() + r * d.in_features;
        double sum = d.bias.empty() ? 0.0 : d.bias[r];
        for (int64_t c = 0; c < d.in_features; ++c) sum += row[c] * acc[c];
        y[r] = d.tanh ? std::tanh(sum) : sum;
      }
      acc = std::move(y);
    }
  }
  size_t dims = acc.size();
  if (o.dimensions > 0) dims = std::min<size_t>(dims, o.dimensions);
  std::vector<float> out(dims);
  double norm = 0;
  for (size_t j = 0; j < dims; ++j) norm += acc[j] * acc[j];
  const double scale =
      o.normalize ? 1.0 / std::max(std::sqrt(norm), 1e-12) : 1.0;
  for (size_t j = 0; j < dims; ++j) out[j] = static_cast<float>(acc[j] * scale);
  return out;
}

std::vector<float> ScoreLogits(const std::vector<float>& logits,
                               ScoreFunction fn) {
  std::vector<float> out(logits.size());
  switch (fn) {
    case ScoreFunction::kRaw:
      out = logits;
      break;
    case ScoreFunction::kSigmoid:
      for (size_t i = 0; i < logits.size(); ++i) {
        out[i] = static_cast<float>(1.0 / (1.0 + std::exp(-double{logits[i]})));
      }
      break;
    case ScoreFunction::kSoftmax: {
      double mx = -INFINITY;
      for (float v : logits) mx = std::max<double>(mx, v);
      double sum = 0;
      for (float v : logits) sum += std::exp(v - mx);
      for (size_t i = 0; i < logits.size(); ++i) {
        out[i] = static_cast<float>(std::exp(logits[i] - mx) / sum);
      }
      break;
    }
  }
  return out;
}

}  // namespace inferd
