#include "runtime/engine/output_processor.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace inferd {

absl::StatusOr<Pooling> ParsePooling(absl::string_view name) {
  if (name == "cls") return Pooling::kCls;
  if (name == "mean") return Pooling::kMean;
  if (name == "last") return Pooling::kLast;
  return absl::InvalidArgumentError(
      absl::StrCat("pooling '", name, "': expected cls, mean or last"));
}

absl::StatusOr<std::vector<float>> PoolEmbedding(const SequenceResult& r,
                                                 int32_t pool_start,
                                                 const EmbedOutputOptions& o) {
  const int32_t rows = r.rows;
  const int32_t h = r.cols;
  if (rows <= 0 || h <= 0 ||
      r.values.size() != static_cast<size_t>(rows) * static_cast<size_t>(h)) {
    return absl::InternalError("the model returned no hidden states");
  }
  std::vector<double> acc(h, 0.0);
  if (r.output == StepOutput::kLastHiddenState || o.pooling == Pooling::kLast) {
    const float* row = r.values.data() + static_cast<size_t>(rows - 1) * h;
    for (int32_t j = 0; j < h; ++j) acc[j] = row[j];
  } else if (o.pooling == Pooling::kCls) {
    for (int32_t j = 0; j < h; ++j) acc[j] = r.values[j];
  } else {
    const int32_t start = std::clamp<int32_t>(pool_start, 0, rows - 1);
    for (int32_t i = start; i < rows; ++i) {
      const float* row = r.values.data() + static_cast<size_t>(i) * h;
      for (int32_t j = 0; j < h; ++j) acc[j] += row[j];
    }
    const double inv = 1.0 / (rows - start);
    for (double& v : acc) v *= inv;
  }
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
