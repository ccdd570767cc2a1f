#include "runtime/engine/input_processor.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "runtime/common/field_error.h"
#include "runtime/common/status_macros.h"
#include "runtime/engine/rerank_format.h"

namespace inferd {
namespace {

// `path`: the request field the input came from.
absl::Status TooLong(absl::string_view path, absl::string_view what,
                     size_t index, size_t len, int64_t limit) {
  return FieldErrorMessage(path, absl::StrCat(
      what, " ", index, " has ", len, " tokens; the model takes at most ",
      limit, " (set truncate=true to cut it, or shorten it)"));
}

}  // namespace

TokenizingInputProcessor::TokenizingInputProcessor(
    std::string name, unsigned tasks, const Tokenizer* tokenizer,
    InputProcessorOptions options)
    : name_(std::move(name)),
      tasks_(tasks),
      tokenizer_(tokenizer),
      options_(std::move(options)) {}

absl::Status TokenizingInputProcessor::NeedTokenizer() const {
  if (tokenizer_ != nullptr) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "input processor ", name_, " has no tokenizer; send token ids"));
}

absl::StatusOr<PrefillSequence> TokenizingInputProcessor::FromEncoding(
    const Encoding& e) const {
  PrefillSequence s;
  s.ids = e.ids;
  bool any_type = false;
  for (int32_t t : e.type_ids) any_type |= (t != 0);
  if (any_type) s.type_ids = e.type_ids;
  return s;
}

absl::Status TokenizingInputProcessor::FitLength(size_t index, bool truncate, bool left,
                                       PrefillSequence* seq) const {
  const size_t limit = static_cast<size_t>(options_.max_input_tokens);
  if (options_.append_eos &&
      (seq->ids.empty() || seq->ids.back() != *options_.append_eos)) {
    seq->ids.push_back(*options_.append_eos);
    if (!seq->type_ids.empty()) seq->type_ids.push_back(0);
  }
  if (seq->ids.size() <= limit) return absl::OkStatus();
  if (!truncate) return TooLong("texts", "input", index, seq->ids.size(), limit);
  const size_t drop = seq->ids.size() - limit;
  if (left) {
    seq->ids.erase(seq->ids.begin(), seq->ids.begin() + drop);
    if (!seq->type_ids.empty()) {
      seq->type_ids.erase(seq->type_ids.begin(), seq->type_ids.begin() + drop);
    }
    seq->pool_start = std::max<int32_t>(0, seq->pool_start - static_cast<int32_t>(drop));
  } else {
    // Keep the final EOS of decoder embedders: it carries the embedding.
    const bool keep_last = options_.append_eos.has_value();
    int32_t last = seq->ids.back();
    seq->ids.resize(limit);
    if (!seq->type_ids.empty()) seq->type_ids.resize(limit);
    if (keep_last) seq->ids.back() = last;
    seq->pool_start = std::min<int32_t>(seq->pool_start,
                                        static_cast<int32_t>(limit) - 1);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<PrefillSequence>>
TokenizingInputProcessor::ProcessEmbed(const EmbedParams& params) const {
  if ((tasks_ & kEmbed) == 0) return Refuse("embed");
  std::vector<PrefillSequence> out;
  if (!params.token_ids.empty()) {
    for (size_t i = 0; i < params.token_ids.size(); ++i) {
      PrefillSequence s;
      s.ids = params.token_ids[i];
      RETURN_IF_ERROR(FitLength(i, params.truncate, params.truncate_left, &s));
      out.push_back(std::move(s));
    }
    return out;
  }
  RETURN_IF_ERROR(NeedTokenizer());
  std::string prefix = params.prompt;
  if (prefix.empty()) {
    std::string name = params.prompt_name.empty() ? options_.default_prompt_name
                                                  : params.prompt_name;
    if (!name.empty()) {
      auto it = options_.prompts.find(name);
      if (it == options_.prompts.end()) {
        return FieldError("prompt_name", absl::StrCat(
            ": '", name, "' is not a prompt of this model"));
      }
      prefix = it->second;
    }
  }
  int32_t prompt_tokens = 0;
  if (!prefix.empty() && !options_.include_prompt_in_pooling) {
    // Prompt tokens as they appear at the start of the encoded input:
    // leading special tokens plus the prefix's own tokens.
    ASSIGN_OR_RETURN(Encoding pe, tokenizer_->Encode(prefix, true));
    int32_t n = static_cast<int32_t>(pe.ids.size());
    while (n > 0 && pe.special_tokens_mask.size() == pe.ids.size() &&
           pe.special_tokens_mask[n - 1]) {
      --n;  // trailing specials ([SEP], </s>, EOS) are not part of the prompt
    }
    prompt_tokens = n;
  }
  for (size_t i = 0; i < params.texts.size(); ++i) {
    const std::string text = prefix + params.texts[i];
    auto enc = tokenizer_->Encode(text, true);
    if (!enc.ok()) {
      return absl::Status(enc.status().code(),
                          absl::StrCat("texts[", i, "]: ", enc.status().message()));
    }
    ASSIGN_OR_RETURN(PrefillSequence s, FromEncoding(*enc));
    s.pool_start = std::min<int32_t>(prompt_tokens,
                                     static_cast<int32_t>(s.ids.size()) - 1);
    if (s.ids.size() > static_cast<size_t>(options_.max_input_tokens) &&
        params.truncate && !options_.append_eos) {
      // Let the tokenizer truncate so special tokens stay in place.
      TruncationParams t;
      t.max_length = static_cast<size_t>(options_.max_input_tokens);
      t.side = params.truncate_left ? TruncationSide::kLeft
                                    : TruncationSide::kRight;
      ASSIGN_OR_RETURN(Encoding te, tokenizer_->Encode(text, true, t));
      ASSIGN_OR_RETURN(PrefillSequence ts, FromEncoding(te));
      ts.pool_start = params.truncate_left ? 0 : s.pool_start;
      s = std::move(ts);
    }
    RETURN_IF_ERROR(FitLength(i, params.truncate, params.truncate_left, &s));
    if (s.ids.empty()) {
      return FieldError(absl::StrCat("texts[", i, "]"), " has no tokens");
    }
    out.push_back(std::move(s));
  }
  return out;
}

absl::StatusOr<std::vector<PrefillSequence>>
TokenizingInputProcessor::ProcessClassify(const ClassifyParams& params) const {
  if ((tasks_ & kClassify) == 0) return Refuse("classify");
  RETURN_IF_ERROR(NeedTokenizer());
  std::vector<PrefillSequence> out;
  const size_t limit = static_cast<size_t>(options_.max_input_tokens);
  const size_t n = params.texts.empty() ? params.pairs.size() : params.texts.size();
  for (size_t i = 0; i < n; ++i) {
    absl::StatusOr<Encoding> enc;
    TruncationParams t;
    t.max_length = limit;
    t.strategy = TruncationStrategy::kLongestFirst;
    if (params.texts.empty()) {
      const auto& [a, b] = params.pairs[i];
      enc = params.truncate ? tokenizer_->EncodePair(a, b, true, t)
                            : tokenizer_->EncodePair(a, b, true);
    } else {
      enc = params.truncate ? tokenizer_->Encode(params.texts[i], true, t)
                            : tokenizer_->Encode(params.texts[i], true);
    }
    if (!enc.ok()) {
      return absl::Status(enc.status().code(),
                          absl::StrCat("input ", i, ": ", enc.status().message()));
    }
    if (enc->ids.size() > limit) {
      return TooLong("texts", "input", i, enc->ids.size(),
                     options_.max_input_tokens);
    }
    ASSIGN_OR_RETURN(PrefillSequence s, FromEncoding(*enc));
    out.push_back(std::move(s));
  }
  return out;
}

absl::StatusOr<std::vector<PrefillSequence>>
TokenizingInputProcessor::ProcessRerank(const RerankParams& params) const {
  if ((tasks_ & kRerank) == 0) return Refuse("rerank");
  RETURN_IF_ERROR(NeedTokenizer());
  std::vector<PrefillSequence> out;
  const size_t limit = static_cast<size_t>(options_.max_input_tokens);
  ASSIGN_OR_RETURN(Encoding q, tokenizer_->Encode(params.query, false));
  const size_t specials = static_cast<size_t>(tokenizer_->NumSpecialTokensToAdd(true));
  if (q.ids.size() + specials + 1 > limit) {
    return FieldError("query", absl::StrCat(
        " has ", q.ids.size(), " tokens; with a document it must fit in ",
        limit, " tokens (shorten the query)"));
  }
  TruncationParams t;
  t.max_length = limit;
  t.strategy = TruncationStrategy::kOnlySecond;
  for (size_t i = 0; i < params.documents.size(); ++i) {
    auto enc = params.truncate
                   ? tokenizer_->EncodePair(params.query, params.documents[i], true, t)
                   : tokenizer_->EncodePair(params.query, params.documents[i], true);
    if (!enc.ok()) {
      return absl::Status(enc.status().code(),
                          absl::StrCat("documents[", i, "]: ",
                                       enc.status().message()));
    }
    if (enc->ids.size() > limit) {
      return TooLong("documents", "query + document", i, enc->ids.size(),
                     options_.max_input_tokens);
    }
    ASSIGN_OR_RETURN(PrefillSequence s, FromEncoding(*enc));
    out.push_back(std::move(s));
  }
  return out;
}

namespace {

class DecoderRerankInput : public InputProcessor {
 public:
  DecoderRerankInput(const Tokenizer* tokenizer, InputProcessorOptions options)
      : tokenizer_(tokenizer), options_(std::move(options)) {}

  absl::string_view name() const override { return "decoder_rerank_prompt"; }

  absl::StatusOr<std::vector<PrefillSequence>> ProcessRerank(
      const RerankParams& params) const override {
    const RerankFormat* f = options_.rerank_format.get();
    if (tokenizer_ == nullptr || f == nullptr) {
      return absl::FailedPreconditionError(
          "decoder_rerank_prompt needs the model's tokenizer and rerank "
          "format");
    }
    ASSIGN_OR_RETURN(Encoding prefix, EncodeParts(f->prefix));
    ASSIGN_OR_RETURN(Encoding suffix, EncodeParts(f->suffix));
    const size_t limit = static_cast<size_t>(options_.max_input_tokens);
    const size_t fixed = prefix.ids.size() + suffix.ids.size();
    if (fixed >= limit) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the rerank prompt alone has ", fixed,
          " tokens; the model takes at most ", limit));
    }
    std::vector<PrefillSequence> out;
    out.reserve(params.documents.size());
    for (size_t i = 0; i < params.documents.size(); ++i) {
      ASSIGN_OR_RETURN(Encoding pair,
                       EncodeParts(f->Pair(params.query, params.documents[i])));
      if (fixed + pair.ids.size() > limit) {
        if (!params.truncate) {
          return TooLong("documents", "query + document", i,
                         fixed + pair.ids.size(), options_.max_input_tokens);
        }
        pair.ids.resize(limit - fixed);
      }
      PrefillSequence seq;
      seq.ids.reserve(fixed + pair.ids.size());
      seq.ids.insert(seq.ids.end(), prefix.ids.begin(), prefix.ids.end());
      seq.ids.insert(seq.ids.end(), pair.ids.begin(), pair.ids.end());
      seq.ids.insert(seq.ids.end(), suffix.ids.begin(), suffix.ids.end());
      out.push_back(std::move(seq));
    }
    return out;
  }

 private:
  // `text` without special tokens, each part between {split} markers
  // tokenized apart (ids only).
  absl::StatusOr<Encoding> EncodeParts(const std::string& text) const {
    Encoding out;
    for (absl::string_view part : absl::StrSplit(text, kRerankSplit)) {
      if (part.empty()) continue;
      ASSIGN_OR_RETURN(Encoding e, tokenizer_->Encode(std::string(part), false));
      out.ids.insert(out.ids.end(), e.ids.begin(), e.ids.end());
    }
    return out;
  }

  const Tokenizer* tokenizer_;
  const InputProcessorOptions options_;
};

}  // namespace

std::unique_ptr<InputProcessor> NewDecoderRerankInput(
    const Tokenizer* tokenizer, InputProcessorOptions options) {
  return std::make_unique<DecoderRerankInput>(tokenizer, std::move(options));
}

absl::StatusOr<std::vector<int32_t>> TokenizingInputProcessor::ProcessPrompt(
    const GenerateParams& params) const {
  if ((tasks_ & kPrompt) == 0) return Refuse("generate");
  if (!params.messages.empty()) {
    RETURN_IF_ERROR(NeedTokenizer());
    if (options_.chat == nullptr) {
      return absl::FailedPreconditionError(
          "this model cannot render chat messages; send a prompt");
    }
    ASSIGN_OR_RETURN(std::string text,
                     options_.chat->Render(params.messages,
                                           params.add_generation_prompt,
                                           params.tools));
    ASSIGN_OR_RETURN(Encoding enc,
                     tokenizer_->Encode(text, params.add_special_tokens));
    return std::move(enc.ids);
  }
  if (!params.prompt.has_value()) return params.prompt_token_ids;
  RETURN_IF_ERROR(NeedTokenizer());
  ASSIGN_OR_RETURN(Encoding enc,
                   tokenizer_->Encode(*params.prompt, params.add_special_tokens));
  return std::move(enc.ids);
}

}  // namespace inferd
