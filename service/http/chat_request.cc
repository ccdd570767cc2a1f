#include "service/http/chat_request.h"

#include <algorithm>
#include <limits>
#include <map>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/common/status_macros.h"

namespace inferd::http {
absl::StatusOr<std::string> ContentText(
    const Json& content, const std::string& param,
    std::initializer_list<absl::string_view> types) {
  if (content.is_null()) return std::string();
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) {
    return Invalid(param, "must be a string or an array of content parts");
  }
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& part = content[i];
    const std::string type = part.is_object() ? StringField(part, "type") : "";
    const char* key = type == "refusal" ? "refusal" : "text";
    if (std::find(types.begin(), types.end(), type) == types.end() ||
        !part.contains(key) || !part[key].is_string()) {
      return Invalid(absl::StrCat(param, "[", i, "]"),
                     absl::StrCat("only text parts ({\"type\": \"",
                                  *types.begin(),
                                  "\", \"text\": ...}) are supported (this "
                                  "server serves text models)"));
    }
    text += part[key].get<std::string>();
  }
  return text;
}

absl::Status ToChatMessage(const Json& m, size_t i, ChatMessage* out) {
  const std::string p = absl::StrCat("messages[", i, "]");
  if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
    return Invalid(p, "must be an object with a role");
  }
  std::string role = m["role"].get<std::string>();
  if (role == "developer") role = "system";  // OpenAI's newer name
  ASSIGN_OR_RETURN(std::string content,
                   ContentText(m.value("content", Json()),
                               absl::StrCat(p, ".content"), {"text"}));
  if (auto calls = m.find("tool_calls");
      calls != m.end() && !calls->is_null()) {
    const std::string cp = absl::StrCat(p, ".tool_calls");
    if (role != "assistant") return Invalid(cp, "only assistant messages call tools");
    if (!calls->is_array()) return Invalid(cp, "must be an array");
    for (size_t j = 0; j < calls->size(); ++j) {
      const Json& c = (*calls)[j];
      const std::string q = absl::StrCat(cp, "[", j, "]");
      if (!c.is_object() || !c.contains("function") ||
          !c["function"].is_object()) {
        return Invalid(q, "must be {\"id\", \"type\": \"function\", "
                          "\"function\": {\"name\", \"arguments\"}}");
      }
      if ((c.contains("type") && StringField(c, "type") != "function")) {
        return Invalid(absl::StrCat(q, ".type"), "must be \"function\"");
      }
      const Json& f = c["function"];
      if (!f.contains("name") || !f["name"].is_string()) {
        return Invalid(absl::StrCat(q, ".function.name"), "must be a string");
      }
      ChatToolCall& t = out->tool_calls.emplace_back();
      t.id = StringField(c, "id");
      t.name = f["name"].get<std::string>();
      if (auto a = f.find("arguments"); a != f.end() && !a->is_null()) {
        // OpenAI clients send a string; an object is taken as well.
        if (a->is_string()) {
          t.arguments = a->get<std::string>();
        } else if (a->is_object()) {
          t.arguments = a->dump();
        } else {
          return Invalid(absl::StrCat(q, ".function.arguments"),
                         "must be a JSON string");
        }
      }
    }
  }
  if (auto id = m.find("tool_call_id"); id != m.end() && !id->is_null()) {
    if (!id->is_string()) return Invalid(absl::StrCat(p, ".tool_call_id"), "must be a string");
    out->tool_call_id = id->get<std::string>();
  }
  if (auto n = m.find("name"); n != m.end() && n->is_string()) {
    out->name = n->get<std::string>();
  }
  for (const char* key : {"reasoning_content", "reasoning"}) {
    if (auto r = m.find(key); r != m.end() && r->is_string()) {
      out->reasoning_content = r->get<std::string>();
    }
  }
  out->role = std::move(role);
  out->content = std::move(content);
  return absl::OkStatus();
}

absl::Status ToToolList(const Json& body, std::vector<ChatTool>* tools,
                        bool flat) {
  auto t = body.find("tools");
  if (t == body.end() || t->is_null()) return absl::OkStatus();
  if (!t->is_array()) return Invalid("tools", "must be an array");
  for (size_t i = 0; i < t->size(); ++i) {
    const Json& tool = (*t)[i];
    const std::string p = absl::StrCat("tools[", i, "]");
    if (!tool.is_object() || StringField(tool, "type") != "function") {
      return Invalid(absl::StrCat(p, ".type"),
                     "only function tools ({\"type\": \"function\", ...}) "
                     "are supported");
    }
    // Chat nests the function under "function"; the Responses API does
    // not.
    const bool nested = !flat;
    const std::string fp = nested ? absl::StrCat(p, ".function") : p;
    const Json& f = nested ? tool["function"] : tool;
    if (!f.is_object()) return Invalid(fp, "must be an object");
    if (!f.contains("name") || !f["name"].is_string()) {
      return Invalid(absl::StrCat(fp, ".name"), "must be a string");
    }
    ChatTool& out = tools->emplace_back();
    out.name = f["name"].get<std::string>();
    if (auto st = f.find("strict"); st != f.end() && st->is_boolean()) {
      out.strict = st->get<bool>();
    }
    if (auto d = f.find("description"); d != f.end() && !d->is_null()) {
      if (!d->is_string()) {
        return Invalid(absl::StrCat(fp, ".description"), "must be a string");
      }
      out.description = d->get<std::string>();
    }
    if (auto ps = f.find("parameters"); ps != f.end() && !ps->is_null()) {
      if (!ps->is_object()) {
        return Invalid(absl::StrCat(fp, ".parameters"),
                       "must be a JSON Schema object");
      }
      out.parameters = ps->dump();
    }
  }
  return absl::OkStatus();
}

// tools, tool_choice, parallel_tool_calls (OpenAI's shapes).
absl::Status ToTools(const Json& body, GenerateInput* req, bool flat) {
  if (auto f = body.find("functions");
      f != body.end() && f->is_array() && !f->empty()) {
    return Invalid("functions",
                   "the legacy functions field is not supported; use tools");
  }
  RETURN_IF_ERROR(ToToolList(body, &req->params.tools, flat));
  if (auto c = body.find("tool_choice"); c != body.end() && !c->is_null()) {
    ToolChoice* tc = &req->tool_choice;
    if (c->is_string()) {
      const std::string v = c->get<std::string>();
      if (v == "none") {
        tc->mode = ToolChoice::Mode::kNone;
      } else if (v == "auto") {
        tc->mode = ToolChoice::Mode::kAuto;
      } else if (v == "required") {
        tc->mode = ToolChoice::Mode::kRequired;
      } else {
        return Invalid("tool_choice",
                       "must be none, auto, required or {\"type\": "
                       "\"function\", \"function\": {\"name\": ...}}");
      }
    } else if (c->is_object() && StringField(*c, "type") == "function" &&
               c->contains("function") && (*c)["function"].is_object() &&
               (*c)["function"].contains("name") &&
               (*c)["function"]["name"].is_string()) {
      tc->mode = ToolChoice::Mode::kFunction;
      tc->function = (*c)["function"]["name"].get<std::string>();
    } else if (flat && c->is_object() &&
               StringField(*c, "type") == "function" && c->contains("name") &&
               (*c)["name"].is_string()) {
      // The Responses API's shape.
      tc->mode = ToolChoice::Mode::kFunction;
      tc->function = (*c)["name"].get<std::string>();
    } else {
      return Invalid("tool_choice",
                     "must be none, auto, required or {\"type\": "
                     "\"function\", \"function\": {\"name\": ...}}");
    }
  }
  if (auto p = body.find("parallel_tool_calls"); p != body.end() && !p->is_null()) {
    bool v = true;
    RETURN_IF_ERROR(Bool(body, "parallel_tool_calls", &v));
    req->parallel_tool_calls = v;
  }
  return absl::OkStatus();
}

namespace {

// A count, clamped to int32 (a larger one is out of every range anyway).
int32_t Clamp32(int64_t v) {
  return static_cast<int32_t>(std::clamp<int64_t>(
      v, std::numeric_limits<int32_t>::min(),
      std::numeric_limits<int32_t>::max()));
}

absl::Status ToStop(const Json& body, SamplingParams* s) {
  auto it = body.find("stop");
  if (it == body.end() || it->is_null()) return absl::OkStatus();
  if (it->is_string()) {
    s->stop.push_back(it->get<std::string>());
  } else if (it->is_array()) {
    for (const Json& x : *it) {
      if (!x.is_string()) return Invalid("stop", "must hold strings");
      s->stop.push_back(x.get<std::string>());
    }
  } else {
    return Invalid("stop", "must be a string or an array of strings");
  }
  return absl::OkStatus();
}

absl::Status ToLogitBias(const Json& body, SamplingParams* s) {
  auto it = body.find("logit_bias");
  if (it == body.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_object()) return Invalid("logit_bias", "must be an object");
  std::map<int32_t, float> bias;
  for (const auto& [k, v] : it->items()) {
    uint32_t id = 0;
    if (!absl::SimpleAtoi(k, &id) || !v.is_number()) {
      return Invalid("logit_bias",
                     "keys are token ids, values numbers (-100 to 100)");
    }
    bias[Clamp32(id)] = v.get<float>();
  }
  s->logit_bias.assign(bias.begin(), bias.end());
  return absl::OkStatus();
}

// logprobs: chat has logprobs (bool) + top_logprobs; completions has
// logprobs (int, the top count).
absl::Status ToLogprobs(const Json& body, bool chat, SamplingParams* s) {
  int64_t top = 0;
  if (chat) {
    bool want = false;
    RETURN_IF_ERROR(Bool(body, "logprobs", &want));
    RETURN_IF_ERROR(Number(body, "top_logprobs", &top));
    if (top > 0 && !want) {
      return Invalid("top_logprobs", "needs \"logprobs\": true");
    }
    if (want) s->logprobs = Clamp32(std::max<int64_t>(top, 1));
  } else {
    RETURN_IF_ERROR(Number(body, "logprobs", &top));
    if (top > 0) s->logprobs = Clamp32(top);
  }
  return absl::OkStatus();
}

// max_tokens (chat: or max_completion_tokens), min_tokens, n.
absl::Status ToCounts(const Json& body, bool chat, SamplingParams* s) {
  int64_t max_tokens = 0;
  bool has_max = false;
  RETURN_IF_ERROR(Number(body, "max_tokens", &max_tokens, &has_max));
  if (chat) {
    RETURN_IF_ERROR(
        Number(body, "max_completion_tokens", &max_tokens, &has_max));
  }
  if (has_max) {
    if (max_tokens < 1) {
      return Invalid(chat && body.contains("max_completion_tokens")
                         ? "max_completion_tokens"
                         : "max_tokens",
                     "must be at least 1");
    }
    s->max_tokens = Clamp32(max_tokens);
  }
  int64_t min_tokens = 0;
  RETURN_IF_ERROR(Number(body, "min_tokens", &min_tokens));
  if (min_tokens < 0) return Invalid("min_tokens", "must be 0 or more");
  s->min_tokens = Clamp32(min_tokens);
  int64_t n = 1;
  RETURN_IF_ERROR(Number(body, "n", &n));
  if (n < 1 || n > 128) return Invalid("n", "must be 1 to 128");
  s->n = Clamp32(n);
  return absl::OkStatus();
}

// The sampling fields chat and completions share (OpenAI's names, and the
// extras vLLM accepts: top_k, min_p, repetition_penalty, ignore_eos,
// min_tokens).
absl::Status ToSampling(const Json& body, bool chat, SamplingParams* s) {
  RETURN_IF_ERROR(ToCounts(body, chat, s));
  double temperature = 1.0, top_p = 1.0, min_p = 0, presence = 0,
         frequency = 0, repetition = 1;
  RETURN_IF_ERROR(Number(body, "temperature", &temperature));
  RETURN_IF_ERROR(Number(body, "top_p", &top_p));
  RETURN_IF_ERROR(Number(body, "min_p", &min_p));
  RETURN_IF_ERROR(Number(body, "presence_penalty", &presence));
  RETURN_IF_ERROR(Number(body, "frequency_penalty", &frequency));
  RETURN_IF_ERROR(Number(body, "repetition_penalty", &repetition));
  s->temperature = static_cast<float>(temperature);
  s->top_p = static_cast<float>(top_p);
  s->min_p = static_cast<float>(min_p);
  s->presence_penalty = static_cast<float>(presence);
  s->frequency_penalty = static_cast<float>(frequency);
  s->repetition_penalty = static_cast<float>(repetition);
  int64_t top_k = 0;
  RETURN_IF_ERROR(Number(body, "top_k", &top_k));
  s->top_k = top_k > 0 ? Clamp32(top_k) : 0;
  // vLLM's extras: ignore_eos (benchmarks' fixed output lengths) and
  // min_tokens.
  RETURN_IF_ERROR(Bool(body, "ignore_eos", &s->ignore_eos));
  int64_t seed = 0;
  bool has_seed = false;
  RETURN_IF_ERROR(Number(body, "seed", &seed, &has_seed));
  if (has_seed) s->seed = static_cast<uint64_t>(seed);
  RETURN_IF_ERROR(ToStop(body, s));
  RETURN_IF_ERROR(ToLogitBias(body, s));
  return ToLogprobs(body, chat, s);
}

absl::Status ToResponseFormat(const Json& body, ResponseFormat* out) {
  auto it = body.find("response_format");
  if (it == body.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_object()) return Invalid("response_format", "must be an object");
  const std::string type = it->value("type", "");
  if (type == "text") return absl::OkStatus();
  if (type == "json_object") {
    out->type = ResponseFormat::Type::kJsonSchema;
    out->spec = "{\"type\": \"object\"}";
    return absl::OkStatus();
  }
  if (type == "json_schema") {
    auto js = it->find("json_schema");
    if (js == it->end() || !js->is_object() || !js->contains("schema")) {
      return Invalid("response_format.json_schema",
                     "needs {\"name\": ..., \"schema\": {...}}");
    }
    out->type = ResponseFormat::Type::kJsonSchema;
    out->spec = (*js)["schema"].dump();
    out->strict = js->value("strict", false);
    return absl::OkStatus();
  }
  return Invalid("response_format.type",
                 "must be text, json_object or json_schema");
}

}  // namespace

absl::Status ToChatRequest(const Json& body, GenerateInput* req) {
  req->model = body.value("model", "");
  RETURN_IF_ERROR(ToTools(body, req));
  auto msgs = body.find("messages");
  if (msgs == body.end() || !msgs->is_array() || msgs->empty()) {
    return Invalid("messages", "must be a non-empty array");
  }
  for (size_t i = 0; i < msgs->size(); ++i) {
    RETURN_IF_ERROR(ToChatMessage((*msgs)[i], i,
                                  &req->params.messages.emplace_back()));
  }
  RETURN_IF_ERROR(ToSampling(body, /*chat=*/true, &req->params.sampling));
  return ToResponseFormat(body, &req->params.sampling.response_format);
}

absl::Status ToCompletionRequest(const Json& body, GenerateInput* req,
                                 EchoPlan* echo) {
  req->model = body.value("model", "");
  *echo = EchoPlan();
  RETURN_IF_ERROR(Bool(body, "echo", &echo->echo));
  req->echo_prompt = echo->echo;
  const Json* source = &body;
  Json with_one_token;
  int64_t prompt_logprobs = 0;
  if (echo->echo) {
    int64_t logprobs = 0;
    bool has_logprobs = false;
    RETURN_IF_ERROR(Number(body, "logprobs", &logprobs, &has_logprobs));
    echo->logprobs = has_logprobs && logprobs >= 0;
    if (auto m = body.find("max_tokens");
        m != body.end() && m->is_number_integer() && m->get<int64_t>() == 0) {
      echo->prompt_only = true;
      with_one_token = body;
      with_one_token["max_tokens"] = 1;
      source = &with_one_token;
    }
    if (echo->logprobs) prompt_logprobs = std::clamp<int64_t>(logprobs, 1, 20);
  }
  if (body.contains("suffix") && !body["suffix"].is_null()) {
    return Invalid("suffix", "is not supported");
  }
  auto prompt = body.find("prompt");
  if (prompt == body.end()) return Invalid("prompt", "is required");
  const Json* p = &*prompt;
  if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() ||
                                          (*p)[0].is_array())) {
    p = &(*p)[0];  // a batch of one
  }
  if (p->is_string()) {
    req->params.prompt = p->get<std::string>();
  } else if (p->is_array() && !p->empty() && (*p)[0].is_number_integer()) {
    RETURN_IF_ERROR(ToTokenIds(*p, "prompt", &req->prompt_token_ids.emplace()));
  } else {
    return Invalid("prompt",
                   "must be a string or token ids (one prompt per request)");
  }
  SamplingParams& s = req->params.sampling;
  RETURN_IF_ERROR(ToSampling(*source, /*chat=*/false, &s));
  s.prompt_logprobs = static_cast<int32_t>(prompt_logprobs);
  return ToResponseFormat(*source, &s.response_format);
}

}  // namespace inferd::http
