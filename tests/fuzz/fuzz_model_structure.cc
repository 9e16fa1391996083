// libFuzzer target with a structure-aware mutator: inputs that parse as an ONNX model are
// mutated as a model (dims, element types, attributes, wiring, opsets, op types, nodes,
// outputs) and serialized again, so most mutants are well-formed protobuf that reaches
// shape inference, planning and the kernels instead of dying in the parser; anything else
// gets libFuzzer's byte mutations. The test itself is exercise_model, as in fuzz_model.
#include <onnx/onnx_pb.h>

#include <limits>
#include <random>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "ops/op_registry.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

using Rng = std::mt19937_64;

int64_t pick(Rng& rng, int64_t n) { return n <= 0 ? 0 : int64_t(rng() % uint64_t(n)); }

// Sizes and integers that break arithmetic: zero, one, negatives, powers of two around
// 32 and 64 bits, the extremes.
int64_t nasty_int(Rng& rng) {
  static const int64_t kValues[] = {0, 1, 2, 3, -1, -2, 7, 16, 255, 65535, int64_t(1) << 31, (int64_t(1) << 31) - 1,
                                    int64_t(1) << 32, int64_t(1) << 40, int64_t(1) << 62,
                                    std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min(),
                                    std::numeric_limits<int64_t>::max() - 1};
  if (rng() % 4 == 0) return int64_t(rng() % 33) - 8;
  return kValues[pick(rng, std::size(kValues))];
}

float nasty_float(Rng& rng) {
  static const float kValues[] = {0.f, -0.f, 1.f, -1.f, 0.5f, 1e-30f, 1e30f, 3.4e38f,
                                  std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                                  std::numeric_limits<float>::quiet_NaN(), 2.f};
  return kValues[pick(rng, std::size(kValues))];
}

// Every value name the graph defines.
std::vector<std::string> value_names(const onnx::GraphProto& g) {
  std::vector<std::string> names;
  for (const auto& i : g.input()) names.push_back(i.name());
  for (const auto& i : g.initializer()) names.push_back(i.name());
  for (const auto& n : g.node())
    for (const auto& o : n.output()) names.push_back(o);
  return names;
}

void mutate_dims(onnx::GraphProto& g, Rng& rng) {
  if (rng() % 2 && g.input_size() > 0) {
    auto* shape = g.mutable_input(int(pick(rng, g.input_size())))->mutable_type()->mutable_tensor_type()->mutable_shape();
    if (shape->dim_size() == 0 || rng() % 5 == 0) shape->add_dim()->set_dim_value(nasty_int(rng));
    else if (rng() % 6 == 0) shape->mutable_dim(int(pick(rng, shape->dim_size())))->set_dim_param("n");
    else shape->mutable_dim(int(pick(rng, shape->dim_size())))->set_dim_value(nasty_int(rng));
  } else if (g.initializer_size() > 0) {
    auto* t = g.mutable_initializer(int(pick(rng, g.initializer_size())));
    if (t->dims_size() == 0 || rng() % 4 == 0) t->add_dims(nasty_int(rng));
    else t->set_dims(int(pick(rng, t->dims_size())), nasty_int(rng));
    if (t->has_raw_data() && rng() % 2) t->mutable_raw_data()->resize(size_t(pick(rng, 256)));
  }
}

void mutate_types(onnx::GraphProto& g, Rng& rng) {
  int type = int(pick(rng, 27));
  if (rng() % 2 && g.input_size() > 0)
    g.mutable_input(int(pick(rng, g.input_size())))->mutable_type()->mutable_tensor_type()->set_elem_type(type);
  else if (g.initializer_size() > 0)
    g.mutable_initializer(int(pick(rng, g.initializer_size())))->set_data_type(type);
}

void mutate_attribute(onnx::NodeProto& node, Rng& rng) {
  using AP = onnx::AttributeProto;
  if (node.attribute_size() == 0 || rng() % 5 == 0) {
    static const char* kNames[] = {"axis", "axes", "perm", "kernel_shape", "strides", "pads", "dilations", "group",
                                   "to", "split", "num_outputs", "keepdims", "auto_pad", "mode", "alpha", "value"};
    auto* a = node.add_attribute();
    a->set_name(kNames[pick(rng, std::size(kNames))]);
    a->set_type(AP::INT);
    a->set_i(nasty_int(rng));
    return;
  }
  auto* a = node.mutable_attribute(int(pick(rng, node.attribute_size())));
  switch (rng() % 6) {
    case 0: a->set_i(nasty_int(rng)); break;
    case 1:
      if (a->ints_size() > 0) a->set_ints(int(pick(rng, a->ints_size())), nasty_int(rng));
      else a->add_ints(nasty_int(rng));
      break;
    case 2: a->set_f(nasty_float(rng)); break;
    case 3: a->set_type(AP::AttributeType(pick(rng, 15))); break;
    case 4: a->set_s(rng() % 2 ? "SAME_UPPER" : std::string(size_t(pick(rng, 40)), char(pick(rng, 256)))); break;
    default: node.mutable_attribute()->DeleteSubrange(int(pick(rng, node.attribute_size())), 1); break;
  }
}

void mutate_wiring(onnx::GraphProto& g, onnx::NodeProto& node, Rng& rng) {
  std::vector<std::string> names = value_names(g);
  std::string other = names.empty() ? "" : names[size_t(pick(rng, int64_t(names.size())))];
  switch (rng() % 5) {
    case 0:
      if (node.input_size() > 0) node.set_input(int(pick(rng, node.input_size())), rng() % 4 ? other : "");
      break;
    case 1: node.add_input(other); break;
    case 2:
      if (node.input_size() > 0) node.mutable_input()->DeleteSubrange(int(pick(rng, node.input_size())), 1);
      break;
    case 3:
      if (node.output_size() > 0) node.set_output(int(pick(rng, node.output_size())), rng() % 3 ? other : "");
      break;
    default: node.add_output(rng() % 2 ? other : "extra_" + std::to_string(rng() % 8)); break;
  }
}

void mutate_graph(onnx::ModelProto& m, Rng& rng) {
  onnx::GraphProto& g = *m.mutable_graph();
  static const std::vector<std::string_view> kOps = [] {
    auto ops = strider::registered_op_types();
    ops.push_back("NoSuchOp");
    return ops;
  }();
  switch (rng() % 9) {
    case 0: mutate_dims(g, rng); break;
    case 1: mutate_types(g, rng); break;
    case 2:
    case 3:
      if (g.node_size() > 0) mutate_attribute(*g.mutable_node(int(pick(rng, g.node_size()))), rng);
      break;
    case 4:
      if (g.node_size() > 0) mutate_wiring(g, *g.mutable_node(int(pick(rng, g.node_size()))), rng);
      break;
    case 5: {
      static const int kOpsets[] = {1, 6, 7, 9, 10, 11, 12, 13, 17, 18, 19, 21, 24, 28, 29, 99};
      if (m.opset_import_size() == 0) m.add_opset_import();
      m.mutable_opset_import(0)->set_version(rng() % 3 ? kOpsets[pick(rng, std::size(kOpsets))] : nasty_int(rng));
      break;
    }
    case 6:
      if (g.node_size() > 0)
        g.mutable_node(int(pick(rng, g.node_size())))->set_op_type(std::string(kOps[size_t(pick(rng, int64_t(kOps.size())))]));
      break;
    case 7:
      if (g.node_size() > 0 && rng() % 2) g.mutable_node()->DeleteSubrange(int(pick(rng, g.node_size())), 1);
      else if (g.node_size() > 0) *g.add_node() = g.node(int(pick(rng, g.node_size())));
      break;
    default: {
      std::vector<std::string> names = value_names(g);
      if (names.empty()) break;
      if (rng() % 2 || g.output_size() == 0) g.add_output()->set_name(names[size_t(pick(rng, int64_t(names.size())))]);
      else g.mutable_output()->DeleteSubrange(int(pick(rng, g.output_size())), 1);
      break;
    }
  }
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  onnx::ModelProto model;
  if (size == 0 || !model.ParseFromArray(data, int(size)) || !model.has_graph() || seed % 16 == 0)
    return LLVMFuzzerMutate(data, size, max_size);
  Rng rng(seed);
  for (int n = 1 + int(rng() % 3); n > 0; --n) mutate_graph(model, rng);
  std::string bytes = model.SerializeAsString();
  if (bytes.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data, bytes.data(), bytes.size());
  return bytes.size();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  strider::fuzz::exercise_model(std::as_bytes(std::span(data, size)));
  return 0;
}
