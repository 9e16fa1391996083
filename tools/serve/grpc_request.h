// ModelInfer's work apart from gRPC's transport (grpc_server.cc is the transport): the
// protocol's ModelInferRequest checked and turned into a served model's run, and its
// outputs into the ModelInferResponse, so that a test or a fuzzer drives exactly what a
// client's call reaches, without a server or a socket.
//
// Inputs come from a shared-memory range their parameters name (shared_memory.h), from
// raw_input_contents (one entry per input not in shared memory, in the order of `inputs`,
// as Triton reads it) or from their typed contents, checked as HTTP's JSON is
// (kserve_protocol.h). Errors: INVALID_ARGUMENT for anything wrong with the request,
// NOT_FOUND for an unknown model or version, UNAVAILABLE when the model is not ready or its
// queue is full, INTERNAL only when a run fails for a reason of the server's own.
#pragma once

#include <grpc_service.grpc.pb.h>  // generated from proto/grpc_service.proto
#include <grpcpp/grpcpp.h>

#include <functional>
#include <string>
#include <vector>

#include "kserve_protocol.h"
#include "model_repository.h"

namespace strider::serve {

// A strider status as the gRPC status a client gets.
grpc::Status grpc_status(const Status& status);

// The request's inputs, outputs and parameters, checked against the model's inputs.
Result<InferRequest> parse_grpc_infer_request(const inference::ModelInferRequest& request,
                                              const std::vector<ValueInfo>& model_inputs,
                                              const SharedMemoryRegistry& regions);

// `name` (and `version`, when not empty) in the repository, or NOT_FOUND.
grpc::Status find_model(ModelRepository& repository, const std::string& name, const std::string& version,
                        ServedModel** model);

// One ModelInfer call: runs the request on its model (`cancelled`, when set, is polled while
// it waits: the client left or its deadline passed) and fills `response`.
grpc::Status model_infer(ModelRepository& repository, const inference::ModelInferRequest& request,
                         inference::ModelInferResponse* response, std::function<bool()> cancelled);

}  // namespace strider::serve
