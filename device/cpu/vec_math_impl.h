// Vectorized exp / erf / tanh / sigmoid and the activation, gated-activation
// and softmax row kernels built on them, written once over a small SIMD
// abstraction. Included inside an ISA namespace (elementwise_avx512.cc,
// elementwise_avx2.cc) after that unit defines:
//   using VF = <float vector>; using VI = <int32 vector>; constexpr int kW;
//   VF Load(const float*); void Store(float*, VF); VF Set1(float);
//   VF Add/Sub/Mul/Div/Min/Max(VF, VF); VF Fma(VF a, VF b, VF c) = a*b+c;
//   VF Abs(VF); VF CopySign(VF mag, VF sign); VF Round(VF) (to nearest);
//   VF Select(VF cond_lt_a, VF cond_lt_b, VF if_true, VF if_false)
//      (= a < b ? if_true : if_false, per lane);
//   VF MulPow2i(VF p, VF n) (p 2^n for integral n in [-127, 128]);
//   VF Recip(VF d) (1 / d within ~2^-22 relative for finite d >= 1);
//   float ReduceMax(VF); float ReduceAdd(VF);
// Same approximations and error bounds as fast_math.h (exp: Cody-Waite + a
// degree-6 polynomial; erf: Abramowitz & Stegun 7.1.26; tanh via exp).
// Raw pointers and internal linkage only (see device/CMakeLists.txt).

// Always inlined: a call per vector (the kernels call it in loops over
// registers) cost 18% of the attention kernel when GCC declined.
__attribute__((always_inline)) inline VF VExp(VF x) {
  x = Max(Set1(-87.0f), Min(Set1(88.0f), x));
  const VF n = Round(Mul(x, Set1(1.44269504088896341f)));
  VF r = Fma(n, Set1(-0.693359375f), x);
  r = Fma(n, Set1(2.12194440e-4f), r);
  VF p = Set1(1.9875691500e-4f);
  p = Fma(p, r, Set1(1.3981999507e-3f));
  p = Fma(p, r, Set1(8.3334519073e-3f));
  p = Fma(p, r, Set1(4.1665795894e-2f));
  p = Fma(p, r, Set1(1.6666665459e-1f));
  p = Fma(p, r, Set1(5.0000001201e-1f));
  p = Fma(Mul(p, r), r, Add(r, Set1(1.0f)));
  return MulPow2i(p, n);
}

inline VF VErf(VF x) {
  // |x| >= 10 gives 1 (exp(-x^2) = 0) and keeps Recip's argument finite;
  // a NaN x becomes 10 here and its sign is copied back.
  const VF ax = Min(Abs(x), Set1(10.0f));
  // The division was half of GELU's cost; the reciprocal estimate with a
  // Newton step is exact to ~2^-22, far below the formula's 1.5e-7.
  const VF t = Recip(Fma(Set1(0.3275911f), ax, Set1(1.0f)));
  VF p = Set1(1.061405429f);
  p = Fma(p, t, Set1(-1.453152027f));
  p = Fma(p, t, Set1(1.421413741f));
  p = Fma(p, t, Set1(-0.284496736f));
  p = Fma(p, t, Set1(0.254829592f));
  const VF e = VExp(Mul(Sub(Set1(0.0f), ax), ax));
  const VF y = Sub(Set1(1.0f), Mul(Mul(p, t), e));
  return CopySign(y, x);
}

inline VF VTanh(VF x) {
  const VF ax = Abs(x);
  const VF e = VExp(Add(ax, ax));
  const VF big = Sub(Set1(1.0f), Div(Set1(2.0f), Add(e, Set1(1.0f))));
  // Tiny |x|: the cubic term (1 - 2/(e+1) cancels badly there).
  const VF ax2 = Mul(ax, ax);
  const VF small = Sub(ax, Mul(Mul(ax2, ax), Set1(1.0f / 3.0f)));
  return CopySign(Select(ax, Set1(1e-3f), small, big), x);
}

inline VF VSigmoid(VF x) {
  return Div(Set1(1.0f), Add(Set1(1.0f), VExp(Sub(Set1(0.0f), x))));
}

template <Activation kAct>
inline VF VAct(VF x) {
  if constexpr (kAct == Activation::kSilu) {
    return Mul(x, VSigmoid(x));
  } else if constexpr (kAct == Activation::kGeluErf) {
    const VF half_x = Mul(Set1(0.5f), x);
    return Fma(half_x, VErf(Mul(x, Set1(0.70710678118654752440f))), half_x);
  } else if constexpr (kAct == Activation::kGeluTanh) {
    const VF x3 = Mul(Mul(x, x), x);
    const VF inner =
        Mul(Set1(0.79788456080286535588f), Fma(Set1(0.044715f), x3, x));
    const VF half_x = Mul(Set1(0.5f), x);
    return Fma(half_x, VTanh(inner), half_x);
  } else if constexpr (kAct == Activation::kRelu) {
    return Max(x, Set1(0.0f));
  } else {
    return VTanh(x);
  }
}

// Runs body(in..., out) on full vectors, then once on a zero-padded copy of
// the tail (so every lane is computed the same way).
template <Activation kAct>
void ActRowVec(const float* x, float* out, int64_t n) {
  int64_t j = 0;
  for (; j + kW <= n; j += kW) Store(out + j, VAct<kAct>(Load(x + j)));
  if (j < n) {
    float in[kW] = {}, res[kW];
    for (int64_t i = j; i < n; ++i) in[i - j] = x[i];
    Store(res, VAct<kAct>(Load(in)));
    for (int64_t i = j; i < n; ++i) out[i] = res[i - j];
  }
}

template <Activation kAct>
void GatedRowVec(const float* gate, const float* up, float* out, int64_t n) {
  int64_t j = 0;
  for (; j + kW <= n; j += kW) {
    Store(out + j, Mul(VAct<kAct>(Load(gate + j)), Load(up + j)));
  }
  if (j < n) {
    float g[kW] = {}, u[kW] = {}, res[kW];
    for (int64_t i = j; i < n; ++i) {
      g[i - j] = gate[i];
      u[i - j] = up[i];
    }
    Store(res, Mul(VAct<kAct>(Load(g)), Load(u)));
    for (int64_t i = j; i < n; ++i) out[i] = res[i - j];
  }
}

// out = softmax(x) over n >= 1 elements (in place allowed).
inline void SoftmaxRowVec(const float* x, float* out, int64_t n) {
  int64_t j = 0;
  VF vmax = Set1(-INFINITY);
  for (; j + kW <= n; j += kW) vmax = Max(vmax, Load(x + j));
  float mx = ReduceMax(vmax);
  for (int64_t i = j; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
  const VF vm = Set1(mx);
  VF vsum = Set1(0.0f);
  for (j = 0; j + kW <= n; j += kW) {
    const VF e = VExp(Sub(Load(x + j), vm));
    Store(out + j, e);
    vsum = Add(vsum, e);
  }
  float sum = ReduceAdd(vsum);
  if (j < n) {
    float in[kW], res[kW];
    for (int i = 0; i < kW; ++i) in[i] = -INFINITY;
    for (int64_t i = j; i < n; ++i) in[i - j] = x[i];
    Store(res, VExp(Sub(Load(in), vm)));
    for (int64_t i = j; i < n; ++i) {
      out[i] = res[i - j];
      sum += res[i - j];
    }
  }
  const VF inv = Set1(1.0f / sum);
  for (j = 0; j + kW <= n; j += kW) Store(out + j, Mul(Load(out + j), inv));
  for (; j < n; ++j) out[j] *= 1.0f / sum;
}
