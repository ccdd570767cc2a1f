// Values of the Jinja-subset interpreter (runtime/chat/jinja.h): Python-like
// dynamic values with Python truthiness, str()/repr() and json.dumps output.
// Lists and dicts are immutable once built (the sandbox forbids mutating
// them) and shared by reference; namespaces are mutable and shared, like
// Python objects. Not thread-safe: a Value graph belongs to one render.
#ifndef INFERD_RUNTIME_CHAT_JINJA_VALUE_H_
#define INFERD_RUNTIME_CHAT_JINJA_VALUE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace inferd::jinja {

class Value;

struct ValueList {
  std::vector<Value> items;
  bool is_tuple = false;  // Only changes repr(): (1, 2) instead of [1, 2].
  int depth = 1;          // Nesting depth, bounded by the renderer.
};

// Insertion-ordered mapping; lookups are linear (chat data is small).
struct ValueDict {
  std::vector<std::pair<Value, Value>> entries;
  int depth = 1;
  const Value* Find(const Value& key) const;
  const Value* Find(absl::string_view key) const;
  void Set(Value key, Value value);
};

// A builtin function or a template macro; the renderer interprets it.
struct Callable {
  std::string name;
  int builtin = -1;             // Index of a builtin, or -1 for a macro.
  const void* macro = nullptr;  // The macro's AST node, owned by the template.
};

class Value {
 public:
  enum class Type {
    kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict,
    kNamespace, kCallable
  };

  Value() = default;  // Undefined.
  static Value None() { Value v; v.type_ = Type::kNone; return v; }
  static Value Bool(bool b) { Value v; v.type_ = Type::kBool; v.i_ = b; return v; }
  static Value Int(int64_t i) { Value v; v.type_ = Type::kInt; v.i_ = i; return v; }
  static Value Float(double f) { Value v; v.type_ = Type::kFloat; v.f_ = f; return v; }
  static Value String(std::string s);
  static Value List(std::vector<Value> items, bool is_tuple = false);
  static Value Dict(std::shared_ptr<ValueDict> dict);
  static Value Namespace(std::shared_ptr<ValueDict> attrs);
  static Value Function(std::shared_ptr<Callable> fn);
  // JSON -> Value; object key order is kept as the json type iterates it.
  // Fails on nesting deeper than kMaxDepth.
  static absl::StatusOr<Value> FromJson(const nlohmann::ordered_json& j);
  static absl::StatusOr<Value> FromJson(const nlohmann::json& j);
  static constexpr int kMaxDepth = 100;

  Type type() const { return type_; }
  bool is_undefined() const { return type_ == Type::kUndefined; }
  bool is_none() const { return type_ == Type::kNone; }
  bool is_bool() const { return type_ == Type::kBool; }
  bool is_int() const { return type_ == Type::kInt; }
  bool is_float() const { return type_ == Type::kFloat; }
  // Python numbers: bool counts as an int.
  bool is_number() const {
    return type_ == Type::kBool || type_ == Type::kInt || type_ == Type::kFloat;
  }
  bool is_string() const { return type_ == Type::kString; }
  bool is_list() const { return type_ == Type::kList; }
  bool is_dict() const { return type_ == Type::kDict; }
  bool is_namespace() const { return type_ == Type::kNamespace; }
  bool is_callable() const { return type_ == Type::kCallable; }

  bool bool_value() const { return i_ != 0; }
  int64_t int_value() const { return i_; }  // Also for bool.
  double AsDouble() const { return type_ == Type::kFloat ? f_ : static_cast<double>(i_); }
  const std::string& str() const { return *s_; }
  const std::vector<Value>& items() const { return list_->items; }
  bool is_tuple() const { return list_->is_tuple; }
  const ValueDict& dict() const { return *dict_; }
  ValueDict* mutable_namespace() const { return dict_.get(); }
  const std::shared_ptr<Callable>& fn() const { return fn_; }

  bool Truthy() const;
  // Python str(): strings as they are, everything else as repr().
  std::string Str() const;
  std::string Repr() const;
  // Appends repr() but gives up (leaving a partial text) once out is longer
  // than limit bytes; callers check the size.
  void ReprTo(std::string* out, size_t limit) const;
  void StrTo(std::string* out, size_t limit) const;
  // Nesting depth of containers (1 for scalars and flat containers).
  int Depth() const;
  // len(); -1 when the value has no length.
  int64_t Length() const;

 private:
  Type type_ = Type::kUndefined;
  int64_t i_ = 0;
  double f_ = 0;
  std::shared_ptr<const std::string> s_;
  std::shared_ptr<const ValueList> list_;
  std::shared_ptr<ValueDict> dict_;
  std::shared_ptr<Callable> fn_;
};

// Python ==.
bool Equals(const Value& a, const Value& b);
// Python <; an error for unorderable types.
absl::StatusOr<bool> Less(const Value& a, const Value& b);

// Python repr() of a float ("1.0", "1e+16", "0.30000000000000004", "inf").
std::string FormatFloat(double f);
// Python repr() of a string.
std::string ReprString(absl::string_view s);

struct JsonDumpOptions {
  std::string indent;        // Used when has_indent.
  bool has_indent = false;
  std::string item_separator;  // Defaults follow json.dumps.
  std::string key_separator = ": ";
  bool custom_item_separator = false;
  bool sort_keys = false;
  bool ensure_ascii = false;
  size_t max_bytes = SIZE_MAX;  // Fails when the text would be longer.
};
// Python json.dumps(value, ...); an error for undefined, callables and
// namespaces (not JSON serializable).
absl::StatusOr<std::string> JsonDumps(const Value& v,
                                      const JsonDumpOptions& options);

// Number of Unicode code points in UTF-8 text (Python len() of a str).
int64_t Utf8Length(absl::string_view s);
// Splits UTF-8 text into code points (each a std::string).
std::vector<std::string> Utf8Chars(absl::string_view s);
// Decodes the code point at s[*i] and advances *i; a byte that is not valid
// UTF-8 decodes as itself.
uint32_t DecodeUtf8(absl::string_view s, size_t* i);
void AppendUtf8(uint32_t cp, std::string* out);
// Python's name of a value's type ("str", "NoneType", ...), for messages.
const char* PyTypeName(const Value& v);
// Python str.isspace() for one code point.
bool IsPySpace(uint32_t cp);

}  // namespace inferd::jinja

#endif  // INFERD_RUNTIME_CHAT_JINJA_VALUE_H_
