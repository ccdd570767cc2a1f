#include "runtime/engine/m3_output.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "runtime/common/status_macros.h"

namespace inferd {
namespace {

absl::Status CheckRows(const SequenceResult& r, int64_t h) {
  if (r.output != StepOutput::kHiddenStates || r.rows <= 0 || r.cols != h ||
      r.values.size() != static_cast<size_t>(r.rows) * static_cast<size_t>(h)) {
    return absl::InternalError(
        "the model returned no per-token hidden states for the sparse / "
        "multi-vector outputs");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<M3Heads> LoadM3Heads(const std::string& dir, int64_t hidden) {
  M3Heads heads;
  heads.sparse_missing = M3HeadMissing(dir, "sparse_linear");
  heads.colbert_missing = M3HeadMissing(dir, "colbert_linear");
  const M3HeadFiles files = FindM3HeadFiles(dir);
  if (!files.sparse.empty()) {
    ASSIGN_OR_RETURN(heads.sparse, LoadLinearHead(files.sparse, hidden, 1));
  }
  if (!files.colbert.empty()) {
    ASSIGN_OR_RETURN(heads.colbert, LoadLinearHead(files.colbert, hidden, 0));
  }
  return heads;
}

absl::Status M3Heads::Check(const EmbedParams& params) const {
  if (params.want_sparse && !sparse) {
    return absl::FailedPreconditionError(absl::StrCat(
        "outputs.sparse: this model has no sparse (lexical weights) head; "
        "it needs ", sparse_missing));
  }
  if (params.want_multi_vector && !colbert) {
    return absl::FailedPreconditionError(absl::StrCat(
        "outputs.multi_vector: this model has no multi-vector (ColBERT) "
        "head; it needs ", colbert_missing));
  }
  return absl::OkStatus();
}

absl::StatusOr<SparseVector> SparseWeights(const SequenceResult& hidden,
                                           const std::vector<int32_t>& ids,
                                           const M3Heads& heads,
                                           bool with_tokens) {
  const LinearWeights& w = *heads.sparse;
  if (absl::Status s = CheckRows(hidden, w.in_features); !s.ok()) return s;
  if (static_cast<size_t>(hidden.rows) != ids.size()) {
    return absl::InternalError("hidden states and token ids disagree");
  }
  std::map<int32_t, float> best;
  const int64_t h = w.in_features;
  for (int32_t t = 0; t < hidden.rows; ++t) {
    const int32_t id = ids[t];
    if (std::find(heads.special_ids.begin(), heads.special_ids.end(), id) !=
        heads.special_ids.end()) {
      continue;
    }
    const float* row = hidden.values.data() + static_cast<size_t>(t) * h;
    double sum = w.bias[0];
    for (int64_t j = 0; j < h; ++j) sum += double{w.weight[j]} * row[j];
    const float v = static_cast<float>(std::max(sum, 0.0));
    if (v <= 0) continue;
    auto [it, inserted] = best.emplace(id, v);
    if (!inserted) it->second = std::max(it->second, v);
  }
  SparseVector out;
  for (const auto& [id, v] : best) {
    out.token_ids.push_back(id);
    out.weights.push_back(v);
    if (with_tokens && heads.id_to_token) out.tokens.push_back(heads.id_to_token(id));
  }
  return out;
}

absl::StatusOr<std::vector<float>> ColbertVectors(const SequenceResult& hidden,
                                                  const LinearWeights& w,
                                                  bool normalize) {
  if (absl::Status s = CheckRows(hidden, w.in_features); !s.ok()) return s;
  const int64_t h = w.in_features;
  const int64_t d = w.out_features;
  std::vector<float> out(static_cast<size_t>(hidden.rows - 1) * d);
  std::vector<double> y(d);
  for (int32_t t = 1; t < hidden.rows; ++t) {
    const float* row = hidden.values.data() + static_cast<size_t>(t) * h;
    double norm = 0;
    for (int64_t o = 0; o < d; ++o) {
      const float* wr = w.weight.data() + o * h;
      double sum = w.bias[o];
      for (int64_t j = 0; j < h; ++j) sum += double{wr[j]} * row[j];
      y[o] = sum;
      norm += sum * sum;
    }
    const double scale = normalize ? 1.0 / std::max(std::sqrt(norm), 1e-12) : 1.0;
    float* dst = out.data() + static_cast<size_t>(t - 1) * d;
    for (int64_t o = 0; o < d; ++o) dst[o] = static_cast<float>(y[o] * scale);
  }
  return out;
}

float ColbertScore(const std::vector<float>& query,
                   const std::vector<float>& doc, int64_t dims) {
  if (dims <= 0) return 0;
  const size_t nq = query.size() / dims;
  const size_t nd = doc.size() / dims;
  if (nq == 0 || nd == 0) return 0;
  double total = 0;
  for (size_t i = 0; i < nq; ++i) {
    double best = -INFINITY;
    for (size_t k = 0; k < nd; ++k) {
      double dot = 0;
      for (int64_t j = 0; j < dims; ++j) {
        dot += double{query[i * dims + j]} * doc[k * dims + j];
      }
      best = std::max(best, dot);
    }
    total += best;
  }
  return static_cast<float>(total / nq);
}

absl::Status M3Collector::Add(size_t index, const std::vector<int32_t>& ids,
                              const SequenceResult& hidden) {
  if (sparse_) {
    if (sparse_out_.size() <= index) sparse_out_.resize(index + 1);
    absl::StatusOr<SparseVector> v =
        SparseWeights(hidden, ids, heads_, sparse_tokens_);
    if (!v.ok()) return v.status();
    sparse_out_[index] = std::move(v).value();
  }
  if (multi_) {
    if (multi_out_.size() <= index) multi_out_.resize(index + 1);
    absl::StatusOr<std::vector<float>> v =
        ColbertVectors(hidden, *heads_.colbert, normalize_);
    if (!v.ok()) return v.status();
    multi_out_[index] = std::move(v).value();
  }
  return absl::OkStatus();
}

void M3Collector::MoveInto(EmbedResult* result) {
  result->sparse = std::move(sparse_out_);
  result->multi_vectors = std::move(multi_out_);
  result->multi_vector_dims = multi_ ? heads_.colbert->out_features : 0;
}

}  // namespace inferd
