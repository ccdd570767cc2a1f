#include "runtime/chat/jinja_value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace inferd::jinja {

const Value* ValueDict::Find(const Value& key) const {
  for (const auto& [k, v] : entries) {
    if (Equals(k, key)) return &v;
  }
  return nullptr;
}

const Value* ValueDict::Find(absl::string_view key) const {
  for (const auto& [k, v] : entries) {
    if (k.is_string() && k.str() == key) return &v;
  }
  return nullptr;
}

void ValueDict::Set(Value key, Value value) {
  for (auto& [k, v] : entries) {
    if (Equals(k, key)) {
      v = std::move(value);
      return;
    }
  }
  entries.emplace_back(std::move(key), std::move(value));
}

Value Value::String(std::string s) {
  Value v;
  v.type_ = Type::kString;
  v.s_ = std::make_shared<const std::string>(std::move(s));
  return v;
}

Value Value::List(std::vector<Value> items, bool is_tuple) {
  Value v;
  v.type_ = Type::kList;
  auto list = std::make_shared<ValueList>();
  list->items = std::move(items);
  list->is_tuple = is_tuple;
  for (const Value& item : list->items) {
    list->depth = std::max(list->depth, item.Depth() + 1);
  }
  v.list_ = std::move(list);
  return v;
}

Value Value::Dict(std::shared_ptr<ValueDict> dict) {
  dict->depth = 1;
  for (const auto& [k, item] : dict->entries) {
    dict->depth = std::max(dict->depth, item.Depth() + 1);
  }
  Value v;
  v.type_ = Type::kDict;
  v.dict_ = std::move(dict);
  return v;
}

Value Value::Namespace(std::shared_ptr<ValueDict> attrs) {
  Value v;
  v.type_ = Type::kNamespace;
  v.dict_ = std::move(attrs);
  return v;
}

Value Value::Function(std::shared_ptr<Callable> fn) {
  Value v;
  v.type_ = Type::kCallable;
  v.fn_ = std::move(fn);
  return v;
}

uint32_t DecodeUtf8(absl::string_view s, size_t* i) {
  unsigned char c = static_cast<unsigned char>(s[*i]);
  int n = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : -1;
  if (n <= 0 || *i + n >= s.size()) {
    ++*i;
    return c;
  }
  uint32_t cp = c & (0x3f >> n);
  for (int k = 1; k <= n; ++k) {
    unsigned char cc = static_cast<unsigned char>(s[*i + k]);
    if ((cc & 0xc0) != 0x80) {
      ++*i;
      return c;
    }
    cp = (cp << 6) | (cc & 0x3f);
  }
  *i += n + 1;
  return cp;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xc0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xe0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else {
    out->push_back(static_cast<char>(0xf0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
}

namespace {

template <typename Json>
absl::StatusOr<Value> FromJsonImpl(const Json& j, int depth) {
  if (depth > Value::kMaxDepth) {
    return absl::InvalidArgumentError("chat template context nested too deeply");
  }
  switch (j.type()) {
    case Json::value_t::null:
      return Value::None();
    case Json::value_t::boolean:
      return Value::Bool(j.template get<bool>());
    case Json::value_t::number_integer:
      return Value::Int(j.template get<int64_t>());
    case Json::value_t::number_unsigned: {
      uint64_t u = j.template get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) {
        return Value::Float(static_cast<double>(u));
      }
      return Value::Int(static_cast<int64_t>(u));
    }
    case Json::value_t::number_float:
      return Value::Float(j.template get<double>());
    case Json::value_t::string:
      return Value::String(j.template get<std::string>());
    case Json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) {
        auto v = FromJsonImpl(e, depth + 1);
        if (!v.ok()) return v.status();
        items.push_back(*std::move(v));
      }
      return Value::List(std::move(items));
    }
    case Json::value_t::object: {
      auto dict = std::make_shared<ValueDict>();
      dict->entries.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) {
        auto v = FromJsonImpl(it.value(), depth + 1);
        if (!v.ok()) return v.status();
        dict->entries.emplace_back(Value::String(it.key()), *std::move(v));
      }
      return Value::Dict(std::move(dict));
    }
    default:
      return Value::None();  // Binary and discarded values.
  }
}


bool IsPyPrintable(uint32_t cp) {
  if (cp < 0x20 || cp == 0x7f) return false;
  if (cp >= 0x80 && cp <= 0xa0) return false;
  if (cp == 0xad || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200f) ||
      (cp >= 0x2028 && cp <= 0x202f) || (cp >= 0x205f && cp <= 0x2064) ||
      cp == 0x3000 || cp == 0xfeff || (cp >= 0xd800 && cp <= 0xdfff)) {
    return false;
  }
  return true;
}


}  // namespace

absl::StatusOr<Value> Value::FromJson(const nlohmann::ordered_json& j) {
  return FromJsonImpl(j, 1);
}
absl::StatusOr<Value> Value::FromJson(const nlohmann::json& j) {
  return FromJsonImpl(j, 1);
}

int64_t Utf8Length(absl::string_view s) {
  int64_t n = 0;
  for (size_t i = 0; i < s.size();) {
    DecodeUtf8(s, &i);
    ++n;
  }
  return n;
}

std::vector<std::string> Utf8Chars(absl::string_view s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    size_t start = i;
    DecodeUtf8(s, &i);
    out.emplace_back(s.substr(start, i - start));
  }
  return out;
}

bool IsPySpace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20) ||
         cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

bool Value::Truthy() const {
  switch (type_) {
    case Type::kUndefined:
    case Type::kNone:
      return false;
    case Type::kBool:
    case Type::kInt:
      return i_ != 0;
    case Type::kFloat:
      return f_ != 0;
    case Type::kString:
      return !s_->empty();
    case Type::kList:
      return !list_->items.empty();
    case Type::kDict:
      return !dict_->entries.empty();
    default:
      return true;
  }
}

int64_t Value::Length() const {
  switch (type_) {
    case Type::kUndefined:
      return 0;
    case Type::kString:
      return Utf8Length(*s_);
    case Type::kList:
      return static_cast<int64_t>(list_->items.size());
    case Type::kDict:
      return static_cast<int64_t>(dict_->entries.size());
    default:
      return -1;
  }
}

std::string FormatFloat(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f < 0 ? "-inf" : "inf";
  if (f == 0) return std::signbit(f) ? "-0.0" : "0.0";
  // Shortest digit string that round-trips, like Python's repr().
  char buf[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*e", precision - 1, f);
    if (std::strtod(buf, nullptr) == f) break;
  }
  std::string s(buf);
  bool negative = s[0] == '-';
  if (negative) s.erase(0, 1);
  size_t e = s.find('e');
  int exponent = std::atoi(s.c_str() + e + 1);
  std::string digits;
  for (size_t i = 0; i < e; ++i) {
    if (s[i] != '.') digits.push_back(s[i]);
  }
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  int decpt = exponent + 1;
  std::string out = negative ? "-" : "";
  if (decpt <= -4 || decpt > 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) absl::StrAppend(&out, ".", digits.substr(1));
    absl::StrAppend(&out, absl::StrFormat("e%c%02d", exponent < 0 ? '-' : '+',
                                          std::abs(exponent)));
  } else if (decpt <= 0) {
    absl::StrAppend(&out, "0.", std::string(-decpt, '0'), digits);
  } else if (decpt >= static_cast<int>(digits.size())) {
    absl::StrAppend(&out, digits, std::string(decpt - digits.size(), '0'), ".0");
  } else {
    absl::StrAppend(&out, digits.substr(0, decpt), ".", digits.substr(decpt));
  }
  return out;
}

std::string ReprString(absl::string_view s) {
  bool has_single = s.find('\'') != absl::string_view::npos;
  bool has_double = s.find('"') != absl::string_view::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (size_t i = 0; i < s.size();) {
    size_t start = i;
    uint32_t cp = DecodeUtf8(s, &i);
    if (cp == static_cast<uint32_t>(quote) || cp == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(cp));
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (!IsPyPrintable(cp)) {
      if (cp < 0x100) {
        absl::StrAppend(&out, absl::StrFormat("\\x%02x", cp));
      } else if (cp < 0x10000) {
        absl::StrAppend(&out, absl::StrFormat("\\u%04x", cp));
      } else {
        absl::StrAppend(&out, absl::StrFormat("\\U%08x", cp));
      }
    } else {
      out.append(s.data() + start, i - start);
    }
  }
  out.push_back(quote);
  return out;
}

int Value::Depth() const {
  if (type_ == Type::kList) return list_->depth;
  if (type_ == Type::kDict || type_ == Type::kNamespace) return dict_->depth;
  return 1;
}

void Value::ReprTo(std::string* out, size_t limit) const {
  if (out->size() > limit) return;
  switch (type_) {
    case Type::kUndefined:
      return;
    case Type::kNone:
      *out += "None";
      return;
    case Type::kBool:
      *out += i_ ? "True" : "False";
      return;
    case Type::kInt:
      absl::StrAppend(out, i_);
      return;
    case Type::kFloat:
      *out += FormatFloat(f_);
      return;
    case Type::kString:
      if (s_->size() > limit) {
        out->append(limit + 1, '.');
        return;
      }
      *out += ReprString(*s_);
      return;
    case Type::kList: {
      *out += list_->is_tuple ? "(" : "[";
      for (size_t k = 0; k < list_->items.size() && out->size() <= limit; ++k) {
        if (k > 0) *out += ", ";
        list_->items[k].ReprTo(out, limit);
      }
      if (list_->is_tuple && list_->items.size() == 1) *out += ",";
      *out += list_->is_tuple ? ")" : "]";
      return;
    }
    case Type::kDict:
    case Type::kNamespace: {
      *out += type_ == Type::kNamespace ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [k, v] : dict_->entries) {
        if (out->size() > limit) break;
        if (!first) *out += ", ";
        first = false;
        k.ReprTo(out, limit);
        *out += ": ";
        v.ReprTo(out, limit);
      }
      *out += type_ == Type::kNamespace ? "}>" : "}";
      return;
    }
    case Type::kCallable:
      absl::StrAppend(out, "<function ", fn_->name, ">");
      return;
  }
}

void Value::StrTo(std::string* out, size_t limit) const {
  if (type_ == Type::kString) {
    if (out->size() + s_->size() > limit) {
      out->append(limit + 1 - std::min(limit + 1, out->size()), '.');
      return;
    }
    *out += *s_;
    return;
  }
  ReprTo(out, limit);
}

std::string Value::Repr() const {
  std::string out;
  ReprTo(&out, SIZE_MAX - 1);
  return out;
}

std::string Value::Str() const {
  if (type_ == Type::kString) return *s_;
  return Repr();
}

bool Equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.AsDouble() == b.AsDouble();
    return a.int_value() == b.int_value();
  }
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case Value::Type::kUndefined:
    case Value::Type::kNone:
      return true;
    case Value::Type::kString:
      return a.str() == b.str();
    case Value::Type::kList: {
      if (a.is_tuple() != b.is_tuple() || a.items().size() != b.items().size()) {
        return false;
      }
      for (size_t i = 0; i < a.items().size(); ++i) {
        if (!Equals(a.items()[i], b.items()[i])) return false;
      }
      return true;
    }
    case Value::Type::kDict: {
      if (a.dict().entries.size() != b.dict().entries.size()) return false;
      for (const auto& [k, v] : a.dict().entries) {
        const Value* other = b.dict().Find(k);
        if (other == nullptr || !Equals(v, *other)) return false;
      }
      return true;
    }
    case Value::Type::kNamespace:
      return a.mutable_namespace() == b.mutable_namespace();
    case Value::Type::kCallable:
      return a.fn() == b.fn();
    default:
      return false;
  }
}

const char* PyTypeName(const Value& v) {
  switch (v.type()) {
    case Value::Type::kUndefined: return "Undefined";
    case Value::Type::kNone: return "NoneType";
    case Value::Type::kBool: return "bool";
    case Value::Type::kInt: return "int";
    case Value::Type::kFloat: return "float";
    case Value::Type::kString: return "str";
    case Value::Type::kList: return v.is_tuple() ? "tuple" : "list";
    case Value::Type::kDict: return "dict";
    case Value::Type::kNamespace: return "Namespace";
    case Value::Type::kCallable: return "function";
  }
  return "object";
}

absl::StatusOr<bool> Less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.AsDouble() < b.AsDouble();
    return a.int_value() < b.int_value();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    const auto& x = a.items();
    const auto& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (Equals(x[i], y[i])) continue;
      return Less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("'<' not supported between instances of '", PyTypeName(a),
                   "' and '", PyTypeName(b), "'"));
}

namespace {

void JsonString(absl::string_view s, bool ensure_ascii, std::string* out) {
  out->push_back('"');
  for (size_t i = 0; i < s.size();) {
    size_t start = i;
    uint32_t cp = DecodeUtf8(s, &i);
    switch (cp) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      case '\b': *out += "\\b"; break;
      case '\f': *out += "\\f"; break;
      default:
        if (cp < 0x20 || (ensure_ascii && cp >= 0x7f)) {
          if (cp >= 0x10000) {
            uint32_t v = cp - 0x10000;
            absl::StrAppend(out, absl::StrFormat("\\u%04x\\u%04x",
                                                 0xd800 + (v >> 10),
                                                 0xdc00 + (v & 0x3ff)));
          } else {
            absl::StrAppend(out, absl::StrFormat("\\u%04x", cp));
          }
        } else {
          out->append(s.data() + start, i - start);
        }
    }
  }
  out->push_back('"');
}

std::string JsonFloat(double f) {
  if (std::isnan(f)) return "NaN";
  if (std::isinf(f)) return f < 0 ? "-Infinity" : "Infinity";
  return FormatFloat(f);
}

absl::Status JsonDump(const Value& v, const JsonDumpOptions& o, int level,
                      std::string* out) {
  if (level > 200) {
    return absl::InvalidArgumentError("tojson: value nested too deeply");
  }
  if (out->size() > o.max_bytes) {
    return absl::InvalidArgumentError("tojson: output too large");
  }
  std::string item_sep = o.custom_item_separator ? o.item_separator
                         : o.has_indent         ? ","
                                                : ", ";
  auto newline = [&](int lvl) {
    if (!o.has_indent) return;
    out->push_back('\n');
    for (int i = 0; i < lvl; ++i) out->append(o.indent);
  };
  switch (v.type()) {
    case Value::Type::kNone:
      *out += "null";
      return absl::OkStatus();
    case Value::Type::kBool:
      *out += v.bool_value() ? "true" : "false";
      return absl::OkStatus();
    case Value::Type::kInt:
      absl::StrAppend(out, v.int_value());
      return absl::OkStatus();
    case Value::Type::kFloat:
      *out += JsonFloat(v.AsDouble());
      return absl::OkStatus();
    case Value::Type::kString:
      JsonString(v.str(), o.ensure_ascii, out);
      return absl::OkStatus();
    case Value::Type::kList: {
      if (v.items().empty()) {
        *out += "[]";
        return absl::OkStatus();
      }
      out->push_back('[');
      for (size_t i = 0; i < v.items().size(); ++i) {
        if (i > 0) *out += item_sep;
        newline(level + 1);
        if (auto s = JsonDump(v.items()[i], o, level + 1, out); !s.ok()) {
          return s;
        }
      }
      newline(level);
      out->push_back(']');
      return absl::OkStatus();
    }
    case Value::Type::kDict: {
      if (v.dict().entries.empty()) {
        *out += "{}";
        return absl::OkStatus();
      }
      std::vector<std::pair<std::string, const Value*>> items;
      for (const auto& [k, val] : v.dict().entries) {
        std::string key;
        if (k.is_string()) {
          key = k.str();
        } else if (k.is_bool()) {
          key = k.bool_value() ? "true" : "false";
        } else if (k.is_int()) {
          key = absl::StrCat(k.int_value());
        } else if (k.is_float()) {
          key = JsonFloat(k.AsDouble());
        } else if (k.is_none()) {
          key = "null";
        } else {
          return absl::InvalidArgumentError(
              "tojson: keys must be str, int, float, bool or None");
        }
        items.emplace_back(std::move(key), &val);
      }
      if (o.sort_keys) {
        std::stable_sort(items.begin(), items.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
      }
      out->push_back('{');
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) *out += item_sep;
        newline(level + 1);
        JsonString(items[i].first, o.ensure_ascii, out);
        *out += o.key_separator;
        if (auto s = JsonDump(*items[i].second, o, level + 1, out); !s.ok()) {
          return s;
        }
      }
      newline(level);
      out->push_back('}');
      return absl::OkStatus();
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "Object of type ", PyTypeName(v), " is not JSON serializable"));
  }
}

}  // namespace

absl::StatusOr<std::string> JsonDumps(const Value& v,
                                      const JsonDumpOptions& options) {
  std::string out;
  if (auto s = JsonDump(v, options, 0, &out); !s.ok()) return s;
  if (out.size() > options.max_bytes) {
    return absl::InvalidArgumentError("tojson: output too large");
  }
  return out;
}

}  // namespace inferd::jinja
