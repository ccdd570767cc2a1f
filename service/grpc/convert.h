// The gRPC front end's adapter: inferd.v1 messages read straight into the
// request layer's types (requests.h) and its answers written back as
// inferd.v1 messages. No validation here (validation.h checks the requests
// for both front ends); only what the wire format itself can get wrong (an
// enum value this server does not know) is refused, naming the field.
// Pure functions; thread-safe.
#ifndef INFERD_SERVICE_GRPC_CONVERT_H_
#define INFERD_SERVICE_GRPC_CONVERT_H_

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "inferd/v1/inference.pb.h"
#include "inferd/v1/models.pb.h"
#include "runtime/engine/model_info.h"
#include "service/request/requests.h"

namespace inferd {

// Requests; `deadline` is the call's.
absl::StatusOr<GenerateInput> ToGenerateInput(const v1::GenerateRequest& req,
                                              absl::Time deadline);
EmbedInput ToEmbedInput(const v1::EmbedRequest& req, absl::Time deadline);
RerankInput ToRerankInput(const v1::RerankRequest& req, absl::Time deadline);
ClassifyInput ToClassifyInput(const v1::ClassifyRequest& req,
                              absl::Time deadline);
TokenizeInput ToTokenizeInput(const v1::TokenizeRequest& req);
DetokenizeInput ToDetokenizeInput(const v1::DetokenizeRequest& req);

// Answers.
void FillGenerateResponse(const GenerateOutput& out, v1::GenerateResponse* resp);
// `req`'s id and encoding shape the response.
void FillEmbedResponse(const EmbedResult& result, const v1::EmbedRequest& req,
                       v1::EmbedResponse* resp);
void FillRerankResponse(const RerankAnswer& answer, v1::RerankResponse* resp);
void FillClassifyResponse(const ClassifyAnswer& answer,
                          v1::ClassifyResponse* resp);
void FillTokenizeResponse(const TokenizeAnswer& answer,
                          v1::TokenizeResponse* resp);
void FillModelInfo(const ServedModelInfo& info, v1::ModelInfo* out);
v1::FinishReason ToProtoFinishReason(FinishReason reason);

}  // namespace inferd

#endif  // INFERD_SERVICE_GRPC_CONVERT_H_
