#include "runtime/gen/structured_output.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "runtime/common/field_error.h"
#include "llguidance.h"
#include "nlohmann/json.hpp"
#include "runtime/common/status_macros.h"
#include "runtime/gen/speculative.h"

namespace inferd {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Keys keep the schema's order: llguidance writes properties in it.
using Json = nlohmann::ordered_json;

// The formats llguidance's JSON compiler checks (json/formats.rs); others
// are annotations here.
bool KnownFormat(const std::string& f) {
  static const char* const kKnown[] = {"date-time", "time", "date",
                                       "duration",  "email", "hostname",
                                       "uuid",      "uri"};
  for (const char* k : kKnown) {
    if (f == k) return true;
  }
  return false;
}

bool LooksLikeObjectSchema(const Json& s) {
  if (s.contains("properties")) return true;
  auto t = s.find("type");
  if (t == s.end()) return false;
  if (t->is_string()) return *t == "object";
  if (t->is_array()) {
    for (const auto& x : *t) {
      if (x == "object") return true;
    }
  }
  return false;
}

// The schema a local "$ref" ("#/$defs/x", "#") points to in `root`, or
// `s` itself when it has no such $ref (remote refs are not followed).
const Json& Deref(const Json& root, const Json& s) {
  const Json* cur = &s;
  for (int hops = 0; hops < 8 && cur->is_object(); ++hops) {
    auto ref = cur->find("$ref");
    if (ref == cur->end() || !ref->is_string()) break;
    const std::string r = ref->get<std::string>();
    if (r.empty() || r[0] != '#') break;
    const Json::json_pointer ptr(r.substr(1));
    if (!root.contains(ptr)) break;
    cur = &root.at(ptr);
  }
  return *cur;
}

// The JSON types a schema allows, as a bit set (null, boolean, object,
// array, number, string; integer is within number); all bits when the
// schema does not say.
constexpr int kAnyType = 0x3f;
int TypeBits(const Json& s) {
  auto bit = [](const std::string& t) {
    if (t == "null") return 1;
    if (t == "boolean") return 2;
    if (t == "object") return 4;
    if (t == "array") return 8;
    if (t == "number" || t == "integer") return 16;
    if (t == "string") return 32;
    return kAnyType;
  };
  auto of_value = [](const Json& v) {
    if (v.is_null()) return 1;
    if (v.is_boolean()) return 2;
    if (v.is_object()) return 4;
    if (v.is_array()) return 8;
    if (v.is_number()) return 16;
    return 32;
  };
  if (s.is_boolean()) return s.get<bool>() ? kAnyType : 0;
  if (!s.is_object()) return kAnyType;
  int bits = kAnyType;
  if (auto t = s.find("type"); t != s.end()) {
    if (t->is_string()) {
      bits = bit(t->get<std::string>());
    } else if (t->is_array()) {
      bits = 0;
      for (const auto& x : *t) bits |= x.is_string() ? bit(x) : kAnyType;
    }
  }
  if (auto c = s.find("const"); c != s.end()) bits &= of_value(*c);
  if (auto e = s.find("enum"); e != s.end() && e->is_array()) {
    int in_enum = 0;
    for (const auto& v : *e) in_enum |= of_value(v);
    bits &= in_enum;
  }
  return bits;
}

// The values property `name` may take under `s` when `s` pins it with
// const or enum; null otherwise.
const Json* PinnedValues(const Json& s, const std::string& name, Json* tmp) {
  auto props = s.find("properties");
  if (props == s.end() || !props->is_object() || !props->contains(name)) {
    return nullptr;
  }
  const Json& p = (*props)[name];
  if (!p.is_object()) return nullptr;
  if (auto c = p.find("const"); c != p.end()) {
    *tmp = Json::array({*c});
    return tmp;
  }
  if (auto e = p.find("enum"); e != p.end() && e->is_array()) return &*e;
  return nullptr;
}

bool ValuesOverlap(const Json& a, const Json& b) {
  for (const auto& x : a) {
    for (const auto& y : b) {
      if (x == y) return true;
    }
  }
  return false;
}

// What the oneOf check needs of one branch, computed once per branch.
struct BranchFacts {
  int types = kAnyType;
  bool is_object = false;
  std::vector<std::string> required;
  // additionalProperties false and no patternProperties: only `props`.
  bool closed = false;
  const Json* props = nullptr;
  // Per required property pinned by const/enum: its values.
  std::vector<std::pair<std::string, Json>> pinned;

  bool Requires(const std::string& n) const {
    return std::find(required.begin(), required.end(), n) != required.end();
  }
  bool Forbids(const std::string& n) const {
    return closed &&
           (props == nullptr || !props->is_object() || !props->contains(n));
  }
  const Json* Pinned(const std::string& n) const {
    for (const auto& [name, values] : pinned) {
      if (name == n) return &values;
    }
    return nullptr;
  }
};

BranchFacts Facts(const Json& s) {
  BranchFacts f;
  f.types = TypeBits(s);
  if (!s.is_object()) return f;
  f.is_object = true;
  if (auto req = s.find("required"); req != s.end() && req->is_array()) {
    for (const auto& n : *req) {
      if (n.is_string()) f.required.push_back(n.get<std::string>());
    }
  }
  if (auto p = s.find("properties"); p != s.end()) f.props = &*p;
  auto ap = s.find("additionalProperties");
  f.closed = ap != s.end() && *ap == Json(false) &&
             !s.contains("patternProperties");
  for (const std::string& n : f.required) {
    Json tmp;
    if (const Json* v = PinnedValues(s, n, &tmp)) f.pinned.emplace_back(n, *v);
  }
  return f;
}

// True when no value matches both branches: their types exclude each
// other; or both only overlap on objects and one requires a property the
// other forbids, or both require a property pinned (const/enum) to values
// that exclude each other (a discriminator, as OpenAPI and pydantic write
// tagged unions).
bool Disjoint(const BranchFacts& a, const BranchFacts& b) {
  const int common = a.types & b.types;
  if (common == 0) return true;
  if (common != 4 || !a.is_object || !b.is_object) return false;
  for (const BranchFacts* x : {&a, &b}) {
    const BranchFacts* y = x == &a ? &b : &a;
    for (const std::string& n : x->required) {
      if (y->Forbids(n)) return true;
    }
    for (const auto& [n, values] : x->pinned) {
      const Json* other = y->Pinned(n);
      if (other != nullptr && !ValuesOverlap(values, *other)) return true;
    }
  }
  return false;
}

// True when no value can match two of `branches` (pairwise Disjoint, local
// $refs followed).
bool ProvablyDisjoint(const Json& root, const Json& branches) {
  std::vector<BranchFacts> bs;
  for (const auto& b : branches) bs.push_back(Facts(Deref(root, b)));
  for (size_t i = 0; i < bs.size(); ++i) {
    for (size_t j = i + 1; j < bs.size(); ++j) {
      if (!Disjoint(bs[i], bs[j])) return false;
    }
  }
  return true;
}

struct RewriteContext {
  const Json* root = nullptr;  // the schema as sent (for local $refs)
  bool strict = false;
  // The first oneOf whose branches may overlap: its JSON pointer.
  std::string overlapping_one_of;
};

// Every subschema position of a schema object's keywords, rewritten in
// place: unknown formats dropped; under `strict`, objects without
// additionalProperties closed. Notes the first oneOf that is not provably
// exclusive.
void Rewrite(Json* s, RewriteContext* ctx, const std::string& path,
             int depth) {
  if (depth > 256 || !s->is_object()) return;
  auto f = s->find("format");
  if (f != s->end() && f->is_string() && !KnownFormat(f->get<std::string>())) {
    s->erase(f);
  }
  // Counts written as integral decimals (maxItems: 2.0) are integers to
  // JSON Schema; llguidance wants integers.
  for (const char* k : {"minItems", "maxItems", "minLength", "maxLength",
                        "minProperties", "maxProperties", "minContains",
                        "maxContains"}) {
    auto it = s->find(k);
    if (it != s->end() && it->is_number_float()) {
      const double v = it->get<double>();
      if (v >= 0 && v <= 9007199254740992.0 && v == std::floor(v)) {
        *it = static_cast<uint64_t>(v);
      }
    }
  }
  if (ctx->strict && LooksLikeObjectSchema(*s) &&
      !s->contains("additionalProperties") &&
      !s->contains("patternProperties")) {
    (*s)["additionalProperties"] = false;
  }
  if (auto o = s->find("oneOf");
      o != s->end() && o->is_array() && ctx->overlapping_one_of.empty() &&
      !ProvablyDisjoint(*ctx->root, *o)) {
    ctx->overlapping_one_of = path.empty() ? "/" : path;
  }
  // Keywords whose value is a schema, a list of schemas or a map of them.
  static const char* const kOne[] = {"items", "additionalProperties",
                                     "additionalItems", "not", "contains",
                                     "if", "then", "else",
                                     "unevaluatedProperties",
                                     "propertyNames"};
  static const char* const kList[] = {"anyOf", "oneOf", "allOf",
                                      "prefixItems"};
  static const char* const kMap[] = {"properties", "patternProperties",
                                     "$defs", "definitions",
                                     "dependentSchemas"};
  auto escape = [](std::string k) {  // JSON pointer escaping
    std::string out;
    for (char c : k) {
      if (c == '~') out += "~0";
      else if (c == '/') out += "~1";
      else out += c;
    }
    return out;
  };
  for (const char* k : kOne) {
    auto it = s->find(k);
    if (it == s->end()) continue;
    const std::string p = absl::StrCat(path, "/", k);
    if (it->is_array()) {  // draft-04 tuple `items`
      for (size_t i = 0; i < it->size(); ++i) {
        Rewrite(&(*it)[i], ctx, absl::StrCat(p, "/", i), depth + 1);
      }
    } else {
      Rewrite(&*it, ctx, p, depth + 1);
    }
  }
  for (const char* k : kList) {
    auto it = s->find(k);
    if (it == s->end() || !it->is_array()) continue;
    for (size_t i = 0; i < it->size(); ++i) {
      Rewrite(&(*it)[i], ctx, absl::StrCat(path, "/", k, "/", i), depth + 1);
    }
  }
  for (const char* k : kMap) {
    auto it = s->find(k);
    if (it == s->end() || !it->is_object()) continue;
    for (auto& [name, x] : it->items()) {
      Rewrite(&x, ctx, absl::StrCat(path, "/", k, "/", escape(name)),
              depth + 1);
    }
  }
}

// Well-formed UTF-8 (RFC 3629: no overlong forms, surrogates or code
// points past U+10FFFF).
bool ValidUtf8(absl::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const uint8_t c = static_cast<uint8_t>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    int n;
    uint8_t lo = 0x80, hi = 0xBF;  // bounds of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      n = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return false;
    }
    if (i + n > s.size()) return false;
    const uint8_t c1 = static_cast<uint8_t>(s[i + 1]);
    if (c1 < lo || c1 > hi) return false;
    for (int k = 2; k < n; ++k) {
      if ((static_cast<uint8_t>(s[i + k]) >> 6) != 2) return false;
    }
    i += static_cast<size_t>(n);
  }
  return true;
}

const char* FieldName(ResponseFormat::Type type) {
  switch (type) {
    case ResponseFormat::Type::kJsonSchema:
      return "response_format.json_schema";
    case ResponseFormat::Type::kRegex:
      return "response_format.regex";
    case ResponseFormat::Type::kChoice:
      return "response_format.choice";
    case ResponseFormat::Type::kGrammar:
      return "response_format.grammar";
    case ResponseFormat::Type::kText:
      break;
  }
  return "response_format";
}

}  // namespace

static absl::StatusOr<std::pair<std::string, std::string>> LlguidanceGrammarImpl(
    const ResponseFormat& format) {
  if (!ValidUtf8(format.spec)) {
    return FieldError(FieldName(format.type), " is not valid UTF-8");
  }
  for (const std::string& c : format.choices) {
    if (!ValidUtf8(c)) {
      return FieldError("response_format.choice",
                        ": a choice is not valid UTF-8");
    }
  }
  switch (format.type) {
    case ResponseFormat::Type::kText:
      return FieldError("response_format", ": no format is set");
    case ResponseFormat::Type::kRegex:
      return std::make_pair(std::string("regex"), format.spec);
    case ResponseFormat::Type::kGrammar:
      return std::make_pair(std::string("lark"), format.spec);
    case ResponseFormat::Type::kChoice: {
      // A Lark alternation of JSON-quoted literals.
      std::string lark = "start: ";
      for (size_t i = 0; i < format.choices.size(); ++i) {
        if (i > 0) lark += " | ";
        lark += nlohmann::json(format.choices[i]).dump();
      }
      return std::make_pair(std::string("lark"), lark);
    }
    case ResponseFormat::Type::kJsonSchema: {
      Json schema = Json::parse(format.spec, nullptr,
                                /*allow_exceptions=*/false);
      if (schema.is_discarded()) {
        return FieldError("response_format.json_schema",
                          ": not valid JSON");
      }
      if (schema.is_boolean()) {
        schema = schema.get<bool>() ? Json::object()
                                    : Json{{"not", Json::object()}};
      }
      if (!schema.is_object()) {
        return FieldError("response_format.json_schema",
                          ": a schema is a JSON object (or true/false)");
      }
      const Json original = schema;
      RewriteContext ctx;
      ctx.root = &original;
      ctx.strict = format.strict;
      Rewrite(&schema, &ctx, "", 0);
      // llguidance's options: the schema's own "x-guidance" object (e.g.
      // {"lenient": true}: keywords llguidance cannot enforce, such as
      // uniqueItems, are ignored instead of refused) wins over the
      // request's defaults below.
      Json options = Json::object();
      if (auto x = schema.find("x-guidance");
          x != schema.end() && x->is_object()) {
        options = *x;
      }
      auto wf = options.find("whitespace_flexible");
      const bool flexible = wf != options.end() && wf->is_boolean()
                                ? wf->get<bool>()
                                : format.flexible_whitespace;
      const Json defaults = {
          {"whitespace_flexible", flexible},
          // Compact output keeps one space after ',' and ':', the way
          // models and json.dumps write JSON.
          {"item_separator", flexible ? "," : ", "},
          {"key_separator", flexible ? ":" : ": "},
          {"coerce_one_of", false},
      };
      for (const auto& [key, value] : defaults.items()) {
        if (!options.contains(key)) options[key] = value;
      }
      // oneOf compiles as anyOf, which is exact when no value can match
      // two branches; one whose branches may overlap is refused unless the
      // schema opts in to the coercion.
      if (!ctx.overlapping_one_of.empty() &&
          options.value("coerce_one_of", false) != true) {
        return FieldError("response_format.json_schema", absl::StrCat(
            ": at ", ctx.overlapping_one_of,
            ": 'oneOf' whose branches may overlap (a value could match two; "
            "inferd compiles oneOf only when the branches' types, or a "
            "required property's const/enum values, exclude each other). "
            "Use anyOf, or set \"x-guidance\": {\"coerce_one_of\": true} "
            "in the schema to compile it as anyOf"));
      }
      options["coerce_one_of"] = true;
      schema["x-guidance"] = options;
      if (format.or_text) {
        // The JSON value, or text whose first character is neither the
        // value's opening bracket nor whitespace (so the two never share a
        // prefix).
        return std::make_pair(
            std::string("lark"),
            absl::StrCat("start: %json ", schema.dump(),
                         " | TEXT\nTEXT: /[^\\[{\\s][\\s\\S]*/\n"));
      }
      return std::make_pair(std::string("json"), schema.dump());
    }
  }
  return FieldError("response_format", ": unknown type");
}

absl::StatusOr<std::pair<std::string, std::string>> LlguidanceGrammar(
    const ResponseFormat& format) {
  // nlohmann reports errors by exception; none leaves this function.
  try {
    return LlguidanceGrammarImpl(format);
  } catch (const nlohmann::json::exception& e) {
    return FieldError(FieldName(format.type), absl::StrCat(": ", e.what()));
  }
}

// --------------------------------------------------------------- workers

MaskWorkers::MaskWorkers(int threads) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
}

MaskWorkers::~MaskWorkers() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void MaskWorkers::Run(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(task));
  }
  cv_.notify_one();
}

void MaskWorkers::Loop() {
  while (true) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      // Queued work runs even when stopping: a constraint waits for it.
      if (queue_.empty()) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

// ------------------------------------------------------------- constraint

namespace {

// The llguidance tokenizer and the function it calls back, shared by the
// compiler, its compiled formats and every constraint (a tokenizer must
// outlive the matchers that use it).
struct TokenizerHandle {
  LlgTokenizer* tokenizer = nullptr;
  std::function<std::vector<int32_t>(absl::string_view)> tokenize;
  std::vector<int32_t> eos_ids;
  std::vector<std::string> token_bytes;
  // Token ids by their first byte, longest first (the greedy fallback).
  std::vector<std::vector<int32_t>> by_first_byte;
  ~TokenizerHandle() { llg_free_tokenizer(tokenizer); }

  // The model's tokenization of `text` when its tokens spell exactly
  // `text`; else (a tokenizer that adds a prefix space, drops whitespace or
  // maps bytes to <unk>) a greedy longest match over the token bytes, so
  // llguidance's forced text is always written in tokens it can check.
  std::vector<int32_t> Tokenize(absl::string_view text) const {
    if (tokenize) {
      std::vector<int32_t> ids = tokenize(text);
      std::string spelled;
      for (int32_t id : ids) {
        if (id < 0 || id >= static_cast<int32_t>(token_bytes.size())) {
          spelled.clear();
          break;
        }
        spelled += token_bytes[id];
      }
      if (spelled == text) return ids;
    }
    std::vector<int32_t> ids;
    size_t pos = 0;
    while (pos < text.size()) {
      const auto& candidates = by_first_byte[static_cast<uint8_t>(text[pos])];
      int32_t best = -1;
      for (int32_t id : candidates) {
        const std::string& t = token_bytes[id];
        if (text.compare(pos, t.size(), t) == 0) {
          best = id;
          break;
        }
      }
      if (best < 0) break;  // a byte no token spells
      ids.push_back(best);
      pos += token_bytes[best].size();
    }
    return ids;
  }
};

// True when the model's tokenizer spells its input back exactly (its
// tokens' bytes put together are the text) on a sample of texts: the first
// tokens of the vocabulary and a few JSON-like strings.
bool CanonicalTokenizer(const TokenizerHandle& h) {
  if (!h.tokenize) return false;
  std::vector<std::string> probes = {" ",     "\n",          "{\"a\": 1}",
                                     "hello", " hello world", "[1, 2.5, null]"};
  for (size_t id = 0; id < h.token_bytes.size() && probes.size() < 300; ++id) {
    const std::string& t = h.token_bytes[id];
    // llguidance hands the function valid UTF-8 only
    // (tokenize_assumes_string).
    if (t.empty() || !ValidUtf8(t)) continue;
    probes.push_back(t);
  }
  for (const std::string& text : probes) {
    std::string spelled;
    for (int32_t id : h.tokenize(text)) {
      if (id < 0 || id >= static_cast<int32_t>(h.token_bytes.size())) {
        return false;
      }
      spelled += h.token_bytes[id];
    }
    if (spelled != text) return false;
  }
  return true;
}

size_t TokenizeCallback(const void* user_data, const uint8_t* bytes,
                        size_t bytes_len, uint32_t* out, size_t out_len) {
  const auto* h = static_cast<const TokenizerHandle*>(user_data);
  std::vector<int32_t> ids = h->Tokenize(
      absl::string_view(reinterpret_cast<const char*>(bytes), bytes_len));
  for (size_t i = 0; i < ids.size() && i < out_len; ++i) {
    out[i] = static_cast<uint32_t>(ids[i]);
  }
  return ids.size();
}

class LlgTokenConstraint : public TokenConstraint {
 public:
  LlgTokenConstraint(LlgMatcher* matcher,
                     std::shared_ptr<const TokenizerHandle> tokenizer,
                     std::shared_ptr<MaskWorkers> workers)
      : matcher_(matcher),
        tokenizer_(std::move(tokenizer)),
        workers_(std::move(workers)),
        mask_(llg_matcher_get_mask_byte_size(matcher) / 4) {
    StartMask();  // the first mask overlaps the prompt's prefill
  }

  ~LlgTokenConstraint() override {
    WaitMask();
    llg_free_matcher(matcher_);
  }

  void Mask(absl::Span<float> logits,
            absl::Span<const int32_t> end_ids) override {
    end_ids_.assign(end_ids.begin(), end_ids.end());
    WaitMask();
    float* x = logits.data();
    const int32_t n = static_cast<int32_t>(logits.size());
    saved_.clear();
    for (int32_t id : end_ids) {
      saved_.push_back(id >= 0 && id < n ? x[id] : kNegInf);
    }
    const int32_t bits = static_cast<int32_t>(mask_.size()) * 32;
    if (error_) {
      std::fill(logits.begin(), logits.end(), kNegInf);
    } else {
      const int32_t words = (std::min(n, bits) + 31) / 32;
      for (int32_t w = 0; w < words; ++w) {
        const uint32_t m = mask_[w];
        if (m == ~uint32_t{0}) continue;
        const int32_t base = w * 32;
        const int32_t len = std::min(n - base, 32);
        float* xs = x + base;
        for (int32_t i = 0; i < len; ++i) {
          xs[i] = ((m >> i) & 1) ? xs[i] : kNegInf;
        }
      }
      for (int32_t i = bits; i < n; ++i) x[i] = kNegInf;
    }
    // End tokens only where the output may end (or the matcher failed:
    // ending is then the only way out).
    const bool can_end = error_ || accepting_;
    for (size_t k = 0; k < end_ids.size(); ++k) {
      const int32_t id = end_ids[k];
      if (id < 0 || id >= n) continue;
      x[id] = can_end ? saved_[k] : kNegInf;
    }
  }

  void Advance(int32_t token_id) override {
    WaitMask();
    if (error_ || stopped_) return;
    for (int32_t id : end_ids_) {
      if (id == token_id) return;  // the sequence ends here
    }
    for (int32_t id : tokenizer_->eos_ids) {
      if (id == token_id) return;
    }
    if (llg_matcher_consume_token(matcher_, static_cast<uint32_t>(token_id)) !=
        0) {
      error_ = true;
      return;
    }
    StartMask();
  }

  // The forced tokens are computed by the mask task before the mask, so
  // this waits only for them: the mask goes on beside the forward pass.
  void ForcedTokens(int32_t max, std::vector<int32_t>* out) override {
    out->clear();
    WaitForced();
    for (int32_t i = 0; i < forced_count_ && i < max; ++i) {
      out->push_back(static_cast<int32_t>(forced_[static_cast<size_t>(i)]));
    }
  }

  void AdvanceForced(absl::Span<const int32_t> token_ids) override {
    WaitMask();
    if (error_ || stopped_) return;
    for (int32_t id : token_ids) {
      if (llg_matcher_consume_token(matcher_, static_cast<uint32_t>(id)) !=
          0) {
        error_ = true;
        return;
      }
    }
    StartMask();
  }

  bool Complete() const override {
    const_cast<LlgTokenConstraint*>(this)->WaitMask();
    if (error_) return false;
    if (stopped_) return true;
    if (!accepting_) return false;
    // Accepting, and nothing but an end token may follow.
    const int32_t bits = static_cast<int32_t>(mask_.size()) * 32;
    for (int32_t w = 0; w < static_cast<int32_t>(mask_.size()); ++w) {
      uint32_t m = mask_[w];
      if (m == 0) continue;
      for (int32_t id : tokenizer_->eos_ids) {
        if (id >= w * 32 && id < w * 32 + 32 && id < bits) {
          m &= ~(uint32_t{1} << (id - w * 32));
        }
      }
      if (m != 0) return false;
    }
    return true;
  }

 private:
  // Computes the mask of the matcher's current state (on a worker when
  // there is one); Wait joins it.
  void StartMask() {
    if (workers_ == nullptr) {
      ready_ = false;
      forced_ready_ = false;
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      pending_ = true;
      forced_pending_ = true;
    }
    workers_->Run([this] {
      ComputeForced();
      {
        std::lock_guard<std::mutex> lock(mu_);
        forced_pending_ = false;
        cv_.notify_all();
      }
      Compute();
      std::lock_guard<std::mutex> lock(mu_);
      pending_ = false;
      cv_.notify_all();
    });
  }

  void WaitMask() {
    if (workers_ != nullptr) {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return !pending_; });
      return;
    }
    if (!forced_ready_) ComputeForced();
    if (!ready_) Compute();
  }

  void WaitForced() {
    if (workers_ != nullptr) {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return !forced_pending_; });
      return;
    }
    if (!forced_ready_) ComputeForced();
  }

  // The tokens the format forces from the current state (before the mask:
  // the scheduler waits for them, not for the mask).
  void ComputeForced() {
    forced_count_ = 0;
    forced_ready_ = true;
    if (error_ || llg_matcher_is_stopped(matcher_)) return;
    forced_.resize(kMaxForcedTokens);
    const int32_t n = llg_matcher_compute_ff_tokens(matcher_, forced_.data(),
                                                    forced_.size());
    // -1: the matcher failed; the mask reports it.
    forced_count_ = std::max(n, 0);
  }

  void Compute() {
    stopped_ = llg_matcher_is_stopped(matcher_);
    if (!stopped_ && !error_ &&
        llg_matcher_compute_mask_into(matcher_, mask_.data(),
                                      mask_.size() * 4) != 0) {
      // The matcher stops when nothing can extend the output (a normal
      // end, llguidance's NoExtension*), or fails.
      if (llg_matcher_is_error(matcher_)) {
        error_ = true;
      } else {
        stopped_ = true;
      }
    }
    if (stopped_ || error_) std::fill(mask_.begin(), mask_.end(), 0);
    accepting_ = !error_ && (stopped_ || llg_matcher_is_accepting(matcher_));
    ready_ = true;
  }

  LlgMatcher* const matcher_;
  const std::shared_ptr<const TokenizerHandle> tokenizer_;
  const std::shared_ptr<MaskWorkers> workers_;
  std::vector<uint32_t> mask_;
  std::vector<float> saved_;
  std::vector<int32_t> end_ids_;
  // Written by the mask task before forced_pending_ clears.
  std::vector<uint32_t> forced_;
  int32_t forced_count_ = 0;
  bool forced_ready_ = false;
  // Written by the mask task, read after WaitMask.
  bool ready_ = false;
  bool error_ = false;
  bool stopped_ = false;
  bool accepting_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  bool pending_ = false;
  bool forced_pending_ = false;
};

}  // namespace

// A format compiled once: a matcher at its start, cloned for each request.
struct ConstraintCompiler::Compiled {
  LlgMatcher* matcher = nullptr;
  std::shared_ptr<const TokenizerHandle> tokenizer;
  ~Compiled() { llg_free_matcher(matcher); }
};

ConstraintCompiler::ConstraintCompiler(
    std::function<ConstraintVocabulary()> make_vocab, int threads,
    size_t max_cached)
    : make_vocab_(std::move(make_vocab)), max_cached_(max_cached) {
  if (threads > 0) workers_ = std::make_shared<MaskWorkers>(threads);
}

ConstraintCompiler::~ConstraintCompiler() = default;

absl::StatusOr<std::unique_ptr<TokenConstraint>> ConstraintCompiler::NewConstraint(
    const ResponseFormat& format) {
  ASSIGN_OR_RETURN(auto grammar, LlguidanceGrammar(format));
  std::string key = absl::StrCat(grammar.first, "\n", grammar.second);
  std::shared_ptr<Compiled> compiled;
  std::shared_ptr<const TokenizerHandle> tokenizer;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = lru_.begin(); it != lru_.end(); ++it) {
      if (it->first == key) {
        lru_.splice(lru_.begin(), lru_, it);
        compiled = lru_.front().second;
        break;
      }
    }
  }
  if (compiled == nullptr) {
    // Compiled outside the lock (it may take milliseconds); two requests
    // with the same new format may both compile it.
    std::shared_ptr<const TokenizerHandle> handle;
    {
      absl::MutexLock lock(&mu_);
      if (tokenizer_ == nullptr) {  // the first format compiled
        ConstraintVocabulary vocab = make_vocab_();
        auto h = std::make_shared<TokenizerHandle>();
        h->tokenize = std::move(vocab.tokenize);
        h->eos_ids = std::move(vocab.eos_ids);
        h->token_bytes = std::move(vocab.token_bytes);

        h->by_first_byte.resize(256);
        for (size_t id = 0; id < h->token_bytes.size(); ++id) {
          const std::string& t = h->token_bytes[id];
          if (!t.empty()) {
            h->by_first_byte[static_cast<uint8_t>(t[0])].push_back(
                static_cast<int32_t>(id));
          }
        }
        for (auto& ids : h->by_first_byte) {
          std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
            return h->token_bytes[a].size() > h->token_bytes[b].size();
          });
        }
        std::vector<uint32_t> lens;
        std::string bytes;
        for (size_t id = 0; id < h->token_bytes.size(); ++id) {
          std::string b = h->token_bytes[id];
          // llguidance marks special tokens with a leading 0xFF byte.
          if (b.empty()) b = absl::StrCat("\xff[", id, "]");
          lens.push_back(static_cast<uint32_t>(b.size()));
          bytes += b;
        }
        LlgTokenizerInitV2 init;
        std::memset(&init, 0, sizeof(init));
        init.struct_size = sizeof(init);
        init.vocab_size = static_cast<uint32_t>(lens.size());
        init.tok_eos = h->eos_ids.empty()
                           ? 0
                           : static_cast<LlgToken>(h->eos_ids[0]);
        std::vector<LlgToken> extra;
        for (size_t i = 1; i < h->eos_ids.size(); ++i) {
          extra.push_back(static_cast<LlgToken>(h->eos_ids[i]));
        }
        init.tok_eos_extra = extra.empty() ? nullptr : extra.data();
        init.tok_eos_extra_count = static_cast<uint32_t>(extra.size());
        init.token_lens = lens.data();
        init.token_bytes = reinterpret_cast<const uint8_t*>(bytes.data());
        init.tokenize_assumes_string = true;
        if (CanonicalTokenizer(*h)) {
          // Forced text is written in the model's own tokens.
          init.tokenize_fn = &TokenizeCallback;
          init.tokenize_user_data = h.get();
        } else {
          // A tokenizer whose tokens do not spell its input back (a prefix
          // space, dropped whitespace, <unk>): llguidance then forces no
          // text and masks from the grammar's state alone.
          init.use_approximate_greedy_tokenize_fn = true;
        }
        char error[1024] = {0};
        h->tokenizer = llg_new_tokenizer_v2(&init, error, sizeof(error));
        if (h->tokenizer == nullptr) {
          return absl::InternalError(
              absl::StrCat("structured output: llguidance refused the "
                           "vocabulary: ",
                           error));
        }
        tokenizer_ = h;
      }
      handle = std::static_pointer_cast<const TokenizerHandle>(tokenizer_);
    }
    LlgConstraintInit init;
    std::memset(&init, 0, sizeof(init));
    llg_constraint_init_set_defaults(&init, handle->tokenizer);
    init.log_stderr_level = 0;
    init.log_buffer_level = 0;
    LlgMatcher* m = llg_new_matcher(&init, grammar.first.c_str(),
                                    grammar.second.c_str());
    if (const char* err = llg_matcher_get_error(m)) {
      std::string msg = err;
      llg_free_matcher(m);
      return FieldError(FieldName(format.type), absl::StrCat(": ", msg));
    }
    compiled = std::make_shared<Compiled>();
    compiled->matcher = m;
    compiled->tokenizer = handle;
    absl::MutexLock lock(&mu_);
    lru_.emplace_front(std::move(key), compiled);
    while (lru_.size() > max_cached_) lru_.pop_back();
  }
  LlgMatcher* clone = llg_clone_matcher(compiled->matcher);
  if (clone == nullptr) {
    return absl::InternalError("structured output: cannot clone a matcher");
  }
  return std::unique_ptr<TokenConstraint>(
      new LlgTokenConstraint(clone, compiled->tokenizer, workers_));
}

}  // namespace inferd
