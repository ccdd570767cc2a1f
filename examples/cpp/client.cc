// inferd example client (C++, gRPC synchronous API): streams a Generate
// completion (printing each delta as it arrives), embeds texts over the
// bidirectional Embed stream (answers matched by id) and with EmbedBatch, and
// reranks documents. Single-threaded except for the Embed writer thread.
//
//   inferd_example_client --address 127.0.0.1:50051 --generate-model stories
//       --embed-model minilm --rerank-model reranker-random [--json FILE]
// An empty model name skips that call.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "inferd/v1/inference.grpc.pb.h"
#include "nlohmann/json.hpp"

namespace {

using inferd::v1::Inference;
using json = nlohmann::json;

const std::vector<std::string> kEmbedTexts = {
    "inferd serves language models over gRPC.",
    "The quick brown fox jumps over the lazy dog.",
    "Embeddings map text to vectors.",
    "A cat sat on the mat.",
    "Rerankers score a query against documents.",
};

struct Options {
  std::string address = "127.0.0.1:50051";
  std::string generate_model = "stories";
  std::string embed_model = "minilm";
  std::string rerank_model = "reranker-random";
  std::string prompt = "Once upon a time";
  int max_tokens = 40;
  float temperature = 0;
  std::string query = "What does inferd do?";
  std::vector<std::string> documents = {
      "inferd is a gRPC inference server for LLMs and embedders.",
      "Bananas are rich in potassium.",
      "The server streams generated tokens to the client.",
      "Paris is the capital of France.",
  };
  double timeout_seconds = 120;
  std::string json_path;
};

void Usage() {
  std::printf(
      "usage: inferd_example_client [--address H:P] [--generate-model M]\n"
      "  [--embed-model M] [--rerank-model M] [--prompt TEXT]\n"
      "  [--max-tokens N] [--temperature T] [--query TEXT]\n"
      "  [--document TEXT]... [--timeout S] [--json FILE]\n"
      "An empty model name skips that call.\n");
}

// Returns false (after printing why) on a bad command line.
bool ParseArgs(int argc, char** argv, Options* opts) {
  bool custom_docs = false;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      Usage();
      std::exit(0);
    }
    std::string value;
    size_t eq = flag.find('=');
    if (eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      std::fprintf(stderr, "%s needs a value\n", flag.c_str());
      return false;
    }
    if (flag == "--address") {
      opts->address = value;
    } else if (flag == "--generate-model") {
      opts->generate_model = value;
    } else if (flag == "--embed-model") {
      opts->embed_model = value;
    } else if (flag == "--rerank-model") {
      opts->rerank_model = value;
    } else if (flag == "--prompt") {
      opts->prompt = value;
    } else if (flag == "--max-tokens") {
      opts->max_tokens = std::atoi(value.c_str());
    } else if (flag == "--temperature") {
      opts->temperature = std::strtof(value.c_str(), nullptr);
    } else if (flag == "--query") {
      opts->query = value;
    } else if (flag == "--document") {
      if (!custom_docs) opts->documents.clear();
      custom_docs = true;
      opts->documents.push_back(value);
    } else if (flag == "--timeout") {
      opts->timeout_seconds = std::strtod(value.c_str(), nullptr);
    } else if (flag == "--json") {
      opts->json_path = value;
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return false;
    }
  }
  return true;
}

void SetDeadline(const Options& opts, grpc::ClientContext* ctx) {
  ctx->set_deadline(std::chrono::system_clock::now() +
                    std::chrono::milliseconds(
                        static_cast<int64_t>(opts.timeout_seconds * 1000)));
}

double Norm(const inferd::v1::Embedding& e) {
  double sum = 0;
  for (float v : e.values()) sum += static_cast<double>(v) * v;
  return std::sqrt(sum);
}

json Values(const inferd::v1::Embedding& e) {
  return json(std::vector<float>(e.values().begin(), e.values().end()));
}

grpc::Status RunGenerate(Inference::Stub* stub, const Options& opts,
                         json* report) {
  inferd::v1::GenerateRequest req;
  req.set_model(opts.generate_model);
  req.set_prompt(opts.prompt);
  req.mutable_sampling()->set_max_tokens(opts.max_tokens);
  req.mutable_sampling()->set_temperature(opts.temperature);

  std::printf("== Generate (%s) ==\n%s", opts.generate_model.c_str(),
              opts.prompt.c_str());
  std::fflush(stdout);
  grpc::ClientContext ctx;
  SetDeadline(opts, &ctx);
  std::unique_ptr<grpc::ClientReader<inferd::v1::GenerateResponse>> reader =
      stub->Generate(&ctx, req);
  inferd::v1::GenerateResponse resp, last;
  std::string text;
  std::vector<uint32_t> token_ids;
  int messages = 0;
  while (reader->Read(&resp)) {
    ++messages;
    text += resp.text();
    token_ids.insert(token_ids.end(), resp.token_ids().begin(),
                     resp.token_ids().end());
    std::fwrite(resp.text().data(), 1, resp.text().size(), stdout);
    std::fflush(stdout);  // each delta as it arrives
    last = resp;
  }
  std::printf("\n");
  grpc::Status status = reader->Finish();
  if (!status.ok()) return status;
  const std::string reason =
      inferd::v1::FinishReason_Name(last.finish_reason());
  std::printf("[finish=%s prompt_tokens=%u completion_tokens=%u messages=%d]\n",
              reason.c_str(), last.usage().prompt_tokens(),
              last.usage().completion_tokens(), messages);
  (*report)["generate"] = {
      {"model", opts.generate_model},
      {"text", text},
      {"token_ids", token_ids},
      {"messages", messages},
      {"finish_reason", reason},
      {"prompt_tokens", last.usage().prompt_tokens()},
      {"completion_tokens", last.usage().completion_tokens()},
  };
  return grpc::Status::OK;
}

grpc::Status RunEmbed(Inference::Stub* stub, const Options& opts,
                      json* report) {
  std::printf("== Embed, bidirectional stream (%s) ==\n",
              opts.embed_model.c_str());
  // One request per text plus one with every text.
  std::map<std::string, inferd::v1::EmbedRequest> sent;
  for (size_t i = 0; i < kEmbedTexts.size(); ++i) {
    inferd::v1::EmbedRequest r;
    r.set_model(opts.embed_model);
    r.set_id("text-" + std::to_string(i));
    r.add_texts(kEmbedTexts[i]);
    sent[r.id()] = r;
  }
  inferd::v1::EmbedRequest all;
  all.set_model(opts.embed_model);
  all.set_id("all");
  for (const std::string& t : kEmbedTexts) all.add_texts(t);
  sent[all.id()] = all;

  grpc::ClientContext ctx;
  SetDeadline(opts, &ctx);
  auto stream = stub->Embed(&ctx);
  // Writes happen on their own thread while answers are read here, as a
  // long-lived stream would do; answers can arrive in any order.
  std::thread writer([&stream, &sent] {
    for (const auto& [id, req] : sent) {
      if (!stream->Write(req)) break;
    }
    stream->WritesDone();
  });
  json stream_report = json::object();
  std::string problem;
  inferd::v1::EmbedResponse resp;
  while (stream->Read(&resp)) {
    auto it = sent.find(resp.id());
    if (it == sent.end()) {
      problem = "answer with unknown id " + resp.id();
    } else if (stream_report.contains(resp.id())) {
      problem = "two answers for id " + resp.id();
    } else if (resp.embeddings_size() != it->second.texts_size()) {
      problem = "id " + resp.id() + ": wrong number of embeddings";
    }
    if (!problem.empty()) break;
    json vectors = json::array();
    for (const auto& e : resp.embeddings()) vectors.push_back(Values(e));
    stream_report[resp.id()] = vectors;
    const inferd::v1::Embedding& e = resp.embeddings(0);
    std::printf("  id=%-7s inputs=%d dims=%u norm=%.4f first=[",
                resp.id().c_str(), resp.embeddings_size(), e.dims(), Norm(e));
    for (int i = 0; i < std::min(4, e.values_size()); ++i) {
      std::printf("%s%.4f", i ? ", " : "", e.values(i));
    }
    std::printf("]\n");
  }
  if (!problem.empty()) ctx.TryCancel();
  writer.join();
  grpc::Status status = stream->Finish();
  if (!problem.empty()) {
    return grpc::Status(grpc::StatusCode::INTERNAL, problem);
  }
  if (!status.ok()) return status;
  for (const auto& [id, req] : sent) {
    if (!stream_report.contains(id)) {
      return grpc::Status(grpc::StatusCode::INTERNAL, "no answer for id " + id);
    }
  }

  std::printf("== EmbedBatch (%s) ==\n", opts.embed_model.c_str());
  inferd::v1::EmbedRequest batch;
  batch.set_model(opts.embed_model);
  for (const std::string& t : kEmbedTexts) batch.add_texts(t);
  inferd::v1::EmbedResponse batch_resp;
  grpc::ClientContext batch_ctx;
  SetDeadline(opts, &batch_ctx);
  status = stub->EmbedBatch(&batch_ctx, batch, &batch_resp);
  if (!status.ok()) return status;
  json batch_vectors = json::array();
  json batch_dims = json::array();
  for (int i = 0; i < batch_resp.embeddings_size(); ++i) {
    const inferd::v1::Embedding& e = batch_resp.embeddings(i);
    std::printf("  dims=%u tokens=%u norm=%.4f \"%s\"\n", e.dims(), e.tokens(),
                Norm(e), kEmbedTexts[i].c_str());
    batch_vectors.push_back(Values(e));
    batch_dims.push_back(e.dims());
  }
  std::printf("[total_tokens=%u]\n", batch_resp.usage().total_tokens());
  (*report)["embed"] = {{"model", opts.embed_model},
                        {"texts", kEmbedTexts},
                        {"stream", stream_report},
                        {"batch", batch_vectors},
                        {"batch_dims", batch_dims}};
  return grpc::Status::OK;
}

grpc::Status RunRerank(Inference::Stub* stub, const Options& opts,
                       json* report) {
  std::printf("== Rerank (%s) ==\n  query: \"%s\"\n", opts.rerank_model.c_str(),
              opts.query.c_str());
  inferd::v1::RerankRequest req;
  req.set_model(opts.rerank_model);
  req.set_query(opts.query);
  for (const std::string& d : opts.documents) req.add_documents(d);
  inferd::v1::RerankResponse resp;
  grpc::ClientContext ctx;
  SetDeadline(opts, &ctx);
  grpc::Status status = stub->Rerank(&ctx, req, &resp);
  if (!status.ok()) return status;
  json results = json::array();
  for (const auto& r : resp.results()) {
    const char* doc = r.index() < opts.documents.size()
                          ? opts.documents[r.index()].c_str()
                          : "(index out of range)";
    std::printf("  %.4f  [%u] \"%s\"\n", r.score(), r.index(), doc);
    results.push_back({{"index", r.index()}, {"score", r.score()}});
  }
  (*report)["rerank"] = {{"model", opts.rerank_model},
                         {"documents", opts.documents.size()},
                         {"results", results}};
  return grpc::Status::OK;
}

}  // namespace

int main(int argc, char** argv) {
  Options opts;
  if (!ParseArgs(argc, argv, &opts)) return 2;
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel(opts.address, grpc::InsecureChannelCredentials());
  std::unique_ptr<Inference::Stub> stub = Inference::NewStub(channel);
  json report = {{"address", opts.address}};
  grpc::Status status;
  if (status.ok() && !opts.generate_model.empty()) {
    status = RunGenerate(stub.get(), opts, &report);
  }
  if (status.ok() && !opts.embed_model.empty()) {
    status = RunEmbed(stub.get(), opts, &report);
  }
  if (status.ok() && !opts.rerank_model.empty()) {
    status = RunRerank(stub.get(), opts, &report);
  }
  if (!status.ok()) {
    std::fprintf(stderr, "error: code %d: %s\n",
                 static_cast<int>(status.error_code()),
                 status.error_message().c_str());
    return 1;
  }
  if (!opts.json_path.empty()) {
    std::ofstream out(opts.json_path);
    out << report.dump();
    if (!out) {
      std::fprintf(stderr, "cannot write %s\n", opts.json_path.c_str());
      return 1;
    }
  }
  return 0;
}
