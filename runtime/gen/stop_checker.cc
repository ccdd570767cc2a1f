#include "runtime/gen/stop_checker.h"

#include <algorithm>

namespace inferd {

StopChecker::StopChecker(const SamplingParams& params,
                         absl::Span<const int32_t> eos_token_ids,
                         int32_t max_new_tokens)
    : stop_token_ids_(params.stop_token_ids),
      eos_token_ids_(eos_token_ids.begin(), eos_token_ids.end()),
      include_stop_str_(params.include_stop_str_in_output),
      ignore_eos_(params.ignore_eos),
      min_tokens_(params.min_tokens),
      max_new_tokens_(max_new_tokens) {
  for (const std::string& s : params.stop) {
    if (!s.empty()) stops_.push_back(s);
  }
}

void StopChecker::Release(size_t n, StopCheckResult* out) {
  n = std::min(n, pending_.size());
  out->text.append(pending_, 0, n);
  released_.append(pending_, 0, n);
  pending_.erase(0, n);
  min_match_end_ = min_match_end_ > n ? min_match_end_ - n : 0;
}

size_t StopChecker::HeldSuffixLength() const {
  size_t held = 0;
  const absl::string_view text(pending_);
  for (const std::string& s : stops_) {
    for (size_t k = std::min(s.size() - 1, text.size()); k > held; --k) {
      if (text.substr(text.size() - k) == absl::string_view(s).substr(0, k)) {
        held = k;
        break;
      }
    }
  }
  return held;
}

FinishReason StopChecker::StopTokenFinish(int32_t token_id, int32_t n) const {
  // min_tokens tokens must precede a stop token.
  if (n - 1 < min_tokens_) return FinishReason::kNone;
  auto contains = [token_id](const std::vector<int32_t>& ids) {
    return std::find(ids.begin(), ids.end(), token_id) != ids.end();
  };
  if (!ignore_eos_ && contains(eos_token_ids_)) return FinishReason::kEos;
  if (contains(stop_token_ids_)) return FinishReason::kStop;
  return FinishReason::kNone;
}

FinishReason StopChecker::TokenFinish(int32_t token_id, int32_t n) const {
  const FinishReason reason = StopTokenFinish(token_id, n);
  if (reason != FinishReason::kNone) return reason;
  if (max_new_tokens_ > 0 && n >= max_new_tokens_) return FinishReason::kLength;
  return FinishReason::kNone;
}

StopCheckResult StopChecker::Append(int32_t token_id,
                                    absl::string_view text_delta) {
  StopCheckResult out;
  if (finished_) return out;
  ++num_tokens_;

  // Tokens that end the generation.
  {
    const FinishReason reason = StopTokenFinish(token_id, num_tokens_);
    if (reason != FinishReason::kNone) {
      if (include_stop_str_)
        pending_.append(text_delta.data(), text_delta.size());
      Release(pending_.size(), &out);
      out.finish_reason = reason;
      out.stop_token_id = token_id;
      finished_ = true;
      return out;
    }
  }

  pending_.append(text_delta.data(), text_delta.size());
  if (!stops_.empty()) {
    if (num_tokens_ >= min_tokens_) {
      // The match ending first (then starting first) among those ending
      // after min_match_end_.
      size_t best_start = std::string::npos;
      size_t best_end = std::string::npos;
      const std::string* best = nullptr;
      for (const std::string& s : stops_) {
        const size_t from =
            min_match_end_ + 1 > s.size() ? min_match_end_ + 1 - s.size() : 0;
        const size_t pos = pending_.find(s, from);
        if (pos == std::string::npos) continue;
        const size_t end = pos + s.size();
        if (best == nullptr || end < best_end ||
            (end == best_end && pos < best_start)) {
          best = &s;
          best_start = pos;
          best_end = end;
        }
      }
      if (best != nullptr) {
        Release(include_stop_str_ ? best_end : best_start, &out);
        pending_.clear();
        out.finish_reason = FinishReason::kStop;
        out.stop_string = *best;
        finished_ = true;
        return out;
      }
    }
    Release(pending_.size() - HeldSuffixLength(), &out);
    if (num_tokens_ < min_tokens_) min_match_end_ = pending_.size();
  } else {
    Release(pending_.size(), &out);
  }

  if (max_new_tokens_ > 0 && num_tokens_ >= max_new_tokens_) {
    Release(pending_.size(), &out);
    out.finish_reason = FinishReason::kLength;
    finished_ = true;
  }
  return out;
}

StopCheckResult StopChecker::Finish(FinishReason reason,
                                    absl::string_view final_text) {
  StopCheckResult out;
  if (finished_) return out;
  pending_.append(final_text.data(), final_text.size());
  Release(pending_.size(), &out);
  out.finish_reason = reason;
  finished_ = true;
  return out;
}

}  // namespace inferd
