// Portable GEMM micro-kernel and GEMV written for the auto-vectorizer, for
// the AVX2 and scalar builds. Included inside a namespace by gemm_avx2.cc /
// gemm_scalar.cc after they define kNr and kMr.

// A unit with its own micro-kernel defines INFERD_GEMM_OWN_MICRO_KERNEL.
#ifndef INFERD_GEMM_OWN_MICRO_KERNEL
template <int MR>
void MicroF32(int64_t kc, const float* a, int64_t lda, const float* bp,
              float* c, int64_t ldc, int nvalid, bool init,
              const float* bias) {
  float acc[MR][kNr];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < kNr; ++j) acc[i][j] = 0.0f;
  for (int64_t k = 0; k < kc; ++k) {
    const float* b = bp + k * kNr;
    for (int i = 0; i < MR; ++i) {
      const float av = a[i * lda + k];
      for (int j = 0; j < kNr; ++j) acc[i][j] += av * b[j];
    }
  }
  for (int i = 0; i < MR; ++i) {
    float* cr = c + i * ldc;
    for (int j = 0; j < nvalid; ++j) {
      const float base = init ? (bias != nullptr ? bias[j] : 0.0f) : cr[j];
      cr[j] = base + acc[i][j];
    }
  }
}
#endif  // INFERD_GEMM_OWN_MICRO_KERNEL

void GemvRows(const GemmArgs& g, int64_t n_begin, int64_t n_end) {
  constexpr int kLanes = 16;
  for (int64_t n = n_begin; n < n_end; ++n) {
    for (int64_t m = 0; m < g.m; ++m) {
      const float* x = g.x + m * g.ldx;
      float part[kLanes] = {};
      int64_t k = 0;
      if (g.w_bf16) {
        const uint16_t* w = static_cast<const uint16_t*>(g.w) + n * g.ldw;
        for (; k + kLanes <= g.k; k += kLanes) {
          for (int l = 0; l < kLanes; ++l) {
            const uint32_t bits = static_cast<uint32_t>(w[k + l]) << 16;
            float wf;
            std::memcpy(&wf, &bits, 4);
            part[l] += wf * x[k + l];
          }
        }
      } else {
        const float* w = static_cast<const float*>(g.w) + n * g.ldw;
        for (; k + kLanes <= g.k; k += kLanes) {
          for (int l = 0; l < kLanes; ++l) part[l] += w[k + l] * x[k + l];
        }
      }
      float sum = 0.0f;
      for (; k < g.k; ++k) sum += LoadB(g, n, k) * x[k];
      for (int l = 0; l < kLanes; ++l) sum += part[l];
      g.y[m * g.ldy + n] = sum + (g.bias != nullptr ? g.bias[n] : 0.0f);
    }
  }
}
