// WeightLoader: packed copies of GEMM weights for encoders, within their
// byte budget.
#include "runtime/model/weight_loader.h"

#include <sys/mman.h>

#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "device/cpu/cpu_features.h"
#include "device/device.h"
#include "device/ops.h"
#include "device/quant.h"
#include "gtest/gtest.h"
#include "runtime/loader/weights.h"

namespace inferd {
namespace {

// A store with `count` F32 weights "w0", "w1", ... of [n, k].
std::unique_ptr<WeightStore> MakeStore(int count, int64_t n, int64_t k,
                                       std::shared_ptr<std::vector<float>>* data) {
  *data = std::make_shared<std::vector<float>>(count * n * k);
  for (size_t i = 0; i < (*data)->size(); ++i) {
    (**data)[i] = static_cast<float>((i * 37) % 101) / 50.0f - 1.0f;
  }
  std::vector<SafetensorsTensorInfo> infos;
  for (int i = 0; i < count; ++i) {
    SafetensorsTensorInfo t;
    t.name = "w" + std::to_string(i);
    t.dtype_name = "F32";
    t.dtype = DType::kF32;
    t.shape = {n, k};
    t.begin = static_cast<uint64_t>(i * n * k * 4);
    t.end = t.begin + static_cast<uint64_t>(n * k * 4);
    t.alignment = 64;
    t.data = reinterpret_cast<const uint8_t*>((*data)->data() + i * n * k);
    infos.push_back(t);
  }
  absl::StatusOr<std::unique_ptr<WeightStore>> store =
      WeightStore::FromTensors("test", std::move(infos), *data);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? std::move(*store) : nullptr;
}

TEST(WeightLoaderTest, PacksLinearWeightsWithinTheBudget) {
  if (ActiveCpuIsa() < CpuIsa::kAvx512) {
    GTEST_SKIP() << "F32 weights are packed only at the avx512 level; this "
                    "CPU runs " << CpuIsaName(ActiveCpuIsa());
  }
  const int64_t n = 64, k = 96;
  std::shared_ptr<std::vector<float>> data;
  std::unique_ptr<WeightStore> store = MakeStore(3, n, k, &data);
  ASSERT_NE(store, nullptr);
  absl::StatusOr<Device*> cpu = DeviceRegistry::Get("cpu");
  ASSERT_TRUE(cpu.ok());

  // No budget: views of the mapping, nothing packed.
  WeightBuffers plain;
  WeightLoader off(store.get(), *cpu, DType::kF32, &plain);
  absl::StatusOr<TensorView> w = off.LinearWeight("w0", n, k);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->packed, nullptr);
  EXPECT_EQ(plain.bytes_allocated, 0);

  // A budget for two copies (header + n x k floats each): two packed, the
  // third left as stored.
  const int64_t one = 64 + n * k * 4;
  WeightBuffers out;
  WeightLoader loader(store.get(), *cpu, DType::kF32, &out);
  loader.set_pack_linear_budget(2 * one);
  std::vector<TensorView> views;
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<TensorView> v =
        loader.LinearWeight("w" + std::to_string(i), n, k);
    ASSERT_TRUE(v.ok()) << v.status();
    views.push_back(*v);
  }
  EXPECT_NE(views[0].packed, nullptr);
  EXPECT_NE(views[1].packed, nullptr);
  EXPECT_EQ(views[2].packed, nullptr);
  EXPECT_EQ(out.bytes_allocated, 2 * one);

  // The packed views compute the stored weights' product.
  const int64_t m = 100;
  std::vector<float> x(m * k), y(m * n), y_ref(m * n);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 13) / 7.0f - 0.9f;
  const ExecutionContext opt{*cpu, KernelChoice::kOptimized};
  const ExecutionContext ref{*cpu, KernelChoice::kReference};
  const TensorView xv = TensorView::Contiguous(x.data(), DType::kF32, {m, k});
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(Linear(opt, xv, views[i], TensorView{},
                       TensorView::Contiguous(y.data(), DType::kF32, {m, n})).ok());
    ASSERT_TRUE(Linear(ref, xv, views[i], TensorView{},
                       TensorView::Contiguous(y_ref.data(), DType::kF32, {m, n})).ok());
    for (int64_t j = 0; j < m * n; ++j) {
      ASSERT_NEAR(y[j], y_ref[j], 1e-4f) << "weight " << i << " at " << j;
    }
  }
}

// The int8 policy's panels of a block-quantized weight used in place
// (a GGUF tensor): made once per store and shared by a second loader (a
// replica), computing what panels of a private copy compute, and the
// stored bytes' pages given back (made inaccessible: a kernel reading them
// would crash this test). Without the panels (no AVX512-VNNI) nothing is
// packed or released.
TEST(WeightLoaderTest, Int8PanelsAreSharedAndTheStoredPagesReleased) {
  const int64_t n = 256, k = 1024;
  const size_t row_bytes = DTypeRowBytes(DType::kQ4_0, k), bytes = row_bytes * n;
  // A page-aligned region of its own, as LoadWeightFileBytes makes, with
  // the tensor at an odd offset (its first and last pages shared with
  // other bytes).
  const size_t region_bytes = bytes + 3 * 4096;
  void* region = ::mmap(nullptr, region_bytes, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(region, MAP_FAILED);
  std::shared_ptr<void> owner(region, [region_bytes](void* p) { ::munmap(p, region_bytes); });
  uint8_t* data = static_cast<uint8_t*>(region) + 100;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> row(k);
  for (int64_t r = 0; r < n; ++r) {
    for (float& v : row) v = dist(rng);
    ASSERT_TRUE(QuantizeRow(DType::kQ4_0, row.data(), k, data + r * row_bytes).ok());
  }
  std::vector<uint8_t> copy(data, data + bytes);
  SafetensorsTensorInfo t;
  t.name = "w";
  t.dtype_name = "Q4_0";
  t.dtype = DType::kQ4_0;
  t.shape = {n, k};
  t.begin = 100;
  t.end = 100 + bytes;
  t.alignment = 4;
  t.data = data;
  absl::StatusOr<std::unique_ptr<WeightStore>> store =
      WeightStore::FromTensors("test", {t}, owner, /*pages_releasable=*/true);
  ASSERT_TRUE(store.ok()) << store.status();
  absl::StatusOr<Device*> cpu = DeviceRegistry::Get("cpu");
  ASSERT_TRUE(cpu.ok());
  ExecutionContext int8{*cpu, KernelChoice::kOptimized};
  int8.activations = ActivationPrecision::kInt8;
  // The panels of the private copy, and whether this CPU has them.
  TensorView ref_view = TensorView::Contiguous(copy.data(), DType::kQ4_0, {n, k});
  absl::StatusOr<DeviceBuffer> ref_panels = PackLinearWeight(int8, ref_view);
  ASSERT_TRUE(ref_panels.ok()) << ref_panels.status();
  const bool panels = ref_panels->size() > 0;
  ref_view.packed = panels ? ref_panels->data() : nullptr;

  WeightBuffers out_a, out_b;
  WeightLoader a(store->get(), *cpu, DType::kF32, &out_a);
  WeightLoader b(store->get(), *cpu, DType::kF32, &out_b);
  a.set_int8_panels(true);
  b.set_int8_panels(true);
  absl::StatusOr<TensorView> wa = a.LinearWeight("w", n, k);
  ASSERT_TRUE(wa.ok()) << wa.status();
  absl::StatusOr<TensorView> wb = b.LinearWeight("w", n, k);
  ASSERT_TRUE(wb.ok()) << wb.status();
  if (!panels) {
    EXPECT_EQ(wa->packed, nullptr);
    EXPECT_EQ(out_a.bytes_allocated, 0);
    EXPECT_EQ(out_a.bytes_mapped, static_cast<int64_t>(bytes));
    EXPECT_EQ(std::memcmp(data, copy.data(), bytes), 0);
    return;
  }
  ASSERT_NE(wa->packed, nullptr);
  EXPECT_EQ(wb->packed, wa->packed);  // made once, shared
  EXPECT_EQ(out_a.bytes_allocated, static_cast<int64_t>(ref_panels->size()));
  EXPECT_EQ(out_b.bytes_allocated, 0);
  // All but the first and last partial pages given back.
  const int64_t page = 4096;
  EXPECT_LE(out_a.bytes_mapped, 2 * page);
  EXPECT_EQ(out_b.bytes_mapped, out_a.bytes_mapped);

  const int64_t m = 5;
  std::vector<float> x(m * k), y(m * n), y_ref(m * n);
  for (float& v : x) v = dist(rng);
  const TensorView xv = TensorView::Contiguous(x.data(), DType::kF32, {m, k});
  ASSERT_TRUE(Linear(int8, xv, *wb, TensorView{},
                     TensorView::Contiguous(y.data(), DType::kF32, {m, n})).ok());
  ASSERT_TRUE(Linear(int8, xv, ref_view, TensorView{},
                     TensorView::Contiguous(y_ref.data(), DType::kF32, {m, n})).ok());
  EXPECT_EQ(y, y_ref);
}

}  // namespace
}  // namespace inferd
