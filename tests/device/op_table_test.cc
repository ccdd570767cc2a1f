// Every op of device/op_list.h, run on the same inputs through the
// reference table and through the table of each registered host device (at
// every ISA level): the outputs agree within 1e-4 relative. A new op in the
// list needs its <Kernel>Case below or this file does not compile. The
// suites in ops_test.cc and attention_test.cc sweep shapes and dtypes
// further.
#include "device/op_table.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "device/bf16.h"
#include "device/device.h"
#include "device/internal/check.h"
#include "device/op_list.h"
#include "gtest/gtest.h"
#include "tests/device/test_util.h"

namespace inferd {
namespace {

using testing_util::IsaCapTest;
using testing_util::RandomVector;
using testing_util::ToBf16;
using testing_util::View2;

// What one run of a case wrote, flattened to floats.
using Outputs = std::vector<float>;
// Runs one op through `t` on fixed inputs.
using Case = absl::StatusOr<Outputs> (*)(const OpTable& t,
                                         const KernelContext& ctx);

void Append(const std::vector<float>& v, Outputs* out) {
  out->insert(out->end(), v.begin(), v.end());
}

void AppendBf16(const std::vector<uint16_t>& v, Outputs* out) {
  for (uint16_t b : v) out->push_back(Bf16ToFloat(b));
}

TensorView Vec(std::vector<float>& v) {
  return TensorView::Contiguous(v.data(), DType::kF32,
                                {static_cast<int64_t>(v.size())});
}

TensorView I32(std::vector<int32_t>& v) {
  return TensorView::Contiguous(v.data(), DType::kI32,
                                {static_cast<int64_t>(v.size())});
}

const Activation kActivations[] = {Activation::kSilu, Activation::kGeluErf,
                                   Activation::kGeluTanh, Activation::kRelu,
                                   Activation::kTanh};

// ---------------------------------------------------------------------------
// One case per op. Shapes are not multiples of the vector widths; rows are
// strided where the op allows it.

// M = 1 (GEMV) and M = 9; x rows padded.
absl::StatusOr<Outputs> LinearCase(const OpTable& t, const KernelContext& ctx) {
  Outputs out;
  const int64_t k = 67, n = 35;
  std::vector<float> w = RandomVector(n * k, 2), bias = RandomVector(n, 3);
  for (int64_t m : {1, 9}) {
    std::vector<float> x = RandomVector(m * (k + 3), 1), y(m * n);
    INFERD_DEVICE_RETURN_IF_ERROR(t.linear(ctx, View2(x.data(), m, k, k + 3),
                                           View2(w.data(), n, k), Vec(bias),
                                           View2(y.data(), m, n)));
    Append(y, &out);
  }
  return out;
}

// Linear on the weights the table packs (plain ones when it packs none).
absl::StatusOr<Outputs> PackLinearCase(const OpTable& t,
                                       const KernelContext& ctx) {
  Outputs out;
  const int64_t k = 96, n = 67;
  std::vector<float> w = RandomVector(n * k, 5);
  TensorView wv = View2(w.data(), n, k);
  DeviceBuffer packed;
  if (t.pack_linear != nullptr) {
    absl::StatusOr<DeviceBuffer> p = t.pack_linear(ctx, wv);
    if (!p.ok()) return p.status();
    packed = std::move(*p);
    if (packed.size() > 0) wv.packed = packed.data();
  }
  for (int64_t m : {1, 9}) {
    std::vector<float> x = RandomVector(m * k, 4), y(m * n);
    INFERD_DEVICE_RETURN_IF_ERROR(t.linear(
        ctx, View2(x.data(), m, k), wv, TensorView{}, View2(y.data(), m, n)));
    Append(y, &out);
  }
  return out;
}

absl::StatusOr<Outputs> MatMulCase(const OpTable& t, const KernelContext& ctx) {
  Outputs out;
  const int64_t m = 7, k = 33, n = 19;
  std::vector<float> a = RandomVector(m * k, 6), b = RandomVector(k * n, 7);
  for (bool transpose_b : {false, true}) {
    std::vector<float> c(m * n);
    const TensorView bv =
        transpose_b ? View2(b.data(), n, k) : View2(b.data(), k, n);
    INFERD_DEVICE_RETURN_IF_ERROR(t.matmul(ctx, View2(a.data(), m, k), bv,
                                           transpose_b, View2(c.data(), m, n)));
    Append(c, &out);
  }
  return out;
}

absl::StatusOr<Outputs> EmbeddingCase(const OpTable& t,
                                      const KernelContext& ctx) {
  Outputs out;
  const int64_t vocab = 11, h = 37;
  std::vector<float> table = RandomVector(vocab * h, 8);
  std::vector<uint16_t> table16 = ToBf16(table);
  std::vector<int32_t> ids = {3, 0, 10, 3, 7};
  const int64_t rows = static_cast<int64_t>(ids.size());
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    void* data = dtype == DType::kF32 ? static_cast<void*>(table.data())
                                      : static_cast<void*>(table16.data());
    std::vector<float> y(rows * h);
    INFERD_DEVICE_RETURN_IF_ERROR(
        t.embedding(ctx, TensorView::Contiguous(data, dtype, {vocab, h}),
                    I32(ids), View2(y.data(), rows, h)));
    Append(y, &out);
  }
  return out;
}

absl::StatusOr<Outputs> MeanPoolCase(const OpTable& t,
                                     const KernelContext& ctx) {
  const int64_t rows = 23, h = 37;
  std::vector<float> x = RandomVector(rows * h, 10, -50, 50);
  // Ranges of varied length, overlapping and out of order, one of one row.
  std::vector<int32_t> starts = {0, 5, 22, 3, 7};
  std::vector<int32_t> ends = {5, 23, 23, 17, 8};
  const int64_t seqs = static_cast<int64_t>(starts.size());
  std::vector<float> y(seqs * h);
  INFERD_DEVICE_RETURN_IF_ERROR(t.mean_pool(ctx, View2(x.data(), rows, h),
                                            I32(starts), I32(ends),
                                            View2(y.data(), seqs, h)));
  Outputs out;
  Append(y, &out);
  return out;
}

// Rows of varied scale, one all zero (the 1e-12 floor), and in place.
absl::StatusOr<Outputs> L2NormalizeCase(const OpTable& t,
                                        const KernelContext& ctx) {
  const int64_t rows = 6, h = 37;
  std::vector<float> x = RandomVector(rows * h, 21, -30, 30);
  for (int64_t j = 0; j < h; ++j) x[2 * h + j] = 0.0f;
  for (int64_t j = 0; j < h; ++j) x[4 * h + j] *= 1e-3f;
  std::vector<float> y(rows * h);
  INFERD_DEVICE_RETURN_IF_ERROR(t.l2_normalize(
      ctx, View2(x.data(), rows, h), View2(y.data(), rows, h)));
  Outputs out;
  Append(y, &out);
  INFERD_DEVICE_RETURN_IF_ERROR(t.l2_normalize(
      ctx, View2(x.data(), rows, h), View2(x.data(), rows, h)));
  Append(x, &out);
  return out;
}

// Softmax rows of 1, 2 and 7 labels; sigmoid of large and small logits.
absl::StatusOr<Outputs> ScoresCase(const OpTable& t, const KernelContext& ctx) {
  Outputs out;
  for (int64_t labels : {1, 2, 7}) {
    const int64_t rows = 5;
    std::vector<float> x = RandomVector(rows * labels, 22 + labels, -40, 40);
    for (ScoreMode mode : {ScoreMode::kSoftmax, ScoreMode::kSigmoid}) {
      std::vector<float> y(rows * labels);
      INFERD_DEVICE_RETURN_IF_ERROR(t.scores(ctx, mode,
                                             View2(x.data(), rows, labels),
                                             View2(y.data(), rows, labels)));
      Append(y, &out);
    }
  }
  return out;
}

// F32 -> BF16, F32 -> F16, BF16 -> F32.
absl::StatusOr<Outputs> ConvertCase(const OpTable& t,
                                    const KernelContext& ctx) {
  Outputs out;
  const int64_t rows = 3, cols = 37;
  std::vector<float> src = RandomVector(rows * cols, 9, -100, 100);
  std::vector<uint16_t> bf16(rows * cols), f16(rows * cols);
  INFERD_DEVICE_RETURN_IF_ERROR(t.convert(
      ctx, View2(src.data(), rows, cols),
      TensorView::Contiguous(bf16.data(), DType::kBF16, {rows, cols})));
  AppendBf16(bf16, &out);
  INFERD_DEVICE_RETURN_IF_ERROR(
      t.convert(ctx, View2(src.data(), rows, cols),
                TensorView::Contiguous(f16.data(), DType::kF16, {rows, cols})));
  for (uint16_t h : f16) out.push_back(F16ToFloat(h));
  std::vector<float> back(rows * cols);
  INFERD_DEVICE_RETURN_IF_ERROR(t.convert(
      ctx, TensorView::Contiguous(bf16.data(), DType::kBF16, {rows, cols}),
      View2(back.data(), rows, cols)));
  Append(back, &out);
  return out;
}

absl::StatusOr<Outputs> AddCase(const OpTable& t, const KernelContext& ctx) {
  const int64_t rows = 5, cols = 37;
  std::vector<float> a = RandomVector(rows * (cols + 2), 10);
  std::vector<float> b = RandomVector(rows * cols, 11), y(rows * cols);
  INFERD_DEVICE_RETURN_IF_ERROR(
      t.add(ctx, View2(a.data(), rows, cols, cols + 2),
            View2(b.data(), rows, cols), View2(y.data(), rows, cols)));
  return y;
}

absl::StatusOr<Outputs> ActivateCase(const OpTable& t,
                                     const KernelContext& ctx) {
  Outputs out;
  const int64_t rows = 4, cols = 37;
  std::vector<float> x = RandomVector(rows * cols, 12, -6, 6);
  for (Activation act : kActivations) {
    std::vector<float> y(rows * cols);
    INFERD_DEVICE_RETURN_IF_ERROR(t.activate(
        ctx, act, View2(x.data(), rows, cols), View2(y.data(), rows, cols)));
    Append(y, &out);
  }
  return out;
}

// gate and up: the halves of a fused [gate | up] buffer.
absl::StatusOr<Outputs> GatedActivateCase(const OpTable& t,
                                          const KernelContext& ctx) {
  Outputs out;
  const int64_t rows = 4, inter = 33;
  std::vector<float> gate_up = RandomVector(rows * 2 * inter, 13, -4, 4);
  for (Activation act : kActivations) {
    std::vector<float> y(rows * inter);
    INFERD_DEVICE_RETURN_IF_ERROR(t.gated_activate(
        ctx, act, View2(gate_up.data(), rows, inter, 2 * inter),
        View2(gate_up.data() + inter, rows, inter, 2 * inter),
        View2(y.data(), rows, inter)));
    Append(y, &out);
  }
  return out;
}

absl::StatusOr<Outputs> SoftmaxCase(const OpTable& t,
                                    const KernelContext& ctx) {
  const int64_t rows = 5, cols = 37;
  std::vector<float> x = RandomVector(rows * cols, 14, -20, 20);
  std::vector<float> y(rows * cols);
  INFERD_DEVICE_RETURN_IF_ERROR(
      t.softmax(ctx, View2(x.data(), rows, cols), View2(y.data(), rows, cols)));
  return y;
}

// With and without residual and bias; the residual's new value is an
// output too.
absl::StatusOr<Outputs> LayerNormCase(const OpTable& t,
                                      const KernelContext& ctx) {
  Outputs out;
  const int64_t rows = 6, h = 37;
  std::vector<float> x = RandomVector(rows * h, 15, -3, 3);
  std::vector<float> w = RandomVector(h, 16), b = RandomVector(h, 17);
  for (bool with_residual : {false, true}) {
    for (bool with_bias : {false, true}) {
      std::vector<float> residual = RandomVector(rows * h, 18), y(rows * h);
      INFERD_DEVICE_RETURN_IF_ERROR(t.layer_norm(
          ctx, View2(x.data(), rows, h),
          with_residual ? View2(residual.data(), rows, h) : TensorView{},
          Vec(w), with_bias ? Vec(b) : TensorView{}, 1e-5f,
          View2(y.data(), rows, h)));
      Append(y, &out);
      Append(residual, &out);
    }
  }
  return out;
}

absl::StatusOr<Outputs> RmsNormCase(const OpTable& t,
                                    const KernelContext& ctx) {
  Outputs out;
  const int64_t rows = 6, h = 37;
  std::vector<float> x = RandomVector(rows * h, 19, -3, 3);
  std::vector<float> w = RandomVector(h, 20);
  for (bool with_residual : {false, true}) {
    std::vector<float> residual = RandomVector(rows * h, 21), y(rows * h);
    INFERD_DEVICE_RETURN_IF_ERROR(t.rms_norm(
        ctx, View2(x.data(), rows, h),
        with_residual ? View2(residual.data(), rows, h) : TensorView{}, Vec(w),
        1e-6f, View2(y.data(), rows, h)));
    Append(y, &out);
    Append(residual, &out);
  }
  return out;
}

// Partial rotary (12 of 16 dims), both styles, with and without k.
absl::StatusOr<Outputs> ApplyRotaryCase(const OpTable& t,
                                        const KernelContext& ctx) {
  Outputs out;
  const int64_t tokens = 5, head_dim = 16, rot = 12;
  std::vector<float> cos_sin(tokens * rot);
  for (int64_t r = 0; r < tokens; ++r) {
    for (int64_t i = 0; i < rot / 2; ++i) {
      const double angle = r * std::pow(10000.0, -2.0 * i / rot);
      cos_sin[r * rot + i] = static_cast<float>(std::cos(angle));
      cos_sin[r * rot + rot / 2 + i] = static_cast<float>(std::sin(angle));
    }
  }
  for (RopeStyle style : {RopeStyle::kNeox, RopeStyle::kGptJ}) {
    for (bool with_k : {false, true}) {
      std::vector<float> q = RandomVector(tokens * 2 * head_dim, 22);
      std::vector<float> k = RandomVector(tokens * head_dim, 23);
      INFERD_DEVICE_RETURN_IF_ERROR(t.apply_rotary(
          ctx, View2(q.data(), tokens, 2 * head_dim),
          with_k ? View2(k.data(), tokens, head_dim) : TensorView{},
          View2(cos_sin.data(), tokens, rot), head_dim, style));
      Append(q, &out);
      Append(k, &out);
    }
  }
  return out;
}

// GQA (4 query heads over 2 kv heads); the masks the params allow.
std::vector<AttentionParams> AttentionVariants() {
  AttentionParams p;
  p.num_heads = 4;
  p.num_kv_heads = 2;
  p.head_dim = 16;
  p.scale = 0.25f;
  std::vector<AttentionParams> variants;
  p.causal = false;
  variants.push_back(p);
  p.causal = true;
  variants.push_back(p);
  p.sliding_window = 3;
  p.logits_soft_cap = 5.0f;
  variants.push_back(p);
  return variants;
}

// Three sequences of 1, 4 and 6 tokens.
absl::StatusOr<Outputs> VarlenAttentionCase(const OpTable& t,
                                            const KernelContext& ctx) {
  Outputs out;
  const int64_t tokens = 11, qw = 4 * 16, kw = 2 * 16;
  std::vector<float> q = RandomVector(tokens * qw, 24);
  std::vector<float> k = RandomVector(tokens * kw, 25);
  std::vector<float> v = RandomVector(tokens * kw, 26);
  std::vector<int32_t> cu = {0, 1, 5, 11};
  for (const AttentionParams& p : AttentionVariants()) {
    std::vector<float> y(tokens * qw);
    INFERD_DEVICE_RETURN_IF_ERROR(t.varlen_attention(
        ctx, View2(q.data(), tokens, qw), View2(k.data(), tokens, kw),
        View2(v.data(), tokens, kw), I32(cu), p, View2(y.data(), tokens, qw)));
    Append(y, &out);
  }
  return out;
}

// F32 and BF16 caches of 3 blocks of 4; slot -1 is skipped.
absl::StatusOr<Outputs> ReshapeAndCacheCase(const OpTable& t,
                                            const KernelContext& ctx) {
  Outputs out;
  const int64_t tokens = 5, blocks = 3, block_size = 4, hk = 2, d = 8;
  const int64_t cache_elems = blocks * block_size * hk * d;
  std::vector<float> k = RandomVector(tokens * hk * d, 27);
  std::vector<float> v = RandomVector(tokens * hk * d, 28);
  std::vector<int32_t> slots = {5, -1, 0, 11, 7};
  std::vector<float> kc(cache_elems), vc(cache_elems);
  INFERD_DEVICE_RETURN_IF_ERROR(
      t.reshape_and_cache(ctx, View2(k.data(), tokens, hk * d),
                          View2(v.data(), tokens, hk * d), I32(slots),
                          TensorView::Contiguous(kc.data(), DType::kF32,
                                                 {blocks, block_size, hk, d}),
                          TensorView::Contiguous(vc.data(), DType::kF32,
                                                 {blocks, block_size, hk, d})));
  Append(kc, &out);
  Append(vc, &out);
  std::vector<uint16_t> kc16(cache_elems), vc16(cache_elems);
  INFERD_DEVICE_RETURN_IF_ERROR(
      t.reshape_and_cache(ctx, View2(k.data(), tokens, hk * d),
                          View2(v.data(), tokens, hk * d), I32(slots),
                          TensorView::Contiguous(kc16.data(), DType::kBF16,
                                                 {blocks, block_size, hk, d}),
                          TensorView::Contiguous(vc16.data(), DType::kBF16,
                                                 {blocks, block_size, hk, d})));
  AppendBf16(kc16, &out);
  AppendBf16(vc16, &out);
  return out;
}

// A decode (1 new token of 7) and a prefill chunk (3 new of 5) over F32 and
// BF16 caches of 4 blocks of 4, blocks out of order.
absl::StatusOr<Outputs> PagedAttentionCase(const OpTable& t,
                                           const KernelContext& ctx) {
  Outputs out;
  const int64_t tokens = 4, blocks = 4, block_size = 4, hk = 2, d = 16;
  const int64_t qw = 4 * d, cache_elems = blocks * block_size * hk * d;
  std::vector<float> q = RandomVector(tokens * qw, 29);
  std::vector<float> kc = RandomVector(cache_elems, 30);
  std::vector<float> vc = RandomVector(cache_elems, 31);
  std::vector<uint16_t> kc16 = ToBf16(kc), vc16 = ToBf16(vc);
  std::vector<int32_t> query_start_loc = {0, 1, 4}, seq_lens = {7, 5};
  std::vector<int32_t> block_tables = {2, 0, 1, 3};
  PagedAttentionMetadata md;
  md.query_start_loc = I32(query_start_loc);
  md.seq_lens = I32(seq_lens);
  md.block_tables =
      TensorView::Contiguous(block_tables.data(), DType::kI32, {2, 2});
  md.max_query_len = 3;
  md.max_seq_len = 7;
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    const bool f32 = dtype == DType::kF32;
    const TensorView k_cache = TensorView::Contiguous(
        f32 ? static_cast<void*>(kc.data()) : kc16.data(), dtype,
        {blocks, block_size, hk, d});
    const TensorView v_cache = TensorView::Contiguous(
        f32 ? static_cast<void*>(vc.data()) : vc16.data(), dtype,
        {blocks, block_size, hk, d});
    for (const AttentionParams& p : AttentionVariants()) {
      if (!p.causal) continue;  // paged attention is causal only
      std::vector<float> y(tokens * qw);
      INFERD_DEVICE_RETURN_IF_ERROR(
          t.paged_attention(ctx, View2(q.data(), tokens, qw), k_cache, v_cache,
                            md, p, View2(y.data(), tokens, qw)));
      Append(y, &out);
    }
  }
  return out;
}

// ---------------------------------------------------------------------------

// Runs `run` through the reference table and through every host device's
// table that has `entry`; a required op must be in each.
template <typename Fn>
void ExpectAgreesWithReference(const char* op, Fn OpTable::*entry,
                               bool required, Case run) {
  absl::StatusOr<Device*> cpu = DeviceRegistry::Get("cpu");
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  const KernelContext ref_ctx{*cpu, nullptr};
  absl::StatusOr<Outputs> want = run(ReferenceOpTable(), ref_ctx);
  ASSERT_TRUE(want.ok()) << op << " (reference): " << want.status();
  ASSERT_FALSE(want->empty());
  int compared = 0;
  for (const std::string& name : DeviceRegistry::Names()) {
    absl::StatusOr<Device*> device = DeviceRegistry::Get(name);
    ASSERT_TRUE(device.ok()) << name << ": " << device.status();
    if (!(*device)->host_accessible()) continue;  // inputs are host memory
    const OpTable& table = (*device)->ops();
    if (table.*entry == nullptr) {
      EXPECT_FALSE(required) << name << " has no " << op << " kernel";
      continue;
    }
    const KernelContext ctx{*device, (*device)->thread_pool()};
    absl::StatusOr<Outputs> got = run(table, ctx);
    ASSERT_TRUE(got.ok()) << op << " on " << name << ": " << got.status();
    ASSERT_EQ(got->size(), want->size());
    for (size_t i = 0; i < want->size(); ++i) {
      const float w = (*want)[i];
      ASSERT_NEAR((*got)[i], w, 1e-4 * (1.0 + std::fabs(w)))
          << op << " on " << name << " at output " << i;
    }
    ++compared;
  }
  EXPECT_GT(compared, 0) << "no device implements " << op;
}

class OpTableTest : public IsaCapTest {};

#define INFERD_AGREEMENT_TEST(member, Kernel, required)            \
  TEST_P(OpTableTest, Kernel##AgreesWithReference) {               \
    ExpectAgreesWithReference(#member, &OpTable::member, required, \
                              &Kernel##Case);                      \
  }
#define INFERD_REQUIRED_OP_TEST(member, Kernel, Return, params) \
  INFERD_AGREEMENT_TEST(member, Kernel, true)
#define INFERD_OPTIONAL_OP_TEST(member, Kernel, Return, params) \
  INFERD_AGREEMENT_TEST(member, Kernel, false)
INFERD_OPS(INFERD_REQUIRED_OP_TEST)
INFERD_OPTIONAL_OPS(INFERD_OPTIONAL_OP_TEST)
#undef INFERD_REQUIRED_OP_TEST
#undef INFERD_OPTIONAL_OP_TEST
#undef INFERD_AGREEMENT_TEST

INSTANTIATE_TEST_SUITE_P(Isa, OpTableTest, INFERD_ALL_ISAS,
                         testing_util::IsaParamName);

TEST(OpListTest, ReferenceTableHasEveryRequiredOp) {
  const OpTable& t = ReferenceOpTable();
#define INFERD_EXPECT_OP(member, Kernel, Return, params) \
  EXPECT_NE(t.member, nullptr) << #member;
  INFERD_OPS(INFERD_EXPECT_OP)
#undef INFERD_EXPECT_OP
}

TEST(OpListTest, CpuTableHasEveryOp) {
  absl::StatusOr<Device*> cpu = DeviceRegistry::Get("cpu");
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  const OpTable& t = (*cpu)->ops();
#define INFERD_EXPECT_OP(member, Kernel, Return, params) \
  EXPECT_NE(t.member, nullptr) << #member;
  INFERD_OPS(INFERD_EXPECT_OP)
  INFERD_OPTIONAL_OPS(INFERD_EXPECT_OP)
#undef INFERD_EXPECT_OP
}

}  // namespace
}  // namespace inferd
