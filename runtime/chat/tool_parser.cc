#include "runtime/chat/tool_parser.h"

#include <algorithm>
#include <map>
#include <random>
#include <utility>

#include "absl/base/call_once.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "runtime/common/registry.h"

namespace inferd {

void ParsedDelta::Append(ParsedDelta other) {
  content += other.content;
  reasoning += other.reasoning;
  for (ToolCallDelta& d : other.tool_calls) tool_calls.push_back(std::move(d));
}

std::vector<ToolCall> JoinToolCalls(const std::vector<ToolCallDelta>& deltas) {
  std::map<int, ToolCall> by_index;
  for (const ToolCallDelta& d : deltas) {
    ToolCall& c = by_index[d.index];
    if (!d.id.empty()) c.id = d.id;
    if (!d.name.empty()) c.name = d.name;
    c.arguments += d.arguments;
  }
  std::vector<ToolCall> out;
  for (auto& [i, c] : by_index) out.push_back(std::move(c));
  return out;
}

namespace {

std::string RandomAlnum(size_t n) {
  static constexpr char kChars[] =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<size_t> pick(0, sizeof(kChars) - 2);
  std::string s(n, 'x');
  for (char& c : s) c = kChars[pick(rng)];
  return s;
}

bool IsWs(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// The longest proper suffix of `text` that is a prefix of `marker`: text
// that must wait for the next piece before it can be called content.
size_t PartialSuffix(absl::string_view text, absl::string_view marker) {
  const size_t max = std::min(text.size(), marker.size() - 1);
  for (size_t n = max; n > 0; --n) {
    if (absl::StartsWith(marker, text.substr(text.size() - n))) return n;
  }
  return 0;
}

// One JSON value scanned byte by byte: where it ends.
class ValueScanner {
 public:
  enum class Step { kIn, kLast, kAfter, kError };
  Step Feed(char c) {
    if (!started_) {
      started_ = true;
      if (c == '{' || c == '[') {
        depth_ = 1;
        return Step::kIn;
      }
      if (c == '"') {
        in_string_ = true;
        string_value_ = true;
        return Step::kIn;
      }
      if (c == '}' || c == ']' || c == ',' || c == ':') return Step::kError;
      scalar_ = true;
      return Step::kIn;
    }
    if (in_string_) {
      if (escape_) {
        escape_ = false;
      } else if (c == '\\') {
        escape_ = true;
      } else if (c == '"') {
        in_string_ = false;
        if (string_value_) return Step::kLast;
      }
      return Step::kIn;
    }
    if (scalar_) {
      if (c == ',' || c == '}' || c == ']' || IsWs(c)) return Step::kAfter;
      return Step::kIn;
    }
    if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      ++depth_;
    } else if (c == '}' || c == ']') {
      if (--depth_ == 0) return Step::kLast;
    }
    return Step::kIn;
  }
  bool string_value() const { return string_value_; }
  bool scalar() const { return scalar_; }

 private:
  bool started_ = false;
  bool in_string_ = false;
  bool escape_ = false;
  bool string_value_ = false;
  bool scalar_ = false;
  int depth_ = 0;
};

#define RETURN_IF_FAIL(expr) \
  if (!(expr)) return Fail()

// One {"name": ..., "arguments"|"parameters": ...} object, byte by byte.
// The name is known once its string closes; argument text streams as it
// comes once the name is known (before that it is kept).
class CallScanner {
 public:
  enum class Status { kMore, kDone, kError };

  // Consumes text from *pos; stops after the closing brace or an error.
  Status Scan(absl::string_view text, size_t* pos) {
    while (*pos < text.size()) {
      const char c = text[*pos];
      switch (state_) {
        case State::kOpen:
          ++*pos;
          if (IsWs(c)) break;
          if (c != '{') return Fail();
          state_ = State::kKeyOrClose;
          break;
        case State::kKeyOrClose:
        case State::kKey:
          ++*pos;
          if (IsWs(c)) break;
          if (c == '}' && state_ == State::kKeyOrClose) return Close();
          if (c != '"') return Fail();
          raw_ = "\"";
          state_ = State::kKeyText;
          value_ = ValueScanner();
          value_.Feed('"');
          break;
        case State::kKeyText: {
          ++*pos;
          raw_ += c;
          if (value_.Feed(c) == ValueScanner::Step::kLast) {
            auto key = nlohmann::json::parse(raw_, nullptr, false);
            if (!key.is_string()) return Fail();
            key_ = key.get<std::string>();
            state_ = State::kColon;
          }
          break;
        }
        case State::kColon:
          ++*pos;
          if (IsWs(c)) break;
          if (c != ':') return Fail();
          state_ = State::kValueStart;
          break;
        case State::kValueStart:
          if (IsWs(c)) {
            ++*pos;
            break;
          }
          value_ = ValueScanner();
          raw_.clear();
          kind_ = key_ == "name"                                ? Kind::kName
                  : key_ == "arguments" || key_ == "parameters" ? Kind::kArgs
                                                                : Kind::kSkip;
          if (kind_ == Kind::kArgs && saw_args_) kind_ = Kind::kSkip;
          state_ = State::kValue;
          break;
        case State::kValue: {
          const ValueScanner::Step step = value_.Feed(c);
          if (step == ValueScanner::Step::kError) return Fail();
          if (step == ValueScanner::Step::kAfter) {
            RETURN_IF_FAIL(EndValue());
            state_ = State::kCommaOrClose;
            break;  // c is looked at again
          }
          ++*pos;
          raw_ += c;
          if (kind_ == Kind::kArgs && !value_.string_value() &&
              !value_.scalar()) {
            args_ += c;
          }
          if (step == ValueScanner::Step::kLast) {
            RETURN_IF_FAIL(EndValue());
            state_ = State::kCommaOrClose;
          }
          break;
        }
        case State::kCommaOrClose:
          ++*pos;
          if (IsWs(c)) break;
          if (c == ',') {
            state_ = State::kKey;
            break;
          }
          if (c == '}') return Close();
          return Fail();
        case State::kDone:
          return Status::kDone;
        case State::kError:
          return Status::kError;
      }
    }
    return state_ == State::kError ? Status::kError : Status::kMore;
  }

  bool has_name() const { return has_name_; }
  const std::string& name() const { return name_; }
  // Argument text so far, emptied (only once the name is known).
  std::string TakeArgs() {
    if (!has_name_) return "";
    return std::exchange(args_, "");
  }
  // At the end of the text, inside the object: whether a call came of it.
  bool done() const { return state_ == State::kDone; }

 private:
  enum class State {
    kOpen,
    kKeyOrClose,
    kKey,
    kKeyText,
    kColon,
    kValueStart,
    kValue,
    kCommaOrClose,
    kDone,
    kError
  };
  enum class Kind { kName, kArgs, kSkip };

  Status Fail() {
    state_ = State::kError;
    return Status::kError;
  }
  Status Close() {
    if (!has_name_) return Fail();
    if (!saw_args_) args_ += "{}";
    state_ = State::kDone;
    return Status::kDone;
  }
  bool EndValue() {
    if (kind_ == Kind::kName) {
      if (!value_.string_value() || has_name_) return false;
      auto v = nlohmann::json::parse(raw_, nullptr, false);
      if (!v.is_string() || v.get<std::string>().empty()) return false;
      name_ = v.get<std::string>();
      has_name_ = true;
    } else if (kind_ == Kind::kArgs) {
      saw_args_ = true;
      if (value_.string_value()) {
        // Arguments given as a JSON string: its text is the arguments.
        auto v = nlohmann::json::parse(raw_, nullptr, false);
        if (!v.is_string()) return false;
        args_ += v.get<std::string>();
      } else if (value_.scalar()) {
        if (raw_ != "null") return false;
        args_ += "{}";
      }
    }
    return true;
  }

  State state_ = State::kOpen;
  Kind kind_ = Kind::kSkip;
  ValueScanner value_;
  std::string raw_;
  std::string key_;
  std::string name_;
  bool has_name_ = false;
  bool saw_args_ = false;
  std::string args_;
};

#undef RETURN_IF_FAIL

enum class Format { kHermes, kLlama3, kMistral, kRequired };

// The markup formats, one state machine: content with tool calls in
// markers (hermes, mistral), or output that is calls from its first byte
// (llama3_json when it starts with '{' or <|python_tag|>; the `required`
// array).
class MarkupToolParser : public OutputParser {
 public:
  MarkupToolParser(Format format, ToolCallIdFn ids)
      : format_(format), ids_(std::move(ids)) {
    switch (format_) {
      case Format::kHermes:
        marker_ = "<tool_call>";
        break;
      case Format::kMistral:
        marker_ = "[TOOL_CALLS]";
        break;
      case Format::kLlama3:
        state_ = State::kLlamaStart;
        break;
      case Format::kRequired:
        state_ = State::kArrayOpen;
        break;
    }
  }

  ParsedDelta Feed(absl::string_view text) override {
    buf_.append(text.data(), text.size());
    ParsedDelta out;
    Run(false, &out);
    return out;
  }

  ParsedDelta Finish() override {
    ParsedDelta out;
    Run(true, &out);
    switch (state_) {
      case State::kObject:
        if (!scanner_.has_name()) Content(raw_, &out);
        break;
      case State::kMistralName:
        Content(raw_ + buf_, &out);
        break;
      default:
        break;
    }
    buf_.clear();
    if (calls_ == 0) out.content += held_ws_;
    held_ws_.clear();
    return out;
  }

  int tool_calls() const override { return calls_; }

 private:
  enum class State {
    kContent,             // text; marker_ opens a call
    kPassthrough,         // everything is content
    kObject,              // inside a call object (scanner_)
    kAfterHermes,         // after a hermes object: </tool_call>
    kSkipHermes,          // a broken hermes call: up to </tool_call>
    kLlamaStart,          // llama3: calls or content, from the first bytes
    kLlamaBetween,        // llama3: after an object: ';' or '{' or content
    kArrayOpen,           // '[' of a call array (required, mistral)
    kArrayItem,           // '{' of the next array item
    kArrayNext,           // ',' or ']'
    kMistralAfterMarker,  // '[' (array) or a name ([ARGS] form)
    kMistralName,         // name up to [ARGS]
    kMistralArgs,         // the arguments value after [ARGS]
  };

  // After a call array: content (mistral) or passthrough.
  State AfterArray() const {
    return format_ == Format::kMistral ? State::kContent : State::kPassthrough;
  }

  // Content, with trailing whitespace held: dropped if a call follows.
  void Content(absl::string_view s, ParsedDelta* out) {
    size_t last = s.size();
    while (last > 0 && IsWs(s[last - 1])) --last;
    if (last == 0) {
      held_ws_.append(s.data(), s.size());
      return;
    }
    out->content += held_ws_;
    out->content.append(s.data(), last);
    held_ws_.assign(s.data() + last, s.size() - last);
  }

  void StartObject(State after_object) {
    scanner_ = CallScanner();
    name_sent_ = false;
    after_object_ = after_object;
    state_ = State::kObject;
  }

  void EmitScanner(ParsedDelta* out) {
    if (!scanner_.has_name()) return;
    if (!name_sent_) {
      name_sent_ = true;
      held_ws_.clear();
      out->tool_calls.push_back(
          ToolCallDelta{calls_++, ids_(), scanner_.name(), ""});
    }
    std::string args = scanner_.TakeArgs();
    if (!args.empty()) {
      out->tool_calls.push_back(
          ToolCallDelta{calls_ - 1, "", "", std::move(args)});
    }
  }

  // Leading whitespace of buf_ dropped; false when buf_ is then empty.
  bool SkipWs() {
    size_t i = 0;
    while (i < buf_.size() && IsWs(buf_[i])) ++i;
    buf_.erase(0, i);
    return !buf_.empty();
  }

  void Run(bool finish, ParsedDelta* out) {
    while (true) {
      switch (state_) {
        case State::kContent: {
          const size_t p = absl::string_view(buf_).find(marker_);
          if (p != std::string::npos) {
            Content(absl::string_view(buf_).substr(0, p), out);
            held_ws_.clear();
            buf_.erase(0, p + marker_.size());
            raw_ = marker_;
            if (format_ == Format::kHermes) {
              StartObject(State::kAfterHermes);
            } else {
              state_ = State::kMistralAfterMarker;
            }
            continue;
          }
          const size_t keep = finish ? 0 : PartialSuffix(buf_, marker_);
          Content(absl::string_view(buf_).substr(0, buf_.size() - keep), out);
          buf_.erase(0, buf_.size() - keep);
          return;
        }
        case State::kPassthrough:
          Content(buf_, out);
          buf_.clear();
          return;
        case State::kObject: {
          size_t pos = 0;
          const CallScanner::Status s = scanner_.Scan(buf_, &pos);
          raw_.append(buf_, 0, pos);
          buf_.erase(0, pos);
          EmitScanner(out);
          if (s == CallScanner::Status::kMore) return;
          if (s == CallScanner::Status::kDone) {
            state_ = after_object_;
            continue;
          }
          // Not a call after all.
          if (name_sent_) {
            state_ = format_ == Format::kHermes ? State::kSkipHermes
                                                : State::kPassthrough;
          } else {
            Content(raw_, out);
            state_ = format_ == Format::kHermes || format_ == Format::kMistral
                         ? State::kContent
                         : State::kPassthrough;
          }
          continue;
        }
        case State::kAfterHermes: {
          if (!SkipWs()) return;
          static constexpr absl::string_view kClose = "</tool_call>";
          if (absl::StartsWith(buf_, kClose)) {
            buf_.erase(0, kClose.size());
            state_ = State::kContent;
            continue;
          }
          if (!finish && absl::StartsWith(kClose, buf_)) return;
          state_ = State::kContent;
          continue;
        }
        case State::kSkipHermes: {
          static constexpr absl::string_view kClose = "</tool_call>";
          const size_t p = absl::string_view(buf_).find(kClose);
          if (p == std::string::npos) {
            buf_.erase(0, buf_.size() - PartialSuffix(buf_, kClose));
            return;
          }
          buf_.erase(0, p + kClose.size());
          state_ = State::kContent;
          continue;
        }
        case State::kLlamaStart: {
          size_t i = 0;
          while (i < buf_.size() && IsWs(buf_[i])) ++i;
          if (i == buf_.size()) {
            if (finish) {
              Content(buf_, out);
              buf_.clear();
            }
            return;
          }
          static constexpr absl::string_view kTag = "<|python_tag|>";
          absl::string_view rest = absl::string_view(buf_).substr(i);
          if (absl::StartsWith(rest, kTag)) {
            raw_ = buf_.substr(0, i + kTag.size());
            buf_.erase(0, i + kTag.size());
            StartObject(State::kLlamaBetween);
            continue;
          }
          if (!finish && absl::StartsWith(kTag, rest)) return;
          if (rest[0] == '{') {
            raw_ = buf_.substr(0, i);
            buf_.erase(0, i);
            StartObject(State::kLlamaBetween);
            continue;
          }
          state_ = State::kPassthrough;
          continue;
        }
        case State::kLlamaBetween: {
          if (!SkipWs()) return;
          if (buf_[0] == ';') {
            buf_.erase(0, 1);
            raw_.clear();
            StartObject(State::kLlamaBetween);
            continue;
          }
          if (buf_[0] == '{') {
            raw_.clear();
            StartObject(State::kLlamaBetween);
            continue;
          }
          state_ = State::kPassthrough;
          continue;
        }
        case State::kArrayOpen:
          if (!SkipWs()) return;
          if (buf_[0] != '[') {
            state_ = State::kPassthrough;
            continue;
          }
          raw_ += '[';
          buf_.erase(0, 1);
          state_ = State::kArrayItem;
          continue;
        case State::kArrayItem:
          if (!SkipWs()) return;
          if (buf_[0] == ']' && calls_ == 0) {
            buf_.erase(0, 1);
            state_ = AfterArray();
            continue;
          }
          StartObject(State::kArrayNext);
          continue;
        case State::kArrayNext:
          if (!SkipWs()) return;
          if (buf_[0] == ',') {
            buf_.erase(0, 1);
            raw_.clear();
            state_ = State::kArrayItem;
            continue;
          }
          if (buf_[0] == ']') buf_.erase(0, 1);
          state_ = AfterArray();
          continue;
        case State::kMistralAfterMarker:
          if (!SkipWs()) return;
          if (buf_[0] == '[') {
            state_ = State::kArrayOpen;
            continue;
          }
          state_ = State::kMistralName;
          continue;
        case State::kMistralName: {
          static constexpr absl::string_view kArgs = "[ARGS]";
          // A name is short: no [ARGS] within kMaxName bytes is no call
          // (decided on the same bytes however the text was cut).
          static constexpr size_t kMaxName = 256;
          const size_t p = absl::string_view(buf_).find(kArgs);
          if (p == std::string::npos ? buf_.size() > kMaxName + kArgs.size()
                                     : p > kMaxName) {
            Content(raw_, out);
            state_ = State::kContent;
            continue;
          }
          if (p == std::string::npos) return;
          std::string name(absl::StripAsciiWhitespace(buf_.substr(0, p)));
          buf_.erase(0, p + kArgs.size());
          if (name.empty()) {
            state_ = State::kContent;
            continue;
          }
          held_ws_.clear();
          out->tool_calls.push_back(ToolCallDelta{calls_++, ids_(), name, ""});
          value_ = ValueScanner();
          value_started_ = false;
          state_ = State::kMistralArgs;
          continue;
        }
        case State::kMistralArgs: {
          if (!value_started_ && !SkipWs()) return;
          value_started_ = true;
          size_t i = 0;
          bool ended = false;
          for (; i < buf_.size(); ++i) {
            const ValueScanner::Step s = value_.Feed(buf_[i]);
            if (s == ValueScanner::Step::kAfter ||
                s == ValueScanner::Step::kError) {
              ended = true;
              break;
            }
            if (s == ValueScanner::Step::kLast) {
              ++i;
              ended = true;
              break;
            }
          }
          if (i > 0) {
            out->tool_calls.push_back(
                ToolCallDelta{calls_ - 1, "", "", buf_.substr(0, i)});
          }
          buf_.erase(0, i);
          if (!ended) return;
          state_ = State::kContent;
          continue;
        }
      }
    }
  }

  const Format format_;
  const ToolCallIdFn ids_;
  std::string marker_;
  State state_ = State::kContent;
  State after_object_ = State::kContent;
  std::string buf_;      // text not consumed yet
  std::string raw_;      // the current call's text so far (for fallback)
  std::string held_ws_;  // trailing whitespace of content
  CallScanner scanner_;
  bool name_sent_ = false;
  ValueScanner value_;
  bool value_started_ = false;
  int calls_ = 0;
};

// tool_choice naming a function: the whole text is its arguments.
class NamedToolParser : public OutputParser {
 public:
  NamedToolParser(std::string name, ToolCallIdFn ids)
      : name_(std::move(name)), ids_(std::move(ids)) {}
  ParsedDelta Feed(absl::string_view text) override {
    ParsedDelta out;
    Start(&out);
    if (!text.empty()) {
      out.tool_calls.push_back(ToolCallDelta{0, "", "", std::string(text)});
    }
    return out;
  }
  ParsedDelta Finish() override {
    ParsedDelta out;
    Start(&out);
    return out;
  }
  int tool_calls() const override { return started_ ? 1 : 0; }

 private:
  void Start(ParsedDelta* out) {
    if (started_) return;
    started_ = true;
    out->tool_calls.push_back(ToolCallDelta{0, ids_(), name_, ""});
  }
  const std::string name_;
  const ToolCallIdFn ids_;
  bool started_ = false;
};

class ThinkParser : public OutputParser {
 public:
  // `opened`: the prompt ended inside <think> (the template opened it), so
  // the output starts as reasoning.
  ThinkParser(std::unique_ptr<OutputParser> inner, bool opened)
      : inner_(std::move(inner)),
        state_(opened ? State::kThinking : State::kStart) {}

  ParsedDelta Feed(absl::string_view text) override {
    buf_.append(text.data(), text.size());
    return Run(false);
  }
  ParsedDelta Finish() override {
    ParsedDelta out = Run(true);
    if (inner_ != nullptr) out.Append(inner_->Finish());
    return out;
  }
  int tool_calls() const override {
    return inner_ != nullptr ? inner_->tool_calls() : 0;
  }

 private:
  static constexpr absl::string_view kOpen = "<think>";
  static constexpr absl::string_view kClose = "</think>";
  enum class State { kStart, kThinking, kAfterThinking, kContent };

  ParsedDelta Body(absl::string_view s) {
    if (inner_ != nullptr) return inner_->Feed(s);
    ParsedDelta d;
    d.content = std::string(s);
    return d;
  }

  ParsedDelta Run(bool finish) {
    ParsedDelta out;
    while (true) {
      switch (state_) {
        case State::kStart: {
          size_t i = 0;
          while (i < buf_.size() && IsWs(buf_[i])) ++i;
          absl::string_view rest = absl::string_view(buf_).substr(i);
          if (absl::StartsWith(rest, kOpen)) {
            buf_.erase(0, i + kOpen.size());
            state_ = State::kThinking;
            continue;
          }
          if (!finish && absl::StartsWith(kOpen, rest)) return out;
          state_ = State::kContent;
          continue;
        }
        case State::kThinking: {
          const size_t p = absl::string_view(buf_).find(kClose);
          if (p != std::string::npos) {
            out.reasoning.append(buf_, 0, p);
            buf_.erase(0, p + kClose.size());
            state_ = State::kAfterThinking;
            continue;
          }
          const size_t keep = finish ? 0 : PartialSuffix(buf_, kClose);
          out.reasoning.append(buf_, 0, buf_.size() - keep);
          buf_.erase(0, buf_.size() - keep);
          return out;
        }
        case State::kAfterThinking: {
          size_t i = 0;
          while (i < buf_.size() && IsWs(buf_[i])) ++i;
          buf_.erase(0, i);
          if (buf_.empty()) return out;
          state_ = State::kContent;
          continue;
        }
        case State::kContent:
          if (!buf_.empty()) out.Append(Body(buf_));
          buf_.clear();
          return out;
      }
    }
  }

  std::unique_ptr<OutputParser> inner_;
  State state_;
  std::string buf_;
};

// Whether `prompt` ends inside a <think> block: its last <think> is not
// closed.
bool OpensThink(absl::string_view prompt) {
  const size_t open = prompt.rfind("<think>");
  if (open == absl::string_view::npos) return false;
  return prompt.find("</think>", open) == absl::string_view::npos;
}

ToolCallIdFn OrDefault(ToolCallIdFn ids, ToolCallIdFn fallback) {
  return ids != nullptr ? std::move(ids) : std::move(fallback);
}

}  // namespace

std::string RandomToolCallId() {
  return absl::StrCat("call_", RandomAlnum(24));
}
std::string RandomMistralToolCallId() { return RandomAlnum(9); }

namespace {

template <typename Format>
absl::Status AddTo(Registry<Format>& registry, std::string name,
                   std::string description, Format format,
                   std::string origin) {
  if (format.make == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        registry.kind(), " '", name, "' was registered without a factory"));
  }
  return registry.Add(name, std::move(description), std::move(format),
                      std::move(origin));
}

// The pythonic templates describe the format in words of this kind:
// "[func_name1(params_name1=params_value1, ...), func_name2(params)]".
bool DescribesPythonicCalls(absl::string_view t) {
  return absl::StrContains(t, "[func_name1(") ||
         absl::StrContains(t, "func_name1(param");
}

void RegisterBuiltinToolParsers() {
  auto add = [](const char* name, const char* description,
                ToolParserFormat f) {
    absl::Status s = RegisterToolParser(name, description, std::move(f));
    (void)s;  // RegisterChatBuiltins' call_once: registered once
  };
  add("hermes",
      "<tool_call>{\"name\", \"arguments\"}</tool_call> (Qwen2.5, Qwen3, "
      "QwQ, SmolLM3, Hermes)",
      {[](ToolCallIdFn ids) {
         return std::make_unique<MarkupToolParser>(
             Format::kHermes, OrDefault(std::move(ids), RandomToolCallId));
       },
       false, 0,
       [](absl::string_view t) { return absl::StrContains(t, "<tool_call>"); }});
  add("mistral",
      "[TOOL_CALLS][{...}] or [TOOL_CALLS]name[ARGS]{...} (Mistral)",
      {[](ToolCallIdFn ids) {
         return std::make_unique<MarkupToolParser>(
             Format::kMistral,
             OrDefault(std::move(ids), RandomMistralToolCallId));
       },
       true, 1,
       [](absl::string_view t) {
         return absl::StrContains(t, "[TOOL_CALLS]");
       }});
  add("llama3_json",
      "<|python_tag|>? {\"name\", \"parameters\"}; ... (Llama 3.x JSON)",
      {[](ToolCallIdFn ids) {
         return std::make_unique<MarkupToolParser>(
             Format::kLlama3, OrDefault(std::move(ids), RandomToolCallId));
       },
       true, 2,
       [](absl::string_view t) {
         // Llama 3.2's pythonic templates write <|python_tag|> too.
         if (DescribesPythonicCalls(t)) return false;
         return absl::StrContains(t, "<|python_tag|>") ||
                (absl::StrContains(t, "<|start_header_id|>") &&
                 absl::StrContains(t, "\"parameters\""));
       }});
  add("pythonic",
      "[f(a=1), g(b=\"x\")], a Python list of calls, optionally in "
      "<|python_start|>...<|python_end|> (Llama 3.2, Llama 4, ToolACE)",
      {[](ToolCallIdFn ids) { return NewPythonicToolParser(std::move(ids)); },
       true, 3, DescribesPythonicCalls});
}

void RegisterGenericToolParser() {
  absl::Status s = RegisterToolParser(
      "generic",
      "[{\"name\", \"arguments\"}, ...] or a text answer (any chat model: "
      "tools described in a system message, the output constrained; picked "
      "when a template shows no format of its own)",
      {[](ToolCallIdFn ids) {
         return std::make_unique<MarkupToolParser>(
             Format::kRequired, OrDefault(std::move(ids), RandomToolCallId));
       },
       false, 1000, nullptr});
  (void)s;  // RegisterChatBuiltins' call_once: registered once
}

void RegisterBuiltinReasoningParsers() {
  absl::Status s = RegisterReasoningParser(
      "think",
      "text inside <think>...</think> is reasoning (a template that writes "
      "<think> picks it)",
      {[](std::unique_ptr<OutputParser> inner) {
         return NewThinkParser(std::move(inner));
       },
       [](absl::string_view t) { return absl::StrContains(t, "<think>"); },
       [](std::unique_ptr<OutputParser> inner) {
         return std::make_unique<ThinkParser>(std::move(inner),
                                              /*opened=*/true);
       },
       OpensThink});
  s.Update(RegisterReasoningParser(
      "none", "no reasoning: all text is content",
      {[](std::unique_ptr<OutputParser> inner) { return inner; }, nullptr, nullptr,
       nullptr}));
  (void)s;  // RegisterChatBuiltins' call_once: registered once
}

const ToolParserFormat* FindFormat(absl::string_view name) {
  return ToolParsers().Find(name);
}

}  // namespace

Registry<ToolParserFormat>& ToolParsers() {
  static auto* const registry = new Registry<ToolParserFormat>(
      "tool_parser", "a tool-call format: generated text -> tool calls");
  return *registry;
}

Registry<ReasoningParserFormat>& ReasoningParsers() {
  static auto* const registry = new Registry<ReasoningParserFormat>(
      "reasoning_parser", "a reasoning format: generated text -> reasoning");
  return *registry;
}

void RegisterChatBuiltins() {
  static absl::once_flag once;
  absl::call_once(once, [] {
    RegisterBuiltinToolParsers();
    RegisterGenericToolParser();
    RegisterBuiltinReasoningParsers();
  });
}

absl::Status RegisterToolParser(std::string name, std::string description,
                                ToolParserFormat format, std::string origin) {
  return AddTo(ToolParsers(), std::move(name), std::move(description),
               std::move(format), std::move(origin));
}

absl::Status RegisterReasoningParser(std::string name,
                                     std::string description,
                                     ReasoningParserFormat format,
                                     std::string origin) {
  return AddTo(ReasoningParsers(), std::move(name), std::move(description),
               std::move(format), std::move(origin));
}

std::vector<std::string> ToolParserNames() { return ToolParsers().Names(); }

bool IsToolParser(absl::string_view name) {
  return FindFormat(name) != nullptr;
}

std::string DetectToolParser(absl::string_view t) {
  std::vector<std::pair<int, std::string>> order;
  for (const std::string& name : ToolParserNames()) {
    const ToolParserFormat* f = FindFormat(name);
    if (f != nullptr && f->matches_template != nullptr) {
      order.emplace_back(f->priority, name);
    }
  }
  std::sort(order.begin(), order.end());
  for (const auto& [priority, name] : order) {
    if (FindFormat(name)->matches_template(t)) return name;
  }
  return "";
}

std::string DetectReasoningParser(absl::string_view t) {
  for (const std::string& name : ReasoningParserNames()) {
    const ReasoningParserFormat* f = ReasoningParsers().Find(name);
    if (f != nullptr && f->matches_template != nullptr &&
        f->matches_template(t)) {
      return name;
    }
  }
  return "";
}

std::vector<std::string> ReasoningParserNames() {
  return ReasoningParsers().Names();
}

bool IsReasoningParser(absl::string_view name) {
  return ReasoningParsers().Contains(name);
}

bool ToolParserNeedsSpecialTokens(absl::string_view name) {
  const ToolParserFormat* f = FindFormat(name);
  return f != nullptr && f->keep_special_tokens;
}

std::unique_ptr<OutputParser> NewToolParser(absl::string_view name,
                                            ToolCallIdFn ids) {
  const ToolParserFormat* f = FindFormat(name);
  return f == nullptr ? nullptr : f->make(std::move(ids));
}

std::unique_ptr<OutputParser> NewRequiredToolParser(ToolCallIdFn ids) {
  return std::make_unique<MarkupToolParser>(
      Format::kRequired, OrDefault(std::move(ids), RandomToolCallId));
}

std::unique_ptr<OutputParser> NewNamedToolParser(std::string function,
                                                 ToolCallIdFn ids) {
  return std::make_unique<NamedToolParser>(
      std::move(function), OrDefault(std::move(ids), RandomToolCallId));
}

std::unique_ptr<OutputParser> NewThinkParser(
    std::unique_ptr<OutputParser> inner) {
  return std::make_unique<ThinkParser>(std::move(inner), /*opened=*/false);
}

std::unique_ptr<OutputParser> NewReasoningParser(
    absl::string_view name, std::unique_ptr<OutputParser> inner,
    bool opened) {
  const ReasoningParserFormat* f = ReasoningParsers().Find(name);
  if (f == nullptr) return nullptr;
  if (opened && f->make_opened != nullptr) {
    return f->make_opened(std::move(inner));
  }
  return f->make(std::move(inner));
}

bool ReasoningOpenedByPrompt(absl::string_view name,
                             absl::string_view prompt) {
  const ReasoningParserFormat* f = ReasoningParsers().Find(name);
  return f != nullptr && f->make_opened != nullptr &&
         f->opened_by_prompt != nullptr && f->opened_by_prompt(prompt);
}

}  // namespace inferd
