#include "support/test_util.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "base/float16.h"
#include "base/onnx_types.h"
#include "base/small_types.h"
#include "onnx/importer.h"
#include "onnx/tensor_proto.h"

namespace strider::testing {

bool group_in_this_shard(size_t index) {
  const char* shards = std::getenv("STRIDER_TEST_SHARDS");
  const char* shard = std::getenv("STRIDER_TEST_SHARD_INDEX");
  if (shards == nullptr || shard == nullptr) return true;
  const size_t count = size_t(std::max(1L, std::strtol(shards, nullptr, 10)));
  return index % count == size_t(std::strtol(shard, nullptr, 10));
}

namespace fs = std::filesystem;

SeedModel load_seed_model(const std::string& name) {
  fs::path dir = fs::path(STRIDER_SOURCE_DIR) / "models/seed" / name;
  auto graph = import_model_file((dir / "model.onnx").string());
  auto input = read_tensor_pb((dir / "test_data_set_0/input_0.pb").string());
  if (!graph.is_ok() || !input.is_ok()) {
    ADD_FAILURE() << "seed model " << name << ": "
                  << (graph.is_ok() ? input.status() : graph.status()).to_string();
    return {};
  }
  return {std::move(*graph), std::move(*input)};
}

TempDir::TempDir() {
  static std::atomic<int> counter{0};
  path_ = fs::temp_directory_path() /
          ("strider_onnx_test_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
  fs::remove_all(path_);
  fs::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

Tensor random_tensor(DType dtype, Shape shape, uint32_t seed) {
  std::mt19937 rng(seed);
  Tensor t(dtype, std::move(shape));
  std::uniform_real_distribution<double> real(-3.0, 3.0);
  std::uniform_int_distribution<int64_t> wide(-(int64_t(1) << 40), int64_t(1) << 40);
  std::uniform_int_distribution<int32_t> narrow(-1000000, 1000000);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    if (is_small_type(dtype)) {  // a value of the type, in its one-byte form
      t.data<uint8_t>()[i] = small_type_from_double(real(rng) * 4, dtype);
      continue;
    }
    switch (dtype) {
      case DType::kF32:
        t.data<float>()[i] = float(real(rng));
        break;
      case DType::kF64:
        t.data<double>()[i] = real(rng);
        break;
      case DType::kF16:
        t.data<f16>()[i] = f16::from_float(float(real(rng)));
        break;
      case DType::kBF16:
        t.data<bf16>()[i] = bf16::from_float(float(real(rng)));
        break;
      case DType::kI64:
        t.data<int64_t>()[i] = wide(rng);
        break;
      case DType::kI32:
        t.data<int32_t>()[i] = narrow(rng);
        break;
      case DType::kI8:
        t.data<int8_t>()[i] = int8_t(byte(rng) - 128);
        break;
      case DType::kU8:
        t.data<uint8_t>()[i] = uint8_t(byte(rng));
        break;
      case DType::kBool:
        t.data<uint8_t>()[i] = uint8_t(byte(rng) & 1);
        break;
      case DType::kI16:
        t.data<int16_t>()[i] = int16_t(narrow(rng));
        break;
      case DType::kU16:
        t.data<uint16_t>()[i] = uint16_t(byte(rng) * 251);
        break;
      case DType::kU32:
        t.data<uint32_t>()[i] = uint32_t(wide(rng));
        break;
      case DType::kU64:
        t.data<uint64_t>()[i] = uint64_t(wide(rng)) * 2654435761u;
        break;
      default:  // the small types: is_small_type above
        break;
    }
  }
  return t;
}

bool same_tensor(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.byte_size() == b.byte_size() &&
         (a.byte_size() == 0 || std::memcmp(a.bytes(), b.bytes(), a.byte_size()) == 0);
}

onnx::TensorProto typed_proto(const Tensor& t, const std::string& name) {
  onnx::TensorProto p;
  p.set_name(name);
  for (int64_t d : t.shape()) p.add_dims(d);
  p.set_data_type(onnx_type_code(t.dtype()));
  if (is_small_type(t.dtype())) {  // int32_data holds the bytes of the packed form
    onnx::TensorProto packed = tensor_to_proto(t, name);
    for (char c : packed.raw_data()) p.add_int32_data(uint8_t(c));
    return p;
  }
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    switch (t.dtype()) {
      case DType::kF32:
        p.add_float_data(t.data<float>()[i]);
        break;
      case DType::kF64:
        p.add_double_data(t.data<double>()[i]);
        break;
      case DType::kI64:
        p.add_int64_data(t.data<int64_t>()[i]);
        break;
      case DType::kI32:
        p.add_int32_data(t.data<int32_t>()[i]);
        break;
      case DType::kF16:
      case DType::kBF16:
        p.add_int32_data(t.data<uint16_t>()[i]);
        break;
      case DType::kI8:
        p.add_int32_data(t.data<int8_t>()[i]);
        break;
      case DType::kU8:
      case DType::kBool:
        p.add_int32_data(t.data<uint8_t>()[i]);
        break;
      case DType::kI16:
        p.add_int32_data(t.data<int16_t>()[i]);
        break;
      case DType::kU16:
        p.add_int32_data(t.data<uint16_t>()[i]);
        break;
      case DType::kU32:
        p.add_uint64_data(t.data<uint32_t>()[i]);
        break;
      case DType::kU64:
        p.add_uint64_data(t.data<uint64_t>()[i]);
        break;
      default:  // the small types: is_small_type above
        break;
    }
  }
  return p;
}

onnx::ModelProto make_model(int opset) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("strider-tests");
  auto* o = m.add_opset_import();
  o->set_domain("");
  o->set_version(opset);
  m.mutable_graph()->set_name("g");
  return m;
}

onnx::ValueInfoProto* add_input(onnx::GraphProto* g, const std::string& name, int elem,
                                const std::vector<Dim>& dims) {
  auto* v = g->add_input();
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem);
  auto* shape = tt->mutable_shape();
  for (const Dim& d : dims) {
    auto* dim = shape->add_dim();
    if (d.value >= 0)
      dim->set_dim_value(d.value);
    else if (!d.param.empty())
      dim->set_dim_param(d.param);
  }
  return v;
}

onnx::ValueInfoProto* add_output(onnx::GraphProto* g, const std::string& name, int elem) {
  auto* v = g->add_output();
  v->set_name(name);
  v->mutable_type()->mutable_tensor_type()->set_elem_type(elem);
  return v;
}

onnx::NodeProto* add_node(onnx::GraphProto* g, const std::string& op_type,
                          const std::vector<std::string>& inputs,
                          const std::vector<std::string>& outputs, const std::string& name) {
  auto* n = g->add_node();
  n->set_op_type(op_type);
  if (!name.empty()) n->set_name(name);
  for (const auto& i : inputs) n->add_input(i);
  for (const auto& o : outputs) n->add_output(o);
  return n;
}

std::vector<std::byte> serialize(const google::protobuf::MessageLite& message) {
  std::string s = message.SerializeAsString();
  std::vector<std::byte> bytes(s.size());
  std::memcpy(bytes.data(), s.data(), s.size());
  return bytes;
}

void write_bytes(const std::string& path, const std::vector<std::byte>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
  ASSERT_TRUE(out.good()) << path;
}

}  // namespace strider::testing
