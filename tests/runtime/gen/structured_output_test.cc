// Structured output: JSON Schema compilation, token masks and constrained
// sampling (random logits stand in for a random-weight model).
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/gen/json_schema.h"
#include "runtime/gen/regex_dfa.h"
#include "runtime/gen/sampler.h"
#include "runtime/gen/token_grammar.h"

namespace inferd {
namespace {

using Json = nlohmann::ordered_json;

// ------------------------------------------------------------ validator
// An independent check of a value against the supported keywords.

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
  if (t == "integer") return v.is_number_integer();
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
  if (v.is_number_integer()) {
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
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!props.contains(it.key())) return false;
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

// Samples with random logits (temperature 1) under `grammar`.
Generated Generate(const std::shared_ptr<const TokenGrammar>& grammar,
                   int32_t eos, uint64_t seed, int max_tokens,
                   float temperature = 1.0f) {
  const int32_t v = grammar->vocab().size();
  Sampler sampler(v);
  SamplingParams params;
  params.temperature = temperature;
  params.seed = seed;
  std::vector<int32_t> eos_ids = {eos};
  SamplingState state(params, {}, eos_ids);
  state.set_constraint(std::make_unique<GrammarConstraint>(grammar));
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
    if (r.token_id == eos) {
      out.ended = true;
      break;
    }
    out.text += grammar->vocab().bytes(r.token_id);
    if (state.constraint_complete()) {
      out.ended = true;
      break;
    }
  }
  return out;
}

std::shared_ptr<const TokenVocabulary> Vocab() {
  static auto* v = new std::shared_ptr<const TokenVocabulary>(
      std::make_shared<const TokenVocabulary>(TestVocab()));
  return *v;
}

GrammarCompiler& Compiler() {
  static auto* c = new GrammarCompiler([] { return Vocab(); });
  return *c;
}

ResponseFormat Schema(const std::string& json) {
  ResponseFormat f;
  f.type = ResponseFormat::Type::kJsonSchema;
  f.spec = json;
  return f;
}

// ---------------------------------------------------------------- tests

TEST(JsonSchemaTest, CompiledRegexAcceptsAndRejects) {
  const std::string schema = R"({"type":"object","properties":{
      "name":{"type":"string","maxLength":5},
      "age":{"type":"integer","minimum":0,"maximum":150},
      "tags":{"type":"array","items":{"enum":["a","b"]},"maxItems":2}},
      "required":["name"]})";
  absl::StatusOr<std::string> regex = CompileJsonSchema(schema);
  ASSERT_TRUE(regex.ok()) << regex.status();
  absl::StatusOr<ByteDfa> dfa = ByteDfa::Compile(*regex);
  ASSERT_TRUE(dfa.ok()) << dfa.status();
  for (const char* ok :
       {R"({"name":"bob"})", R"({"name": "bob", "age": 150})",
        R"({"name":"","tags":["a","b"]})", R"({"name":"\"é\n","age":0})"}) {
    EXPECT_TRUE(dfa->FullMatch(ok)) << ok;
  }
  for (const char* bad :
       {R"({})", R"({"age":3})", R"({"name":"toolong"})",
        R"({"name":"a","age":151})", R"({"name":"a","age":-1})",
        R"({"name":"a","age":007})", R"({"age":1,"name":"a"})",
        R"({"name":"a","other":1})", R"({"name":"a","tags":["a","b","a"]})",
        R"({"name":"a",})"}) {
    EXPECT_FALSE(dfa->FullMatch(bad)) << bad;
  }
}

TEST(JsonSchemaTest, RefsAreInlinedAndPatternsMatchTheWholeString) {
  const std::string schema = R"({"$defs":{
      "code":{"type":"string","pattern":"^[A-Z]{2}-\\d{2,3}$"},
      "pair":{"type":"array","items":{"$ref":"#/$defs/code"},"minItems":2,"maxItems":2}},
    "type":"object","properties":{"a":{"$ref":"#/$defs/pair"},
      "b":{"$ref":"#/$defs/code","description":"x"},
      "c":{"type":"string","pattern":"[^x]+"}},
    "required":["a","b","c"]})";
  absl::StatusOr<std::string> regex = CompileJsonSchema(schema);
  ASSERT_TRUE(regex.ok()) << regex.status();
  absl::StatusOr<ByteDfa> dfa = ByteDfa::Compile(*regex);
  ASSERT_TRUE(dfa.ok()) << dfa.status();
  EXPECT_TRUE(dfa->FullMatch(R"({"a":["AB-12","CD-345"],"b":"ZZ-00","c":"é y"})"));
  EXPECT_FALSE(dfa->FullMatch(R"({"a":["AB-12"],"b":"ZZ-00","c":"y"})"));
  EXPECT_FALSE(dfa->FullMatch(R"({"a":["AB-12","CD-3456"],"b":"ZZ-00","c":"y"})"));
  EXPECT_FALSE(dfa->FullMatch(R"({"a":["AB-12","CD-34"],"b":"ZZ-00","c":"x"})"));
  // The pattern's classes leave out what JSON would need escaped.
  EXPECT_FALSE(dfa->FullMatch(R"({"a":["AB-12","CD-34"],"b":"ZZ-00","c":"""})"));
  EXPECT_FALSE(dfa->FullMatch("{\"a\":[\"AB-12\",\"CD-34\"],\"b\":\"ZZ-00\",\"c\":\"\n\"}"));
}

TEST(JsonSchemaTest, IntegerRangesAreExact) {
  for (auto [lo, hi] : std::vector<std::pair<int, int>>{
           {0, 0}, {-5, 5}, {7, 123}, {-250, -13}, {99, 100}, {-1000, 999}}) {
    const std::string schema = "{\"type\":\"integer\",\"minimum\":" +
                               std::to_string(lo) + ",\"maximum\":" +
                               std::to_string(hi) + "}";
    absl::StatusOr<std::string> regex = CompileJsonSchema(schema);
    ASSERT_TRUE(regex.ok()) << regex.status();
    absl::StatusOr<ByteDfa> dfa = ByteDfa::Compile(*regex);
    ASSERT_TRUE(dfa.ok()) << dfa.status();
    for (int x = -1100; x <= 1100; ++x) {
      EXPECT_EQ(dfa->FullMatch(std::to_string(x)), x >= lo && x <= hi)
          << x << " in [" << lo << ", " << hi << "]";
    }
    EXPECT_FALSE(dfa->FullMatch("-0"));
    EXPECT_FALSE(dfa->FullMatch("01"));
  }
}

TEST(JsonSchemaTest, UnsupportedFeaturesAreNamed) {
  struct Case {
    const char* schema;
    const char* message;
  } cases[] = {
      {R"({"$ref":"#/$defs/a"})",
       "at /: '$ref' \"#/$defs/a\" points to nothing"},
      {R"({"$defs":{"n":{"type":"object","properties":{"next":{"$ref":"#/$defs/n"}}}},"$ref":"#/$defs/n"})",
       "at / ($ref #/$defs/n)/properties/next: recursive '$ref' \"#/$defs/n\" "
       "is not supported"},
      {R"({"$ref":"http://x/s.json"})", "to another document"},
      {R"({"type":"string","pattern":"(a)\\1"})", "'pattern': a backreference"},
      {R"({"type":"string","pattern":"\"+"})", "matches no string"},
      {R"({"type":"string","pattern":"a+","maxLength":3})",
       "next to 'pattern'"},
      {R"({"type":"object","properties":{"a":{"oneOf":[]}}})",
       "at /properties/a: 'oneOf' is not supported"},
      {R"({"type":"object","additionalProperties":true})",
       "'additionalProperties' other than false"},
      {R"({"type":"number","minimum":1})", "'minimum' on type 'number'"},
      {R"({"type":"array"})", "an array without 'items'"},
      {R"({})", "any\nvalue"},
      {R"({"type":"object","required":["x"]})", "required property 'x'"},
      {R"({"type":"strin"})", "unknown type 'strin'"},
      {R"({"type":"string","format":"email"})", "'format' \"email\""},
      {R"({"type":)", "not valid JSON"},
      {R"({"type":"integer","minimum":5,"maximum":4})", "range is empty"},
      {R"({"type":"array","items":{"type":"null"},"maxItems":5000})",
       "above 1000"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::string> r = CompileJsonSchema(c.schema);
    ASSERT_FALSE(r.ok()) << c.schema;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    std::string want = c.message;
    if (want == "any\nvalue") want = "(any value) is not supported";
    EXPECT_NE(r.status().message().find(want), std::string::npos)
        << c.schema << " -> " << r.status().message();
  }
  // Through the compiler, the field is named too.
  absl::StatusOr<std::shared_ptr<const TokenGrammar>> g =
      Compiler().Compile(Schema(R"({"type":"string","oneOf":[]})"));
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().message(),
            "response_format.json_schema: at /: 'oneOf' is not supported");
}

// Every subset of the properties, in schema order, is accepted exactly
// when it holds the required ones (the object regex's first-property
// alternatives and shared tails).
TEST(JsonSchemaTest, ObjectsAcceptEveryOrderedSubsetWithTheRequired) {
  const std::vector<std::string> keys = {"a", "b", "c", "d", "e"};
  for (const std::vector<bool>& required :
       std::vector<std::vector<bool>>{{false, false, false, false, false},
                                      {false, true, false, false, true},
                                      {true, false, false, false, false},
                                      {false, false, false, false, true}}) {
    Json schema = {{"type", "object"}, {"properties", Json::object()}};
    Json req = Json::array();
    for (size_t i = 0; i < keys.size(); ++i) {
      schema["properties"][keys[i]] = {{"type", "integer"}};
      if (required[i]) req.push_back(keys[i]);
    }
    schema["required"] = req;
    absl::StatusOr<std::string> regex = CompileJsonSchema(schema.dump());
    ASSERT_TRUE(regex.ok()) << regex.status();
    absl::StatusOr<ByteDfa> dfa = ByteDfa::Compile(*regex);
    ASSERT_TRUE(dfa.ok()) << dfa.status();
    for (int mask = 0; mask < (1 << keys.size()); ++mask) {
      std::string text = "{";
      bool valid = true;
      for (size_t i = 0; i < keys.size(); ++i) {
        if (mask & (1 << i)) {
          if (text.size() > 1) text += ",";
          text += "\"" + keys[i] + "\":" + std::to_string(i);
        } else if (required[i]) {
          valid = false;
        }
      }
      text += "}";
      EXPECT_EQ(dfa->FullMatch(text), valid) << schema.dump() << " " << text;
    }
  }
}

// Schemas built to cost time or memory (hostile input,
// docs/hostile-input.md): each is refused, naming why.
TEST(JsonSchemaTest, CostlySchemasAreRefused) {
  auto fan = [](int levels, int width) {
    Json defs = Json::object();
    defs["d" + std::to_string(levels)] = {{"type", "string"},
                                          {"format", "date-time"}};
    for (int i = 0; i < levels; ++i) {
      Json any = Json::array();
      for (int k = 0; k < width; ++k) {
        any.push_back({{"$ref", "#/$defs/d" + std::to_string(i + 1)}});
      }
      defs["d" + std::to_string(i)] = {{"anyOf", any}};
    }
    return Json{{"$defs", defs}, {"$ref", "#/$defs/d0"}}.dump();
  };
  auto object_of = [](int n, const Json& value) {
    Json props = Json::object();
    for (int i = 0; i < n; ++i) props["p" + std::to_string(i)] = value;
    return Json{{"type", "object"}, {"properties", props}}.dump();
  };
  std::string odd_bytes;
  for (int b = 0x21; b < 0x7F; b += 2) {
    char hex[8];
    std::snprintf(hex, sizeof(hex), "\\x%02x", b);
    odd_bytes += hex;
  }
  const std::string costly = "([" + odd_bytes + "]?){60}";
  // 300 properties, each a $ref to the root's 8^3-copy definition.
  auto many_refs = [&] {
    Json schema = Json::parse(fan(3, 8));
    schema.erase("$ref");
    schema["type"] = "object";
    schema["properties"] = Json::object();
    for (int i = 0; i < 300; ++i) {
      schema["properties"]["p" + std::to_string(i)] = {
          {"$ref", "#/$defs/d0"}};
    }
    return schema.dump();
  };
  // "type": 1000 times "object", of an object whose regex is ~36 kB.
  auto repeated_types = [&] {
    Json schema = Json::parse(object_of(60, {{"type", "null"}}));
    schema["type"] = Json::array();
    for (int i = 0; i < 1000; ++i) schema["type"].push_back("object");
    return schema.dump();
  };
  struct Case {
    std::string schema;
    const char* message;
  } cases[] = {
      {"{\"const\":" + std::string(30000, '[') + std::string(30000, ']') +
           "}",
       "deeper than 128 levels"},
      // The regex would grow with the square of the properties.
      {object_of(2000, {{"type", "null"}}), "too large to compile"},
      // 8^10 copies of one definition once inlined.
      {fan(10, 8), "too large to compile"},
      // Each property alone is fine; together they are too big.
      {many_refs(), "too large to compile"},
      // A type list repeating a large object.
      {repeated_types(), "too large to compile"},
      // One pattern's automaton is cheap; 100 of them are not.
      {object_of(100, {{"type", "string"}, {"pattern", costly}}),
       "patterns are too complex to check together"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::string> r = CompileJsonSchema(c.schema);
    ASSERT_FALSE(r.ok()) << c.schema.substr(0, 80);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.message), std::string::npos)
        << c.schema.substr(0, 80) << " -> " << r.status().message();
  }
  // Thousands of required properties are checked in linear time and, with
  // every one required, give a regex linear in their number.
  Json props = Json::object(), req = Json::array();
  for (int i = 0; i < 3000; ++i) {
    props["k" + std::to_string(i)] = {{"type", "boolean"}};
    req.push_back("k" + std::to_string(i));
  }
  absl::StatusOr<std::string> many = CompileJsonSchema(
      Json{{"type", "object"}, {"properties", props}, {"required", req}}
          .dump());
  ASSERT_TRUE(many.ok()) << many.status();
  EXPECT_LT(many->size(), 3000u * 40);
  // A deep but allowed nesting of JSON inside "const" compiles.
  EXPECT_TRUE(CompileJsonSchema("{\"const\":" + std::string(100, '[') +
                                std::string(100, ']') + "}")
                  .ok());
}

TEST(TokenGrammarTest, MaskEqualsBruteForce) {
  absl::StatusOr<std::shared_ptr<const TokenGrammar>> g =
      Compiler().Compile(Schema(
          R"({"type":"object","properties":{"k0":{"type":"string","maxLength":4},"k1":{"type":"array","items":{"type":"integer"},"maxItems":3}},"required":["k1"]})"));
  ASSERT_TRUE(g.ok()) << g.status();
  const ByteDfa& dfa = (*g)->dfa();
  const TokenVocabulary& vocab = (*g)->vocab();
  // Walk a few states along a valid text and compare each mask with a walk
  // of every token.
  const std::string text = R"({"k0":"ab\"","k1":[12,-3]})";
  int32_t state = dfa.start();
  for (size_t i = 0; i <= text.size(); ++i) {
    std::vector<int32_t> want;
    for (int32_t id = 0; id < vocab.size(); ++id) {
      const std::string& b = vocab.bytes(id);
      if (b.empty()) continue;
      int32_t s = state;
      for (char c : b) {
        s = dfa.Next(s, static_cast<uint8_t>(c));
        if (s == ByteDfa::kDead) break;
      }
      if (s != ByteDfa::kDead) want.push_back(id);
    }
    const TokenMask& mask = (*g)->Mask(state);
    std::vector<int32_t> got;
    for (int32_t id = 0; id < vocab.size(); ++id) {
      if (mask.allowed(id)) got.push_back(id);
    }
    EXPECT_EQ(got, want) << "after " << text.substr(0, i);
    EXPECT_EQ(mask.count, static_cast<int32_t>(want.size()));
    if (!mask.ids.empty()) {
      EXPECT_EQ(mask.ids, want);
    }
    if (i < text.size()) {
      state = dfa.Next(state, static_cast<uint8_t>(text[i]));
      ASSERT_NE(state, ByteDfa::kDead);
    }
  }
  EXPECT_TRUE(dfa.accepting(state));
}

// The property: under random logits and sampling, every output of every
// random schema completes, parses and validates.
TEST(StructuredOutputTest, RandomSchemasAlwaysValidate) {
  const int32_t eos = Vocab()->size() - 1;
  std::mt19937_64 rng(2024);
  int outputs = 0, ended_by_eos_or_grammar = 0;
  for (int i = 0; i < 60; ++i) {
    const Json schema = RandomSchema(rng, 2);
    absl::StatusOr<std::shared_ptr<const TokenGrammar>> g =
        Compiler().Compile(Schema(schema.dump()));
    ASSERT_TRUE(g.ok()) << schema.dump() << ": " << g.status();
    for (uint64_t seed = 1; seed <= 5; ++seed) {
      Generated out = Generate(*g, eos, seed + 100 * i, 3000);
      ++outputs;
      ASSERT_TRUE(out.ended) << schema.dump() << " seed " << seed << ": "
                             << out.text;
      ++ended_by_eos_or_grammar;
      EXPECT_TRUE((*g)->dfa().FullMatch(out.text)) << out.text;
      const Json value = Json::parse(out.text, nullptr, false);
      ASSERT_FALSE(value.is_discarded())
          << schema.dump() << " gave invalid JSON " << out.text;
      EXPECT_TRUE(Valid(value, schema))
          << schema.dump() << " does not accept " << out.text;
    }
  }
  EXPECT_EQ(outputs, ended_by_eos_or_grammar);
}

TEST(StructuredOutputTest, RegexAndChoicesHold) {
  const int32_t eos = Vocab()->size() - 1;
  ResponseFormat re;
  re.type = ResponseFormat::Type::kRegex;
  re.spec = R"((yes|no|[0-9]{1,3}(\.[0-9]+)?)( 日|é)?)";
  ResponseFormat choice;
  choice.type = ResponseFormat::Type::kChoice;
  choice.choices = {"red", "green", "gr\"een.*", "日本"};
  absl::StatusOr<ByteDfa> check = ByteDfa::Compile(re.spec);
  ASSERT_TRUE(check.ok());
  for (uint64_t seed = 0; seed < 40; ++seed) {
    auto g = Compiler().Compile(re);
    ASSERT_TRUE(g.ok()) << g.status();
    // Greedy too: the mask applies before the argmax.
    Generated out = Generate(*g, eos, seed, 200, seed % 4 == 0 ? 0.0f : 1.0f);
    EXPECT_TRUE(out.ended);
    EXPECT_TRUE(check->FullMatch(out.text)) << out.text;
    auto c = Compiler().Compile(choice);
    ASSERT_TRUE(c.ok()) << c.status();
    Generated pick = Generate(*c, eos, seed, 200);
    EXPECT_TRUE(pick.ended);
    EXPECT_NE(std::find(choice.choices.begin(), choice.choices.end(), pick.text),
              choice.choices.end())
        << pick.text;
  }
}

// The mask comes after logit_bias and the penalties: a +100 bias cannot
// force a token the format forbids, greedy or sampled.
TEST(StructuredOutputTest, MaskOverridesLogitBias) {
  ResponseFormat re;
  re.type = ResponseFormat::Type::kRegex;
  re.spec = "a{3}";
  auto g = Compiler().Compile(re);
  ASSERT_TRUE(g.ok());
  const int32_t v = Vocab()->size();
  const int32_t b = 'b' - 0x20;
  for (float temperature : {0.0f, 1.0f}) {
    Sampler sampler(v);
    SamplingParams params;
    params.temperature = temperature;
    params.seed = 3;
    params.logit_bias = {{b, 100.0f}};
    params.repetition_penalty = 2.0f;
    std::vector<int32_t> eos = {v - 1};
    SamplingState state(params, {}, eos);
    state.set_constraint(std::make_unique<GrammarConstraint>(*g));
    std::vector<float> logits(v);
    SampleResult r;
    std::string text;
    for (int i = 0; i < 3; ++i) {
      std::fill(logits.begin(), logits.end(), 0.0f);
      ASSERT_TRUE(sampler.SampleRow(absl::MakeSpan(logits), &state, &r).ok());
      text += Vocab()->bytes(r.token_id);
    }
    EXPECT_EQ(text, "aaa");
    EXPECT_TRUE(state.constraint_complete());
  }
}

TEST(StructuredOutputTest, EosOnlyWhereTheOutputMayEnd) {
  ResponseFormat re;
  re.type = ResponseFormat::Type::kRegex;
  re.spec = "ab+";
  auto g = Compiler().Compile(re);
  ASSERT_TRUE(g.ok());
  const int32_t v = Vocab()->size();
  const int32_t eos = v - 1;
  GrammarConstraint c(*g);
  std::vector<float> logits(v, 1.0f);
  const int32_t ends[] = {eos};
  c.Mask(absl::MakeSpan(logits), ends);
  EXPECT_TRUE(std::isinf(logits[eos]));
  EXPECT_FALSE(std::isinf(logits['a' - 0x20]));  // "a" is id 'a' - 0x20
  EXPECT_TRUE(std::isinf(logits['b' - 0x20]));
  c.Advance('a' - 0x20);
  c.Advance('b' - 0x20);
  std::fill(logits.begin(), logits.end(), 1.0f);
  c.Mask(absl::MakeSpan(logits), ends);
  EXPECT_EQ(logits[eos], 1.0f);
  EXPECT_EQ(logits['b' - 0x20], 1.0f);
  EXPECT_FALSE(c.Complete());  // more b's may follow
  // A choice ends by itself.
  ResponseFormat choice;
  choice.type = ResponseFormat::Type::kChoice;
  choice.choices = {"k0"};
  auto k = Compiler().Compile(choice);
  ASSERT_TRUE(k.ok());
  GrammarConstraint kc(*k);
  kc.Advance('k' - 0x20);
  EXPECT_FALSE(kc.Complete());
  kc.Advance('0' - 0x20);
  EXPECT_TRUE(kc.Complete());
}

}  // namespace
}  // namespace inferd
