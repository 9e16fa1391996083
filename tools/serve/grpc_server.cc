#include "grpc_server.h"

#include <fmt/format.h>
#include <grpc_service.grpc.pb.h>  // generated from proto/grpc_service.proto
#include <grpcpp/grpcpp.h>

#include <cstring>
#include <limits>
#include <optional>

#include "kserve_protocol.h"
#include "strider/tools.h"

namespace strider::serve {
namespace {

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

// Copies typed contents into `t` (stored as T), checking the count and each value's range.
template <typename T, typename Field>
Status copy_contents(const Field& field, Tensor& t, const std::string& name, int64_t elements) {
  if (int64_t(field.size()) != elements)
    return invalid_argument(fmt::format("input '{}': {} elements in its contents for {} in its shape", name, field.size(), elements));
  T* out = t.data<T>();
  for (int i = 0; i < field.size(); ++i) {
    const auto v = field.Get(i);
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max())
        return invalid_argument(fmt::format("input '{}': element {} ({}) is not an integer of its datatype", name, i, v));
    }
    out[i] = T(v);
  }
  return Status::ok();
}

Result<Tensor> typed_input(const ModelInferRequest::InferInputTensor& in, DType dtype, const Shape& shape, int64_t n) {
  STRIDER_ASSIGN_OR_RETURN(Tensor t, Tensor::create(dtype, shape));
  const auto& c = in.contents();
  const std::string& name = in.name();
  Status status = Status::ok();
  switch (dtype) {
    case DType::kBool: status = copy_contents<bool>(c.bool_contents(), t, name, n); break;
    case DType::kI8: status = copy_contents<int8_t>(c.int_contents(), t, name, n); break;
    case DType::kI16: status = copy_contents<int16_t>(c.int_contents(), t, name, n); break;
    case DType::kI32: status = copy_contents<int32_t>(c.int_contents(), t, name, n); break;
    case DType::kI64: status = copy_contents<int64_t>(c.int64_contents(), t, name, n); break;
    case DType::kU8: status = copy_contents<uint8_t>(c.uint_contents(), t, name, n); break;
    case DType::kU16: status = copy_contents<uint16_t>(c.uint_contents(), t, name, n); break;
    case DType::kU32: status = copy_contents<uint32_t>(c.uint_contents(), t, name, n); break;
    case DType::kU64: status = copy_contents<uint64_t>(c.uint64_contents(), t, name, n); break;
    case DType::kF32: status = copy_contents<float>(c.fp32_contents(), t, name, n); break;
    case DType::kF64: status = copy_contents<double>(c.fp64_contents(), t, name, n); break;
    default:
      return invalid_argument(fmt::format("input '{}': {} travels only in raw_input_contents", name, kserve_datatype(dtype)));
  }
  STRIDER_RETURN_IF_ERROR(status);
  return t;
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

// Each input from its shared-memory range, its raw bytes or its typed contents. As in
// Triton, raw_input_contents holds an entry for each input not in shared memory, in order.
Result<InferRequest> parse_request(const ModelInferRequest& req, const std::vector<ValueInfo>& model_inputs,
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

class Service final : public inference::GRPCInferenceService::Service {
 public:
  explicit Service(ModelRepository& repository) : repository_(repository) {}

  grpc::Status ServerLive(grpc::ServerContext*, const inference::ServerLiveRequest*, inference::ServerLiveResponse* r) override {
    r->set_live(true);
    return grpc::Status::OK;
  }
  grpc::Status ServerReady(grpc::ServerContext*, const inference::ServerReadyRequest*,
                           inference::ServerReadyResponse* r) override {
    r->set_ready(repository_.ready());
    return grpc::Status::OK;
  }
  grpc::Status ModelReady(grpc::ServerContext*, const inference::ModelReadyRequest* q, inference::ModelReadyResponse* r) override {
    ServedModel* m = nullptr;
    if (grpc::Status found = find(q->name(), q->version(), &m); !found.ok()) return found;
    r->set_ready(m->ready());
    return grpc::Status::OK;
  }
  grpc::Status ServerMetadata(grpc::ServerContext*, const inference::ServerMetadataRequest*,
                              inference::ServerMetadataResponse* r) override {
    const std::string text = version_text();
    r->set_name("strider");
    r->set_version(text.substr(0, text.find('\n')));
    for (const char* e : {"binary_tensor_data", "statistics", "model_configuration", "system_shared_memory"})
      r->add_extensions(e);
    return grpc::Status::OK;
  }
  grpc::Status ModelMetadata(grpc::ServerContext*, const inference::ModelMetadataRequest* q,
                             inference::ModelMetadataResponse* r) override;
  grpc::Status ModelInfer(grpc::ServerContext*, const ModelInferRequest* q, ModelInferResponse* r) override;
  grpc::Status SystemSharedMemoryStatus(grpc::ServerContext*, const inference::SystemSharedMemoryStatusRequest* q,
                                        inference::SystemSharedMemoryStatusResponse* r) override;
  grpc::Status SystemSharedMemoryRegister(grpc::ServerContext*, const inference::SystemSharedMemoryRegisterRequest* q,
                                          inference::SystemSharedMemoryRegisterResponse*) override {
    return grpc_status(repository_.shared_memory().register_region(q->name(), q->key(), q->offset(), q->byte_size()));
  }
  grpc::Status SystemSharedMemoryUnregister(grpc::ServerContext*, const inference::SystemSharedMemoryUnregisterRequest* q,
                                            inference::SystemSharedMemoryUnregisterResponse*) override {
    if (q->name().empty()) {
      repository_.shared_memory().unregister_all();
      return grpc::Status::OK;
    }
    return grpc_status(repository_.shared_memory().unregister(q->name()));
  }

 private:
  grpc::Status find(const std::string& name, const std::string& version, ServedModel** model) {
    *model = repository_.find(name);
    if (!*model) return {grpc::StatusCode::NOT_FOUND, fmt::format("unknown model '{}'", name)};
    if (!version.empty() && version != (*model)->version)
      return {grpc::StatusCode::NOT_FOUND, fmt::format("model '{}' has no version '{}' (it serves version {})", name,
                                                        version, (*model)->version)};
    return grpc::Status::OK;
  }
  ModelRepository& repository_;
};

void describe(const ValueInfo& v, inference::ModelMetadataResponse::TensorMetadata* t) {
  t->set_name(v.name);
  t->set_datatype(std::string(kserve_datatype(v.dtype)));
  for (int64_t d : v.shape) t->add_shape(d);
}

grpc::Status Service::SystemSharedMemoryStatus(grpc::ServerContext*, const inference::SystemSharedMemoryStatusRequest* q,
                                               inference::SystemSharedMemoryStatusResponse* r) {
  Result<nlohmann::json> regions =
      repository_.shared_memory().status(q->name().empty() ? std::nullopt : std::optional<std::string>(q->name()));
  if (!regions.is_ok()) return grpc_status(regions.status());
  for (const nlohmann::json& region : *regions) {
    auto& entry = (*r->mutable_regions())[region["name"].get<std::string>()];
    entry.set_name(region["name"].get<std::string>());
    entry.set_key(region["key"].get<std::string>());
    entry.set_offset(region["offset"].get<uint64_t>());
    entry.set_byte_size(region["byte_size"].get<uint64_t>());
  }
  return grpc::Status::OK;
}

grpc::Status Service::ModelMetadata(grpc::ServerContext*, const inference::ModelMetadataRequest* q,
                                    inference::ModelMetadataResponse* r) {
  ServedModel* m = nullptr;
  if (grpc::Status found = find(q->name(), q->version(), &m); !found.ok()) return found;
  if (!m->ready()) return {grpc::StatusCode::UNAVAILABLE, fmt::format("model '{}' is not ready: {}", m->name, m->why_not_ready())};
  r->set_name(m->name);
  r->add_versions(m->version);
  r->set_platform("onnx");
  for (const ValueInfo& v : m->inputs()) describe(v, r->add_inputs());
  for (const ValueInfo& v : m->outputs()) describe(v, r->add_outputs());
  return grpc::Status::OK;
}

grpc::Status Service::ModelInfer(grpc::ServerContext* context, const ModelInferRequest* q, ModelInferResponse* r) {
  ServedModel* m = nullptr;
  if (grpc::Status found = find(q->model_name(), q->model_version(), &m); !found.ok()) return found;
  const int64_t start = steady_now_ns();
  auto fail = [&](grpc::Status status) {
    m->record(false, start);
    return status;
  };
  if (!m->ready()) return fail({grpc::StatusCode::UNAVAILABLE, fmt::format("model '{}' is not ready: {}", m->name, m->why_not_ready())});
  Result<InferRequest> request = parse_request(*q, m->inputs(), repository_.shared_memory());
  if (!request.is_ok()) return fail({grpc::StatusCode::INVALID_ARGUMENT, request.status().message()});
  RequestLimits limits;
  limits.cancelled = [context] { return context->IsCancelled(); };  // the client left or its deadline passed
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

}  // namespace

struct GrpcServer::Impl {
  Impl(ModelRepository& repository) : service(repository) {}
  Service service;
  std::string address;
  size_t max_message_bytes = 0;
  std::unique_ptr<grpc::Server> server;
};

GrpcServer::GrpcServer(ModelRepository& repository, std::string host, int port, size_t max_message_bytes)
    : impl_(std::make_unique<Impl>(repository)) {
  impl_->address = fmt::format("{}:{}", host, port);
  impl_->max_message_bytes = max_message_bytes;
}

GrpcServer::~GrpcServer() {
  if (impl_->server) impl_->server->Shutdown();
}

Result<int> GrpcServer::start() {
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(impl_->address, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&impl_->service);
  builder.SetMaxReceiveMessageSize(int(std::min<size_t>(impl_->max_message_bytes, size_t(INT32_MAX))));
  builder.SetMaxSendMessageSize(INT32_MAX);
  impl_->server = builder.BuildAndStart();
  if (!impl_->server || port == 0) return io_error("cannot listen for gRPC on " + impl_->address);
  return port;
}

void GrpcServer::wait() {
  if (impl_->server) impl_->server->Wait();
}

void GrpcServer::stop() {
  if (impl_->server) impl_->server->Shutdown();
}

}  // namespace strider::serve
