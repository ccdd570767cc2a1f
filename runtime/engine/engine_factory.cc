// The built-in executors ("prefill_loop", "continuous_batching_loop"): each
// assembles its engine from the components the model's workflow names,
// looked up in the registry; and CreateEngine, which picks the executor the
// same way.
#include <algorithm>
#include <thread>

#include "absl/hash/hash.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "device/cpu/host_resources.h"
#include "device/bf16.h"
#include "runtime/loader/safetensors.h"
#include "runtime/common/status_macros.h"
#include "runtime/common/registry.h"
#include "runtime/engine/components.h"
#include "runtime/engine/engine.h"
#include "runtime/engine/executors.h"
#include "runtime/engine/generate_engine.h"
#include "runtime/engine/token_heads.h"
#include "runtime/engine/model_manager.h"
#include "runtime/engine/prefill_engine.h"
#include "runtime/engine/rerank_format.h"
#include "runtime/model/model_runner.h"
#include "runtime/tokenizer/tokenizer.h"

namespace inferd {
namespace {

class ModelStepRunner : public StepRunner {
 public:
  explicit ModelStepRunner(std::unique_ptr<ModelRunnerBase> runner)
      : runner_(std::move(runner)) {}
  absl::StatusOr<BatchResult> Execute(const BatchPlan& plan) override {
    return runner_->Execute(plan);
  }
  ModelRunnerBase& runner() { return *runner_; }
  int64_t kv_cache_resident_bytes() const override {
    return runner_->kv_cache_resident_bytes();
  }

 private:
  std::unique_ptr<ModelRunnerBase> runner_;
};

// CPUs this process may use: the affinity mask capped by a cgroup quota.
int NumCores() { return UsableCpus(); }

// EOS ids: config.json's eos_token_id(s), plus the tokenizer config's EOS
// token when it names one the vocabulary has.
std::vector<int32_t> EosIds(const ServedModel& model) {
  std::vector<int32_t> ids;
  for (int64_t id : model.config().eos_token_ids) {
    ids.push_back(static_cast<int32_t>(id));
  }
  if (model.tokenizer_config().eos_token) {
    auto id = model.tokenizer().TokenToId(*model.tokenizer_config().eos_token);
    if (id && std::find(ids.begin(), ids.end(), *id) == ids.end()) {
      ids.push_back(*id);
    }
  }
  return ids;
}

// The tokens a sparse (lexical weights) output leaves out: CLS, EOS, PAD
// and UNK, by the tokenizer config's names and config.json's ids.
std::vector<int32_t> SpecialIds(const ServedModel& model) {
  std::vector<int32_t> ids;
  auto add = [&](int64_t id) {
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) {
      ids.push_back(static_cast<int32_t>(id));
    }
  };
  const TokenizerConfig& tc = model.tokenizer_config();
  for (const auto* name : {&tc.cls_token, &tc.eos_token, &tc.pad_token,
                           &tc.unk_token, &tc.bos_token}) {
    if (!name->has_value()) continue;
    if (auto id = model.tokenizer().TokenToId(**name)) add(*id);
  }
  const ModelConfig& c = model.config();
  if (c.pad_token_id) add(*c.pad_token_id);
  if (c.bos_token_id) add(*c.bos_token_id);
  for (int64_t id : c.eos_token_ids) add(id);
  return ids;
}

// Reads a sentence-transformers Dense module (<dir>/<path>/model.safetensors:
// linear.weight [out, in], optional linear.bias) into F32.
absl::StatusOr<DenseLayer> LoadDense(const std::string& dir,
                                     const StDenseConfig& d) {
  const std::string file = absl::StrCat(dir, "/", d.path, "/model.safetensors");
  ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> st,
                   SafetensorsFile::Open(file));
  auto to_floats = [&](const TensorView& t) -> absl::StatusOr<std::vector<float>> {
    std::vector<float> out(static_cast<size_t>(t.numel()));
    for (size_t i = 0; i < out.size(); ++i) {
      switch (t.dtype) {
        case DType::kF32: out[i] = t.as<const float>()[i]; break;
        case DType::kBF16: out[i] = Bf16ToFloat(t.as<const uint16_t>()[i]); break;
        case DType::kF16: out[i] = F16ToFloat(t.as<const uint16_t>()[i]); break;
        default:
          return absl::InvalidArgumentError(absl::StrCat(
              file, ": Dense weights must be float32, bfloat16 or float16"));
      }
    }
    return out;
  };
  DenseLayer layer;
  ASSIGN_OR_RETURN(TensorView w, st->Get("linear.weight"));
  if (w.rank != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": linear.weight must be 2-D"));
  }
  layer.out_features = w.dim(0);
  layer.in_features = w.dim(1);
  ASSIGN_OR_RETURN(layer.weight, to_floats(w));
  if (st->Has("linear.bias")) {
    ASSIGN_OR_RETURN(TensorView b, st->Get("linear.bias"));
    ASSIGN_OR_RETURN(layer.bias, to_floats(b));
    if (static_cast<int64_t>(layer.bias.size()) != layer.out_features) {
      return absl::InvalidArgumentError(
          absl::StrCat(file, ": linear.bias does not match linear.weight"));
    }
  }
  // sentence-transformers' Dense defaults to Tanh when the config names no
  // activation.
  const std::string& act = d.activation_function;
  if (act.empty() || absl::EndsWith(act, "Tanh")) {
    layer.tanh = true;
  } else if (!act.empty() && !absl::EndsWith(act, "Identity")) {
    return absl::InvalidArgumentError(absl::StrCat(
        file, ": Dense activation '", act,
        "' is not supported (Tanh or Identity)"));
  }
  return layer;
}

template <typename T>
absl::StatusOr<T> Component(const Registry<T>& registry,
                            const std::string& name, const Workflow& w) {
  absl::StatusOr<T> v = registry.Get(name);
  if (!v.ok()) {
    return absl::Status(v.status().code(),
                        absl::StrCat("workflow ", w.name, ": ",
                                     v.status().message()));
  }
  return v;
}

absl::StatusOr<ModelRunnerOptions> RunnerOptions(
    const ServedModel& model, int threads,
    std::shared_ptr<const WeightStore> weights) {
  ModelRunnerOptions ro;
  ro.model_dir = model.spec().path;
  ro.config = model.config();  // also for GGUF files (no config.json)
  ro.weights = std::move(weights);
  ro.threads = threads;
  ASSIGN_OR_RETURN(ro.dtype, ParseComputeDType(model.spec().engine.dtype));
  ro.activations = model.spec().engine.activations == "exact"
                       ? ActivationPrecision::kExact
                       : ActivationPrecision::kInt8;
  // The backend decides the mask (a decoder under bidirectional_prefill
  // runs without its causal mask).
  ro.attention = model.workflow().attention_backend;
  ro.model_class = model.workflow().model_class;
  return ro;
}

absl::StatusOr<std::unique_ptr<InputProcessor>> MakeInput(
    const ServedModel& model, InputProcessorOptions io) {
  const Workflow& w = model.workflow();
  ASSIGN_OR_RETURN(InputProcessorFactory factory,
                   Component(InputProcessors(), w.input_processor, w));
  InputProcessorContext ctx;
  ctx.tokenizer = &model.tokenizer();
  ctx.options = std::move(io);
  ctx.eos_token_ids = EosIds(model);
  ASSIGN_OR_RETURN(std::unique_ptr<InputProcessor> input, factory(ctx));
  if (input == nullptr) {
    return absl::InternalError(absl::StrCat("input processor ",
                                            w.input_processor,
                                            " returned no instance"));
  }
  return input;
}

}  // namespace

// A decoder reranker's format (a causal LM serving rerank) and the ids of
// its score tokens; a null format for every other model.
absl::Status ResolveRerankFormat(const ServedModel& model,
                                 std::shared_ptr<const RerankFormat>* format,
                                 std::vector<int32_t>* ids) {
  if (!UsesRerankFormat(model.config(), model.workflow())) {
    return absl::OkStatus();
  }
  const std::string name =
      model.spec().overrides.rerank_format.value_or(kDefaultRerankFormat);
  ASSIGN_OR_RETURN(RerankFormat f, RerankFormats().Get(name));
  for (const std::string& token : f.score_tokens) {
    absl::optional<int32_t> id = model.tokenizer().TokenToId(token);
    if (!id.has_value()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "rerank_format ", name, " scores with the token '", token,
          "', which the model's tokenizer does not have (is this the "
          "reranker the format was made for? pick another with "
          "rerank_format=NAME)"));
    }
    ids->push_back(*id);
  }
  // {bos}: the model's BOS token, spelt as its vocabulary entry (the
  // tokenizer reads special tokens in the text).
  std::string bos_text;
  if (const absl::optional<int64_t> bos = model.config().bos_token_id) {
    bos_text = model.tokenizer().IdToToken(static_cast<int32_t>(*bos));
  }
  if (f.UsesBos() && bos_text.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "rerank_format ", name, " starts with the model's BOS token, and "
        "the model has none (bos_token_id in config.json)"));
  }
  f = f.ForModel(bos_text);
  *format = std::make_shared<const RerankFormat>(std::move(f));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Engine>> BuildPrefillLoop(
    const EngineBuildContext& context) {
  const ServedModel& model = *context.model;
  const EngineOptions& eo = model.spec().engine;
  const Workflow& w = model.workflow();
  const ServedModelInfo info = model.info();
  PrefillEngineOptions po;
  po.workflow = w.name;
  po.tasks = w.tasks;
  const PrefillParallelism par = ChoosePrefillParallelism(
      model.config().hidden_size, NumCores(), eo.threads, eo.replicas);
  const int cores = NumCores();
  const int threads = par.threads;
  po.replicas = par.replicas;
  // Tokenization workers: by default one per four cores (tokenizing costs
  // far less than the forward pass of the same tokens); 0 = inline.
  po.prep_threads = eo.tokenization_workers >= 0 ? eo.tokenization_workers
                                                 : std::max(1, cores / 4);
  po.max_queue_requests = eo.max_queue_requests;
  PrefillSchedulerOptions so;
  so.max_batched_tokens =
      std::max<int64_t>(eo.max_batched_tokens, info.max_input_tokens);
  so.max_seqs = eo.max_seqs;
  so.max_queue_requests = eo.max_queue_requests;
  so.max_queue_tokens = eo.max_queue_tokens;
  po.embedding_dims = info.embedding_dims;
  auto dense = std::make_shared<std::vector<DenseLayer>>();
  for (const StDenseConfig& d : model.st_config().dense) {
    ASSIGN_OR_RETURN(DenseLayer layer, LoadDense(model.spec().path, d));
    dense->push_back(std::move(layer));
  }
  const SentenceTransformersConfig& st = model.st_config();
  po.default_normalize = st.present ? st.has_normalize : true;

  PrefillComponents c;
  InputProcessorOptions io;
  io.max_input_tokens = info.max_input_tokens;
  io.include_prompt_in_pooling = st.include_prompt;
  io.prompts = st.prompts;
  io.default_prompt_name = st.default_prompt_name;
  std::vector<int32_t> score_token_ids;
  RETURN_IF_ERROR(
      ResolveRerankFormat(model, &io.rerank_format, &score_token_ids));
  const bool decoder_rerank = io.rerank_format != nullptr;
  ASSIGN_OR_RETURN(c.input, MakeInput(model, std::move(io)));

  ASSIGN_OR_RETURN(PrefillSchedulerFactory make_scheduler,
                   Component(PrefillSchedulers(), w.scheduler, w));
  c.scheduler = make_scheduler(so);
  if (c.scheduler == nullptr) {
    return absl::InternalError(absl::StrCat("scheduler ", w.scheduler,
                                            " returned no instance"));
  }

  OutputProcessorContext oc;
  oc.scores = model.config().problem_type == "multi_label_classification" ||
                      model.config().num_labels == 1 || decoder_rerank
                  ? ScoreFunction::kSigmoid
                  : ScoreFunction::kSoftmax;
  oc.score_token_ids = std::move(score_token_ids);
  OutputStageContext sc;
  sc.dense = std::move(dense);
  sc.scores = oc.scores;
  ASSIGN_OR_RETURN(c.stages, CreateOutputStages(DefaultOutputStages(w), sc));
  TokenHeadContext hc;
  hc.model_dir = model.spec().path;
  hc.hidden_size = model.config().hidden_size;
  hc.special_ids = SpecialIds(model);
  const Tokenizer* tok = &model.tokenizer();
  hc.id_to_token = [tok](int32_t id) { return tok->IdToToken(id); };
  for (const std::string& name : w.token_heads) {
    ASSIGN_OR_RETURN(TokenHeadFactory make, Component(TokenHeads(), name, w));
    ASSIGN_OR_RETURN(std::unique_ptr<TokenHead> head, make(hc));
    c.token_heads.push_back(std::move(head));
  }
  auto make_output = [&](const std::string& name)
      -> absl::StatusOr<std::unique_ptr<OutputProcessor>> {
    ASSIGN_OR_RETURN(OutputProcessorFactory factory,
                     Component(OutputProcessors(), name, w));
    ASSIGN_OR_RETURN(std::unique_ptr<OutputProcessor> out, factory(oc));
    if (out == nullptr) {
      return absl::InternalError(
          absl::StrCat("output processor ", name, " returned no instance"));
    }
    return out;
  };
  ASSIGN_OR_RETURN(c.output, make_output(model.output_processor()));
  if (w.Supports(Task::kEmbed)) {
    // Every registered pooling, for requests that choose theirs.
    const std::string prefix = PoolingComponent("");
    for (const std::string& name : OutputProcessors().Names()) {
      if (!absl::StartsWith(name, prefix)) continue;
      ASSIGN_OR_RETURN(c.poolings[name.substr(prefix.size())],
                       make_output(name));
    }
  }

  ASSIGN_OR_RETURN(ModelRunnerOptions ro,
                   RunnerOptions(model, threads, context.weights));
  auto make_runner = [&ro](int) -> absl::StatusOr<std::unique_ptr<StepRunner>> {
    ASSIGN_OR_RETURN(std::unique_ptr<ModelRunnerBase> r, CreateModelRunner(ro));
    return std::unique_ptr<StepRunner>(new ModelStepRunner(std::move(r)));
  };
  ASSIGN_OR_RETURN(std::unique_ptr<PrefillEngine> e,
                   PrefillEngine::Create(std::move(po), std::move(c),
                                         make_runner));
  return std::unique_ptr<Engine>(std::move(e));
}

absl::StatusOr<std::unique_ptr<Engine>> BuildContinuousBatchingLoop(
    const EngineBuildContext& context) {
  const ServedModel& model = *context.model;
  const Workflow& w = model.workflow();
  const EngineOptions& eo = model.spec().engine;
  const int threads = eo.threads > 0 ? eo.threads : 0;
  ASSIGN_OR_RETURN(ModelRunnerOptions ro,
                   RunnerOptions(model, threads, context.weights));
  ASSIGN_OR_RETURN(std::unique_ptr<ModelRunnerBase> runner,
                   CreateModelRunner(ro));
  if (!runner->uses_kv_cache()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "workflow ", w.name, ": continuous_batching_loop needs an attention "
        "backend with a KV cache; ", w.attention_backend, " has none"));
  }
  const int block_size = eo.block_size;
  int32_t max_model_len =
      static_cast<int32_t>(std::min<int64_t>(model.info().max_input_tokens,
                                             runner->max_positions()));
  ASSIGN_OR_RETURN(KvCachePlan plan,
                   runner->PlanKvCache(eo.kv_cache_fraction, eo.kv_cache_bytes,
                                       block_size, eo.max_batched_tokens));
  auto mib = [](int64_t b) { return static_cast<double>(b) / (1 << 20); };
  const std::string budget_note = plan.Describe();
  int64_t blocks = plan.blocks;
  const int64_t min_blocks = (max_model_len + block_size - 1) / block_size;
  if (blocks < min_blocks) {
    // vLLM's rule: the cache must hold one sequence of the full context, or
    // a long request would be admitted and could never finish.
    return absl::ResourceExhaustedError(absl::StrFormat(
        "model '%s': one %d-token sequence needs %.0f MiB of KV cache, but "
        "the budget is %.0f MiB (%s). Raise --kv-cache-memory (a larger "
        "fraction, or a size such as 2GiB), give the process more memory, or "
        "shorten the context with the model option max-input-tokens=N",
        model.name(), max_model_len, mib(min_blocks * plan.block_bytes),
        mib(plan.budget_bytes), budget_note));
  }
  // Never more blocks than max_seqs full-length sequences could use.
  const int64_t useful =
      static_cast<int64_t>(eo.max_seqs) *
          ((max_model_len + block_size - 1) / block_size) + 1;
  blocks = std::min(blocks, useful);
  RETURN_IF_ERROR(runner->AllocateKvCache(blocks, block_size));

  GenerateEngineOptions go;
  go.vocab_size = static_cast<int32_t>(runner->vocab_size());
  go.eos_token_ids = EosIds(model);
  const ServedModel* served = &model;  // outlives its engine
  go.token_bytes = [served] { return served->token_bytes(); };
  go.max_queue_requests = eo.max_queue_requests;
  // Prompt preparation (chat template, tokenization) off the gRPC threads,
  // with the prefill engines' default; 0 = on the submitting thread.
  go.prep_threads = eo.tokenization_workers >= 0
                        ? eo.tokenization_workers
                        : std::max(1, NumCores() / 4);
  SchedulerConfig& sc = go.scheduler;
  sc.max_batched_tokens = eo.max_batched_tokens;
  sc.max_prefill_tokens_while_decoding = eo.max_prefill_tokens_while_decoding;
  go.overlap_output = eo.overlap_output;
  go.speculative_draft_tokens = eo.speculative_draft_tokens;
  sc.max_seqs = eo.max_seqs;
  sc.max_model_len = max_model_len;
  sc.max_waiting_requests = eo.max_queue_requests;
  sc.max_waiting_tokens = eo.max_queue_tokens;
  sc.kv_cache.num_blocks = static_cast<int32_t>(blocks);
  sc.kv_cache.block_size = block_size;
  sc.kv_cache.enable_prefix_caching = eo.enable_prefix_caching;
  sc.kv_cache.hash_salt =
      absl::HashOf(model.spec().path, model.spec().engine.dtype);

  GenerateComponents c;
  InputProcessorOptions io;
  io.max_input_tokens = max_model_len;
  io.chat = model.chat_format();
  ASSIGN_OR_RETURN(c.input, MakeInput(model, std::move(io)));
  ASSIGN_OR_RETURN(BatchingSchedulerFactory make_scheduler,
                   Component(BatchingSchedulers(), w.scheduler, w));
  c.scheduler = make_scheduler(sc);
  ASSIGN_OR_RETURN(SamplerFactory make_sampler,
                   Component(Samplers(), model.output_processor(), w));
  c.sampler = make_sampler(go.vocab_size);
  if (c.scheduler == nullptr || c.sampler == nullptr) {
    return absl::InternalError(absl::StrCat(
        "workflow ", w.name, ": a component factory returned no instance"));
  }
  Engine::KvCacheSummary kv;
  kv.blocks = blocks;
  kv.block_size = block_size;
  kv.bytes = runner->kv_cache_bytes();
  kv.note = budget_note;
  std::unique_ptr<Engine> engine(new GenerateEngine(
      std::move(go), &model.tokenizer(), std::move(c),
      std::make_unique<ModelStepRunner>(std::move(runner))));
  engine->set_kv_cache_summary(std::move(kv));
  return engine;
}

absl::StatusOr<std::unique_ptr<Engine>> CreateEngine(
    const ServedModel& model, std::shared_ptr<const WeightStore> weights) {
  const Workflow& w = model.workflow();
  ASSIGN_OR_RETURN(ExecutorFactory executor,
                   Component(Executors(), w.executor, w));
  EngineBuildContext context;
  context.model = &model;
  context.weights = std::move(weights);
  ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, executor(context));
  if (engine == nullptr) {
    return absl::InternalError(
        absl::StrCat("executor ", w.executor, " returned no engine"));
  }
  return engine;
}

}  // namespace inferd
