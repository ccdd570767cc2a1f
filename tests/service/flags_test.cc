#include "service/flags.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "service/config_file.h"

namespace inferd {
namespace {

absl::StatusOr<ServerOptions> Parse(std::vector<const char*> args) {
  args.insert(args.begin(), "inferd");
  return ParseFlags(static_cast<int>(args.size()), args.data());
}

TEST(FlagsTest, ParsesModelsAndEngineDefaults) {
  auto o = Parse({"--model", "a=/m/a", "--model=b=/m/b,replicas=2,pooling=mean",
                  "--max-batched-tokens", "512", "--listen=0.0.0.0:9000"});
  ASSERT_TRUE(o.ok()) << o.status();
  ASSERT_EQ(o->models.size(), 2u);
  EXPECT_EQ(o->models[0].name, "a");
  EXPECT_EQ(o->models[0].path, "/m/a");
  EXPECT_EQ(o->models[1].path, "/m/b");
  EXPECT_EQ(o->models[1].engine.replicas, 2);
  EXPECT_EQ(o->models[1].overrides.pooling.value_or(""), "mean");
  // A global flag after --model still reaches every model.
  EXPECT_EQ(o->models[0].engine.max_batched_tokens, 512);
  EXPECT_EQ(o->models[1].engine.max_batched_tokens, 512);
  EXPECT_EQ(o->listen, "0.0.0.0:9000");
}

TEST(FlagsTest, PrefillBudgetAndOutputOverlapPerModel) {
  auto o = Parse({"--model", "a=/m/a",
                  "--model=b=/m/b,max-prefill-tokens-while-decoding=0,"
                  "overlap-output=false",
                  "--max-prefill-tokens-while-decoding", "32"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->models[0].engine.max_prefill_tokens_while_decoding, 32);
  EXPECT_TRUE(o->models[0].engine.overlap_output);
  EXPECT_EQ(o->models[1].engine.max_prefill_tokens_while_decoding, 0);
  EXPECT_FALSE(o->models[1].engine.overlap_output);
  EXPECT_FALSE(
      Parse({"--model", "a=/x", "--max-prefill-tokens-while-decoding", "-1"})
          .ok());
}

TEST(FlagsTest, SpeculativeDraftTokensOffByDefaultAndPerModel) {
  auto o = Parse({"--model", "a=/m/a",
                  "--model=b=/m/b,speculative-draft-tokens=0",
                  "--speculative-draft-tokens", "6"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->models[0].engine.speculative_draft_tokens, 6);
  EXPECT_EQ(o->models[1].engine.speculative_draft_tokens, 0);
  auto d = Parse({"--model", "a=/m/a"});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->models[0].engine.speculative_draft_tokens, 0);
  auto bad = Parse({"--model", "a=/x", "--speculative-draft-tokens", "17"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("speculative-draft-tokens=17"),
            std::string::npos);
}

TEST(FlagsTest, KvCacheMemoryAcceptsFractionAndSize) {
  auto f = Parse({"--model", "a=/x", "--kv-cache-memory", "0.5"});
  ASSERT_TRUE(f.ok());
  EXPECT_DOUBLE_EQ(f->engine.kv_cache_fraction, 0.5);
  EXPECT_EQ(f->engine.kv_cache_bytes, 0);
  auto g = Parse({"--model", "a=/x", "--kv-cache-memory=2GiB"});
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->engine.kv_cache_bytes, 2LL << 30);
}

TEST(FlagsTest, ToolAndReasoningParsersPerModel) {
  auto o = Parse({"--model", "a=/m/a,tool_parser=mistral,reasoning_parser=none",
                  "--model", "b=/m/b"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->models[0].overrides.tool_parser.value_or(""), "mistral");
  EXPECT_EQ(o->models[0].overrides.reasoning_parser.value_or(""), "none");
  EXPECT_FALSE(o->models[1].overrides.tool_parser.has_value());
  // A name is checked against its registry once plug-ins are loaded (a
  // plug-in may register it): here only its spelling.
  auto later = Parse({"--model", "a=/m/a,tool_parser=qwen,reasoning_parser=r1"});
  ASSERT_TRUE(later.ok()) << later.status();
  EXPECT_EQ(later->models[0].overrides.tool_parser.value_or(""), "qwen");
  EXPECT_EQ(later->models[0].overrides.reasoning_parser.value_or(""), "r1");
  auto bad = Parse({"--model", "a=/m/a,tool_parser=Qwen 2"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(
                "tool_parser must be the name of a registered format: "),
            std::string::npos)
      << bad.status();
  for (const char* name :
       {"generic", "hermes", "llama3_json", "mistral", "pythonic"}) {
    EXPECT_NE(bad.status().message().find(name), std::string::npos)
        << name << ": " << bad.status();
  }
  auto bad_reasoning = Parse({"--model", "a=/m/a,reasoning_parser=-"});
  ASSERT_FALSE(bad_reasoning.ok());
  EXPECT_NE(bad_reasoning.status().message().find("none, think"),
            std::string::npos)
      << bad_reasoning.status();
}

TEST(FlagsTest, RejectsUnknownFlagWithItsName) {
  auto o = Parse({"--model", "a=/x", "--no-such-flag", "1"});
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(o.status().message().find("--no-such-flag"), std::string::npos);
}

TEST(FlagsTest, RejectsBadValuesSayingWhatToFix) {
  auto o = Parse({"--model", "a=/x", "--max-seqs", "zero"});
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("max-seqs"), std::string::npos);
  auto d = Parse({"--model", "a=/x", "--dtype", "int4"});
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("float32, bfloat16, q8_0, q4_0, q4_1 or int8"),
            std::string::npos);
  auto act = Parse({"--model", "a=/x,activations=int4"});
  ASSERT_FALSE(act.ok());
  EXPECT_NE(act.status().message().find("expected int8 or exact"), std::string::npos);
  auto l = Parse({"--model", "a=/x", "--log-format", "xml"});
  ASSERT_FALSE(l.ok());
  auto m = Parse({"--model", "nopath"});
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("NAME=PATH"), std::string::npos);
  auto opt = Parse({"--model", "a=/x,colour=red"});
  ASSERT_FALSE(opt.ok());
  EXPECT_NE(opt.status().message().find("colour"), std::string::npos);
}

TEST(FlagsTest, RequiresAModelUnlessHelp) {
  EXPECT_FALSE(Parse({}).ok());
  auto h = Parse({"--help"});
  ASSERT_TRUE(h.ok());
  EXPECT_TRUE(h->help);
}

TEST(FlagsTest, RejectsDuplicateModelNamesAndHalfTls) {
  EXPECT_FALSE(Parse({"--model", "a=/x", "--model", "a=/y"}).ok());
  EXPECT_FALSE(Parse({"--model", "a=/x", "--tls-cert", "c.pem"}).ok());
  EXPECT_FALSE(
      Parse({"--model", "a=/x", "--api-key", "k", "--api-key-file", "f"}).ok());
}

TEST(FlagsTest, HelpListsEveryFlagItAccepts) {
  std::string help = HelpText();
  for (const char* flag :
       {"--listen", "--model", "--threads", "--max-batched-tokens",
        "--max-queue-requests", "--log-format", "--log-level",
        "--drain-timeout", "--tls-cert", "--api-key-file", "--dtype",
        "--max-prefill-tokens-while-decoding", "--overlap-output"}) {
    EXPECT_NE(help.find(flag), std::string::npos) << flag;
    // And the parser knows it (value flags need a value).
    std::vector<const char*> args = {"inferd", flag, "x"};
    auto o = ParseFlags(3, args.data());
    if (!o.ok()) {
      EXPECT_EQ(o.status().message().find("unknown flag"), std::string::npos)
          << flag;
    }
  }
}

TEST(FlagsTest, HealthListenTakesHostPort) {
  auto o = Parse({"--model", "a=/x", "--health-listen", "0.0.0.0:8081"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->health_listen, "0.0.0.0:8081");
  EXPECT_TRUE(Parse({"--model", "a=/x"})->health_listen.empty());
  auto bad = Parse({"--model", "a=/x", "--health-listen", "8081"});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("--health-listen"), std::string::npos);
}

TEST(FlagsTest, ApiKeyAndApiKeyFileAreExclusive) {
  auto both = Parse({"--model", "a=/x", "--api-key", "k", "--api-key-file",
                     "/k"});
  EXPECT_EQ(both.status().code(), absl::StatusCode::kInvalidArgument);
  auto one = Parse({"--model", "a=/x", "--api-key-file", "/run/key"});
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->api_key_file, "/run/key");
}

// --config files, INFERD_* variables and flags (issue 24).
class ConfigSourcesTest : public ::testing::Test {
 protected:
  absl::StatusOr<ServerOptions> Run(std::vector<const char*> args) {
    args.insert(args.begin(), "inferd");
    return ParseFlags(static_cast<int>(args.size()), args.data(),
                      [this](const std::string& name) {
                        auto it = env_.find(name);
                        return it == env_.end()
                                   ? absl::optional<std::string>()
                                   : absl::optional<std::string>(it->second);
                      });
  }
  std::string WriteConfig(const std::string& text) {
    // One file per test and process: ctest runs these tests in parallel.
    path_ = ::testing::TempDir() + "/inferd_flags_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name() +
            "_" + std::to_string(getpid()) + ".yaml";
    std::ofstream(path_) << text;
    return path_;
  }
  void TearDown() override { std::remove(path_.c_str()); }

  std::map<std::string, std::string> env_;
  std::string path_;
};

TEST_F(ConfigSourcesTest, FileGivesSettingsAndModelsWithOptions) {
  const std::string f = WriteConfig(
      "max-seqs: 8\nthreads: 2\nallow-partial-start: true\n"
      "max-connection-age: 120\n"
      "models:\n"
      "  - {name: a, path: /m/a, task: embed, pooling: mean, replicas: 3}\n"
      "  - name: b\n    path: /m/b\n    max-seqs: 4\n    dtype: q8_0\n"
      "    activations: exact\n"
      "plugins: [/p.so]\n");
  auto o = Run({"--config", f.c_str()});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->engine.max_seqs, 8);
  EXPECT_TRUE(o->allow_partial_start);
  EXPECT_DOUBLE_EQ(o->max_connection_age_seconds, 120);
  ASSERT_EQ(o->models.size(), 2u);
  EXPECT_EQ(o->models[0].overrides.task.value_or(""), "embed");
  EXPECT_EQ(o->models[0].overrides.pooling.value_or(""), "mean");
  EXPECT_EQ(o->models[0].engine.replicas, 3);
  EXPECT_EQ(o->models[0].engine.threads, 2);  // inherited
  EXPECT_EQ(o->models[0].engine.max_seqs, 8);
  EXPECT_EQ(o->models[1].engine.max_seqs, 4);
  EXPECT_EQ(o->models[1].engine.dtype, "q8_0");
  EXPECT_EQ(o->models[1].engine.activations, "exact");
  EXPECT_EQ(o->models[0].engine.activations, "int8");  // the default
  EXPECT_EQ(o->plugins, std::vector<std::string>{"/p.so"});
  EXPECT_EQ(o->sources.at("max-seqs"), "--config " + f);
}

TEST_F(ConfigSourcesTest, FlagsBeatEnvironmentBeatsFile) {
  const std::string f = WriteConfig(
      "max-seqs: 8\nmax-batched-tokens: 100\nblock-size: 32\n"
      "models: [{name: a, path: /m/a}]\n");
  env_["INFERD_MAX_SEQS"] = "16";
  env_["INFERD_MAX_BATCHED_TOKENS"] = "200";
  env_["INFERD_SHARED_DIR"] = "/not/a/flag";  // other INFERD_ names ignored
  auto o = Run({"--config", f.c_str(), "--max-seqs", "32"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->engine.max_seqs, 32);
  EXPECT_EQ(o->engine.max_batched_tokens, 200);
  EXPECT_EQ(o->engine.block_size, 32);
  EXPECT_EQ(o->sources.at("max-seqs"), "flag");
  EXPECT_EQ(o->sources.at("max-batched-tokens"), "env INFERD_MAX_BATCHED_TOKENS");
  // Models inherit the final server-wide values.
  EXPECT_EQ(o->models[0].engine.max_seqs, 32);
  EXPECT_EQ(o->models[0].engine.max_batched_tokens, 200);
}

TEST_F(ConfigSourcesTest, ModelFlagReplacesTheFilesModelOfThatName) {
  const std::string f = WriteConfig(
      "models: [{name: a, path: /m/a}, {name: b, path: /m/b}]\n");
  auto o = Run({"--config", f.c_str(), "--model", "a=/other,max-seqs=2"});
  ASSERT_TRUE(o.ok()) << o.status();
  ASSERT_EQ(o->models.size(), 2u);
  EXPECT_EQ(o->models[0].name, "b");
  EXPECT_EQ(o->models[1].path, "/other");
  EXPECT_EQ(o->models[1].engine.max_seqs, 2);
}

TEST_F(ConfigSourcesTest, ErrorsNameTheSourceAndTheKey) {
  std::string f = WriteConfig("max-seq: 8\nmodels: [{name: a, path: /m}]\n");
  auto o = Run({"--config", f.c_str()});
  EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(o.status().message().find(f), std::string::npos);
  EXPECT_NE(o.status().message().find("unknown key 'max-seq'"),
            std::string::npos);
  f = WriteConfig("models: [{name: a, path: /m, max-seqs: none}]\n");
  o = Run({"--config", f.c_str()});
  EXPECT_NE(o.status().message().find("models[0]: --max-seqs=none"),
            std::string::npos)
      << o.status();
  f = WriteConfig("models: [{name: a, path: /m}, {name: a, path: /n}]\n");
  o = Run({"--config", f.c_str()});
  EXPECT_NE(o.status().message().find("given twice"), std::string::npos);
  env_["INFERD_LOG_FORMAT"] = "xml";
  o = Run({"--model", "a=/m"});
  EXPECT_NE(o.status().message().find("environment variable INFERD_LOG_FORMAT"),
            std::string::npos)
      << o.status();
}

TEST_F(ConfigSourcesTest, PrintedConfigReadsBackTheSame) {
  auto o = Run({"--model", "a=/m/a,max-seqs=3,task=embed", "--threads", "2",
                "--kv-cache-memory", "1GiB", "--api-key", "secret",
                "--max-connection-age", "30"});
  ASSERT_TRUE(o.ok()) << o.status();
  const std::string printed = ConfigYaml(*o);
  EXPECT_EQ(printed.find("secret"), std::string::npos);
  auto raw = ParseConfigText(printed, "printed");
  ASSERT_TRUE(raw.ok()) << raw.status() << "\n" << printed;
  const std::string f = WriteConfig(printed);
  auto back = Run({"--config", f.c_str()});
  ASSERT_TRUE(back.ok()) << back.status() << "\n" << printed;
  EXPECT_EQ(ConfigYaml(*back).size() > 0, true);
  EXPECT_EQ(back->engine.threads, 2);
  EXPECT_EQ(back->engine.kv_cache_bytes, int64_t{1} << 30);
  EXPECT_DOUBLE_EQ(back->max_connection_age_seconds, 30);
  ASSERT_EQ(back->models.size(), 1u);
  EXPECT_EQ(back->models[0].engine.max_seqs, 3);
  EXPECT_EQ(back->models[0].overrides.task.value_or(""), "embed");
}

}  // namespace
}  // namespace inferd
