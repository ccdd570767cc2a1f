#include "runtime/gen/sampling_params.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "runtime/common/field_error.h"

namespace inferd {

absl::string_view FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone:
      return "none";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kEos:
      return "eos";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kError:
      return "error";
  }
  return "unknown";
}

namespace {

absl::Status OutOfRange(absl::string_view field, double value,
                        absl::string_view range) {
  return FieldError(absl::StrCat("sampling.", field),
                    absl::StrCat(" = ", value, " is outside ", range));
}

}  // namespace

absl::Status SamplingParams::Validate() const {
  if (max_tokens < 0) return OutOfRange("max_tokens", max_tokens, "[0, ...)");
  if (min_tokens < 0) return OutOfRange("min_tokens", min_tokens, "[0, ...)");
  if (max_tokens > 0 && min_tokens > max_tokens) {
    return FieldError(
        "sampling.min_tokens", absl::StrCat(" (", min_tokens,
                     ") must be <= max_tokens (", max_tokens, ")"));
  }
  if (!(temperature >= 0.0f && temperature <= 100.0f)) {
    return OutOfRange("temperature", temperature, "[0, 100]");
  }
  if (top_k < -1) return OutOfRange("top_k", top_k, "{-1, 0, 1, ...}");
  if (!(top_p > 0.0f && top_p <= 1.0f)) {
    return OutOfRange("top_p", top_p, "(0, 1]");
  }
  if (!(min_p >= 0.0f && min_p <= 1.0f)) {
    return OutOfRange("min_p", min_p, "[0, 1]");
  }
  if (!(repetition_penalty > 0.0f && repetition_penalty <= 10.0f)) {
    return OutOfRange("repetition_penalty", repetition_penalty, "(0, 10]");
  }
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f)) {
    return OutOfRange("presence_penalty", presence_penalty, "[-2, 2]");
  }
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f)) {
    return OutOfRange("frequency_penalty", frequency_penalty, "[-2, 2]");
  }
  if (static_cast<int32_t>(logit_bias.size()) > kMaxLogitBias) {
    return FieldError(
        "sampling.logit_bias", absl::StrCat(" has ", logit_bias.size(),
                     " entries; at most ", kMaxLogitBias, " are allowed"));
  }
  for (const auto& [id, bias] : logit_bias) {
    if (!(bias >= -100.0f && bias <= 100.0f)) {
      return FieldError("sampling.logit_bias", absl::StrCat(
          ": the bias of token ", id, " is ", bias,
          "; it must be in [-100, 100]"));
    }
    if (id < 0) {
      return FieldError("sampling.logit_bias", absl::StrCat(
          ": token id ", id, " is negative"));
    }
  }
  const ResponseFormat& rf = response_format;
  if (rf.type == ResponseFormat::Type::kJsonSchema ||
      rf.type == ResponseFormat::Type::kRegex ||
      rf.type == ResponseFormat::Type::kGrammar) {
    const char* field = rf.type == ResponseFormat::Type::kRegex
                            ? "response_format.regex"
                        : rf.type == ResponseFormat::Type::kGrammar
                            ? "response_format.grammar"
                            : "response_format.json_schema";
    if (rf.spec.empty()) {
      return FieldError(field, " is empty");
    }
    if (static_cast<int64_t>(rf.spec.size()) > kMaxResponseFormatBytes) {
      return FieldError(
          field, absl::StrCat(" has ", rf.spec.size(), " bytes; at most ",
                       kMaxResponseFormatBytes, " are allowed"));
    }
  }
  if (rf.type == ResponseFormat::Type::kChoice) {
    if (rf.choices.empty() ||
        static_cast<int32_t>(rf.choices.size()) > kMaxChoices) {
      return FieldError("response_format.choice", absl::StrCat(
          " needs 1 to ", kMaxChoices,
          " choices; it has ", rf.choices.size()));
    }
    int64_t bytes = 0;
    for (const std::string& c : rf.choices) {
      if (c.empty()) {
        return FieldError("response_format.choice",
                          ": a choice is empty");
      }
      bytes += static_cast<int64_t>(c.size());
    }
    if (bytes > kMaxResponseFormatBytes) {
      return FieldError(
          "response_format.choice", absl::StrCat(" holds ", bytes,
                       " bytes; at most ", kMaxResponseFormatBytes,
                       " are allowed"));
    }
  }
  if (logprobs < 0 || logprobs > kMaxLogprobs) {
    return OutOfRange("logprobs", logprobs, "[0, 20]");
  }
  if (prompt_logprobs < 0 || prompt_logprobs > kMaxLogprobs) {
    return OutOfRange("prompt_logprobs", prompt_logprobs, "[0, 20]");
  }
  if (n < 1 || n > kMaxSamples) {
    return FieldError("sampling.n", absl::StrCat(
        " is ", n, "; at most ", kMaxSamples,
        " samples per request are allowed (0 means 1)"));
  }
  if (static_cast<int32_t>(stop.size()) > kMaxStopStrings) {
    return FieldError(
        "sampling.stop", absl::StrCat(" has ", stop.size(), " strings; at most ",
                     kMaxStopStrings, " are allowed"));
  }
  for (const std::string& s : stop) {
    if (s.empty()) {
      return FieldError("sampling.stop",
                        " contains an empty string");
    }
    if (static_cast<int32_t>(s.size()) > kMaxStopStringBytes) {
      return FieldError(
          "sampling.stop", absl::StrCat(" string of ", s.size(), " bytes exceeds ",
                       kMaxStopStringBytes, " bytes"));
    }
  }
  for (int32_t id : stop_token_ids) {
    if (id < 0) return OutOfRange("stop_token_ids", id, "[0, vocab_size)");
  }
  return absl::OkStatus();
}

}  // namespace inferd
