// Tiled attention with online softmax (FlashAttention-style): one call
// handles a tile of queries of one sequence and all query heads sharing one
// kv head, streaming keys in tiles gathered from contiguous rows or from a
// paged cache. Included inside an ISA namespace by attention_cpu.cc (portable)
// and attention_avx512.cc; uses raw pointers only.

constexpr int64_t kKeyTile = 32;
constexpr int kLanes = 16;

inline float Dot(const float* a, const float* b, int64_t n) {
  float part[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) part[l] += a[j + l] * b[j + l];
  }
  float s = 0.0f;
  for (; j < n; ++j) s += a[j] * b[j];
  for (int l = 0; l < kLanes; ++l) s += part[l];
  return s;
}

inline float Exp(float x) { return ::inferd::cpu::FastExp(x); }

inline void LoadKvRow(const AttnJob& job, int64_t pos, float* k_dst,
                      float* v_dst) {
  const int d = job.head_dim;
  const void* ks;
  const void* vs;
  if (job.k != nullptr) {
    ks = job.k + pos * job.ldk;
    vs = job.v + pos * job.ldv;
  } else {
    const int64_t slot =
        int64_t{job.block_table[pos / job.block_size]} * job.block_size +
        pos % job.block_size;
    const int64_t off = slot * job.slot_stride + int64_t{job.kv_head} * d;
    const size_t esize = job.cache_bf16 ? 2 : 4;
    ks = static_cast<const char*>(job.k_cache) + off * esize;
    vs = static_cast<const char*>(job.v_cache) + off * esize;
  }
  if (!job.cache_bf16 || job.k != nullptr) {
    std::memcpy(k_dst, ks, d * sizeof(float));
    std::memcpy(v_dst, vs, d * sizeof(float));
    return;
  }
  const uint16_t* k16 = static_cast<const uint16_t*>(ks);
  const uint16_t* v16 = static_cast<const uint16_t*>(vs);
  for (int e = 0; e < d; ++e) {
    const uint32_t kb = static_cast<uint32_t>(k16[e]) << 16;
    const uint32_t vb = static_cast<uint32_t>(v16[e]) << 16;
    std::memcpy(&k_dst[e], &kb, 4);
    std::memcpy(&v_dst[e], &vb, 4);
  }
}

// Scratch floats needed by AttendTile for `rows` = queries * group rows.
inline int64_t AttendScratchFloats(int64_t rows, int head_dim) {
  return 2 * kKeyTile * head_dim + rows * (head_dim + 2) + kKeyTile;
}

// Queries [q_begin, q_end) of the job (all heads of its kv group).
inline void AttendTile(const AttnJob& job, int64_t q_begin, int64_t q_end,
                       float* scratch) {
  const int d = job.head_dim;
  const int group = job.group;
  const int64_t rows = (q_end - q_begin) * group;
  float* kt = scratch;
  float* vt = kt + kKeyTile * d;
  float* acc = vt + kKeyTile * d;
  float* m = acc + rows * d;
  float* l = m + rows;
  float* p = l + rows;
  for (int64_t r = 0; r < rows; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
  }
  for (int64_t e = 0; e < rows * d; ++e) acc[e] = 0.0f;

  int64_t key_begin, key_end;
  KeyRange(job, q_begin, q_end, &key_begin, &key_end);
  for (int64_t k0 = key_begin; k0 < key_end; k0 += kKeyTile) {
    const int64_t nk = key_end - k0 < kKeyTile ? key_end - k0 : kKeyTile;
    for (int64_t j = 0; j < nk; ++j) {
      LoadKvRow(job, k0 + j, kt + j * d, vt + j * d);
    }
    for (int64_t qi = q_begin; qi < q_end; ++qi) {
      const int64_t pos = job.first_pos + qi;
      // Visible keys of this tile: [lo, hi).
      int64_t lo, hi;
      VisibleKeys(job, pos, k0, nk, &lo, &hi);
      if (hi <= lo) continue;
      for (int g = 0; g < group; ++g) {
        const int64_t r = (qi - q_begin) * group + g;
        const float* qr = job.q + qi * job.ldq + int64_t{g} * d;
        float tile_max = -INFINITY;
        for (int64_t j = lo; j < hi; ++j) {
          float s = Dot(qr, kt + j * d, d) * job.scale;
          if (job.softcap > 0.0f) {
            s = job.softcap * ::inferd::cpu::FastTanh(s / job.softcap);
          }
          if (job.rel_bias != nullptr) s += RelBias(job, g, k0 + j - pos);
          p[j] = s;
          tile_max = s > tile_max ? s : tile_max;
        }
        const float m_new = m[r] > tile_max ? m[r] : tile_max;
        const float correction = Exp(m[r] - m_new);
        float* a = acc + r * d;
        float sum = 0.0f;
        for (int64_t j = lo; j < hi; ++j) {
          p[j] = Exp(p[j] - m_new);
          sum += p[j];
        }
        l[r] = l[r] * correction + sum;
        m[r] = m_new;
        for (int e = 0; e < d; ++e) a[e] *= correction;
        for (int64_t j = lo; j < hi; ++j) {
          const float pj = p[j];
          const float* vr = vt + j * d;
          for (int e = 0; e < d; ++e) a[e] += pj * vr[e];
        }
      }
    }
  }
  for (int64_t qi = q_begin; qi < q_end; ++qi) {
    for (int g = 0; g < group; ++g) {
      const int64_t r = (qi - q_begin) * group + g;
      const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
      float* o = job.out + qi * job.ldo + int64_t{g} * d;
      const float* a = acc + r * d;
      for (int e = 0; e < d; ++e) o[e] = a[e] * inv;
    }
  }
}
