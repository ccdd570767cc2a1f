// What inferd's GGUF code sees, for gguf_reader_test.py to compare with the
// PyPI gguf package:
//   inferd_gguf_dump FILE.gguf
//       metadata and tensors as JSON (arrays summarized: element type,
//       length, first 16 elements);
//   inferd_gguf_dump --tensor FILE.gguf NAME ROWS OUT.f32
//       the first ROWS rows of tensor NAME dequantized to float32;
//   inferd_gguf_dump --blocks TYPE IN.bin OUT.f32
//       raw blocks of ggml type TYPE (e.g. Q4_K) dequantized to float32.
// Exit 1 with the error message on stderr on failure.
#include <algorithm>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "runtime/loader/gguf.h"
#include "runtime/loader/gguf_quant.h"

namespace {

nlohmann::json Scalar(const inferd::GgufValue& v) {
  using T = inferd::GgufValueType;
  switch (v.type) {
    case T::kString: return v.s;
    case T::kBool: return v.u != 0;
    case T::kFloat32:
    case T::kFloat64: return v.f;
    case T::kInt8:
    case T::kInt16:
    case T::kInt32:
    case T::kInt64: return v.i;
    default: return v.u;
  }
}

nlohmann::json Value(const inferd::GgufValue& v) {
  if (v.type != inferd::GgufValueType::kArray) {
    return {{"type", std::string(inferd::GgufValueTypeName(v.type))},
            {"value", Scalar(v)}};
  }
  nlohmann::json head = nlohmann::json::array();
  for (size_t i = 0; i < v.elements.size() && i < 16; ++i) {
    head.push_back(v.elements[i].type == inferd::GgufValueType::kArray
                       ? nlohmann::json(v.elements[i].elements.size())
                       : Scalar(v.elements[i]));
  }
  return {{"type", "array"},
          {"element_type", std::string(inferd::GgufValueTypeName(v.element_type))},
          {"length", v.elements.size()},
          {"head", head}};
}

}  // namespace

static int Fail(const std::string& why) {
  std::cerr << why << "\n";
  return 1;
}

static int WriteFloats(const std::string& path, const std::vector<float>& v) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(v.data()),
            static_cast<std::streamsize>(v.size() * sizeof(float)));
  return out ? 0 : Fail("cannot write " + path);
}

static int Tensor(const char* file, const std::string& name, int64_t rows,
           const std::string& out) {
  auto f = inferd::GgufFile::Open(file);
  if (!f.ok()) return Fail(std::string(f.status().message()));
  const inferd::GgufTensorInfo* t = (*f)->FindTensor(name);
  if (t == nullptr) return Fail("no tensor " + name);
  const int64_t row = t->dims[0];
  const int64_t row_bytes = row / t->type->block_elements * t->type->block_bytes;
  rows = std::min<int64_t>(rows, t->numel() / row);
  std::vector<float> v(static_cast<size_t>(rows * row));
  for (int64_t r = 0; r < rows; ++r) {
    absl::Status s = inferd::DequantizeRow(*t->type, t->data + r * row_bytes,
                                           row, v.data() + r * row);
    if (!s.ok()) return Fail(std::string(s.message()));
  }
  return WriteFloats(out, v);
}

static int Blocks(const std::string& type_name, const std::string& in,
           const std::string& out) {
  const inferd::GgmlTypeInfo* type = nullptr;
  for (uint32_t id = 0; id < 64; ++id) {
    const inferd::GgmlTypeInfo* t = inferd::FindGgmlType(id);
    if (t != nullptr && type_name == t->name) type = t;
  }
  if (type == nullptr) return Fail("unknown type " + type_name);
  std::ifstream f(in, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)),
                    std::istreambuf_iterator<char>());
  if (bytes.size() % static_cast<size_t>(type->block_bytes) != 0) {
    return Fail("input is not whole blocks");
  }
  const int64_t n = static_cast<int64_t>(bytes.size()) / type->block_bytes *
                    type->block_elements;
  std::vector<float> v(static_cast<size_t>(n));
  absl::Status s = inferd::DequantizeRow(
      *type, reinterpret_cast<const uint8_t*>(bytes.data()), n, v.data());
  if (!s.ok()) return Fail(std::string(s.message()));
  return WriteFloats(out, v);
}

int main(int argc, char** argv) {
  if (argc == 6 && std::string(argv[1]) == "--tensor") {
    return Tensor(argv[2], argv[3], std::stoll(argv[4]), argv[5]);
  }
  if (argc == 5 && std::string(argv[1]) == "--blocks") {
    return Blocks(argv[2], argv[3], argv[4]);
  }
  if (argc != 2) {
    std::cerr << "usage: inferd_gguf_dump FILE.gguf | --tensor FILE NAME ROWS "
                 "OUT | --blocks TYPE IN OUT\n";
    return 2;
  }
  auto file = inferd::GgufFile::Open(argv[1]);
  if (!file.ok()) {
    std::cerr << file.status().message() << "\n";
    return 1;
  }
  const inferd::GgufFile& f = **file;
  nlohmann::json out;
  out["version"] = f.version();
  out["alignment"] = f.alignment();
  out["data_bytes"] = f.data_bytes();
  for (const auto& [key, value] : f.metadata()) out["metadata"][key] = Value(value);
  out["tensors"] = nlohmann::json::array();
  for (const inferd::GgufTensorInfo& t : f.tensors()) {
    out["tensors"].push_back({{"name", t.name},
                              {"dims", t.dims},
                              {"type", t.type->name},
                              {"offset", t.offset},
                              {"nbytes", t.nbytes},
                              {"first_bytes", std::vector<int>(t.data, t.data + 8)}});
  }
  std::cout << out.dump() << "\n";
  return 0;
}
