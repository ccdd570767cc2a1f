#include "runtime/loader/torch_pickle.h"

#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "device/bf16.h"
#include "runtime/common/status_macros.h"

namespace inferd {
namespace {

// ------------------------------------------------------------------ zip

uint16_t U16(absl::string_view b, size_t at) {
  return static_cast<uint16_t>(static_cast<uint8_t>(b[at]) |
                               (static_cast<uint8_t>(b[at + 1]) << 8));
}
uint32_t U32(absl::string_view b, size_t at) {
  return static_cast<uint32_t>(U16(b, at)) |
         (static_cast<uint32_t>(U16(b, at + 2)) << 16);
}
uint64_t U64(absl::string_view b, size_t at) {
  return static_cast<uint64_t>(U32(b, at)) |
         (static_cast<uint64_t>(U32(b, at + 4)) << 32);
}

struct ZipEntry {
  std::string name;
  absl::string_view data;
};

absl::Status ZipError(absl::string_view file, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(
      file, ": not a readable torch zip file (", what,
      "); save the tensors with torch.save (torch >= 1.6) or as "
      "safetensors"));
}

// The archive's entries; every entry must be stored (uncompressed), as
// torch.save writes them.
absl::StatusOr<std::vector<ZipEntry>> ReadZip(absl::string_view b,
                                              absl::string_view file) {
  constexpr size_t kEocd = 22;
  if (b.size() < kEocd) return ZipError(file, "too short");
  size_t eocd = std::string::npos;
  const size_t lowest = b.size() > kEocd + 65535 ? b.size() - kEocd - 65535 : 0;
  for (size_t at = b.size() - kEocd + 1; at-- > lowest;) {
    if (U32(b, at) == 0x06054b50) {
      eocd = at;
      break;
    }
  }
  if (eocd == std::string::npos) {
    return ZipError(file, "no end-of-central-directory record");
  }
  uint64_t entries = U16(b, eocd + 10);
  uint64_t cd_size = U32(b, eocd + 12);
  uint64_t cd_offset = U32(b, eocd + 16);
  if (entries == 0xFFFF || cd_size == 0xFFFFFFFFu || cd_offset == 0xFFFFFFFFu) {
    // ZIP64: the locator sits right before the classic record.
    if (eocd < 20 || U32(b, eocd - 20) != 0x07064b50) {
      return ZipError(file, "ZIP64 locator missing");
    }
    const uint64_t rec = U64(b, eocd - 20 + 8);
    if (rec > b.size() || b.size() - rec < 56 || U32(b, rec) != 0x06064b50) {
      return ZipError(file, "bad ZIP64 end-of-central-directory record");
    }
    entries = U64(b, rec + 32);
    cd_size = U64(b, rec + 40);
    cd_offset = U64(b, rec + 48);
  }
  if (cd_offset > b.size() || cd_size > b.size() - cd_offset) {
    return ZipError(file, "central directory outside the file");
  }
  if (entries > 1000000) return ZipError(file, "too many entries");
  std::vector<ZipEntry> out;
  size_t at = cd_offset;
  const size_t cd_end = cd_offset + cd_size;
  for (uint64_t i = 0; i < entries; ++i) {
    if (cd_end - at < 46 || U32(b, at) != 0x02014b50) {
      return ZipError(file, "bad central directory entry");
    }
    const uint16_t method = U16(b, at + 10);
    uint64_t comp = U32(b, at + 20);
    uint64_t size = U32(b, at + 24);
    const size_t name_len = U16(b, at + 28);
    const size_t extra_len = U16(b, at + 30);
    const size_t comment_len = U16(b, at + 32);
    uint64_t local = U32(b, at + 42);
    if (cd_end - at - 46 < name_len + extra_len + comment_len) {
      return ZipError(file, "central directory entry overruns");
    }
    std::string name(b.substr(at + 46, name_len));
    // ZIP64 extended information: the fields that overflowed, in order.
    absl::string_view extra = b.substr(at + 46 + name_len, extra_len);
    for (size_t e = 0; e + 4 <= extra.size();) {
      const uint16_t id = U16(extra, e);
      const size_t len = U16(extra, e + 2);
      if (extra.size() - e - 4 < len) break;
      if (id == 0x0001) {
        size_t f = e + 4;
        auto take = [&](uint64_t* v) {
          if (*v == 0xFFFFFFFFu && f + 8 <= e + 4 + len) {
            *v = U64(extra, f);
            f += 8;
          }
        };
        take(&size);
        take(&comp);
        take(&local);
      }
      e += 4 + len;
    }
    if (method != 0) {
      return ZipError(file, absl::StrCat("entry ", name,
                                         " is compressed (method ", method,
                                         "); torch.save stores entries"));
    }
    if (comp != size) return ZipError(file, "stored entry size mismatch");
    if (local > b.size() || b.size() - local < 30 ||
        U32(b, local) != 0x04034b50) {
      return ZipError(file, absl::StrCat("bad local header of ", name));
    }
    const uint64_t data_at =
        local + 30 + U16(b, local + 26) + U16(b, local + 28);
    if (data_at > b.size() || size > b.size() - data_at) {
      return ZipError(file, absl::StrCat("entry ", name, " overruns the file"));
    }
    out.push_back(ZipEntry{std::move(name), b.substr(data_at, size)});
    at += 46 + name_len + extra_len + comment_len;
  }
  return out;
}

// --------------------------------------------------------------- pickle

enum class Kind {
  kNone, kBool, kInt, kStr, kTuple, kList, kDict, kGlobal, kStorage, kTensor
};

struct Obj;
using Ref = std::shared_ptr<Obj>;

struct Obj {
  Kind kind = Kind::kNone;
  int64_t i = 0;      // kBool, kInt; kStorage: numel
  std::string s;      // kStr; kGlobal: "module.name"; kStorage: key
  std::string dtype;  // kStorage
  std::vector<Ref> items;                   // kTuple, kList
  std::vector<std::pair<Ref, Ref>> dict;    // kDict
  Ref storage;                              // kTensor
  int64_t offset = 0;                       // kTensor
  std::vector<int64_t> size, stride;        // kTensor
};

Ref Make(Kind k) {
  auto o = std::make_shared<Obj>();
  o->kind = k;
  return o;
}

// Frees a graph of objects without recursion (a hostile pickle may nest
// tuples a million deep, which recursive shared_ptr destructors would not
// survive) and breaks cycles (a list appended to itself through the memo).
void Dismantle(std::vector<Ref> work) {
  while (!work.empty()) {
    Ref o = std::move(work.back());
    work.pop_back();
    if (o == nullptr) continue;
    for (Ref& r : o->items) work.push_back(std::move(r));
    for (auto& [k, v] : o->dict) {
      work.push_back(std::move(k));
      work.push_back(std::move(v));
    }
    work.push_back(std::move(o->storage));
    o->items.clear();
    o->dict.clear();
  }
}

constexpr const char* kRebuildTensor = "torch._utils._rebuild_tensor_v2";
constexpr const char* kOrderedDict = "collections.OrderedDict";

// Storage type -> element dtype.
const char* StorageDType(absl::string_view global) {
  if (global == "torch.FloatStorage") return "float32";
  if (global == "torch.HalfStorage") return "float16";
  if (global == "torch.BFloat16Storage") return "bfloat16";
  return nullptr;
}

bool AllowedGlobal(absl::string_view g) {
  return g == kRebuildTensor || g == kOrderedDict ||
         StorageDType(g) != nullptr;
}

class Unpickler {
 public:
  Unpickler(absl::string_view p, absl::string_view file) : p_(p), file_(file) {}
  ~Unpickler() {
    std::vector<Ref> all = std::move(stack_);
    for (auto& [k, v] : memo_) all.push_back(std::move(v));
    Dismantle(std::move(all));
  }

  absl::StatusOr<Ref> Run() {
    while (true) {
      if (pos_ >= p_.size()) return Err("ends without STOP");
      const uint8_t op = static_cast<uint8_t>(p_[pos_++]);
      switch (op) {
        case 0x80: {  // PROTO
          ASSIGN_OR_RETURN(uint64_t v, Uint(1));
          if (v < 2 || v > 5) return Err(absl::StrCat("protocol ", v));
          break;
        }
        case 0x95:  // FRAME (length only; frames are not needed)
          RETURN_IF_ERROR(Uint(8).status());
          break;
        case 'c': {  // GLOBAL module\nname\n
          ASSIGN_OR_RETURN(std::string module, Line());
          ASSIGN_OR_RETURN(std::string name, Line());
          RETURN_IF_ERROR(PushGlobal(absl::StrCat(module, ".", name)));
          break;
        }
        case 0x93: {  // STACK_GLOBAL
          ASSIGN_OR_RETURN(Ref name, Pop());
          ASSIGN_OR_RETURN(Ref module, Pop());
          if (name->kind != Kind::kStr || module->kind != Kind::kStr) {
            return Err("STACK_GLOBAL needs two strings");
          }
          RETURN_IF_ERROR(PushGlobal(absl::StrCat(module->s, ".", name->s)));
          break;
        }
        case 'q': {  // BINPUT
          ASSIGN_OR_RETURN(uint64_t k, Uint(1));
          RETURN_IF_ERROR(Memo(k));
          break;
        }
        case 'r': {  // LONG_BINPUT
          ASSIGN_OR_RETURN(uint64_t k, Uint(4));
          RETURN_IF_ERROR(Memo(k));
          break;
        }
        case 0x94:  // MEMOIZE
          RETURN_IF_ERROR(Memo(memo_.size()));
          break;
        case 'h': case 'j': {  // BINGET, LONG_BINGET
          ASSIGN_OR_RETURN(uint64_t k, Uint(op == 'h' ? 1 : 4));
          auto it = memo_.find(k);
          if (it == memo_.end()) return Err(absl::StrCat("memo ", k, " unset"));
          stack_.push_back(it->second);
          break;
        }
        case '(':  // MARK
          marks_.push_back(stack_.size());
          break;
        case '}':
          stack_.push_back(Make(Kind::kDict));
          break;
        case ')':
          stack_.push_back(Make(Kind::kTuple));
          break;
        case ']':
          stack_.push_back(Make(Kind::kList));
          break;
        case 'X': case 0x8c: {  // BINUNICODE, SHORT_BINUNICODE
          ASSIGN_OR_RETURN(uint64_t n, Uint(op == 'X' ? 4 : 1));
          if (p_.size() - pos_ < n) return Err("string overruns");
          Ref s = Make(Kind::kStr);
          s->s = std::string(p_.substr(pos_, n));
          pos_ += n;
          stack_.push_back(std::move(s));
          break;
        }
        case 'J': {  // BININT (signed 4 bytes)
          ASSIGN_OR_RETURN(uint64_t v, Uint(4));
          PushInt(static_cast<int32_t>(static_cast<uint32_t>(v)));
          break;
        }
        case 'K': case 'M': {  // BININT1, BININT2 (unsigned)
          ASSIGN_OR_RETURN(uint64_t v, Uint(op == 'K' ? 1 : 2));
          PushInt(static_cast<int64_t>(v));
          break;
        }
        case 0x8a: {  // LONG1: n bytes, little-endian two's complement
          ASSIGN_OR_RETURN(uint64_t n, Uint(1));
          if (n > 8) return Err("integer wider than 64 bits");
          ASSIGN_OR_RETURN(uint64_t v, Uint(n));
          if (n > 0 && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~0ull << (8 * n);
          PushInt(static_cast<int64_t>(v));
          break;
        }
        case 't': {  // TUPLE
          ASSIGN_OR_RETURN(std::vector<Ref> items, PopMark());
          Ref t = Make(Kind::kTuple);
          t->items = std::move(items);
          stack_.push_back(std::move(t));
          break;
        }
        case 0x85: case 0x86: case 0x87: {  // TUPLE1..3
          const size_t n = op - 0x84;
          if (stack_.size() < n + Floor()) return Err("stack underflow");
          Ref t = Make(Kind::kTuple);
          t->items.assign(stack_.end() - n, stack_.end());
          stack_.resize(stack_.size() - n);
          stack_.push_back(std::move(t));
          break;
        }
        case 'N':
          stack_.push_back(Make(Kind::kNone));
          break;
        case 0x88: case 0x89: {  // NEWTRUE, NEWFALSE
          Ref v = Make(Kind::kBool);
          v->i = op == 0x88;
          stack_.push_back(std::move(v));
          break;
        }
        case 'Q': {  // BINPERSID
          ASSIGN_OR_RETURN(Ref pid, Pop());
          ASSIGN_OR_RETURN(Ref storage, PersistentLoad(*pid));
          stack_.push_back(std::move(storage));
          break;
        }
        case 'R': {  // REDUCE
          ASSIGN_OR_RETURN(Ref args, Pop());
          ASSIGN_OR_RETURN(Ref fn, Pop());
          ASSIGN_OR_RETURN(Ref v, Reduce(*fn, *args));
          stack_.push_back(std::move(v));
          break;
        }
        case 's': {  // SETITEM
          ASSIGN_OR_RETURN(Ref value, Pop());
          ASSIGN_OR_RETURN(Ref key, Pop());
          if (stack_.size() <= Floor() || stack_.back()->kind != Kind::kDict) {
            return Err("SETITEM on something that is not a dict");
          }
          stack_.back()->dict.emplace_back(std::move(key), std::move(value));
          break;
        }
        case 'u': {  // SETITEMS
          ASSIGN_OR_RETURN(std::vector<Ref> items, PopMark());
          if (items.size() % 2 != 0) return Err("SETITEMS with an odd count");
          if (stack_.size() <= Floor() || stack_.back()->kind != Kind::kDict) {
            return Err("SETITEMS on something that is not a dict");
          }
          for (size_t k = 0; k < items.size(); k += 2) {
            stack_.back()->dict.emplace_back(items[k], items[k + 1]);
          }
          break;
        }
        case 'a': {  // APPEND
          ASSIGN_OR_RETURN(Ref v, Pop());
          if (stack_.size() <= Floor() || stack_.back()->kind != Kind::kList) {
            return Err("APPEND on something that is not a list");
          }
          stack_.back()->items.push_back(std::move(v));
          break;
        }
        case 'e': {  // APPENDS
          ASSIGN_OR_RETURN(std::vector<Ref> items, PopMark());
          if (stack_.size() <= Floor() || stack_.back()->kind != Kind::kList) {
            return Err("APPENDS on something that is not a list");
          }
          for (Ref& v : items) stack_.back()->items.push_back(std::move(v));
          break;
        }
        case 'b': {  // BUILD: only an OrderedDict's attributes (_metadata)
          ASSIGN_OR_RETURN(Ref state, Pop());
          if (stack_.size() <= Floor() || stack_.back()->kind != Kind::kDict ||
              (state->kind != Kind::kDict && state->kind != Kind::kNone)) {
            return Err("BUILD is only accepted on a dict with a dict state");
          }
          break;  // the attributes (e.g. _metadata) are not needed
        }
        case '.': {  // STOP
          if (stack_.size() != 1 || !marks_.empty()) {
            return Err("STOP with a malformed stack");
          }
          return stack_.back();
        }
        default:
          return Err(absl::StrCat("opcode 0x", absl::Hex(op, absl::kZeroPad2),
                                  " at byte ", pos_ - 1,
                                  " is not allowed (only the opcodes of a "
                                  "state dict of tensors are)"));
      }
    }
  }

 private:
  absl::Status Err(absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat(file_, ": data.pkl refused: ", what));
  }
  absl::StatusOr<uint64_t> Uint(size_t n) {
    if (p_.size() - pos_ < n) return Err("truncated");
    uint64_t v = 0;
    for (size_t k = 0; k < n; ++k) {
      v |= static_cast<uint64_t>(static_cast<uint8_t>(p_[pos_ + k])) << (8 * k);
    }
    pos_ += n;
    return v;
  }
  absl::StatusOr<std::string> Line() {
    const size_t nl = p_.find('\n', pos_);
    if (nl == absl::string_view::npos || nl - pos_ > 256) {
      return Err("GLOBAL without a name line");
    }
    std::string s(p_.substr(pos_, nl - pos_));
    pos_ = nl + 1;
    return s;
  }
  size_t Floor() const { return marks_.empty() ? 0 : marks_.back(); }
  absl::StatusOr<Ref> Pop() {
    if (stack_.size() <= Floor()) return Err("stack underflow");
    Ref v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  absl::StatusOr<std::vector<Ref>> PopMark() {
    if (marks_.empty()) return Err("no MARK");
    const size_t m = marks_.back();
    marks_.pop_back();
    std::vector<Ref> items(stack_.begin() + m, stack_.end());
    stack_.resize(m);
    return items;
  }
  void PushInt(int64_t v) {
    Ref r = Make(Kind::kInt);
    r->i = v;
    stack_.push_back(std::move(r));
  }
  absl::Status Memo(uint64_t k) {
    if (stack_.empty()) return Err("memo of an empty stack");
    if (memo_.size() > 10000000) return Err("too many memo entries");
    memo_[k] = stack_.back();
    return absl::OkStatus();
  }
  absl::Status PushGlobal(std::string name) {
    if (!AllowedGlobal(name)) {
      return Err(absl::StrCat(
          "global '", name, "' is not allowed (only ", kOrderedDict, ", ",
          kRebuildTensor, " and torch.{Float,Half,BFloat16}Storage are; "
          "nothing in the file is executed)"));
    }
    Ref g = Make(Kind::kGlobal);
    g->s = std::move(name);
    stack_.push_back(std::move(g));
    return absl::OkStatus();
  }
  // ('storage', <storage type>, key, location, numel) -> a storage.
  absl::StatusOr<Ref> PersistentLoad(const Obj& pid) {
    if (pid.kind != Kind::kTuple || pid.items.size() != 5 ||
        pid.items[0]->kind != Kind::kStr || pid.items[0]->s != "storage" ||
        pid.items[1]->kind != Kind::kGlobal ||
        pid.items[2]->kind != Kind::kStr || pid.items[4]->kind != Kind::kInt) {
      return Err("persistent id is not ('storage', type, key, location, "
                 "numel)");
    }
    const char* dtype = StorageDType(pid.items[1]->s);
    if (dtype == nullptr) {
      return Err(absl::StrCat(pid.items[1]->s, " is not a storage type"));
    }
    if (pid.items[4]->i < 0) return Err("negative storage size");
    Ref s = Make(Kind::kStorage);
    s->s = pid.items[2]->s;
    s->dtype = dtype;
    s->i = pid.items[4]->i;
    return s;
  }
  absl::StatusOr<std::vector<int64_t>> Ints(const Obj& t, const char* what) {
    if (t.kind != Kind::kTuple || t.items.size() > 8) {
      return Err(absl::StrCat("tensor ", what, " is not a tuple of <= 8 ints"));
    }
    std::vector<int64_t> out;
    for (const Ref& v : t.items) {
      if (v->kind != Kind::kInt || v->i < 0 || v->i > (int64_t{1} << 40)) {
        return Err(absl::StrCat("tensor ", what, " holds a bad value"));
      }
      out.push_back(v->i);
    }
    return out;
  }
  absl::StatusOr<Ref> Reduce(const Obj& fn, const Obj& args) {
    if (fn.kind != Kind::kGlobal || args.kind != Kind::kTuple) {
      return Err("REDUCE needs an allowed global and a tuple");
    }
    if (fn.s == kOrderedDict) {
      if (!args.items.empty()) return Err("OrderedDict with arguments");
      return Make(Kind::kDict);
    }
    if (fn.s == kRebuildTensor) {
      // (storage, storage_offset, size, stride, requires_grad,
      //  backward_hooks[, metadata])
      if (args.items.size() < 6 || args.items.size() > 7 ||
          args.items[0]->kind != Kind::kStorage ||
          args.items[1]->kind != Kind::kInt) {
        return Err("_rebuild_tensor_v2 with unexpected arguments");
      }
      Ref t = Make(Kind::kTensor);
      t->storage = args.items[0];
      t->offset = args.items[1]->i;
      ASSIGN_OR_RETURN(t->size, Ints(*args.items[2], "size"));
      ASSIGN_OR_RETURN(t->stride, Ints(*args.items[3], "stride"));
      if (t->size.size() != t->stride.size() || t->offset < 0) {
        return Err("tensor size and stride do not match");
      }
      return t;
    }
    return Err(absl::StrCat("REDUCE of '", fn.s, "' is not allowed"));
  }

  absl::string_view p_;
  absl::string_view file_;
  size_t pos_ = 0;
  std::vector<Ref> stack_;
  std::vector<size_t> marks_;
  absl::flat_hash_map<uint64_t, Ref> memo_;
};

size_t ElementSize(absl::string_view dtype) {
  return dtype == "float32" ? 4 : 2;
}

absl::StatusOr<FloatTensor> Materialize(
    const std::string& name, const Obj& t,
    const std::map<std::string, std::string>& storages,
    absl::string_view file) {
  const Obj& s = *t.storage;
  auto it = storages.find(s.s);
  if (it == storages.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        file, ": tensor '", name, "' uses storage data/", s.s,
        ", which the archive lacks"));
  }
  const size_t es = ElementSize(s.dtype);
  if (it->second.size() / es < static_cast<uint64_t>(s.i)) {
    return absl::InvalidArgumentError(absl::StrCat(
        file, ": storage data/", s.s, " holds ", it->second.size(),
        " bytes, fewer than its ", s.i, " elements"));
  }
  FloatTensor out;
  out.shape = t.size;
  out.stored_dtype = s.dtype;
  uint64_t numel = 1;
  for (int64_t d : t.size) {
    numel *= static_cast<uint64_t>(d);
    if (numel > (uint64_t{1} << 32)) {
      return absl::InvalidArgumentError(
          absl::StrCat(file, ": tensor '", name, "' is too large"));
    }
  }
  // The furthest element addressed must lie inside the storage.
  const uint64_t cap = static_cast<uint64_t>(s.i);
  uint64_t last = static_cast<uint64_t>(t.offset);
  bool inside = numel == 0 || last < cap;
  for (size_t d = 0; inside && numel > 0 && d < t.size.size(); ++d) {
    const uint64_t steps = static_cast<uint64_t>(t.size[d] - 1);
    const uint64_t stride = static_cast<uint64_t>(t.stride[d]);
    if (steps == 0 || stride == 0) continue;
    if (steps > (cap - 1 - last) / stride) inside = false;  // no overflow
    else last += steps * stride;
  }
  if (!inside) {
    return absl::InvalidArgumentError(absl::StrCat(
        file, ": tensor '", name, "' reaches past its storage"));
  }
  out.values.resize(numel);
  const char* base = it->second.data();
  std::vector<int64_t> idx(t.size.size(), 0);
  for (uint64_t k = 0; k < numel; ++k) {
    uint64_t e = static_cast<uint64_t>(t.offset);
    for (size_t d = 0; d < idx.size(); ++d) e += idx[d] * t.stride[d];
    const char* at = base + e * es;
    if (es == 4) {
      std::memcpy(&out.values[k], at, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, at, 2);
      out.values[k] = s.dtype == "float16" ? F16ToFloat(h) : Bf16ToFloat(h);
    }
    for (size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < t.size[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<std::map<std::string, FloatTensor>> UnpickleStateDict(
    absl::string_view pickle,
    const std::map<std::string, std::string>& storages,
    absl::string_view display_name) {
  Unpickler u(pickle, display_name);
  ASSIGN_OR_RETURN(Ref top, u.Run());
  auto read = [&]() -> absl::StatusOr<std::map<std::string, FloatTensor>> {
    if (top->kind != Kind::kDict) {
      return absl::InvalidArgumentError(absl::StrCat(
          display_name, ": data.pkl is not a state dict (name -> tensor)"));
    }
    std::map<std::string, FloatTensor> out;
    for (const auto& [key, value] : top->dict) {
      if (key->kind != Kind::kStr || value->kind != Kind::kTensor) {
        return absl::InvalidArgumentError(absl::StrCat(
            display_name, ": data.pkl holds an entry that is not "
            "name -> tensor"));
      }
      ASSIGN_OR_RETURN(FloatTensor t,
                       Materialize(key->s, *value, storages, display_name));
      out[key->s] = std::move(t);
    }
    return out;
  };
  absl::StatusOr<std::map<std::string, FloatTensor>> out = read();
  Dismantle({std::move(top)});
  return out;
}

absl::StatusOr<std::map<std::string, FloatTensor>> ParseTorchStateDict(
    absl::string_view bytes, absl::string_view display_name) {
  ASSIGN_OR_RETURN(std::vector<ZipEntry> entries, ReadZip(bytes, display_name));
  // The one folder all entries share (torch names it after the file, or
  // "archive").
  std::string folder;
  for (const ZipEntry& e : entries) {
    const size_t slash = e.name.find('/');
    if (slash != std::string::npos &&
        e.name.compare(slash, std::string::npos, "/data.pkl") == 0) {
      folder = e.name.substr(0, slash + 1);
      break;
    }
  }
  if (folder.empty()) return ZipError(display_name, "no <folder>/data.pkl");
  absl::string_view pickle;
  std::map<std::string, std::string> storages;
  const std::string data_prefix = folder + "data/";
  for (const ZipEntry& e : entries) {
    if (e.name.compare(0, folder.size(), folder) != 0) {
      return ZipError(display_name,
                      absl::StrCat("entry ", e.name, " outside ", folder));
    }
    if (e.name == folder + "data.pkl") {
      pickle = e.data;
    } else if (e.name == folder + "byteorder") {
      if (e.data != "little") {
        return absl::InvalidArgumentError(absl::StrCat(
            display_name, ": byte order '", e.data,
            "' is not supported (little-endian only)"));
      }
    } else if (e.name.compare(0, data_prefix.size(), data_prefix) == 0) {
      storages[e.name.substr(data_prefix.size())] = std::string(e.data);
    }
  }
  return UnpickleStateDict(pickle, storages, display_name);
}

absl::StatusOr<std::map<std::string, FloatTensor>> ReadTorchStateDict(
    const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::ostringstream ss;
  ss << f.rdbuf();
  const std::string bytes = ss.str();
  return ParseTorchStateDict(bytes, path);
}

}  // namespace inferd
