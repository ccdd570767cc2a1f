// ModelManager over generated tiny models: loading, cancelling a load at
// startup (SIGTERM while models load), the component check, and models
// whose files are broken failing alone.
#include "runtime/engine/model_manager.h"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "device/cpu/cpu_features.h"
#include "device/device.h"
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

// dtype=auto (the default): encoders get bfloat16 exactly where the CPU's
// BF16 products are in use (AVX512_BF16 and --bf16-gemm not widen), every
// other model float32; a named dtype is kept. ListModels shows the result.
TEST(ModelManagerTest, DtypeAutoGivesEncodersBf16WhereTheCpuHasFastBf16) {
  const Bf16GemmPolicy saved = GetBf16GemmPolicy();
  for (Bf16GemmPolicy policy : {Bf16GemmPolicy::kDot, Bf16GemmPolicy::kWiden}) {
    SetBf16GemmPolicy(policy);
    const bool fast = policy == Bf16GemmPolicy::kDot && ActiveCpuIsa() >= CpuIsa::kAvx512Bf16;
    absl::StatusOr<Device*> cpu = DeviceRegistry::Get("cpu");
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    EXPECT_EQ((*cpu)->fast_bf16_products(), fast);
    std::vector<ModelSpec> specs = Specs(3);
    ASSERT_EQ(specs[0].engine.dtype, "auto");  // the default
    specs[1].path = TestModel("llama-tiny");
    specs[2].engine.dtype = "float32";
    auto manager = ModelManager::Create(specs);
    ASSERT_TRUE(manager.ok()) << manager.status();
    const auto& models = (*manager)->models();
    EXPECT_EQ(models[0]->info().dtype, fast ? "bfloat16" : "float32");
    EXPECT_EQ(models[0]->spec().engine.dtype, models[0]->info().dtype);
    EXPECT_EQ(models[1]->info().dtype, "float32");  // a decoder
    EXPECT_EQ(models[2]->info().dtype, "float32");  // named
  }
  SetBf16GemmPolicy(saved);
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

TEST(ModelManagerTest, UnregisteredOutputFormatsAreAStartupError) {
  std::vector<ModelSpec> specs = Specs(1);
  specs[0].path = TestModel("llama-tiny");
  specs[0].overrides.tool_parser = "qwen_xml";
  auto manager = ModelManager::Create(specs);
  ASSERT_FALSE(manager.ok());
  EXPECT_EQ(manager.status().code(), absl::StatusCode::kFailedPrecondition);
  std::string msg(manager.status().message());
  EXPECT_NE(msg.find("tool_parser 'qwen_xml', which is not registered "
                     "(registered: generic, hermes, llama3_json, mistral, pythonic)"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("--plugin"), std::string::npos) << msg;
  specs[0].overrides.tool_parser = "hermes";
  specs[0].overrides.reasoning_parser = "deepseek_r1";
  manager = ModelManager::Create(specs);
  ASSERT_FALSE(manager.ok());
  msg = std::string(manager.status().message());
  EXPECT_NE(msg.find("reasoning_parser 'deepseek_r1'"), std::string::npos)
      << msg;
  specs[0].overrides.reasoning_parser = "think";
  manager = ModelManager::Create(specs);
  EXPECT_TRUE(manager.ok()) << manager.status();
}

// Decoder rerankers: a causal LM with task=rerank runs decoder_rerank with
// the qwen3 format; a format that is not registered, one whose score
// tokens the tokenizer lacks, and the option on an encoder are refused
// with what to change.
TEST(ModelManagerTest, DecoderRerankerFormats) {
  auto Has = [](const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
  };
  std::vector<ModelSpec> specs = Specs(1);
  specs[0].path = TestModel("qwen3-reranker-tiny");
  specs[0].overrides.task = "rerank";
  auto manager = ModelManager::Create(specs);
  ASSERT_TRUE(manager.ok()) << manager.status();
  EXPECT_EQ((*manager)->models()[0]->workflow().name, "decoder_rerank");
  (*manager)->LoadAll();
  EXPECT_EQ((*manager)->models()[0]->state(), ModelState::kReady)
      << (*manager)->models()[0]->info().error;

  specs[0].overrides.rerank_format = "no_such_format";
  manager = ModelManager::Create(specs);
  ASSERT_FALSE(manager.ok());
  std::string msg(manager.status().message());
  EXPECT_TRUE(Has(msg, "rerank_format 'no_such_format', which is not "
                            "registered (registered: bge_gemma, qwen3)"))
      << msg;

  // qwen3-tiny's small vocabulary has no "no" / "yes" token.
  specs[0].path = TestModel("qwen3-tiny");
  specs[0].overrides.rerank_format.reset();
  manager = ModelManager::Create(specs);
  ASSERT_TRUE(manager.ok()) << manager.status();
  (*manager)->LoadAll();
  ASSERT_EQ((*manager)->models()[0]->state(), ModelState::kFailed);
  msg = (*manager)->models()[0]->info().error;
  EXPECT_TRUE(Has(msg, "scores with the token 'no'")) << msg;
  EXPECT_TRUE(Has(msg, "rerank_format=NAME")) << msg;

  specs[0].path = TestModel("xlmr-reranker");
  specs[0].overrides.rerank_format = "qwen3";
  manager = ModelManager::Create(specs);
  ASSERT_FALSE(manager.ok());
  msg = std::string(manager.status().message());
  EXPECT_TRUE(Has(msg, "only applies to a causal LM served with "
                            "task=rerank"))
      << msg;
}

// A scratch directory removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = ::testing::TempDir() + "/inferd-mm-XXXXXX";
    path_ = mkdtemp(tmpl.data()) != nullptr ? tmpl : "";
  }
  ~TempDir() {
    if (!path_.empty()) std::filesystem::remove_all(path_);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(ModelManagerTest, MissingTokenizerFailsOnlyItsModel) {
  TempDir tmp;
  ASSERT_FALSE(tmp.path().empty());
  const std::string dir = tmp.path() + "/no-tokenizer";
  std::filesystem::copy(TestModel("bert-embed"), dir,
                        std::filesystem::copy_options::recursive);
  std::filesystem::remove(dir + "/tokenizer.json");
  std::vector<ModelSpec> specs = Specs(2);
  specs[1].name = "broken";
  specs[1].path = dir;
  auto manager = ModelManager::Create(specs);
  ASSERT_TRUE(manager.ok()) << manager.status();
  (*manager)->LoadAll();
  const auto& models = (*manager)->models();
  EXPECT_EQ(models[0]->state(), ModelState::kReady);
  ASSERT_EQ(models[1]->state(), ModelState::kFailed);
  const std::string error = models[1]->info().error;
  EXPECT_TRUE(Contains(error, "model 'broken'")) << error;
  EXPECT_TRUE(Contains(error, dir + "/tokenizer.json")) << error;
  EXPECT_TRUE(Contains(error, "does not exist")) << error;
  // Its workflow is known (config.json was fine) and reported.
  EXPECT_EQ(models[1]->info().workflow, models[0]->info().workflow);
  auto r = (*manager)->Resolve("broken", Task::kEmbed);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(Contains(std::string(r.status().message()), "tokenizer.json"))
      << r.status();
  EXPECT_TRUE((*manager)->Resolve("m0", Task::kEmbed).ok());
}

TEST(ModelManagerTest, UnreadableGgufFileFailsOnlyItsModel) {
  TempDir tmp;
  ASSERT_FALSE(tmp.path().empty());
  // A GGUF header whose one tensor has ggml type 99, which no reader knows.
  const std::string path = tmp.path() + "/model.gguf";
  {
    std::ofstream f(path, std::ios::binary);
    auto u32 = [&](uint32_t v) { f.write(reinterpret_cast<char*>(&v), 4); };
    auto u64 = [&](uint64_t v) { f.write(reinterpret_cast<char*>(&v), 8); };
    auto str = [&](const std::string& s) {
      u64(s.size());
      f.write(s.data(), static_cast<std::streamsize>(s.size()));
    };
    u32(0x46554747);
    u32(3);
    u64(1);  // tensors
    u64(1);  // metadata entries
    str("general.architecture");
    u32(8);
    str("llama");
    str("token_embd.weight");
    u32(2);
    u64(32);
    u64(4);
    u32(99);
    u64(0);
    f.write(std::string(4096, '\0').data(), 4096);
  }
  std::vector<ModelSpec> specs = Specs(2);
  specs[1].name = "gguf";
  specs[1].path = path;
  auto manager = ModelManager::Create(specs);
  ASSERT_TRUE(manager.ok()) << manager.status();
  const ServedModel& bad = *(*manager)->models()[1];
  // FAILED before any load: the file told nothing about the model.
  EXPECT_EQ(bad.state(), ModelState::kFailed);
  const std::string error = bad.info().error;
  EXPECT_TRUE(Contains(error, "model 'gguf'")) << error;
  EXPECT_TRUE(Contains(error, path)) << error;
  EXPECT_TRUE(Contains(error, "ggml type 99")) << error;
  EXPECT_TRUE(bad.info().workflow.empty());
  (*manager)->LoadAll();
  EXPECT_EQ((*manager)->models()[0]->state(), ModelState::kReady);
  EXPECT_EQ(bad.state(), ModelState::kFailed);
  EXPECT_EQ(bad.info().error, error);
  // Whatever task a request asks of it, the answer is why it failed.
  for (Task task : {Task::kGenerate, Task::kEmbed}) {
    auto r = (*manager)->Resolve("gguf", task);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_TRUE(Contains(std::string(r.status().message()), "ggml type 99"))
        << r.status();
  }
}

TEST(ModelManagerTest, AMissingGgufFileIsAStartupError) {
  std::vector<ModelSpec> specs = Specs(1);
  specs[0].path = "/nonexistent/model.gguf";
  auto manager = ModelManager::Create(specs);
  ASSERT_FALSE(manager.ok());
  EXPECT_EQ(manager.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(Contains(std::string(manager.status().message()),
                       "/nonexistent/model.gguf"))
      << manager.status();
}

}  // namespace
}  // namespace inferd
