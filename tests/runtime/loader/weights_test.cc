#include "runtime/loader/weights.h"

#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/loader/model_dir.h"
#include "tests/runtime/loader/test_util.h"

namespace inferd {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing_util::BuildSafetensors;
using testing_util::Bytes;
using testing_util::RawTensor;
using testing_util::ScratchDir;

RawTensor F32(const std::string& name, std::vector<float> values) {
  return {name, "F32", {static_cast<int64_t>(values.size())}, Bytes(values)};
}

float First(const TensorView& v) {
  float x;
  std::memcpy(&x, v.data, sizeof(x));
  return x;
}

constexpr char kBertConfig[] = R"({
  "architectures": ["BertModel"], "model_type": "bert", "vocab_size": 10,
  "hidden_size": 4, "num_hidden_layers": 1, "num_attention_heads": 2,
  "intermediate_size": 8})";

TEST(WeightStoreTest, OpensSingleFile) {
  ScratchDir dir;
  dir.Write("model.safetensors",
            BuildSafetensors({F32("bert.pooler.dense.bias", {1, 2}),
                              F32("embeddings.word_embeddings.weight", {3})}));
  auto store = WeightStore::OpenDirectory(dir.path());
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->tensor_count(), 2u);
  EXPECT_EQ((*store)->total_bytes(), 12u);
  EXPECT_THAT((*store)->Names(), ElementsAre("bert.pooler.dense.bias",
                                             "embeddings.word_embeddings.weight"));
  EXPECT_TRUE((*store)->Has("bert.pooler.dense.bias"));
  EXPECT_EQ(First(*(*store)->Get("embeddings.word_embeddings.weight")), 3.0f);
  ASSERT_NE((*store)->Info("bert.pooler.dense.bias"), nullptr);
  EXPECT_EQ((*store)->Info("bert.pooler.dense.bias")->dtype_name, "F32");
}

TEST(WeightStoreTest, FindWithPrefixesReturnsFirstExistingName) {
  ScratchDir dir;
  dir.Write("model.safetensors",
            BuildSafetensors({F32("bert.pooler.dense.bias", {1}),
                              F32("model.norm.weight", {2}),
                              F32("norm.weight", {3})}));
  auto store = WeightStore::OpenDirectory(dir.path());
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(*(*store)->FindWithPrefixes("pooler.dense.bias"),
            "bert.pooler.dense.bias");
  // "" comes first in the default order.
  EXPECT_EQ(*(*store)->FindWithPrefixes("norm.weight"), "norm.weight");
  const absl::string_view model_first[] = {"model.", ""};
  EXPECT_EQ(*(*store)->FindWithPrefixes("norm.weight", model_first),
            "model.norm.weight");
  auto missing = (*store)->FindWithPrefixes("lm_head.weight");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("roberta.lm_head.weight"));
}

TEST(WeightStoreTest, MissingTensorNamesTensorAndDirectory) {
  ScratchDir dir;
  dir.Write("model.safetensors", BuildSafetensors({F32("a", {1})}));
  auto store = WeightStore::OpenDirectory(dir.path());
  ASSERT_TRUE(store.ok());
  auto v = (*store)->Get("lm_head.weight");
  EXPECT_EQ(v.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(v.status().message(), HasSubstr("lm_head.weight"));
  EXPECT_THAT(v.status().message(), HasSubstr(dir.path()));
}

TEST(WeightStoreTest, OpensShardsListedInIndex) {
  ScratchDir dir;
  dir.Write("model-00001-of-00002.safetensors",
            BuildSafetensors({F32("a", {1, 2}), F32("b", {3})}));
  dir.Write("model-00002-of-00002.safetensors",
            BuildSafetensors({F32("c", {4, 5, 6})}));
  dir.Write("model.safetensors.index.json", R"({
    "metadata": {"total_size": 24},
    "weight_map": {"a": "model-00001-of-00002.safetensors",
                   "b": "model-00001-of-00002.safetensors",
                   "c": "model-00002-of-00002.safetensors"}})");
  auto store = WeightStore::OpenDirectory(dir.path());
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->tensor_count(), 3u);
  EXPECT_EQ((*store)->total_bytes(), 24u);
  EXPECT_EQ((*store)->files().size(), 2u);
  EXPECT_EQ(First(*(*store)->Get("c")), 4.0f);
  EXPECT_EQ(First(*(*store)->Get("b")), 3.0f);
}

TEST(WeightStoreTest, RejectsIndexThatLiesAboutShardContents) {
  ScratchDir dir;
  dir.Write("s1.safetensors", BuildSafetensors({F32("a", {1})}));
  dir.Write("s2.safetensors", BuildSafetensors({F32("b", {1})}));
  dir.Write("model.safetensors.index.json",
            R"({"weight_map": {"a": "s2.safetensors", "b": "s2.safetensors",
                               "x": "s1.safetensors"}})");
  auto store = WeightStore::OpenDirectory(dir.path());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(store.status().message(), HasSubstr("tensor '"));
}

TEST(WeightStoreTest, RejectsDuplicateTensorAcrossShards) {
  ScratchDir dir;
  dir.Write("s1.safetensors", BuildSafetensors({F32("a", {1})}));
  dir.Write("s2.safetensors", BuildSafetensors({F32("a", {2})}));
  dir.Write("model.safetensors.index.json",
            R"({"weight_map": {"a": "s1.safetensors", "b": "s2.safetensors"}})");
  auto store = WeightStore::OpenDirectory(dir.path());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(store.status().message(), HasSubstr("'a' appears in both"));
}

TEST(WeightStoreTest, RejectsMissingShardAndEscapingPaths) {
  ScratchDir dir;
  dir.Write("model.safetensors.index.json",
            R"({"weight_map": {"a": "gone.safetensors"}})");
  auto missing = WeightStore::OpenDirectory(dir.path());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("gone.safetensors"));

  dir.Write("model.safetensors.index.json",
            R"({"weight_map": {"a": "../../etc/passwd"}})");
  auto escape = WeightStore::OpenDirectory(dir.path());
  EXPECT_EQ(escape.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(escape.status().message(), HasSubstr("outside the model directory"));

  dir.Write("model.safetensors.index.json", R"({"weight_map": [1, 2]})");
  auto bad = WeightStore::OpenDirectory(dir.path());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("weight_map"));
}

TEST(WeightStoreTest, PytorchBinOnlyIsFailedPreconditionWithConversionHint) {
  ScratchDir dir;
  dir.Write("pytorch_model.bin", "PK\x03\x04 not really a zip");
  auto store = WeightStore::OpenDirectory(dir.path());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(store.status().message(), HasSubstr("pytorch_model.bin"));
  EXPECT_THAT(store.status().message(), HasSubstr("save_file"));
}

TEST(WeightStoreTest, EmptyDirectoryIsNotFound) {
  ScratchDir dir;
  auto store = WeightStore::OpenDirectory(dir.path());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(store.status().message(), HasSubstr("model.safetensors"));
}

TEST(WeightStoreTest, PropagatesCorruptFileError) {
  ScratchDir dir;
  const std::string good = BuildSafetensors({F32("a", {1, 2})});
  dir.Write("model.safetensors", good.substr(0, good.size() - 1));
  auto store = WeightStore::OpenDirectory(dir.path());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(store.status().message(), HasSubstr("'a'"));
  EXPECT_THAT(store.status().message(), HasSubstr("model.safetensors"));
}

TEST(ModelDirectoryTest, BundlesConfigsWeightsAndTokenizerPath) {
  ScratchDir dir;
  dir.Write("config.json", kBertConfig);
  dir.Write("tokenizer.json", "{}");
  dir.Write("tokenizer_config.json", R"({"model_max_length": 512})");
  dir.Write("modules.json", R"([
    {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
    {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}])");
  dir.Write("1_Pooling/config.json", R"({"pooling_mode_mean_tokens": true})");
  dir.Write("model.safetensors", BuildSafetensors({F32("a", {1})}));
  auto md = OpenModelDirectory(dir.path(), /*load_weights=*/true);
  ASSERT_TRUE(md.ok()) << md.status();
  EXPECT_EQ(md->config.model_type, "bert");
  EXPECT_TRUE(md->config.IsEncoder());
  EXPECT_EQ(md->tokenizer_config.model_max_length, 512);
  EXPECT_TRUE(md->st.present);
  EXPECT_EQ(md->st.pooling, PoolingMode::kMean);
  EXPECT_EQ(md->tokenizer_json_path, dir.path() + "/tokenizer.json");
  ASSERT_NE(md->weights, nullptr);
  EXPECT_TRUE(md->weights->Has("a"));

  auto no_weights = OpenModelDirectory(dir.path(), /*load_weights=*/false);
  ASSERT_TRUE(no_weights.ok());
  EXPECT_EQ(no_weights->weights, nullptr);
}

TEST(ModelDirectoryTest, ReportsMissingPiecesClearly) {
  auto not_dir = OpenModelDirectory("/nonexistent/model", false);
  EXPECT_EQ(not_dir.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(not_dir.status().message(), HasSubstr("not a directory"));

  ScratchDir dir;
  auto no_config = OpenModelDirectory(dir.path(), false);
  EXPECT_EQ(no_config.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(no_config.status().message(), HasSubstr("config.json"));

  // A missing tokenizer.json is the model's fault, found when it loads
  // (CheckTokenizerFile), not a failure to open the directory.
  dir.Write("config.json", kBertConfig);
  auto no_tokenizer = OpenModelDirectory(dir.path(), false);
  ASSERT_TRUE(no_tokenizer.ok()) << no_tokenizer.status();
  EXPECT_EQ(no_tokenizer->tokenizer_json_path, dir.path() + "/tokenizer.json");
  const absl::Status missing = CheckTokenizerFile(no_tokenizer->tokenizer_json_path);
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.message(), HasSubstr("tokenizer.json"));
  dir.Write("tokenizer.json", "{}");
  EXPECT_TRUE(CheckTokenizerFile(no_tokenizer->tokenizer_json_path).ok());

  dir.Write("pytorch_model.bin", "x");
  auto bin_only = OpenModelDirectory(dir.path(), true);
  EXPECT_EQ(bin_only.status().code(), absl::StatusCode::kFailedPrecondition);

  dir.Write("config.json", R"({"architectures": ["BertModel"]})");
  auto bad_config = OpenModelDirectory(dir.path(), false);
  EXPECT_EQ(bad_config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_config.status().message(), HasSubstr("config.json"));
}

}  // namespace
}  // namespace inferd
