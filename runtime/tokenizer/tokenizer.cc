#include "runtime/tokenizer/tokenizer.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_join.h"
#include "runtime/common/status_macros.h"
#include "runtime/tokenizer/added_tokens.h"
#include "runtime/tokenizer/byte_level.h"
#include "runtime/tokenizer/decoders.h"
#include "runtime/tokenizer/json_util.h"
#include "runtime/tokenizer/models.h"
#include "runtime/tokenizer/normalized_string.h"
#include "runtime/tokenizer/normalizers.h"
#include "runtime/tokenizer/post_processors.h"
#include "runtime/tokenizer/pre_tokenizers.h"
#include "runtime/tokenizer/unicode_util.h"

namespace inferd {

using tokenizer_internal::AddedSplit;
using tokenizer_internal::AddedToken;
using tokenizer_internal::AddedTokenMatcher;
using tokenizer_internal::Json;
using tokenizer_internal::ModelToken;
using tokenizer_internal::NormalizedString;

Tokenizer::Tokenizer() = default;
Tokenizer::~Tokenizer() = default;

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromFile(
    const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad())
    return absl::InvalidArgumentError(absl::StrCat("cannot read ", path));
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = FromJson(ss.str());
  if (!tok.ok()) {
    // FromJson's messages say "tokenizer.json: ..."; name the file read.
    absl::string_view what = tok.status().message();
    absl::ConsumePrefix(&what, "tokenizer.json: ");
    return absl::Status(tok.status().code(), absl::StrCat(path, ": ", what));
  }
  return tok;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromJson(
    absl::string_view json_text) {
  using namespace tokenizer_internal;  // NOLINT: factory functions.
  std::unique_ptr<Tokenizer> tok(new Tokenizer());
  try {
    const Json j = Json::parse(json_text.begin(), json_text.end());
    if (!j.is_object()) {
      return absl::InvalidArgumentError(
          "tokenizer.json: top level must be an object");
    }
    if (!Has(j, "model")) {
      return absl::InvalidArgumentError("tokenizer.json: missing \"model\"");
    }
    ASSIGN_OR_RETURN(tok->model_, MakeModel(j.at("model")));
    if (Has(j, "normalizer")) {
      ASSIGN_OR_RETURN(tok->normalizer_, MakeNormalizer(j.at("normalizer")));
    }
    if (Has(j, "pre_tokenizer")) {
      ASSIGN_OR_RETURN(tok->pre_tokenizer_,
                       MakePreTokenizer(j.at("pre_tokenizer")));
    }
    if (Has(j, "post_processor")) {
      ASSIGN_OR_RETURN(tok->post_processor_,
                       MakePostProcessor(j.at("post_processor")));
    }
    if (Has(j, "decoder")) {
      ASSIGN_OR_RETURN(tok->decoder_, MakeDecoder(j.at("decoder")));
    }
    tok->vocab_size_ = tok->model_->VocabSize();
    if (Has(j, "added_tokens")) {
      for (const Json& a : j.at("added_tokens")) {
        AddedToken t;
        t.content = a.at("content").get<std::string>();
        t.id = a.at("id").get<int32_t>();
        t.special = GetBool(a, "special", false);
        t.lstrip = GetBool(a, "lstrip", false);
        t.rstrip = GetBool(a, "rstrip", false);
        t.single_word = GetBool(a, "single_word", false);
        t.normalized = GetBool(a, "normalized", !t.special);
        if (t.id < 0 || !IsValidUtf8(t.content)) {
          return absl::InvalidArgumentError(
              "tokenizer.json: added token with a negative id or invalid "
              "UTF-8");
        }
        tok->added_token_to_id_[t.content] = t.id;
        tok->added_id_to_token_[t.id] = t.content;
        if (t.special) tok->special_ids_.insert(t.id);
        tok->vocab_size_ =
            std::max(tok->vocab_size_, static_cast<size_t>(t.id) + 1);
        tok->added_tokens_.push_back(std::move(t));
      }
    }
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer.json: malformed: ", e.what()));
  }
  // Normalized added tokens are looked for in normalized text, so their
  // patterns are the normalized contents.
  std::vector<std::string> raw_patterns, norm_patterns;
  std::vector<AddedToken> raw_tokens, norm_tokens;
  for (const AddedToken& t : tok->added_tokens_) {
    if (t.normalized && tok->normalizer_ != nullptr) {
      NormalizedString ns(t.content);
      tok->normalizer_->Normalize(&ns);
      // As the `tokenizers` library (0.23) does, the vocabulary entry of a
      // normalized added token is its normalized content (llama2's
      // Prepend("▁") makes <unk> "▁<unk>", which decodes with its space).
      tok->added_id_to_token_[t.id] = ns.get();
      norm_patterns.push_back(ns.get());
      norm_tokens.push_back(t);
    } else if (t.normalized) {
      norm_patterns.push_back(t.content);
      norm_tokens.push_back(t);
    } else {
      raw_patterns.push_back(t.content);
      raw_tokens.push_back(t);
    }
  }
  tok->raw_matcher_ = std::make_unique<AddedTokenMatcher>(
      std::move(raw_patterns), std::move(raw_tokens));
  tok->normalized_matcher_ = std::make_unique<AddedTokenMatcher>(
      std::move(norm_patterns), std::move(norm_tokens));
  tok->id_to_token_.resize(tok->vocab_size_);
  for (size_t id = 0; id < tok->vocab_size_; ++id) {
    tok->id_to_token_[id] = tok->IdToToken(static_cast<int32_t>(id));
  }
  tok->defer_byte_map_ =
      tok->pre_tokenizer_ != nullptr && tok->pre_tokenizer_->EndsWithByteMap();
  return tok;
}

absl::optional<int32_t> Tokenizer::TokenToId(absl::string_view token) const {
  auto it = added_token_to_id_.find(token);
  if (it != added_token_to_id_.end()) return it->second;
  return model_->TokenToId(token);
}

std::string Tokenizer::IdToToken(int32_t id) const {
  auto it = added_id_to_token_.find(id);
  if (it != added_id_to_token_.end()) return it->second;
  const std::string* t = model_->IdToToken(id);
  return t == nullptr ? std::string() : *t;
}

int Tokenizer::NumSpecialTokensToAdd(bool pair) const {
  return post_processor_ == nullptr
             ? 0
             : static_cast<int>(post_processor_->AddedTokens(pair));
}

absl::Status Tokenizer::AppendModelTokens(const NormalizedString& sub,
                                          bool byte_map, int32_t type_id,
                                          int32_t sequence_id,
                                          Encoding* out) const {
  // Per-thread scratch: encoding allocates nothing per piece once warm.
  thread_local std::vector<ModelToken> toks;
  thread_local std::string mapped;
  thread_local std::vector<uint32_t> source;  // Mapped byte -> piece byte.
  toks.clear();
  const std::string& text = sub.get();
  bool mapping = false;
  if (byte_map) {
    // Printable ASCII maps to itself; anything else changes the bytes.
    for (unsigned char c : text) {
      if (c < '!' || c > '~') {
        mapping = true;
        break;
      }
    }
  }
  if (mapping) {
    // Every byte maps to a 1- or 2-byte character.
    const auto& table = tokenizer_internal::GetByteLevelTables().byte_to_utf8;
    mapped.resize(text.size() * 2);
    source.resize(text.size() * 2 + 1);
    size_t m = 0;
    for (size_t i = 0; i < text.size(); ++i) {
      const std::string& rep = table[static_cast<unsigned char>(text[i])];
      for (char b : rep) {
        mapped[m] = b;
        source[m++] = static_cast<uint32_t>(i);
      }
    }
    mapped.resize(m);
    source[m] = static_cast<uint32_t>(text.size());
  }
  RETURN_IF_ERROR(model_->Tokenize(
      mapping ? absl::string_view(mapped) : absl::string_view(text), &toks));
  for (const ModelToken& t : toks) {
    size_t start = t.start, end = t.end;
    if (mapping) {
      // A mapped character comes from one piece byte, so the bytes a token
      // covers map back to a contiguous byte range of the piece.
      start = source[t.start];
      end = t.end > t.start ? source[t.end - 1] + 1 : start;
    }
    out->ids.push_back(t.id);
    out->type_ids.push_back(type_id);
    out->tokens.push_back(static_cast<size_t>(t.id) < id_to_token_.size()
                              ? id_to_token_[t.id]
                              : std::string());
    out->offsets.push_back(sub.ToOriginal(start, end));
    out->special_tokens_mask.push_back(0);
    out->sequence_ids.push_back(sequence_id);
  }
  return absl::OkStatus();
}

void Tokenizer::AppendPieceTokens(NormalizedString piece, int32_t type_id,
                                  int32_t sequence_id, Encoding* out,
                                  absl::Status* status) const {
  if (pre_tokenizer_ == nullptr) {
    *status = AppendModelTokens(piece, false, type_id, sequence_id, out);
    return;
  }
  std::vector<NormalizedString> subs;
  subs.push_back(std::move(piece));
  if (defer_byte_map_) {
    pre_tokenizer_->PreTokenizeUnmapped(&subs);
  } else {
    pre_tokenizer_->PreTokenize(&subs);
  }
  for (const NormalizedString& sub : subs) {
    *status =
        AppendModelTokens(sub, defer_byte_map_, type_id, sequence_id, out);
    if (!status->ok()) return;
  }
}

absl::Status Tokenizer::EncodeSequence(absl::string_view text, int32_t type_id,
                                       int32_t sequence_id,
                                       Encoding* out) const {
  if (!tokenizer_internal::IsValidUtf8(text)) {
    return absl::InvalidArgumentError("input text is not valid UTF-8");
  }
  absl::Status status;
  auto push_added = [&](const AddedToken& t, const NormalizedString& ns,
                        size_t start, size_t end) {
    out->ids.push_back(t.id);
    out->type_ids.push_back(type_id);
    out->tokens.push_back(t.content);
    out->offsets.push_back(ns.ToOriginal(start, end));
    out->special_tokens_mask.push_back(t.special ? 1 : 0);
    out->sequence_ids.push_back(sequence_id);
  };
  NormalizedString whole(text, 0);
  const std::vector<AddedSplit> raw_splits = raw_matcher_->Split(text);
  for (const AddedSplit& raw : raw_splits) {
    if (raw.token >= 0) {
      push_added(raw_matcher_->token(raw.token), whole, raw.range.first,
                 raw.range.second);
      continue;
    }
    // A single split covering the text: no added-token offsets need `whole`.
    NormalizedString piece =
        raw_splits.size() == 1 ? std::move(whole)
                               : whole.Slice(raw.range.first, raw.range.second);
    if (normalizer_ != nullptr) normalizer_->Normalize(&piece);
    if (normalized_matcher_->empty()) {
      AppendPieceTokens(std::move(piece), type_id, sequence_id, out, &status);
      if (!status.ok()) return status;
      continue;
    }
    for (const AddedSplit& ns : normalized_matcher_->Split(piece.get())) {
      if (ns.token >= 0) {
        push_added(normalized_matcher_->token(ns.token), piece, ns.range.first,
                   ns.range.second);
        continue;
      }
      if (ns.range.first >= ns.range.second && !piece.empty()) continue;
      AppendPieceTokens(piece.Slice(ns.range.first, ns.range.second), type_id,
                        sequence_id, out, &status);
      if (!status.ok()) return status;
    }
  }
  return absl::OkStatus();
}

namespace {

void Truncate(Encoding* e, size_t n, TruncationSide side) {
  if (e->size() <= n) return;
  auto cut = [&](auto* v) {
    if (side == TruncationSide::kRight) {
      v->resize(n);
    } else {
      v->erase(v->begin(), v->end() - n);
    }
  };
  cut(&e->ids);
  cut(&e->type_ids);
  cut(&e->tokens);
  cut(&e->offsets);
  cut(&e->special_tokens_mask);
  cut(&e->sequence_ids);
}

absl::Status TruncateEncodings(Encoding* a, Encoding* b,
                               const TruncationParams& p, size_t max_length) {
  const size_t total = a->size() + (b ? b->size() : 0);
  if (max_length == 0) {
    Truncate(a, 0, p.side);
    if (b) Truncate(b, 0, p.side);
    return absl::OkStatus();
  }
  if (total <= max_length) return absl::OkStatus();
  const size_t to_remove = total - max_length;
  switch (p.strategy) {
    case TruncationStrategy::kLongestFirst: {
      if (b == nullptr) {
        Truncate(a, max_length, p.side);
        break;
      }
      size_t n1 = a->size(), n2 = b->size();
      const bool swap = n1 > n2;
      if (swap) std::swap(n1, n2);
      // n1 is the shorter one now.
      n2 = n1 > max_length ? n1 : std::max(n1, max_length - n1);
      if (n1 + n2 > max_length) {
        n1 = max_length / 2;
        n2 = n1 + max_length % 2;
      }
      if (swap) std::swap(n1, n2);
      Truncate(a, n1, p.side);
      Truncate(b, n2, p.side);
      break;
    }
    case TruncationStrategy::kOnlyFirst:
    case TruncationStrategy::kOnlySecond: {
      Encoding* target = p.strategy == TruncationStrategy::kOnlyFirst ? a : b;
      if (target == nullptr) {
        return absl::InvalidArgumentError(
            "truncation: only_second needs a second sequence");
      }
      if (target->size() <= to_remove) {
        return absl::InvalidArgumentError(
            "truncation: sequence to truncate is too short for max_length");
      }
      Truncate(target, target->size() - to_remove, p.side);
      break;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Encoding> Tokenizer::EncodeImpl(
    absl::string_view a, const absl::string_view* b, bool add_special_tokens,
    const TruncationParams* t) const {
  std::vector<Encoding> encs(b ? 2 : 1);
  RETURN_IF_ERROR(EncodeSequence(a, 0, 0, &encs[0]));
  if (b) RETURN_IF_ERROR(EncodeSequence(*b, 1, 1, &encs[1]));
  if (t != nullptr) {
    size_t max_length = t->max_length;
    const size_t added =
        add_special_tokens ? NumSpecialTokensToAdd(b != nullptr) : 0;
    if (added > max_length) {
      return absl::InvalidArgumentError(absl::StrCat(
          "truncation: max_length ", max_length, " is smaller than the ", added,
          " special tokens to add"));
    }
    max_length -= added;
    RETURN_IF_ERROR(
        TruncateEncodings(&encs[0], b ? &encs[1] : nullptr, *t, max_length));
  }
  if (post_processor_ != nullptr)
    post_processor_->Process(&encs, add_special_tokens);
  if (encs.size() == 1) return std::move(encs[0]);
  return tokenizer_internal::MergeEncodings(&encs);
}

absl::StatusOr<Encoding> Tokenizer::Encode(absl::string_view text,
                                           bool add_special_tokens) const {
  return EncodeImpl(text, nullptr, add_special_tokens, nullptr);
}

absl::StatusOr<Encoding> Tokenizer::EncodePair(absl::string_view a,
                                               absl::string_view b,
                                               bool add_special_tokens) const {
  return EncodeImpl(a, &b, add_special_tokens, nullptr);
}

absl::StatusOr<Encoding> Tokenizer::Encode(absl::string_view text,
                                           bool add_special_tokens,
                                           const TruncationParams& t) const {
  return EncodeImpl(text, nullptr, add_special_tokens, &t);
}

absl::StatusOr<Encoding> Tokenizer::EncodePair(
    absl::string_view a, absl::string_view b, bool add_special_tokens,
    const TruncationParams& t) const {
  return EncodeImpl(a, &b, add_special_tokens, &t);
}

absl::StatusOr<std::string> Tokenizer::Decode(absl::Span<const int32_t> ids,
                                              bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= vocab_size_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "token id ", id, " is out of range [0, ", vocab_size_, ")"));
    }
    if (skip_special_tokens && IsSpecial(id)) continue;
    if (!id_to_token_[id].empty()) {
      tokens.push_back(id_to_token_[id]);
      continue;
    }
    auto it = added_id_to_token_.find(id);
    if (it != added_id_to_token_.end()) {
      tokens.push_back(it->second);
      continue;
    }
    const std::string* t = model_->IdToToken(id);
    if (t == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", id, " has no token"));
    }
    tokens.push_back(*t);
  }
  if (decoder_ == nullptr) return absl::StrJoin(tokens, " ");
  decoder_->DecodeChain(&tokens);
  return absl::StrJoin(tokens, "");
}

}  // namespace inferd
