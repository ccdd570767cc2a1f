// The torch zip / pickle reader (runtime/loader/torch_pickle.h): state
// dicts written the way torch.save writes them are read back exactly;
// hostile or malformed pickles and archives are refused with a message
// naming what was refused, and nothing in them runs.
#include "runtime/loader/torch_pickle.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace inferd {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// ------------------------------------------------ pickle opcode helpers

std::string Str(const std::string& s) {
  std::string out = "X";
  const uint32_t n = static_cast<uint32_t>(s.size());
  for (int b = 0; b < 4; ++b) out += static_cast<char>((n >> (8 * b)) & 0xff);
  return out + s;
}
std::string Int(int v) {  // BININT1 / BININT2
  if (v < 256) return std::string("K") + static_cast<char>(v);
  return std::string("M") + static_cast<char>(v & 0xff) +
         static_cast<char>((v >> 8) & 0xff);
}
std::string Tuple(const std::vector<std::string>& items) {
  if (items.empty()) return ")";
  std::string out = "(";
  for (const auto& i : items) out += i;
  return out + "t";
}
const char kOrderedDict[] = "ccollections\nOrderedDict\n";
const std::string kProto = std::string("\x80\x02", 2);

// One _rebuild_tensor_v2 entry: name -> tensor over storage `key`.
std::string TensorEntry(const std::string& name, const std::string& key,
                        const std::string& storage_type, int numel, int offset,
                        const std::vector<int>& size,
                        const std::vector<int>& stride) {
  std::vector<std::string> sz, st;
  for (int s : size) sz.push_back(Int(s));
  for (int s : stride) st.push_back(Int(s));
  const std::string pid =
      Tuple({Str("storage"), "ctorch\n" + storage_type + "\n", Str(key),
             Str("cpu"), Int(numel)});
  return Str(name) + "ctorch._utils\n_rebuild_tensor_v2\n" +
         Tuple({pid + "Q", Int(offset), Tuple(sz), Tuple(st), "\x89",
                std::string(kOrderedDict) + ")R"}) +
         "R";
}

// An OrderedDict of entries with torch's _metadata attribute (BUILD).
std::string StateDict(const std::vector<std::string>& entries) {
  std::string out = kProto + kOrderedDict + std::string("q\x00)Rq\x01(", 7);
  for (const auto& e : entries) out += e;
  out += "u}" + Str("_metadata") + kOrderedDict + ")R(" + Str("") + "}" +
         Str("version") + Int(1) + "sus" + "b.";
  return out;
}

std::string Floats(const std::vector<float>& v) {
  std::string out(v.size() * 4, '\0');
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

// ------------------------------------------------ zip writer (stored)

void Put16(std::string* s, uint32_t v) {
  s->push_back(static_cast<char>(v & 0xff));
  s->push_back(static_cast<char>((v >> 8) & 0xff));
}
void Put32(std::string* s, uint32_t v) {
  Put16(s, v & 0xffff);
  Put16(s, v >> 16);
}

std::string Zip(const std::vector<std::pair<std::string, std::string>>& files,
                uint16_t method = 0) {
  std::string out, cd;
  for (const auto& [name, data] : files) {
    const uint32_t offset = static_cast<uint32_t>(out.size());
    Put32(&out, 0x04034b50);
    Put16(&out, 20);
    Put16(&out, 0);
    Put16(&out, method);
    Put32(&out, 0);  // time, date
    Put32(&out, 0);  // crc (not checked)
    Put32(&out, static_cast<uint32_t>(data.size()));
    Put32(&out, static_cast<uint32_t>(data.size()));
    Put16(&out, static_cast<uint32_t>(name.size()));
    Put16(&out, 0);
    out += name + data;
    Put32(&cd, 0x02014b50);
    Put16(&cd, 20);
    Put16(&cd, 20);
    Put16(&cd, 0);
    Put16(&cd, method);
    Put32(&cd, 0);
    Put32(&cd, 0);
    Put32(&cd, static_cast<uint32_t>(data.size()));
    Put32(&cd, static_cast<uint32_t>(data.size()));
    Put16(&cd, static_cast<uint32_t>(name.size()));
    Put16(&cd, 0);
    Put16(&cd, 0);
    Put16(&cd, 0);
    Put16(&cd, 0);
    Put32(&cd, 0);
    Put32(&cd, offset);
    cd += name;
  }
  const uint32_t cd_offset = static_cast<uint32_t>(out.size());
  out += cd;
  Put32(&out, 0x06054b50);
  Put16(&out, 0);
  Put16(&out, 0);
  Put16(&out, static_cast<uint32_t>(files.size()));
  Put16(&out, static_cast<uint32_t>(files.size()));
  Put32(&out, static_cast<uint32_t>(cd.size()));
  Put32(&out, cd_offset);
  Put16(&out, 0);
  return out;
}

absl::Status Refusal(const std::string& pickle,
                     const std::map<std::string, std::string>& storages = {}) {
  return UnpickleStateDict(pickle, storages, "test.pt").status();
}

// ------------------------------------------------ tests

TEST(TorchPickleTest, ReadsALinearStateDictFromATorchZip) {
  const std::string pkl = StateDict(
      {TensorEntry("weight", "0", "FloatStorage", 6, 0, {2, 3}, {3, 1}),
       TensorEntry("bias", "1", "FloatStorage", 2, 0, {2}, {1})});
  const std::string zip =
      Zip({{"archive/data.pkl", pkl},
           {"archive/byteorder", "little"},
           {"archive/data/0", Floats({1, 2, 3, 4, 5, 6})},
           {"archive/data/1", Floats({-0.5f, 0.25f})},
           {"archive/version", "3\n"}});
  auto sd = ParseTorchStateDict(zip, "linear.pt");
  ASSERT_TRUE(sd.ok()) << sd.status();
  ASSERT_EQ(sd->size(), 2u);
  EXPECT_THAT(sd->at("weight").shape, ElementsAre(2, 3));
  EXPECT_THAT(sd->at("weight").values, ElementsAre(1, 2, 3, 4, 5, 6));
  EXPECT_THAT(sd->at("bias").values, ElementsAre(-0.5f, 0.25f));
  EXPECT_EQ(sd->at("bias").stored_dtype, "float32");
}

TEST(TorchPickleTest, AnyArchiveFolderNameAndStridedViews) {
  // A transposed view (stride 1, 2) at offset 1 of a 7-element storage.
  const std::string pkl = StateDict(
      {TensorEntry("t", "0", "FloatStorage", 7, 1, {3, 2}, {1, 3})});
  const std::string zip = Zip({{"colbert_linear/data.pkl", pkl},
                               {"colbert_linear/data/0",
                                Floats({9, 0, 1, 2, 3, 4, 5})}});
  auto sd = ParseTorchStateDict(zip, "x.pt");
  ASSERT_TRUE(sd.ok()) << sd.status();
  // Row i, column j = storage[1 + i + 3j].
  EXPECT_THAT(sd->at("t").values, ElementsAre(0, 3, 1, 4, 2, 5));
}

TEST(TorchPickleTest, HalfStorageIsConvertedToFloat) {
  const std::string pkl =
      StateDict({TensorEntry("w", "0", "HalfStorage", 2, 0, {2}, {1})});
  // float16 1.0 = 0x3C00, -2.0 = 0xC000.
  const std::string raw("\x00\x3c\x00\xc0", 4);
  auto sd = UnpickleStateDict(pkl, {{"0", raw}}, "h.pt");
  ASSERT_TRUE(sd.ok()) << sd.status();
  EXPECT_THAT(sd->at("w").values, ElementsAre(1.0f, -2.0f));
  EXPECT_EQ(sd->at("w").stored_dtype, "float16");
}

TEST(TorchPickleTest, RefusesOsSystem) {
  // The classic: GLOBAL os.system, REDUCE ("echo pwned",).
  const std::string pkl =
      kProto + "cos\nsystem\n" + Tuple({Str("echo pwned")}) + "R.";
  absl::Status s = Refusal(pkl);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'os.system' is not allowed"));
}

TEST(TorchPickleTest, RefusesOtherGlobalsAndStackGlobal) {
  EXPECT_THAT(Refusal(kProto + "cbuiltins\neval\n" + Tuple({Str("1")}) + "R.")
                  .message(),
              HasSubstr("builtins.eval"));
  // STACK_GLOBAL (protocol 4) is checked the same way.
  EXPECT_THAT(Refusal(kProto + Str("subprocess") + Str("Popen") + "\x93.")
                  .message(),
              HasSubstr("subprocess.Popen"));
  // torch.load's own gadgets are not on the list either.
  EXPECT_THAT(Refusal(kProto + "ctorch\nload\n.").message(),
              HasSubstr("torch.load"));
}

TEST(TorchPickleTest, RefusesOpcodesOutsideTheWhitelist) {
  // INST ('i') and OBJ ('o') build arbitrary objects; 'R' on a non-global.
  EXPECT_THAT(Refusal(kProto + "(ios\nsystem\n.").message(),
              HasSubstr("opcode 0x69"));
  EXPECT_THAT(Refusal(kProto + "(o.").message(), HasSubstr("opcode 0x6f"));
  EXPECT_THAT(Refusal(kProto + Str("x") + ")R.").message(),
              HasSubstr("REDUCE needs an allowed global"));
  // An OrderedDict given arguments, BUILD on a tensor-less non-dict.
  EXPECT_THAT(Refusal(kProto + kOrderedDict + Tuple({Str("a")}) + "R.")
                  .message(),
              HasSubstr("OrderedDict with arguments"));
  EXPECT_THAT(Refusal(kProto + Str("x") + "}b.").message(),
              HasSubstr("BUILD"));
}

TEST(TorchPickleTest, RefusesMalformedPickles) {
  EXPECT_THAT(Refusal(kProto + "}").message(), HasSubstr("without STOP"));
  EXPECT_THAT(Refusal(kProto + "X\xff\xff\xff\x7f").message(),
              HasSubstr("overruns"));
  EXPECT_THAT(Refusal(kProto + "h\x05.").message(), HasSubstr("memo 5"));
  EXPECT_THAT(Refusal(kProto + "s.").message(), HasSubstr("underflow"));
  EXPECT_THAT(Refusal(kProto + Str("x") + ".").message(),
              HasSubstr("not a state dict"));
  // A persistent id that is not a storage.
  EXPECT_THAT(Refusal(kProto + Str("x") + "Q.").message(),
              HasSubstr("persistent id"));
}

TEST(TorchPickleTest, DeepNestingAndCyclesAreRefusedWithoutCrashing) {
  // 300000 nested 1-tuples (far deeper than recursive destructors
  // survive): refused (not a state dict), and freed without recursion.
  std::string deep = kProto + ")";
  deep.append(300000, '\x85');
  EXPECT_THAT(Refusal(deep + ".").message(), HasSubstr("not a state dict"));
  // The same left on the stack by an error.
  EXPECT_THAT(Refusal(deep).message(), HasSubstr("without STOP"));
  // A list appended to itself through the memo.
  EXPECT_THAT(Refusal(kProto + "]q\x01h\x01" "a.").message(),
              HasSubstr("not a state dict"));
}

TEST(TorchPickleTest, RefusesTensorsOutsideTheirStorage) {
  const std::string pkl = StateDict(
      {TensorEntry("w", "0", "FloatStorage", 4, 1, {2, 2}, {2, 1})});
  // offset 1 + (1*2 + 1*1) = 4 >= 4 elements.
  absl::Status s = Refusal(pkl, {{"0", Floats({1, 2, 3, 4})}});
  EXPECT_THAT(s.message(), HasSubstr("reaches past its storage"));
  // The storage file is shorter than the pickle says.
  s = Refusal(StateDict({TensorEntry("w", "0", "FloatStorage", 4, 0, {4}, {1})}),
              {{"0", Floats({1, 2})}});
  EXPECT_THAT(s.message(), HasSubstr("fewer than its 4 elements"));
  s = Refusal(StateDict({TensorEntry("w", "7", "FloatStorage", 1, 0, {1}, {1})}),
              {});
  EXPECT_THAT(s.message(), HasSubstr("lacks"));
}

TEST(TorchPickleTest, RefusesArchivesTorchDoesNotWrite) {
  const std::string pkl =
      StateDict({TensorEntry("b", "0", "FloatStorage", 1, 0, {1}, {1})});
  // Deflated entries.
  auto s = ParseTorchStateDict(
      Zip({{"a/data.pkl", pkl}, {"a/data/0", Floats({1})}}, 8), "c.pt");
  EXPECT_THAT(s.status().message(), HasSubstr("compressed"));
  // Big-endian storages.
  s = ParseTorchStateDict(Zip({{"a/data.pkl", pkl},
                               {"a/byteorder", "big"},
                               {"a/data/0", Floats({1})}}),
                          "b.pt");
  EXPECT_THAT(s.status().message(), HasSubstr("byte order 'big'"));
  // Not a zip at all (e.g. the legacy pre-1.6 format).
  s = ParseTorchStateDict(std::string("\x80\x02\x8a\x0a", 4) + "0123456789abcdefghijklmnop",
                          "old.pt");
  EXPECT_THAT(s.status().message(), HasSubstr("not a readable torch zip"));
  // No data.pkl.
  s = ParseTorchStateDict(Zip({{"a/data/0", Floats({1})}}), "e.pt");
  EXPECT_THAT(s.status().message(), HasSubstr("data.pkl"));
  EXPECT_EQ(ReadTorchStateDict("/nonexistent/x.pt").status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace inferd
