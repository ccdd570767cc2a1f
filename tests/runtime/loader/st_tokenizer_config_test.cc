#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/loader/st_config.h"
#include "runtime/loader/tokenizer_config.h"
#include "tests/runtime/loader/test_util.h"

namespace inferd {
namespace {

using ::testing::HasSubstr;
using testing_util::ScratchDir;

constexpr char kModules[] = R"([
  {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
  {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
  {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}])";

TEST(StConfigTest, ReadsModulesPoolingPromptsAndLimits) {
  ScratchDir dir;
  dir.Write("modules.json", kModules);
  dir.Write("1_Pooling/config.json", R"({
    "word_embedding_dimension": 384, "pooling_mode_cls_token": false,
    "pooling_mode_mean_tokens": false, "pooling_mode_lasttoken": true,
    "include_prompt": false})");
  dir.Write("config_sentence_transformers.json", R"({
    "prompts": {"query": "query: ", "passage": "passage: "},
    "default_prompt_name": "query", "similarity_fn_name": "cosine"})");
  dir.Write("sentence_bert_config.json",
            R"({"max_seq_length": 256, "do_lower_case": true})");
  auto st = LoadSentenceTransformersConfig(dir.path());
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_TRUE(st->present);
  EXPECT_TRUE(st->has_pooling);
  EXPECT_TRUE(st->has_normalize);
  EXPECT_FALSE(st->has_dense);
  ASSERT_EQ(st->modules.size(), 3u);
  EXPECT_EQ(st->modules[1].path, "1_Pooling");  // sorted by idx
  EXPECT_EQ(st->pooling, PoolingMode::kLastToken);
  EXPECT_FALSE(st->include_prompt);
  EXPECT_EQ(st->word_embedding_dimension, 384);
  EXPECT_EQ(st->prompts.at("passage"), "passage: ");
  EXPECT_EQ(st->default_prompt_name, "query");
  EXPECT_EQ(st->similarity_fn_name, "cosine");
  EXPECT_EQ(st->max_seq_length, 256);
  EXPECT_TRUE(st->do_lower_case);
}

TEST(StConfigTest, EachPoolingFlagMapsToItsMode) {
  const std::pair<const char*, PoolingMode> flags[] = {
      {"pooling_mode_cls_token", PoolingMode::kCls},
      {"pooling_mode_mean_tokens", PoolingMode::kMean},
      {"pooling_mode_max_tokens", PoolingMode::kMax},
      {"pooling_mode_mean_sqrt_len_tokens", PoolingMode::kMeanSqrtLen},
      {"pooling_mode_weightedmean_tokens", PoolingMode::kWeightedMean},
      {"pooling_mode_lasttoken", PoolingMode::kLastToken}};
  for (const auto& [flag, mode] : flags) {
    SentenceTransformersConfig c;
    ASSERT_TRUE(ParseStPooling(absl::StrCat("{\"", flag, "\": true}"), "p", c).ok());
    EXPECT_EQ(c.pooling, mode) << flag;
    EXPECT_EQ(*ParsePoolingMode(PoolingModeName(mode)), mode);
  }
  SentenceTransformersConfig c;
  ASSERT_TRUE(ParseStPooling(R"({"pooling_mode": "mean"})", "p", c).ok());
  EXPECT_EQ(c.pooling, PoolingMode::kMean);
}

TEST(StConfigTest, RejectsAmbiguousOrMissingPooling) {
  SentenceTransformersConfig c;
  auto two = ParseStPooling(
      R"({"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": true})",
      "x/1_Pooling/config.json", c);
  EXPECT_EQ(two.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(two.message(), HasSubstr("x/1_Pooling/config.json"));
  EXPECT_THAT(two.message(), HasSubstr("pooling_mode_mean_tokens"));
  EXPECT_THAT(ParseStPooling("{}", "p", c).message(), HasSubstr("no pooling"));
  EXPECT_FALSE(ParseStPooling(R"({"pooling_mode": "median"})", "p", c).ok());
  EXPECT_FALSE(ParseStModules("{}", "m", c).ok());
  EXPECT_FALSE(ParseStPrompts(R"({"prompts": {"q": 1}})", "p", c).ok());
  EXPECT_FALSE(ParseStPrompts(R"({"prompts": {}, "default_prompt_name": "q"})",
                              "p", c).ok());

  ScratchDir dir;
  dir.Write("modules.json", kModules);  // but no 1_Pooling/config.json
  auto st = LoadSentenceTransformersConfig(dir.path());
  EXPECT_EQ(st.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.status().message(), HasSubstr("1_Pooling"));
}

TEST(StConfigTest, DirectoryWithoutModulesIsNotSentenceTransformers) {
  ScratchDir dir;
  auto st = LoadSentenceTransformersConfig(dir.path());
  ASSERT_TRUE(st.ok());
  EXPECT_FALSE(st->present);
}

TEST(StConfigTest, ReadsDenseModule) {
  ScratchDir dir;
  dir.Write("modules.json", R"([
    {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
    {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}])");
  dir.Write("1_Pooling/config.json", R"({"pooling_mode_cls_token": true})");
  dir.Write("2_Dense/config.json",
            R"({"in_features": 768, "out_features": 256, "bias": false,
                "activation_function": "torch.nn.modules.linear.Identity"})");
  auto st = LoadSentenceTransformersConfig(dir.path());
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_TRUE(st->has_dense);
  ASSERT_EQ(st->dense.size(), 1u);
  EXPECT_EQ(st->dense[0].out_features, 256);
  EXPECT_FALSE(st->dense[0].bias);
  EXPECT_EQ(st->dense[0].path, "2_Dense");
}

TEST(TokenizerConfigTest, ReadsTokensAsStringsOrAddedTokenObjects) {
  auto c = ParseTokenizerConfig(R"({
    "bos_token": {"__type": "AddedToken", "content": "<s>", "lstrip": false},
    "eos_token": "</s>", "pad_token": null, "unk_token": "<unk>",
    "add_bos_token": true, "add_eos_token": false,
    "model_max_length": 1000000000000000019884624838656,
    "chat_template": "{{ messages }}", "padding_side": "left",
    "tokenizer_class": "LlamaTokenizer"})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->bos_token, "<s>");
  EXPECT_EQ(c->eos_token, "</s>");
  EXPECT_FALSE(c->pad_token.has_value());
  EXPECT_EQ(c->add_bos_token, true);
  EXPECT_EQ(c->add_eos_token, false);
  EXPECT_FALSE(c->model_max_length.has_value()) << "1e30 means unlimited";
  EXPECT_EQ(c->chat_template, "{{ messages }}");
  EXPECT_EQ(c->padding_side, "left");
  EXPECT_EQ(c->truncation_side, "right");
  EXPECT_EQ(c->tokenizer_class, "LlamaTokenizer");
}

TEST(TokenizerConfigTest, NamedChatTemplatesAndLimits) {
  auto c = ParseTokenizerConfig(R"({
    "chat_template": [{"name": "default", "template": "A"},
                      {"name": "tool_use", "template": "B"}],
    "model_max_length": 512})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->chat_template, "A");
  EXPECT_EQ(c->named_chat_templates.at("tool_use"), "B");
  EXPECT_EQ(c->model_max_length, 512);
  EXPECT_FALSE(c->add_bos_token.has_value());
}

TEST(TokenizerConfigTest, RejectsMalformedFields) {
  for (const char* bad : {R"({"bos_token": 5})", R"({"padding_side": "up"})",
                          R"({"chat_template": 3})", R"({"model_max_length": "x"})",
                          R"({"add_bos_token": "yes"})", "[1]", "{"}) {
    auto c = ParseTokenizerConfig(bad, "t/tokenizer_config.json");
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(c.status().message(), HasSubstr("t/tokenizer_config.json")) << bad;
  }
}

TEST(TokenizerConfigTest, LoadReadsChatTemplateFileAndToleratesAbsence) {
  ScratchDir dir;
  auto none = LoadTokenizerConfig(dir.path());
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->present);
  dir.Write("tokenizer_config.json", R"({"eos_token": "<|im_end|>"})");
  dir.Write("chat_template.jinja", "{% for m in messages %}{% endfor %}");
  auto c = LoadTokenizerConfig(dir.path());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->present);
  EXPECT_EQ(c->chat_template, "{% for m in messages %}{% endfor %}");
}

TEST(TokenizerConfigTest, ParsesSharedTokenizerConfigs) {
  int parsed = 0;
  for (const char* name : {"llama2", "llama3", "mistral", "qwen3", "xlm-roberta",
                           "t5-small"}) {
    const std::string dir = absl::StrCat(testing_util::SharedDir(), "/tokenizers/", name);
    auto c = LoadTokenizerConfig(dir);
    ASSERT_TRUE(c.ok()) << name << ": " << c.status();
    if (!c->present) continue;
    ++parsed;
    EXPECT_TRUE(c->eos_token.has_value() || c->pad_token.has_value()) << name;
  }
  if (parsed == 0) GTEST_SKIP() << "shared tokenizers absent: " << testing_util::SharedDir();
}

}  // namespace
}  // namespace inferd
