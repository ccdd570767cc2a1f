#include "runtime/loader/model_config.h"

#include <cmath>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace inferd {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

nlohmann::json Minimal(const std::string& arch, const std::string& type) {
  return {{"architectures", {arch}}, {"model_type", type},
          {"vocab_size", 100},       {"hidden_size", 64},
          {"num_hidden_layers", 2},  {"num_attention_heads", 4}};
}

ModelConfig MustParse(const nlohmann::json& j) {
  auto c = ParseModelConfig(j.dump(), "test/config.json");
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : ModelConfig{};
}

TEST(ModelConfigTest, BertDefaults) {
  ModelConfig c = MustParse(Minimal("BertModel", "bert"));
  EXPECT_EQ(c.model_type, "bert");
  EXPECT_TRUE(c.IsEncoder());
  EXPECT_DOUBLE_EQ(c.layer_norm_eps, 1e-12);
  EXPECT_EQ(c.hidden_act, "gelu");
  EXPECT_EQ(c.type_vocab_size, 2);
  EXPECT_EQ(c.max_position_embeddings, 512);
  EXPECT_EQ(c.position_embedding_type, "absolute");
  EXPECT_EQ(c.pad_token_id, 0);
  EXPECT_EQ(c.intermediate_size, 3072);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.position_id_offset(), 0);
  EXPECT_EQ(c.num_labels, 2);
  EXPECT_FALSE(c.IsCausalLM());
}

TEST(ModelConfigTest, XlmRobertaDefaultsAndPositionOffset) {
  ModelConfig c = MustParse(Minimal("XLMRobertaModel", "xlm-roberta"));
  EXPECT_EQ(c.model_type, "xlm-roberta");
  EXPECT_EQ(c.pad_token_id, 1);
  EXPECT_EQ(c.bos_token_id, 0);
  EXPECT_THAT(c.eos_token_ids, ElementsAre(2));
  // XLMRobertaConfig's class defaults (real checkpoints set 1e-5/514/1).
  EXPECT_DOUBLE_EQ(c.layer_norm_eps, 1e-12);
  EXPECT_EQ(c.max_position_embeddings, 512);
  EXPECT_EQ(c.position_id_offset(), 2);

  nlohmann::json j = Minimal("XLMRobertaForSequenceClassification", "xlm-roberta");
  j["pad_token_id"] = 3;
  j["layer_norm_eps"] = 1e-5;
  j["type_vocab_size"] = 1;
  j["max_position_embeddings"] = 514;
  ModelConfig r = MustParse(j);
  EXPECT_EQ(r.position_id_offset(), 4);
  EXPECT_DOUBLE_EQ(r.layer_norm_eps, 1e-5);
  EXPECT_EQ(r.type_vocab_size, 1);
  EXPECT_TRUE(r.IsSequenceClassification());
}

TEST(ModelConfigTest, LlamaDefaults) {
  ModelConfig c = MustParse(Minimal("LlamaForCausalLM", "llama"));
  EXPECT_EQ(c.model_type, "llama");
  EXPECT_TRUE(c.IsCausalLM());
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.mlp_bias);
  EXPECT_EQ(c.hidden_act, "silu");
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_THAT(c.eos_token_ids, ElementsAre(2));
  EXPECT_FALSE(c.pad_token_id.has_value());
  EXPECT_FALSE(c.rope_scaling.has_value());
  EXPECT_FALSE(c.SlidingWindowForLayer(0).has_value());
}

TEST(ModelConfigTest, ExplicitHeadDimAndGqa) {
  nlohmann::json j = Minimal("LlamaForCausalLM", "llama");
  j["head_dim"] = 32;
  j["num_key_value_heads"] = 2;
  ModelConfig c = MustParse(j);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.num_key_value_heads, 2);
}

TEST(ModelConfigTest, MistralDefaultsAndSlidingWindow) {
  nlohmann::json j = Minimal("MistralForCausalLM", "mistral");
  j["num_attention_heads"] = 16;
  ModelConfig c = MustParse(j);
  EXPECT_EQ(c.model_type, "mistral");
  EXPECT_EQ(c.sliding_window, 4096);
  EXPECT_EQ(c.SlidingWindowForLayer(1), 4096);
  EXPECT_EQ(c.max_position_embeddings, 4096 * 32);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.num_key_value_heads, 8);  // MistralConfig's default

  j["sliding_window"] = nullptr;  // Mistral v0.2+: full attention
  ModelConfig full = MustParse(j);
  EXPECT_FALSE(full.sliding_window.has_value());
  EXPECT_FALSE(full.SlidingWindowForLayer(0).has_value());
}

TEST(ModelConfigTest, Qwen2DefaultsAndPerLayerWindow) {
  nlohmann::json j = Minimal("Qwen2ForCausalLM", "qwen2");
  j["num_key_value_heads"] = 2;
  ModelConfig c = MustParse(j);
  EXPECT_EQ(c.model_type, "qwen2");
  EXPECT_TRUE(c.attention_bias);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.use_sliding_window);
  EXPECT_FALSE(c.SlidingWindowForLayer(40).has_value());
  EXPECT_EQ(c.max_window_layers, 28);

  j["use_sliding_window"] = true;
  j["sliding_window"] = 128;
  j["max_window_layers"] = 1;
  j["attention_bias"] = false;  // ignored: Qwen2 always has q/k/v bias
  ModelConfig w = MustParse(j);
  EXPECT_TRUE(w.attention_bias);
  EXPECT_FALSE(w.SlidingWindowForLayer(0).has_value());
  EXPECT_EQ(w.SlidingWindowForLayer(1), 128);

  j["layer_types"] = {"sliding_attention", "full_attention"};
  ModelConfig lt = MustParse(j);
  EXPECT_EQ(lt.SlidingWindowForLayer(0), 128);
  EXPECT_FALSE(lt.SlidingWindowForLayer(1).has_value());
}

TEST(ModelConfigTest, Qwen3DefaultsQkNormAndHeadDim) {
  nlohmann::json j = Minimal("Qwen3ForCausalLM", "qwen3");
  j["num_attention_heads"] = 32;  // kv heads default to 32
  ModelConfig c = MustParse(j);
  EXPECT_EQ(c.model_type, "qwen3");
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.attention_bias);  // Qwen3Config: attention_bias=False
  EXPECT_EQ(c.head_dim, 128);      // Qwen3Config's default, not H / heads
  EXPECT_EQ(c.max_position_embeddings, 32768);
  EXPECT_EQ(c.num_key_value_heads, 32);
  EXPECT_FALSE(c.SlidingWindowForLayer(0).has_value());
  j["head_dim"] = 64;
  j["attention_bias"] = true;
  ModelConfig e = MustParse(j);
  EXPECT_EQ(e.head_dim, 64);
  EXPECT_TRUE(e.attention_bias);
  // Without model_type the architecture names the family; Qwen3-MoE is
  // another family, not Qwen3.
  nlohmann::json base = Minimal("Qwen3Model", "");
  base.erase("model_type");
  base["num_attention_heads"] = 32;
  EXPECT_EQ(MustParse(base).model_type, "qwen3");
  nlohmann::json moe = Minimal("Qwen3MoeForCausalLM", "");
  moe.erase("model_type");
  EXPECT_FALSE(ParseModelConfig(moe.dump()).ok());
  // Qwen2 has no q/k norm.
  nlohmann::json qwen2 = Minimal("Qwen2ForCausalLM", "qwen2");
  qwen2["num_key_value_heads"] = 2;
  EXPECT_FALSE(MustParse(qwen2).qk_norm);
}

TEST(ModelConfigTest, SmolLM3LayersWithoutRopeAndWindow) {
  nlohmann::json j = Minimal("SmolLM3ForCausalLM", "smollm3");
  j["num_hidden_layers"] = 8;
  ModelConfig c = MustParse(j);
  EXPECT_EQ(c.model_type, "smollm3");
  EXPECT_EQ(c.rope_theta, 2000000.0);  // SmolLM3Config's default_theta
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.num_key_value_heads, 4);
  // no_rope_layer_interval 4: layers 3 and 7 have no RoPE.
  EXPECT_THAT(c.layer_uses_rope,
              ElementsAre(true, true, true, false, true, true, true, false));
  EXPECT_FALSE(c.LayerUsesRope(3));
  EXPECT_TRUE(c.LayerUsesRope(4));
  EXPECT_FALSE(c.SlidingWindowForLayer(3).has_value());
  j["no_rope_layer_interval"] = 2;
  EXPECT_FALSE(MustParse(j).LayerUsesRope(1));
  EXPECT_TRUE(MustParse(j).LayerUsesRope(2));
  // An explicit list wins over the interval.
  j["no_rope_layers"] = {0, 1, 1, 1, 1, 1, 1, 1};
  ModelConfig e = MustParse(j);
  EXPECT_FALSE(e.LayerUsesRope(0));
  EXPECT_TRUE(e.LayerUsesRope(1));
  // A window only with use_sliding_window, on the layers without RoPE.
  j["sliding_window"] = 16;
  EXPECT_FALSE(MustParse(j).SlidingWindowForLayer(0).has_value());
  j["use_sliding_window"] = true;
  ModelConfig w = MustParse(j);
  EXPECT_EQ(w.SlidingWindowForLayer(0), 16);
  EXPECT_FALSE(w.SlidingWindowForLayer(1).has_value());
  // Other families rotate every layer.
  EXPECT_TRUE(MustParse(Minimal("LlamaForCausalLM", "llama")).LayerUsesRope(1));
  // Bad lists are refused naming the key.
  j["no_rope_layers"] = {1, 1};
  auto bad = ParseModelConfig(j.dump(), "test/config.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("no_rope_layers"));
  j.erase("no_rope_layers");
  j["no_rope_layer_interval"] = 0;
  EXPECT_FALSE(ParseModelConfig(j.dump(), "test/config.json").ok());
  // Without model_type the architecture names the family.
  nlohmann::json base = Minimal("SmolLM3ForCausalLM", "");
  base.erase("model_type");
  EXPECT_EQ(MustParse(base).model_type, "smollm3");
}

TEST(ModelConfigTest, Phi3PartialRotaryLongRopeAndWindow) {
  nlohmann::json j = Minimal("Phi3ForCausalLM", "phi3");
  ModelConfig c = MustParse(j);
  EXPECT_EQ(c.model_type, "phi3");
  EXPECT_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_EQ(c.max_position_embeddings, 4096);
  EXPECT_EQ(c.partial_rotary_factor, 1.0);
  EXPECT_FALSE(c.rope_scaling.has_value());
  EXPECT_FALSE(c.SlidingWindowForLayer(1).has_value());
  // Phi-4-mini: 3/4 of head_dim 16 rotate (6 pairs); longrope's original
  // context from the top level (it wins over rope_scaling's), the factor
  // max / original when absent.
  j["partial_rotary_factor"] = 0.75;
  j["max_position_embeddings"] = 131072;
  j["original_max_position_embeddings"] = 4096;
  j["sliding_window"] = 2047;
  j["rope_scaling"] = {{"type", "longrope"},
                       {"original_max_position_embeddings", 1000},
                       {"short_factor", {1, 1, 1, 1, 1, 1}},
                       {"long_factor", {1, 2, 3, 4, 5, 6}}};
  ModelConfig p = MustParse(j);
  EXPECT_EQ(p.partial_rotary_factor, 0.75);
  ASSERT_TRUE(p.rope_scaling.has_value());
  EXPECT_EQ(p.rope_scaling->type, "longrope");
  EXPECT_EQ(p.rope_scaling->original_max_position_embeddings, 4096);
  EXPECT_DOUBLE_EQ(p.rope_scaling->factor, 32.0);
  EXPECT_THAT(p.rope_scaling->long_factor, ElementsAre(1, 2, 3, 4, 5, 6));
  EXPECT_EQ(p.SlidingWindowForLayer(0), 2047);  // every layer
  EXPECT_EQ(p.SlidingWindowForLayer(1), 2047);
  j["rope_scaling"]["factor"] = 8.0;
  EXPECT_DOUBLE_EQ(MustParse(j).rope_scaling->factor, 8.0);
  // Factor lists must cover the rotated pairs; odd rotary widths and other
  // rope types are refused naming the key.
  j["rope_scaling"]["long_factor"] = {1, 2};
  auto bad = ParseModelConfig(j.dump(), "test/config.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("long_factor"));
  j.erase("rope_scaling");
  j["partial_rotary_factor"] = 0.3;  // 4.8 -> 4 dims: fine
  EXPECT_EQ(MustParse(j).partial_rotary_factor, 0.3);
  j["partial_rotary_factor"] = 0.2;  // 3 dims: odd
  bad = ParseModelConfig(j.dump(), "test/config.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("partial_rotary_factor"));
  j["partial_rotary_factor"] = 1.0;
  j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}};
  EXPECT_FALSE(ParseModelConfig(j.dump(), "test/config.json").ok());
}

// Phi-3's older names for longrope (the first Phi-3 128k checkpoints say
// "su", others "yarn"): read as transformers' Phi3Config reads them, the
// same configuration as "longrope"; another family's "su" stays unknown.
TEST(ModelConfigTest, Phi3SuAndYarnAreLongRope) {
  nlohmann::json j = Minimal("Phi3ForCausalLM", "phi3");
  j["max_position_embeddings"] = 131072;
  j["original_max_position_embeddings"] = 4096;
  j["rope_scaling"] = {{"type", "longrope"},
                       {"short_factor", {1, 1, 1, 1, 1, 1, 1, 1}},
                       {"long_factor", {1, 2, 3, 4, 5, 6, 7, 8}}};
  const ModelConfig want = MustParse(j);
  for (const char* name : {"su", "yarn"}) {
    j["rope_scaling"]["type"] = name;
    ModelConfig got = MustParse(j);
    ASSERT_TRUE(got.rope_scaling.has_value()) << name;
    EXPECT_EQ(got.rope_scaling->type, "longrope") << name;
    EXPECT_DOUBLE_EQ(got.rope_scaling->factor, want.rope_scaling->factor);
    EXPECT_EQ(got.rope_scaling->original_max_position_embeddings, 4096);
    EXPECT_EQ(got.rope_scaling->short_factor, want.rope_scaling->short_factor);
    EXPECT_EQ(got.rope_scaling->long_factor, want.rope_scaling->long_factor);
  }
  // "su" without its factor lists is refused as longrope is.
  j["rope_scaling"] = {{"type", "su"}};
  auto bad = ParseModelConfig(j.dump(), "test/config.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("short_factor"));
  nlohmann::json llama = Minimal("LlamaForCausalLM", "llama");
  llama["rope_scaling"] = {{"type", "su"}, {"factor", 2.0}};
  bad = ParseModelConfig(llama.dump(), "test/config.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("unsupported rope type 'su'"));
}

TEST(ModelConfigTest, Gemma2And3Traits) {
  nlohmann::json j = Minimal("Gemma2ForCausalLM", "gemma2");
  j["num_hidden_layers"] = 4;
  ModelConfig g2 = MustParse(j);
  EXPECT_EQ(g2.hidden_act, "gelu_pytorch_tanh");
  EXPECT_EQ(g2.head_dim, 256);
  EXPECT_TRUE(g2.tie_word_embeddings);
  EXPECT_TRUE(g2.sandwich_norms);
  EXPECT_EQ(g2.rms_norm_weight_offset, 1.0);
  EXPECT_DOUBLE_EQ(g2.embedding_multiplier, 8.0);  // sqrt(64)
  EXPECT_EQ(g2.query_pre_attn_scalar, 256);
  EXPECT_EQ(g2.attn_logit_softcapping, 50.0);
  EXPECT_EQ(g2.final_logit_softcapping, 30.0);
  EXPECT_FALSE(g2.qk_norm);
  // Every other layer sliding (4096), starting with layer 0.
  EXPECT_EQ(g2.SlidingWindowForLayer(0), 4096);
  EXPECT_FALSE(g2.SlidingWindowForLayer(1).has_value());
  EXPECT_EQ(g2.SlidingWindowForLayer(2), 4096);
  EXPECT_FALSE(g2.LayerUsesLocalRope(0));  // one RoPE base in Gemma 2
  j["final_logit_softcapping"] = nullptr;
  j["sliding_window"] = 16;
  ModelConfig no_cap = MustParse(j);
  EXPECT_EQ(no_cap.final_logit_softcapping, 0.0);
  EXPECT_EQ(no_cap.SlidingWindowForLayer(0), 16);
  // Bidirectional (EmbeddingGemma's flag): no causal mask, the window
  // halved plus one on both sides.
  j["use_bidirectional_attention"] = true;
  ModelConfig bidi = MustParse(j);
  EXPECT_EQ(bidi.is_causal, absl::optional<bool>(false));
  EXPECT_EQ(bidi.SlidingWindowForLayer(0), 9);

  nlohmann::json k = Minimal("Gemma3ForCausalLM", "gemma3_text");
  k["num_hidden_layers"] = 12;
  ModelConfig g3 = MustParse(k);
  EXPECT_TRUE(g3.qk_norm);
  EXPECT_TRUE(g3.sandwich_norms);
  EXPECT_EQ(g3.attn_logit_softcapping, 0.0);
  EXPECT_EQ(g3.final_logit_softcapping, 0.0);
  EXPECT_EQ(g3.rope_theta, 1000000.0);
  EXPECT_EQ(g3.rope_local_theta, 10000.0);
  // sliding_window_pattern 6: layers 5 and 11 global, the rest sliding with
  // the local RoPE base.
  for (int64_t i = 0; i < 12; ++i) {
    const bool global = i == 5 || i == 11;
    EXPECT_EQ(g3.SlidingWindowForLayer(i).has_value(), !global) << i;
    EXPECT_EQ(g3.LayerUsesLocalRope(i), !global) << i;
  }
  k["rope_local_base_freq"] = 20000.0;
  k["sliding_window_pattern"] = 2;
  k["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 8.0}};
  ModelConfig e = MustParse(k);
  EXPECT_EQ(e.rope_local_theta, 20000.0);
  EXPECT_TRUE(e.LayerUsesLocalRope(0));
  EXPECT_FALSE(e.LayerUsesLocalRope(1));
  ASSERT_TRUE(e.rope_scaling.has_value());
  EXPECT_EQ(e.rope_scaling->factor, 8.0);
  // transformers 5's nested rope_parameters.
  nlohmann::json v5 = Minimal("Gemma3ForCausalLM", "gemma3_text");
  v5["rope_parameters"] = {
      {"full_attention",
       {{"rope_type", "linear"}, {"factor", 4.0}, {"rope_theta", 500000.0}}},
      {"sliding_attention",
       {{"rope_type", "default"}, {"rope_theta", 5000.0}}}};
  ModelConfig n = MustParse(v5);
  EXPECT_EQ(n.rope_theta, 500000.0);
  EXPECT_EQ(n.rope_local_theta, 5000.0);
  ASSERT_TRUE(n.rope_scaling.has_value());
  EXPECT_EQ(n.rope_scaling->factor, 4.0);
  k["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 8.0}};
  EXPECT_FALSE(ParseModelConfig(k.dump(), "test/config.json").ok());
}

TEST(ModelConfigTest, EncoderFamiliesOfIssue38) {
  // MPNet: RoBERTa's positions, no token types, 32 buckets up to 128 even
  // when the file names another bucket count (transformers uses 32).
  nlohmann::json mpnet = Minimal("MPNetForMaskedLM", "mpnet");
  mpnet["relative_attention_num_buckets"] = 64;
  ModelConfig m = MustParse(mpnet);
  EXPECT_TRUE(m.IsEncoder());
  EXPECT_EQ(m.position_id_offset(), 2);
  EXPECT_EQ(m.type_vocab_size, 0);
  EXPECT_EQ(m.relative_attention_buckets, 32);
  EXPECT_EQ(m.relative_attention_max_distance, 128);

  // NomicBERT from nomic's remote-code keys.
  nlohmann::json nomic = {
      {"architectures", {"NomicBertModel"}}, {"model_type", "nomic_bert"},
      {"vocab_size", 100}, {"n_embd", 64}, {"n_layer", 3}, {"n_head", 4},
      {"n_inner", 96}, {"n_positions", 8192}, {"layer_norm_epsilon", 1e-6},
      {"rotary_emb_base", 1000}, {"rotary_emb_fraction", 1.0},
      {"activation_function", "swiglu"}, {"prenorm", false},
      {"rotary_scaling_factor", nullptr}};
  ModelConfig n = MustParse(nomic);
  EXPECT_EQ(n.hidden_size, 64);
  EXPECT_EQ(n.num_hidden_layers, 3);
  EXPECT_EQ(n.intermediate_size, 96);
  EXPECT_EQ(n.max_position_embeddings, 8192);
  EXPECT_DOUBLE_EQ(n.layer_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(n.rope_theta, 1000.0);
  EXPECT_EQ(n.hidden_act, "silu");
  nomic["activation_function"] = "geglu";
  EXPECT_EQ(MustParse(nomic).hidden_act, "gelu");
  nomic["prenorm"] = true;
  auto bad = ParseModelConfig(nomic.dump(), "test/config.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("prenorm"));

  // GTE "new": ntk scaling becomes base * f and divisors f^(2/dim).
  nlohmann::json gte = Minimal("NewModel", "new");
  gte["rope_theta"] = 500000;
  gte["rope_scaling"] = {{"type", "ntk"}, {"factor", 2.0}};
  gte["type_vocab_size"] = 0;
  ModelConfig g = MustParse(gte);
  EXPECT_DOUBLE_EQ(g.rope_theta, 1000000.0);
  ASSERT_EQ(g.rope_freq_factors.size(), 8u);  // head_dim 16 / 2
  EXPECT_DOUBLE_EQ(g.rope_freq_factors[0], std::pow(2.0, 2.0 / 16.0));
  gte["rope_scaling"] = {{"type", "yarn"}, {"factor", 2.0}};
  bad = ParseModelConfig(gte.dump(), "test/config.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("ntk"));

  // ModernBERT: every third layer global from 0; local windows of
  // |i - j| <= local_attention / 2; the two rotary bases.
  nlohmann::json modern = Minimal("ModernBertModel", "modernbert");
  modern["num_hidden_layers"] = 5;
  modern["norm_eps"] = 1e-5;
  modern["hidden_activation"] = "gelu";
  modern["local_attention"] = 128;
  modern["global_rope_theta"] = 160000.0;
  modern["local_rope_theta"] = 10000.0;
  ModelConfig mb = MustParse(modern);
  EXPECT_THAT(mb.layer_types,
              ElementsAre("full_attention", "sliding_attention",
                          "sliding_attention", "full_attention",
                          "sliding_attention"));
  EXPECT_EQ(mb.SlidingWindowForLayer(1), 65);
  EXPECT_FALSE(mb.SlidingWindowForLayer(0).has_value());
  EXPECT_DOUBLE_EQ(mb.rope_theta, 160000.0);
  EXPECT_DOUBLE_EQ(mb.rope_local_theta, 10000.0);
  EXPECT_DOUBLE_EQ(mb.layer_norm_eps, 1e-5);

  // JinaBERT v2: BERT's config with ALiBi; RoBERTa's parser keeps absolute.
  nlohmann::json jina = Minimal("JinaBertModel", "bert");
  jina["position_embedding_type"] = "alibi";
  EXPECT_EQ(MustParse(jina).position_embedding_type, "alibi");
  nlohmann::json xlmr = Minimal("XLMRobertaModel", "xlm-roberta");
  xlmr["position_embedding_type"] = "alibi";
  bad = ParseModelConfig(xlmr.dump(), "test/config.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("'alibi' is not supported for model_type xlm-roberta"));

  // EmbeddingGemma: bidirectional, the window halved plus one.
  nlohmann::json eg = Minimal("Gemma3TextModel", "gemma3_text");
  eg["use_bidirectional_attention"] = true;
  eg["sliding_window"] = 512;
  ModelConfig e = MustParse(eg);
  ASSERT_TRUE(e.is_causal.has_value());
  EXPECT_FALSE(*e.is_causal);
  EXPECT_EQ(e.sliding_window, 257);
}

TEST(ModelConfigTest, Gemma1Traits) {
  // bge-reranker-v2-gemma's config: the original releases' hidden_act
  // "gelu" is the tanh GELU; (1 + w) norms; embeddings * sqrt(hidden).
  nlohmann::json j = Minimal("GemmaForCausalLM", "gemma");
  j["hidden_act"] = "gelu";
  j["head_dim"] = 16;
  ModelConfig g = MustParse(j);
  EXPECT_EQ(g.hidden_act, "gelu_pytorch_tanh");
  EXPECT_DOUBLE_EQ(g.rms_norm_weight_offset, 1.0);
  EXPECT_DOUBLE_EQ(g.embedding_multiplier, 8.0);  // sqrt(64)
  EXPECT_TRUE(g.tie_word_embeddings);
  EXPECT_FALSE(g.sandwich_norms);
  EXPECT_EQ(g.bos_token_id, absl::optional<int64_t>(2));
  // Not taken for Gemma 2 by architecture.
  nlohmann::json k = Minimal("Gemma2ForCausalLM", "gemma2");
  k.erase("model_type");
  EXPECT_EQ(MustParse(k).model_type, "gemma2");
}

TEST(ModelConfigTest, MissingRequiredFieldNamesFieldAndFile) {
  for (const char* field : {"architectures", "vocab_size", "hidden_size",
                            "num_hidden_layers", "num_attention_heads"}) {
    nlohmann::json j = Minimal("LlamaForCausalLM", "llama");
    j.erase(field);
    auto c = ParseModelConfig(j.dump(), "dir/config.json");
    ASSERT_FALSE(c.ok()) << field;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(c.status().message(), HasSubstr(field));
    EXPECT_THAT(c.status().message(), HasSubstr("dir/config.json"));
  }
}

TEST(ModelConfigTest, RejectsWrongTypesAndInconsistentShapes) {
  struct Case {
    const char* field;
    nlohmann::json value;
  };
  const Case cases[] = {
      {"hidden_size", "64"},
      {"hidden_size", 0},
      {"hidden_size", 66},  // not a multiple of 4 heads
      {"num_key_value_heads", 3},
      {"rms_norm_eps", "tiny"},
      {"tie_word_embeddings", 1},
      {"eos_token_id", "</s>"},
      {"rope_scaling", 2.0},
      {"architectures", nlohmann::json::array()},
      {"id2label", {{"x", "LABEL"}}},
      {"problem_type", "ranking"},
  };
  for (const Case& c : cases) {
    nlohmann::json j = Minimal("LlamaForCausalLM", "llama");
    j[c.field] = c.value;
    auto parsed = ParseModelConfig(j.dump());
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument)
        << c.field << "=" << c.value.dump();
    EXPECT_THAT(parsed.status().message(), HasSubstr(c.field))
        << parsed.status();
  }
}

TEST(ModelConfigTest, RejectsBadJsonAndUnknownFamily) {
  auto bad = ParseModelConfig("{\"architectures\": [", "x/config.json");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("x/config.json"));
  auto arr = ParseModelConfig("[]");
  EXPECT_EQ(arr.status().code(), absl::StatusCode::kInvalidArgument);
  auto gpt = ParseModelConfig(Minimal("GPT2LMHeadModel", "gpt2").dump());
  EXPECT_EQ(gpt.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(gpt.status().message(), HasSubstr("gpt2"));
}

TEST(ModelConfigTest, InfersFamilyFromArchitectureWithoutModelType) {
  nlohmann::json j = Minimal("Qwen2Model", "");
  j.erase("model_type");
  j["num_key_value_heads"] = 4;
  EXPECT_EQ(MustParse(j).model_type, "qwen2");
  j["architectures"] = {"Qwen2MoeForCausalLM"};
  EXPECT_FALSE(ParseModelConfig(j.dump()).ok());
}

TEST(ModelConfigTest, RopeScalingVariants) {
  nlohmann::json j = Minimal("LlamaForCausalLM", "llama");
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  ModelConfig linear = MustParse(j);
  ASSERT_TRUE(linear.rope_scaling.has_value());
  EXPECT_EQ(linear.rope_scaling->type, "linear");
  EXPECT_DOUBLE_EQ(linear.rope_scaling->factor, 2.0);

  j["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 4.0}};
  EXPECT_EQ(MustParse(j).rope_scaling->type, "dynamic");

  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0},
                       {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8192}};
  ModelConfig l3 = MustParse(j);
  EXPECT_EQ(l3.rope_scaling->type, "llama3");
  EXPECT_EQ(l3.rope_scaling->original_max_position_embeddings, 8192);
  EXPECT_DOUBLE_EQ(l3.rope_scaling->high_freq_factor, 4.0);

  j["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0},
                       {"original_max_position_embeddings", 32768},
                       {"beta_fast", 16}, {"attention_factor", 1.2}};
  ModelConfig yarn = MustParse(j);
  EXPECT_EQ(yarn.rope_scaling->type, "yarn");
  EXPECT_DOUBLE_EQ(yarn.rope_scaling->beta_fast, 16.0);
  EXPECT_DOUBLE_EQ(yarn.rope_scaling->beta_slow, 1.0);
  EXPECT_EQ(yarn.rope_scaling->attention_factor, 1.2);

  j["rope_scaling"] = {{"rope_type", "default"}};
  EXPECT_FALSE(MustParse(j).rope_scaling.has_value());
  j["rope_scaling"] = nullptr;
  EXPECT_FALSE(MustParse(j).rope_scaling.has_value());

  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}};
  auto incomplete = ParseModelConfig(j.dump());
  EXPECT_THAT(incomplete.status().message(),
              HasSubstr("original_max_position_embeddings"));
  j["rope_scaling"] = {{"rope_type", "ntk-by-parts"}, {"factor", 2.0}};
  EXPECT_THAT(ParseModelConfig(j.dump()).status().message(),
              HasSubstr("ntk-by-parts"));
  j["rope_scaling"] = {{"type", "linear"}};
  EXPECT_THAT(ParseModelConfig(j.dump()).status().message(), HasSubstr("factor"));

  nlohmann::json v5 = Minimal("LlamaForCausalLM", "llama");
  v5["rope_parameters"] = {{"rope_theta", 500000.0}, {"rope_type", "linear"},
                           {"factor", 2.0}};
  ModelConfig p = MustParse(v5);
  EXPECT_DOUBLE_EQ(p.rope_theta, 500000.0);
  EXPECT_EQ(p.rope_scaling->type, "linear");
}

TEST(ModelConfigTest, LabelsTokensAndHints) {
  nlohmann::json j = Minimal("BertForSequenceClassification", "bert");
  j["id2label"] = {{"0", "neg"}, {"1", "neu"}, {"2", "pos"}};
  j["label2id"] = {{"neg", 0}, {"neu", 1}, {"pos", 2}};
  j["problem_type"] = "single_label_classification";
  j["classifier_dropout"] = nullptr;
  j["torch_dtype"] = "bfloat16";
  ModelConfig c = MustParse(j);
  EXPECT_EQ(c.num_labels, 3);
  EXPECT_EQ(c.id2label.at(2), "pos");
  EXPECT_EQ(c.label2id.at("neu"), 1);
  EXPECT_EQ(c.problem_type, "single_label_classification");
  EXPECT_EQ(c.torch_dtype, "bfloat16");

  nlohmann::json r = Minimal("XLMRobertaForSequenceClassification", "xlm-roberta");
  r["num_labels"] = 1;
  EXPECT_EQ(MustParse(r).num_labels, 1);

  nlohmann::json d = Minimal("LlamaForCausalLM", "llama");
  d["eos_token_id"] = {128001, 128008, 128009};
  d["bos_token_id"] = 128000;
  d["pad_token_id"] = nullptr;
  d["is_causal"] = false;
  d["max_position_embeddings"] = 131072.0;  // integral floats are accepted
  ModelConfig l = MustParse(d);
  EXPECT_THAT(l.eos_token_ids, ElementsAre(128001, 128008, 128009));
  EXPECT_EQ(l.bos_token_id, 128000);
  EXPECT_FALSE(l.pad_token_id.has_value());
  EXPECT_EQ(l.is_causal, false);
  EXPECT_EQ(l.max_position_embeddings, 131072);
}

TEST(ModelConfigTest, LoadsConfigFromSharedStories260K) {
  const std::string dir = absl::StrCat(INFERD_SOURCE_DIR, "/examples/models/stories260K");
  auto c = LoadModelConfig(dir);
  if (absl::IsNotFound(c.status())) {
    GTEST_SKIP() << "shared model absent: " << dir;
  }
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_hidden_layers, 5);
  EXPECT_EQ(c->num_key_value_heads, 4);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_DOUBLE_EQ(c->rms_norm_eps, 1e-5);
}

}  // namespace
}  // namespace inferd
