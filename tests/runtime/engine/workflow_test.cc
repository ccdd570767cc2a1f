#include "runtime/engine/workflow.h"

#include "gtest/gtest.h"
#include "runtime/loader/model_config.h"

namespace inferd {
namespace {

ModelConfig Config(const std::string& arch, const std::string& model_type,
                   int num_labels = 2) {
  std::string json = R"({"architectures": [")" + arch + R"("], "model_type": ")" +
                     model_type + R"(", "vocab_size": 100, "hidden_size": 16,
      "num_hidden_layers": 1, "num_attention_heads": 8, "num_key_value_heads": 2,
      "intermediate_size": 32, "num_labels": )" +
                     std::to_string(num_labels) + "}";
  auto c = ParseModelConfig(json);
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

TEST(WorkflowTest, SelectsByArchitecture) {
  SentenceTransformersConfig st;
  struct Case {
    std::string arch, type, workflow, backend;
  } cases[] = {
      {"BertModel", "bert", "encoder_embed", "bidirectional_prefill"},
      {"XLMRobertaModel", "xlm-roberta", "encoder_embed", "bidirectional_prefill"},
      {"LlamaForCausalLM", "llama", "causal_generate", "causal_paged"},
      {"MistralForCausalLM", "mistral", "causal_generate", "causal_paged"},
      {"Qwen2ForCausalLM", "qwen2", "causal_generate", "causal_paged"},
      {"Qwen2Model", "qwen2", "decoder_embed", "causal_prefill"},
      {"MistralModel", "mistral", "decoder_embed", "causal_prefill"},
  };
  for (const Case& c : cases) {
    auto w = SelectWorkflow(Config(c.arch, c.type), st, {});
    ASSERT_TRUE(w.ok()) << c.arch << ": " << w.status();
    EXPECT_EQ(w->name, c.workflow) << c.arch;
    EXPECT_EQ(w->attention_backend, c.backend) << c.arch;
    EXPECT_EQ(w->model_class, c.arch);
  }
}

TEST(WorkflowTest, ClassificationHeadsPickRerankOrClassifyByLabels) {
  SentenceTransformersConfig st;
  auto rerank = SelectWorkflow(
      Config("XLMRobertaForSequenceClassification", "xlm-roberta", 1), st, {});
  ASSERT_TRUE(rerank.ok());
  EXPECT_EQ(rerank->kind, WorkflowKind::kCrossEncoderRerank);
  EXPECT_TRUE(rerank->Supports(Task::kRerank));
  auto classify = SelectWorkflow(
      Config("BertForSequenceClassification", "bert", 3), st, {});
  ASSERT_TRUE(classify.ok());
  EXPECT_EQ(classify->kind, WorkflowKind::kEncoderClassify);
  EXPECT_FALSE(classify->Supports(Task::kRerank));
  ModelOverrides o;
  o.task = "rerank";
  EXPECT_FALSE(SelectWorkflow(Config("BertForSequenceClassification", "bert", 3),
                              st, o)
                   .ok());
}

TEST(WorkflowTest, OverridesTaskAndBidirectional) {
  SentenceTransformersConfig st;
  ModelOverrides embed;
  embed.task = "embed";
  embed.bidirectional = true;
  auto w = SelectWorkflow(Config("MistralForCausalLM", "mistral"), st, embed);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->kind, WorkflowKind::kDecoderEmbed);
  EXPECT_TRUE(w->bidirectional);
  EXPECT_EQ(w->attention_backend, "bidirectional_prefill");

  ModelOverrides gen;
  gen.task = "generate";
  auto bad = SelectWorkflow(Config("BertModel", "bert"), st, gen);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(WorkflowTest, CausalLmWithSentenceTransformersPoolingEmbeds) {
  SentenceTransformersConfig st;
  st.present = true;
  st.has_pooling = true;
  auto w = SelectWorkflow(Config("Qwen2ForCausalLM", "qwen2"), st, {});
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->kind, WorkflowKind::kDecoderEmbed);
}

TEST(WorkflowTest, UnknownArchitectureListsSupportedOnes) {
  SentenceTransformersConfig st;
  ModelConfig c = Config("LlamaForCausalLM", "llama");
  c.architectures = {"GPTNeoXForCausalLM"};
  auto w = SelectWorkflow(c, st, {});
  ASSERT_FALSE(w.ok());
  std::string msg(w.status().message());
  EXPECT_NE(msg.find("GPTNeoXForCausalLM"), std::string::npos);
  for (const std::string& arch : WorkflowArchitectures()) {
    EXPECT_NE(msg.find(arch), std::string::npos) << arch;
  }
}

}  // namespace
}  // namespace inferd
