#include "runtime/tokenizer/incremental_decoder.h"

#include <algorithm>

namespace inferd {
namespace {

// Context ids of the prompt decoded along with new ids.
constexpr size_t kPromptContext = 5;

bool EndsWithReplacementChar(const std::string& s) {
  return s.size() >= 3 && s.compare(s.size() - 3, 3, "\xEF\xBF\xBD") == 0;
}

}  // namespace

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tok,
                                       bool skip_special_tokens,
                                       absl::Span<const int32_t> prompt_ids)
    : tok_(tok), skip_special_tokens_(skip_special_tokens) {
  for (int32_t id : prompt_ids) {
    if (id >= 0 && static_cast<size_t>(id) < tok_.vocab_size())
      ids_.push_back(id);
  }
  read_offset_ = ids_.size();
  prefix_offset_ =
      ids_.size() > kPromptContext ? ids_.size() - kPromptContext : 0;
}

std::string IncrementalDecoder::DecodeRange(size_t begin, size_t end) const {
  auto text = tok_.Decode(absl::MakeConstSpan(ids_.data() + begin, end - begin),
                          skip_special_tokens_);
  return text.ok() ? *std::move(text) : std::string();
}

std::string IncrementalDecoder::Push(int32_t id) {
  if (id < 0 || static_cast<size_t>(id) >= tok_.vocab_size()) return "";
  ids_.push_back(id);
  const std::string prefix = DecodeRange(prefix_offset_, read_offset_);
  const std::string full = DecodeRange(prefix_offset_, ids_.size());
  if (full.size() <= prefix.size() || EndsWithReplacementChar(full) ||
      full.compare(0, prefix.size(), prefix) != 0) {
    return "";
  }
  std::string delta = full.substr(prefix.size());
  prefix_offset_ = read_offset_;
  read_offset_ = ids_.size();
  return delta;
}

std::string IncrementalDecoder::Flush() {
  if (read_offset_ >= ids_.size()) return "";
  const std::string prefix = DecodeRange(prefix_offset_, read_offset_);
  const std::string full = DecodeRange(prefix_offset_, ids_.size());
  prefix_offset_ = read_offset_ = ids_.size();
  if (full.size() <= prefix.size() ||
      full.compare(0, prefix.size(), prefix) != 0) {
    return "";
  }
  return full.substr(prefix.size());
}

}  // namespace inferd
