// libFuzzer target: any bytes as a ModelInferRequest to `strider serve`'s gRPC front end
// (model_infer() in tools/serve/grpc_request.h, what GRPCInferenceService/ModelInfer runs
// for a call) over the repository of served_cnn.h. The first byte picks the model ("cnn",
// "cnnb" or one the repository lacks) and whether the message's own model name stands; the
// rest is the serialized message (bytes protobuf refuses end the run).
//
// The rule: a bad request gets INVALID_ARGUMENT, NOT_FOUND or UNAVAILABLE with a message,
// a good one OK with an output for each output it asked (every output when it asked none);
// nothing a client sends is INTERNAL or UNKNOWN, a crash, a hang or unbounded memory.
// Shared-memory parameters reach an empty registry (regions are opened by the register
// call, left out here), so they exercise the parsing and the refusal only.
#include <cstdio>
#include <cstdlib>

#include "grpc_request.h"
#include "served_cnn.h"

namespace {

[[noreturn]] void broken(const grpc::Status& status, const char* why) {
  std::fprintf(stderr, "fuzz_grpc_request: %s: code %d, message %.400s\n", why, int(status.error_code()),
               status.error_message().c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  inference::ModelInferRequest request;
  if (!request.ParseFromArray(data + 1, int(size - 1))) return 0;
  static const char* const kModels[] = {"cnn", "cnnb", "cnn", "nope"};
  if (!(data[0] & 0x80)) request.set_model_name(kModels[data[0] & 3]);
  inference::ModelInferResponse response;
  const grpc::Status status = strider::serve::model_infer(strider::fuzz::served_cnn(), request, &response, {});
  switch (status.error_code()) {
    case grpc::StatusCode::OK: {
      const int asked = request.outputs_size() ? request.outputs_size() : 1;  // the model has one output
      if (response.outputs_size() != asked || response.raw_output_contents_size() != asked)
        broken(status, "an answer without the outputs asked");
      return 0;
    }
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::NOT_FOUND:
    case grpc::StatusCode::UNAVAILABLE:
      if (status.error_message().empty()) broken(status, "an error without a message");
      return 0;
    default: broken(status, "a server error for a client's request");
  }
}
