#include "runtime/engine/output_stages.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/common/registry.h"
#include "runtime/common/status_macros.h"

namespace inferd {

TensorView OutputRows::view() {
  return TensorView::Contiguous(values.data(), DType::kF32, {rows, cols});
}

std::vector<float> OutputRows::Row(int64_t r) const {
  const auto begin = values.begin() + static_cast<ptrdiff_t>(r * cols);
  return std::vector<float>(begin, begin + static_cast<ptrdiff_t>(cols));
}

namespace {

// The model's Dense modules: each a Linear (x W^T + b), then tanh when the
// module says so.
class DenseStage : public OutputStage {
 public:
  explicit DenseStage(std::shared_ptr<const std::vector<DenseLayer>> layers)
      : layers_(std::move(layers)) {}
  absl::string_view name() const override { return "dense"; }
  absl::Status Run(const ExecutionContext& ctx, const StageRequest&,
                   OutputRows* rows) const override {
    if (layers_ == nullptr) return absl::OkStatus();
    for (const DenseLayer& d : *layers_) {
      if (rows->cols != d.in_features) {
        return absl::InternalError(absl::StrCat("Dense module expects ",
                                                d.in_features, " inputs, got ",
                                                rows->cols));
      }
      OutputRows y;
      y.rows = rows->rows;
      y.cols = d.out_features;
      y.values.resize(static_cast<size_t>(y.rows * y.cols));
      const TensorView w =
          TensorView::Contiguous(const_cast<float*>(d.weight.data()),
                                 DType::kF32, {d.out_features, d.in_features});
      const TensorView b =
          d.bias.empty()
              ? TensorView()
              : TensorView::Contiguous(const_cast<float*>(d.bias.data()),
                                       DType::kF32, {d.out_features});
      RETURN_IF_ERROR(Linear(ctx, rows->view(), w, b, y.view()));
      if (d.tanh) {
        RETURN_IF_ERROR(Activate(ctx, Activation::kTanh, y.view(), y.view()));
      }
      *rows = std::move(y);
    }
    return absl::OkStatus();
  }

 private:
  const std::shared_ptr<const std::vector<DenseLayer>> layers_;
};

// Matryoshka: the first `dimensions` columns.
class MatryoshkaStage : public OutputStage {
 public:
  absl::string_view name() const override { return "matryoshka"; }
  absl::Status Run(const ExecutionContext&, const StageRequest& request,
                   OutputRows* rows) const override {
    const int64_t d = request.dimensions;
    if (d <= 0 || d >= rows->cols) return absl::OkStatus();
    for (int64_t r = 0; r < rows->rows; ++r) {
      std::copy_n(rows->values.begin() + static_cast<ptrdiff_t>(r * rows->cols),
                  d, rows->values.begin() + static_cast<ptrdiff_t>(r * d));
    }
    rows->cols = d;
    rows->values.resize(static_cast<size_t>(rows->rows * d));
    return absl::OkStatus();
  }
};

class NormalizeStage : public OutputStage {
 public:
  absl::string_view name() const override { return "normalize"; }
  absl::Status Run(const ExecutionContext& ctx, const StageRequest& request,
                   OutputRows* rows) const override {
    if (!request.normalize || rows->rows == 0) return absl::OkStatus();
    return L2Normalize(ctx, rows->view(), rows->view());
  }
};

class ScoresStage : public OutputStage {
 public:
  explicit ScoresStage(ScoreFunction fn) : fn_(fn) {}
  absl::string_view name() const override { return "scores"; }
  absl::Status Run(const ExecutionContext& ctx, const StageRequest& request,
                   OutputRows* rows) const override {
    if (request.raw_scores || fn_ == ScoreFunction::kRaw || rows->rows == 0) {
      return absl::OkStatus();
    }
    return Scores(ctx,
                  fn_ == ScoreFunction::kSigmoid ? ScoreMode::kSigmoid
                                                 : ScoreMode::kSoftmax,
                  rows->view(), rows->view());
  }

 private:
  const ScoreFunction fn_;
};

void AddStage(const char* name, const char* description,
              OutputStageFactory factory) {
  absl::Status s = OutputStages().Add(name, description, std::move(factory));
  (void)s;  // registered once (RegisterBuiltins' call_once)
}

template <typename Stage>
OutputStageFactory Plain() {
  return [](const OutputStageContext&)
             -> absl::StatusOr<std::unique_ptr<OutputStage>> {
    return std::unique_ptr<OutputStage>(new Stage());
  };
}

}  // namespace

Registry<OutputStageFactory>& OutputStages() {
  static auto* const registry = new Registry<OutputStageFactory>(
      "output_stage",
      "a step of the prefill tail after the output processor");
  return *registry;
}

std::vector<std::string> DefaultOutputStages(const Workflow& w) {
  if (!w.output_stages.empty()) return w.output_stages;
  if (w.Supports(Task::kEmbed)) return {"dense", "matryoshka", "normalize"};
  if (w.Supports(Task::kRerank) || w.Supports(Task::kClassify)) {
    return {"scores"};
  }
  return {};
}

absl::StatusOr<std::vector<std::unique_ptr<OutputStage>>> CreateOutputStages(
    const std::vector<std::string>& names, const OutputStageContext& context) {
  std::vector<std::unique_ptr<OutputStage>> stages;
  for (const std::string& name : names) {
    absl::StatusOr<OutputStageFactory> factory = OutputStages().Get(name);
    if (!factory.ok()) {
      return absl::InvalidArgumentError(factory.status().message());
    }
    ASSIGN_OR_RETURN(std::unique_ptr<OutputStage> stage, (*factory)(context));
    if (stage == nullptr) {
      return absl::InternalError(
          absl::StrCat("output stage ", name, " returned no instance"));
    }
    stages.push_back(std::move(stage));
  }
  return stages;
}

absl::Status RunOutputStages(const ExecutionContext& ctx,
                             const StageRequest& request,
                             const std::vector<const OutputStage*>& stages,
                             OutputRows* rows) {
  for (const OutputStage* stage : stages) {
    RETURN_IF_ERROR(stage->Run(ctx, request, rows));
  }
  return absl::OkStatus();
}

void RegisterBuiltinOutputStages() {
  AddStage("dense",
           "the model's sentence-transformers Dense modules (Linear, then "
           "tanh or identity), in order",
           [](const OutputStageContext& c)
               -> absl::StatusOr<std::unique_ptr<OutputStage>> {
             return std::unique_ptr<OutputStage>(new DenseStage(c.dense));
           });
  AddStage("matryoshka", "the request's dimensions: the first columns",
           Plain<MatryoshkaStage>());
  AddStage("normalize", "L2 normalization when the request normalizes",
           Plain<NormalizeStage>());
  AddStage("scores",
           "classifier logits -> softmax (single-label) or sigmoid "
           "(multi-label, relevance) unless the request asks for raw scores",
           [](const OutputStageContext& c)
               -> absl::StatusOr<std::unique_ptr<OutputStage>> {
             return std::unique_ptr<OutputStage>(new ScoresStage(c.scores));
           });
}

}  // namespace inferd
