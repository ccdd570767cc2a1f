// WeightLoader: packed copies of GEMM weights for encoders, within their
// byte budget.
#include "runtime/model/weight_loader.h"

#include <cstring>
#include <memory>
#include <vector>

#include "device/cpu/cpu_features.h"
#include "device/device.h"
#include "device/ops.h"
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

}  // namespace
}  // namespace inferd
