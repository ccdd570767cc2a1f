#include "runtime/engine/workflow.h"

#include "gtest/gtest.h"
#include "runtime/common/registry.h"
#include "runtime/engine/components.h"
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
  EXPECT_EQ(rerank->name, "cross_encoder_rerank");
  EXPECT_EQ(rerank->output_processor, "relevance_scores");
  EXPECT_TRUE(rerank->Supports(Task::kRerank));
  auto classify = SelectWorkflow(
      Config("BertForSequenceClassification", "bert", 3), st, {});
  ASSERT_TRUE(classify.ok());
  EXPECT_EQ(classify->name, "encoder_classify");
  EXPECT_EQ(classify->output_processor, "label_scores");
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
  EXPECT_EQ(w->name, "decoder_embed_bidirectional");
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
  EXPECT_EQ(w->name, "decoder_embed");
  EXPECT_EQ(w->input_processor, "embed_tokenizer_eos");
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

TEST(WorkflowTest, ConfigIsCausalFalseSelectsTheBidirectionalVariant) {
  SentenceTransformersConfig st;
  ModelConfig c = Config("Qwen2Model", "qwen2");
  c.is_causal = false;
  auto w = SelectWorkflow(c, st, {});
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->attention_backend, "bidirectional_prefill");
  // A causal LM asked to generate has no bidirectional variant.
  ModelConfig lm = Config("LlamaForCausalLM", "llama");
  lm.is_causal = false;
  EXPECT_EQ(SelectWorkflow(lm, st, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Encoders are never causal.
  ModelOverrides causal;
  causal.bidirectional = false;
  EXPECT_EQ(SelectWorkflow(Config("BertModel", "bert"), st, causal)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(WorkflowTest, EveryBuiltinRecipeNamesRegisteredComponents) {
  RegisterBuiltinComponents();
  const Registry& r = Registry::Global();
  const std::vector<std::string> workflows = r.Names(registry_kind::kWorkflow);
  ASSERT_GE(workflows.size(), 6u);
  for (const std::string& name : workflows) {
    auto w = r.Get<Workflow>(registry_kind::kWorkflow, name);
    ASSERT_TRUE(w.ok()) << name;
    EXPECT_NE(r.Find(registry_kind::kInputProcessor, w->input_processor),
              nullptr) << name;
    EXPECT_NE(r.Find(registry_kind::kScheduler, w->scheduler), nullptr) << name;
    EXPECT_NE(r.Find(registry_kind::kAttentionBackend, w->attention_backend),
              nullptr) << name;
    EXPECT_NE(r.Find(registry_kind::kExecutor, w->executor), nullptr) << name;
    if (w->output_processor == kPoolingOutput) {
      EXPECT_NE(r.Find(registry_kind::kOutputProcessor,
                       PoolingComponent(w->default_pooling)),
                nullptr) << name;
    } else {
      EXPECT_NE(r.Find(registry_kind::kOutputProcessor, w->output_processor),
                nullptr) << name;
    }
  }
  // Every architecture's workflows exist, and so does its model class.
  for (const std::string& arch : r.Names(registry_kind::kArchitecture)) {
    auto a = r.Get<ArchitectureSpec>(registry_kind::kArchitecture, arch);
    ASSERT_TRUE(a.ok()) << arch;
    EXPECT_NE(r.Find(registry_kind::kWorkflow, a->default_workflow), nullptr)
        << arch;
    for (const auto& [task, wf] : a->task_workflows) {
      EXPECT_NE(r.Find(registry_kind::kWorkflow, wf), nullptr) << arch;
    }
    EXPECT_NE(r.Find(registry_kind::kModel,
                     a->model_class.empty() ? arch : a->model_class),
              nullptr) << arch;
  }
}

TEST(WorkflowTest, ANewArchitectureIsOneRegistration) {
  RegisterBuiltinComponents();
  // An architecture served by an existing model class under a new name,
  // with its own default workflow.
  ArchitectureSpec spec;
  spec.model_class = "BertModel";
  spec.default_workflow = "encoder_embed";
  spec.task_workflows = {{"embed", "encoder_embed"}};
  ASSERT_TRUE(Registry::Global()
                  .Add({registry_kind::kArchitecture, "TestBertAlias",
                        "test", "workflow_test", spec})
                  .ok());
  SentenceTransformersConfig st;
  ModelConfig c = Config("BertModel", "bert");
  c.architectures = {"TestBertAlias"};
  auto w = SelectWorkflow(c, st, {});
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->name, "encoder_embed");
  EXPECT_EQ(w->model_class, "BertModel");
  // Registering the same name twice is refused, naming both origins.
  absl::Status again = Registry::Global().Add(
      {registry_kind::kArchitecture, "TestBertAlias", "test", "second", spec});
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(again.message().find("workflow_test"), std::string::npos);
}

TEST(RegistryTest, GetChecksTheValueType) {
  Registry r;
  ASSERT_TRUE(r.Add({"thing", "a", "", "", 42}).ok());
  EXPECT_EQ(*r.Get<int>("thing", "a"), 42);
  EXPECT_EQ(r.Get<std::string>("thing", "a").status().code(),
            absl::StatusCode::kInvalidArgument);
  auto missing = r.Get<int>("thing", "b");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("registered: a"), std::string::npos);
  EXPECT_EQ(r.Find("thing", "a")->origin, "builtin");
}

}  // namespace
}  // namespace inferd
