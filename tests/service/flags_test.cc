#include "service/flags.h"

#include <vector>

#include "gtest/gtest.h"

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

}  // namespace
}  // namespace inferd
