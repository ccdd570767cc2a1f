// inferd-bench: a closed-loop load generator for a running inferd server.
// N concurrent streams (one thread each, gRPC synchronous API) drive one RPC
// for a duration or a request count; each stream sends its next request as
// soon as the previous one is answered (embed-stream keeps --pipeline
// requests in flight on one bidirectional stream). Reports throughput and
// latency (TTFT, TPOT, ITL, end to end: mean, p50, p90, p99) as text and
// JSON. The metric definitions follow common LLM serving benchmarks:
//   TTFT  send -> first message carrying tokens;
//   TPOT  (e2e - TTFT) / (output tokens - 1), per request;
//   ITL   gap between consecutive token-carrying messages.
//   ITL max  the longest such gap of each request (a stream's worst stall).
// Inputs are synthetic token ids drawn from the model's own tokenizer (so
// lengths are exact) or lines of a prompts file; --shared-prefix puts the
// same K tokens in front of every input (the prefix-caching scenario).
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/load/latency_stats.h"
#include "bench/load/length_distribution.h"
#include "inferd/v1/inference.grpc.pb.h"
#include "inferd/v1/models.grpc.pb.h"
#include "nlohmann/json.hpp"

namespace inferd::bench {
namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;
namespace v1 = ::inferd::v1;

// Text the synthetic inputs' tokens are drawn from: tokenized once with the
// benchmarked model's tokenizer, so every id is one its vocabulary produces
// for ordinary text.
constexpr char kCorpus[] =
    "Once upon a time there was a little server that answered questions all "
    "day long. Every morning it loaded its models, checked that the cache was "
    "warm and waited for the first request. Some requests asked for stories, "
    "some for the meaning of a sentence, and some wanted a list of documents "
    "sorted by how well they matched a query. The server measured everything: "
    "how long each request waited in the queue, how many tokens it produced "
    "per second, and how much memory the attention cache used. When many "
    "clients arrived at once it packed their prompts into batches, shared the "
    "blocks of identical prefixes, and streamed each new word back as soon as "
    "it was ready. In the evening the operators read the numbers, compared "
    "them with yesterday, and wrote down what they had learned about latency, "
    "throughput and the price of a long context window.";

enum class Rpc {
  kGenerate,
  kEmbedStream,
  kEmbedBatch,
  kRerank,
  kClassify,
  kTokenize
};

struct RpcName {
  Rpc rpc;
  const char* name;
};
constexpr RpcName kRpcNames[] = {
    {Rpc::kGenerate, "generate"},      {Rpc::kEmbedStream, "embed-stream"},
    {Rpc::kEmbedBatch, "embed-batch"}, {Rpc::kRerank, "rerank"},
    {Rpc::kClassify, "classify"},      {Rpc::kTokenize, "tokenize"},
};

const char* NameOf(Rpc rpc) {
  for (const RpcName& r : kRpcNames) {
    if (r.rpc == rpc) return r.name;
  }
  return "?";
}

struct Options {
  std::string address = "127.0.0.1:50051";
  Rpc rpc = Rpc::kGenerate;
  std::string model;
  int concurrency = 1;
  int connections = 1;
  double duration_seconds = 0;  // 0: run --requests
  int64_t requests = 100;
  int64_t warmup_requests = 0;
  LengthDistribution input_len = LengthDistribution::Fixed(128);
  LengthDistribution output_len = LengthDistribution::Fixed(64);
  std::string prompts_file;
  // generate: response_format.json_schema of every request (file contents).
  std::string json_schema;
  int64_t shared_prefix = 0;
  int batch_size = 1;
  int pipeline = 1;
  int query_tokens = 16;
  bool ignore_eos = true;
  float temperature = 0;
  bool disable_prefix_cache = false;
  uint64_t seed = 1;
  double timeout_seconds = 600;
  std::string json_path;
  std::string label;
};

constexpr char kUsage[] = R"(inferd-bench: load generator for an inferd server.

usage: inferd-bench --rpc RPC --model NAME [options]

  --address H:P          server (default 127.0.0.1:50051)
  --rpc RPC              generate | embed-stream | embed-batch | rerank |
                         classify | tokenize (default generate)
  --model NAME           model to drive (required)
  --concurrency N        concurrent streams, one thread each (default 1)
  --connections N        HTTP/2 connections the streams spread over (default 1)
  --duration S           run for S seconds (requests started before the end
                         finish and count), or
  --requests N           run N requests in total (default 100)
  --warmup N             N unrecorded requests first (default 0)
  --input-len DIST       tokens per input: fixed:N | uniform:MIN:MAX |
                         normal:MEAN:STDDEV (default fixed:128)
  --output-len DIST      generate: tokens to generate (default fixed:64)
  --prompts-file FILE    inputs are this file's non-empty lines (text) instead
                         of synthetic token ids
  --json-schema FILE     generate: constrain every output to this JSON Schema
                         (response_format.json_schema; structured output's
                         cost per token)
  --shared-prefix K      the same K tokens start every input (default 0)
  --batch-size B         inputs per embed request, documents per rerank,
                         texts per classify (default 1)
  --pipeline P           embed-stream: requests in flight per stream (default 1)
  --query-tokens N       rerank: query length (default 16)
  --no-ignore-eos        generate: stop at EOS (default: ignore it, so output
                         lengths follow --output-len)
  --temperature T        generate (default 0: greedy)
  --disable-prefix-cache generate: opt out of the server's prefix cache
  --seed S               input sampling seed (default 1)
  --timeout S            per-request deadline (default 600); an embed-stream
                         stream gets --duration + S
  --json FILE            also write the report as JSON
  --label TEXT           free text recorded in the report
)";

absl::Status Bad(absl::string_view why) {
  return absl::InvalidArgumentError(why);
}

template <typename T>
absl::Status ParseNumber(const std::string& flag, const std::string& value,
                         T min, T* out) {
  bool ok;
  if constexpr (std::is_floating_point_v<T>) {
    double d;
    ok = absl::SimpleAtod(value, &d);
    *out = static_cast<T>(d);
  } else {
    int64_t i;
    ok = absl::SimpleAtoi(value, &i);
    *out = static_cast<T>(i);
  }
  if (!ok || *out < min) {
    return Bad(
        absl::StrCat(flag, " wants a number >= ", min, ", got '", value, "'"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Options> ParseArgs(int argc, char** argv) {
  Options o;
  bool requests_given = false;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (flag == "--no-ignore-eos") {
      o.ignore_eos = false;
      continue;
    }
    if (flag == "--disable-prefix-cache") {
      o.disable_prefix_cache = true;
      continue;
    }
    std::string value;
    const size_t eq = flag.find('=');
    if (eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return Bad(absl::StrCat(flag, " needs a value"));
    }
    absl::Status s;
    if (flag == "--address") {
      o.address = value;
    } else if (flag == "--rpc") {
      bool found = false;
      for (const RpcName& r : kRpcNames) {
        if (value == r.name) {
          o.rpc = r.rpc;
          found = true;
        }
      }
      if (!found) return Bad("--rpc: unknown RPC '" + value + "'");
    } else if (flag == "--model") {
      o.model = value;
    } else if (flag == "--concurrency") {
      s = ParseNumber(flag, value, 1, &o.concurrency);
    } else if (flag == "--connections") {
      s = ParseNumber(flag, value, 1, &o.connections);
    } else if (flag == "--duration") {
      s = ParseNumber(flag, value, 0.0, &o.duration_seconds);
    } else if (flag == "--requests") {
      s = ParseNumber<int64_t>(flag, value, 1, &o.requests);
      requests_given = true;
    } else if (flag == "--warmup") {
      s = ParseNumber<int64_t>(flag, value, 0, &o.warmup_requests);
    } else if (flag == "--input-len" || flag == "--output-len") {
      absl::StatusOr<LengthDistribution> d = LengthDistribution::Parse(value);
      if (!d.ok()) return Bad(flag + ": " + std::string(d.status().message()));
      (flag == "--input-len" ? o.input_len : o.output_len) = *d;
    } else if (flag == "--prompts-file") {
      o.prompts_file = value;
    } else if (flag == "--json-schema") {
      std::ifstream in(value);
      if (!in) return Bad("cannot read --json-schema " + value);
      o.json_schema.assign(std::istreambuf_iterator<char>(in),
                           std::istreambuf_iterator<char>());
      if (o.json_schema.empty()) return Bad("--json-schema " + value + " is empty");
    } else if (flag == "--shared-prefix") {
      s = ParseNumber<int64_t>(flag, value, 0, &o.shared_prefix);
    } else if (flag == "--batch-size") {
      s = ParseNumber(flag, value, 1, &o.batch_size);
    } else if (flag == "--pipeline") {
      s = ParseNumber(flag, value, 1, &o.pipeline);
    } else if (flag == "--query-tokens") {
      s = ParseNumber(flag, value, 1, &o.query_tokens);
    } else if (flag == "--temperature") {
      s = ParseNumber(flag, value, 0.0f, &o.temperature);
    } else if (flag == "--seed") {
      s = ParseNumber<uint64_t>(flag, value, 0, &o.seed);
    } else if (flag == "--timeout") {
      s = ParseNumber(flag, value, 0.001, &o.timeout_seconds);
    } else if (flag == "--json") {
      o.json_path = value;
    } else if (flag == "--label") {
      o.label = value;
    } else {
      return Bad("unknown flag " + flag + " (see --help)");
    }
    if (!s.ok()) return s;
  }
  if (o.model.empty()) return Bad("--model is required");
  if (o.duration_seconds > 0 && requests_given) {
    return Bad("give --duration or --requests, not both");
  }
  return o;
}

// ------------------------------------------------------------- workload

// Builds each request's inputs. Immutable after Create(); the Sample*
// methods take the calling thread's generator, so workers share one.
class Workload {
 public:
  static absl::StatusOr<std::unique_ptr<Workload>> Create(
      const Options& opts, v1::Inference::Stub* inference,
      v1::Models::Stub* models);

  // Synthetic input: the shared prefix, then `n` ids drawn from the pool.
  std::vector<uint32_t> SampleTokens(int64_t n, std::mt19937_64& rng) const {
    std::vector<uint32_t> ids = prefix_ids_;
    std::uniform_int_distribution<size_t> pick(0, pool_.size() - 1);
    for (int64_t i = 0; i < n; ++i) ids.push_back(pool_[pick(rng)]);
    return ids;
  }
  // Input length for the next request, clipped to what the model accepts.
  int64_t SampleInputLen(int64_t output_len, std::mt19937_64& rng) const {
    int64_t room = max_input_tokens_ - shared_prefix_ - output_len - 2;
    return std::max<int64_t>(1, std::min(opts_.input_len.Sample(rng), room));
  }
  int64_t SampleOutputLen(std::mt19937_64& rng) const {
    return opts_.output_len.Sample(rng);
  }
  // A text input (prompts file lines, or detokenized synthetic inputs).
  const std::string& SampleText(std::mt19937_64& rng) const {
    return texts_[std::uniform_int_distribution<size_t>(
        0, texts_.size() - 1)(rng)];
  }
  bool from_file() const { return !opts_.prompts_file.empty(); }
  const std::string& prefix_text() const { return prefix_text_; }
  const std::string& query() const { return query_; }
  const v1::ModelInfo& model() const { return model_; }

 private:
  explicit Workload(const Options& opts) : opts_(opts) {}

  Options opts_;
  v1::ModelInfo model_;
  int64_t max_input_tokens_ = 0;
  int64_t shared_prefix_ = 0;
  std::vector<uint32_t> pool_;
  std::vector<uint32_t> prefix_ids_;
  std::string prefix_text_;
  std::string query_;
  std::vector<std::string> texts_;
};

std::string Describe(const grpc::Status& s) {
  return absl::StrCat("code ", static_cast<int>(s.error_code()), ": ",
                      s.error_message());
}

absl::StatusOr<std::string> Detokenize(v1::Inference::Stub* stub,
                                       const std::string& model,
                                       const std::vector<uint32_t>& ids) {
  v1::DetokenizeRequest req;
  req.set_model(model);
  for (uint32_t id : ids) req.add_token_ids(id);
  v1::DetokenizeResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = stub->Detokenize(&ctx, req, &resp);
  if (!s.ok()) return absl::UnavailableError("Detokenize: " + Describe(s));
  return resp.text();
}

absl::StatusOr<std::unique_ptr<Workload>> Workload::Create(
    const Options& opts, v1::Inference::Stub* inference,
    v1::Models::Stub* models) {
  auto w = std::unique_ptr<Workload>(new Workload(opts));
  {
    v1::GetModelRequest req;
    req.set_name(opts.model);
    grpc::ClientContext ctx;
    ctx.set_wait_for_ready(true);
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(60));
    grpc::Status s = models->GetModel(&ctx, req, &w->model_);
    if (!s.ok()) return absl::UnavailableError("GetModel: " + Describe(s));
    if (w->model_.state() != v1::MODEL_STATE_READY) {
      return absl::UnavailableError(
          absl::StrCat("model ", opts.model, " is not ready (",
                       v1::ModelState_Name(w->model_.state()), ")"));
    }
  }
  w->max_input_tokens_ = w->model_.max_input_tokens();
  w->shared_prefix_ = opts.shared_prefix;
  const int64_t out_mean = opts.rpc == Rpc::kGenerate
                               ? static_cast<int64_t>(opts.output_len.Mean())
                               : 0;
  if (opts.shared_prefix + static_cast<int64_t>(opts.input_len.Mean()) +
          out_mean >
      w->max_input_tokens_) {
    return Bad(absl::StrCat(
        "shared prefix ", opts.shared_prefix, " + mean input ",
        opts.input_len.Mean(), " + mean output ", out_mean,
        " tokens exceed the model's ", w->max_input_tokens_, "-token context"));
  }

  // The token pool: the corpus in the model's own tokenizer.
  {
    v1::TokenizeRequest req;
    req.set_model(opts.model);
    req.set_text(kCorpus);
    req.set_add_special_tokens(false);
    v1::TokenizeResponse resp;
    grpc::ClientContext ctx;
    grpc::Status s = inference->Tokenize(&ctx, req, &resp);
    if (!s.ok()) return absl::UnavailableError("Tokenize: " + Describe(s));
    w->pool_.assign(resp.token_ids().begin(), resp.token_ids().end());
    if (w->pool_.empty()) return absl::InternalError("corpus has no tokens");
  }
  // The prefix comes from its own generator so that it does not depend on
  // the other flags.
  std::mt19937_64 prefix_rng(opts.seed ^ 0x5eedf00dULL);
  std::mt19937_64 rng(opts.seed);
  if (opts.shared_prefix > 0) {
    std::uniform_int_distribution<size_t> pick(0, w->pool_.size() - 1);
    for (int64_t i = 0; i < opts.shared_prefix; ++i) {
      w->prefix_ids_.push_back(w->pool_[pick(prefix_rng)]);
    }
    absl::StatusOr<std::string> text =
        Detokenize(inference, opts.model, w->prefix_ids_);
    if (!text.ok()) return text.status();
    w->prefix_text_ = *text + " ";
  }
  if (opts.rpc == Rpc::kRerank) {
    std::vector<uint32_t> q;
    std::uniform_int_distribution<size_t> pick(0, w->pool_.size() - 1);
    for (int i = 0; i < opts.query_tokens; ++i)
      q.push_back(w->pool_[pick(rng)]);
    absl::StatusOr<std::string> text = Detokenize(inference, opts.model, q);
    if (!text.ok()) return text.status();
    w->query_ = *text;
  }

  if (!opts.prompts_file.empty()) {
    std::ifstream in(opts.prompts_file);
    if (!in) return Bad("cannot read --prompts-file " + opts.prompts_file);
    std::string line;
    while (std::getline(in, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (!line.empty()) w->texts_.push_back(w->prefix_text_ + line);
    }
    if (w->texts_.empty()) return Bad(opts.prompts_file + " has no prompts");
  } else if (opts.rpc == Rpc::kRerank || opts.rpc == Rpc::kClassify ||
             opts.rpc == Rpc::kTokenize) {
    // Text RPCs: detokenized synthetic inputs (the server's token count may
    // differ slightly from the sampled length; usage reports the real one).
    constexpr int kTexts = 128;
    for (int i = 0; i < kTexts; ++i) {
      absl::StatusOr<std::string> text =
          Detokenize(inference, opts.model,
                     w->SampleTokens(w->SampleInputLen(0, rng), rng));
      if (!text.ok()) return text.status();
      w->texts_.push_back(*std::move(text));
    }
  }
  return w;
}

// ---------------------------------------------------------------- driver

// One request's measurements.
struct Sample {
  bool ok = false;
  grpc::StatusCode code = grpc::StatusCode::OK;
  std::string error;
  double e2e_s = 0;
  double ttft_s = -1;  // generate only
  double tpot_s = -1;  // generate with > 1 output token
  std::vector<double> itl_s;
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  int64_t cached_tokens = 0;
  int64_t items = 0;  // embeddings, documents scored, texts classified
  Clock::time_point end;
};

// Hands out request slots until the count is reached or the time is up.
// Thread-safe.
class Slots {
 public:
  Slots(int64_t limit, Clock::time_point deadline, bool timed)
      : limit_(limit), deadline_(deadline), timed_(timed) {}

  bool Next() {
    if (stop_.load()) return false;
    if (timed_) return Clock::now() < deadline_;
    return next_.fetch_add(1) < limit_;
  }
  // Ends the run early (every request so far failed).
  void Stop() { stop_.store(true); }

 private:
  const int64_t limit_;
  const Clock::time_point deadline_;
  const bool timed_;
  std::atomic<int64_t> next_{0};
  std::atomic<bool> stop_{false};
};

double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

class Driver {
 public:
  Driver(const Options& opts, const Workload& workload,
         std::vector<std::unique_ptr<v1::Inference::Stub>>& stubs)
      : opts_(opts), workload_(workload), stubs_(stubs) {}

  // Runs one phase with opts.concurrency workers; returns every sample.
  std::vector<Sample> Run(Slots* slots, uint64_t seed, double* wall_s) {
    std::vector<std::vector<Sample>> per_worker(opts_.concurrency);
    std::vector<std::thread> threads;
    failures_ = 0;
    successes_ = 0;
    const Clock::time_point start = Clock::now();
    for (int w = 0; w < opts_.concurrency; ++w) {
      threads.emplace_back([this, w, seed, slots, &per_worker] {
        std::mt19937_64 rng(seed * 1000003ULL + static_cast<uint64_t>(w));
        v1::Inference::Stub* stub = stubs_[w % stubs_.size()].get();
        if (opts_.rpc == Rpc::kEmbedStream) {
          EmbedStreamWorker(stub, slots, rng, &per_worker[w]);
        } else {
          while (slots->Next()) {
            Sample s = One(stub, rng);
            Account(s, slots);
            per_worker[w].push_back(std::move(s));
          }
        }
      });
    }
    for (std::thread& t : threads) t.join();
    std::vector<Sample> all;
    Clock::time_point last = start;
    for (auto& samples : per_worker) {
      for (Sample& s : samples) {
        last = std::max(last, s.end);
        all.push_back(std::move(s));
      }
    }
    *wall_s = Seconds(last - start);
    return all;
  }

 private:
  void Account(const Sample& s, Slots* slots) {
    if (s.ok) {
      successes_.fetch_add(1);
    } else if (failures_.fetch_add(1) + 1 >= 20 && successes_.load() == 0) {
      slots->Stop();  // nothing works: do not spin for the whole duration
    }
  }

  // `extra_seconds` lengthens it for a call that carries many requests.
  void SetDeadline(grpc::ClientContext* ctx, double extra_seconds = 0) const {
    ctx->set_deadline(std::chrono::system_clock::now() +
                      std::chrono::microseconds(static_cast<int64_t>(
                          (opts_.timeout_seconds + extra_seconds) * 1e6)));
  }

  void Fail(const grpc::Status& status, Sample* s) const {
    s->ok = false;
    s->code = status.error_code();
    s->error = status.error_message();
  }

  v1::EmbedRequest MakeEmbedRequest(std::mt19937_64& rng) const {
    v1::EmbedRequest req;
    req.set_model(opts_.model);
    for (int i = 0; i < opts_.batch_size; ++i) {
      if (workload_.from_file()) {
        req.add_texts(workload_.SampleText(rng));
      } else {
        std::vector<uint32_t> ids =
            workload_.SampleTokens(workload_.SampleInputLen(0, rng), rng);
        req.add_token_ids()->mutable_ids()->Assign(ids.begin(), ids.end());
      }
    }
    return req;
  }

  static void FillEmbed(const v1::EmbedResponse& resp, Sample* s) {
    s->items = resp.embeddings_size();
    s->input_tokens = resp.usage().total_tokens();
    if (s->input_tokens == 0) {
      for (const auto& e : resp.embeddings()) s->input_tokens += e.tokens();
    }
  }

  Sample One(v1::Inference::Stub* stub, std::mt19937_64& rng) {
    switch (opts_.rpc) {
      case Rpc::kGenerate:
        return Generate(stub, rng);
      case Rpc::kEmbedBatch:
        return EmbedBatch(stub, rng);
      case Rpc::kRerank:
        return Rerank(stub, rng);
      case Rpc::kClassify:
        return Classify(stub, rng);
      case Rpc::kTokenize:
        return Tokenize(stub, rng);
      case Rpc::kEmbedStream:
        break;  // EmbedStreamWorker
    }
    return Sample{};
  }

  Sample Generate(v1::Inference::Stub* stub, std::mt19937_64& rng) {
    v1::GenerateRequest req;
    req.set_model(opts_.model);
    const int64_t out_len = workload_.SampleOutputLen(rng);
    if (workload_.from_file()) {
      req.set_prompt(workload_.SampleText(rng));
    } else {
      std::vector<uint32_t> ids =
          workload_.SampleTokens(workload_.SampleInputLen(out_len, rng), rng);
      req.mutable_prompt_token_ids()->mutable_ids()->Assign(ids.begin(),
                                                            ids.end());
    }
    v1::SamplingParams* sp = req.mutable_sampling();
    sp->set_max_tokens(static_cast<uint32_t>(out_len));
    sp->set_temperature(opts_.temperature);
    sp->set_ignore_eos(opts_.ignore_eos);
    if (!opts_.json_schema.empty()) {
      req.mutable_response_format()->set_json_schema(opts_.json_schema);
    }
    req.set_disable_prefix_cache(opts_.disable_prefix_cache);

    Sample s;
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    const Clock::time_point t0 = Clock::now();
    auto reader = stub->Generate(&ctx, req);
    v1::GenerateResponse resp;
    Clock::time_point prev;
    int64_t counted = 0;
    while (reader->Read(&resp)) {
      const Clock::time_point t = Clock::now();
      if (resp.token_ids_size() > 0) {
        if (counted == 0) {
          s.ttft_s = Seconds(t - t0);
        } else {
          s.itl_s.push_back(Seconds(t - prev));
        }
        prev = t;
        counted += resp.token_ids_size();
      }
      if (resp.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
        s.input_tokens = resp.usage().prompt_tokens();
        s.output_tokens = resp.usage().completion_tokens();
        s.cached_tokens = resp.usage().cached_prompt_tokens();
      }
    }
    grpc::Status status = reader->Finish();
    s.end = Clock::now();
    s.e2e_s = Seconds(s.end - t0);
    if (!status.ok()) {
      Fail(status, &s);
      return s;
    }
    s.ok = true;
    if (s.output_tokens == 0) s.output_tokens = counted;
    if (s.output_tokens > 1 && s.ttft_s >= 0) {
      s.tpot_s =
          (s.e2e_s - s.ttft_s) / static_cast<double>(s.output_tokens - 1);
    }
    return s;
  }

  // Times one unary call `call(&ctx, &resp)`; `fill` reads the response of
  // a successful one into the sample.
  template <typename Response, typename Call, typename Fill>
  Sample TimeUnary(Call call, Fill fill) {
    Response resp;
    Sample s;
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    const Clock::time_point t0 = Clock::now();
    grpc::Status status = call(&ctx, &resp);
    s.end = Clock::now();
    s.e2e_s = Seconds(s.end - t0);
    if (!status.ok()) {
      Fail(status, &s);
      return s;
    }
    s.ok = true;
    fill(resp, &s);
    return s;
  }

  Sample EmbedBatch(v1::Inference::Stub* stub, std::mt19937_64& rng) {
    v1::EmbedRequest req = MakeEmbedRequest(rng);
    return TimeUnary<v1::EmbedResponse>(
        [&](grpc::ClientContext* ctx, v1::EmbedResponse* resp) {
          return stub->EmbedBatch(ctx, req, resp);
        },
        [this](const v1::EmbedResponse& resp, Sample* s) { FillEmbed(resp, s); });
  }

  Sample Rerank(v1::Inference::Stub* stub, std::mt19937_64& rng) {
    v1::RerankRequest req;
    req.set_model(opts_.model);
    req.set_query(workload_.query());
    for (int i = 0; i < opts_.batch_size; ++i) {
      req.add_documents(workload_.SampleText(rng));
    }
    return TimeUnary<v1::RerankResponse>(
        [&](grpc::ClientContext* ctx, v1::RerankResponse* resp) {
          return stub->Rerank(ctx, req, resp);
        },
        [](const v1::RerankResponse& resp, Sample* s) {
          s->items = resp.results_size();
          s->input_tokens = resp.usage().total_tokens();
        });
  }

  Sample Classify(v1::Inference::Stub* stub, std::mt19937_64& rng) {
    v1::ClassifyRequest req;
    req.set_model(opts_.model);
    for (int i = 0; i < opts_.batch_size; ++i) {
      req.add_texts(workload_.SampleText(rng));
    }
    return TimeUnary<v1::ClassifyResponse>(
        [&](grpc::ClientContext* ctx, v1::ClassifyResponse* resp) {
          return stub->Classify(ctx, req, resp);
        },
        [](const v1::ClassifyResponse& resp, Sample* s) {
          s->items = resp.results_size();
          s->input_tokens = resp.usage().total_tokens();
        });
  }

  Sample Tokenize(v1::Inference::Stub* stub, std::mt19937_64& rng) {
    v1::TokenizeRequest req;
    req.set_model(opts_.model);
    req.set_text(workload_.SampleText(rng));
    return TimeUnary<v1::TokenizeResponse>(
        [&](grpc::ClientContext* ctx, v1::TokenizeResponse* resp) {
          return stub->Tokenize(ctx, req, resp);
        },
        [](const v1::TokenizeResponse& resp, Sample* s) {
          s->items = 1;
          s->input_tokens = resp.token_ids_size();
        });
  }

  // One bidirectional Embed stream: a writer thread keeps up to
  // opts.pipeline requests in flight; this thread reads the answers and
  // matches them to their send times by id. A stream that fails is counted
  // (every request in flight fails with it) and reopened.
  void EmbedStreamWorker(v1::Inference::Stub* stub, Slots* slots,
                         std::mt19937_64& rng, std::vector<Sample>* out) {
    while (true) {
      grpc::ClientContext ctx;
      // The stream lives for the whole run; each request on it still gets
      // --timeout once the run's duration is over.
      SetDeadline(&ctx, opts_.duration_seconds);
      auto stream = stub->Embed(&ctx);
      std::mutex mu;
      std::condition_variable cv;
      std::unordered_map<std::string, Clock::time_point> in_flight;  // mu
      bool reader_done = false;                                      // mu
      bool wrote_any = false;
      int64_t next_id = 0;
      std::thread writer([&] {
        while (true) {
          {
            std::unique_lock<std::mutex> lock(mu);
            cv.wait(lock, [&] {
              return reader_done ||
                     static_cast<int>(in_flight.size()) < opts_.pipeline;
            });
            if (reader_done) break;
          }
          if (!slots->Next()) break;
          v1::EmbedRequest req = MakeEmbedRequest(rng);
          req.set_id(std::to_string(next_id++));
          {
            std::lock_guard<std::mutex> lock(mu);
            in_flight[req.id()] = Clock::now();
          }
          wrote_any = true;
          if (!stream->Write(req)) break;
        }
        stream->WritesDone();
      });
      v1::EmbedResponse resp;
      while (stream->Read(&resp)) {
        const Clock::time_point t = Clock::now();
        Sample s;
        {
          std::lock_guard<std::mutex> lock(mu);
          auto it = in_flight.find(resp.id());
          if (it == in_flight.end()) continue;  // not ours: ignore
          s.e2e_s = Seconds(t - it->second);
          in_flight.erase(it);
        }
        cv.notify_all();
        s.ok = true;
        s.end = t;
        FillEmbed(resp, &s);
        Account(s, slots);
        out->push_back(std::move(s));
      }
      {
        std::lock_guard<std::mutex> lock(mu);
        reader_done = true;
      }
      cv.notify_all();
      writer.join();
      grpc::Status status = stream->Finish();
      const Clock::time_point t = Clock::now();
      for (const auto& [id, sent] : in_flight) {
        Sample s;
        s.end = t;
        s.e2e_s = Seconds(t - sent);
        Fail(status.ok() ? grpc::Status(grpc::StatusCode::INTERNAL,
                                        "stream ended without an answer")
                         : status,
             &s);
        Account(s, slots);
        out->push_back(std::move(s));
      }
      if (status.ok() || !wrote_any) return;  // done: slots ran out
    }
  }

  const Options& opts_;
  const Workload& workload_;
  std::vector<std::unique_ptr<v1::Inference::Stub>>& stubs_;
  std::atomic<int64_t> failures_{0};
  std::atomic<int64_t> successes_{0};
};

// ---------------------------------------------------------------- report

json SummaryJson(const Summary& s) {
  return {{"count", s.count}, {"mean", s.mean}, {"min", s.min}, {"max", s.max},
          {"p50", s.p50},     {"p90", s.p90},   {"p99", s.p99}};
}

std::vector<double> Millis(const std::vector<double>& seconds) {
  std::vector<double> ms;
  ms.reserve(seconds.size());
  for (double s : seconds) ms.push_back(s * 1e3);
  return ms;
}

json BuildReport(const Options& opts, const Workload& workload,
                 const std::vector<Sample>& samples, double wall_s) {
  int64_t ok = 0, input = 0, output = 0, cached = 0, items = 0;
  std::map<std::string, int64_t> errors;
  std::string first_error;
  std::vector<double> e2e, ttft, tpot, itl, itl_max;
  for (const Sample& s : samples) {
    if (!s.ok) {
      ++errors[absl::StrCat(static_cast<int>(s.code))];
      if (first_error.empty()) first_error = s.error;
      continue;
    }
    ++ok;
    input += s.input_tokens;
    output += s.output_tokens;
    cached += s.cached_tokens;
    items += s.items;
    e2e.push_back(s.e2e_s);
    if (s.ttft_s >= 0) ttft.push_back(s.ttft_s);
    if (s.tpot_s >= 0) tpot.push_back(s.tpot_s);
    itl.insert(itl.end(), s.itl_s.begin(), s.itl_s.end());
    if (!s.itl_s.empty()) {
      itl_max.push_back(*std::max_element(s.itl_s.begin(), s.itl_s.end()));
    }
  }
  const double wall = wall_s > 0 ? wall_s : 1e-9;
  const bool embeds =
      opts.rpc == Rpc::kEmbedBatch || opts.rpc == Rpc::kEmbedStream;
  json config = {
      {"address", opts.address},
      {"rpc", NameOf(opts.rpc)},
      {"model", opts.model},
      {"concurrency", opts.concurrency},
      {"connections", opts.connections},
      {"duration_s", opts.duration_seconds},
      {"requests", opts.duration_seconds > 0 ? 0 : opts.requests},
      {"warmup_requests", opts.warmup_requests},
      {"input_len", workload.from_file() ? "file" : opts.input_len.ToString()},
      {"output_len",
       opts.rpc == Rpc::kGenerate ? opts.output_len.ToString() : ""},
      {"prompts_file", opts.prompts_file},
      {"json_schema", !opts.json_schema.empty()},
      {"shared_prefix_tokens", opts.shared_prefix},
      {"batch_size", opts.batch_size},
      {"pipeline", opts.pipeline},
      {"ignore_eos", opts.ignore_eos},
      {"temperature", opts.temperature},
      {"disable_prefix_cache", opts.disable_prefix_cache},
      {"seed", opts.seed},
      {"label", opts.label},
  };
  json latency = {{"e2e", SummaryJson(Summarize(Millis(e2e)))}};
  if (opts.rpc == Rpc::kGenerate) {
    latency["ttft"] = SummaryJson(Summarize(Millis(ttft)));
    latency["tpot"] = SummaryJson(Summarize(Millis(tpot)));
    latency["itl"] = SummaryJson(Summarize(Millis(itl)));
    latency["itl_max"] = SummaryJson(Summarize(Millis(itl_max)));
  }
  return {
      {"tool", "inferd-bench"},
      {"config", config},
      {"model_info",
       {{"architecture", workload.model().architecture()},
        {"workflow", workload.model().workflow()},
        {"max_input_tokens", workload.model().max_input_tokens()},
        {"embedding_dims", workload.model().embedding_dims()}}},
      {"wall_s", wall_s},
      {"requests",
       {{"completed", ok},
        {"failed", static_cast<int64_t>(samples.size()) - ok},
        {"errors_by_code", errors},
        {"first_error", first_error}}},
      {"tokens",
       {{"input", input},
        {"output", output},
        {"cached_input", cached},
        {"items", items}}},
      {"throughput",
       {{"requests_per_s", ok / wall},
        {"input_tokens_per_s", input / wall},
        {"output_tokens_per_s", output / wall},
        {"total_tokens_per_s", (input + output) / wall},
        {"items_per_s", items / wall},
        {"embeddings_per_s", embeds ? items / wall : 0.0}}},
      {"latency_ms", latency},
  };
}

void PrintReport(const json& r) {
  const json& c = r["config"];
  const json& t = r["throughput"];
  std::printf("inferd-bench  rpc=%s model=%s concurrency=%d input=%s",
              c["rpc"].get<std::string>().c_str(),
              c["model"].get<std::string>().c_str(),
              c["concurrency"].get<int>(),
              c["input_len"].get<std::string>().c_str());
  if (c["rpc"] == "generate") {
    std::printf(" output=%s", c["output_len"].get<std::string>().c_str());
  }
  if (c["shared_prefix_tokens"].get<int64_t>() > 0) {
    std::printf(
        " shared_prefix=%lld",
        static_cast<long long>(c["shared_prefix_tokens"].get<int64_t>()));
  }
  if (c["batch_size"].get<int>() > 1) {
    std::printf(" batch=%d", c["batch_size"].get<int>());
  }
  std::printf("\n");
  std::printf("requests     %lld completed, %lld failed in %.2f s\n",
              static_cast<long long>(r["requests"]["completed"].get<int64_t>()),
              static_cast<long long>(r["requests"]["failed"].get<int64_t>()),
              r["wall_s"].get<double>());
  if (r["requests"]["failed"].get<int64_t>() > 0) {
    std::printf("errors       %s (first: %s)\n",
                r["requests"]["errors_by_code"].dump().c_str(),
                r["requests"]["first_error"].get<std::string>().c_str());
  }
  std::printf("throughput   %.2f req/s, input %.1f tok/s",
              t["requests_per_s"].get<double>(),
              t["input_tokens_per_s"].get<double>());
  if (c["rpc"] == "generate") {
    std::printf(
        ", output %.1f tok/s, cached input %lld tokens",
        t["output_tokens_per_s"].get<double>(),
        static_cast<long long>(r["tokens"]["cached_input"].get<int64_t>()));
  } else if (t["embeddings_per_s"].get<double>() > 0) {
    std::printf(", %.1f embeddings/s", t["embeddings_per_s"].get<double>());
  } else {
    std::printf(", %.1f items/s", t["items_per_s"].get<double>());
  }
  std::printf("\n%-12s %9s %9s %9s %9s %9s\n", "latency ms", "mean", "p50",
              "p90", "p99", "max");
  for (const char* name : {"e2e", "ttft", "tpot", "itl", "itl_max"}) {
    if (!r["latency_ms"].contains(name)) continue;
    const json& s = r["latency_ms"][name];
    std::printf("%-12s %9.2f %9.2f %9.2f %9.2f %9.2f\n", name,
                s["mean"].get<double>(), s["p50"].get<double>(),
                s["p90"].get<double>(), s["p99"].get<double>(),
                s["max"].get<double>());
  }
}

int Main(int argc, char** argv) {
  absl::StatusOr<Options> parsed = ParseArgs(argc, argv);
  if (!parsed.ok()) {
    std::fprintf(stderr, "inferd-bench: %s\n",
                 std::string(parsed.status().message()).c_str());
    return 2;
  }
  const Options& opts = *parsed;

  std::vector<std::unique_ptr<v1::Inference::Stub>> stubs;
  std::shared_ptr<grpc::Channel> first;
  for (int i = 0; i < opts.connections; ++i) {
    grpc::ChannelArguments args;
    args.SetInt("inferd_bench.connection", i);  // distinct args: own socket
    args.SetMaxReceiveMessageSize(-1);
    auto channel = grpc::CreateCustomChannel(
        opts.address, grpc::InsecureChannelCredentials(), args);
    if (!first) first = channel;
    stubs.push_back(v1::Inference::NewStub(channel));
  }
  auto models = v1::Models::NewStub(first);
  absl::StatusOr<std::unique_ptr<Workload>> workload =
      Workload::Create(opts, stubs[0].get(), models.get());
  if (!workload.ok()) {
    std::fprintf(stderr, "inferd-bench: %s\n",
                 std::string(workload.status().message()).c_str());
    return 1;
  }

  Driver driver(opts, **workload, stubs);
  double wall_s = 0;
  if (opts.warmup_requests > 0) {
    Slots warmup(opts.warmup_requests, Clock::time_point::max(), false);
    driver.Run(&warmup, opts.seed + 1, &wall_s);
  }
  const bool timed = opts.duration_seconds > 0;
  Slots slots(opts.requests,
              Clock::now() + std::chrono::microseconds(static_cast<int64_t>(
                                 opts.duration_seconds * 1e6)),
              timed);
  std::vector<Sample> samples = driver.Run(&slots, opts.seed + 2, &wall_s);

  json report = BuildReport(opts, **workload, samples, wall_s);
  PrintReport(report);
  if (!opts.json_path.empty()) {
    std::ofstream out(opts.json_path);
    out << report.dump(2) << "\n";
    if (!out) {
      std::fprintf(stderr, "inferd-bench: cannot write %s\n",
                   opts.json_path.c_str());
      return 1;
    }
  }
  return report["requests"]["completed"].get<int64_t>() > 0 ? 0 : 1;
}

}  // namespace
}  // namespace inferd::bench

int main(int argc, char** argv) { return inferd::bench::Main(argc, argv); }
