#include "absl/strings/str_cat.h"
#include "runtime/engine/engine.h"
#include "runtime/engine/model_manager.h"

namespace inferd {
namespace {

// Placeholder until the workflow engines land: every task answers
// UNIMPLEMENTED naming what is missing.
class UnbuiltEngine : public Engine {
 public:
  explicit UnbuiltEngine(std::string workflow) : workflow_(std::move(workflow)) {}
  absl::StatusOr<std::shared_ptr<RequestHandle>> SubmitEmbed(
      EmbedParams, ResultCallback<EmbedResult>) override {
    return Missing();
  }
  absl::StatusOr<std::shared_ptr<RequestHandle>> SubmitClassify(
      ClassifyParams, ResultCallback<ClassifyResult>) override {
    return Missing();
  }
  absl::StatusOr<std::shared_ptr<RequestHandle>> SubmitRerank(
      RerankParams, ResultCallback<RerankResult>) override {
    return Missing();
  }
  absl::StatusOr<std::shared_ptr<RequestHandle>> SubmitGenerate(
      GenerateParams, GenerateCallback) override {
    return Missing();
  }
  EngineStats Stats() const override { return {}; }
  void Stop() override {}

 private:
  absl::Status Missing() const {
    return absl::UnimplementedError(absl::StrCat(
        "the ", workflow_, " engine (scheduler, model runner and output "
        "processor) is not built into this inferd yet"));
  }
  std::string workflow_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Engine>> CreateEngine(const ServedModel& model) {
  return std::make_unique<UnbuiltEngine>(model.workflow().name);
}

}  // namespace inferd
