// Byte-pair encoding (Sennrich et al.): a word starts as characters and the
// lowest-ranked adjacent pair in the merge table is merged until none is
// left. Merges are applied with a priority queue over a linked list of
// symbols; results for short words are kept in a bounded, sharded cache.
#include <algorithm>
#include <array>
#include <cstdio>
#include <functional>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/tokenizer/models.h"
#include "runtime/tokenizer/unicode_util.h"

namespace inferd {
namespace tokenizer_internal {
namespace {

struct CachedSymbol {
  int32_t id;
  uint32_t len;  // Bytes of the word this symbol covers.
};

// Bounded word -> symbols cache; when a shard is full new words are simply
// not cached, so results never depend on cache state.
class WordCache {
 public:
  explicit WordCache(size_t capacity) : per_shard_(capacity / kShards + 1) {}

  // On a hit, appends the word's tokens (offsets within the word) to `out`.
  // `base` is added to the offsets.
  bool Lookup(absl::string_view word, size_t base,
              std::vector<ModelToken>* out) const {
    const Shard& s = shards_[ShardOf(word)];
    std::shared_lock<std::shared_mutex> lock(s.mu);
    auto it = s.map.find(word);
    if (it == s.map.end()) return false;
    uint32_t pos = static_cast<uint32_t>(base);
    for (const CachedSymbol& sym : it->second) {
      out->push_back({sym.id, pos, pos + sym.len});
      pos += sym.len;
    }
    return true;
  }

  void Insert(absl::string_view word, const std::vector<CachedSymbol>& syms) {
    Shard& s = shards_[ShardOf(word)];
    std::unique_lock<std::shared_mutex> lock(s.mu);
    if (s.map.size() >= per_shard_) return;
    s.map.emplace(std::string(word), syms);
  }

 private:
  static constexpr size_t kShards = 32;
  // std::shared_mutex rather than absl::Mutex: every word takes this lock,
  // and absl::Mutex's deadlock detection (on in the distribution's build)
  // costs more than the lookup itself.
  struct Shard {
    mutable std::shared_mutex mu;
    absl::flat_hash_map<std::string, std::vector<CachedSymbol>> map;  // mu
  };
  static size_t ShardOf(absl::string_view word) {
    return absl::Hash<absl::string_view>()(word) % kShards;
  }
  size_t per_shard_;
  mutable std::array<Shard, kShards> shards_;
};

struct MergeInfo {
  uint32_t rank;
  int32_t new_id;
};

inline uint64_t PairKey(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) |
         static_cast<uint32_t>(b);
}

class BpeModel : public Model {
 public:
  static constexpr size_t kCacheCapacity = 1 << 16;
  static constexpr size_t kMaxCachedWordLen = 256;

  BpeModel() : cache_(kCacheCapacity) {}

  absl::Status Init(const Json& j) {
    if (!Has(j, "vocab") || !j.at("vocab").is_object()) {
      return absl::InvalidArgumentError(
          "tokenizer.json: BPE model needs a \"vocab\" object");
    }
    for (const auto& kv : j.at("vocab").items()) {
      vocab_.Add(kv.key(), kv.value().get<int32_t>());
    }
    if (Has(j, "unk_token")) {
      auto id = vocab_.Find(GetString(j, "unk_token"));
      if (id) unk_id_ = *id;
    }
    prefix_ = GetString(j, "continuing_subword_prefix");
    suffix_ = GetString(j, "end_of_word_suffix");
    fuse_unk_ = GetBool(j, "fuse_unk", false);
    byte_fallback_ = GetBool(j, "byte_fallback", false);
    ignore_merges_ = GetBool(j, "ignore_merges", false);
    if (byte_fallback_) {
      for (int b = 0; b < 256; ++b) {
        char buf[8];
        std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
        auto id = vocab_.Find(buf);
        byte_ids_[b] = id ? *id : -1;
      }
    }
    // Characters below U+0800 (ASCII and the byte-level alphabet) are looked
    // up by code point when no prefix or suffix is glued to them.
    if (prefix_.empty() && suffix_.empty()) {
      char_ids_.assign(kCharTable, -1);
      for (char32_t c = 0; c < kCharTable; ++c) {
        if (auto id = vocab_.Find(EncodeUtf8(c))) char_ids_[c] = *id;
      }
    }
    if (!Has(j, "merges")) return absl::OkStatus();
    const Json& merges = j.at("merges");
    if (!merges.is_array()) {
      return absl::InvalidArgumentError(
          "tokenizer.json: BPE \"merges\" must be an array");
    }
    merges_.reserve(merges.size());
    uint32_t rank = 0;
    bool metaspace_joined = false;
    for (const Json& m : merges) {
      std::string a, b;
      if (m.is_string()) {
        const std::string s = m.get<std::string>();
        // "a b"; when tokens themselves contain spaces, the separator is
        // the first space whose sides and concatenation are all in vocab.
        size_t sp = s.find(' ', 1);
        for (size_t cand = sp; cand != std::string::npos && cand + 1 < s.size();
             cand = s.find(' ', cand + 1)) {
          const std::string ca = s.substr(0, cand), cb = s.substr(cand + 1);
          if (vocab_.Find(ca) && vocab_.Find(cb) && vocab_.Find(ca + cb)) {
            sp = cand;
            break;
          }
        }
        if (sp == std::string::npos || sp + 1 >= s.size()) {
          return absl::InvalidArgumentError(
              absl::StrCat("tokenizer.json: malformed merge \"", s, "\""));
        }
        a = s.substr(0, sp);
        b = s.substr(sp + 1);
      } else if (m.is_array() && m.size() == 2) {
        a = m[0].get<std::string>();
        b = m[1].get<std::string>();
      } else {
        return absl::InvalidArgumentError("tokenizer.json: malformed merge");
      }
      auto ida = vocab_.Find(a);
      auto idb = vocab_.Find(b);
      std::string merged = a;
      const size_t skip =
          (!prefix_.empty() && b.compare(0, prefix_.size(), prefix_) == 0)
              ? prefix_.size()
              : 0;
      merged.append(b, skip, std::string::npos);
      auto idm = vocab_.Find(merged);
      if (!ida || !idb || !idm) {
        return absl::InvalidArgumentError(
            absl::StrCat("tokenizer.json: merge \"", a, " ", b,
                         "\" uses a token not in the vocab"));
      }
      merges_[PairKey(*ida, *idb)] = MergeInfo{rank, *idm};
      const bool b_starts = b.compare(0, 3, kMetaspace) == 0;
      const bool a_ends =
          a.size() >= 3 && a.compare(a.size() - 3, 3, kMetaspace) == 0;
      if (b_starts && !a_ends) metaspace_joined = true;
      ++rank;
    }
    // Splitting a word before U+2581 is exact when no merge joins a
    // character other than U+2581 to a token starting with it, U+2581 is a
    // token (so it never fuses with an unknown neighbour), and no
    // continuing-subword prefix or end-of-word suffix depends on word edges.
    split_before_metaspace_ = !metaspace_joined && !ignore_merges_ &&
                              prefix_.empty() && suffix_.empty() &&
                              vocab_.Find(kMetaspace).has_value();
    return absl::OkStatus();
  }

  absl::Status Tokenize(absl::string_view word,
                        std::vector<ModelToken>* out) const override {
    if (word.empty()) return absl::OkStatus();
    if (ignore_merges_) {
      if (auto id = vocab_.Find(word)) {
        out->push_back({*id, 0, static_cast<uint32_t>(word.size())});
        return absl::OkStatus();
      }
    }
    if (!split_before_metaspace_) {
      TokenizeChunk(word, 0, out);
      return absl::OkStatus();
    }
    // Cut before every U+2581 that follows another character: no merge
    // joins across such a point (checked at load), so the chunks tokenize
    // independently, and short ones hit the word cache.
    size_t start = 0;
    for (size_t i = 1; i + 3 <= word.size(); ++i) {
      if (word.compare(i, 3, kMetaspace) == 0 &&
          !(i >= 3 && word.compare(i - 3, 3, kMetaspace) == 0)) {
        TokenizeChunk(word.substr(start, i - start), start, out);
        start = i;
      }
    }
    TokenizeChunk(word.substr(start), start, out);
    return absl::OkStatus();
  }

  absl::optional<int32_t> TokenToId(absl::string_view token) const override {
    return vocab_.Find(token);
  }
  const std::string* IdToToken(int32_t id) const override {
    return vocab_.Token(id);
  }
  size_t VocabSize() const override { return vocab_.size(); }

 private:
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
    uint32_t len;
  };
  struct QueueEntry {
    uint32_t rank;
    int32_t pos;
    int32_t new_id;
    int32_t left;  // The pair's ids when the entry was made.
    int32_t right;
    bool operator>(const QueueEntry& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };

  // Appends the tokens of `chunk`, which starts at byte `base` of the word.
  void TokenizeChunk(absl::string_view chunk, size_t base,
                     std::vector<ModelToken>* out) const {
    const bool cacheable = chunk.size() < kMaxCachedWordLen;
    if (cacheable && cache_.Lookup(chunk, base, out)) return;
    thread_local std::vector<CachedSymbol> syms;
    MergeWord(chunk, &syms);
    if (cacheable) cache_.Insert(chunk, syms);
    uint32_t pos = static_cast<uint32_t>(base);
    for (const CachedSymbol& s : syms) {
      out->push_back({s.id, pos, pos + s.len});
      pos += s.len;
    }
  }

  // Vocabulary id of the character `s` at the start (is_first) or end
  // (is_last) of a word, if it has one.
  absl::optional<int32_t> CharId(absl::string_view s, bool glue) const {
    if (!glue && s.size() <= 2 && !char_ids_.empty()) {
      size_t len;
      const char32_t c = DecodeUtf8(s, 0, &len);
      if (len == s.size() && c < kCharTable) {
        const int32_t id = char_ids_[c];
        if (id >= 0) return id;
        return absl::nullopt;
      }
    }
    return vocab_.Find(s);
  }

  void MergeWord(absl::string_view w, std::vector<CachedSymbol>* out) const {
    thread_local std::vector<Symbol> symbols_buffer;
    std::vector<Symbol>& symbols = symbols_buffer;
    symbols.clear();
    symbols.reserve(w.size());
    auto add = [&symbols](int32_t id, uint32_t len) {
      const int32_t idx = static_cast<int32_t>(symbols.size());
      symbols.push_back({id, idx - 1, idx + 1, len});
    };
    int32_t unk_pending_len = -1;  // Bytes of a pending (fused) unknown.
    auto flush_unk = [&]() {
      if (unk_pending_len >= 0) {
        add(unk_id_, static_cast<uint32_t>(unk_pending_len));
        unk_pending_len = -1;
      }
    };
    std::string buf;
    for (size_t i = 0; i < w.size();) {
      const size_t len =
          std::min(Utf8CharLen(static_cast<unsigned char>(w[i])), w.size() - i);
      const bool is_first = i == 0;
      const bool is_last = i + len >= w.size();
      absl::string_view s = w.substr(i, len);
      const bool glue =
          (!is_first && !prefix_.empty()) || (is_last && !suffix_.empty());
      if (glue) {
        buf.clear();
        if (!is_first) buf.append(prefix_);
        buf.append(s.data(), s.size());
        if (is_last) buf.append(suffix_);
        s = buf;
      }
      i += len;
      if (auto id = CharId(s, glue)) {
        flush_unk();
        add(*id, static_cast<uint32_t>(len));
        continue;
      }
      if (byte_fallback_) {
        bool all = true;
        for (unsigned char b : s) all = all && byte_ids_[b] >= 0;
        if (all) {
          flush_unk();
          // Each byte token covers one byte of the word; any prefix or
          // suffix bytes are attributed to the character's last byte.
          for (size_t k = 0; k < s.size(); ++k) {
            add(byte_ids_[static_cast<unsigned char>(s[k])], k < len ? 1 : 0);
          }
          continue;
        }
      }
      if (unk_id_ >= 0) {
        if (unk_pending_len >= 0 && fuse_unk_) {
          unk_pending_len += static_cast<int32_t>(len);
        } else {
          flush_unk();
          unk_pending_len = static_cast<int32_t>(len);
        }
      }
    }
    flush_unk();
    if (!symbols.empty()) symbols.back().next = -1;

    // A min-heap over a reused buffer (std::priority_queue cannot reuse
    // its storage across calls).
    thread_local std::vector<QueueEntry> heap_buffer;
    std::vector<QueueEntry>& heap = heap_buffer;
    heap.clear();
    const std::greater<QueueEntry> later;
    auto push_pair = [&](int32_t pos) {
      const int32_t next = symbols[pos].next;
      if (next < 0) return;
      auto it = merges_.find(PairKey(symbols[pos].id, symbols[next].id));
      if (it != merges_.end()) {
        heap.push_back({it->second.rank, pos, it->second.new_id,
                        symbols[pos].id, symbols[next].id});
        std::push_heap(heap.begin(), heap.end(), later);
      }
    };
    for (int32_t p = 0; p + 1 < static_cast<int32_t>(symbols.size()); ++p) {
      push_pair(p);
    }
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), later);
      const QueueEntry top = heap.back();
      heap.pop_back();
      Symbol& cur = symbols[top.pos];
      if (cur.len == 0 && cur.id < 0) continue;  // Removed.
      if (cur.next < 0) continue;
      Symbol& right = symbols[cur.next];
      // The pair the entry was made for is still there: its merge is the
      // entry's. Otherwise an entry is still applied when the pair now there
      // merges into the same token (as the reference implementation does).
      if (cur.id != top.left || right.id != top.right) {
        auto it = merges_.find(PairKey(cur.id, right.id));
        if (it == merges_.end() || it->second.new_id != top.new_id) continue;
      }
      // Merge `right` into `cur`.
      cur.id = top.new_id;
      cur.len += right.len;
      const int32_t right_next = right.next;
      right.id = -1;
      right.len = 0;
      right.next = -1;
      cur.next = right_next;
      if (right_next >= 0) symbols[right_next].prev = top.pos;
      if (cur.prev >= 0) push_pair(cur.prev);
      push_pair(top.pos);
    }
    out->clear();
    for (const Symbol& s : symbols) {
      if (s.id >= 0) out->push_back({s.id, s.len});
    }
  }

  Vocab vocab_;
  absl::flat_hash_map<uint64_t, MergeInfo> merges_;
  std::string prefix_;
  std::string suffix_;
  int32_t unk_id_ = -1;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  std::array<int32_t, 256> byte_ids_{};
  static constexpr char32_t kCharTable = 0x800;
  static constexpr char kMetaspace[] = "\xE2\x96\x81";  // U+2581
  bool split_before_metaspace_ = false;
  // Code point -> id or -1; empty when a prefix or suffix is configured.
  std::vector<int32_t> char_ids_;
  mutable WordCache cache_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> MakeBpeModel(const Json& j) {
  auto model = std::make_unique<BpeModel>();
  absl::Status s = model->Init(j);
  if (!s.ok()) return s;
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace tokenizer_internal
}  // namespace inferd
