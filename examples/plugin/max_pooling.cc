// An inferd plug-in: max pooling (sentence-transformers
// `pooling_mode_max_tokens`) as the output processor "pooling_max".
//
// Built with the project (target inferd_max_pooling ->
// build/examples/plugin/libinferd_max_pooling.so) and loaded with
//   inferd --plugin build/examples/plugin/libinferd_max_pooling.so
//          --model NAME=PATH
// A model whose 1_Pooling/config.json asks for max pooling then serves it,
// and any embedder takes requests with pooling POOLING_MAX. See
// docs/plugins.md.
#include <algorithm>
#include <limits>
#include <memory>
#include <vector>

#include "runtime/engine/plugin_api.h"

namespace {

class MaxPooling : public inferd::OutputProcessor {
 public:
  absl::string_view name() const override { return "pooling_max"; }

  // Every token's final hidden state.
  inferd::StepOutput step_output() const override {
    return inferd::StepOutput::kHiddenStates;
  }

  // Element-wise max over rows [pool_start, rows): sentence-transformers
  // takes the max over the tokens its attention mask keeps, which for one
  // unpadded sequence is all of them (prompt tokens excluded when the model
  // says so).
  absl::StatusOr<std::vector<float>> Process(
      const inferd::SequenceResult& r,
      const inferd::OutputRequest& request) const override {
    if (r.rows <= 0 || r.cols <= 0 ||
        r.values.size() != static_cast<size_t>(r.rows) * r.cols) {
      return absl::InternalError("pooling_max: no hidden states");
    }
    const int32_t start = std::clamp<int32_t>(request.pool_start, 0, r.rows - 1);
    std::vector<float> out(static_cast<size_t>(r.cols),
                           -std::numeric_limits<float>::infinity());
    for (int32_t i = start; i < r.rows; ++i) {
      const float* row = r.values.data() + static_cast<size_t>(i) * r.cols;
      for (int32_t j = 0; j < r.cols; ++j) out[j] = std::max(out[j], row[j]);
    }
    return out;
  }
};

absl::Status Register(inferd::PluginRegistrar& registrar) {
  return registrar.AddOutputProcessor(
      "pooling_max",
      "element-wise max of the input's hidden states (sentence-transformers "
      "pooling_mode_max_tokens)",
      [](const inferd::OutputProcessorContext&)
          -> absl::StatusOr<std::unique_ptr<inferd::OutputProcessor>> {
        return std::unique_ptr<inferd::OutputProcessor>(new MaxPooling());
      });
}

}  // namespace

INFERD_PLUGIN(Register)
