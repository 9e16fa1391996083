// ModelInfer's translation between the protocol's messages and a served model's run
// (grpc_request.h).
#include "grpc_request.h"

#include <fmt/format.h>

#include <cstring>
#include <limits>
#include <optional>

#include "kserve_protocol.h"

namespace strider::serve {

using inference::ModelInferRequest;
using inference::ModelInferResponse;

grpc::Status grpc_status(const Status& status) {
  if (status.is_ok()) return grpc::Status::OK;
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kOutOfRange:
    case StatusCode::kUnsupported: return {grpc::StatusCode::INVALID_ARGUMENT, status.message()};
    case StatusCode::kResourceExhausted: return {grpc::StatusCode::UNAVAILABLE, status.message()};
    default: return {grpc::StatusCode::INTERNAL, status.message()};
  }
}

namespace {

// The input from its typed contents (stored as T), checking the count before anything is
// allocated (a few bytes of message may declare a shape of any size: a fuzzed request
// declaring 30 GB with no contents took the server's allocator down) and each value's range.
template <typename T, typename Field>
Result<Tensor> from_contents(const Field& field, DType dtype, const Shape& shape, const std::string& name, int64_t elements) {
  if (int64_t(field.size()) != elements)
    return invalid_argument(fmt::format("input '{}': {} elements in its contents for {} in its shape", name, field.size(), elements));
  STRIDER_ASSIGN_OR_RETURN(Tensor t, Tensor::create(dtype, shape));
  T* out = t.data<T>();
  for (int i = 0; i < field.size(); ++i) {
    const auto v = field.Get(i);
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max())
        return invalid_argument(fmt::format("input '{}': element {} ({}) is not an integer of its datatype", name, i, v));
    }
    out[i] = T(v);
  }
  return t;
}

Result<Tensor> typed_input(const ModelInferRequest::InferInputTensor& in, DType dtype, const Shape& shape, int64_t n) {
  const auto& c = in.contents();
  const std::string& name = in.name();
  switch (dtype) {
    case DType::kBool: return from_contents<bool>(c.bool_contents(), dtype, shape, name, n);
    case DType::kI8: return from_contents<int8_t>(c.int_contents(), dtype, shape, name, n);
    case DType::kI16: return from_contents<int16_t>(c.int_contents(), dtype, shape, name, n);
    case DType::kI32: return from_contents<int32_t>(c.int_contents(), dtype, shape, name, n);
    case DType::kI64: return from_contents<int64_t>(c.int64_contents(), dtype, shape, name, n);
    case DType::kU8: return from_contents<uint8_t>(c.uint_contents(), dtype, shape, name, n);
    case DType::kU16: return from_contents<uint16_t>(c.uint_contents(), dtype, shape, name, n);
    case DType::kU32: return from_contents<uint32_t>(c.uint_contents(), dtype, shape, name, n);
    case DType::kU64: return from_contents<uint64_t>(c.uint64_contents(), dtype, shape, name, n);
    case DType::kF32: return from_contents<float>(c.fp32_contents(), dtype, shape, name, n);
    case DType::kF64: return from_contents<double>(c.fp64_contents(), dtype, shape, name, n);
    default:
      return invalid_argument(fmt::format("input '{}': {} travels only in raw_input_contents", name, kserve_datatype(dtype)));
  }
}

using Parameters = google::protobuf::Map<std::string, inference::InferParameter>;

// An input's or output's shared-memory range (Triton's parameters: shared_memory_region a
// string, shared_memory_byte_size and shared_memory_offset integers), nullopt when its
// parameters name no region.
Result<std::optional<SharedMemorySlice>> shared_memory_of(const Parameters& params, const SharedMemoryRegistry& regions,
                                                          const std::string& what) {
  auto region = params.find("shared_memory_region");
  if (region == params.end()) return std::optional<SharedMemorySlice>();
  if (region->second.parameter_choice_case() != inference::InferParameter::kStringParam)
    return invalid_argument(what + ": shared_memory_region must be a string_param");
  auto integer = [&](const char* key, bool required) -> Result<uint64_t> {
    auto it = params.find(key);
    if (it == params.end()) {
      if (required) return invalid_argument(fmt::format("{}: {} must be given", what, key));
      return uint64_t(0);
    }
    const inference::InferParameter& p = it->second;
    if (p.parameter_choice_case() == inference::InferParameter::kUint64Param) return p.uint64_param();
    if (p.parameter_choice_case() == inference::InferParameter::kInt64Param && p.int64_param() >= 0)
      return uint64_t(p.int64_param());
    return invalid_argument(fmt::format("{}: {} must be a non-negative int64_param or uint64_param", what, key));
  };
  STRIDER_ASSIGN_OR_RETURN(uint64_t byte_size, integer("shared_memory_byte_size", true));
  STRIDER_ASSIGN_OR_RETURN(uint64_t offset, integer("shared_memory_offset", false));
  STRIDER_ASSIGN_OR_RETURN(SharedMemorySlice slice,
                           shared_memory_range(&regions, region->second.string_param(), offset, byte_size, what));
  return std::optional<SharedMemorySlice>(std::move(slice));
}

}  // namespace

Result<InferRequest> parse_grpc_infer_request(const ModelInferRequest& req, const std::vector<ValueInfo>& model_inputs,
                                              const SharedMemoryRegistry& regions) {
  InferRequest request;
  request.id = req.id();
  int in_memory = 0;
  for (const auto& in : req.inputs()) in_memory += in.parameters().contains("shared_memory_region") ? 0 : 1;
  const bool raw = req.raw_input_contents_size() > 0;
  if (raw && req.raw_input_contents_size() != in_memory)
    return invalid_argument(fmt::format("raw_input_contents has {} entries for {} inputs not in shared memory",
                                        req.raw_input_contents_size(), in_memory));
  int raw_index = 0;
  for (const auto& in : req.inputs()) {
    STRIDER_ASSIGN_OR_RETURN(const ValueInfo* info, match_input(in.name(), in.datatype(), model_inputs, request));
    int64_t elements = 0;
    STRIDER_ASSIGN_OR_RETURN(Shape shape, checked_shape(std::span(in.shape().data(), size_t(in.shape_size())), in.name(), &elements));
    STRIDER_ASSIGN_OR_RETURN(std::optional<SharedMemorySlice> slice,
                             shared_memory_of(in.parameters(), regions, "input '" + in.name() + "'"));
    if (slice) {
      STRIDER_ASSIGN_OR_RETURN(request.inputs[in.name()], tensor_from_shared_memory(*slice, info->dtype, shape, in.name()));
      continue;
    }
    if (!raw) {
      STRIDER_ASSIGN_OR_RETURN(request.inputs[in.name()], typed_input(in, info->dtype, shape, elements));
      continue;
    }
    const std::string& bytes = req.raw_input_contents(raw_index++);
    if (int64_t(bytes.size()) != elements * dtype_size(info->dtype))
      return invalid_argument(fmt::format("input '{}': {} raw bytes for shape {} of {} ({} bytes)", in.name(), bytes.size(),
                                          shape_to_string(shape), in.datatype(), elements * dtype_size(info->dtype)));
    STRIDER_ASSIGN_OR_RETURN(request.inputs[in.name()],
                             Tensor::from_bytes(info->dtype, shape, std::as_bytes(std::span(bytes.data(), bytes.size()))));
  }
  STRIDER_RETURN_IF_ERROR(check_every_input_given(request, model_inputs));
  for (const auto& o : req.outputs()) {
    STRIDER_ASSIGN_OR_RETURN(std::optional<SharedMemorySlice> slice,
                             shared_memory_of(o.parameters(), regions, "output '" + o.name() + "'"));
    request.outputs.push_back({o.name(), true, std::move(slice)});
  }
  if (auto t = req.parameters().find("timeout"); t != req.parameters().end()) {
    if (t->second.parameter_choice_case() != inference::InferParameter::kInt64Param || t->second.int64_param() < 0)
      return invalid_argument("parameter 'timeout' must be an int64 count of microseconds");
    request.timeout_us = t->second.int64_param();
  }
  return request;
}

grpc::Status find_model(ModelRepository& repository, const std::string& name, const std::string& version,
                        ServedModel** model) {
  *model = repository.find(name);
  if (!*model) return {grpc::StatusCode::NOT_FOUND, fmt::format("unknown model '{}'", name)};
  if (!version.empty() && version != (*model)->version)
    return {grpc::StatusCode::NOT_FOUND, fmt::format("model '{}' has no version '{}' (it serves version {})", name,
                                                      version, (*model)->version)};
  return grpc::Status::OK;
}

grpc::Status model_infer(ModelRepository& repository, const ModelInferRequest& q, ModelInferResponse* r,
                         std::function<bool()> cancelled) {
  ServedModel* m = nullptr;
  if (grpc::Status found = find_model(repository, q.model_name(), q.model_version(), &m); !found.ok()) return found;
  const int64_t start = steady_now_ns();
  auto fail = [&](grpc::Status status) {
    m->record(false, start);
    return status;
  };
  if (!m->ready()) return fail({grpc::StatusCode::UNAVAILABLE, fmt::format("model '{}' is not ready: {}", m->name, m->why_not_ready())});
  Result<InferRequest> request = parse_grpc_infer_request(q, m->inputs(), repository.shared_memory());
  if (!request.is_ok()) return fail({grpc::StatusCode::INVALID_ARGUMENT, request.status().message()});
  RequestLimits limits;
  limits.cancelled = std::move(cancelled);
  if (request->timeout_us) limits.deadline = Clock::now() + std::chrono::microseconds(*request->timeout_us);
  Result<std::vector<Tensor>> outputs = m->infer(std::move(request->inputs), limits);
  if (!outputs.is_ok()) return fail(grpc_status(outputs.status()));
  Result<std::vector<size_t>> chosen = selected_outputs(*request, m->outputs());
  if (!chosen.is_ok()) return fail({grpc::StatusCode::INVALID_ARGUMENT, chosen.status().message()});
  if (Status fits = check_shared_memory_outputs(*request, *chosen, *outputs); !fits.is_ok())
    return fail({grpc::StatusCode::INVALID_ARGUMENT, fits.message()});
  r->set_model_name(m->name);
  r->set_model_version(m->version);
  r->set_id(request->id);
  for (size_t i = 0; i < chosen->size(); ++i) {
    const size_t k = (*chosen)[i];
    const Tensor& t = (*outputs)[k];
    auto* out = r->add_outputs();
    out->set_name(m->outputs()[k].name);
    out->set_datatype(std::string(kserve_datatype(t.dtype())));
    for (int64_t d : t.shape()) out->add_shape(d);
    const std::optional<SharedMemorySlice>* target = request->outputs.empty() ? nullptr : &request->outputs[i].shared_memory;
    if (target && *target) {  // written there; an empty raw entry keeps the indices of `outputs`
      std::memcpy((*target)->bytes().data(), t.bytes(), size_t(t.byte_size()));
      (*out->mutable_parameters())["shared_memory_region"].set_string_param((*target)->region_name);
      (*out->mutable_parameters())["shared_memory_byte_size"].set_int64_param(t.byte_size());
      r->add_raw_output_contents();
      continue;
    }
    r->add_raw_output_contents(reinterpret_cast<const char*>(t.bytes()), t.byte_size());
  }
  m->record(true, start);
  return grpc::Status::OK;
}

}  // namespace strider::serve
