// Proto <-> runtime conversion and request validation for the inferd.v1
// API. Validation errors are INVALID_ARGUMENT naming the field and the limit.
// Pure functions; thread-safe.
#ifndef INFERD_SERVICE_CONVERT_H_
#define INFERD_SERVICE_CONVERT_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "inferd/v1/inference.pb.h"
#include "inferd/v1/models.pb.h"
#include "runtime/engine/model_info.h"
#include "runtime/engine/requests.h"

namespace inferd {

struct ApiLimits {
  int max_inputs_per_request = 256;
};

absl::StatusOr<EmbedParams> ToEmbedParams(const v1::EmbedRequest& req,
                                          const ServedModelInfo& model,
                                          const ApiLimits& limits,
                                          absl::Time deadline);
absl::StatusOr<ClassifyParams> ToClassifyParams(const v1::ClassifyRequest& req,
                                                const ApiLimits& limits,
                                                absl::Time deadline);
absl::StatusOr<RerankParams> ToRerankParams(const v1::RerankRequest& req,
                                            const ApiLimits& limits,
                                            absl::Time deadline);
// Most turns a conversation may have.
inline constexpr int kMaxChatMessages = 4096;

// The messages of a Generate/Tokenize request (roles non-empty).
absl::Status ToChatMessages(
    const google::protobuf::RepeatedPtrField<v1::ChatMessage>& in,
    std::vector<ChatMessage>* out);

// Most tools a request may define.
inline constexpr int kMaxTools = 128;

// What a Generate request asks of tool calling, after ToToolPlan.
struct ToolPlan {
  enum class Mode {
    kOff,       // no tools
    kNone,      // tools rendered, output not parsed
    kAuto,      // the model's own format parsed
    kRequired,  // constrained to an array of {"name", "arguments"}
    kNamed,     // constrained to `function`'s arguments
  };
  Mode mode = Mode::kOff;
  std::string function;
};
// The tools of a request (names, parameters schemas; INVALID_ARGUMENT
// naming the field).
absl::Status ToChatTools(const google::protobuf::RepeatedPtrField<v1::Tool>& in,
                         std::vector<ChatTool>* out);
// Validates tools / tool_choice / parallel_tool_calls (INVALID_ARGUMENT
// naming the field), fills p->tools, and for required or a named function
// sets p->sampling.response_format to the constraint. Call after
// ToGenerateParams (a response_format of the request cannot be combined
// with such a constraint).
absl::StatusOr<ToolPlan> ToToolPlan(const v1::GenerateRequest& req,
                                    GenerateParams* p);

absl::StatusOr<GenerateParams> ToGenerateParams(const v1::GenerateRequest& req,
                                                const ServedModelInfo& model,
                                                absl::Time deadline);

void FillEmbedResponse(const EmbedResult& result, const v1::EmbedRequest& req,
                       v1::EmbedResponse* resp);
void FillClassifyResponse(const ClassifyResult& result,
                          const ServedModelInfo& model, v1::ClassifyResponse* resp);
void FillRerankResponse(const RerankResult& result,
                        const v1::RerankRequest& req, v1::RerankResponse* resp);
v1::FinishReason ToProtoFinishReason(FinishReason reason);
// How logprobs name a token id: its vocabulary entry (the tokenizer's
// IdToToken) and the bytes it adds to the text (TokenLogprob.text_bytes).
struct TokenNaming {
  std::function<std::string(int32_t)> token;
  std::function<std::string(int32_t)> text_bytes;
};
// One Generate response message from an engine chunk; usage and timings
// on a chunk that finishes its sample.
void FillGenerateResponse(const GenerateChunk& chunk,
                          const std::string& request_id,
                          const TokenNaming& naming,
                          v1::GenerateResponse* resp);
void FillModelInfo(const ServedModelInfo& info, v1::ModelInfo* out);

}  // namespace inferd

#endif  // INFERD_SERVICE_CONVERT_H_
