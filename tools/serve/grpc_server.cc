#include "grpc_server.h"

#include <fmt/format.h>
#include <grpc_service.grpc.pb.h>  // generated from proto/grpc_service.proto
#include <grpcpp/grpcpp.h>

#include <optional>

#include "grpc_request.h"
#include "kserve_protocol.h"
#include "strider/tools.h"

namespace strider::serve {
namespace {

using inference::ModelInferRequest;
using inference::ModelInferResponse;

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
  grpc::Status ModelInfer(grpc::ServerContext* context, const ModelInferRequest* q, ModelInferResponse* r) override {
    // The client left or its deadline passed.
    return model_infer(repository_, *q, r, [context] { return context->IsCancelled(); });
  }
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
    return find_model(repository_, name, version, model);
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
