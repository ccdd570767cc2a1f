// Opens every tiny model written by tools/make_test_models.py (the
// test_models fixture) through OpenModelDirectory and checks that configs,
// sentence-transformers files and tensor shapes agree with each other.
#include <sys/stat.h>

#include <ostream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/loader/model_dir.h"

namespace inferd {
namespace {

std::string ModelPath(const std::string& name) {
  return absl::StrCat(INFERD_TEST_MODELS_DIR, "/", name);
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

struct Expect {
  const char* name;
  const char* model_type;
  const char* arch;
  bool st;
  PoolingMode pooling;
  int64_t labels;  // 0 = no classification head
};

void PrintTo(const Expect& e, std::ostream* os) { *os << e.name; }

class TestModelsTest : public ::testing::TestWithParam<Expect> {};

TEST_P(TestModelsTest, OpensAndShapesAgreeWithConfig) {
  const Expect& e = GetParam();
  const std::string path = ModelPath(e.name);
  if (!Exists(path + "/config.json")) {
    GTEST_SKIP() << "test model not generated: " << path
                 << " (run tools/make_test_models.py or the make_test_models test)";
  }
  auto md = OpenModelDirectory(path, /*load_weights=*/true);
  ASSERT_TRUE(md.ok()) << md.status();
  const ModelConfig& c = md->config;
  EXPECT_EQ(c.model_type, e.model_type);
  EXPECT_EQ(c.architectures[0], e.arch);
  EXPECT_EQ(md->st.present, e.st);
  if (e.st) {
    EXPECT_EQ(md->st.pooling, e.pooling);
    EXPECT_EQ(md->st.word_embedding_dimension, c.hidden_size);
  }
  const WeightStore& w = *md->weights;
  const std::string embed =
      c.IsEncoder() ? "embeddings.word_embeddings.weight" : "embed_tokens.weight";
  auto name = w.FindWithPrefixes(embed);
  ASSERT_TRUE(name.ok()) << name.status();
  auto table = w.Get(*name);
  ASSERT_TRUE(table.ok());
  EXPECT_EQ(table->dim(0), c.vocab_size);
  EXPECT_EQ(table->dim(1), c.hidden_size);
  for (int64_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    // Phi-3 stores q|k|v as one projection.
    auto fused = w.FindWithPrefixes(
        absl::StrCat("layers.", layer, ".self_attn.qkv_proj.weight"));
    if (!c.IsEncoder() && fused.ok()) {
      EXPECT_EQ(
          w.Get(*fused)->dim(0),
          (c.num_attention_heads + 2 * c.num_key_value_heads) * c.head_dim);
      continue;
    }
    const std::string k =
        c.IsEncoder()
            ? absl::StrCat("encoder.layer.", layer, ".attention.self.key.weight")
            : absl::StrCat("layers.", layer, ".self_attn.k_proj.weight");
    auto kn = w.FindWithPrefixes(k);
    ASSERT_TRUE(kn.ok()) << kn.status();
    EXPECT_EQ(w.Get(*kn)->dim(0), c.num_key_value_heads * c.head_dim);
  }
  if (c.IsCausalLM()) {
    EXPECT_EQ(w.Has("lm_head.weight"), !c.tie_word_embeddings);
  }
  if (e.labels > 0) {
    EXPECT_EQ(c.num_labels, e.labels);
    const char* head = c.model_type == "bert" ? "classifier.weight"
                                              : "classifier.out_proj.weight";
    auto h = w.Get(head);
    ASSERT_TRUE(h.ok()) << h.status();
    EXPECT_EQ(h->dim(0), e.labels);
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllTiny, TestModelsTest,
    ::testing::Values(
        Expect{"bert-embed", "bert", "BertModel", true, PoolingMode::kCls, 0},
        Expect{"bert-mean", "bert", "BertModel", true, PoolingMode::kMean, 0},
        Expect{"xlmr-embed", "xlm-roberta", "XLMRobertaModel", true,
               PoolingMode::kCls, 0},
        Expect{"bert-classifier", "bert", "BertForSequenceClassification",
               false, PoolingMode::kCls, 3},
        Expect{"bert-multilabel", "bert", "BertForSequenceClassification",
               false, PoolingMode::kCls, 4},
        Expect{"xlmr-reranker", "xlm-roberta",
               "XLMRobertaForSequenceClassification", false, PoolingMode::kCls, 1},
        Expect{"llama-tiny", "llama", "LlamaForCausalLM", false,
               PoolingMode::kCls, 0},
        Expect{"mistral-tiny", "mistral", "MistralForCausalLM", false,
               PoolingMode::kCls, 0},
        Expect{"qwen2-tiny", "qwen2", "Qwen2ForCausalLM", false,
               PoolingMode::kCls, 0},
        Expect{"smollm3-tiny", "smollm3", "SmolLM3ForCausalLM", false,
               PoolingMode::kCls, 0},
        Expect{"phi3-tiny", "phi3", "Phi3ForCausalLM", false, PoolingMode::kCls,
               0},
        Expect{"gemma2-tiny", "gemma2", "Gemma2ForCausalLM", false,
               PoolingMode::kCls, 0},
        Expect{"gemma3-tiny", "gemma3_text", "Gemma3ForCausalLM", false,
               PoolingMode::kCls, 0},
        Expect{"qwen2-embed", "qwen2", "Qwen2Model", true,
               PoolingMode::kLastToken, 0},
        Expect{"mistral-embed", "mistral", "MistralModel", true,
               PoolingMode::kLastToken, 0}),
    [](const ::testing::TestParamInfo<Expect>& info) {
      std::string n = info.param.name;
      for (char& ch : n) {
        if (ch == '-') ch = '_';
      }
      return n;
    });

TEST(TestModelsTest, TinyModelSpecificsMatchTheGeneratorContract) {
  if (!Exists(ModelPath("llama-tiny") + "/config.json")) {
    GTEST_SKIP() << "test models not generated in " << INFERD_TEST_MODELS_DIR;
  }
  auto llama = OpenModelDirectory(ModelPath("llama-tiny"), false);
  ASSERT_TRUE(llama.ok()) << llama.status();
  ASSERT_TRUE(llama->config.rope_scaling.has_value());
  EXPECT_EQ(llama->config.rope_scaling->type, "llama3");
  EXPECT_LT(llama->config.num_key_value_heads, llama->config.num_attention_heads);
  auto mistral = OpenModelDirectory(ModelPath("mistral-tiny"), false);
  ASSERT_TRUE(mistral.ok());
  EXPECT_EQ(mistral->config.SlidingWindowForLayer(0), 16);
  auto qwen = OpenModelDirectory(ModelPath("qwen2-tiny"), false);
  ASSERT_TRUE(qwen.ok());
  EXPECT_TRUE(qwen->config.tie_word_embeddings);
  EXPECT_TRUE(qwen->config.attention_bias);
  auto bert = OpenModelDirectory(ModelPath("bert-embed"), false);
  ASSERT_TRUE(bert.ok());
  EXPECT_TRUE(bert->st.has_normalize);
  EXPECT_EQ(bert->st.prompts.at("query"), "query: ");
  auto multi = OpenModelDirectory(ModelPath("bert-multilabel"), false);
  ASSERT_TRUE(multi.ok());
  EXPECT_EQ(multi->config.problem_type, "multi_label_classification");
}

}  // namespace
}  // namespace inferd
