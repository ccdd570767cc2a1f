// Structured output on llguidance (runtime/gen/structured_output.h):
// constrained sampling under random logits (a random-weight model's
// stand-in) yields outputs an independent validator accepts; texts are
// accepted or rejected token by token as the formats say; llguidance's
// refusals name the field and the feature.
#include "runtime/gen/structured_output.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/gen/sampler.h"

namespace inferd {
namespace {

using Json = nlohmann::ordered_json;

// ------------------------------------------------------------ validator
// An independent check of a value against the keywords the random
// schemas use.

size_t CodePoints(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<uint8_t>(c) & 0xC0) != 0x80;
  return n;
}

bool TypeIs(const Json& v, const std::string& t) {
  if (t == "null") return v.is_null();
  if (t == "boolean") return v.is_boolean();
  if (t == "string") return v.is_string();
  if (t == "number") return v.is_number();
  // A number with no fraction (JSON Schema draft 6 on); integers past
  // 64 bits parse as doubles here.
  if (t == "integer") {
    return v.is_number_integer() ||
           (v.is_number_float() && std::isfinite(v.get<double>()) &&
            std::floor(v.get<double>()) == v.get<double>());
  }
  if (t == "array") return v.is_array();
  if (t == "object") return v.is_object();
  return false;
}

bool Valid(const Json& v, const Json& s) {
  if (s.contains("const")) return v == s["const"];
  if (s.contains("enum")) {
    for (const Json& e : s["enum"]) {
      if (v == e) return true;
    }
    return false;
  }
  if (s.contains("anyOf")) {
    for (const Json& a : s["anyOf"]) {
      if (Valid(v, a)) return true;
    }
    return false;
  }
  bool typed = false;
  const Json& t = s["type"];
  if (t.is_string()) {
    typed = TypeIs(v, t);
  } else {
    for (const Json& one : t) typed = typed || TypeIs(v, one);
  }
  if (!typed) return false;
  if (v.is_string() && s.contains("pattern") &&
      !std::regex_search(v.get<std::string>(),
                         std::regex(s["pattern"].get<std::string>()))) {
    return false;
  }
  if (v.is_string()) {
    const size_t n = CodePoints(v.get<std::string>());
    if (s.contains("minLength") && n < s["minLength"].get<size_t>()) return false;
    if (s.contains("maxLength") && n > s["maxLength"].get<size_t>()) return false;
  }
  if (v.is_number()) {
    const double x = v.get<double>();
    if (s.contains("minimum") && x < s["minimum"].get<double>()) return false;
    if (s.contains("maximum") && x > s["maximum"].get<double>()) return false;
    if (s.contains("exclusiveMinimum") &&
        x <= s["exclusiveMinimum"].get<double>()) {
      return false;
    }
    if (s.contains("exclusiveMaximum") &&
        x >= s["exclusiveMaximum"].get<double>()) {
      return false;
    }
  }
  if (v.is_array()) {
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return false;
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return false;
    for (const Json& item : v) {
      if (!Valid(item, s["items"])) return false;
    }
  }
  if (v.is_object()) {
    const Json props = s.contains("properties") ? s["properties"] : Json::object();
    const bool closed = s.contains("additionalProperties") &&
                        s["additionalProperties"] == false;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!props.contains(it.key())) {
        if (closed) return false;
        continue;  // additionalProperties defaults to true
      }
      if (!Valid(it.value(), props[it.key()])) return false;
    }
    if (s.contains("required")) {
      for (const Json& k : s["required"]) {
        if (!v.contains(k.get<std::string>())) return false;
      }
    }
  }
  return true;
}

// ------------------------------------------------------- random schemas

Json RandomSchema(std::mt19937_64& rng, int depth) {
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  const int kind = depth <= 0 ? 2 + pick(8) : pick(11);
  Json s = Json::object();
  switch (kind) {
    case 0:
    case 1: {
      s["type"] = "object";
      Json props = Json::object();
      Json required = Json::array();
      const int n = 1 + pick(4);
      for (int i = 0; i < n; ++i) {
        const std::string key = std::string("k") + std::to_string(i) +
                                (pick(3) == 0 ? "\xC3\xA9" : "");
        props[key] = RandomSchema(rng, depth - 1);
        if (pick(2) == 0) required.push_back(key);
      }
      s["properties"] = props;
      if (!required.empty()) s["required"] = required;
      if (pick(2) == 0) s["additionalProperties"] = false;
      break;
    }
    case 2: {
      s["type"] = "string";
      if (pick(3) == 0) {
        const char* const kPatterns[] = {"^[a-c]{1,3}-\\d$", "(x|yz){1,4}",
                                         "\\w{2}\\.[0-9]?"};
        s["pattern"] = kPatterns[pick(3)];
        break;
      }
      const int max = pick(7);
      s["maxLength"] = max;
      if (pick(2) == 0) s["minLength"] = pick(max + 1);
      break;
    }
    case 3: {
      s["type"] = "integer";
      if (pick(2) == 0) s["minimum"] = static_cast<int>(pick(2000)) - 1000;
      if (pick(2) == 0) {
        const int lo = s.contains("minimum") ? s["minimum"].get<int>() : -1000;
        s["maximum"] = lo + pick(3000);
      }
      if (pick(4) == 0 && !s.contains("maximum")) s["exclusiveMinimum"] = -7;
      break;
    }
    case 4:
      s["type"] = "number";
      break;
    case 5:
      s["type"] = pick(2) == 0 ? "boolean" : "null";
      break;
    case 6:
      s["enum"] = Json::array({"red", 7, 2.5, nullptr, true, "gr\"een"});
      break;
    case 7:
      s["const"] = Json::object({{"x", Json::array({1, "two"})}});
      break;
    case 8:
      s["type"] = Json::array({"string", "null"});
      s["maxLength"] = 3;
      break;
    case 9:
      s["anyOf"] = Json::array(
          {RandomSchema(rng, depth - 1), RandomSchema(rng, depth - 1)});
      break;
    default: {
      s["type"] = "array";
      s["items"] = RandomSchema(rng, depth - 1);
      const int min = pick(3);
      s["minItems"] = min;
      s["maxItems"] = min + pick(3);
      break;
    }
  }
  if (pick(5) == 0) s["description"] = "ignored";
  return s;
}

// ------------------------------------------------------ test vocabulary

// JSON-ish pieces of several lengths, partial UTF-8 characters, single
// bytes, and two
// special tokens without bytes (EOS last).
std::vector<std::string> TestVocab() {
  std::vector<std::string> v;
  for (int c = 0x20; c < 0x7F; ++c) v.push_back(std::string(1, static_cast<char>(c)));
  for (const char* p :
       {"{\"", "\":", "\": ", "\",", "\", \"", "\"}", "\"]", "[\"", "[]", "{}",
        "],", "},", "true", "false", "null", "12", "00", "-1", ".5", "e+",
        " the", "k0", "k1", "k2", "k3", "\":\"", "red", "gr", "een", "\\\"",
        "\\n", "\n", "\t", "\xC3\xA9", "\xC3", "\xA9", "\xE6\x97\xA5",
        "\xE6", "\x97\xA5", "\xF0\x9F\x98\x80", "x\":[", "1,", ", ", "\"x"}) {
    v.push_back(p);
  }
  std::mt19937_64 rng(7);
  const std::string alphabet = "abcxyz019\"{}[]:, .-e";
  for (int i = 0; i < 300; ++i) {
    std::string t;
    const int len = 2 + static_cast<int>(rng() % 4);
    for (int k = 0; k < len; ++k) t.push_back(alphabet[rng() % alphabet.size()]);
    v.push_back(t);
  }
  // Every other byte alone, so any UTF-8 text can be written.
  for (int c = 0x80; c < 0x100; ++c) v.push_back(std::string(1, static_cast<char>(c)));
  v.push_back("");  // a special token (never allowed by a mask)
  v.push_back("");  // EOS
  return v;
}

struct Generated {
  std::string text;
  bool ended = false;  // EOS or the constraint was complete
};

const std::vector<std::string>& Vocab() {
  static const auto* v = new std::vector<std::string>(TestVocab());
  return *v;
}
int32_t VocabSize() { return static_cast<int32_t>(Vocab().size()); }
int32_t Eos() { return VocabSize() - 1; }

ConstraintVocabulary MakeVocab() {
  ConstraintVocabulary v;
  v.token_bytes = Vocab();
  v.eos_ids = {Eos()};
  // Greedy longest match over the test vocabulary (the reference tokenizer
  // of this vocabulary).
  v.tokenize = [](absl::string_view text) {
    std::vector<int32_t> ids;
    size_t i = 0;
    while (i < text.size()) {
      int32_t best = -1;
      size_t best_len = 0;
      for (int32_t id = 0; id < VocabSize(); ++id) {
        const std::string& t = Vocab()[id];
        if (t.size() > best_len && text.substr(i, t.size()) == t) {
          best = id;
          best_len = t.size();
        }
      }
      if (best < 0) break;
      ids.push_back(best);
      i += best_len;
    }
    return ids;
  };
  return v;
}

constexpr int32_t kMaxForced = 32;

ConstraintCompiler& Compiler() {
  static auto* c = new ConstraintCompiler(MakeVocab, /*threads=*/1);
  return *c;
}

// The compiler that computes each mask when it is asked for.
ConstraintCompiler& InlineCompiler() {
  static auto* c = new ConstraintCompiler(MakeVocab, /*threads=*/0);
  return *c;
}

ResponseFormat Schema(const std::string& json) {
  ResponseFormat f;
  f.type = ResponseFormat::Type::kJsonSchema;
  f.spec = json;
  return f;
}

ResponseFormat Format(ResponseFormat::Type type, const std::string& spec) {
  ResponseFormat f;
  f.type = type;
  f.spec = spec;
  return f;
}

// Samples with random logits (temperature 1) under `format`.
Generated Generate(ConstraintCompiler& compiler, const ResponseFormat& format,
                   uint64_t seed, int max_tokens, float temperature = 1.0f) {
  const int32_t v = VocabSize();
  Sampler sampler(v);
  SamplingParams params;
  params.temperature = temperature;
  params.seed = seed;
  std::vector<int32_t> eos_ids = {Eos()};
  SamplingState state(params, {}, eos_ids);
  auto constraint = compiler.NewConstraint(format);
  EXPECT_TRUE(constraint.ok()) << constraint.status();
  if (!constraint.ok()) return {};
  state.set_constraint(*std::move(constraint));
  std::mt19937_64 rng(seed * 31 + 1);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(v);
  Generated out;
  SampleResult r;
  for (int i = 0; i < max_tokens; ++i) {
    for (float& x : logits) x = normal(rng);
    absl::Status s = sampler.SampleRow(absl::MakeSpan(logits), &state, &r);
    EXPECT_TRUE(s.ok()) << s;
    if (!s.ok()) break;
    if (r.token_id == Eos()) {
      out.ended = true;
      break;
    }
    out.text += Vocab()[r.token_id];
    if (state.constraint_complete()) {
      out.ended = true;
      break;
    }
  }
  return out;
}

// The single-byte token of each byte (every byte but the control ones has
// one).
int32_t ByteToken(uint8_t b) {
  for (int32_t id = 0; id < VocabSize(); ++id) {
    if (Vocab()[id].size() == 1 && static_cast<uint8_t>(Vocab()[id][0]) == b) {
      return id;
    }
  }
  return -1;
}

// Writes `text` under the format: at each step the longest allowed token
// that continues the text (llguidance allows some texts only in particular
// tokens, e.g. forced text in the tokenizer's canonical ones). True when
// the whole text is written and the output may end there.
bool Accepts(const ResponseFormat& format, const std::string& text) {
  auto c = Compiler().NewConstraint(format);
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok()) return false;
  std::vector<float> logits(VocabSize());
  const int32_t ends[] = {Eos()};
  size_t pos = 0;
  while (pos < text.size()) {
    std::fill(logits.begin(), logits.end(), 0.0f);
    (*c)->Mask(absl::MakeSpan(logits), ends);
    int32_t best = -1;
    size_t best_len = 0;
    for (int32_t id = 0; id < VocabSize(); ++id) {
      const std::string& t = Vocab()[id];
      if (std::isinf(logits[id]) || t.empty() || t.size() <= best_len) continue;
      if (text.compare(pos, t.size(), t) == 0) {
        best = id;
        best_len = t.size();
      }
    }
    if (best < 0) return false;
    (*c)->Advance(best);
    pos += best_len;
  }
  std::fill(logits.begin(), logits.end(), 0.0f);
  (*c)->Mask(absl::MakeSpan(logits), ends);
  return !std::isinf(logits[Eos()]) || (*c)->Complete();
}

// ---------------------------------------------------------------- tests

// The property: under random logits and sampling, every output of every
// random schema completes, parses and validates.
TEST(StructuredOutputTest, RandomSchemasAlwaysValidate) {
  std::mt19937_64 rng(2024);
  int outputs = 0;
  for (int i = 0; i < 60; ++i) {
    const Json schema = RandomSchema(rng, 2);
    for (uint64_t seed = 1; seed <= 4; ++seed) {
      ConstraintCompiler& c = seed % 2 ? Compiler() : InlineCompiler();
      Generated out = Generate(c, Schema(schema.dump()), seed + 100 * i, 3000);
      ++outputs;
      ASSERT_TRUE(out.ended) << schema.dump() << " seed " << seed << ": "
                             << out.text;
      // JSON allows exponents of any length; nlohmann's doubles do not
      // (1e99999 is a parse error there), so long exponents are shortened
      // before parsing (the random schemas bound no number).
      const std::string text = std::regex_replace(
          out.text, std::regex("([0-9][eE][+-]?)[0-9]{3,}"), "$1" "99");
      const Json value = Json::parse(text, nullptr, false);
      ASSERT_FALSE(value.is_discarded())
          << schema.dump() << " gave invalid JSON " << out.text;
      EXPECT_TRUE(Valid(value, schema))
          << schema.dump() << " does not accept " << out.text;
    }
  }
  EXPECT_EQ(outputs, 240);
}

// Masks computed ahead on a worker are the masks computed inline: the same
// seed gives the same output.
TEST(StructuredOutputTest, BackgroundMasksEqualInlineMasks) {
  std::mt19937_64 rng(99);
  for (int i = 0; i < 10; ++i) {
    const ResponseFormat f = Schema(RandomSchema(rng, 2).dump());
    Generated a = Generate(Compiler(), f, 7 + i, 2000);
    Generated b = Generate(InlineCompiler(), f, 7 + i, 2000);
    EXPECT_EQ(a.text, b.text);
    EXPECT_EQ(a.ended, b.ended);
  }
}

TEST(StructuredOutputTest, RegexAndChoicesHold) {
  ResponseFormat re = Format(ResponseFormat::Type::kRegex,
                             R"((yes|no|[0-9]{1,3}(\.[0-9]+)?)( 日|é)?)");
  const std::regex check(R"((yes|no|[0-9]{1,3}(\.[0-9]+)?)( 日|é)?)");
  ResponseFormat choice;
  choice.type = ResponseFormat::Type::kChoice;
  choice.choices = {"red", "green", "gr\"een.*", "日本"};
  for (uint64_t seed = 0; seed < 40; ++seed) {
    // Greedy too: the mask applies before the argmax.
    Generated out =
        Generate(Compiler(), re, seed, 200, seed % 4 == 0 ? 0.0f : 1.0f);
    EXPECT_TRUE(out.ended);
    EXPECT_TRUE(std::regex_match(out.text, check)) << out.text;
    Generated pick = Generate(Compiler(), choice, seed, 200);
    EXPECT_TRUE(pick.ended);
    EXPECT_NE(std::find(choice.choices.begin(), choice.choices.end(), pick.text),
              choice.choices.end())
        << pick.text;
  }
}

// The mask comes after logit_bias and the penalties: a +100 bias cannot
// force a token the format forbids, greedy or sampled.
TEST(StructuredOutputTest, MaskOverridesLogitBias) {
  const ResponseFormat re = Format(ResponseFormat::Type::kRegex, "a{3}");
  const int32_t v = VocabSize();
  const int32_t b = ByteToken('b');
  for (float temperature : {0.0f, 1.0f}) {
    Sampler sampler(v);
    SamplingParams params;
    params.temperature = temperature;
    params.seed = 3;
    params.logit_bias = {{b, 100.0f}};
    params.repetition_penalty = 2.0f;
    std::vector<int32_t> eos = {Eos()};
    SamplingState state(params, {}, eos);
    auto c = Compiler().NewConstraint(re);
    ASSERT_TRUE(c.ok()) << c.status();
    state.set_constraint(*std::move(c));
    std::vector<float> logits(v);
    SampleResult r;
    std::string text;
    for (int i = 0; i < 3 && !state.constraint_complete(); ++i) {
      std::fill(logits.begin(), logits.end(), 0.0f);
      ASSERT_TRUE(sampler.SampleRow(absl::MakeSpan(logits), &state, &r).ok());
      text += Vocab()[r.token_id];
    }
    EXPECT_EQ(text, "aaa");
    EXPECT_TRUE(state.constraint_complete());
  }
}

TEST(StructuredOutputTest, EosOnlyWhereTheOutputMayEnd) {
  auto c = Compiler().NewConstraint(Format(ResponseFormat::Type::kRegex, "ab+"));
  ASSERT_TRUE(c.ok()) << c.status();
  const int32_t v = VocabSize();
  std::vector<float> logits(v, 1.0f);
  const int32_t ends[] = {Eos()};
  (*c)->Mask(absl::MakeSpan(logits), ends);
  EXPECT_TRUE(std::isinf(logits[Eos()]));
  EXPECT_FALSE(std::isinf(logits[ByteToken('a')]));
  EXPECT_TRUE(std::isinf(logits[ByteToken('b')]));
  (*c)->Advance(ByteToken('a'));
  (*c)->Advance(ByteToken('b'));
  std::fill(logits.begin(), logits.end(), 1.0f);
  (*c)->Mask(absl::MakeSpan(logits), ends);
  EXPECT_EQ(logits[Eos()], 1.0f);
  EXPECT_EQ(logits[ByteToken('b')], 1.0f);
  EXPECT_FALSE((*c)->Complete());  // more b's may follow
  // A choice ends by itself.
  ResponseFormat choice;
  choice.type = ResponseFormat::Type::kChoice;
  choice.choices = {"k0"};
  auto k = Compiler().NewConstraint(choice);
  ASSERT_TRUE(k.ok()) << k.status();
  (*k)->Advance(ByteToken('k'));
  EXPECT_FALSE((*k)->Complete());
  (*k)->Advance(ByteToken('0'));
  EXPECT_TRUE((*k)->Complete());
}

// The generic tool format under tool_choice auto: the calls or a text
// answer that starts with neither '[', '{' nor whitespace.
TEST(StructuredOutputTest, CallsOrTextTakesEitherButNothingBetween) {
  ResponseFormat f = Schema(R"({
    "type": "array", "minItems": 1, "items": {
      "type": "object",
      "properties": {"name": {"const": "get"},
                     "arguments": {"type": "object",
                                   "properties": {"k": {"type": "integer"}},
                                   "required": ["k"]}},
      "required": ["name", "arguments"], "additionalProperties": false}})");
  f.or_text = true;
  EXPECT_TRUE(Accepts(f, R"([{"name": "get", "arguments": {"k": 1}}])"));
  EXPECT_TRUE(Accepts(f, "The answer is 42.\nMore [brackets] later are fine."));
  EXPECT_TRUE(Accepts(f, "x"));
  EXPECT_FALSE(Accepts(f, R"([{"name": "put", "arguments": {"k": 1}}])"));
  EXPECT_FALSE(Accepts(f, R"([1, 2])"));
  EXPECT_FALSE(Accepts(f, R"({"answer": 1})"));
  EXPECT_FALSE(Accepts(f, " leading space"));
  EXPECT_FALSE(Accepts(f, ""));  // an answer has at least one character
  // Sampled outputs are one or the other, whole.
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    Generated g = Generate(Compiler(), f, seed, 200);
    if (!g.ended || g.text.empty()) continue;
    if (g.text[0] == '[') {
      nlohmann::json j = nlohmann::json::parse(g.text, nullptr, false);
      ASSERT_FALSE(j.is_discarded()) << g.text;
      EXPECT_EQ(j[0]["name"], "get") << g.text;
    } else {
      EXPECT_NE(g.text[0], '{') << g.text;
      EXPECT_FALSE(std::isspace(static_cast<unsigned char>(g.text[0])))
          << g.text;
    }
  }
  // Without or_text the same schema refuses text.
  f.or_text = false;
  EXPECT_FALSE(Accepts(f, "The answer is 42."));
}

TEST(StructuredOutputTest, TextsAreAcceptedAndRejectedTokenByToken) {
  const ResponseFormat person = Schema(R"({
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 5},
                   "age": {"type": "integer", "minimum": 0, "maximum": 150},
                   "tags": {"type": "array", "items": {"enum": ["a", "b"]}}},
    "required": ["name"]})");
  EXPECT_TRUE(Accepts(person, R"({"name": "Ann", "age": 42})"));
  EXPECT_TRUE(Accepts(person, R"({"name": "Bo", "tags": ["a", "b"]})"));
  EXPECT_FALSE(Accepts(person, R"({"age": 42})"));             // required
  EXPECT_FALSE(Accepts(person, R"({"name": "Annabel"})"));     // maxLength
  EXPECT_FALSE(Accepts(person, R"({"name": "A", "age": 151})"));  // maximum
  EXPECT_FALSE(Accepts(person, R"({"name": "A", "tags": ["c"]})"));  // enum
  EXPECT_FALSE(Accepts(person, R"({"name":"A"})"));  // compact: ": "
  // additionalProperties defaults to true; `strict` closes the object.
  EXPECT_TRUE(Accepts(person, R"({"name": "A", "extra": [1, {"x": null}]})"));
  ResponseFormat strict = person;
  strict.strict = true;
  EXPECT_FALSE(Accepts(strict, R"({"name": "A", "extra": 1})"));
  EXPECT_TRUE(Accepts(strict, R"({"name": "A"})"));
  // Flexible whitespace lets the model format the JSON.
  ResponseFormat loose = person;
  loose.flexible_whitespace = true;
  EXPECT_TRUE(Accepts(loose, "{\n  \"name\":\"A\" ,\"age\":  3}"));
}

TEST(StructuredOutputTest, RecursiveSchemasAndGrammars) {
  // A tree: the recursion a regular-language compiler cannot express.
  const ResponseFormat tree = Schema(R"({
    "$defs": {"node": {"type": "object",
      "properties": {"v": {"type": "integer"},
                     "kids": {"type": "array", "items": {"$ref": "#/$defs/node"},
                              "maxItems": 2}},
      "required": ["v"], "additionalProperties": false}},
    "$ref": "#/$defs/node"})");
  EXPECT_TRUE(Accepts(tree, R"({"v": 1, "kids": [{"v": 2, "kids": [{"v": 3}]}]})"));
  EXPECT_FALSE(Accepts(tree, R"({"v": 1, "kids": [{"w": 2}]})"));
  // A Lark grammar with a recursive rule and a regex terminal.
  const ResponseFormat sum = Format(ResponseFormat::Type::kGrammar,
                                    "start: expr\n"
                                    "expr: NUM | \"(\" expr \"+\" expr \")\"\n"
                                    "NUM: /[0-9]{1,3}/\n");
  EXPECT_TRUE(Accepts(sum, "((1+22)+(3+4))"));
  EXPECT_FALSE(Accepts(sum, "((1+2)"));
  EXPECT_FALSE(Accepts(sum, "(1-2)"));
  for (uint64_t seed = 0; seed < 10; ++seed) {
    Generated out = Generate(Compiler(), sum, seed, 400);
    if (!out.ended) continue;  // random logits may nest past the budget
    // Balanced parentheses, digits and '+' only.
    int depth = 0;
    for (char ch : out.text) {
      depth += ch == '(' ? 1 : ch == ')' ? -1 : 0;
      EXPECT_GE(depth, 0) << out.text;
      EXPECT_TRUE(std::isdigit(static_cast<unsigned char>(ch)) || ch == '(' ||
                  ch == ')' || ch == '+')
          << out.text;
    }
    EXPECT_EQ(depth, 0) << out.text;
  }
}

TEST(StructuredOutputTest, IgnoredKeywordsAndNamedRefusals) {
  // Keywords JSON Schema does not define, annotations and formats the
  // engine does not check are ignored.
  EXPECT_TRUE(Accepts(Schema(R"({"id": "http://x/y", "javaType": "Foo",
      "_comment": "c", "$schema": "http://json-schema.org/draft-04/schema#",
      "type": "object", "properties": {"ip": {"type": "string",
      "format": "ipv4"}}, "readonly": true})"),
                      R"({"ip": "10.0.0.1"})"));
  struct Case {
    ResponseFormat format;
    const char* want[2];
  };
  const Case cases[] = {
      {Schema(R"({"type": "array", "uniqueItems": true})"),
       {"response_format.json_schema", "uniqueItems"}},
      {Schema("{not json"), {"response_format.json_schema", "not valid JSON"}},
      {Format(ResponseFormat::Type::kRegex, "(ab"),
       {"response_format.regex", ""}},
      {Format(ResponseFormat::Type::kGrammar, "start: undefined_rule\n"),
       {"response_format.grammar", "undefined_rule"}},
  };
  ResponseFormat bad_choice;
  bad_choice.type = ResponseFormat::Type::kChoice;
  // A truncated sequence, an overlong form, a surrogate.
  for (const char* bad : {"gr\xce\xce", "\xc1\xb1", "\xed\xa0\x80"}) {
    bad_choice.choices = {"red", bad};
    auto r = Compiler().NewConstraint(bad_choice);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(r.status().message()).find("not valid UTF-8"),
              std::string::npos);
  }
  for (const Case& c : cases) {
    auto r = Compiler().NewConstraint(c.format);
    ASSERT_FALSE(r.ok()) << c.format.spec;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    for (const char* w : c.want) {
      EXPECT_NE(std::string(r.status().message()).find(w), std::string::npos)
          << r.status() << " lacks " << w;
    }
  }
}


// The schema's own "x-guidance" options: lenient ignores what llguidance
// cannot enforce (refused without it); its whitespace option wins over the
// request's.
TEST(StructuredOutputTest, SchemaOptionsOptInToLenientAndWhitespace) {
  const std::string unique =
      R"({"type": "array", "items": {"enum": ["a", "b"]}, "uniqueItems": true)";
  auto refused = Compiler().NewConstraint(Schema(unique + "}"));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  const ResponseFormat lenient =
      Schema(unique + R"(, "x-guidance": {"lenient": true}})");
  EXPECT_TRUE(Accepts(lenient, R"(["a", "b"])"));
  EXPECT_FALSE(Accepts(lenient, R"(["c"])"));  // the rest still holds
  const ResponseFormat flexible = Schema(
      R"({"type": "object", "properties": {"k0": {"type": "integer"}},
          "x-guidance": {"whitespace_flexible": true}})");
  EXPECT_TRUE(Accepts(flexible, "{ \"k0\" :1 }"));
}

// oneOf compiles where no value can match two branches (types, or a
// required property pinned to different const/enum values, through local
// $refs); overlapping branches are refused naming the place and the way
// out, unless the schema opts in to compiling them as anyOf.
TEST(StructuredOutputTest, OneOfOnlyWhereTheBranchesExcludeEachOther) {
  const ResponseFormat by_type = Schema(
      R"({"oneOf": [{"type": "integer"}, {"type": "string", "maxLength": 2}]})");
  EXPECT_TRUE(Accepts(by_type, "12"));
  EXPECT_TRUE(Accepts(by_type, R"("k0")"));
  EXPECT_FALSE(Accepts(by_type, "true"));
  const ResponseFormat tagged = Schema(R"({
    "$defs": {
      "red": {"type": "object", "properties": {"kind": {"const": "red"},
              "k1": {"type": "integer"}}, "required": ["kind", "k1"],
              "additionalProperties": false},
      "green": {"type": "object", "properties": {"kind": {"enum": ["green", "gr"]},
              "k2": {"type": "boolean"}}, "required": ["kind"],
              "additionalProperties": false}},
    "oneOf": [{"$ref": "#/$defs/red"}, {"$ref": "#/$defs/green"}]})");
  EXPECT_TRUE(Accepts(tagged, R"({"kind": "red", "k1": 1})"));
  EXPECT_TRUE(Accepts(tagged, R"({"kind": "gr", "k2": true})"));
  EXPECT_FALSE(Accepts(tagged, R"({"kind": "red", "k2": true})"));
  const std::string overlap =
      R"({"type": "object", "properties": {"k0": {"oneOf": [
           {"type": "integer"}, {"minimum": 0}]}})";
  auto refused = Compiler().NewConstraint(Schema(overlap + "}"));
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  for (const char* want : {"/properties/k0", "oneOf", "anyOf",
                           "coerce_one_of"}) {
    EXPECT_NE(std::string(refused.status().message()).find(want),
              std::string::npos)
        << refused.status();
  }
  const ResponseFormat coerced =
      Schema(overlap + R"(, "x-guidance": {"coerce_one_of": true}})");
  EXPECT_TRUE(Accepts(coerced, R"({"k0": 5})"));
}

// Fast-forward: where the format allows one continuation, ForcedTokens
// gives it as tokens (in the tokenizer's own tokenization), each of which
// the mask allows in turn; where the output branches, none.
TEST(StructuredOutputTest, ForcedTokensAreTheOnlyContinuation) {
  struct Case {
    ResponseFormat format;
    std::string forced;  // the text forced at the start
  };
  const Case cases[] = {
      {Schema(R"({"type": "object", "properties": {"k0": {"type": "integer"}},
                  "required": ["k0"], "additionalProperties": false})"),
       "{\"k0\": "},
      {Format(ResponseFormat::Type::kRegex, "red(dish|[0-9])"), "red"},
      {Format(ResponseFormat::Type::kGrammar,
              "start: \"k1\" \"k2\" (\"a\" | \"b\")\n"),
       "k1k2"},
  };
  for (const Case& c : cases) {
    for (ConstraintCompiler* compiler : {&Compiler(), &InlineCompiler()}) {
      auto k = compiler->NewConstraint(c.format);
      ASSERT_TRUE(k.ok()) << k.status();
      std::vector<int32_t> forced;
      (*k)->ForcedTokens(kMaxForced, &forced);
      std::string text;
      std::vector<float> logits(VocabSize());
      const int32_t ends[] = {Eos()};
      for (int32_t id : forced) {
        std::fill(logits.begin(), logits.end(), 0.0f);
        (*k)->Mask(absl::MakeSpan(logits), ends);
        ASSERT_FALSE(std::isinf(logits[id])) << c.format.spec;
        (*k)->Advance(id);
        text += Vocab()[id];
      }
      EXPECT_EQ(text, c.forced) << c.format.spec;
      // Then a choice: nothing more is forced, and `max` bounds the count.
      (*k)->ForcedTokens(kMaxForced, &forced);
      EXPECT_TRUE(forced.empty()) << c.format.spec;
      auto again = compiler->NewConstraint(c.format);
      ASSERT_TRUE(again.ok());
      (*again)->ForcedTokens(1, &forced);
      EXPECT_EQ(forced.size(), 1u);
    }
  }
}

}  // namespace
}  // namespace inferd
