// `strider serve`'s gRPC front end: inference.GRPCInferenceService (proto/grpc_service.proto)
// over the same ModelRepository as HTTP, so both see the same models, instances, batching
// and statistics.
//
// ModelInfer takes each input from a shared-memory range its parameters name
// (shared_memory.h), from raw_input_contents (one entry per input not in shared memory, in
// the order of `inputs`, as Triton reads it) or from its typed contents, checked as HTTP's
// JSON is (kserve_protocol.h), and answers with raw_output_contents (an empty entry for an
// output written to shared memory). Triton's SystemSharedMemory{Register, Unregister,
// Status} calls manage the same registry as HTTP's routes. Errors are gRPC statuses: INVALID_ARGUMENT for a bad
// request, NOT_FOUND for an unknown model or version, UNAVAILABLE when the model is not
// ready or its queue is full, INTERNAL when a run fails.
//
// Threads: gRPC's synchronous server runs each call on a thread of its own pool. stop()
// (from any thread) refuses new calls, lets the calls in flight finish, and makes wait()
// return.
#pragma once

#include <memory>
#include <string>

#include "model_repository.h"

namespace strider::serve {

class GrpcServer {
 public:
  GrpcServer(ModelRepository& repository, std::string host, int port, size_t max_message_bytes);
  ~GrpcServer();
  // Starts listening; returns the port (the one chosen for port 0).
  Result<int> start();
  void wait();
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strider::serve
