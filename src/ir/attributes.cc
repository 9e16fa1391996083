#include "ir/attributes.h"

#include <fmt/format.h>

namespace strider {

std::string_view attribute_kind_name(Attribute::Kind kind) {
  switch (kind) {
    case Attribute::Kind::kInt: return "int";
    case Attribute::Kind::kFloat: return "float";
    case Attribute::Kind::kString: return "string";
    case Attribute::Kind::kInts: return "ints";
    case Attribute::Kind::kFloats: return "floats";
    case Attribute::Kind::kStrings: return "strings";
    case Attribute::Kind::kTensor: return "tensor";
    case Attribute::Kind::kGraph: return "graph";
  }
  return "unknown";
}

void AttributeMap::set_int(const std::string& name, int64_t v) {
  Attribute a;
  a.kind = Attribute::Kind::kInt;
  a.i = v;
  set(name, std::move(a));
}
void AttributeMap::set_float(const std::string& name, float v) {
  Attribute a;
  a.kind = Attribute::Kind::kFloat;
  a.f = v;
  set(name, std::move(a));
}
void AttributeMap::set_string(const std::string& name, std::string v) {
  Attribute a;
  a.kind = Attribute::Kind::kString;
  a.s = std::move(v);
  set(name, std::move(a));
}
void AttributeMap::set_ints(const std::string& name, std::vector<int64_t> v) {
  Attribute a;
  a.kind = Attribute::Kind::kInts;
  a.ints = std::move(v);
  set(name, std::move(a));
}
void AttributeMap::set_floats(const std::string& name, std::vector<float> v) {
  Attribute a;
  a.kind = Attribute::Kind::kFloats;
  a.floats = std::move(v);
  set(name, std::move(a));
}
void AttributeMap::set_strings(const std::string& name, std::vector<std::string> v) {
  Attribute a;
  a.kind = Attribute::Kind::kStrings;
  a.strings = std::move(v);
  set(name, std::move(a));
}
void AttributeMap::set_tensor(const std::string& name, Tensor v) {
  Attribute a;
  a.kind = Attribute::Kind::kTensor;
  a.tensor = std::make_shared<const Tensor>(std::move(v));
  set(name, std::move(a));
}

const Attribute* AttributeMap::find(const std::string& name) const {
  auto it = map_.find(name);
  return it == map_.end() ? nullptr : &it->second;
}

Result<const Attribute*> AttributeMap::typed(const std::string& name, Attribute::Kind kind) const {
  const Attribute* a = find(name);
  if (a == nullptr) return invalid_model(fmt::format("missing attribute '{}'", name));
  if (a->kind != kind)
    return invalid_model(fmt::format("attribute '{}' is {}, expected {}", name,
                                      attribute_kind_name(a->kind), attribute_kind_name(kind)));
  return a;
}

Result<int64_t> AttributeMap::get_int(const std::string& name, int64_t fallback) const {
  if (!has(name)) return fallback;
  STRIDER_ASSIGN_OR_RETURN(const Attribute* a, typed(name, Attribute::Kind::kInt));
  return a->i;
}
Result<float> AttributeMap::get_float(const std::string& name, float fallback) const {
  if (!has(name)) return fallback;
  STRIDER_ASSIGN_OR_RETURN(const Attribute* a, typed(name, Attribute::Kind::kFloat));
  return a->f;
}
Result<std::string> AttributeMap::get_string(const std::string& name, std::string fallback) const {
  if (!has(name)) return fallback;
  STRIDER_ASSIGN_OR_RETURN(const Attribute* a, typed(name, Attribute::Kind::kString));
  return a->s;
}
Result<std::vector<int64_t>> AttributeMap::get_ints(const std::string& name,
                                                    std::vector<int64_t> fallback) const {
  if (!has(name)) return fallback;
  STRIDER_ASSIGN_OR_RETURN(const Attribute* a, typed(name, Attribute::Kind::kInts));
  return a->ints;
}
Result<std::vector<float>> AttributeMap::get_floats(const std::string& name,
                                                    std::vector<float> fallback) const {
  if (!has(name)) return fallback;
  STRIDER_ASSIGN_OR_RETURN(const Attribute* a, typed(name, Attribute::Kind::kFloats));
  return a->floats;
}
Result<int64_t> AttributeMap::require_int(const std::string& name) const {
  STRIDER_ASSIGN_OR_RETURN(const Attribute* a, typed(name, Attribute::Kind::kInt));
  return a->i;
}
Result<std::vector<int64_t>> AttributeMap::require_ints(const std::string& name) const {
  STRIDER_ASSIGN_OR_RETURN(const Attribute* a, typed(name, Attribute::Kind::kInts));
  return a->ints;
}
Result<const Tensor*> AttributeMap::require_tensor(const std::string& name) const {
  STRIDER_ASSIGN_OR_RETURN(const Attribute* a, typed(name, Attribute::Kind::kTensor));
  return a->tensor.get();
}

}  // namespace strider
