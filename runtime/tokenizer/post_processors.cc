#include "runtime/tokenizer/post_processors.h"

#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime/common/status_macros.h"
#include "runtime/tokenizer/unicode_util.h"

namespace inferd {
namespace tokenizer_internal {
namespace {

void Append(Encoding* dst, Encoding&& src) {
  auto move_into = [](auto* d, auto* s) {
    d->insert(d->end(), std::make_move_iterator(s->begin()),
              std::make_move_iterator(s->end()));
  };
  move_into(&dst->ids, &src.ids);
  move_into(&dst->type_ids, &src.type_ids);
  move_into(&dst->tokens, &src.tokens);
  move_into(&dst->offsets, &src.offsets);
  move_into(&dst->special_tokens_mask, &src.special_tokens_mask);
  move_into(&dst->sequence_ids, &src.sequence_ids);
}

void AppendSpecial(Encoding* dst, int32_t id, const std::string& token,
                   int32_t type_id) {
  dst->ids.push_back(id);
  dst->type_ids.push_back(type_id);
  dst->tokens.push_back(token);
  dst->offsets.emplace_back(0, 0);
  dst->special_tokens_mask.push_back(1);
  dst->sequence_ids.push_back(-1);
}

void SetTypeIds(Encoding* e, int32_t type_id) {
  e->type_ids.assign(e->ids.size(), type_id);
}

// Moves offsets inward past leading/trailing spaces of byte-level tokens.
void TrimByteLevelOffsets(Encoding* e, bool add_prefix_space) {
  for (size_t i = 0; i < e->size(); ++i) {
    const std::string& tok = e->tokens[i];
    auto& off = e->offsets[i];
    auto is_space = [](char32_t c) { return c == 0x120 || IsWhitespace(c); };
    std::vector<char32_t> chars;
    for (size_t p = 0; p < tok.size();) {
      size_t len;
      chars.push_back(DecodeUtf8(tok, p, &len));
      p += len;
    }
    size_t leading = 0;
    while (leading < chars.size() && is_space(chars[leading])) ++leading;
    size_t trailing = 0;
    while (trailing < chars.size() &&
           is_space(chars[chars.size() - 1 - trailing])) {
      ++trailing;
    }
    if (leading == 0 && trailing == 0) continue;
    if (leading > 0) {
      const bool is_first = i == 0 || off.first == 0;
      if (is_first && add_prefix_space && leading == 1) leading = 0;
      off.first = std::min<uint32_t>(off.first + static_cast<uint32_t>(leading),
                                     off.second);
    }
    if (trailing > 0 && off.second >= trailing) {
      off.second = std::max<uint32_t>(
          off.second - static_cast<uint32_t>(trailing), off.first);
    }
  }
}

class ByteLevelProcessor : public PostProcessor {
 public:
  ByteLevelProcessor(bool trim_offsets, bool add_prefix_space)
      : trim_offsets_(trim_offsets), add_prefix_space_(add_prefix_space) {}
  size_t AddedTokens(bool) const override { return 0; }
  void Process(std::vector<Encoding>* encodings, bool) const override {
    if (!trim_offsets_) return;
    for (Encoding& e : *encodings) TrimByteLevelOffsets(&e, add_prefix_space_);
  }

 private:
  bool trim_offsets_, add_prefix_space_;
};

struct SpecialToken {
  std::vector<int32_t> ids;
  std::vector<std::string> tokens;
};

struct TemplatePiece {
  bool is_sequence;
  int sequence;         // 0 = A, 1 = B.
  std::string special;  // Key into the special-token map.
  int32_t type_id;
};

class TemplateProcessor : public PostProcessor {
 public:
  TemplateProcessor(std::vector<TemplatePiece> single,
                    std::vector<TemplatePiece> pair,
                    absl::flat_hash_map<std::string, SpecialToken> specials)
      : single_(std::move(single)),
        pair_(std::move(pair)),
        specials_(std::move(specials)) {}

  size_t AddedTokens(bool pair) const override {
    size_t n = 0;
    for (const TemplatePiece& p : pair ? pair_ : single_) {
      if (!p.is_sequence) {
        auto it = specials_.find(p.special);
        if (it != specials_.end()) n += it->second.ids.size();
      }
    }
    return n;
  }

  void Process(std::vector<Encoding>* encodings,
               bool add_special) const override {
    const bool pair = encodings->size() >= 2;
    Encoding out;
    for (const TemplatePiece& p : pair ? pair_ : single_) {
      if (p.is_sequence) {
        if (static_cast<size_t>(p.sequence) >= encodings->size()) continue;
        Encoding& e = (*encodings)[p.sequence];
        SetTypeIds(&e, p.type_id);
        Append(&out, std::move(e));
      } else if (add_special) {
        auto it = specials_.find(p.special);
        if (it == specials_.end()) continue;
        for (size_t k = 0; k < it->second.ids.size(); ++k) {
          AppendSpecial(&out, it->second.ids[k], it->second.tokens[k],
                        p.type_id);
        }
      }
    }
    encodings->assign(1, std::move(out));
  }

 private:
  std::vector<TemplatePiece> single_, pair_;
  absl::flat_hash_map<std::string, SpecialToken> specials_;
};

// BertProcessing / RobertaProcessing: CLS A SEP [(SEP) B SEP].
class ClsSepProcessor : public PostProcessor {
 public:
  ClsSepProcessor(std::pair<std::string, int32_t> cls,
                  std::pair<std::string, int32_t> sep, bool roberta,
                  bool trim_offsets, bool add_prefix_space)
      : cls_(std::move(cls)),
        sep_(std::move(sep)),
        roberta_(roberta),
        trim_offsets_(trim_offsets),
        add_prefix_space_(add_prefix_space) {}

  size_t AddedTokens(bool pair) const override {
    return pair ? (roberta_ ? 4 : 3) : 2;
  }

  void Process(std::vector<Encoding>* encodings,
               bool add_special) const override {
    if (roberta_) {
      for (Encoding& e : *encodings) {
        if (trim_offsets_) TrimByteLevelOffsets(&e, add_prefix_space_);
        SetTypeIds(&e, 0);
      }
    }
    if (!add_special) return;
    Encoding out;
    AppendSpecial(&out, cls_.second, cls_.first, 0);
    Encoding& a = (*encodings)[0];
    SetTypeIds(&a, 0);
    Append(&out, std::move(a));
    AppendSpecial(&out, sep_.second, sep_.first, 0);
    if (encodings->size() >= 2) {
      const int32_t type_b = roberta_ ? 0 : 1;
      Encoding& b = (*encodings)[1];
      if (roberta_) AppendSpecial(&out, sep_.second, sep_.first, type_b);
      SetTypeIds(&b, type_b);
      Append(&out, std::move(b));
      AppendSpecial(&out, sep_.second, sep_.first, type_b);
    }
    encodings->assign(1, std::move(out));
  }

 private:
  std::pair<std::string, int32_t> cls_, sep_;
  bool roberta_, trim_offsets_, add_prefix_space_;
};

class SequenceProcessor : public PostProcessor {
 public:
  explicit SequenceProcessor(std::vector<std::unique_ptr<PostProcessor>> p)
      : parts_(std::move(p)) {}
  size_t AddedTokens(bool pair) const override {
    size_t n = 0;
    for (const auto& p : parts_) n += p->AddedTokens(pair);
    return n;
  }
  void Process(std::vector<Encoding>* encodings,
               bool add_special) const override {
    for (const auto& p : parts_) p->Process(encodings, add_special);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> parts_;
};

absl::StatusOr<std::vector<TemplatePiece>> ParseTemplate(const Json& j) {
  std::vector<TemplatePiece> out;
  auto parse_string_piece = [&](const std::string& s) -> absl::Status {
    std::string name = s;
    int32_t type_id = 0;
    const size_t colon = s.rfind(':');
    if (colon != std::string::npos && colon > 0) {
      int v;
      if (absl::SimpleAtoi(s.substr(colon + 1), &v)) {
        name = s.substr(0, colon);
        type_id = v;
      }
    }
    if (!name.empty() && name[0] == '$') {
      const std::string seq = name.substr(1);
      if (seq.empty() || seq == "A" || seq == "a") {
        out.push_back({true, 0, "", type_id});
      } else if (seq == "B" || seq == "b") {
        out.push_back({true, 1, "", type_id});
      } else {
        int v;
        if (!absl::SimpleAtoi(seq, &v)) {
          return absl::InvalidArgumentError(
              "tokenizer.json: bad template piece " + s);
        }
        out.push_back({true, 0, "", v});  // "$1" means A with type id 1.
      }
    } else {
      out.push_back({false, 0, name, type_id});
    }
    return absl::OkStatus();
  };
  if (j.is_string()) {
    for (absl::string_view part :
         absl::StrSplit(j.get<std::string>(), ' ', absl::SkipEmpty())) {
      RETURN_IF_ERROR(parse_string_piece(std::string(part)));
    }
    return out;
  }
  if (!j.is_array()) {
    return absl::InvalidArgumentError(
        "tokenizer.json: template must be a list");
  }
  for (const Json& p : j) {
    if (p.is_string()) {
      RETURN_IF_ERROR(parse_string_piece(p.get<std::string>()));
    } else if (p.contains("Sequence")) {
      const Json& s = p.at("Sequence");
      const std::string id = GetString(s, "id", "A");
      out.push_back({true, id == "B" ? 1 : 0, "",
                     static_cast<int32_t>(GetInt(s, "type_id", 0))});
    } else if (p.contains("SpecialToken")) {
      const Json& s = p.at("SpecialToken");
      out.push_back({false, 0, GetString(s, "id"),
                     static_cast<int32_t>(GetInt(s, "type_id", 0))});
    } else {
      return absl::InvalidArgumentError(
          "tokenizer.json: unknown template piece");
    }
  }
  return out;
}

absl::StatusOr<std::pair<std::string, int32_t>> ParseTokenPair(
    const Json& j, const char* key) {
  if (!Has(j, key) || !j.at(key).is_array() || j.at(key).size() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tokenizer.json: post_processor needs \"", key, "\" as [token, id]"));
  }
  return std::make_pair(j.at(key)[0].get<std::string>(),
                        j.at(key)[1].get<int32_t>());
}

}  // namespace

Encoding MergeEncodings(std::vector<Encoding>* encodings) {
  Encoding out;
  for (Encoding& e : *encodings) Append(&out, std::move(e));
  return out;
}

absl::StatusOr<std::unique_ptr<PostProcessor>> MakePostProcessor(
    const Json& j) {
  if (!j.is_object()) {
    return absl::InvalidArgumentError(
        "tokenizer.json: post_processor must be an object");
  }
  const std::string type = TypeOf(j);
  if (type == "ByteLevel") {
    return std::unique_ptr<PostProcessor>(
        new ByteLevelProcessor(GetBool(j, "trim_offsets", true),
                               GetBool(j, "add_prefix_space", true)));
  }
  if (type == "TemplateProcessing") {
    std::vector<TemplatePiece> single, pair;
    if (Has(j, "single")) {
      ASSIGN_OR_RETURN(single, ParseTemplate(j.at("single")));
    }
    if (Has(j, "pair")) {
      ASSIGN_OR_RETURN(pair, ParseTemplate(j.at("pair")));
    }
    absl::flat_hash_map<std::string, SpecialToken> specials;
    if (Has(j, "special_tokens")) {
      for (const auto& kv : j.at("special_tokens").items()) {
        SpecialToken st;
        const Json& v = kv.value();
        if (Has(v, "ids")) st.ids = v.at("ids").get<std::vector<int32_t>>();
        if (Has(v, "tokens"))
          st.tokens = v.at("tokens").get<std::vector<std::string>>();
        if (st.ids.size() != st.tokens.size()) {
          return absl::InvalidArgumentError(
              "tokenizer.json: special token ids and tokens differ in length");
        }
        specials[GetString(v, "id", kv.key())] = std::move(st);
      }
    }
    for (const auto* t : {&single, &pair}) {
      for (const TemplatePiece& p : *t) {
        if (!p.is_sequence && !specials.contains(p.special)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "tokenizer.json: template uses unknown special token \"",
              p.special, "\""));
        }
      }
    }
    return std::unique_ptr<PostProcessor>(new TemplateProcessor(
        std::move(single), std::move(pair), std::move(specials)));
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    ASSIGN_OR_RETURN(auto sep, ParseTokenPair(j, "sep"));
    ASSIGN_OR_RETURN(auto cls, ParseTokenPair(j, "cls"));
    const bool roberta = type == "RobertaProcessing";
    return std::unique_ptr<PostProcessor>(
        new ClsSepProcessor(std::move(cls), std::move(sep), roberta,
                            GetBool(j, "trim_offsets", true),
                            GetBool(j, "add_prefix_space", true)));
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PostProcessor>> parts;
    if (Has(j, "processors")) {
      for (const Json& sub : j.at("processors")) {
        ASSIGN_OR_RETURN(auto p, MakePostProcessor(sub));
        parts.push_back(std::move(p));
      }
    }
    return std::unique_ptr<PostProcessor>(
        new SequenceProcessor(std::move(parts)));
  }
  return UnknownType("post_processor", type);
}

}  // namespace tokenizer_internal
}  // namespace inferd
