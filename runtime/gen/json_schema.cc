#include "runtime/gen/json_schema.h"

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/common/status_macros.h"
#include "runtime/gen/regex_dfa.h"

namespace inferd {
namespace {

using Json = nlohmann::ordered_json;

constexpr int kMaxDepth = 32;
// Nesting of the JSON text itself (a schema level takes one or two: an
// object, and "properties" or an "anyOf" list); checked before parsing,
// so a deep "const" or "default" cannot exhaust a recursive walk.
constexpr int kMaxJsonDepth = 128;
constexpr size_t kMaxRegexBytes = 1 << 20;
// What checking every "pattern" of one schema may cost together (steps of
// ByteDfa's subset construction; RegexLimits::max_steps).
constexpr int64_t kPatternSteps = 100000000;
constexpr int kMaxIntDigits = 16;
constexpr int64_t kMaxInt = 9999999999999999;  // 16 digits

// Optional single space after ':' and ','.
constexpr char kWs[] = "[ ]?";
// One character of a JSON string: unescaped (not '"', '\' or a control
// character) or a short escape.
constexpr char kStrChar[] = R"(([^"\\\x00-\x1f]|\\["\\/bfnrt]))";
constexpr char kNumber[] =
    R"(-?(0|[1-9][0-9]{0,15})(\.[0-9]{1,15})?([eE][+-]?[0-9]{1,2})?)";

// Decimal strings of [lo, hi] (same number of digits), no leading zeros
// beyond what lo/hi have.
std::string SameLengthRange(const std::string& lo, const std::string& hi) {
  if (lo == hi) return lo;
  if (lo.size() == 1) return absl::StrCat("[", lo, "-", hi, "]");
  const std::string lo_rest = lo.substr(1), hi_rest = hi.substr(1);
  if (lo[0] == hi[0]) {
    return absl::StrCat(std::string(1, lo[0]), "(",
                        SameLengthRange(lo_rest, hi_rest), ")");
  }
  const std::string nines(lo_rest.size(), '9'), zeros(lo_rest.size(), '0');
  const std::string tail = absl::StrCat("[0-9]{", lo_rest.size(), "}");
  if (lo_rest == zeros && hi_rest == nines) {
    return absl::StrCat("[", std::string(1, lo[0]), "-", std::string(1, hi[0]),
                        "]", tail);
  }
  std::vector<std::string> parts;
  parts.push_back(absl::StrCat(std::string(1, lo[0]), "(",
                               SameLengthRange(lo_rest, nines), ")"));
  if (hi[0] - lo[0] > 1) {
    parts.push_back(absl::StrCat("[", std::string(1, lo[0] + 1), "-",
                                 std::string(1, hi[0] - 1), "]", tail));
  }
  parts.push_back(absl::StrCat(std::string(1, hi[0]), "(",
                               SameLengthRange(zeros, hi_rest), ")"));
  return absl::StrJoin(parts, "|");
}

// Canonical decimal integers in [lo, hi], 0 <= lo <= hi.
std::string NonNegativeRange(int64_t lo, int64_t hi) {
  std::vector<std::string> parts;
  int64_t low_bound = 0;   // smallest number with `len` digits
  int64_t high_bound = 9;  // largest
  for (int len = 1; len <= 19 && low_bound <= hi; ++len) {
    const int64_t a = std::max(lo, low_bound), b = std::min(hi, high_bound);
    if (a <= b) {
      parts.push_back(
          absl::StrCat("(", SameLengthRange(absl::StrCat(a), absl::StrCat(b)),
                       ")"));
    }
    if (len == 18) break;
    low_bound = low_bound == 0 ? 10 : low_bound * 10;
    high_bound = high_bound * 10 + 9;
  }
  return absl::StrJoin(parts, "|");
}

std::string IntegerRange(int64_t lo, int64_t hi) {
  std::vector<std::string> parts;
  if (lo < 0) {
    // -m for m in [max(1, -hi), -lo].
    const int64_t m_lo = hi < 0 ? -hi : 1, m_hi = -lo;
    parts.push_back(absl::StrCat("-(", NonNegativeRange(m_lo, m_hi), ")"));
  }
  if (hi >= 0) {
    parts.push_back(absl::StrCat("(", NonNegativeRange(std::max<int64_t>(lo, 0),
                                                       hi),
                                 ")"));
  }
  return absl::StrCat("(", absl::StrJoin(parts, "|"), ")");
}

// A JSON string literal (compact dump) as a regex.
std::string LiteralJson(const Json& value) {
  return RegexEscape(value.dump());
}

// The deepest nesting of arrays and objects in `json` (strings skipped),
// or kMaxJsonDepth + 1 as soon as it goes deeper.
int JsonDepth(absl::string_view json) {
  int depth = 0, max_depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      max_depth = std::max(max_depth, ++depth);
      if (max_depth > kMaxJsonDepth) break;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return max_depth;
}

class Compiler {
 public:
  explicit Compiler(const Json& root) : root_(root) {}

  // Every subschema's regex is checked against the size limit, so nested
  // alternatives cannot double their way past it.
  absl::StatusOr<std::string> Compile(const Json& s, const std::string& where,
                                      int depth) {
    absl::StatusOr<std::string> r = CompileOne(s, where, depth);
    if (r.ok() && r->size() > kMaxRegexBytes) return TooBig(where);
    return r;
  }

 private:
  absl::StatusOr<std::string> CompileOne(const Json& s,
                                         const std::string& where, int depth) {
    if (depth > kMaxDepth) {
      return Fail(where, absl::StrCat("the schema nests deeper than ",
                                      kMaxDepth, " levels"));
    }
    if (s.is_boolean()) {
      return Fail(where, s.get<bool>()
                             ? "a 'true' schema (any value) is not supported"
                             : "a 'false' schema matches nothing");
    }
    if (!s.is_object()) return Fail(where, "a schema must be a JSON object");
    for (auto it = s.begin(); it != s.end(); ++it) {
      if (!Known(it.key())) {
        return Fail(where, absl::StrCat("'", it.key(), "' is not supported"));
      }
    }
    if (s.contains("$ref")) return CompileRef(s, where, depth);
    if (s.contains("additionalProperties")) {
      const Json& ap = s["additionalProperties"];
      if (!(ap.is_boolean() && !ap.get<bool>())) {
        return Fail(where,
                    "'additionalProperties' other than false is not "
                    "supported");
      }
    }
    if (s.contains("const")) return LiteralJson(s["const"]);
    if (s.contains("enum")) {
      const Json& e = s["enum"];
      if (!e.is_array() || e.empty()) {
        return Fail(where, "'enum' must be a non-empty array");
      }
      std::vector<std::string> alts;
      size_t total = 0;
      for (const Json& v : e) {
        alts.push_back(LiteralJson(v));
        total += alts.back().size() + 1;
        if (total > kMaxRegexBytes) return TooBig(where);
      }
      return absl::StrCat("(", absl::StrJoin(alts, "|"), ")");
    }
    if (s.contains("anyOf")) {
      const Json& a = s["anyOf"];
      if (!a.is_array() || a.empty()) {
        return Fail(where, "'anyOf' must be a non-empty array");
      }
      if (s.contains("type")) {
        return Fail(where, "'anyOf' next to 'type' is not supported");
      }
      std::vector<std::string> alts;
      size_t total = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        ASSIGN_OR_RETURN(std::string r,
                         Compile(a[i], absl::StrCat(where, "/anyOf/", i),
                                 depth + 1));
        alts.push_back(absl::StrCat("(", r, ")"));
        total += alts.back().size();
        if (total > kMaxRegexBytes) return TooBig(where);
      }
      return absl::StrCat("(", absl::StrJoin(alts, "|"), ")");
    }
    if (!s.contains("type")) {
      return Fail(where,
                  "a schema without 'type', 'enum', 'const' or 'anyOf' (any "
                  "value) is not supported");
    }
    const Json& t = s["type"];
    if (t.is_string()) return CompileType(s, t.get<std::string>(), where, depth);
    if (!t.is_array() || t.empty()) {
      return Fail(where, "'type' must be a string or a non-empty array");
    }
    std::vector<std::string> alts;
    size_t total = 0;
    for (const Json& one : t) {
      if (!one.is_string()) return Fail(where, "'type' entries must be strings");
      ASSIGN_OR_RETURN(std::string r,
                       CompileType(s, one.get<std::string>(), where, depth));
      alts.push_back(absl::StrCat("(", r, ")"));
      total += alts.back().size();
      if (total > kMaxRegexBytes) return TooBig(where);
    }
    return absl::StrCat("(", absl::StrJoin(alts, "|"), ")");
  }

  absl::StatusOr<ByteDfa> CheckPattern(absl::string_view pattern) {
    RegexLimits limits;
    limits.max_steps = pattern_steps_left_;
    int64_t steps = 0;
    absl::StatusOr<ByteDfa> dfa = ByteDfa::Compile(pattern, limits, &steps);
    if (!dfa.ok() && steps > limits.max_steps &&
        limits.max_steps < kPatternSteps) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the schema's patterns are too complex to check together (more "
          "than ", kPatternSteps, " steps of building their automata); use "
          "fewer or simpler patterns"));
    }
    pattern_steps_left_ = std::max<int64_t>(0, pattern_steps_left_ - steps);
    return dfa;
  }

  static bool Known(const std::string& k) {
    static const char* const kKeys[] = {
        "type",          "properties",       "required",
        "additionalProperties", "items",     "minItems",
        "maxItems",      "enum",             "const",
        "anyOf",         "minLength",        "maxLength",
        "minimum",       "maximum",          "exclusiveMinimum",
        "exclusiveMaximum", "format",        "title",
        "description",   "default",          "examples",
        "$schema",       "$id",              "$comment",
        "$ref",          "$defs",            "definitions",
        "pattern"};
    for (const char* key : kKeys) {
      if (k == key) return true;
    }
    return false;
  }

  // A "$ref" to a JSON pointer into this schema ("#/$defs/name"), inlined;
  // recursion cannot be a regular language.
  absl::StatusOr<std::string> CompileRef(const Json& s,
                                         const std::string& where, int depth) {
    const Json& ref = s["$ref"];
    if (!ref.is_string()) return Fail(where, "'$ref' must be a string");
    const std::string r = ref.get<std::string>();
    for (auto it = s.begin(); it != s.end(); ++it) {
      const std::string& k = it.key();
      if (k != "$ref" && k != "$defs" && k != "definitions" &&
          k != "title" && k != "description" && k != "$comment" &&
          k != "default" && k != "examples") {
        return Fail(where, absl::StrCat("'", k,
                                        "' next to '$ref' is not supported"));
      }
    }
    if (r.empty() || r[0] != '#') {
      return Fail(where, absl::StrCat("'$ref' \"", r,
                                      "\" to another document is not "
                                      "supported (only \"#/...\" pointers)"));
    }
    for (const std::string& open : ref_stack_) {
      if (open == r) {
        return Fail(where, absl::StrCat("recursive '$ref' \"", r,
                                        "\" is not supported"));
      }
    }
    // JSON pointer: "/"-separated, ~1 = '/', ~0 = '~'.
    const Json* target = &root_;
    size_t pos = 1;
    while (pos < r.size()) {
      if (r[pos] != '/') {
        return Fail(where, absl::StrCat("'$ref' \"", r,
                                        "\" is not a JSON pointer"));
      }
      const size_t next = std::min(r.find('/', pos + 1), r.size());
      std::string token = r.substr(pos + 1, next - pos - 1);
      std::string key;
      for (size_t i = 0; i < token.size(); ++i) {
        if (token[i] == '~' && i + 1 < token.size() &&
            (token[i + 1] == '0' || token[i + 1] == '1')) {
          key.push_back(token[i + 1] == '0' ? '~' : '/');
          ++i;
        } else {
          key.push_back(token[i]);
        }
      }
      if (target->is_object() && target->contains(key)) {
        target = &(*target)[key];
      } else if (target->is_array() && !key.empty() &&
                 key.find_first_not_of("0123456789") == std::string::npos &&
                 key.size() < 10 && std::stoul(key) < target->size()) {
        target = &(*target)[std::stoul(key)];
      } else {
        return Fail(where, absl::StrCat("'$ref' \"", r,
                                        "\" points to nothing in the schema"));
      }
      pos = next;
    }
    ref_stack_.push_back(r);
    absl::StatusOr<std::string> out =
        Compile(*target,
                absl::StrCat(where.empty() ? "/" : where, " ($ref ", r, ")"),
                depth + 1);
    ref_stack_.pop_back();
    return out;
  }

  static absl::Status Fail(const std::string& where, absl::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat("at ", where.empty() ? "/" : where, ": ", what));
  }

  // A non-negative integer keyword, or `def`.
  static absl::StatusOr<int64_t> Count(const Json& s, const char* key,
                                       int64_t def, const std::string& where) {
    if (!s.contains(key)) return def;
    const Json& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0) {
      return Fail(where, absl::StrCat("'", key,
                                      "' must be a non-negative integer"));
    }
    return v.get<int64_t>();
  }

  absl::StatusOr<std::string> CompileType(const Json& s,
                                          const std::string& type,
                                          const std::string& where,
                                          int depth) {
    if (type == "null") return std::string("null");
    if (type == "boolean") return std::string("(true|false)");
    if (type == "string") return CompileString(s, where);
    if (type == "integer") return CompileInteger(s, where);
    if (type == "number") {
      for (const char* k : {"minimum", "maximum", "exclusiveMinimum",
                            "exclusiveMaximum"}) {
        if (s.contains(k)) {
          return Fail(where, absl::StrCat("'", k,
                                          "' on type 'number' is not "
                                          "supported (it is on 'integer')"));
        }
      }
      return std::string(kNumber);
    }
    if (type == "array") return CompileArray(s, where, depth);
    if (type == "object") return CompileObject(s, where, depth);
    return Fail(where, absl::StrCat("unknown type '", type, "'"));
  }

  absl::StatusOr<std::string> CompileString(const Json& s,
                                            const std::string& where) {
    if (s.contains("format")) {
      const Json& f = s["format"];
      const std::string name = f.is_string() ? f.get<std::string>() : "";
      const char* body = nullptr;
      if (name == "date") {
        body = R"([0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01]))";
      } else if (name == "time") {
        body =
            R"(([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9]))";
      } else if (name == "date-time") {
        body =
            R"([0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9]))";
      } else if (name == "uuid") {
        body =
            "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
            "[0-9a-fA-F]{12}";
      } else {
        return Fail(where, absl::StrCat("'format' ", f.dump(),
                                        " is not supported (date, time, "
                                        "date-time and uuid are)"));
      }
      if (s.contains("minLength") || s.contains("maxLength") ||
          s.contains("pattern")) {
        return Fail(where, "'minLength'/'maxLength'/'pattern' next to 'format' is not "
                          "supported");
      }
      return absl::StrCat("\"", body, "\"");
    }
    if (s.contains("pattern")) {
      const Json& pj = s["pattern"];
      if (!pj.is_string()) return Fail(where, "'pattern' must be a string");
      if (s.contains("minLength") || s.contains("maxLength")) {
        return Fail(where, "'minLength'/'maxLength' next to 'pattern' is not "
                           "supported (bound the pattern itself)");
      }
      std::string pattern = pj.get<std::string>();
      // The whole string matches the pattern (which satisfies JSON Schema's
      // search semantics); anchors are implied.
      if (!pattern.empty() && pattern[0] == '^') pattern.erase(0, 1);
      if (!pattern.empty() && pattern.back() == '$') {
        size_t slashes = 0;
        for (size_t i = pattern.size() - 1; i > 0 && pattern[i - 1] == '\\';
             --i) {
          ++slashes;
        }
        if (slashes % 2 == 0) pattern.pop_back();
      }
      // Checked here so the error can say where; every check of the
      // schema draws from one budget, so many patterns (or one reached
      // through many $refs) cannot multiply the time.
      const std::string embedded = absl::StrCat("\"(?J:", pattern, ")\"");
      absl::StatusOr<ByteDfa> check = CheckPattern(pattern);
      if (check.ok()) check = CheckPattern(embedded);
      if (!check.ok()) {
        return Fail(where, absl::StrCat("'pattern': ", check.status().message()));
      }
      return embedded;
    }
    ASSIGN_OR_RETURN(int64_t min, Count(s, "minLength", 0, where));
    ASSIGN_OR_RETURN(int64_t max, Count(s, "maxLength", -1, where));
    if (max >= 0 && min > max) {
      return Fail(where, "'minLength' is greater than 'maxLength'");
    }
    if (min > 1000 || max > 1000) {
      return Fail(where, "'minLength'/'maxLength' above 1000 is not supported");
    }
    if (min == 0 && max < 0) return absl::StrCat("\"", kStrChar, "*\"");
    return absl::StrCat("\"", kStrChar, "{", min, ",",
                        max >= 0 ? absl::StrCat(max) : "", "}\"");
  }

  // Ceil/floor of a bound as an integer, clamped to the 16-digit range.
  static absl::StatusOr<int64_t> Bound(const Json& v, bool lower,
                                       bool exclusive,
                                       const std::string& where,
                                       const char* key) {
    if (!v.is_number()) {
      return Fail(where, absl::StrCat("'", key, "' must be a number"));
    }
    double d = v.get<double>();
    if (!std::isfinite(d)) {
      return Fail(where, absl::StrCat("'", key, "' must be finite"));
    }
    d = std::max(-1e17, std::min(1e17, d));
    double r;
    if (lower) {
      r = exclusive ? std::floor(d) + 1 : std::ceil(d);
    } else {
      r = exclusive ? std::ceil(d) - 1 : std::floor(d);
    }
    // |r| <= 1e17 + 1: exact enough as an int64, then clamped.
    const int64_t i = static_cast<int64_t>(r);
    return std::max(-kMaxInt, std::min(kMaxInt, i));
  }

  absl::StatusOr<std::string> CompileInteger(const Json& s,
                                             const std::string& where) {
    int64_t lo = -kMaxInt, hi = kMaxInt;
    if (s.contains("minimum")) {
      ASSIGN_OR_RETURN(int64_t b, Bound(s["minimum"], true, false, where,
                                        "minimum"));
      lo = std::max(lo, b);
    }
    if (s.contains("exclusiveMinimum")) {
      ASSIGN_OR_RETURN(int64_t b, Bound(s["exclusiveMinimum"], true, true,
                                        where, "exclusiveMinimum"));
      lo = std::max(lo, b);
    }
    if (s.contains("maximum")) {
      ASSIGN_OR_RETURN(int64_t b, Bound(s["maximum"], false, false, where,
                                        "maximum"));
      hi = std::min(hi, b);
    }
    if (s.contains("exclusiveMaximum")) {
      ASSIGN_OR_RETURN(int64_t b, Bound(s["exclusiveMaximum"], false, true,
                                        where, "exclusiveMaximum"));
      hi = std::min(hi, b);
    }
    if (lo > hi) return Fail(where, "the integer range is empty");
    if (lo == -kMaxInt && hi == kMaxInt) {
      return absl::StrCat("-?(0|[1-9][0-9]{0,", kMaxIntDigits - 1, "})");
    }
    return IntegerRange(lo, hi);
  }

  absl::StatusOr<std::string> CompileArray(const Json& s,
                                           const std::string& where,
                                           int depth) {
    if (!s.contains("items")) {
      return Fail(where, "an array without 'items' is not supported");
    }
    ASSIGN_OR_RETURN(std::string item,
                     Compile(s["items"], where + "/items", depth + 1));
    ASSIGN_OR_RETURN(int64_t min, Count(s, "minItems", 0, where));
    ASSIGN_OR_RETURN(int64_t max, Count(s, "maxItems", -1, where));
    if (max >= 0 && min > max) {
      return Fail(where, "'minItems' is greater than 'maxItems'");
    }
    if (min > 1000 || max > 1000) {
      return Fail(where, "'minItems'/'maxItems' above 1000 is not supported");
    }
    if (max == 0) return std::string(R"(\[\])");
    const std::string rest_max = max >= 0 ? absl::StrCat(max - 1) : "";
    const std::string more = absl::StrCat("(,", kWs, "(", item, ")){",
                                          min > 0 ? min - 1 : 0, ",",
                                          rest_max, "}");
    const std::string list = absl::StrCat("(", item, ")", more);
    if (min == 0) return absl::StrCat(R"(\[()", list, R"()?\])");
    return absl::StrCat(R"(\[)", list, R"(\])");
  }

  absl::StatusOr<std::string> CompileObject(const Json& s,
                                            const std::string& where,
                                            int depth) {
    struct Prop {
      std::string regex;  // "key":value
      bool required;
    };
    std::vector<Prop> props;
    // Sets: a schema may list thousands of properties, and ordered_json
    // finds a key by a linear search.
    absl::flat_hash_set<std::string> required;
    if (s.contains("required")) {
      const Json& r = s["required"];
      if (!r.is_array()) return Fail(where, "'required' must be an array");
      for (const Json& k : r) {
        if (!k.is_string()) {
          return Fail(where, "'required' entries must be strings");
        }
        required.insert(k.get<std::string>());
      }
    }
    const Json empty = Json::object();
    const Json& p = s.contains("properties") ? s["properties"] : empty;
    if (!p.is_object()) return Fail(where, "'properties' must be an object");
    absl::flat_hash_set<std::string> names;
    for (auto it = p.begin(); it != p.end(); ++it) names.insert(it.key());
    for (const Json& k : s.contains("required") ? s["required"] : empty) {
      if (!names.contains(k.get<std::string>())) {
        return Fail(where, absl::StrCat("required property '",
                                        k.get<std::string>(),
                                        "' is not in 'properties' (no other "
                                        "keys are allowed)"));
      }
    }
    // Every property's regex appears in the result at least once.
    size_t props_bytes = 0;
    for (auto it = p.begin(); it != p.end(); ++it) {
      ASSIGN_OR_RETURN(
          std::string value,
          Compile(it.value(), absl::StrCat(where, "/properties/", it.key()),
                  depth + 1));
      props.push_back({absl::StrCat(LiteralJson(Json(it.key())), ":", kWs, "(",
                                    value, ")"),
                       required.contains(it.key())});
      props_bytes += props.back().regex.size();
      if (props_bytes > kMaxRegexBytes) return TooBig(where);
    }
    // After the first emitted property each one is ",p" (optional ones
    // "(,p)?"); the first emitted is any property up to the first required
    // one, the optional ones before it skipped. The result repeats the
    // tail after each candidate first property, so its size can grow with
    // the square of the property count: it is measured before it is built.
    const size_t n = props.size();
    const size_t sep = std::string(",").size() + std::string(kWs).size();
    std::vector<size_t> tail_bytes(n + 1, 0);  // of properties i.. after a first
    for (size_t i = n; i-- > 0;) {
      tail_bytes[i] = tail_bytes[i + 1] + sep + props[i].regex.size() +
                      (props[i].required ? 0 : 3);  // "(" ")?"
    }
    size_t firsts_end = 0;  // firsts are properties [0, firsts_end)
    size_t total = 0;
    bool all_optional = true;
    for (size_t j = 0; j < n; ++j) {
      total += props[j].regex.size() + tail_bytes[j + 1] + 1;  // and "|"
      if (total > kMaxRegexBytes) return TooBig(where);
      firsts_end = j + 1;
      if (props[j].required) {
        all_optional = false;
        break;
      }
    }
    // Every tail is a suffix of the tail after property 0: built once,
    // each first property copies its suffix.
    std::string tail0;
    std::vector<size_t> starts(n + 1, 0);  // tail(i) = tail0.substr(starts[i])
    for (size_t i = 1; i < n; ++i) {
      starts[i] = tail0.size();
      if (props[i].required) {
        absl::StrAppend(&tail0, ",", kWs, props[i].regex);
      } else {
        absl::StrAppend(&tail0, "(,", kWs, props[i].regex, ")?");
      }
    }
    starts[n] = tail0.size();
    std::vector<std::string> firsts;
    for (size_t j = 0; j < firsts_end; ++j) {
      firsts.push_back(absl::StrCat(
          props[j].regex, absl::string_view(tail0).substr(starts[j + 1])));
    }
    std::string body;
    if (!firsts.empty()) {
      body = absl::StrCat("(", absl::StrJoin(firsts, "|"), ")",
                          all_optional ? "?" : "");
    }
    if (body.size() > kMaxRegexBytes) return TooBig(where);
    return absl::StrCat(R"(\{)", body, R"(\})");
  }

  static absl::Status TooBig(const std::string& where) {
    return Fail(where, "the schema is too large to compile");
  }

  const Json& root_;
  std::vector<std::string> ref_stack_;  // $refs being inlined
  int64_t pattern_steps_left_ = kPatternSteps;
};

}  // namespace

absl::StatusOr<std::string> CompileJsonSchema(absl::string_view json) {
  if (JsonDepth(json) > kMaxJsonDepth) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the schema nests arrays and objects deeper than ", kMaxJsonDepth,
        " levels"));
  }
  Json schema = Json::parse(json.begin(), json.end(), nullptr,
                            /*allow_exceptions=*/false);
  if (schema.is_discarded()) {
    return absl::InvalidArgumentError("the schema is not valid JSON");
  }
  Compiler c(schema);
  ASSIGN_OR_RETURN(std::string regex, c.Compile(schema, "", 0));
  if (regex.size() > kMaxRegexBytes) {
    return absl::InvalidArgumentError("the schema is too large to compile");
  }
  return regex;
}

}  // namespace inferd
