// Node attributes, as imported from ONNX (or set by the builder in tests).
//
// Getters take the attribute name and a default, or return a Status naming the attribute
// when a required one is missing or has the wrong kind. The node's name is added by the
// caller (shape functions and kernels wrap errors with the node).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "strider/status.h"
#include "strider/tensor.h"

namespace strider {

struct Subgraph;  // ir/graph.h

struct Attribute {
  enum class Kind { kInt, kFloat, kString, kInts, kFloats, kStrings, kTensor, kGraph };
  Kind kind = Kind::kInt;
  int64_t i = 0;
  float f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::vector<std::string> strings;
  std::shared_ptr<const Tensor> tensor;
  // A GRAPH attribute's body (If's branches, Loop's and Scan's body); null for the other
  // graph-like kinds (GRAPHS, TYPE_PROTO, ...), which no supported op reads.
  std::shared_ptr<const Subgraph> graph;
};

std::string_view attribute_kind_name(Attribute::Kind kind);

class AttributeMap {
 public:
  void set(const std::string& name, Attribute value) { map_[name] = std::move(value); }
  void set_int(const std::string& name, int64_t v);
  void set_float(const std::string& name, float v);
  void set_string(const std::string& name, std::string v);
  void set_ints(const std::string& name, std::vector<int64_t> v);
  void set_floats(const std::string& name, std::vector<float> v);
  void set_strings(const std::string& name, std::vector<std::string> v);
  void set_tensor(const std::string& name, Tensor v);

  bool has(const std::string& name) const { return map_.count(name) != 0; }
  const Attribute* find(const std::string& name) const;
  const std::map<std::string, Attribute>& all() const { return map_; }

  // With a default: the default when absent, an error when present with the wrong kind.
  Result<int64_t> get_int(const std::string& name, int64_t fallback) const;
  Result<float> get_float(const std::string& name, float fallback) const;
  Result<std::string> get_string(const std::string& name, std::string fallback) const;
  Result<std::vector<int64_t>> get_ints(const std::string& name,
                                        std::vector<int64_t> fallback) const;
  Result<std::vector<float>> get_floats(const std::string& name,
                                        std::vector<float> fallback) const;
  // Required: an error when absent.
  Result<int64_t> require_int(const std::string& name) const;
  Result<std::vector<int64_t>> require_ints(const std::string& name) const;
  Result<const Tensor*> require_tensor(const std::string& name) const;

 private:
  Result<const Attribute*> typed(const std::string& name, Attribute::Kind kind) const;
  std::map<std::string, Attribute> map_;
};

}  // namespace strider
