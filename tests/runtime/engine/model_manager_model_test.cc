// ModelManager over generated tiny models: loading, cancelling a load at
// startup (SIGTERM while models load), and the component check.
#include "runtime/engine/model_manager.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/engine/engine.h"

namespace inferd {
namespace {

std::string TestModel(const std::string& name) {
  return std::string(INFERD_TEST_MODELS_DIR) + "/" + name;
}

std::vector<ModelSpec> Specs(int n) {
  std::vector<ModelSpec> specs;
  for (int i = 0; i < n; ++i) {
    ModelSpec s;
    s.name = "m" + std::to_string(i);
    s.path = TestModel("bert-embed");
    s.engine.replicas = 1;
    s.engine.threads = 1;
    specs.push_back(s);
  }
  return specs;
}

TEST(ModelManagerTest, CancelLoadingStopsBeforeTheRemainingModels) {
  auto manager = ModelManager::Create(Specs(4));
  ASSERT_TRUE(manager.ok()) << manager.status();
  std::vector<std::string> loaded;
  (*manager)->LoadAll([&](const ServedModel& m) {
    loaded.push_back(m.name());
    // As SIGTERM does while the first model loads.
    if (loaded.size() == 1) (*manager)->CancelLoading();
  });
  EXPECT_TRUE((*manager)->AllLoaded());
  const auto& models = (*manager)->models();
  ASSERT_EQ(models.size(), 4u);
  EXPECT_EQ(models[0]->state(), ModelState::kReady);
  for (size_t i = 1; i < models.size(); ++i) {
    EXPECT_EQ(models[i]->state(), ModelState::kFailed) << i;
    EXPECT_NE(models[i]->info().error.find("shut down"), std::string::npos)
        << models[i]->info().error;
    // Never loaded: no weights were read.
    EXPECT_EQ(models[i]->info().weight_tensors, 0) << i;
  }
  // Every model was still reported, in order.
  EXPECT_EQ(loaded, (std::vector<std::string>{"m0", "m1", "m2", "m3"}));
  // The ready model serves.
  auto r = (*manager)->Resolve("m0", Task::kEmbed);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*manager)->Resolve("m1", Task::kEmbed).status().code(),
            absl::StatusCode::kUnavailable);
}

TEST(ModelManagerTest, MaxPoolingWithoutItsComponentIsAStartupError) {
  std::vector<ModelSpec> specs = Specs(1);
  specs[0].path = TestModel("bert-maxpool");
  auto manager = ModelManager::Create(specs);
  ASSERT_FALSE(manager.ok());
  EXPECT_EQ(manager.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string msg(manager.status().message());
  EXPECT_NE(msg.find("pooling_max"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--plugin"), std::string::npos) << msg;
  EXPECT_NE(msg.find("pooling=mean"), std::string::npos) << msg;
  // Choosing a registered pooling serves the same directory.
  specs[0].overrides.pooling = "mean";
  auto with_mean = ModelManager::Create(specs);
  ASSERT_TRUE(with_mean.ok()) << with_mean.status();
  EXPECT_EQ((*with_mean)->models()[0]->output_processor(), "pooling_mean");
  EXPECT_EQ((*with_mean)->models()[0]->info().components.at("output_processor"),
            "pooling_mean");
}

}  // namespace
}  // namespace inferd
