// ConfigParser registry: lookups, refusals and a family added by one
// registration (runtime/loader/config_parser.h).
#include "runtime/loader/config_parser.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/common/registry.h"

namespace inferd {
namespace {

using ::testing::HasSubstr;
using ::testing::IsSupersetOf;

nlohmann::json Minimal(const std::string& arch, const std::string& type) {
  return {{"architectures", {arch}}, {"model_type", type},
          {"vocab_size", 100},       {"hidden_size", 64},
          {"num_hidden_layers", 4},  {"num_attention_heads", 4}};
}

TEST(ConfigParserTest, BuiltinsAreRegisteredAndListed) {
  EXPECT_THAT(ConfigParserModelTypes(),
              IsSupersetOf({"bert", "roberta", "xlm-roberta", "llama",
                            "mistral", "qwen2", "qwen3", "smollm3", "phi3",
                            "gemma2", "gemma3_text"}));
  bool listed = false;
  for (const RegistryListing& e : ConfigParsers().List()) {
    if (e.name != "qwen3") continue;
    listed = true;
    EXPECT_EQ(e.kind, "config_parser");
    EXPECT_EQ(e.origin, "builtin");
    EXPECT_FALSE(e.description.empty());
  }
  EXPECT_TRUE(listed);
  auto qwen3 = FindConfigParser("qwen3");
  ASSERT_TRUE(qwen3.ok()) << qwen3.status();
  EXPECT_TRUE(qwen3->defaults.qk_norm);
  EXPECT_EQ(qwen3->defaults.head_dim, 128);
  EXPECT_FALSE(qwen3->defaults.is_encoder);
  auto roberta = FindConfigParser("roberta");
  ASSERT_TRUE(roberta.ok());
  EXPECT_TRUE(roberta->defaults.is_encoder);
  EXPECT_TRUE(roberta->defaults.position_ids_after_padding);
}

TEST(ConfigParserTest, UnknownModelTypeNamesItAndListsTheKnownOnes) {
  auto p = FindConfigParser("gpt2");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(), HasSubstr("'gpt2'"));
  for (const char* known : {"bert", "xlm-roberta", "llama", "qwen3"}) {
    EXPECT_THAT(p.status().message(), HasSubstr(known));
  }
  EXPECT_THAT(p.status().message(), HasSubstr("--plugin"));

  auto c = ParseModelConfig(Minimal("GPT2LMHeadModel", "gpt2").dump(),
                            "m/config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("m/config.json"));
  EXPECT_THAT(c.status().message(), HasSubstr("'gpt2'"));
  EXPECT_THAT(c.status().message(), HasSubstr("GPT2LMHeadModel"));
  EXPECT_THAT(c.status().message(), HasSubstr("qwen2"));
  EXPECT_THAT(c.status().message(), HasSubstr("--plugin"));

  // No model_type and an architecture no parser claims.
  nlohmann::json j = Minimal("Qwen2MoeForCausalLM", "");
  j.erase("model_type");
  auto moe = ParseModelConfig(j.dump(), "m/config.json");
  ASSERT_FALSE(moe.ok());
  EXPECT_THAT(moe.status().message(), HasSubstr("Qwen2MoeForCausalLM"));
  EXPECT_THAT(moe.status().message(), HasSubstr("--plugin"));
  EXPECT_EQ(ModelTypeForArchitecture("Qwen2MoeForCausalLM").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(*ModelTypeForArchitecture("XLMRobertaModel"), "xlm-roberta");
  EXPECT_EQ(*ModelTypeForArchitecture("RobertaForSequenceClassification"),
            "roberta");
}

TEST(ConfigParserTest, DuplicateAndEmptyRegistrationsAreRefused) {
  absl::Status dup =
      AddConfigParser("bert", "another bert", ConfigParser(), "test.so");
  EXPECT_EQ(dup.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(dup.message(), HasSubstr("bert"));
  EXPECT_THAT(dup.message(), HasSubstr("builtin"));
  // The built-in is untouched.
  auto bert = FindConfigParser("bert");
  ASSERT_TRUE(bert.ok());
  EXPECT_TRUE(bert->defaults.is_encoder);

  ASSERT_TRUE(
      AddConfigParser("dup_test_type", "first", ConfigParser(), "a.so").ok());
  absl::Status again =
      AddConfigParser("dup_test_type", "second", ConfigParser(), "b.so");
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(again.message(), HasSubstr("a.so"));

  EXPECT_EQ(AddConfigParser("", "nameless", ConfigParser(), "c.so").code(),
            absl::StatusCode::kInvalidArgument);
}

// A new family: defaults as data plus a hook for its own keys, found by
// model_type and (without one) by its architecture prefix.
TEST(ConfigParserTest, ANewFamilyIsOneRegistration) {
  auto llama = FindConfigParser("llama");
  ASSERT_TRUE(llama.ok());
  ConfigParser p = *llama;
  p.architecture_prefix = "TestFam";
  p.defaults.intermediate_size = 96;
  p.defaults.rms_norm_eps = 1e-5;
  p.defaults.qk_norm = true;
  p.defaults.eos_token_ids = {7};
  p.read_extra = [](const nlohmann::json& json, absl::string_view source,
                    ModelConfig& c) -> absl::Status {
    // "window_from_layer": sliding window (of 8) from that layer on.
    auto it = json.find("window_from_layer");
    if (it == json.end()) return absl::OkStatus();
    if (!it->is_number_integer()) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": field 'window_from_layer' must be an integer"));
    }
    c.sliding_window = 8;
    c.use_sliding_window = true;
    c.max_window_layers = it->get<int64_t>();
    return absl::OkStatus();
  };
  ASSERT_TRUE(AddConfigParser("test_family", "test", p, "test.so").ok());

  nlohmann::json j = Minimal("TestFamForCausalLM", "test_family");
  auto plain = ParseModelConfig(j.dump());
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->model_type, "test_family");
  EXPECT_TRUE(plain->IsDecoder());
  EXPECT_EQ(plain->intermediate_size, 96);
  EXPECT_DOUBLE_EQ(plain->rms_norm_eps, 1e-5);
  EXPECT_TRUE(plain->qk_norm);
  EXPECT_EQ(plain->eos_token_ids, std::vector<int64_t>{7});
  EXPECT_FALSE(plain->SlidingWindowForLayer(3).has_value());

  j["window_from_layer"] = 2;
  j["intermediate_size"] = 128;  // the file wins over the defaults
  j.erase("model_type");         // found by its architecture prefix
  auto windowed = ParseModelConfig(j.dump());
  ASSERT_TRUE(windowed.ok()) << windowed.status();
  EXPECT_EQ(windowed->model_type, "test_family");
  EXPECT_EQ(windowed->intermediate_size, 128);
  EXPECT_FALSE(windowed->SlidingWindowForLayer(1).has_value());
  EXPECT_EQ(windowed->SlidingWindowForLayer(2), 8);

  j["window_from_layer"] = "two";
  auto bad = ParseModelConfig(j.dump(), "t/config.json");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("t/config.json"));
  EXPECT_THAT(bad.status().message(), HasSubstr("window_from_layer"));
}

}  // namespace
}  // namespace inferd
