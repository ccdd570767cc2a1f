#include "runtime/loader/gguf_tokenizer.h"

#include <algorithm>
#include <cstddef>
#include <map>
#include <memory>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "nlohmann/json.hpp"
#include "runtime/common/status_macros.h"

namespace inferd {
namespace {

using Json = nlohmann::json;

constexpr char kModelKey[] = "tokenizer.ggml.model";
constexpr char kPreKey[] = "tokenizer.ggml.pre";
constexpr char kTokensKey[] = "tokenizer.ggml.tokens";
constexpr char kScoresKey[] = "tokenizer.ggml.scores";
constexpr char kTypesKey[] = "tokenizer.ggml.token_type";
constexpr char kMergesKey[] = "tokenizer.ggml.merges";
constexpr char kChatTemplateKey[] = "tokenizer.chat_template";

// llama.cpp's token types.
constexpr int64_t kTypeControl = 3;
constexpr int64_t kTypeUserDefined = 4;

// Pre-tokenizer regexes in the Hugging Face (Oniguruma) spelling of the
// tokenizer.json files llama.cpp's expressions were taken from.
constexpr char kGpt2Regex[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|"
    "\\s+(?!\\S)|\\s+";
constexpr char kLlama3Regex[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}|"
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr char kQwen2Regex[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|"
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr char kGpt4oRegex[] =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*"
    "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"
    "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";
constexpr char kTekkenRegex[] =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*"
    "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"
    "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// How a gpt2 vocabulary splits text, per tokenizer.ggml.pre (llama.cpp's
// llm_tokenizer_bpe): a list of regexes applied in turn, each isolating its
// matches; `digits` = the GPT-2 regex after splitting every digit apart
// (SmolLM2's and StarCoder's Digits + ByteLevel).
enum class BpeSplit { kGpt2, kDigitsGpt2, kRegexes };
struct BpePreType {
  const char* names;  // '|'-separated tokenizer.ggml.pre values
  BpeSplit split;
  std::vector<const char*> regexes;
  bool ignore_merges;  // a word already in the vocabulary is one token
  bool add_bos;        // default when tokenizer.ggml.add_bos_token is absent
};

const std::vector<BpePreType>& BpePreTypes() {
  static const auto* types = new std::vector<BpePreType>{
      {"default", BpeSplit::kRegexes,
       {"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2Regex, "\\p{N}+",
        "[0-9][0-9][0-9]"},
       false, false},
      {"gpt-2|phi-2|mpt|olmo|jais|jina-es|jina-de|jina-v2-es|jina-v2-de|"
       "gigachat|a.x-4.0|mellum|exaone4|trillion|granite-docling",
       BpeSplit::kGpt2, {}, false, false},
      {"llama3|llama-v3|llama-bpe|falcon3|falcon-h1|pixtral|midm-2.0|lfm2|"
       "jina-v5-nano",
       BpeSplit::kRegexes, {kLlama3Regex}, true, true},
      {"dbrx|smaug-bpe", BpeSplit::kRegexes, {kLlama3Regex}, false, false},
      {"qwen2|deepseek-r1-qwen|kormo|f2llmv2|megrez|stablelm2",
       BpeSplit::kRegexes, {kQwen2Regex}, false, false},
      {"starcoder|refact|command-r|smollm|codeshell|exaone|minerva-7b",
       BpeSplit::kDigitsGpt2, {}, false, false},
      {"falcon", BpeSplit::kRegexes,
       {"[\\p{P}\\$\\+<=>\\^~\\|`]+", kGpt2Regex, "[0-9][0-9][0-9]"}, false,
       false},
      {"deepseek-coder", BpeSplit::kRegexes,
       {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+",
        "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+", "\\p{N}"},
       false, false},
      {"gpt-4o|llama4", BpeSplit::kRegexes, {kGpt4oRegex}, false, false},
      {"tekken", BpeSplit::kRegexes, {kTekkenRegex}, true, true},
  };
  return *types;
}

const BpePreType* FindBpePreType(absl::string_view pre) {
  for (const BpePreType& t : BpePreTypes()) {
    for (absl::string_view name : absl::StrSplit(t.names, '|')) {
      if (name == pre) return &t;
    }
  }
  return nullptr;
}

std::string SupportedBpePreTypes() {
  std::vector<std::string> names;
  for (const BpePreType& t : BpePreTypes()) {
    for (absl::string_view name : absl::StrSplit(t.names, '|')) {
      names.emplace_back(name);
    }
  }
  return absl::StrJoin(names, ", ");
}

class MetadataReader {
 public:
  explicit MetadataReader(const GgufFile& file) : file_(file) {}

  absl::Status Error(absl::string_view key, absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat(file_.path(), ": metadata '", key, "' ", what));
  }

  // The array at `key` (nullptr when absent and optional); its elements must
  // be strings, or integers / numbers as asked.
  enum class Elements { kString, kInteger, kNumber };
  absl::StatusOr<const GgufValue*> Array(absl::string_view key,
                                         Elements elements,
                                         bool required) const {
    const GgufValue* v = file_.Find(key);
    if (v == nullptr) {
      if (!required) return nullptr;
      return Error(key, "is missing");
    }
    if (v->type != GgufValueType::kArray) {
      return Error(key, absl::StrCat("is a ", GgufValueTypeName(v->type),
                                     ", not an array"));
    }
    GgufValue probe;
    probe.type = v->element_type;
    bool ok = false;
    switch (elements) {
      case Elements::kString:
        ok = v->element_type == GgufValueType::kString;
        break;
      case Elements::kInteger:
        ok = probe.is_integer();
        break;
      case Elements::kNumber:
        ok = probe.is_integer() || v->element_type == GgufValueType::kFloat32 ||
             v->element_type == GgufValueType::kFloat64;
        break;
    }
    if (!ok) {
      return Error(key, absl::StrCat("is an array of ",
                                     GgufValueTypeName(v->element_type)));
    }
    return v;
  }

  absl::StatusOr<absl::optional<std::string>> OptionalString(
      absl::string_view key) const {
    const GgufValue* v = file_.Find(key);
    if (v == nullptr) return absl::optional<std::string>();
    if (v->type != GgufValueType::kString) {
      return Error(key, absl::StrCat("is a ", GgufValueTypeName(v->type),
                                     ", not a string"));
    }
    return absl::optional<std::string>(v->s);
  }

  absl::StatusOr<absl::optional<bool>> OptionalBool(
      absl::string_view key) const {
    const GgufValue* v = file_.Find(key);
    if (v == nullptr) return absl::optional<bool>();
    if (v->type == GgufValueType::kBool) {
      return absl::optional<bool>(v->u != 0);
    }
    return Error(key, absl::StrCat("is a ", GgufValueTypeName(v->type),
                                   ", not a bool"));
  }

  // A token id in [0, n).
  absl::StatusOr<absl::optional<int32_t>> OptionalId(absl::string_view key,
                                                     size_t n) const {
    const GgufValue* v = file_.Find(key);
    if (v == nullptr) return absl::optional<int32_t>();
    if (!v->is_integer()) {
      return Error(key, absl::StrCat("is a ", GgufValueTypeName(v->type),
                                     ", not an integer"));
    }
    auto id = v->AsInt();
    // llama.cpp writes -1 (or UINT32_MAX) for "no such token".
    if (!id.ok() || *id == -1 || *id == 0xFFFFFFFFll) {
      return absl::optional<int32_t>();
    }
    if (*id < 0 || static_cast<uint64_t>(*id) >= n) {
      return Error(key, absl::StrCat("is ", *id, ", outside the ", n,
                                     " tokens"));
    }
    return absl::optional<int32_t>(static_cast<int32_t>(*id));
  }

 private:
  const GgufFile& file_;
};

// What every model type shares, read and validated once.
struct Vocab {
  std::vector<std::string> tokens;
  std::vector<int64_t> types;   // empty when the file has none
  std::vector<double> scores;   // empty when the file has none
  absl::optional<int32_t> bos, eos, unk, pad, eot, eom;
  absl::optional<int32_t> cls, sep, mask;  // WordPiece (bert) files
};

absl::StatusOr<Vocab> ReadVocab(const MetadataReader& r) {
  using E = MetadataReader::Elements;
  Vocab v;
  ASSIGN_OR_RETURN(const GgufValue* tokens, r.Array(kTokensKey, E::kString,
                                                    /*required=*/true));
  if (tokens->elements.empty()) return r.Error(kTokensKey, "is empty");
  if (tokens->elements.size() > static_cast<size_t>(INT32_MAX)) {
    return r.Error(kTokensKey, "has more tokens than int32 ids");
  }
  v.tokens.reserve(tokens->elements.size());
  for (const GgufValue& t : tokens->elements) v.tokens.push_back(t.s);
  const size_t n = v.tokens.size();

  ASSIGN_OR_RETURN(const GgufValue* types,
                   r.Array(kTypesKey, E::kInteger, /*required=*/false));
  if (types != nullptr) {
    if (types->elements.size() != n) {
      return r.Error(kTypesKey, absl::StrCat("has ", types->elements.size(),
                                             " entries for ", n, " tokens"));
    }
    for (const GgufValue& t : types->elements) {
      auto type = t.AsInt();
      if (!type.ok() || *type < 0 || *type > 6) {
        return r.Error(kTypesKey, "holds a token type outside 0..6");
      }
      v.types.push_back(*type);
    }
  }
  ASSIGN_OR_RETURN(const GgufValue* scores,
                   r.Array(kScoresKey, E::kNumber, /*required=*/false));
  if (scores != nullptr) {
    if (scores->elements.size() != n) {
      return r.Error(kScoresKey, absl::StrCat("has ", scores->elements.size(),
                                              " entries for ", n, " tokens"));
    }
    for (const GgufValue& s : scores->elements) {
      auto d = s.AsDouble();
      if (!d.ok()) return r.Error(kScoresKey, d.status().message());
      v.scores.push_back(*d);
    }
  }
  const std::pair<const char*, absl::optional<int32_t>*> ids[] = {
      {"tokenizer.ggml.bos_token_id", &v.bos},
      {"tokenizer.ggml.eos_token_id", &v.eos},
      {"tokenizer.ggml.unknown_token_id", &v.unk},
      {"tokenizer.ggml.padding_token_id", &v.pad},
      {"tokenizer.ggml.eot_token_id", &v.eot},
      {"tokenizer.ggml.eom_token_id", &v.eom},
      {"tokenizer.ggml.cls_token_id", &v.cls},
      // llama.cpp's spelling.
      {"tokenizer.ggml.seperator_token_id", &v.sep},
      {"tokenizer.ggml.mask_token_id", &v.mask},
  };
  for (const auto& [key, out] : ids) {
    ASSIGN_OR_RETURN(*out, r.OptionalId(key, n));
  }
  return v;
}

int64_t TypeOf(const Vocab& v, size_t id) {
  return v.types.empty() ? 1 : v.types[id];
}

Json AddedToken(int32_t id, const std::string& content, bool special) {
  return Json{{"id", id},           {"content", content},
              {"single_word", false}, {"lstrip", false},
              {"rstrip", false},    {"normalized", false},
              {"special", special}};
}

// GPT-2's reversible byte -> printable code point table.
const std::vector<std::string>& ByteAlphabet() {
  static const auto* table = [] {
    auto* t = new std::vector<std::string>(256);
    auto printable = [](int b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) ||
             (b >= 0xAE && b <= 0xFF);
    };
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const uint32_t cp = printable(b) ? b : next++;
      std::string utf8;
      if (cp < 0x80) {
        utf8 += static_cast<char>(cp);
      } else {
        utf8 += static_cast<char>(0xC0 | (cp >> 6));
        utf8 += static_cast<char>(0x80 | (cp & 0x3F));
      }
      (*t)[b] = utf8;
    }
    return t;
  }();
  return *table;
}

// Decodes one UTF-8 code point at s[*i] (advancing *i); false when invalid.
bool NextCodePoint(absl::string_view s, size_t* i, std::string* cp) {
  const auto c = static_cast<unsigned char>(s[*i]);
  size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3
               : (c >> 3) == 30 ? 4 : 0;
  if (len == 0 || *i + len > s.size()) return false;
  for (size_t k = 1; k < len; ++k) {
    if ((static_cast<unsigned char>(s[*i + k]) & 0xC0) != 0x80) return false;
  }
  cp->assign(s.data() + *i, len);
  *i += len;
  return true;
}

std::vector<std::string> CodePoints(absl::string_view s) {
  std::vector<std::string> out;
  std::string cp;
  size_t i = 0;
  while (i < s.size()) {
    if (!NextCodePoint(s, &i, &cp)) {  // keep stray bytes as their own unit
      cp.assign(1, s[i++]);
    }
    out.push_back(cp);
  }
  return out;
}

// A byte-level vocabulary spells every token in the byte alphabet; a token
// that is not (llama.cpp stores some added tokens as raw text) is respelled
// from its UTF-8 bytes, as transformers does.
bool InByteAlphabet(absl::string_view token) {
  static const auto* alphabet = [] {
    auto* s = new absl::flat_hash_set<std::string>();
    for (const std::string& c : ByteAlphabet()) s->insert(c);
    return s;
  }();
  for (const std::string& cp : CodePoints(token)) {
    if (!alphabet->contains(cp)) return false;
  }
  return true;
}

std::string ToByteAlphabet(absl::string_view token) {
  std::string out;
  for (unsigned char b : token) out += ByteAlphabet()[b];
  return out;
}

// TemplateProcessing adding BOS / EOS around each sequence, as transformers'
// update_post_processor writes it.
Json TemplatePostProcessor(const Vocab& v, bool add_bos, bool add_eos) {
  auto special = [](const std::string& id, int type_id) {
    return Json{{"SpecialToken", {{"id", id}, {"type_id", type_id}}}};
  };
  auto sequence = [](const char* id, int type_id) {
    return Json{{"Sequence", {{"id", id}, {"type_id", type_id}}}};
  };
  Json single = Json::array();
  Json pair = Json::array();
  Json specials = Json::object();
  const std::string bos = add_bos ? v.tokens[*v.bos] : "";
  const std::string eos = add_eos ? v.tokens[*v.eos] : "";
  for (int seq = 0; seq < 2; ++seq) {
    Json& out = seq == 0 ? single : pair;
    for (int part = 0; part <= seq; ++part) {
      if (add_bos) out.push_back(special(bos, part));
      out.push_back(sequence(part == 0 ? "A" : "B", part));
      if (add_eos) out.push_back(special(eos, part));
    }
  }
  if (add_bos) {
    specials[bos] = {{"id", bos}, {"ids", {*v.bos}}, {"tokens", {bos}}};
  }
  if (add_eos) {
    specials[eos] = {{"id", eos}, {"ids", {*v.eos}}, {"tokens", {eos}}};
  }
  return Json{{"type", "TemplateProcessing"},
              {"single", single},
              {"pair", pair},
              {"special_tokens", specials}};
}

Json ByteLevelJson(bool use_regex) {
  return Json{{"type", "ByteLevel"},
              {"add_prefix_space", false},
              {"trim_offsets", true},
              {"use_regex", use_regex}};
}

Json BpePreTokenizer(const BpePreType& pre) {
  switch (pre.split) {
    case BpeSplit::kGpt2:
      return ByteLevelJson(/*use_regex=*/true);
    case BpeSplit::kDigitsGpt2:
      return Json{{"type", "Sequence"},
                  {"pretokenizers",
                   {{{"type", "Digits"}, {"individual_digits", true}},
                    ByteLevelJson(/*use_regex=*/true)}}};
    case BpeSplit::kRegexes:
      break;
  }
  Json steps = Json::array();
  for (const char* regex : pre.regexes) {
    steps.push_back(Json{{"type", "Split"},
                         {"pattern", {{"Regex", regex}}},
                         {"behavior", "Isolated"},
                         {"invert", false}});
  }
  steps.push_back(ByteLevelJson(/*use_regex=*/false));
  return Json{{"type", "Sequence"}, {"pretokenizers", steps}};
}

// The added-token list: control tokens as special, user-defined as plain,
// and the BOS/EOS/UNK/PAD tokens as special (transformers adds its special
// tokens too). `keep` filters tokens that cannot stand for themselves.
template <typename Keep>
Json AddedTokens(const Vocab& v, const Json& vocab_json, Keep keep) {
  std::map<int32_t, Json> added;
  for (size_t id = 0; id < v.tokens.size(); ++id) {
    const int64_t type = TypeOf(v, id);
    const std::string& token = v.tokens[id];
    if (type == kTypeControl && keep(token)) {
      added[static_cast<int32_t>(id)] =
          AddedToken(static_cast<int32_t>(id), token, /*special=*/true);
    } else if (type == kTypeUserDefined && vocab_json.contains(token)) {
      const int32_t vid = vocab_json[token].get<int32_t>();
      added.emplace(vid, AddedToken(vid, token, /*special=*/false));
    }
  }
  for (const absl::optional<int32_t>* id :
       {&v.bos, &v.eos, &v.unk, &v.pad, &v.cls, &v.sep, &v.mask}) {
    if (!id->has_value()) continue;
    const std::string& token = v.tokens[**id];
    if (!vocab_json.contains(token)) continue;
    const int32_t vid = vocab_json[token].get<int32_t>();
    added[vid] = AddedToken(vid, token, /*special=*/true);
  }
  Json out = Json::array();
  for (auto& [id, token] : added) out.push_back(std::move(token));
  return out;
}

absl::StatusOr<Json> Gpt2Tokenizer(const MetadataReader& r, const Vocab& v,
                                   const BpePreType& pre) {
  Json vocab = Json::object();
  for (size_t id = 0; id < v.tokens.size(); ++id) {
    const std::string& t = v.tokens[id];
    vocab[InByteAlphabet(t) ? t : ToByteAlphabet(t)] = id;
  }
  ASSIGN_OR_RETURN(const GgufValue* merges_value,
                   r.Array(kMergesKey, MetadataReader::Elements::kString,
                           /*required=*/true));
  Json merges = Json::array();
  for (size_t i = 0; i < merges_value->elements.size(); ++i) {
    const std::string& m = merges_value->elements[i].s;
    const size_t space = m.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == m.size() ||
        m.find(' ', space + 1) != std::string::npos) {
      return r.Error(kMergesKey, absl::StrCat("entry ", i, " (\"", m,
                                              "\") is not \"left right\""));
    }
    std::string left = m.substr(0, space);
    std::string right = m.substr(space + 1);
    for (const std::string* part : {&left, &right}) {
      if (!vocab.contains(*part)) {
        return r.Error(kMergesKey,
                       absl::StrCat("entry ", i, " uses \"", *part,
                                    "\", which is not a token"));
      }
    }
    if (!vocab.contains(left + right)) {
      return r.Error(kMergesKey,
                     absl::StrCat("entry ", i, " makes \"", left + right,
                                  "\", which is not a token"));
    }
    merges.push_back({std::move(left), std::move(right)});
  }
  Json model = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", nullptr},
                {"continuing_subword_prefix", ""},
                {"end_of_word_suffix", ""},
                {"fuse_unk", false},
                {"byte_fallback", false},
                {"ignore_merges", pre.ignore_merges}};
  Json tok = {{"version", "1.0"},
              {"truncation", nullptr},
              {"padding", nullptr},
              {"added_tokens", AddedTokens(v, vocab, InByteAlphabet)},
              {"normalizer", nullptr},
              {"pre_tokenizer", BpePreTokenizer(pre)},
              {"decoder",
               {{"type", "ByteLevel"},
                {"add_prefix_space", true},
                {"trim_offsets", true},
                {"use_regex", true}}}};
  model["vocab"] = std::move(vocab);
  model["merges"] = std::move(merges);
  tok["model"] = std::move(model);
  return tok;
}

// Merges implied by a SentencePiece vocabulary: every split of a token into
// two tokens, best score first (transformers' generate_merges: ties keep
// vocabulary order, then longer left and right parts first).
Json SpmMerges(const Vocab& v, const Json& vocab) {
  struct Merge {
    std::string left, right;
    double score;
    size_t left_len, right_len;  // in code points
  };
  // Score per distinct token, in first-occurrence order with the last score.
  std::vector<size_t> order;
  absl::flat_hash_map<std::string, size_t> last;
  for (size_t id = 0; id < v.tokens.size(); ++id) {
    if (last.emplace(v.tokens[id], id).second) order.push_back(id);
    last[v.tokens[id]] = id;
  }
  std::vector<Merge> merges;
  for (size_t first : order) {
    const std::string& token = v.tokens[first];
    const double score = v.scores[last[token]];
    const std::vector<std::string> cps = CodePoints(token);
    std::vector<std::pair<std::pair<int64_t, int64_t>, Merge>> local;
    std::string left;
    for (size_t k = 1; k < cps.size(); ++k) {
      left += cps[k - 1];
      std::string right = token.substr(left.size());
      auto l = vocab.find(left);
      auto rr = vocab.find(right);
      if (l == vocab.end() || rr == vocab.end()) continue;
      local.push_back({{l->get<int64_t>(), rr->get<int64_t>()},
                       Merge{left, right, score, k, cps.size() - k}});
    }
    std::stable_sort(local.begin(), local.end(),
                     [](const auto& a, const auto& b) {
                       return a.first < b.first;
                     });
    for (auto& m : local) merges.push_back(std::move(m.second));
  }
  std::stable_sort(merges.begin(), merges.end(),
                   [](const Merge& a, const Merge& b) {
                     if (a.score != b.score) return a.score > b.score;
                     if (a.left_len != b.left_len) {
                       return a.left_len > b.left_len;
                     }
                     return a.right_len > b.right_len;
                   });
  Json out = Json::array();
  for (Merge& m : merges) {
    out.push_back({std::move(m.left), std::move(m.right)});
  }
  return out;
}

absl::StatusOr<Json> LlamaSpmTokenizer(const MetadataReader& r,
                                       const Vocab& v, bool add_space_prefix) {
  if (v.scores.empty()) return r.Error(kScoresKey, "is missing");
  Json vocab = Json::object();
  for (size_t id = 0; id < v.tokens.size(); ++id) vocab[v.tokens[id]] = id;
  Json merges = SpmMerges(v, vocab);
  Json model = {{"type", "BPE"},
                {"dropout", nullptr},
                // transformers leaves unk_token unset; keeping the file's
                // unknown token only matters for text no byte token covers.
                {"unk_token", v.unk.has_value() ? Json(v.tokens[*v.unk])
                                                : Json(nullptr)},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", true},
                {"byte_fallback", true},
                {"ignore_merges", false}};
  Json decoders = Json::array(
      {{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}},
        {"content", " "}},
       {{"type", "ByteFallback"}},
       {{"type", "Fuse"}}});
  if (add_space_prefix) {
    decoders.push_back(
        {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
  }
  Json tok = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens",
       AddedTokens(v, vocab, [](const std::string&) { return true; })},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "Metaspace"},
        {"replacement", "\u2581"},
        {"prepend_scheme", add_space_prefix ? "first" : "never"},
        {"split", false}}},
      {"decoder", {{"type", "Sequence"}, {"decoders", decoders}}}};
  model["vocab"] = std::move(vocab);
  model["merges"] = std::move(merges);
  tok["model"] = std::move(model);
  return tok;
}

// llama.cpp's WordPiece spelling (convert_hf_to_gguf BertModel.set_vocab):
// control tokens verbatim, a continuation "##x" as "x", any other token
// "x" as "\u2581x". Back to the Hugging Face spelling. Older converters kept
// every "[...]" token verbatim whatever its type, so such a token without
// the marker stays as it is too.
std::string WordPieceToken(const std::string& token, int64_t type) {
  static constexpr absl::string_view kMarker = "\u2581";
  if (type == kTypeControl) return token;
  if (absl::StartsWith(token, kMarker)) return token.substr(kMarker.size());
  if (token.size() >= 2 && token.front() == '[' && token.back() == ']') {
    return token;
  }
  return absl::StrCat("##", token);
}

// BERT's post-processor: [CLS] A [SEP] and [CLS] A [SEP] B [SEP] (type ids
// 0 then 1), each special token only when asked.
Json BertPostProcessor(const Vocab& v, absl::optional<int32_t> cls,
                       absl::optional<int32_t> sep) {
  auto special = [&](int32_t id, int type_id) {
    return Json{{"SpecialToken", {{"id", v.tokens[id]}, {"type_id", type_id}}}};
  };
  auto sequence = [](const char* id, int type_id) {
    return Json{{"Sequence", {{"id", id}, {"type_id", type_id}}}};
  };
  Json single = Json::array();
  Json pair = Json::array();
  Json specials = Json::object();
  if (cls.has_value()) {
    single.push_back(special(*cls, 0));
    pair.push_back(special(*cls, 0));
    specials[v.tokens[*cls]] = {{"id", v.tokens[*cls]},
                                {"ids", {*cls}},
                                {"tokens", {v.tokens[*cls]}}};
  }
  single.push_back(sequence("A", 0));
  pair.push_back(sequence("A", 0));
  if (sep.has_value()) {
    single.push_back(special(*sep, 0));
    pair.push_back(special(*sep, 0));
  }
  pair.push_back(sequence("B", 1));
  if (sep.has_value()) {
    pair.push_back(special(*sep, 1));
    specials[v.tokens[*sep]] = {{"id", v.tokens[*sep]},
                                {"ids", {*sep}},
                                {"tokens", {v.tokens[*sep]}}};
  }
  return Json{{"type", "TemplateProcessing"},
              {"single", single},
              {"pair", pair},
              {"special_tokens", specials}};
}

// tokenizer.ggml.model = bert: WordPiece with BERT's normalizer and
// pre-tokenizer. GGUF keeps no casing flag; llama.cpp's WPM tokenizer always
// lowercases, so the normalizer does (and strips accents, as BERT's
// uncased normalizer does).
absl::StatusOr<Json> BertWordPieceTokenizer(const MetadataReader& r,
                                            const Vocab& v) {
  Json vocab = Json::object();
  for (size_t id = 0; id < v.tokens.size(); ++id) {
    std::string token = WordPieceToken(v.tokens[id], TypeOf(v, id));
    if (!vocab.contains(token)) vocab[token] = id;  // first id wins
  }
  absl::optional<int32_t> unk = v.unk;
  if (!unk.has_value() && vocab.contains("[UNK]")) {
    unk = vocab["[UNK]"].get<int32_t>();
  }
  if (!unk.has_value()) {
    return r.Error("tokenizer.ggml.unknown_token_id",
                   "is missing and the vocabulary has no [UNK]");
  }
  Json model = {{"type", "WordPiece"},
                {"unk_token", WordPieceToken(v.tokens[*unk],
                                             TypeOf(v, *unk))},
                {"continuing_subword_prefix", "##"},
                {"max_input_chars_per_word", 100}};
  Json tok = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens",
       AddedTokens(v, vocab, [](const std::string&) { return true; })},
      {"normalizer",
       {{"type", "BertNormalizer"},
        {"clean_text", true},
        {"handle_chinese_chars", true},
        {"strip_accents", nullptr},
        {"lowercase", true}}},
      {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
      {"decoder",
       {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}}}};
  model["vocab"] = std::move(vocab);
  tok["model"] = std::move(model);
  return tok;
}

absl::StatusOr<GgufTokenizer> Convert(const GgufFile& file) {
  MetadataReader r(file);
  const GgufValue* model_value = file.Find(kModelKey);
  if (model_value == nullptr) {
    return absl::NotFoundError(
        absl::StrCat(file.path(), ": no metadata '", kModelKey, "'"));
  }
  ASSIGN_OR_RETURN(absl::optional<std::string> model,
                   r.OptionalString(kModelKey));
  ASSIGN_OR_RETURN(Vocab v, ReadVocab(r));

  Json tok;
  bool default_add_bos = false;
  if (*model == "gpt2") {
    ASSIGN_OR_RETURN(absl::optional<std::string> pre,
                     r.OptionalString(kPreKey));
    // llama.cpp treats a missing pre type as "default" (with a warning).
    const std::string pre_name = pre.value_or("default");
    const BpePreType* pre_type = FindBpePreType(pre_name);
    if (pre_type == nullptr) {
      return r.Error(kPreKey,
                     absl::StrCat("is \"", pre_name,
                                  "\", which inferd does not support; "
                                  "supported: ",
                                  SupportedBpePreTypes()));
    }
    default_add_bos = pre_type->add_bos;
    ASSIGN_OR_RETURN(tok, Gpt2Tokenizer(r, v, *pre_type));
  } else if (*model == "llama") {
    ASSIGN_OR_RETURN(absl::optional<bool> space_prefix,
                     r.OptionalBool("tokenizer.ggml.add_space_prefix"));
    default_add_bos = true;  // llama.cpp's default for SentencePiece
    ASSIGN_OR_RETURN(tok, LlamaSpmTokenizer(r, v, space_prefix.value_or(true)));
  } else if (*model == "bert") {
    ASSIGN_OR_RETURN(tok, BertWordPieceTokenizer(r, v));
  } else {
    return r.Error(kModelKey,
                   absl::StrCat("is \"", *model,
                                "\"; supported: gpt2, llama, bert"));
  }

  ASSIGN_OR_RETURN(absl::optional<bool> add_bos,
                   r.OptionalBool("tokenizer.ggml.add_bos_token"));
  ASSIGN_OR_RETURN(absl::optional<bool> add_eos,
                   r.OptionalBool("tokenizer.ggml.add_eos_token"));
  bool bos = false;
  bool eos = false;
  if (*model == "bert") {
    // [CLS] text [SEP]: CLS is the cls id or else BOS; SEP the separator id
    // or else EOS. gguf-py writes add_bos/add_eos (and add_sep) from BERT's
    // template; llama.cpp adds both by default.
    ASSIGN_OR_RETURN(absl::optional<bool> add_sep,
                     r.OptionalBool("tokenizer.ggml.add_sep_token"));
    const absl::optional<int32_t> cls = v.cls.has_value() ? v.cls : v.bos;
    const absl::optional<int32_t> sep = v.sep.has_value() ? v.sep : v.eos;
    const bool add_cls = add_bos.value_or(true) && cls.has_value();
    const bool add_end = (add_eos.value_or(true) || add_sep.value_or(false)) &&
                         sep.has_value();
    tok["post_processor"] =
        BertPostProcessor(v, add_cls ? cls : absl::nullopt,
                          add_end ? sep : absl::nullopt);
  } else {
    bos = add_bos.value_or(default_add_bos) && v.bos.has_value();
    eos = add_eos.value_or(false) && v.eos.has_value();
    tok["post_processor"] = TemplatePostProcessor(v, bos, eos);
  }

  GgufTokenizer out;
  try {
    out.tokenizer_json = tok.dump();
  } catch (const nlohmann::json::exception& e) {
    // dump() throws on invalid UTF-8 in a token.
    return r.Error(kTokensKey, absl::StrCat("cannot be written as JSON: ",
                                            e.what()));
  }
  TokenizerConfig& c = out.tokenizer_config;
  c.present = true;
  auto token = [&](const absl::optional<int32_t>& id) {
    return id.has_value() ? absl::optional<std::string>(v.tokens[*id])
                          : absl::optional<std::string>();
  };
  c.bos_token = token(v.bos);
  c.eos_token = token(v.eos);
  c.unk_token = token(v.unk);
  c.pad_token = token(v.pad);
  c.cls_token = token(v.cls);
  c.sep_token = token(v.sep);
  c.mask_token = token(v.mask);
  if (*model == "bert") {
    // gguf-py writes no cls id; llama.cpp uses BOS as CLS (and EOS as SEP
    // when there is no separator id).
    if (!v.cls.has_value()) c.cls_token = token(v.bos);
    if (!v.sep.has_value()) c.sep_token = token(v.eos);
    // The post-processor adds [CLS] / [SEP]; nothing Llama-style.
    c.add_bos_token = absl::nullopt;
    c.add_eos_token = absl::nullopt;
  } else {
    c.add_bos_token = bos;
    c.add_eos_token = eos;
  }
  ASSIGN_OR_RETURN(absl::optional<std::string> chat_template,
                   r.OptionalString(kChatTemplateKey));
  c.chat_template = chat_template.value_or("");
  const std::string named_prefix = absl::StrCat(kChatTemplateKey, ".");
  for (const auto& [key, value] : file.metadata()) {
    if (key.rfind(named_prefix, 0) != 0) continue;
    ASSIGN_OR_RETURN(absl::optional<std::string> t, r.OptionalString(key));
    c.named_chat_templates[key.substr(named_prefix.size())] = *t;
  }
  for (const absl::optional<int32_t>* id : {&v.eos, &v.eot, &v.eom}) {
    if (id->has_value() &&
        std::find(out.eos_token_ids.begin(), out.eos_token_ids.end(), **id) ==
            out.eos_token_ids.end()) {
      out.eos_token_ids.push_back(**id);
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<GgufTokenizer> LoadGgufTokenizer(const GgufFile& file) {
  try {
    return Convert(file);
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(
        file.path(), ": tokenizer metadata: ", e.what()));
  }
}

absl::StatusOr<GgufTokenizer> LoadGgufTokenizer(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, GgufFile::Open(path));
  return LoadGgufTokenizer(*file);
}

}  // namespace inferd
