#include "runtime/engine/m3_output.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "runtime/common/field_error.h"
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
    return FieldError("outputs.sparse", absl::StrCat(
        ": this model has no sparse (lexical weights) head; "
        "it needs ",
        sparse_missing),
        absl::StatusCode::kFailedPrecondition);
  }
  if (params.want_multi_vector && !colbert) {
    return FieldError("outputs.multi_vector", absl::StrCat(
        ": this model has no multi-vector (ColBERT) "
        "head; it needs ",
        colbert_missing),
        absl::StatusCode::kFailedPrecondition);
  }
  return absl::OkStatus();
}

namespace {

// y [rows x out] = x [rows x in] W^T + b, rows `first`.. of `hidden`.
absl::StatusOr<std::vector<float>> ApplyHead(const ExecutionContext& ctx,
                                             const SequenceResult& hidden,
                                             int32_t first,
                                             const LinearWeights& w) {
  const int64_t rows = hidden.rows - first;
  std::vector<float> y(static_cast<size_t>(rows * w.out_features));
  if (rows == 0) return y;
  const TensorView x = TensorView::Contiguous(
      const_cast<float*>(hidden.values.data()) +
          static_cast<size_t>(first) * static_cast<size_t>(w.in_features),
      DType::kF32, {rows, w.in_features});
  const TensorView weight =
      TensorView::Contiguous(const_cast<float*>(w.weight.data()), DType::kF32,
                             {w.out_features, w.in_features});
  const TensorView bias = TensorView::Contiguous(
      const_cast<float*>(w.bias.data()), DType::kF32, {w.out_features});
  RETURN_IF_ERROR(Linear(
      ctx, x, weight, bias,
      TensorView::Contiguous(y.data(), DType::kF32, {rows, w.out_features})));
  return y;
}

}  // namespace

absl::StatusOr<SparseVector> SparseWeights(const ExecutionContext& ctx,
                                           const SequenceResult& hidden,
                                           const std::vector<int32_t>& ids,
                                           const M3Heads& heads,
                                           bool with_tokens) {
  const LinearWeights& w = *heads.sparse;
  if (absl::Status s = CheckRows(hidden, w.in_features); !s.ok()) return s;
  if (static_cast<size_t>(hidden.rows) != ids.size()) {
    return absl::InternalError("hidden states and token ids disagree");
  }
  ASSIGN_OR_RETURN(std::vector<float> weights, ApplyHead(ctx, hidden, 0, w));
  const TensorView v = TensorView::Contiguous(
      weights.data(), DType::kF32, {static_cast<int64_t>(weights.size()), 1});
  RETURN_IF_ERROR(Activate(ctx, Activation::kRelu, v, v));
  std::map<int32_t, float> best;
  for (int32_t t = 0; t < hidden.rows; ++t) {
    const int32_t id = ids[t];
    if (std::find(heads.special_ids.begin(), heads.special_ids.end(), id) !=
        heads.special_ids.end()) {
      continue;
    }
    const float weight = weights[static_cast<size_t>(t)];
    if (!(weight > 0)) continue;
    auto [it, inserted] = best.emplace(id, weight);
    if (!inserted) it->second = std::max(it->second, weight);
  }
  SparseVector out;
  for (const auto& [id, weight] : best) {
    out.token_ids.push_back(id);
    out.weights.push_back(weight);
    if (with_tokens && heads.id_to_token)
      out.tokens.push_back(heads.id_to_token(id));
  }
  return out;
}

absl::StatusOr<std::vector<float>> ColbertVectors(const ExecutionContext& ctx,
                                                  const SequenceResult& hidden,
                                                  const LinearWeights& w,
                                                  bool normalize) {
  if (absl::Status s = CheckRows(hidden, w.in_features); !s.ok()) return s;
  // Every token after the first (CLS).
  ASSIGN_OR_RETURN(std::vector<float> out, ApplyHead(ctx, hidden, 1, w));
  if (normalize && !out.empty()) {
    const TensorView v = TensorView::Contiguous(
        out.data(), DType::kF32,
        {static_cast<int64_t>(hidden.rows - 1), w.out_features});
    RETURN_IF_ERROR(L2Normalize(ctx, v, v));
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

namespace {

// One of the two heads over the shared weights.
class M3TokenHead : public TokenHead {
 public:
  M3TokenHead(std::shared_ptr<const M3Heads> heads, bool sparse)
      : heads_(std::move(heads)), sparse_(sparse) {}

  std::string output() const override {
    return sparse_ ? "sparse" : "multi_vector";
  }
  bool present() const override {
    return sparse_ ? heads_->sparse.has_value() : heads_->colbert.has_value();
  }
  bool Wanted(const EmbedParams& p) const override {
    return sparse_ ? p.want_sparse : p.want_multi_vector;
  }
  absl::Status Check(const EmbedParams& p) const override {
    if (!Wanted(p)) return absl::OkStatus();
    EmbedParams only;
    only.want_sparse = sparse_;
    only.want_multi_vector = !sparse_;
    return heads_->Check(only);
  }
  std::unique_ptr<TokenHeadRun> Start(const EmbedParams& p, bool normalize,
                                      const ExecutionContext& ctx) const override;

 private:
  const std::shared_ptr<const M3Heads> heads_;
  const bool sparse_;
};

class SparseRun : public TokenHeadRun {
 public:
  SparseRun(std::shared_ptr<const M3Heads> heads, bool with_tokens,
            const ExecutionContext& ctx)
      : heads_(std::move(heads)), with_tokens_(with_tokens), ctx_(ctx) {}
  absl::Status Add(size_t index, const std::vector<int32_t>& ids,
                   const SequenceResult& hidden) override {
    if (out_.size() <= index) out_.resize(index + 1);
    ASSIGN_OR_RETURN(out_[index],
                     SparseWeights(ctx_, hidden, ids, *heads_, with_tokens_));
    return absl::OkStatus();
  }
  void MoveInto(EmbedResult* result) override {
    result->sparse = std::move(out_);
  }

 private:
  const std::shared_ptr<const M3Heads> heads_;
  const bool with_tokens_;
  const ExecutionContext ctx_;
  std::vector<SparseVector> out_;
};

class ColbertRun : public TokenHeadRun {
 public:
  ColbertRun(std::shared_ptr<const M3Heads> heads, bool normalize,
             const ExecutionContext& ctx)
      : heads_(std::move(heads)), normalize_(normalize), ctx_(ctx) {}
  absl::Status Add(size_t index, const std::vector<int32_t>& ids,
                   const SequenceResult& hidden) override {
    if (out_.size() <= index) out_.resize(index + 1);
    ASSIGN_OR_RETURN(out_[index],
                     ColbertVectors(ctx_, hidden, *heads_->colbert, normalize_));
    return absl::OkStatus();
  }
  void MoveInto(EmbedResult* result) override {
    result->multi_vectors = std::move(out_);
    result->multi_vector_dims = heads_->colbert->out_features;
  }

 private:
  const std::shared_ptr<const M3Heads> heads_;
  const bool normalize_;
  const ExecutionContext ctx_;
  std::vector<std::vector<float>> out_;
};

std::unique_ptr<TokenHeadRun> M3TokenHead::Start(
    const EmbedParams& p, bool normalize, const ExecutionContext& ctx) const {
  if (sparse_) {
    return std::make_unique<SparseRun>(heads_, p.want_sparse_tokens, ctx);
  }
  return std::make_unique<ColbertRun>(heads_, normalize, ctx);
}

// One head's weights (the other left unset) from the model directory.
absl::StatusOr<std::unique_ptr<TokenHead>> NewM3Head(
    const TokenHeadContext& ctx, bool sparse) {
  auto heads = std::make_shared<M3Heads>();
  const M3HeadFiles files = FindM3HeadFiles(ctx.model_dir);
  heads->sparse_missing = M3HeadMissing(ctx.model_dir, "sparse_linear");
  heads->colbert_missing = M3HeadMissing(ctx.model_dir, "colbert_linear");
  if (sparse && !files.sparse.empty()) {
    ASSIGN_OR_RETURN(heads->sparse,
                     LoadLinearHead(files.sparse, ctx.hidden_size, 1));
  }
  if (!sparse && !files.colbert.empty()) {
    ASSIGN_OR_RETURN(heads->colbert,
                     LoadLinearHead(files.colbert, ctx.hidden_size, 0));
  }
  heads->special_ids = ctx.special_ids;
  heads->id_to_token = ctx.id_to_token;
  return std::unique_ptr<TokenHead>(new M3TokenHead(std::move(heads), sparse));
}

}  // namespace

absl::StatusOr<std::unique_ptr<TokenHead>> NewM3SparseHead(
    const TokenHeadContext& ctx) {
  return NewM3Head(ctx, /*sparse=*/true);
}

absl::StatusOr<std::unique_ptr<TokenHead>> NewM3ColbertHead(
    const TokenHeadContext& ctx) {
  return NewM3Head(ctx, /*sparse=*/false);
}

}  // namespace inferd
