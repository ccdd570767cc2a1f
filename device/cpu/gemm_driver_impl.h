// Blocked GEMM driver (BLIS-style: B packed into KC x NR panels kept in L2,
// register-blocked MR x NR micro-kernel, A rows read in place) and a GEMV
// path for small M. Included by one ISA translation unit each, inside its
// own namespace; before including, the unit defines:
//   constexpr int kNr, kMr;   register block
//   template <int MR> void MicroF32(int64_t kc, const float* a, int64_t lda,
//       const float* bp, float* c, int64_t ldc, int nvalid, bool init,
//       const float* bias);
//   void GemvRows(const GemmArgs& g, int64_t n_begin, int64_t n_end);
// and may define INFERD_GEMM_PACK_NK_PANEL with
//   void PackPanelNk(const GemmArgs& g, int64_t n0, int64_t nv, int64_t k0,
//       int64_t kc, float* panel);
// a faster copy of weight rows [n][k] into one kNr-wide B panel.
// No std containers or std::function here: see cpu/CMakeLists notes on ISA
// translation units.

// K values per packed block: a 512 x 32 F32 panel (64 KB) streams from
// L2; against 256 (a panel that fits L1) the C tile is loaded and stored
// half as often: 512 x 4096 x 4096 F32 67.5 -> 61.9 ms, F16 weights at
// M = 512 16.3 -> 14.9 ms and at M = 80 2.66 -> 2.49 ms (2048 x 2048),
// BF16 weights within 2% (bench/README, session 7).
constexpr int64_t kKc = 512;
constexpr int64_t kNcMax = 256;
constexpr int64_t kMc = 8 * kMr;  // rows per L2-resident A chunk
// Tasks whose C tile is larger than this (L2) pack all of B first and walk
// K inside row chunks, so C is not re-read from memory per K block (1.2-1.3x
// at M = 4096); smaller ones pack each K block just before use and run all
// rows at once (B for a large K would not fit L2: 0.8x at 512 x 4096 x 4096).
constexpr int64_t kPackAllCBytes = int64_t{1} << 20;
constexpr int64_t kGemvMaxM = 8;
// Up to this M (decode batches) the weights are streamed once instead of
// packed (see RunGemmF32 and the AVX-512 SmallMGemm).
constexpr int64_t kSmallMMaxM = 64;
// Weight rows per small-M block: their K extent stays in L1/L2 while each
// chunk of kGemvMaxM activation rows is run against it.
constexpr int64_t kSmallMBlockN = 8;
// Multiply-adds below which a thread wakeup (several microseconds) costs more
// than it saves: smaller GEMMs, and smaller GEMV chunks, stay on one thread.
constexpr int64_t kMinParallelMacs = 64 * 1024;

// Grows-only per-thread scratch (never freed; bounded by the largest block).
inline float* ThreadScratch(int64_t floats) {
  static thread_local float* buf = nullptr;
  static thread_local int64_t cap = 0;
  if (floats > cap) {
    std::free(buf);
    cap = (floats + 1023) / 1024 * 1024;
    buf = static_cast<float*>(std::aligned_alloc(64, cap * sizeof(float)));
  }
  return buf;
}

inline float LoadB(const GemmArgs& g, int64_t n, int64_t k) {
  const int64_t idx = g.w_layout_nk ? n * g.ldw + k : k * g.ldw + n;
  if (g.w_bf16) {
    uint32_t bits =
        static_cast<uint32_t>(static_cast<const uint16_t*>(g.w)[idx]) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  return static_cast<const float*>(g.w)[idx];
}

// Packs B(n0 .. n0+nc, k0 .. k0+kc) as F32 panels bp[p][k][j] (NR wide,
// zero padded).
inline void PackBF32(const GemmArgs& g, int64_t n0, int64_t nc, int64_t k0,
                     int64_t kc, float* bp) {
  for (int64_t p = 0; p < nc; p += kNr) {
    float* panel = bp + p * kc;
    const int64_t nv = nc - p < kNr ? nc - p : kNr;
#ifdef INFERD_GEMM_PACK_NK_PANEL
    if (g.w_layout_nk) {
      PackPanelNk(g, n0 + p, nv, k0, kc, panel);
      continue;
    }
#endif
    if (!g.w_bf16 && !g.w_layout_nk) {
      const float* w = static_cast<const float*>(g.w);
      for (int64_t k = 0; k < kc; ++k) {
        const float* src = w + (k0 + k) * g.ldw + n0 + p;
        float* dst = panel + k * kNr;
        int64_t j = 0;
        for (; j < nv; ++j) dst[j] = src[j];
        for (; j < kNr; ++j) dst[j] = 0.0f;
      }
      continue;
    }
    for (int64_t j = 0; j < kNr; ++j) {
      if (j >= nv) {
        for (int64_t k = 0; k < kc; ++k) panel[k * kNr + j] = 0.0f;
        continue;
      }
      const int64_t n = n0 + p + j;
      if (g.w_layout_nk && !g.w_bf16) {
        const float* src = static_cast<const float*>(g.w) + n * g.ldw + k0;
        for (int64_t k = 0; k < kc; ++k) panel[k * kNr + j] = src[k];
      } else if (g.w_layout_nk) {
        const uint16_t* src =
            static_cast<const uint16_t*>(g.w) + n * g.ldw + k0;
        for (int64_t k = 0; k < kc; ++k) {
          const uint32_t bits = static_cast<uint32_t>(src[k]) << 16;
          std::memcpy(&panel[k * kNr + j], &bits, 4);
        }
      } else {
        for (int64_t k = 0; k < kc; ++k)
          panel[k * kNr + j] = LoadB(g, n, k0 + k);
      }
    }
  }
}

// Prefetches (into L2) weight rows n0 .. n0 + nv, values k0 .. k0 + kKc
// (clipped to K), of a [n][k] weight.
inline void PrefetchWeightRows(const GemmArgs& g, int64_t n0, int64_t nv,
                               int64_t k0) {
  const int64_t esize = g.w_f16 || g.w_bf16 ? 2 : 4;
  const int64_t kc = g.k - k0 < kKc ? g.k - k0 : kKc;
  const char* base = static_cast<const char*>(g.w);
  for (int64_t j = 0; j < nv; ++j) {
    const char* row = base + ((n0 + j) * g.ldw + k0) * esize;
    for (int64_t off = 0; off < kc * esize; off += 64) {
      __builtin_prefetch(row + off, 0, 2);  // read, L2 (prefetcht1)
    }
  }
}

template <int MR>
inline void MicroDispatchF32(int mr, int64_t kc, const float* a, int64_t lda,
                             const float* bp, float* c, int64_t ldc, int nvalid,
                             bool init, const float* bias) {
  if constexpr (MR >= 1) {
    if (mr == MR) {
      MicroF32<MR>(kc, a, lda, bp, c, ldc, nvalid, init, bias);
      return;
    }
    if constexpr (MR > 1) {
      MicroDispatchF32<MR - 1>(mr, kc, a, lda, bp, c, ldc, nvalid, init, bias);
    }
  }
}

struct GemmPlan {
  const GemmArgs* g;
  int64_t nc;       // columns per task
  int64_t n_tasks;  // along N
  int64_t mc;       // rows per task
};

inline void GemmF32Task(void* arg, int64_t begin, int64_t end) {
  const GemmPlan& plan = *static_cast<const GemmPlan*>(arg);
  const GemmArgs& g = *plan.g;
  for (int64_t t = begin; t < end; ++t) {
    const int64_t n0 = (t % plan.n_tasks) * plan.nc;
    const int64_t nc = g.n - n0 < plan.nc ? g.n - n0 : plan.nc;
    const int64_t m0 = (t / plan.n_tasks) * plan.mc;
    const int64_t m1 = g.m - m0 < plan.mc ? g.m : m0 + plan.mc;
    const int64_t nc_padded = (nc + kNr - 1) / kNr * kNr;
    // See kPackAllCBytes; packed K block k0 starts at k0 * nc_padded.
    // Weights packed at load (g.packed) are read in place: panel p of the
    // task's columns, K block k0, at g.packed + ((n0 + p) / kNr * g.k + k0)
    // * kNr.
    const bool prepacked = g.packed != nullptr;
    const bool pack_all =
        prepacked || (m1 - m0) * nc_padded * 4 > kPackAllCBytes;
    const int64_t chunk = pack_all ? kMc : m1 - m0;
    float* bp = prepacked
                    ? nullptr
                    : ThreadScratch((pack_all ? g.k : kKc) * nc_padded);
    for (int64_t k0 = 0; !prepacked && pack_all && k0 < g.k; k0 += kKc) {
      const int64_t kc = g.k - k0 < kKc ? g.k - k0 : kKc;
      PackBF32(g, n0, nc, k0, kc, bp + k0 * nc_padded);
    }
    // Rows in chunks of kMc, K blocks inside a chunk: the chunk's C tile
    // (kMc x nc) stays in L2 across the K blocks instead of being re-read
    // from memory, a B panel (kc x kNr) stays in L1 over the chunk's rows,
    // whose A rows stream from L2.
    for (int64_t mb = m0; mb < m1; mb += chunk) {
      const int64_t mb_end = m1 - mb < chunk ? m1 : mb + chunk;
      for (int64_t k0 = 0; k0 < g.k; k0 += kKc) {
        const int64_t kc = g.k - k0 < kKc ? g.k - k0 : kKc;
        const float* bk = bp;
        if (prepacked) {
          bk = nullptr;
        } else if (pack_all) {
          bk += k0 * nc_padded;
        } else {
          PackBF32(g, n0, nc, k0, kc, bp);
        }
        // Packing per K block reads kc values of each of the task's nc
        // weight rows (rows ldw apart: more streams than the hardware
        // prefetcher follows), so the next block's are fetched into L2
        // while this one computes, a panel's rows at a time.
        const int64_t next_k0 = k0 + kKc;
        const bool prefetch_next =
            !prepacked && !pack_all && g.w_layout_nk && next_k0 < g.k;
        for (int64_t p = 0; p < nc; p += kNr) {
          const int nv = static_cast<int>(nc - p < kNr ? nc - p : kNr);
          if (prefetch_next) PrefetchWeightRows(g, n0 + p, nv, next_k0);
          const float* panel =
              prepacked ? g.packed + ((n0 + p) / kNr * g.k + k0) * kNr
                        : bk + p * kc;
          for (int64_t m = mb; m < mb_end; m += kMr) {
            const int mr =
                static_cast<int>(mb_end - m < kMr ? mb_end - m : kMr);
            MicroDispatchF32<kMr>(
                mr, kc, g.x + m * g.ldx + k0, g.ldx, panel,
                g.y + m * g.ldy + n0 + p, g.ldy, nv, k0 == 0,
                g.bias != nullptr ? g.bias + n0 + p : nullptr);
          }
        }
      }
    }
  }
}

// Splits N into tasks of <= kNcMax columns, a multiple of the thread count
// when possible, and M as well when N alone gives too few tasks.
inline GemmPlan MakePlan(const GemmArgs& g, int threads) {
  GemmPlan plan;
  plan.g = &g;
  int64_t j = 1;
  while (true) {
    const int64_t per = (g.n + threads * j - 1) / (threads * j);
    plan.nc = (per + kNr - 1) / kNr * kNr;
    if (plan.nc <= kNcMax) break;
    ++j;
  }
  plan.n_tasks = (g.n + plan.nc - 1) / plan.nc;
  int64_t m_tasks = 1;
  if (plan.n_tasks < threads && g.m >= 2 * kMr * threads) {
    m_tasks = (threads + plan.n_tasks - 1) / plan.n_tasks;
  }
  plan.mc = (g.m + m_tasks - 1) / m_tasks;
  plan.mc = (plan.mc + kMr - 1) / kMr * kMr;
  return plan;
}

inline void GemvTask(void* arg, int64_t begin, int64_t end) {
  const GemmArgs& g = *static_cast<const GemmArgs*>(arg);
  GemvRows(g, begin, end);
}

// Small M: columns [begin, end) in blocks of kSmallMBlockN weight rows, each
// block run against the activation rows kGemvMaxM at a time.
inline void SmallMTaskGeneric(void* arg, int64_t begin, int64_t end) {
  const GemmArgs& g = *static_cast<const GemmArgs*>(arg);
  for (int64_t n0 = begin; n0 < end; n0 += kSmallMBlockN) {
    const int64_t n1 = end - n0 < kSmallMBlockN ? end : n0 + kSmallMBlockN;
    for (int64_t m0 = 0; m0 < g.m; m0 += kGemvMaxM) {
      GemmArgs sub = g;
      sub.x = g.x + m0 * g.ldx;
      sub.y = g.y + m0 * g.ldy;
      sub.m = g.m - m0 < kGemvMaxM ? g.m - m0 : kGemvMaxM;
      GemvRows(sub, n0, n1);
    }
  }
}

// small_m_max: largest M for SmallMTaskGeneric (an ISA unit with its own
// small-M kernel passes kGemvMaxM).
inline void RunGemmF32(ThreadPool* pool, const GemmArgs& g,
                       int64_t small_m_max = kSmallMMaxM) {
  if (g.m * g.n * g.k < kMinParallelMacs) pool = nullptr;
  const int threads = pool != nullptr ? pool->num_threads() : 1;
  if (g.m <= kGemvMaxM && g.w_layout_nk) {
    const int64_t min_rows = kMinParallelMacs / (g.m * g.k) + 1;
    ParallelForRaw(pool, g.n, min_rows > 16 ? min_rows : 16, &GemvTask,
                   const_cast<GemmArgs*>(&g));
    return;
  }
  if (g.m <= small_m_max && g.w_layout_nk) {
    int64_t min_rows = kMinParallelMacs / (g.m * g.k) + 1;
    min_rows = (min_rows + kSmallMBlockN - 1) / kSmallMBlockN * kSmallMBlockN;
    ParallelForRaw(pool, g.n, min_rows > 16 ? min_rows : 16, &SmallMTaskGeneric,
                   const_cast<GemmArgs*>(&g));
    return;
  }
  GemmPlan plan = MakePlan(g, threads);
  const int64_t m_tasks = (g.m + plan.mc - 1) / plan.mc;
  ParallelForRaw(pool, plan.n_tasks * m_tasks, 1, &GemmF32Task, &plan);
}
