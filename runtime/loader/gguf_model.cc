#include "runtime/loader/gguf_model.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "absl/strings/str_split.h"
#include "absl/types/optional.h"
#include "device/bf16.h"
#include "nlohmann/json.hpp"
#include "runtime/common/status_macros.h"
#include "runtime/loader/gguf_transcode.h"
#include "runtime/loader/json_util.h"

namespace inferd {
namespace {

// One GGUF architecture inferd serves: the HF names it maps to and how
// llama.cpp's converter wrote it.
struct ArchSpec {
  const char* arch;
  const char* model_type;
  const char* architecture;  // HF architectures[0]
  bool decoder;
  // Each head's q/k rows are interleaved (ModelConfig::rope_interleaved).
  bool rope_interleaved;
  // A sliding window in the file applies through use_sliding_window (Qwen
  // config keys); false: the model_type's parser reads sliding_window alone.
  bool window_via_use_flag;
  // llama.cpp's phi3 layout: fused attn_qkv, ffn_up holding gate|up,
  // rope.dimension_count below the head size (partial rotary) and longrope
  // factors as the rope_factors_short / rope_factors_long tensors.
  bool phi3_layout = false;
  // llama.cpp's gemma2 / gemma3 layout: norm weights stored as 1 + w (the
  // converter's shift), post_attention_norm / ffn_norm (pre-feedforward) /
  // post_ffw_norm, GeGLU, and the attention scale llama.cpp derives from
  // the layer count (no key holds query_pre_attn_scalar): 1/sqrt(hidden /
  // heads) for the 27B model, which has this many layers, else
  // 1/sqrt(head_dim).
  bool gemma_layout = false;
  int64_t gemma_27b_layers = 0;
  // Encoders: which Hugging Face layout the tensors are named into.
  enum class Encoder { kBert, kNomic, kJina };
  Encoder encoder = Encoder::kBert;
};

constexpr ArchSpec kArchs[] = {
    {"llama", "llama", "LlamaForCausalLM", true, true, false},
    {"qwen2", "qwen2", "Qwen2ForCausalLM", true, false, true},
    {"qwen3", "qwen3", "Qwen3ForCausalLM", true, false, true},
    // llama.cpp's converter permutes q/k as for llama; the layers without
    // RoPE are every 4th, as in llama.cpp (no metadata key says so), which
    // is SmolLM3Config's default no_rope_layer_interval.
    {"smollm3", "smollm3", "SmolLM3ForCausalLM", true, true, false},
    {"phi3", "phi3", "Phi3ForCausalLM", true, false, false, true},
    {"gemma2", "gemma2", "Gemma2ForCausalLM", true, false, false, false, true,
     46},
    {"gemma3", "gemma3_text", "Gemma3ForCausalLM", true, false, false, false,
     true, 62},
    {"bert", "bert", "BertModel", false, false, false},
    // nomic-embed-text: rotary positions (no position table), fused
    // attn_qkv, SwiGLU (ffn_up = fc11, ffn_gate = fc12), no biases.
    {"nomic-bert", "nomic_bert", "NomicBertModel", false, false, false, false,
     false, 0, ArchSpec::Encoder::kNomic},
    // jina-embeddings-v2: ALiBi (no position table), ffn_up holding the
    // GEGLU gate|up rows, ffn_down = mlp.wo, layer_output_norm =
    // mlp.layernorm.
    {"jina-bert-v2", "bert", "JinaBertModel", false, false, false, false,
     false, 0, ArchSpec::Encoder::kJina},
};

const ArchSpec* FindArch(absl::string_view arch) {
  for (const ArchSpec& a : kArchs) {
    if (arch == a.arch) return &a;
  }
  return nullptr;
}

// ggml type id -> the DType inferd computes with; nullopt for the others.
absl::optional<DType> DTypeOfGgml(uint32_t id) {
  switch (id) {
    case 0: return DType::kF32;
    case 1: return DType::kF16;
    case 30: return DType::kBF16;
    case 8: return DType::kQ8_0;
    case 2: return DType::kQ4_0;
    case 3: return DType::kQ4_1;
    case 6: return DType::kQ5_0;
    case 7: return DType::kQ5_1;
    case 12: return DType::kQ4_K;
    case 14: return DType::kQ6_K;
    default: return absl::nullopt;
  }
}

constexpr char kSupportedTypes[] =
    "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q6_K; and, "
    "rewritten at load (gguf_transcode.h), Q2_K, Q3_K, Q5_K, IQ4_NL, IQ4_XS";

// What a GGUF store's tensors live in: the file's bytes, and the
// anonymous page-aligned mappings of the tensors rewritten at load (whole
// pages of their own, so WeightStore::ReleaseStored may give them back).
class GgufTensorMemory {
 public:
  explicit GgufTensorMemory(std::shared_ptr<const GgufFile> file)
      : file_(std::move(file)) {}
  GgufTensorMemory(const GgufTensorMemory&) = delete;
  GgufTensorMemory& operator=(const GgufTensorMemory&) = delete;
  ~GgufTensorMemory() {
    for (const auto& [p, n] : maps_) ::munmap(p, n);
  }

  absl::StatusOr<uint8_t*> Allocate(size_t bytes) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      return absl::ResourceExhaustedError(absl::StrCat(
          file_->path(), ": cannot allocate ", bytes,
          " bytes for a tensor rewritten at load"));
    }
    maps_.emplace_back(p, bytes);
    return static_cast<uint8_t*>(p);
  }

  // After a tensor of the mapped file was rewritten: its whole pages are
  // not read again, so they need not stay resident.
  void DropSourcePages(const uint8_t* data, size_t bytes) const {
    if (!file_->mapped()) return;
    const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    const uintptr_t a = reinterpret_cast<uintptr_t>(data);
    const uintptr_t begin = (a + page - 1) / page * page;
    const uintptr_t end = (a + bytes) / page * page;
    if (end > begin) {
      ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
    }
  }

 private:
  std::shared_ptr<const GgufFile> file_;
  std::vector<std::pair<void*, size_t>> maps_;
};

// Rewrites tensor `t` into its TranscodeTarget in memory of `memory`.
absl::Status Transcode(const GgufTensorInfo& t, DType target,
                       GgufTensorMemory& memory, SafetensorsTensorInfo* info) {
  const int64_t n = t.numel();
  const size_t bytes = DTypeRowBytes(target, n);
  ASSIGN_OR_RETURN(uint8_t* out, memory.Allocate(bytes));
  RETURN_IF_ERROR(TranscodeRow(*t.type, t.data, n, out));
  memory.DropSourcePages(t.data, t.nbytes);
  info->dtype = target;
  info->begin = 0;
  info->end = bytes;
  info->data = out;
  info->alignment = 64;  // page-aligned
  return absl::OkStatus();
}

// Largest power of two (capped at 64) dividing the address.
size_t AlignmentOf(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  size_t align = 1;
  while (align < 64 && a % (align * 2) == 0) align *= 2;
  return align;
}

// Per-layer tensor names (the part after "blk.N.").
struct LayerName {
  const char* gguf;
  const char* hf;
};

constexpr LayerName kDecoderLayer[] = {
    {"attn_norm", "input_layernorm"},
    {"attn_q", "self_attn.q_proj"},
    {"attn_k", "self_attn.k_proj"},
    {"attn_v", "self_attn.v_proj"},
    {"attn_output", "self_attn.o_proj"},
    {"attn_qkv", "self_attn.qkv_proj"},
    {"attn_q_norm", "self_attn.q_norm"},
    {"attn_k_norm", "self_attn.k_norm"},
    {"ffn_norm", "post_attention_layernorm"},
    {"ffn_gate", "mlp.gate_proj"},
    {"ffn_up", "mlp.up_proj"},
    {"ffn_down", "mlp.down_proj"},
};

// nomic-bert's layers, named as nomic's remote-code checkpoints.
constexpr LayerName kNomicLayer[] = {
    {"attn_qkv", "attn.Wqkv"},
    {"attn_output", "attn.out_proj"},
    {"attn_output_norm", "norm1"},
    {"ffn_up", "mlp.fc11"},
    {"ffn_gate", "mlp.fc12"},
    {"ffn_down", "mlp.fc2"},
    {"layer_output_norm", "norm2"},
};

constexpr LayerName kNomicGlobal[] = {
    {"token_embd", "embeddings.word_embeddings"},
    {"token_types", "embeddings.token_type_embeddings"},
    {"token_embd_norm", "emb_ln"},
};

// jina-bert-v2's layers (BERT's attention; the GEGLU MLP).
constexpr LayerName kJinaLayer[] = {
    {"attn_q", "attention.self.query"},
    {"attn_k", "attention.self.key"},
    {"attn_v", "attention.self.value"},
    {"attn_output", "attention.output.dense"},
    {"attn_output_norm", "attention.output.LayerNorm"},
    {"ffn_up", "mlp.gated_layers"},
    {"ffn_down", "mlp.wo"},
    {"layer_output_norm", "mlp.layernorm"},
};

// Gemma's block norms (the rest as kDecoderLayer).
constexpr LayerName kGemmaNorms[] = {
    {"post_attention_norm", "post_attention_layernorm"},
    {"ffn_norm", "pre_feedforward_layernorm"},
    {"post_ffw_norm", "post_feedforward_layernorm"},
};

constexpr LayerName kBertLayer[] = {
    {"attn_q", "attention.self.query"},
    {"attn_k", "attention.self.key"},
    {"attn_v", "attention.self.value"},
    {"attn_output", "attention.output.dense"},
    {"attn_output_norm", "attention.output.LayerNorm"},
    {"ffn_up", "intermediate.dense"},
    {"ffn_down", "output.dense"},
    {"layer_output_norm", "output.LayerNorm"},
};

constexpr LayerName kDecoderGlobal[] = {
    {"token_embd", "model.embed_tokens"},
    {"output_norm", "model.norm"},
    {"output", "lm_head"},
};

constexpr LayerName kBertGlobal[] = {
    {"token_embd", "embeddings.word_embeddings"},
    {"token_types", "embeddings.token_type_embeddings"},
    {"position_embd", "embeddings.position_embeddings"},
    {"token_embd_norm", "embeddings.LayerNorm"},
};

// Optional integer / float metadata.
absl::StatusOr<absl::optional<int64_t>> OptInt(const GgufFile& f,
                                               const std::string& key) {
  if (f.Find(key) == nullptr) return absl::optional<int64_t>();
  ASSIGN_OR_RETURN(int64_t v, f.GetInt(key));
  return absl::optional<int64_t>(v);
}

absl::StatusOr<absl::optional<double>> OptDouble(const GgufFile& f,
                                                 const std::string& key) {
  if (f.Find(key) == nullptr) return absl::optional<double>();
  ASSIGN_OR_RETURN(double v, f.GetDouble(key));
  return absl::optional<double>(v);
}

absl::Status Annotate(const absl::Status& s, const GgufFile& f) {
  if (s.ok()) return s;
  if (absl::StrContains(s.message(), f.path())) return s;
  return absl::Status(s.code(), absl::StrCat(f.path(), ": ", s.message()));
}

// A required positive integer hyper-parameter.
absl::StatusOr<int64_t> RequiredInt(const GgufFile& f, const std::string& key) {
  if (f.Find(key) == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        f.path(), " has no '", key, "' (a hyper-parameter inferd needs)"));
  }
  ASSIGN_OR_RETURN(int64_t v, f.GetInt(key));
  if (v <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(f.path(), ": '", key, "' is ", v, "; it must be > 0"));
  }
  return v;
}

// The values of a per-dimension RoPE factor tensor (rope_freqs: one F32 or
// F16 value per rotated pair of a head); empty when the file has none.
absl::StatusOr<std::vector<double>> RopeFactors(const GgufFile& f,
                                                const std::string& name,
                                                int64_t rotary_dim) {
  const GgufTensorInfo* t = f.FindTensor(name);
  if (t == nullptr) return std::vector<double>();
  if (t->numel() != rotary_dim / 2 || (t->type->id != 0 && t->type->id != 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        f.path(), ": tensor ", name, " (", t->type->name, ", ", t->numel(),
        " values) must be F32 or F16 with one value per rotated pair (",
        rotary_dim / 2, ")"));
  }
  std::vector<double> out(static_cast<size_t>(t->numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    if (t->type->id == 0) {
      float v;
      std::memcpy(&v, t->data + 4 * i, 4);
      out[i] = v;
    } else {
      uint16_t h;
      std::memcpy(&h, t->data + 2 * i, 2);
      out[i] = F16ToFloat(h);
    }
  }
  return out;
}

absl::StatusOr<std::string> Architecture(const GgufFile& f) {
  if (f.Find("general.architecture") == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(f.path(), " has no 'general.architecture'"));
  }
  ASSIGN_OR_RETURN(std::string arch, f.GetString("general.architecture"));
  if (FindArch(arch) == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        f.path(), ": general.architecture '", arch,
        "' is not supported (inferd serves GGUF files of: ",
        absl::StrJoin(SupportedGgufArchitectures(), ", "), ")"));
  }
  return arch;
}

}  // namespace

bool IsGgufPath(const std::string& path) {
  return absl::EndsWithIgnoreCase(path, ".gguf") &&
         loader_internal::IsRegularFile(path);
}

std::vector<std::string> SupportedGgufArchitectures() {
  std::vector<std::string> out;
  for (const ArchSpec& a : kArchs) out.emplace_back(a.arch);
  return out;
}

std::string GgufTensorHfName(absl::string_view arch, absl::string_view name) {
  const ArchSpec* spec = FindArch(arch);
  if (spec == nullptr) return "";
  // Split off the ".weight" / ".bias" suffix.
  const size_t dot = name.rfind('.');
  if (dot == absl::string_view::npos) return "";
  const absl::string_view stem = name.substr(0, dot);
  const absl::string_view suffix = name.substr(dot);  // ".weight"
  if (suffix != ".weight" && suffix != ".bias") return "";
  if (absl::StartsWith(stem, "blk.")) {
    const absl::string_view rest = stem.substr(4);
    const size_t dot2 = rest.find('.');
    if (dot2 == absl::string_view::npos) return "";
    int64_t layer = 0;
    if (!absl::SimpleAtoi(rest.substr(0, dot2), &layer) || layer < 0) return "";
    const absl::string_view part = rest.substr(dot2 + 1);
    if (spec->phi3_layout && part == "ffn_up") {
      return absl::StrCat("model.layers.", layer, ".mlp.gate_up_proj", suffix);
    }
    if (spec->gemma_layout) {
      for (const LayerName& n : kGemmaNorms) {
        if (part == n.gguf) {
          return absl::StrCat("model.layers.", layer, ".", n.hf, suffix);
        }
      }
    }
    if (spec->decoder) {
      for (const LayerName& n : kDecoderLayer) {
        if (part == n.gguf) {
          return absl::StrCat("model.layers.", layer, ".", n.hf, suffix);
        }
      }
    } else if (spec->encoder == ArchSpec::Encoder::kNomic) {
      for (const LayerName& n : kNomicLayer) {
        if (part == n.gguf) {
          return absl::StrCat("encoder.layers.", layer, ".", n.hf, suffix);
        }
      }
    } else {
      const bool jina = spec->encoder == ArchSpec::Encoder::kJina;
      for (const LayerName& n : jina ? absl::MakeConstSpan(kJinaLayer)
                                     : absl::MakeConstSpan(kBertLayer)) {
        if (part == n.gguf) {
          return absl::StrCat("encoder.layer.", layer, ".", n.hf, suffix);
        }
      }
    }
    return "";
  }
  if (spec->decoder) {
    for (const LayerName& n : kDecoderGlobal) {
      if (stem == n.gguf) return absl::StrCat(n.hf, suffix);
    }
  } else {
    const bool nomic = spec->encoder == ArchSpec::Encoder::kNomic;
    for (const LayerName& n : nomic ? absl::MakeConstSpan(kNomicGlobal)
                                    : absl::MakeConstSpan(kBertGlobal)) {
      if (stem == n.gguf) return absl::StrCat(n.hf, suffix);
    }
  }
  return "";
}

absl::StatusOr<ModelConfig> GgufModelConfig(const GgufFile& f) {
  ASSIGN_OR_RETURN(std::string arch, Architecture(f));
  const ArchSpec& spec = *FindArch(arch);
  const std::string p = arch + ".";
  nlohmann::json c;
  c["architectures"] = {spec.architecture};
  c["model_type"] = spec.model_type;

  ASSIGN_OR_RETURN(int64_t hidden, RequiredInt(f, p + "embedding_length"));
  ASSIGN_OR_RETURN(int64_t layers, RequiredInt(f, p + "block_count"));
  ASSIGN_OR_RETURN(int64_t heads, RequiredInt(f, p + "attention.head_count"));
  ASSIGN_OR_RETURN(int64_t ffn, RequiredInt(f, p + "feed_forward_length"));
  ASSIGN_OR_RETURN(auto kv_heads, OptInt(f, p + "attention.head_count_kv"));
  ASSIGN_OR_RETURN(auto context, OptInt(f, p + "context_length"));
  ASSIGN_OR_RETURN(auto vocab, OptInt(f, p + "vocab_size"));
  if (!vocab.has_value()) {
    // Older files: the tokenizer's token list, else the embedding rows.
    if (const GgufValue* tokens = f.Find("tokenizer.ggml.tokens");
        tokens != nullptr && tokens->type == GgufValueType::kArray) {
      vocab = static_cast<int64_t>(tokens->elements.size());
    } else if (const GgufTensorInfo* t = f.FindTensor("token_embd.weight");
               t != nullptr && t->dims.size() == 2) {
      vocab = t->dims[1];
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          f.path(), " has neither '", p,
          "vocab_size' nor a token list to take the vocabulary size from"));
    }
  }
  c["hidden_size"] = hidden;
  c["num_hidden_layers"] = layers;
  c["num_attention_heads"] = heads;
  c["intermediate_size"] = ffn;
  c["vocab_size"] = *vocab;
  c["max_position_embeddings"] = context.value_or(spec.decoder ? 2048 : 512);

  if (spec.decoder) {
    c["num_key_value_heads"] = kv_heads.value_or(heads);
    c["hidden_act"] = spec.gemma_layout ? "gelu_pytorch_tanh" : "silu";
    ASSIGN_OR_RETURN(auto eps, OptDouble(f, p + "attention.layer_norm_rms_epsilon"));
    c["rms_norm_eps"] = eps.value_or(1e-6);
    ASSIGN_OR_RETURN(auto theta, OptDouble(f, p + "rope.freq_base"));
    c["rope_theta"] = theta.value_or(10000.0);
    ASSIGN_OR_RETURN(auto key_length, OptInt(f, p + "attention.key_length"));
    ASSIGN_OR_RETURN(auto rope_dims, OptInt(f, p + "rope.dimension_count"));
    const int64_t head_dim = key_length.value_or(hidden / heads);
    c["head_dim"] = head_dim;
    if (spec.phi3_layout && rope_dims.has_value()) {
      c["partial_rotary_factor"] =
          static_cast<double>(*rope_dims) / static_cast<double>(head_dim);
    } else if (rope_dims.has_value() && *rope_dims != head_dim) {
      return absl::InvalidArgumentError(absl::StrCat(
          f.path(), ": ", p, "rope.dimension_count is ", *rope_dims,
          " but the head dimension is ", head_dim,
          "; inferd rotates whole heads for ", arch));
    }
    ASSIGN_OR_RETURN(auto window, OptInt(f, p + "attention.sliding_window"));
    if (window.has_value() && *window > 0) {
      c["sliding_window"] = *window;
      if (spec.window_via_use_flag) {
        c["use_sliding_window"] = true;
        c["max_window_layers"] = 0;
      }
    }
    if (f.Find(p + "rope.scaling.type") != nullptr) {
      ASSIGN_OR_RETURN(std::string type, f.GetString(p + "rope.scaling.type"));
      if (type == "linear" || type == "yarn") {
        nlohmann::json rs;
        rs["rope_type"] = type;
        ASSIGN_OR_RETURN(auto factor, OptDouble(f, p + "rope.scaling.factor"));
        rs["factor"] = factor.value_or(1.0);
        ASSIGN_OR_RETURN(auto orig,
                         OptInt(f, p + "rope.scaling.original_context_length"));
        if (orig.has_value()) rs["original_max_position_embeddings"] = *orig;
        c["rope_scaling"] = rs;
      } else if (type != "none") {
        return absl::InvalidArgumentError(
            absl::StrCat(f.path(), ": ", p, "rope.scaling.type '", type,
                         "' is not supported (none, linear, yarn)"));
      }
    }
    if (spec.gemma_layout) {
      c["query_pre_attn_scalar"] =
          layers == spec.gemma_27b_layers ? hidden / heads : head_dim;
      // Soft caps when the file has them (else the parser's defaults:
      // Gemma 2's 50 and 30, none for Gemma 3, as llama.cpp).
      for (const char* key :
           {"attn_logit_softcapping", "final_logit_softcapping"}) {
        ASSIGN_OR_RETURN(auto cap, OptDouble(f, p + key));
        if (cap.has_value()) {
          c[key] = *cap > 0 ? nlohmann::json(*cap) : nlohmann::json(nullptr);
        }
      }
      if (!window.has_value() || *window <= 0) {
        c["sliding_window"] = nullptr;  // no sliding layers (llama.cpp)
      }
    }
    if (spec.phi3_layout &&
        f.FindTensor("rope_factors_short.weight") != nullptr) {
      // LongRoPE as Phi3Config reads it: the per-dimension factors, the
      // original context and the attention factor the converter computed.
      const int64_t rotary = rope_dims.value_or(head_dim);
      nlohmann::json rs;
      rs["rope_type"] = "longrope";
      ASSIGN_OR_RETURN(std::vector<double> short_factors,
                       RopeFactors(f, "rope_factors_short.weight", rotary));
      ASSIGN_OR_RETURN(std::vector<double> long_factors,
                       RopeFactors(f, "rope_factors_long.weight", rotary));
      if (long_factors.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(f.path(),
                         " has rope_factors_short.weight but no "
                         "rope_factors_long.weight"));
      }
      rs["short_factor"] = short_factors;
      rs["long_factor"] = long_factors;
      ASSIGN_OR_RETURN(auto attn, OptDouble(f, p + "rope.scaling.attn_factor"));
      if (attn.has_value()) rs["attention_factor"] = *attn;
      ASSIGN_OR_RETURN(auto orig,
                       OptInt(f, p + "rope.scaling.original_context_length"));
      if (orig.has_value()) c["original_max_position_embeddings"] = *orig;
      c["rope_scaling"] = rs;
    }
    c["tie_word_embeddings"] = f.FindTensor("output.weight") == nullptr;
    c["attention_bias"] = f.FindTensor("blk.0.attn_q.bias") != nullptr;
  } else {
    c["hidden_act"] = "gelu";
    ASSIGN_OR_RETURN(auto eps, OptDouble(f, p + "attention.layer_norm_epsilon"));
    c["layer_norm_eps"] = eps.value_or(1e-12);
    if (spec.encoder == ArchSpec::Encoder::kNomic) {
      // SwiGLU and the rotary base (llama.cpp's converter writes
      // rotary_emb_base as rope.freq_base).
      c["hidden_act"] = "silu";
      ASSIGN_OR_RETURN(auto theta, OptDouble(f, p + "rope.freq_base"));
      c["rope_theta"] = theta.value_or(1000.0);
    } else if (spec.encoder == ArchSpec::Encoder::kJina) {
      c["position_embedding_type"] = "alibi";
    }
    int64_t types = 2;
    if (const GgufTensorInfo* t = f.FindTensor("token_types.weight");
        t != nullptr && t->dims.size() == 2) {
      types = t->dims[1];
    }
    c["type_vocab_size"] = types;
  }

  // Special token ids from the tokenizer metadata.
  ASSIGN_OR_RETURN(auto bos, OptInt(f, "tokenizer.ggml.bos_token_id"));
  if (bos.has_value()) c["bos_token_id"] = *bos;
  ASSIGN_OR_RETURN(auto pad, OptInt(f, "tokenizer.ggml.padding_token_id"));
  if (pad.has_value()) c["pad_token_id"] = *pad;
  std::vector<int64_t> eos_ids;
  for (const char* key : {"tokenizer.ggml.eos_token_id",
                          "tokenizer.ggml.eot_token_id",
                          "tokenizer.ggml.eom_token_id"}) {
    ASSIGN_OR_RETURN(auto id, OptInt(f, key));
    if (id.has_value() && *id >= 0 &&
        std::find(eos_ids.begin(), eos_ids.end(), *id) == eos_ids.end()) {
      eos_ids.push_back(*id);
    }
  }
  if (!eos_ids.empty()) c["eos_token_id"] = eos_ids;

  auto config = ParseModelConfig(c.dump(), f.path());
  if (!config.ok()) return Annotate(config.status(), f);
  if (spec.decoder) {
    ASSIGN_OR_RETURN(config->rope_freq_factors,
                     RopeFactors(f, "rope_freqs.weight", config->head_dim));
  }
  // llama.cpp's converter interleaves each head's q/k rows for `llama`
  // files only (qwen2/qwen3 keep the Hugging Face order).
  config->rope_interleaved = spec.rope_interleaved;
  // Its Gemma converter stores norm weights as 1 + w already.
  if (spec.gemma_layout) config->rms_norm_weight_offset = 0.0;
  return config;
}

absl::StatusOr<std::unique_ptr<WeightStore>> GgufWeights(
    std::shared_ptr<const GgufFile> file) {
  ASSIGN_OR_RETURN(std::string arch, Architecture(*file));
  auto memory = std::make_shared<GgufTensorMemory>(file);
  std::vector<SafetensorsTensorInfo> infos;
  for (const GgufTensorInfo& t : file->tensors()) {
    std::string hf = GgufTensorHfName(arch, t.name);
    if (hf.empty()) continue;  // not used by inferd's model classes
    const absl::optional<DType> dtype = DTypeOfGgml(t.type->id);
    const absl::optional<DType> target = TranscodeTarget(t.type->id);
    if (!dtype.has_value() && !target.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          file->path(), ": tensor ", t.name, " has type ", t.type->name,
          ", which inferd does not compute with (supported: ", kSupportedTypes,
          "); re-quantize the file to one of those (e.g. Q4_K_M or Q8_0)"));
    }
    SafetensorsTensorInfo info;
    info.name = std::move(hf);
    info.dtype_name = t.type->name;
    info.dtype = dtype;
    // GGUF lists the innermost dimension first; HF shapes are row-major.
    info.shape.assign(t.dims.rbegin(), t.dims.rend());
    info.begin = t.offset;
    info.end = t.offset + t.nbytes;
    info.data = t.data;
    info.alignment = AlignmentOf(t.data);
    if (target.has_value()) RETURN_IF_ERROR(Transcode(t, *target, *memory, &info));
    infos.push_back(std::move(info));
  }
  const std::string path = file->path();
  const bool mapped = file->mapped();
  return WeightStore::FromTensors(path, std::move(infos), std::move(memory),
                                  mapped);
}

}  // namespace inferd
