// Device-neutral ops: each entry point checks shapes/dtypes (returning
// INVALID_ARGUMENT on a mismatch) and dispatches through the op table of the
// context's device (optimized kernels) or through the reference kernels.
// Thread-safe: ops keep no state; concurrent calls must not write to
// overlapping outputs.
//
// Conventions for every op:
// - Activations are 2-D row-major F32 [tokens, features]. Their last dim must
//   be contiguous (strides[1] == 1); a row stride (strides[0]) larger than the
//   row width is accepted, so a column slice of a fused buffer (e.g. q out of
//   a qkv projection) can be passed without a copy.
// - Weights use the Hugging Face layout [out_features, in_features], F32,
//   BF16, F16 or a ggml block-quantized dtype (device/quant.h; in_features a
//   multiple of the block size), with F32 accumulation, and must be
//   contiguous. Quantized weights are decoded inside the kernels; the
//   activations stay F32.
// - Index tensors (ids, positions, cu_seqlens, metadata) are I32, contiguous.
// - An optional tensor is passed as an empty TensorView{} (data == nullptr).
// - Unless stated, the output must not alias an input; ops that allow it say so.
#ifndef INFERD_DEVICE_OPS_H_
#define INFERD_DEVICE_OPS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "device/device.h"
#include "device/tensor.h"

namespace inferd {

enum class KernelChoice {
  kOptimized,  // the device's op table (falls back to reference per op)
  kReference,  // plain, obviously-correct loops (host memory only)
};

// What the kernels do with the activations of block-quantized Linear weights
// (a model's `activations=` option).
enum class ActivationPrecision {
  // F32 activations (the CPU's M = 1 GEMV: 16-bit, error 1/65024 of a
  // block's max); int8 only from 8 rows of a decode-only step, or above 64.
  kExact,
  // int8 activations per block at every M, as llama.cpp (32 values; 256 for
  // the K-quants, as its q8_K); where the CPU has int8 dot
  // products (CPU: AVX512_VNNI), else as kExact. A row's output is the same
  // whatever its batch-mates, and bit for bit the same at any batch size
  // from 1 to 7 and at any from 8 on (the CPU's GEMV and GEMM).
  kInt8,
};

// Where and how an op runs. Cheap to copy.
struct ExecutionContext {
  // nullptr: the shared "cpu" device from DeviceRegistry.
  Device* device = nullptr;
  KernelChoice kernels = KernelChoice::kOptimized;
  // The rows of x are decode tokens, one per sequence (a decode-only step):
  // kernels may round their activations more coarsely for speed, as batched
  // decoding in llama.cpp does (CPU: int8 activations for block-quantized
  // Linear weights from 8 rows on, else only above 64; a single row keeps
  // its 16-bit GEMV). Prompt rows stay exact up to 64 tokens, so a short
  // prompt's first token matches the float64 reference.
  bool decode_rows = false;
  ActivationPrecision activations = ActivationPrecision::kExact;
};

// ---------------------------------------------------------------------------
// GEMM

// y[M, N] = x[M, K] · w[N, K]^T (+ bias[N]).
// x: F32 [M, K]; w: F32, BF16, F16 or block-quantized [N, K] (K a multiple
// of the block size); bias: F32 [N] or empty; y: F32 [M, N].
absl::Status Linear(const ExecutionContext& ctx, const TensorView& x,
                    const TensorView& w, const TensorView& bias,
                    const TensorView& y);

// A copy of the Linear weight w [N, K] in the layout the device's optimized
// Linear kernel reads without repacking it per call (CPU: F32 weights as
// 32-column FMA panels at the avx512 level; Q8_0 / Q4_0 / Q4_1 / Q4_K /
// Q6_K as int8 VNNI panels at the avx512_bf16 level), for the caller to
// keep alive and set as w.packed. An empty buffer when the device has no
// such layout for w (other dtypes, reference kernels, older CPUs); Linear
// then reads w.data as before. Linear results are those of w either way
// (bit for bit on the paths that read the panels).
absl::StatusOr<DeviceBuffer> PackLinearWeight(const ExecutionContext& ctx,
                                              const TensorView& w);

// c[M, N] = a[M, K] · b (b is [K, N], or [N, K] when transpose_b). All F32.
absl::Status MatMul(const ExecutionContext& ctx, const TensorView& a,
                    const TensorView& b, bool transpose_b, const TensorView& c);

// ---------------------------------------------------------------------------
// Embedding, conversion, elementwise

// out[t, :] = table[ids[t], :]. table: F32/BF16/F16 or block-quantized
// [V, H] (rows decoded as DequantizeRow does); ids: I32 [T];
// out: F32 [T, H]. INVALID_ARGUMENT if an id is outside [0, V).
absl::Status Embedding(const ExecutionContext& ctx, const TensorView& table,
                       const TensorView& ids, const TensorView& out);

// Mean pooling on the device: out[s, :] = the mean of x's rows
// [starts[s], ends[s]), accumulated in double in row order, then scaled by
// 1 / (ends[s] - starts[s]) in double and rounded to float (the bits of the
// same sum on the host). x: F32 [T, H]; starts, ends: I32 [S]; out: F32
// [S, H]. INVALID_ARGUMENT unless 0 <= starts[s] < ends[s] <= T.
absl::Status MeanPool(const ExecutionContext& ctx, const TensorView& x,
                      const TensorView& starts, const TensorView& ends,
                      const TensorView& out);

// Output heads (the prefill tail after pooling; rows of a request, so
// small): computed in double per row and rounded to float once, so the
// bits are those of the same formulas on the host whatever the device or
// the split across threads.
//
// out[r, :] = x[r, :] / max(||x[r, :]||_2, 1e-12): the sum of squares in
// column order, the scale 1 / max(sqrt(sum), 1e-12). x, out F32 [T, H]; out
// may alias x.
absl::Status L2Normalize(const ExecutionContext& ctx, const TensorView& x,
                         const TensorView& out);

// Classifier scores of each row of logits: kSoftmax over the row (single
// label), kSigmoid of each logit (multi-label, or a 1-logit relevance).
enum class ScoreMode { kSoftmax, kSigmoid };
// x, out F32 [T, L]; out may alias x.
absl::Status Scores(const ExecutionContext& ctx, ScoreMode mode,
                    const TensorView& x, const TensorView& out);

// dst = src converted elementwise (F32 <-> BF16, F32 <-> F16, same dtype =
// copy). Same shape; both 2-D (row strides allowed) or contiguous.
absl::Status Convert(const ExecutionContext& ctx, const TensorView& src,
                     const TensorView& dst);

// out = a + b, all F32 [T, H]. out may alias a or b.
absl::Status Add(const ExecutionContext& ctx, const TensorView& a,
                 const TensorView& b, const TensorView& out);

enum class Activation {
  kSilu,      // x * sigmoid(x)
  kGeluErf,   // 0.5 x (1 + erf(x / sqrt 2))      (HF "gelu")
  kGeluTanh,  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
              //                                   (HF "gelu_new"/"gelu_pytorch_tanh")
  kRelu,
  kTanh,
};

// out = act(x); x, out F32 [T, H]; out may alias x.
absl::Status Activate(const ExecutionContext& ctx, Activation act,
                      const TensorView& x, const TensorView& out);

// Gated activation, fused layout: gate_up [T, 2I] holds [gate | up] per row;
// out[T, I] = act(gate) * up. (SwiGLU = kSilu, GeGLU = kGeluTanh/kGeluErf.)
absl::Status GatedActivate(const ExecutionContext& ctx, Activation act,
                           const TensorView& gate_up, const TensorView& out);
// Separate inputs: out = act(gate) * up; all [T, I]. out may alias gate or up.
absl::Status GatedActivate(const ExecutionContext& ctx, Activation act,
                           const TensorView& gate, const TensorView& up,
                           const TensorView& out);

// Convenience wrappers.
absl::Status Gelu(const ExecutionContext& ctx, const TensorView& x,
                  const TensorView& out, bool tanh_approximation = false);
absl::Status Silu(const ExecutionContext& ctx, const TensorView& x,
                  const TensorView& out);
absl::Status SwiGlu(const ExecutionContext& ctx, const TensorView& gate_up,
                    const TensorView& out);
absl::Status SwiGlu(const ExecutionContext& ctx, const TensorView& gate,
                    const TensorView& up, const TensorView& out);

// Row-wise softmax of x [T, H] into out (may alias x).
absl::Status Softmax(const ExecutionContext& ctx, const TensorView& x,
                     const TensorView& out);

// ---------------------------------------------------------------------------
// Normalization. x, out F32 [T, H]; weight, bias F32 [H]. out may alias x.

// out = (x - mean) / sqrt(var + eps) * weight (+ bias); bias may be empty.
absl::Status LayerNorm(const ExecutionContext& ctx, const TensorView& x,
                       const TensorView& weight, const TensorView& bias,
                       float eps, const TensorView& out);

// out = x / sqrt(mean(x^2) + eps) * weight.
absl::Status RmsNorm(const ExecutionContext& ctx, const TensorView& x,
                     const TensorView& weight, float eps,
                     const TensorView& out);

// Fused residual + norm: residual <- residual + x, then
// out <- LayerNorm(residual) / RmsNorm(residual). out may alias x or residual.
absl::Status AddLayerNorm(const ExecutionContext& ctx, const TensorView& x,
                          const TensorView& residual, const TensorView& weight,
                          const TensorView& bias, float eps,
                          const TensorView& out);
absl::Status AddRmsNorm(const ExecutionContext& ctx, const TensorView& x,
                        const TensorView& residual, const TensorView& weight,
                        float eps, const TensorView& out);

// ---------------------------------------------------------------------------
// Rotary position embeddings (RoFormer RoPE) with HF transformers' scaling
// variants.

enum class RopeStyle {
  kNeox,  // rotate_half: pairs (i, i + rotary_dim/2)   (Llama, Qwen, Mistral)
  kGptJ,  // interleaved: pairs (2i, 2i + 1)             (GPT-J, some others)
};

enum class RopeScalingType {
  kNone,
  kLinear,
  kDynamicNtk,
  kLlama3,
  kYarn,
  kLongRope,  // Phi-3: per-dimension short/long factors
};

struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  double factor = 1.0;
  // Pre-scaling context length (config "original_max_position_embeddings";
  // for dynamic NTK the model's max_position_embeddings). 0 = use
  // RopeConfig::max_position_embeddings.
  int64_t original_max_position_embeddings = 0;
  // llama3
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  // yarn
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double mscale = 0.0;           // 0 = unset
  double mscale_all_dim = 0.0;   // 0 = unset
  double attention_factor = 0.0; // 0 = derived from factor/mscale
  bool truncate = true;
  // longrope: per-dimension divisors (rotary_dim / 2 each) for sequences of
  // up to original_max_position_embeddings tokens (short) and longer ones
  // (long); attention_factor 0 = sqrt(1 + ln(factor) / ln(original max)).
  std::vector<double> short_factors;
  std::vector<double> long_factors;
  // Any type: per-dimension divisors of the inverse frequencies (rotary_dim
  // / 2 values) applied after the type's own scaling, inv_freq[i] /
  // freq_factors[i], as llama.cpp applies a GGUF file's rope_freqs tensor
  // (Llama 3.1-style scaling precomputed by its converter). Empty = none.
  std::vector<double> freq_factors;
};

struct RopeConfig {
  int head_dim = 0;
  int rotary_dim = 0;  // 0 = head_dim; must be even and <= head_dim
  double theta = 10000.0;
  int64_t max_position_embeddings = 2048;
  RopeStyle style = RopeStyle::kNeox;
  RopeScaling scaling;
};

// Inverse frequencies and attention scaling for one RopeConfig, following
// transformers' rope initialization functions. Immutable; thread-safe.
class RopeCache {
 public:
  // INVALID_ARGUMENT for inconsistent parameters.
  static absl::StatusOr<RopeCache> Create(const RopeConfig& config);

  const RopeConfig& config() const { return config_; }
  int rotary_dim() const { return config_.rotary_dim; }
  // inv_freq[rotary_dim / 2] for sequences of up to `seq_len` tokens (only
  // dynamic NTK and longrope depend on seq_len: past the original context
  // the former rescales theta, the latter takes its long factors).
  std::vector<float> InvFreq(int64_t seq_len = 0) const;
  // Multiplies cos and sin (yarn's mscale; 1 otherwise).
  float attention_factor() const { return attention_factor_; }

  // cos_sin: F32 [T, rotary_dim]: row t = [cos(p*f_0..f_{r/2-1}) |
  // sin(...)] * attention_factor for p = positions[t]. For dynamic NTK and
  // longrope the sequence length is max(positions) + 1.
  absl::Status ComputeCosSin(absl::Span<const int32_t> positions,
                             std::vector<float>* cos_sin) const;

 private:
  RopeConfig config_;
  std::vector<float> inv_freq_;  // static part (all types but dynamic)
  std::vector<float> long_inv_freq_;  // longrope past the original context
  float attention_factor_ = 1.0f;
};

// Rotates q [T, num_heads*head_dim] and k [T, num_kv_heads*head_dim] in place
// with a precomputed cos_sin [T, rotary_dim] (from RopeCache::ComputeCosSin).
// Only the first rotary_dim dims of each head rotate. k may be empty.
absl::Status ApplyRotary(const ExecutionContext& ctx, const TensorView& q,
                         const TensorView& k, const TensorView& cos_sin,
                         int head_dim, RopeStyle style);

// Convenience: computes cos/sin for positions (I32 [T]) and applies them.
absl::Status ApplyRope(const ExecutionContext& ctx, const RopeCache& rope,
                       const TensorView& positions, const TensorView& q,
                       const TensorView& k);

// ---------------------------------------------------------------------------
// Attention

struct AttentionParams {
  int num_heads = 0;
  int num_kv_heads = 0;  // num_heads % num_kv_heads == 0 (GQA/MQA)
  int head_dim = 0;      // <= 256
  float scale = 0.0f;    // 0 = 1 / sqrt(head_dim)
  bool causal = true;
  // > 0: a query at position p sees keys at positions in (p - window, p]
  // (transformers' Mistral convention) when causal; without causal, the
  // keys within window - 1 of it on either side (|p - j| < window: local
  // attention of bidirectional encoders, ModernBERT).
  int sliding_window = 0;
  // > 0: scores = cap * tanh(scores / cap) before softmax (Gemma 2).
  float logits_soft_cap = 0.0f;
  // The kernel may round q, k, v and the softmax probabilities to BF16 for
  // the two products (sums and softmax stay F32), where that is faster
  // (CPU: VarlenAttention with vdpbf16ps on AVX512_BF16); models whose
  // weights are BF16 ask for it.
  bool bf16_products = false;
  // Non-null: an additive bias by relative position, per query head,
  // [num_heads][2 * relative_bias_radius + 1] F32 in host memory: the score
  // of query position p and key position j gains
  // relative_bias[h][clamp(j - p, -radius, radius) + radius] after scaling
  // and before softmax (MPNet's bucketed bias; ALiBi's -slope * |j - p|
  // with a radius of the longest sequence). VarlenAttention only.
  const float* relative_bias = nullptr;
  int relative_bias_radius = 0;
};

// Prefill-only attention over packed variable-length sequences, no cache.
// q: [total_tokens, num_heads*head_dim]; k, v: [total_tokens,
// num_kv_heads*head_dim]; cu_seqlens: I32 [num_seqs + 1] (host memory for the
// cpu device), cu_seqlens[0] = 0, last = total_tokens. Each sequence attends
// only within itself; bidirectional unless params.causal.
// out: [total_tokens, num_heads*head_dim].
absl::Status VarlenAttention(const ExecutionContext& ctx, const TensorView& q,
                             const TensorView& k, const TensorView& v,
                             const TensorView& cu_seqlens,
                             const AttentionParams& params,
                             const TensorView& out);

// Paged KV cache of one layer: k_cache, v_cache are
// [num_blocks, block_size, num_kv_heads, head_dim], F32 or BF16 (both the
// same). Token slot s lives in block s / block_size at offset s % block_size.

// Writes k, v ([T, num_kv_heads*head_dim] F32) into the caches at
// slot_mapping (I32 [T]); a negative slot skips the token (padding).
absl::Status ReshapeAndCache(const ExecutionContext& ctx, const TensorView& k,
                             const TensorView& v,
                             const TensorView& slot_mapping,
                             const TensorView& k_cache,
                             const TensorView& v_cache);

struct PagedAttentionMetadata {
  // I32 [num_seqs + 1]: new (query) tokens of seq i are rows
  // [query_start_loc[i], query_start_loc[i+1]) of q/out.
  TensorView query_start_loc;
  // I32 [num_seqs]: context length of each seq INCLUDING its new tokens.
  TensorView seq_lens;
  // I32 [num_seqs, max_blocks_per_seq]: physical block ids, in order.
  TensorView block_tables;
  // Optional hints (0 = unknown), an upper bound over seqs.
  int max_query_len = 0;
  int max_seq_len = 0;
};

// Causal attention of new tokens against the paged cache (their own k/v must
// already be written with ReshapeAndCache). One op for prefill, chunked
// prefill and decode: new token i of a seq with q_len new tokens sits at
// position seq_len - q_len + i and sees positions <= its own (and within the
// sliding window). q, out: [num_tokens, num_heads*head_dim] F32.
// params.causal must be true.
absl::Status PagedAttention(const ExecutionContext& ctx, const TensorView& q,
                            const TensorView& k_cache,
                            const TensorView& v_cache,
                            const PagedAttentionMetadata& metadata,
                            const AttentionParams& params,
                            const TensorView& out);

}  // namespace inferd

#endif  // INFERD_DEVICE_OPS_H_
