// libFuzzer target: the gRPC adapter (service/grpc/convert.cc) and the request
// checks (service/request/validation.cc), the step between a decoded inferd.v1
// request and the engine. The first
// byte picks the message (GenerateRequest, EmbedRequest, RerankRequest,
// ClassifyRequest) and the model it is checked against; the rest is the
// serialized message (inputs protobuf cannot parse are skipped: gRPC
// rejects them before inferd). A conversion must return a status for any
// message, never crash; an accepted request must satisfy the invariants the
// engines rely on (token ids inside the vocabulary, counts inside the
// limits, sampling values inside their documented ranges).
#include <cstddef>
#include <cstdint>

#include "absl/time/time.h"
#include "inferd/v1/inference.pb.h"
#include "nlohmann/json.hpp"
#include "runtime/engine/model_info.h"
#include "service/grpc/convert.h"
#include "service/request/validation.h"

namespace {

inferd::ServedModelInfo Model(bool generator) {
  inferd::ServedModelInfo m;
  m.name = generator ? "gen" : "emb";
  m.vocab_size = generator ? 49152 : 30522;
  m.max_input_tokens = generator ? 2048 : 512;
  m.hidden_size = 64;
  m.embedding_dims = generator ? 0 : 384;
  m.prompt_names = {"query", "document"};
  return m;
}

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const inferd::ServedModelInfo gen = Model(true);
  static const inferd::ServedModelInfo emb = Model(false);
  inferd::ApiLimits limits;
  limits.max_inputs_per_request = 1 + data[0] / 4;
  const absl::Time deadline = absl::FromUnixSeconds(1700000000);
  const uint8_t* body = data + 1;
  const int n = static_cast<int>(size - 1);
  switch (data[0] % 4) {
    case 0: {
      inferd::v1::GenerateRequest req;
      if (!req.ParseFromArray(body, n)) return 0;
      auto in = inferd::ToGenerateInput(req, deadline);
      if (!in.ok() || !inferd::Validate(*in, gen).ok()) return 0;
      const inferd::GenerateParams& p = in->params;
      if (in->prompt_token_ids.has_value()) {
        Check(!in->prompt_token_ids->empty());
        for (int64_t id : *in->prompt_token_ids) {
          Check(id >= 0 && id < gen.vocab_size);
        }
      }
      for (int32_t id : p.sampling.stop_token_ids) {
        Check(id >= 0 && id < gen.vocab_size);
      }
      for (const auto& [id, bias] : p.sampling.logit_bias) {
        Check(id >= 0 && id < gen.vocab_size);
      }
      Check(p.sampling.max_tokens >= 0 &&
            p.sampling.max_tokens <= gen.max_input_tokens);
      Check(p.sampling.Validate().ok());
      Check(p.speculative.Validate().ok());
      // An accepted request has one input: token ids, messages or a prompt.
      Check(in->prompt_token_ids.has_value() + !p.messages.empty() +
                p.prompt.has_value() == 1);
      for (const auto& m : p.messages) Check(!m.role.empty());
      // Tools: an accepted plan keeps the request's tools; a constraint is
      // valid JSON.
      // Both plans: a model with a tool format of its own, and one without
      // (the generic format).
      for (const bool generic : {false, true}) {
        inferd::GenerateInput planned = *in;
        const inferd::ToolPlan plan = inferd::PlanTools(&planned, generic);
        if (plan.mode == inferd::ToolPlan::Mode::kOff) continue;
        Check(static_cast<int>(planned.params.tools.size()) == req.tools_size());
        if (plan.mode == inferd::ToolPlan::Mode::kRequired ||
            plan.mode == inferd::ToolPlan::Mode::kNamed ||
            planned.params.sampling.response_format.or_text) {
          Check(!nlohmann::json::parse(planned.params.sampling.response_format.spec,
                                       nullptr, false)
                     .is_discarded());
        }
        Check(plan.generic == (generic && plan.mode != inferd::ToolPlan::Mode::kNone));
      }
      break;
    }
    case 1: {
      inferd::v1::EmbedRequest req;
      if (!req.ParseFromArray(body, n)) return 0;
      const inferd::EmbedInput in = inferd::ToEmbedInput(req, deadline);
      if (!inferd::Validate(in, emb, limits).ok()) return 0;
      const inferd::EmbedParams& p = in.params;
      const size_t count = p.texts.size() + in.token_ids.size();
      Check(count >= 1 &&
            count <= static_cast<size_t>(limits.max_inputs_per_request));
      for (const auto& ids : in.token_ids) {
        Check(!ids.empty());
        for (int64_t id : ids) Check(id >= 0 && id < emb.vocab_size);
      }
      Check(p.dimensions >= 0 && p.dimensions <= emb.embedding_dims);
      Check(p.want_dense || p.want_sparse || p.want_multi_vector);
      break;
    }
    case 2: {
      inferd::v1::RerankRequest req;
      if (!req.ParseFromArray(body, n)) return 0;
      const inferd::RerankInput in = inferd::ToRerankInput(req, deadline);
      if (!inferd::Validate(in, limits).ok()) return 0;
      Check(!in.params.query.empty() && !in.params.documents.empty() &&
            in.params.documents.size() <=
                static_cast<size_t>(limits.max_inputs_per_request));
      break;
    }
    case 3: {
      inferd::v1::ClassifyRequest req;
      if (!req.ParseFromArray(body, n)) return 0;
      const inferd::ClassifyInput in = inferd::ToClassifyInput(req, deadline);
      if (!inferd::Validate(in, limits).ok()) return 0;
      const size_t count = in.params.texts.size() + in.params.pairs.size();
      Check(count >= 1 &&
            count <= static_cast<size_t>(limits.max_inputs_per_request));
      break;
    }
  }
  return 0;
}
