// RegisterBuiltins and the engine layer's built-in entries: input
// processors, schedulers, output processors, samplers, output stages, token
// heads, executors, workflow recipes and architectures. The layers below
// register their own (devices: device/device_registry.cc; config parsers:
// runtime/loader/config_parser.cc; model classes, attention backends and
// model runners: RegisterModelBuiltins in runtime/model/model_registry.cc;
// tool-call and reasoning formats: runtime/chat/tool_parser.cc).
// Adding a model family is its ConfigParser, one model file in
// runtime/model with its model-class registration, and its architecture
// entry here.
#include "runtime/engine/builtins.h"

#include <mutex>

#include "absl/strings/str_cat.h"
#include "runtime/chat/tool_parser.h"
#include "runtime/common/registry.h"
#include "runtime/engine/components.h"
#include "runtime/engine/m3_output.h"
#include "runtime/engine/token_heads.h"
#include "runtime/engine/executors.h"
#include "runtime/engine/input_processor.h"
#include "runtime/engine/output_processor.h"
#include "runtime/engine/output_stages.h"
#include "runtime/engine/prefill_scheduler.h"
#include "runtime/engine/rerank_format.h"
#include "runtime/engine/workflow.h"
#include "runtime/gen/sampler.h"
#include "runtime/gen/scheduler.h"
#include "runtime/loader/config_parser.h"
#include "runtime/model/attention_backend.h"
#include "runtime/model/model_registry.h"
#include "runtime/model/model_runner.h"

namespace inferd {
namespace {

template <typename T, typename V>
void Add(Registry<T>& registry, const std::string& name,
         const std::string& description, V value) {
  absl::Status s = registry.Add(name, description, T(std::move(value)));
  (void)s;  // RegisterBuiltins' call_once: built-ins are registered once
}

void AddInput(const char* name, unsigned tasks, bool append_eos,
              const char* description) {
  Add(InputProcessors(), name, description,
      InputProcessorFactory(
          [name = std::string(name), tasks, append_eos](
              const InputProcessorContext& ctx)
              -> absl::StatusOr<std::unique_ptr<InputProcessor>> {
            InputProcessorOptions o = ctx.options;
            if (append_eos && !ctx.eos_token_ids.empty()) {
              o.append_eos = ctx.eos_token_ids[0];
            }
            return std::unique_ptr<InputProcessor>(
                new TokenizingInputProcessor(name, tasks, ctx.tokenizer, o));
          }));
}

void AddPooling(Pooling pooling, const char* mode, const char* description) {
  Add(OutputProcessors(), PoolingComponent(mode), description,
      OutputProcessorFactory([pooling](const OutputProcessorContext&)
                                 -> absl::StatusOr<std::unique_ptr<OutputProcessor>> {
        return CreatePoolingProcessor(pooling);
      }));
}

void AddWorkflow(Workflow w) {
  const std::string name = w.name;
  const std::string description = w.description;
  Add(Workflows(), name, description, std::move(w));
}

Workflow Recipe(const char* name, const char* description,
                std::vector<Task> tasks, const char* input,
                const char* scheduler, const char* attention,
                const char* output, const char* executor) {
  Workflow w;
  w.name = name;
  w.description = description;
  w.tasks = std::move(tasks);
  w.input_processor = input;
  w.scheduler = scheduler;
  w.attention_backend = attention;
  w.output_processor = output;
  w.executor = executor;
  return w;
}

void AddArchitecture(const char* architecture, const char* description,
                     ArchitectureSpec spec) {
  Add(Architectures(), std::string(architecture), description,
      std::move(spec));
}

// The architecture kinds inferd serves.
ArchitectureSpec Encoder() {
  ArchitectureSpec a;
  a.default_workflow = "encoder_embed";
  a.task_workflows = {{"embed", "encoder_embed"}};
  return a;
}

ArchitectureSpec EncoderWithHead() {
  ArchitectureSpec a;
  a.default_workflow = "encoder_classify";
  a.task_workflows = {{"embed", "encoder_embed"},
                      {"classify", "encoder_classify"},
                      {"rerank", "cross_encoder_rerank"}};
  // A 1-logit head is a cross-encoder (reranks and classifies); more
  // labels classify.
  a.choose_default = [](const ModelConfig& c, const SentenceTransformersConfig&) {
    return std::string(c.num_labels == 1 ? "cross_encoder_rerank"
                                         : "encoder_classify");
  };
  a.check = [](const std::string& workflow, const ModelConfig& c) {
    if (workflow == "cross_encoder_rerank" && c.num_labels != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "architecture ", c.architectures[0],
          ": task=rerank needs a 1-label cross-encoder; this head has ",
          c.num_labels, " labels (use task=classify)"));
    }
    return absl::OkStatus();
  };
  return a;
}

ArchitectureSpec CausalLm() {
  ArchitectureSpec a;
  a.default_workflow = "causal_generate";
  a.task_workflows = {{"generate", "causal_generate"},
                      {"embed", "decoder_embed"},
                      {"rerank", "decoder_rerank"}};
  // A causal LM that ships sentence-transformers pooling is an embedder
  // (gte-Qwen2 style) unless told otherwise.
  a.choose_default = [](const ModelConfig&,
                        const SentenceTransformersConfig& st) {
    return std::string(st.present && st.has_pooling ? "decoder_embed" : "");
  };
  return a;
}

ArchitectureSpec DecoderBase() {
  ArchitectureSpec a;
  a.default_workflow = "decoder_embed";
  a.task_workflows = {{"embed", "decoder_embed"}};
  return a;
}

void RegisterInputProcessors() {
  using TIP = TokenizingInputProcessor;
  AddInput("embed_tokenizer", TIP::kEmbed, false,
           "texts (with the model's prompt prefixes) -> ids with special "
           "tokens; truncation or a clear error past the model's limit");
  AddInput("embed_tokenizer_eos", TIP::kEmbed, true,
           "embed_tokenizer that ends every input with EOS (decoder "
           "embedders)");
  AddInput("classify_tokenizer", TIP::kClassify, false,
           "texts or text pairs -> ids for a classification head");
  AddInput("pair_tokenizer", TIP::kRerank | TIP::kClassify, false,
           "(query, document) pairs -> ids for a cross-encoder; truncates "
           "the document only");
  AddInput("prompt_tokenizer", TIP::kPrompt, false,
           "prompt text -> ids (or ids as given) for generation");
  Add(InputProcessors(), "decoder_rerank_prompt",
      "(query, document) pairs in a decoder reranker's prompt (its "
      "rerank_format) -> ids; cuts the pair's end",
      InputProcessorFactory([](const InputProcessorContext& ctx)
                                -> absl::StatusOr<std::unique_ptr<InputProcessor>> {
        return NewDecoderRerankInput(ctx.tokenizer, ctx.options);
      }));
}

void RegisterRerankFormats() {
  // Qwen3-Reranker's prompt (its model card): a yes/no judge.
  RerankFormat qwen3;
  qwen3.prefix =
      "<|im_start|>system\nJudge whether the Document meets the requirements "
      "based on the Query and the Instruct provided. Note that the answer "
      "can only be \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n";
  qwen3.pair = "<Instruct>: {instruction}\n<Query>: {query}\n<Document>: {document}";
  qwen3.suffix = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n";
  qwen3.instruction =
      "Given a web search query, retrieve relevant passages that answer the "
      "query";
  qwen3.score_tokens = {"no", "yes"};
  Add(RerankFormats(), "qwen3",
      "Qwen3-Reranker: a yes/no judge of the document against the query; "
      "score = P(yes)",
      std::move(qwen3));
  // bge-reranker-v2-gemma's (FlagEmbedding's LLM reranker): BOS, "A:
  // query", "\n", "B: passage", "\n" and the prompt, each tokenized apart;
  // the score is the logit of "Yes" at the last position.
  RerankFormat bge;
  bge.prefix = "{bos}";
  bge.pair = "A: {query}{split}\n{split}B: {document}";
  bge.suffix = "\n{split}{instruction}";
  bge.instruction =
      "Given a query A and a passage B, determine whether the passage "
      "contains an answer to the query by providing a prediction of either "
      "'Yes' or 'No'.";
  bge.score_tokens = {"Yes"};
  Add(RerankFormats(), "bge_gemma",
      "bge-reranker-v2-gemma (FlagEmbedding's LLM reranker): score = "
      "sigmoid(logit of Yes)",
      std::move(bge));
}

void RegisterSchedulers() {
  Add(PrefillSchedulers(), "prefill_only",
      "first come, first served batches of whole sequences up to a token "
      "budget; no KV cache, no preemption",
      PrefillSchedulerFactory([](const PrefillSchedulerOptions& o) {
        return std::unique_ptr<PrefillScheduler>(new PrefillOnlyScheduler(o));
      }));
  Add(BatchingSchedulers(), "continuous_batching",
      "continuous batching over a paged KV cache with chunked prefill, "
      "prefix caching and preemption by recompute",
      BatchingSchedulerFactory([](const SchedulerConfig& c) {
        return std::make_unique<ContinuousBatchingScheduler>(c);
      }));
}

void RegisterOutputProcessors() {
  AddPooling(Pooling::kCls, "cls", "first token's hidden state");
  AddPooling(Pooling::kMean, "mean",
             "mean of the input's hidden states (prompt tokens excluded when "
             "the model says so)");
  AddPooling(Pooling::kLast, "last", "last token's hidden state");
  Add(OutputProcessors(), "label_scores",
      "classifier logits per label (the scores stage applies softmax or "
      "sigmoid)",
      OutputProcessorFactory([](const OutputProcessorContext&)
                                 -> absl::StatusOr<std::unique_ptr<OutputProcessor>> {
        return CreateLogitsProcessor("label_scores");
      }));
  Add(OutputProcessors(), "token_logit_scores",
      "a decoder reranker's last-position logits of its format's tokens "
      "(logit(yes) - logit(no); the scores stage applies the sigmoid)",
      OutputProcessorFactory([](const OutputProcessorContext& ctx) {
        return CreateTokenLogitScores(ctx.score_token_ids);
      }));
  Add(OutputProcessors(), "relevance_scores",
      "a cross-encoder's relevance logit (the scores stage applies the "
      "sigmoid)",
      OutputProcessorFactory([](const OutputProcessorContext&)
                                 -> absl::StatusOr<std::unique_ptr<OutputProcessor>> {
        return CreateLogitsProcessor("relevance_scores");
      }));
  Add(Samplers(), "sample_detokenize",
      "logits -> penalties, temperature, top-k/p, min-p sampling; then "
      "incremental detokenization and stop checks",
      SamplerFactory([](int32_t vocab) {
        return std::make_unique<Sampler>(vocab);
      }));
}

void RegisterExecutors() {
  Add(Executors(), "prefill_loop",
      "replica loops (one model runner each) pulling batches from a prefill "
      "scheduler",
      ExecutorFactory(&BuildPrefillLoop));
  Add(Executors(), "continuous_batching_loop",
      "one engine loop: schedule, run, sample, detokenize, stream",
      ExecutorFactory(&BuildContinuousBatchingLoop));
}

// The embedding workflows' tail after pooling, in sentence-transformers'
// order.
std::vector<std::string> EmbeddingTail() {
  return {"dense", "matryoshka", "normalize"};
}

// The token heads every embedding workflow offers (present when the model
// directory has their files).
std::vector<std::string> EmbeddingTokenHeads() {
  return {"bge_m3_sparse", "bge_m3_colbert"};
}

void RegisterTokenHeads() {
  Add(TokenHeads(), "bge_m3_sparse",
      "BGE-M3 sparse lexical weights (sparse_linear): outputs.sparse",
      TokenHeadFactory(&NewM3SparseHead));
  Add(TokenHeads(), "bge_m3_colbert",
      "BGE-M3 ColBERT vectors (colbert_linear): outputs.multi_vector",
      TokenHeadFactory(&NewM3ColbertHead));
}

void RegisterWorkflows() {
  AddWorkflow(Recipe("causal_generate", "decoder LM generation",
                     {Task::kGenerate}, "prompt_tokenizer",
                     "continuous_batching", "causal_paged",
                     "sample_detokenize", "continuous_batching_loop"));
  {
    Workflow w = Recipe("encoder_embed", "encoder -> pooling -> embedding",
                        {Task::kEmbed}, "embed_tokenizer", "prefill_only",
                        "bidirectional_prefill", kPoolingOutput,
                        "prefill_loop");
    w.default_pooling = "cls";
    w.output_stages = EmbeddingTail();
    w.token_heads = EmbeddingTokenHeads();
    AddWorkflow(std::move(w));
  }
  {
    Workflow w = Recipe("decoder_embed",
                        "causal decoder -> pooling (last token) -> embedding",
                        {Task::kEmbed}, "embed_tokenizer_eos", "prefill_only",
                        "causal_prefill", kPoolingOutput, "prefill_loop");
    w.default_pooling = "last";
    w.bidirectional_variant = "decoder_embed_bidirectional";
    w.output_stages = EmbeddingTail();
    w.token_heads = EmbeddingTokenHeads();
    AddWorkflow(std::move(w));
  }
  {
    Workflow w = Recipe("decoder_embed_bidirectional",
                        "decoder without its causal mask (LLM2Vec style) -> "
                        "pooling -> embedding",
                        {Task::kEmbed}, "embed_tokenizer_eos", "prefill_only",
                        "bidirectional_prefill", kPoolingOutput,
                        "prefill_loop");
    w.default_pooling = "last";
    w.output_stages = EmbeddingTail();
    w.token_heads = EmbeddingTokenHeads();
    AddWorkflow(std::move(w));
  }
  {
    Workflow w = Recipe("encoder_classify",
                        "encoder + classification head -> label scores",
                        {Task::kClassify}, "classify_tokenizer",
                        "prefill_only", "bidirectional_prefill",
                        "label_scores", "prefill_loop");
    w.output_stages = {"scores"};
    AddWorkflow(std::move(w));
  }
  {
    Workflow w = Recipe("cross_encoder_rerank",
                        "encoder + 1-logit head over (query, document) "
                        "pairs -> relevance",
                        {Task::kRerank, Task::kClassify}, "pair_tokenizer",
                        "prefill_only", "bidirectional_prefill",
                        "relevance_scores", "prefill_loop");
    w.output_stages = {"scores"};
    AddWorkflow(std::move(w));
  }
  {
    Workflow w = Recipe("decoder_rerank",
                        "causal LM judging (query, document) pairs in its "
                        "rerank format's prompt -> relevance from the "
                        "last position's token logits",
                        {Task::kRerank}, "decoder_rerank_prompt",
                        "prefill_only", "causal_prefill",
                        "token_logit_scores", "prefill_loop");
    w.output_stages = {"scores"};
    AddWorkflow(std::move(w));
  }
}

void RegisterArchitectures() {
  AddArchitecture("BertModel", "BERT encoder", Encoder());
  AddArchitecture("XLMRobertaModel", "XLM-RoBERTa encoder", Encoder());
  AddArchitecture("BertForSequenceClassification",
                  "BERT classifier or cross-encoder", EncoderWithHead());
  AddArchitecture("XLMRobertaForSequenceClassification",
                  "XLM-RoBERTa classifier or cross-encoder",
                  EncoderWithHead());
  AddArchitecture("RobertaModel", "RoBERTa encoder", Encoder());
  AddArchitecture("RobertaForSequenceClassification",
                  "RoBERTa classifier or cross-encoder", EncoderWithHead());
  AddArchitecture("JinaBertModel", "JinaBERT v2 encoder (ALiBi)", Encoder());
  AddArchitecture("JinaBertForMaskedLM",
                  "JinaBERT v2 encoder (its masked-LM head unused)", Encoder());
  AddArchitecture("MPNetModel", "MPNet encoder", Encoder());
  AddArchitecture("MPNetForMaskedLM",
                  "MPNet encoder (its masked-LM head unused)", Encoder());
  AddArchitecture("NomicBertModel", "NomicBERT encoder (nomic-embed-text)",
                  Encoder());
  AddArchitecture("NewModel", "GTE \"new\" encoder (gte-base-en-v1.5)",
                  Encoder());
  AddArchitecture("GteModel", "GTE encoder (transformers' layout)",
                  Encoder());
  AddArchitecture("ModernBertModel",
                  "ModernBERT encoder (gte-modernbert, modernbert-embed)",
                  Encoder());
  AddArchitecture("ModernBertForMaskedLM",
                  "ModernBERT encoder (its masked-LM head unused)", Encoder());
  AddArchitecture("LlamaForCausalLM", "Llama causal LM", CausalLm());
  AddArchitecture("GemmaForCausalLM",
                  "Gemma 1 causal LM (bge-reranker-v2-gemma with task=rerank)",
                  CausalLm());
  AddArchitecture("MistralForCausalLM", "Mistral causal LM", CausalLm());
  AddArchitecture("Qwen2ForCausalLM", "Qwen2 causal LM", CausalLm());
  AddArchitecture("Qwen3ForCausalLM", "Qwen3 causal LM", CausalLm());
  AddArchitecture("SmolLM3ForCausalLM", "SmolLM3 causal LM", CausalLm());
  AddArchitecture("Phi3ForCausalLM", "Phi-3 / Phi-4-mini causal LM",
                  CausalLm());
  AddArchitecture("Gemma2ForCausalLM", "Gemma 2 causal LM", CausalLm());
  AddArchitecture("Gemma3ForCausalLM", "Gemma 3 text causal LM (1B)",
                  CausalLm());
  AddArchitecture("Qwen3Model",
                  "Qwen3 decoder embedder (Qwen3-Embedding: last-token "
                  "pooling)",
                  DecoderBase());
  AddArchitecture("LlamaModel", "Llama decoder embedder", DecoderBase());
  AddArchitecture("Gemma3TextModel",
                  "Gemma 3 text embedder (EmbeddingGemma: bidirectional, "
                  "mean pooling, Dense projections)",
                  DecoderBase());
  AddArchitecture("MistralModel", "Mistral decoder embedder", DecoderBase());
  AddArchitecture("Qwen2Model", "Qwen2 decoder embedder", DecoderBase());
}

void RegisterEngineBuiltins() {
  RegisterInputProcessors();
  RegisterRerankFormats();
  RegisterSchedulers();
  RegisterOutputProcessors();
  RegisterBuiltinOutputStages();
  RegisterTokenHeads();
  RegisterExecutors();
  RegisterWorkflows();
  RegisterArchitectures();
}

}  // namespace

void RegisterBuiltins() {
  RegisterModelBuiltins();  // and the loader's and the devices'
  RegisterChatBuiltins();
  static std::once_flag once;
  std::call_once(once, RegisterEngineBuiltins);
}

}  // namespace inferd
