#include "device/cpu/cpu_device.h"
#include "device/cpu/kernels.h"

namespace inferd {

const OpTable& CpuOpTable() {
  static const OpTable table = [] {
    OpTable t;
    t.linear = &cpu::Linear;
    t.pack_linear = &cpu::PackLinear;
    t.matmul = &cpu::MatMul;
    t.embedding = &cpu::Embedding;
    t.convert = &cpu::Convert;
    t.add = &cpu::Add;
    t.activate = &cpu::Activate;
    t.gated_activate = &cpu::GatedActivate;
    t.softmax = &cpu::Softmax;
    t.layer_norm = &cpu::LayerNorm;
    t.rms_norm = &cpu::RmsNorm;
    t.apply_rotary = &cpu::ApplyRotary;
    t.varlen_attention = &cpu::VarlenAttention;
    t.reshape_and_cache = &cpu::ReshapeAndCache;
    t.paged_attention = &cpu::PagedAttention;
    return t;
  }();
  return table;
}

}  // namespace inferd
