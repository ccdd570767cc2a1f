#include "runtime/loader/gguf_transcode.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "device/bf16.h"
#include "device/quant.h"

namespace inferd {
namespace {

// ggml type ids (ggml.h).
constexpr uint32_t kQ2_K = 10, kQ3_K = 11, kQ5_K = 13, kIQ4_NL = 20,
                   kIQ4_XS = 23;

// IQ4_NL's and IQ4_XS's codebook: the value of each 4-bit index.
constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                   1,    13,   25,  38,  53,  69,  89,  113};

uint16_t LoadU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
float LoadHalf(const uint8_t* p) { return F16ToFloat(LoadU16(p)); }
void StoreHalf(uint8_t* p, float v) {
  const uint16_t h = FloatToF16(v);
  std::memcpy(p, &h, 2);
}

// A block's values in integer form: x[v] = a[g] * q[v] - b[g] for the group
// g of value v (group size 16 or 32); `b` is zero for the symmetric types.
struct Unpacked {
  float d = 0.0f, dmin = 0.0f;
  int group = 32;
  int scale[16] = {};  // the integer scale of each group
  int min[16] = {};    // the integer minimum of each group (Q2_K, Q5_K)
  int q[256] = {};
};

// Q2_K (84 bytes): scales[16] (low nibble scale, high nibble minimum per
// 16 values), qs[64] (2 bits each), f16 d, f16 dmin. Value v = 128 h + 32 s
// + l takes bits 2s..2s+1 of qs[32 h + l].
void UnpackQ2_K(const uint8_t* b, Unpacked* u) {
  const uint8_t* scales = b;
  const uint8_t* qs = b + 16;
  u->d = LoadHalf(b + 80);
  u->dmin = LoadHalf(b + 82);
  u->group = 16;
  for (int g = 0; g < 16; ++g) {
    u->scale[g] = scales[g] & 0x0F;
    u->min[g] = scales[g] >> 4;
  }
  for (int v = 0; v < 256; ++v) {
    const int h = v / 128, s = (v % 128) / 32, l = v % 32;
    u->q[v] = (qs[32 * h + l] >> (2 * s)) & 3;
  }
}

// Q3_K (110 bytes): hmask[32], qs[64], scales[12] (sixteen 6-bit values:
// low 4 bits in the nibbles of bytes 0-7, high 2 bits in bytes 8-11), f16
// d. Value v = 128 h + 32 s + l: low bits 2s..2s+1 of qs[32 h + l], minus 4
// unless bit 4h + s of hmask[l] is set; its scale (sixteen of them) minus 32.
void UnpackQ3_K(const uint8_t* b, Unpacked* u) {
  const uint8_t* hmask = b;
  const uint8_t* qs = b + 32;
  const uint8_t* scales = b + 96;
  u->d = LoadHalf(b + 108);
  u->group = 16;
  for (int i = 0; i < 16; ++i) {
    const int low = i < 8 ? scales[i] & 0x0F : scales[i - 8] >> 4;
    const int high = (scales[8 + i % 4] >> (2 * (i / 4))) & 3;
    u->scale[i] = (low | (high << 4)) - 32;
  }
  for (int v = 0; v < 256; ++v) {
    const int h = v / 128, s = (v % 128) / 32, l = v % 32;
    const int low = (qs[32 * h + l] >> (2 * s)) & 3;
    const int high = (hmask[l] >> (4 * h + s)) & 1;
    u->q[v] = low - (high != 0 ? 0 : 4);
  }
}

// Q4_K's / Q5_K's 6-bit scale and minimum of sub-block j from scales[12].
void ScaleMinK(const uint8_t* s, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Q5_K (176 bytes): f16 d, f16 dmin, scales[12] (Q4_K's packing), qh[32],
// qs[128]. Sub-block j (32 values): low nibble of qs[32 (j / 2) + l] (high
// nibble for odd j), bit 4 from bit j of qh[l].
void UnpackQ5_K(const uint8_t* b, Unpacked* u) {
  u->d = LoadHalf(b);
  u->dmin = LoadHalf(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + 48;
  u->group = 32;
  for (int j = 0; j < 8; ++j) {
    ScaleMinK(scales, j, &u->scale[j], &u->min[j]);
    for (int l = 0; l < 32; ++l) {
      const int low = (qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0x0F;
      u->q[32 * j + l] = low | (((qh[l] >> j) & 1) << 4);
    }
  }
}

// IQ4_XS (136 bytes): f16 d, u16 scales_h (2 high bits per sub-block),
// scales_l[4] (4 low bits per sub-block), qs[128]. Sub-block j (32 values):
// value l takes the codebook value of nibble l / 16 of qs[16 j + l % 16];
// scale (low | high << 4) - 32.
void UnpackIQ4_XS(const uint8_t* b, Unpacked* u) {
  u->d = LoadHalf(b);
  const uint16_t scales_h = LoadU16(b + 2);
  const uint8_t* scales_l = b + 4;
  const uint8_t* qs = b + 8;
  u->group = 32;
  for (int j = 0; j < 8; ++j) {
    const int low = (scales_l[j / 2] >> (4 * (j % 2))) & 0x0F;
    const int high = (scales_h >> (2 * j)) & 3;
    u->scale[j] = (low | (high << 4)) - 32;
    for (int l = 0; l < 32; ++l) {
      u->q[32 * j + l] = kIq4Values[(qs[16 * j + l % 16] >> (4 * (l / 16))) & 0x0F];
    }
  }
}

// IQ4_NL (18 bytes): f16 d, qs[16]; value j takes the codebook value of the
// low nibble of qs[j] (j < 16) or the high one of qs[j - 16].
void UnpackIQ4_NL(const uint8_t* b, int8_t* q, uint16_t* d) {
  *d = LoadU16(b);
  for (int j = 0; j < 32; ++j) {
    q[j] = kIq4Values[(b[2 + j % 16] >> (4 * (j / 16))) & 0x0F];
  }
}

// Decodes an unpacked super-block in gguf-py's order of operations:
// (d * scale) * q - (dmin * min), in float32.
void Decode(const Unpacked& u, int n, float* y) {
  for (int v = 0; v < n; ++v) {
    const int g = v / u.group;
    const float dl = u.d * static_cast<float>(u.scale[g]);
    const float ml = u.dmin * static_cast<float>(u.min[g]);
    y[v] = dl * static_cast<float>(u.q[v]) - ml;
  }
}

// Q6_K (210 bytes) from 6-bit values u[256] in [0, 63], int8 scales per 16
// and the f16 d as stored (device/quant.h's layout).
void PackQ6_K(const int* u, const int* scales, const uint8_t* d_half,
              uint8_t* b) {
  uint8_t* ql = b;
  uint8_t* qh = b + 128;
  for (int h = 0; h < 2; ++h) {
    const int* x = u + 128 * h;
    for (int l = 0; l < 32; ++l) {
      ql[64 * h + l] =
          static_cast<uint8_t>((x[l] & 0x0F) | ((x[l + 64] & 0x0F) << 4));
      ql[64 * h + l + 32] =
          static_cast<uint8_t>((x[l + 32] & 0x0F) | ((x[l + 96] & 0x0F) << 4));
      qh[32 * h + l] = static_cast<uint8_t>(
          (x[l] >> 4) | ((x[l + 32] >> 4) << 2) | ((x[l + 64] >> 4) << 4) |
          ((x[l + 96] >> 4) << 6));
    }
  }
  for (int i = 0; i < 16; ++i) {
    b[192 + i] = static_cast<uint8_t>(static_cast<int8_t>(scales[i]));
  }
  std::memcpy(b + 208, d_half, 2);
}

// Q8_0 (34 bytes): f16 d, int8 q[32].
void PackQ8_0(uint16_t d_half, const int* q, uint8_t* b) {
  std::memcpy(b, &d_half, 2);
  for (int j = 0; j < 32; ++j) {
    b[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(q[j]));
  }
}

// Q5_1 (24 bytes): f16 d, f16 m, u32 qh (bit j: bit 4 of value j), qs[16]
// (value j < 16 the low nibble of qs[j], j + 16 the high one).
void PackQ5_1(float d, float m, const int* q, uint8_t* b) {
  StoreHalf(b, d);
  StoreHalf(b + 2, m);
  uint32_t qh = 0;
  for (int j = 0; j < 32; ++j) qh |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
  std::memcpy(b + 4, &qh, 4);
  for (int j = 0; j < 16; ++j) {
    b[8 + j] = static_cast<uint8_t>((q[j] & 0x0F) | ((q[j + 16] & 0x0F) << 4));
  }
}

absl::Status CheckWhole(const GgmlTypeInfo& type, int64_t n) {
  if (n < 0 || n % type.block_elements != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        n, " values are not whole ", type.name, " blocks of ",
        type.block_elements));
  }
  return absl::OkStatus();
}

absl::Status NotTranscoded(const GgmlTypeInfo& type) {
  return absl::InvalidArgumentError(
      absl::StrCat("ggml type ", type.name, " is not transcoded at load"));
}

// Unpacks a super-block of the 256-value types.
bool UnpackSuper(uint32_t id, const uint8_t* b, Unpacked* u) {
  switch (id) {
    case kQ2_K: UnpackQ2_K(b, u); return true;
    case kQ3_K: UnpackQ3_K(b, u); return true;
    case kQ5_K: UnpackQ5_K(b, u); return true;
    case kIQ4_XS: UnpackIQ4_XS(b, u); return true;
    default: return false;
  }
}

}  // namespace

absl::optional<DType> TranscodeTarget(uint32_t id) {
  switch (id) {
    case kQ2_K: return DType::kQ8_0;
    case kQ3_K: return DType::kQ6_K;
    case kQ5_K: return DType::kQ5_1;
    case kIQ4_NL: return DType::kQ8_0;
    case kIQ4_XS: return DType::kQ8_0;
    default: return absl::nullopt;
  }
}

absl::Status DecodeTranscodedRow(const GgmlTypeInfo& type, const uint8_t* src,
                                 int64_t n, float* dst) {
  if (!TranscodeTarget(type.id).has_value()) return NotTranscoded(type);
  if (absl::Status s = CheckWhole(type, n); !s.ok()) return s;
  const int64_t blocks = n / type.block_elements;
  for (int64_t i = 0; i < blocks; ++i) {
    const uint8_t* b = src + i * type.block_bytes;
    float* y = dst + i * type.block_elements;
    if (type.id == kIQ4_NL) {
      int8_t q[32];
      uint16_t d;
      UnpackIQ4_NL(b, q, &d);
      const float df = F16ToFloat(d);
      for (int j = 0; j < 32; ++j) y[j] = df * static_cast<float>(q[j]);
      continue;
    }
    Unpacked u;
    UnpackSuper(type.id, b, &u);
    Decode(u, 256, y);
  }
  return absl::OkStatus();
}

absl::Status TranscodeRow(const GgmlTypeInfo& type, const uint8_t* src,
                          int64_t n, uint8_t* dst) {
  const absl::optional<DType> target = TranscodeTarget(type.id);
  if (!target.has_value()) return NotTranscoded(type);
  if (absl::Status s = CheckWhole(type, n); !s.ok()) return s;
  const int64_t blocks = n / type.block_elements;
  const size_t out_bytes = DTypeRowBytes(*target, type.block_elements);
  for (int64_t i = 0; i < blocks; ++i) {
    const uint8_t* b = src + i * type.block_bytes;
    uint8_t* out = dst + static_cast<size_t>(i) * out_bytes;
    if (type.id == kIQ4_NL) {
      int8_t q8[32];
      uint16_t d;
      UnpackIQ4_NL(b, q8, &d);
      int q[32];
      for (int j = 0; j < 32; ++j) q[j] = q8[j];
      PackQ8_0(d, q, out);
      continue;
    }
    Unpacked u;
    UnpackSuper(type.id, b, &u);
    switch (type.id) {
      case kQ3_K: {
        int six[256];
        for (int v = 0; v < 256; ++v) six[v] = u.q[v] + 32;
        PackQ6_K(six, u.scale, b + 108, out);
        break;
      }
      case kIQ4_XS:
        for (int j = 0; j < 8; ++j) {
          const float scale = u.d * static_cast<float>(u.scale[j]);
          PackQ8_0(FloatToF16(scale), u.q + 32 * j, out + 34 * j);
        }
        break;
      case kQ5_K:
        for (int j = 0; j < 8; ++j) {
          PackQ5_1(u.d * static_cast<float>(u.scale[j]),
                   -(u.dmin * static_cast<float>(u.min[j])), u.q + 32 * j,
                   out + 24 * j);
        }
        break;
      default: {  // Q2_K: requantized from its values
        float y[256];
        Decode(u, 256, y);
        if (absl::Status s = QuantizeRow(DType::kQ8_0, y, 256, out); !s.ok()) {
          return s;
        }
        break;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace inferd
