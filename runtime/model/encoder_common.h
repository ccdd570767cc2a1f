// What every encoder model class (bert.h, rotary_encoder.h, modernbert.h)
// does the same way at load: refuse a decoder config, describe itself from
// the config, and keep packed copies of its GEMM weights.
#ifndef INFERD_RUNTIME_MODEL_ENCODER_COMMON_H_
#define INFERD_RUNTIME_MODEL_ENCODER_COMMON_H_

#include "absl/status/status.h"
#include "runtime/loader/model_config.h"
#include "runtime/model/model.h"
#include "runtime/model/weight_loader.h"

namespace inferd {

// INVALID_ARGUMENT unless `config` was parsed as an encoder's.
absl::Status CheckEncoderConfig(const ModelConfig& config);

// A bidirectional encoder's ModelInfo from its config: absolute positions
// start at position_id_offset() (0 for rotary or ALiBi encoders).
ModelInfo EncoderInfo(const ModelConfig& config);

// Packed GEMM weights (no repacking per forward pass: ~10% of a small
// encoder's time) for up to 1 GiB of copies (larger models pack their first
// layers only), and the int8 panels under the int8 activation policy.
void ConfigureEncoderLoader(const ModelLoadOptions& options,
                            WeightLoader& loader);

}  // namespace inferd

#endif  // INFERD_RUNTIME_MODEL_ENCODER_COMMON_H_
