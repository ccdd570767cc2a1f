#include "runtime/engine/workflow.h"

#include <algorithm>

#include "gtest/gtest.h"
#include "runtime/common/registry.h"
#include "runtime/engine/components.h"
#include "runtime/engine/output_stages.h"
#include "runtime/engine/token_heads.h"
#include "runtime/loader/model_config.h"
#include "runtime/model/attention_backend.h"
#include "runtime/model/model_registry.h"

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
  const std::vector<std::string> workflows = Workflows().Names();
  ASSERT_GE(workflows.size(), 6u);
  for (const std::string& name : workflows) {
    const Workflow* w = Workflows().Find(name);
    ASSERT_NE(w, nullptr) << name;
    EXPECT_TRUE(InputProcessors().Contains(w->input_processor)) << name;
    EXPECT_TRUE(SchedulerKind(*w).Contains(w->scheduler)) << name;
    EXPECT_TRUE(AttentionBackends().Contains(w->attention_backend)) << name;
    EXPECT_TRUE(Executors().Contains(w->executor)) << name;
    EXPECT_TRUE(OutputKind(*w).Contains(
        w->output_processor == kPoolingOutput
            ? PoolingComponent(w->default_pooling)
            : w->output_processor))
        << name;
    for (const std::string& stage : w->output_stages) {
      EXPECT_TRUE(OutputStages().Contains(stage)) << name << " " << stage;
    }
    for (const std::string& head : w->token_heads) {
      EXPECT_TRUE(TokenHeads().Contains(head)) << name << " " << head;
    }
  }
  // A generation workflow's scheduler and sampler live in their own kinds.
  const Workflow* generate = Workflows().Find("causal_generate");
  ASSERT_NE(generate, nullptr);
  EXPECT_EQ(SchedulerKind(*generate).kind(), "batching_scheduler");
  EXPECT_EQ(OutputKind(*generate).kind(), "sampler");
  EXPECT_TRUE(Samplers().Contains(generate->output_processor));
  EXPECT_FALSE(OutputProcessors().Contains(generate->output_processor));
  EXPECT_FALSE(PrefillSchedulers().Contains(generate->scheduler));
  // Every architecture's workflows exist, and so does its model class.
  for (const std::string& arch : Architectures().Names()) {
    const ArchitectureSpec* a = Architectures().Find(arch);
    ASSERT_NE(a, nullptr) << arch;
    EXPECT_TRUE(Workflows().Contains(a->default_workflow)) << arch;
    for (const auto& [task, wf] : a->task_workflows) {
      EXPECT_TRUE(Workflows().Contains(wf)) << arch;
    }
    EXPECT_TRUE(ModelClasses().Contains(
        a->model_class.empty() ? arch : a->model_class))
        << arch;
  }
}

TEST(WorkflowTest, ANewArchitectureIsOneRegistration) {
  // An architecture served by an existing model class under a new name,
  // with its own default workflow.
  ArchitectureSpec spec;
  spec.model_class = "BertModel";
  spec.default_workflow = "encoder_embed";
  spec.task_workflows = {{"embed", "encoder_embed"}};
  ASSERT_TRUE(
      Architectures().Add("TestBertAlias", "test", spec, "workflow_test").ok());
  SentenceTransformersConfig st;
  ModelConfig c = Config("BertModel", "bert");
  c.architectures = {"TestBertAlias"};
  auto w = SelectWorkflow(c, st, {});
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->name, "encoder_embed");
  EXPECT_EQ(w->model_class, "BertModel");
  // Registering the same name twice is refused, naming both origins.
  absl::Status again = Architectures().Add("TestBertAlias", "test", spec,
                                           "second");
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(again.message().find("workflow_test"), std::string::npos);
  EXPECT_NE(again.message().find("second"), std::string::npos);
}

TEST(RegistryTest, OneTypedTablePerKind) {
  Registry<int> r("test_kind", "integers for a test");
  ASSERT_TRUE(r.Add("a", "the first", 42).ok());
  EXPECT_EQ(*r.Get("a"), 42);
  ASSERT_NE(r.Find("a"), nullptr);
  EXPECT_EQ(*r.Find("a"), 42);
  EXPECT_EQ(r.Find("b"), nullptr);
  auto missing = r.Get("b");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("no test_kind named 'b'"),
            std::string::npos)
      << missing.status();
  EXPECT_NE(missing.status().message().find("registered: a"),
            std::string::npos);
  EXPECT_EQ(r.Add("", "empty", 1).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(r.Add("c", "", 7, "plugin.so").ok());
  const std::vector<RegistryListing> listed = r.List();
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].origin, "builtin");
  EXPECT_EQ(listed[1].origin, "plugin.so");
  EXPECT_EQ(listed[1].kind, "test_kind");
  // Every kind is in the catalog --list-components prints, sorted.
  std::vector<std::string> kinds;
  for (const RegistryKind* k : RegistryKind::All()) kinds.push_back(k->kind());
  EXPECT_TRUE(std::is_sorted(kinds.begin(), kinds.end()));
  for (const char* kind :
       {"architecture", "attention_backend", "batching_scheduler",
        "config_parser", "device", "executor", "input_processor", "model",
        "model_runner", "output_processor", "output_stage",
        "prefill_scheduler", "reasoning_parser", "sampler", "test_kind",
        "token_head", "tool_parser", "workflow"}) {
    EXPECT_NE(std::find(kinds.begin(), kinds.end(), kind), kinds.end())
        << kind;
  }
}

TEST(RegistryTest, AnEmptyKindSaysTheBuiltinsWereNotRegistered) {
  Registry<int> r("empty_kind", "nothing registered");
  auto missing = r.Get("x");
  EXPECT_NE(missing.status().message().find("RegisterBuiltins"),
            std::string::npos)
      << missing.status();
}

}  // namespace
}  // namespace inferd
