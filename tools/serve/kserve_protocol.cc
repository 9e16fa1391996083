#include "kserve_protocol.h"

#include <fmt/format.h>

#include <cstring>
#include <limits>
#include <set>

namespace strider::serve {
namespace {

using nlohmann::json;

struct DatatypeName {
  DType dtype;
  std::string_view name;
};
constexpr DatatypeName kDatatypes[] = {
    {DType::kBool, "BOOL"}, {DType::kU8, "UINT8"},   {DType::kU16, "UINT16"}, {DType::kU32, "UINT32"},
    {DType::kU64, "UINT64"}, {DType::kI8, "INT8"},   {DType::kI16, "INT16"},  {DType::kI32, "INT32"},
    {DType::kI64, "INT64"}, {DType::kF16, "FP16"},   {DType::kBF16, "BF16"},  {DType::kF32, "FP32"},
    {DType::kF64, "FP64"},
};

// The most elements one request tensor may declare (the body limit bounds real data; this
// bounds the arithmetic on a hostile shape before any data is looked at).
constexpr int64_t kMaxElements = int64_t(1) << 40;

Result<Shape> parse_shape(const json& shape, const std::string& input, int64_t* elements) {
  if (!shape.is_array()) return invalid_argument(fmt::format("input '{}': 'shape' must be an array of sizes", input));
  std::vector<int64_t> sizes;
  for (const json& d : shape) {
    if (!d.is_number_integer())
      return invalid_argument(fmt::format("input '{}': shape {} has a size that is not a non-negative integer", input, shape.dump()));
    sizes.push_back(d.get<int64_t>());
  }
  return checked_shape(sizes, input, elements);
}

// Appends the leaves of a flat or nested array, row-major.
Status flatten(const json& data, std::vector<const json*>& leaves, const std::string& input, int64_t limit) {
  if (!data.is_array()) {
    if (int64_t(leaves.size()) >= limit)
      return invalid_argument(fmt::format("input '{}': more data elements than its shape holds ({})", input, limit));
    leaves.push_back(&data);
    return Status::ok();
  }
  for (const json& item : data) STRIDER_RETURN_IF_ERROR(flatten(item, leaves, input, limit));
  return Status::ok();
}

template <typename T>
Status store_integers(const std::vector<const json*>& leaves, Tensor& tensor, const std::string& input) {
  T* out = tensor.data<T>();
  for (size_t i = 0; i < leaves.size(); ++i) {
    const json& v = *leaves[i];
    bool fits = false;
    if (v.is_number_unsigned()) fits = v.get<uint64_t>() <= uint64_t(std::numeric_limits<T>::max());
    else if (v.is_number_integer())
      fits = v.get<int64_t>() >= int64_t(std::numeric_limits<T>::min()) &&
             (std::is_unsigned_v<T> || v.get<int64_t>() <= int64_t(std::numeric_limits<T>::max()));
    if (!fits)
      return invalid_argument(fmt::format("input '{}': element {} ({}) is not an integer of its datatype", input, i, v.dump()));
    out[i] = v.is_number_unsigned() ? T(v.get<uint64_t>()) : T(v.get<int64_t>());
  }
  return Status::ok();
}

Result<Tensor> tensor_from_json(const json& data, DType dtype, const Shape& shape, int64_t elements,
                                const std::string& input) {
  std::vector<const json*> leaves;
  STRIDER_RETURN_IF_ERROR(flatten(data, leaves, input, elements));
  if (int64_t(leaves.size()) != elements)
    return invalid_argument(fmt::format("input '{}': {} data elements for shape {} ({} elements)", input,
                                        leaves.size(), shape_to_string(shape), elements));
  const DType stored = dtype == DType::kF16 || dtype == DType::kBF16 ? DType::kF32 : dtype;
  STRIDER_ASSIGN_OR_RETURN(Tensor tensor, Tensor::create(stored, shape));
  Status status = Status::ok();
  switch (stored) {
    case DType::kF32:
    case DType::kF64:
      for (size_t i = 0; i < leaves.size(); ++i) {
        if (!leaves[i]->is_number())
          return invalid_argument(fmt::format("input '{}': element {} ({}) is not a number", input, i, leaves[i]->dump()));
        if (stored == DType::kF32) tensor.data<float>()[i] = leaves[i]->get<float>();
        else tensor.data<double>()[i] = leaves[i]->get<double>();
      }
      break;
    case DType::kBool:
      for (size_t i = 0; i < leaves.size(); ++i) {
        if (!leaves[i]->is_boolean())
          return invalid_argument(fmt::format("input '{}': element {} ({}) is not true or false", input, i, leaves[i]->dump()));
        tensor.data<bool>()[i] = leaves[i]->get<bool>();
      }
      break;
    case DType::kI8: status = store_integers<int8_t>(leaves, tensor, input); break;
    case DType::kI16: status = store_integers<int16_t>(leaves, tensor, input); break;
    case DType::kI32: status = store_integers<int32_t>(leaves, tensor, input); break;
    case DType::kI64: status = store_integers<int64_t>(leaves, tensor, input); break;
    case DType::kU8: status = store_integers<uint8_t>(leaves, tensor, input); break;
    case DType::kU16: status = store_integers<uint16_t>(leaves, tensor, input); break;
    case DType::kU32: status = store_integers<uint32_t>(leaves, tensor, input); break;
    case DType::kU64: status = store_integers<uint64_t>(leaves, tensor, input); break;
    default: return internal_error("no JSON decoding for " + std::string(dtype_name(dtype)));
  }
  STRIDER_RETURN_IF_ERROR(status);
  if (stored != dtype) return convert_float_tensor(tensor, dtype);
  return tensor;
}

// The range an input's or output's parameters name: shared_memory_region (a string),
// shared_memory_byte_size (required) and shared_memory_offset (default 0).
Result<SharedMemorySlice> shared_memory_slice(const json& params, const SharedMemoryRegistry* regions, const std::string& what) {
  const json& region = params["shared_memory_region"];
  if (!region.is_string()) return invalid_argument(what + ": shared_memory_region must be a string");
  if (!params.contains("shared_memory_byte_size") || !params["shared_memory_byte_size"].is_number_unsigned())
    return invalid_argument(what + ": shared_memory_byte_size must be given as a non-negative integer");
  uint64_t offset = 0;
  if (params.contains("shared_memory_offset")) {
    if (!params["shared_memory_offset"].is_number_unsigned())
      return invalid_argument(what + ": shared_memory_offset must be a non-negative integer");
    offset = params["shared_memory_offset"].get<uint64_t>();
  }
  return shared_memory_range(regions, region.get<std::string>(), offset, params["shared_memory_byte_size"].get<uint64_t>(), what);
}

// One entry of "inputs": its tensor from JSON data, the next bytes of `binary` or a
// shared-memory range.
Status parse_input(const json& entry, const std::vector<ValueInfo>& model_inputs, std::string_view binary,
                   size_t* binary_offset, const SharedMemoryRegistry* regions, InferRequest* request) {
  if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string())
    return invalid_argument("every entry of 'inputs' needs a 'name'");
  const std::string name = entry["name"].get<std::string>();
  if (!entry.contains("datatype") || !entry["datatype"].is_string())
    return invalid_argument(fmt::format("input '{}': 'datatype' is missing", name));
  const std::string datatype = entry["datatype"].get<std::string>();
  STRIDER_ASSIGN_OR_RETURN(const ValueInfo* info, match_input(name, datatype, model_inputs, *request));
  if (!entry.contains("shape")) return invalid_argument(fmt::format("input '{}': 'shape' is missing", name));
  int64_t elements = 0;
  STRIDER_ASSIGN_OR_RETURN(Shape shape, parse_shape(entry["shape"], name, &elements));
  const uint64_t expected_bytes = uint64_t(elements) * uint64_t(dtype_size(info->dtype));
  const json* params = entry.contains("parameters") && entry["parameters"].is_object() ? &entry["parameters"] : nullptr;
  if (params && params->contains("shared_memory_region")) {
    STRIDER_ASSIGN_OR_RETURN(SharedMemorySlice slice, shared_memory_slice(*params, regions, "input '" + name + "'"));
    STRIDER_ASSIGN_OR_RETURN(request->inputs[name], tensor_from_shared_memory(slice, info->dtype, shape, name));
    return Status::ok();
  }
  const json* size = params && params->contains("binary_data_size") ? &(*params)["binary_data_size"] : nullptr;
  if (size) {
    if (!size->is_number_unsigned())
      return invalid_argument(fmt::format("input '{}': binary_data_size must be a non-negative integer", name));
    const uint64_t bytes = size->get<uint64_t>();
    if (bytes != expected_bytes)
      return invalid_argument(fmt::format("input '{}': binary_data_size {} for shape {} of {} ({} bytes)", name, bytes,
                                          shape_to_string(shape), datatype, elements * dtype_size(info->dtype)));
    if (bytes > binary.size() - *binary_offset)
      return invalid_argument(fmt::format("input '{}': binary_data_size {} but only {} bytes of binary data are left",
                                          name, bytes, binary.size() - *binary_offset));
    auto span = std::as_bytes(std::span(binary.data() + *binary_offset, size_t(bytes)));
    *binary_offset += size_t(bytes);
    STRIDER_ASSIGN_OR_RETURN(request->inputs[name], Tensor::from_bytes(info->dtype, shape, span));
    return Status::ok();
  }
  if (!entry.contains("data"))
    return invalid_argument(fmt::format("input '{}': neither 'data' nor parameters.binary_data_size", name));
  STRIDER_ASSIGN_OR_RETURN(request->inputs[name], tensor_from_json(entry["data"], info->dtype, shape, elements, name));
  return Status::ok();
}

bool binary_flag(const json& object, const char* key) {
  return object.contains("parameters") && object["parameters"].is_object() &&
         object["parameters"].contains(key) && object["parameters"][key].is_boolean() &&
         object["parameters"][key].get<bool>();
}

Status parse_outputs(const json& outputs, const SharedMemoryRegistry* regions, InferRequest* request) {
  if (!outputs.is_array()) return invalid_argument("'outputs' must be an array");
  for (const json& o : outputs) {
    if (!o.is_object() || !o.contains("name") || !o["name"].is_string())
      return invalid_argument("every entry of 'outputs' needs a 'name'");
    RequestedOutput& wanted = request->outputs.emplace_back();
    wanted.name = o["name"].get<std::string>();
    wanted.binary = binary_flag(o, "binary_data");
    if (o.contains("parameters") && o["parameters"].is_object() && o["parameters"].contains("shared_memory_region")) {
      STRIDER_ASSIGN_OR_RETURN(wanted.shared_memory,
                               shared_memory_slice(o["parameters"], regions, "output '" + wanted.name + "'"));
    }
  }
  return Status::ok();
}

json output_data(const Tensor& t) {
  json data = json::array();
  const int64_t n = t.num_elements();
  if (t.dtype() == DType::kBool)
    for (int64_t i = 0; i < n; ++i) data.push_back(t.data<bool>()[i]);
  else if (is_floating(t.dtype()))
    for (int64_t i = 0; i < n; ++i) data.push_back(t.element_as_double(i));
  else if (t.dtype() == DType::kU64)
    for (int64_t i = 0; i < n; ++i) data.push_back(t.data<uint64_t>()[i]);
  else
    for (int64_t i = 0; i < n; ++i) data.push_back(t.element_as_int(i));
  return data;
}

}  // namespace

Result<Shape> checked_shape(std::span<const int64_t> sizes, const std::string& input, int64_t* elements) {
  *elements = 1;
  for (int64_t d : sizes) {
    if (d < 0)
      return invalid_argument(fmt::format("input '{}': shape {} has a size that is not a non-negative integer", input,
                                          shape_to_string(sizes)));
    if (d > 0 && *elements > kMaxElements / d)
      return invalid_argument(fmt::format("input '{}': shape {} is too large", input, shape_to_string(sizes)));
    *elements *= d;
  }
  return Shape(sizes.begin(), sizes.end());
}

Result<const ValueInfo*> match_input(const std::string& name, const std::string& datatype,
                                     const std::vector<ValueInfo>& model_inputs, const InferRequest& so_far) {
  const ValueInfo* info = nullptr;
  for (const ValueInfo& v : model_inputs)
    if (v.name == name) info = &v;
  if (!info) {
    std::string names;
    for (const ValueInfo& v : model_inputs) names += (names.empty() ? "" : ", ") + v.name;
    return invalid_argument(fmt::format("input '{}' is not an input of the model (its inputs: {})", name, names));
  }
  if (so_far.inputs.count(name)) return invalid_argument(fmt::format("input '{}' is given twice", name));
  if (datatype != kserve_datatype(info->dtype))
    return invalid_argument(fmt::format("input '{}': datatype {}, the model takes {}", name, datatype,
                                        kserve_datatype(info->dtype)));
  return info;
}

Status check_every_input_given(const InferRequest& request, const std::vector<ValueInfo>& model_inputs) {
  for (const ValueInfo& v : model_inputs)
    if (!request.inputs.count(v.name)) return invalid_argument(fmt::format("input '{}' is missing", v.name));
  return Status::ok();
}

std::string_view kserve_datatype(DType dtype) {
  for (const DatatypeName& d : kDatatypes)
    if (d.dtype == dtype) return d.name;
  return {};
}

std::optional<DType> dtype_from_kserve(std::string_view datatype) {
  for (const DatatypeName& d : kDatatypes)
    if (d.name == datatype) return d.dtype;
  return std::nullopt;
}

std::string triton_config_datatype(DType dtype) {
  std::string_view name = kserve_datatype(dtype);
  return name.empty() ? "TYPE_INVALID" : "TYPE_" + std::string(name);
}

Result<InferRequest> parse_infer_request(std::string_view body, std::optional<size_t> header_length,
                                         const std::vector<ValueInfo>& model_inputs, const SharedMemoryRegistry* regions) {
  if (header_length && *header_length > body.size())
    return invalid_argument(fmt::format("Inference-Header-Content-Length {} is more than the body's {} bytes",
                                        *header_length, body.size()));
  const std::string_view header = header_length ? body.substr(0, *header_length) : body;
  const std::string_view binary = header_length ? body.substr(*header_length) : std::string_view();
  json request = json::parse(header, nullptr, false);
  if (request.is_discarded()) return invalid_argument("the request is not valid JSON");
  if (!request.is_object()) return invalid_argument("the request must be a JSON object");
  InferRequest result;
  if (request.contains("id")) {
    if (!request["id"].is_string()) return invalid_argument("'id' must be a string");
    result.id = request["id"].get<std::string>();
  }
  if (!request.contains("inputs") || !request["inputs"].is_array())
    return invalid_argument("the request needs an 'inputs' array");
  size_t offset = 0;
  for (const json& entry : request["inputs"]) STRIDER_RETURN_IF_ERROR(parse_input(entry, model_inputs, binary, &offset, regions, &result));
  if (offset != binary.size())
    return invalid_argument(fmt::format("{} bytes of binary data follow the header that no input claims", binary.size() - offset));
  STRIDER_RETURN_IF_ERROR(check_every_input_given(result, model_inputs));
  if (request.contains("outputs")) STRIDER_RETURN_IF_ERROR(parse_outputs(request["outputs"], regions, &result));
  result.binary_outputs = binary_flag(request, "binary_data_output");
  if (request.contains("parameters") && request["parameters"].is_object() && request["parameters"].contains("timeout")) {
    const json& timeout = request["parameters"]["timeout"];
    if (!timeout.is_number_unsigned()) return invalid_argument("parameters.timeout must be a count of microseconds");
    result.timeout_us = timeout.get<int64_t>();
  }
  return result;
}

Result<InferResponse> make_infer_response(const std::string& model_name, const std::string& version,
                                          const InferRequest& request, const std::vector<ValueInfo>& model_outputs,
                                          const std::vector<Tensor>& outputs) {
  STRIDER_ASSIGN_OR_RETURN(std::vector<size_t> chosen, selected_outputs(request, model_outputs));
  json response = {{"model_name", model_name}, {"model_version", version}, {"outputs", json::array()}};
  if (!request.id.empty()) response["id"] = request.id;
  std::string binary;
  STRIDER_RETURN_IF_ERROR(check_shared_memory_outputs(request, chosen, outputs));
  for (size_t k = 0; k < chosen.size(); ++k) {
    const Tensor& t = outputs[chosen[k]];
    const bool as_binary = request.outputs.empty() ? request.binary_outputs : request.outputs[k].binary || request.binary_outputs;
    json entry = {{"name", model_outputs[chosen[k]].name}, {"datatype", kserve_datatype(t.dtype())}, {"shape", t.shape()}};
    const std::optional<SharedMemorySlice>* target = request.outputs.empty() ? nullptr : &request.outputs[k].shared_memory;
    if (target && *target) {
      std::memcpy((*target)->bytes().data(), t.bytes(), size_t(t.byte_size()));
      entry["parameters"] = {{"shared_memory_region", (*target)->region_name}, {"shared_memory_byte_size", t.byte_size()}};
      if ((*target)->offset != 0) entry["parameters"]["shared_memory_offset"] = (*target)->offset;
    } else if (as_binary) {
      entry["parameters"] = {{"binary_data_size", t.byte_size()}};
      binary.append(reinterpret_cast<const char*>(t.bytes()), t.byte_size());
    } else {
      entry["data"] = output_data(t);
    }
    response["outputs"].push_back(std::move(entry));
  }
  InferResponse result;
  result.body = response.dump();
  if (!binary.empty() || request.binary_outputs) {
    result.header_length = result.body.size();
    result.body += binary;
  }
  return result;
}

Result<SharedMemorySlice> shared_memory_range(const SharedMemoryRegistry* regions, const std::string& region, uint64_t offset,
                                              uint64_t byte_size, const std::string& what) {
  if (!regions) return invalid_argument(what + ": this server takes no shared memory");
  Result<SharedMemorySlice> slice = regions->slice(region, offset, byte_size);
  if (!slice.is_ok()) return invalid_argument(what + ": " + slice.status().message());
  return slice;
}

Result<Tensor> tensor_from_shared_memory(const SharedMemorySlice& slice, DType dtype, const Shape& shape,
                                         const std::string& input) {
  uint64_t expected = uint64_t(dtype_size(dtype));
  for (int64_t d : shape) expected *= uint64_t(d);  // checked_shape bounded the count
  if (slice.byte_size != expected)
    return invalid_argument(fmt::format("input '{}': shared_memory_byte_size {} for shape {} of {} ({} bytes)", input,
                                        slice.byte_size, shape_to_string(shape), kserve_datatype(dtype), expected));
  return Tensor::from_bytes(dtype, shape, slice.bytes());
}

Status check_shared_memory_outputs(const InferRequest& request, const std::vector<size_t>& chosen,
                                   const std::vector<Tensor>& outputs) {
  for (size_t k = 0; k < request.outputs.size(); ++k) {
    const std::optional<SharedMemorySlice>& target = request.outputs[k].shared_memory;
    const Tensor& t = outputs[chosen[k]];
    if (target && uint64_t(t.byte_size()) > target->byte_size)
      return invalid_argument(fmt::format("output '{}' of {} bytes does not fit the {} bytes of shared memory region '{}' asked for",
                                          request.outputs[k].name, t.byte_size(), target->byte_size, target->region_name));
  }
  return Status::ok();
}

Result<std::vector<size_t>> selected_outputs(const InferRequest& request, const std::vector<ValueInfo>& model_outputs) {
  std::vector<size_t> chosen;
  for (const RequestedOutput& w : request.outputs) {
    size_t at = model_outputs.size();
    for (size_t i = 0; i < model_outputs.size(); ++i)
      if (model_outputs[i].name == w.name) at = i;
    if (at == model_outputs.size()) return invalid_argument(fmt::format("output '{}' is not an output of the model", w.name));
    chosen.push_back(at);
  }
  if (request.outputs.empty())
    for (size_t i = 0; i < model_outputs.size(); ++i) chosen.push_back(i);
  return chosen;
}

json tensor_metadata(const ValueInfo& value) {
  return {{"name", value.name}, {"datatype", kserve_datatype(value.dtype)}, {"shape", value.shape}};
}

}  // namespace strider::serve
