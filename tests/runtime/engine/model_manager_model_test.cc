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
#include <thread>
#include <vector>

#include "device/cpu/cpu_features.h"
#include "device/device.h"
#include "gtest/gtest.h"
#include "absl/synchronization/notification.h"
#include "runtime/engine/engine.h"
#include "runtime/model/model_runner.h"

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
  (*manager)->LoadAll([&](const ServedModelInfo& m, const ServedModel*) {
    loaded.push_back(m.name);
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


// ---- models while serving --------------------------------------------------

// Records every change the manager reports; waits for one (bounded).
class Changes {
 public:
  void Add(const ServedModelInfo& info) {
    absl::MutexLock lock(&mu_);
    seen_.emplace_back(info.name, info.state);
  }
  // True once `name` reached `state` (`count` times in all).
  bool WaitFor(const std::string& name, ModelState state, int count = 1) {
    absl::MutexLock lock(&mu_);
    auto reached = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      int n = 0;
      for (const auto& [m, s] : seen_) n += m == name && s == state;
      return n >= count;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), absl::Seconds(60));
  }
  int Count(const std::string& name, ModelState state) {
    absl::MutexLock lock(&mu_);
    int n = 0;
    for (const auto& [m, s] : seen_) n += m == name && s == state;
    return n;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::pair<std::string, ModelState>> seen_ ABSL_GUARDED_BY(mu_);
};

ModelSpec Spec(const std::string& name, const std::string& model) {
  ModelSpec s;
  s.name = name;
  s.path = TestModel(model);
  s.engine.replicas = 1;
  s.engine.threads = 1;
  s.engine.kv_cache_bytes = 8 << 20;
  return s;
}

std::unique_ptr<ModelManager> Manager(std::vector<ModelSpec> specs,
                                      Changes* changes, int max_loaded = 0) {
  ModelManager::Options o;
  o.max_loaded_models = max_loaded;
  o.cancel_wait = absl::Milliseconds(200);
  o.on_change = [changes](const ServedModelInfo& i) { changes->Add(i); };
  auto m = ModelManager::Create(std::move(specs), std::move(o));
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *std::move(m) : nullptr;
}

// One embedding through the model a lease holds.
absl::StatusOr<EmbedResult> EmbedOnce(ServedModel& model) {
  EmbedParams p;
  p.token_ids = {{1, 2, 3}};
  absl::Notification done;
  absl::StatusOr<EmbedResult> out = absl::InternalError("no answer");
  auto h = model.engine().SubmitEmbed(std::move(p),
                                      [&](absl::StatusOr<EmbedResult> r) {
                                        out = std::move(r);
                                        done.Notify();
                                      });
  if (!h.ok()) return h.status();
  done.WaitForNotification();
  return out;
}

TEST(ModelManagerWhileServing, LoadServeAndUnloadANewModel) {
  Changes changes;
  auto manager = Manager({Spec("a", "bert-embed")}, &changes);
  manager->LoadAll();
  const int64_t kv_before = ProcessKvCacheBytes();
  auto info = manager->LoadModel(Spec("b", "qwen2-tiny"), false, true);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->state, ModelState::kReady);
  EXPECT_EQ(info->loads, 1);
  EXPECT_GT(ProcessKvCacheBytes(), kv_before);  // b's KV cache
  ASSERT_EQ(manager->List().size(), 2u);
  EXPECT_EQ(manager->List()[1].name, "b");
  EXPECT_TRUE(manager->Resolve("b", Task::kGenerate).ok());
  // A second load of a loaded name needs replace.
  EXPECT_EQ(manager->LoadModel(Spec("b", "qwen2-tiny"), false, true)
                .status()
                .code(),
            absl::StatusCode::kAlreadyExists);
  auto gone = manager->UnloadModel("b", std::nullopt);
  ASSERT_TRUE(gone.ok()) << gone.status();
  EXPECT_EQ(gone->state, ModelState::kUnloaded);
  // Loaded while serving: gone from the list; its KV cache returned.
  EXPECT_EQ(manager->List().size(), 1u);
  EXPECT_EQ(manager->Resolve("b", Task::kGenerate).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(ProcessKvCacheBytes(), kv_before);
  EXPECT_TRUE(changes.WaitFor("b", ModelState::kUnloading));
  EXPECT_TRUE(changes.WaitFor("b", ModelState::kUnloaded));
  // The startup model stays listed UNLOADED when unloaded, and loads again
  // as it was.
  ASSERT_TRUE(manager->UnloadModel("a", std::nullopt).ok());
  ASSERT_EQ(manager->List().size(), 1u);
  EXPECT_EQ(manager->List()[0].state, ModelState::kUnloaded);
  auto r = manager->Resolve("a", Task::kEmbed);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("LoadModel"), absl::string_view::npos)
      << r.status();
  ModelSpec again;
  again.name = "a";
  auto back = manager->LoadModel(again, false, true);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->loads, 2);
  auto lease = manager->Resolve("a", Task::kEmbed);
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_TRUE(EmbedOnce(**lease).ok());
}

TEST(ModelManagerWhileServing, UnloadDrainsTheRequestsHoldingTheModel) {
  Changes changes;
  auto manager = Manager({Spec("a", "bert-embed")}, &changes);
  manager->LoadAll();
  auto lease = manager->Resolve("a", Task::kEmbed);
  ASSERT_TRUE(lease.ok());
  absl::StatusOr<ServedModelInfo> unloaded;
  std::thread unloader(
      [&] { unloaded = manager->UnloadModel("a", std::nullopt); });
  ASSERT_TRUE(changes.WaitFor("a", ModelState::kUnloading));
  // New requests are refused at once; the held one still runs.
  EXPECT_EQ(manager->Resolve("a", Task::kEmbed).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_TRUE(EmbedOnce(**lease).ok());
  EXPECT_EQ(changes.Count("a", ModelState::kUnloaded), 0);
  lease->Release();
  unloader.join();
  ASSERT_TRUE(unloaded.ok()) << unloaded.status();
  EXPECT_EQ(unloaded->state, ModelState::kUnloaded);
}

TEST(ModelManagerWhileServing, AGracePeriodCancelsWhatIsLeft) {
  Changes changes;
  auto manager = Manager({Spec("a", "bert-embed")}, &changes);
  manager->LoadAll();
  auto lease = manager->Resolve("a", Task::kEmbed);
  ASSERT_TRUE(lease.ok());
  std::shared_ptr<ServedModel> held;
  for (const auto& m : manager->models()) held = m;
  auto unloaded = manager->UnloadModel("a", absl::ZeroDuration());
  ASSERT_TRUE(unloaded.ok()) << unloaded.status();
  EXPECT_EQ(unloaded->state, ModelState::kUnloaded);
  // Its engine stopped: the request holding it can do no more.
  EXPECT_FALSE(EmbedOnce(**lease).ok());
  lease->Release();
}

TEST(ModelManagerWhileServing, OnDemandLoadsOnTheFirstRequestAndKeepAliveUnloads) {
  Changes changes;
  ModelSpec spec = Spec("lazy", "bert-embed");
  spec.on_demand = true;
  spec.keep_alive_seconds = 0.3;
  auto manager = Manager({Spec("a", "bert-embed"), spec}, &changes);
  manager->LoadAll();
  ASSERT_EQ(manager->List()[1].state, ModelState::kUnloaded);
  EXPECT_EQ(manager->List()[1].loads, 0);
  {
    auto lease = manager->Resolve("lazy", Task::kEmbed);
    ASSERT_TRUE(lease.ok()) << lease.status();
    EXPECT_TRUE(EmbedOnce(**lease).ok());
    EXPECT_EQ(manager->List()[1].state, ModelState::kReady);
  }
  // Idle past keep_alive: unloaded by the reaper, listed UNLOADED.
  ASSERT_TRUE(changes.WaitFor("lazy", ModelState::kUnloaded));
  EXPECT_EQ(manager->List()[1].state, ModelState::kUnloaded);
  EXPECT_EQ(manager->List()[0].state, ModelState::kReady);  // no keep_alive
  // The next request loads it again.
  auto again = manager->Resolve("lazy", Task::kEmbed);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(manager->List()[1].loads, 2);
}

TEST(ModelManagerWhileServing, MaxLoadedModelsEvictsTheLeastRecentlyUsedIdle) {
  Changes changes;
  std::vector<ModelSpec> specs;
  for (const char* name : {"x", "y", "z"}) {
    specs.push_back(Spec(name, "bert-embed"));
    specs.back().on_demand = true;
  }
  auto manager = Manager(specs, &changes, /*max_loaded=*/2);
  manager->LoadAll();
  ASSERT_TRUE(manager->Resolve("x", Task::kEmbed).ok());
  ASSERT_TRUE(manager->Resolve("y", Task::kEmbed).ok());
  ASSERT_TRUE(manager->Resolve("x", Task::kEmbed).ok());  // y is now the LRU
  ASSERT_TRUE(manager->Resolve("z", Task::kEmbed).ok());
  auto list = manager->List();
  EXPECT_EQ(list[0].state, ModelState::kReady);
  EXPECT_EQ(list[1].state, ModelState::kUnloaded);
  EXPECT_EQ(list[2].state, ModelState::kReady);
  // With both loaded ones busy nothing can go.
  auto hold_x = manager->Resolve("x", Task::kEmbed);
  auto hold_z = manager->Resolve("z", Task::kEmbed);
  ASSERT_TRUE(hold_x.ok() && hold_z.ok());
  auto y = manager->Resolve("y", Task::kEmbed);
  EXPECT_EQ(y.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(y.status().message().find("max-loaded-models"),
            absl::string_view::npos)
      << y.status();
  EXPECT_EQ(manager->List()[1].state, ModelState::kUnloaded);
}

TEST(ModelManagerWhileServing, ReplaceSwapsWhileOldRequestsFinishOnTheOld) {
  Changes changes;
  auto manager = Manager({Spec("a", "bert-embed")}, &changes);
  manager->LoadAll();
  auto old_lease = manager->Resolve("a", Task::kEmbed);
  ASSERT_TRUE(old_lease.ok());
  const ServedModel* old_model = old_lease->get();
  absl::StatusOr<ServedModelInfo> swapped;
  std::thread loader([&] {
    swapped = manager->LoadModel(Spec("a", "bert-mean"), true, true);
  });
  // The new one is READY and serves while the old one still holds a
  // request: wait for the swap through the change it reports.
  ASSERT_TRUE(changes.WaitFor("a", ModelState::kReady));
  auto new_lease = manager->Resolve("a", Task::kEmbed);
  ASSERT_TRUE(new_lease.ok());
  EXPECT_NE(new_lease->get(), old_model);
  EXPECT_EQ((*new_lease)->info().pooling, "mean");
  EXPECT_TRUE(EmbedOnce(**old_lease).ok());
  old_lease->Release();
  loader.join();
  ASSERT_TRUE(swapped.ok()) << swapped.status();
  EXPECT_EQ(swapped->loads, 2);
}

TEST(ModelManagerWhileServing, AFailedLoadStaysListedWithItsError) {
  Changes changes;
  auto manager = Manager({Spec("a", "bert-embed")}, &changes);
  manager->LoadAll();
  ModelSpec bad = Spec("bad", "bert-embed");
  bad.path = "/nonexistent/dir";
  auto r = manager->LoadModel(bad, false, true);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/nonexistent/dir"),
            absl::string_view::npos)
      << r.status();
  auto info = manager->Find("bad");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->state, ModelState::kFailed);
  // Unloading a failed model removes it.
  ASSERT_TRUE(manager->UnloadModel("bad", std::nullopt).ok());
  EXPECT_EQ(manager->Find("bad").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace inferd
