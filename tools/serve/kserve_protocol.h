// The Open Inference Protocol (KServe v2, also Triton's HTTP/REST API): its datatypes, and
// inference requests and responses as JSON, with the binary tensor data extension.
//
// A request body is JSON, or (binary extension) a JSON header of `Inference-Header-Content-
// Length` bytes followed by the raw bytes of the inputs whose `parameters.binary_data_size`
// says so, in the order the header lists them. Tensor data in JSON is a flat or nested array
// in row-major order. Everything is checked against the model before anything runs: an
// unknown or missing input, a datatype that is not the model's, a shape whose element count
// does not match the data, a binary size that does not match, trailing bytes, all come back
// as INVALID_ARGUMENT naming the input (the server answers 400 with it).
//
// Written on strider's public headers alone, like the CLI.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "strider/session.h"
#include "strider/status.h"
#include "strider/tensor.h"
#include "shared_memory.h"

namespace strider::serve {

// "FP32", "BF16", "INT64", "BOOL", ... for the dtypes the protocol names; empty for others.
std::string_view kserve_datatype(DType dtype);
// The dtype of a protocol datatype, nullopt for BYTES and unknown names.
std::optional<DType> dtype_from_kserve(std::string_view datatype);
// Triton's model configuration spelling: "TYPE_FP32".
std::string triton_config_datatype(DType dtype);

struct RequestedOutput {
  std::string name;
  bool binary = false;  // parameters.binary_data: raw bytes after the JSON header
  std::optional<SharedMemorySlice> shared_memory;  // parameters.shared_memory_region: written there
};

struct InferRequest {
  std::string id;
  std::map<std::string, Tensor> inputs;
  std::vector<RequestedOutput> outputs;  // empty: every output of the model
  bool binary_outputs = false;           // parameters.binary_data_output: the default for outputs
  std::optional<int64_t> timeout_us;     // parameters.timeout (Triton's): fail rather than wait longer
};

// `header_length`: the Inference-Header-Content-Length header's value when the request has one.
// `regions`: the server's shared-memory regions (shared_memory.h), for inputs and outputs
// that name one; null: such a request is INVALID_ARGUMENT.
Result<InferRequest> parse_infer_request(std::string_view body, std::optional<size_t> header_length,
                                         const std::vector<ValueInfo>& model_inputs,
                                         const SharedMemoryRegistry* regions = nullptr);

struct InferResponse {
  std::string body;
  std::optional<size_t> header_length;  // set when binary outputs follow the JSON
};

// The outputs a request asked for, as positions in `model_outputs` (every output when it
// names none); INVALID_ARGUMENT for a name the model lacks.
Result<std::vector<size_t>> selected_outputs(const InferRequest& request, const std::vector<ValueInfo>& model_outputs);

// Triton's shared-memory parameters as every front end (JSON, gRPC) resolves them
// (shared_memory.h): the range [offset, offset + byte_size) of `region`, INVALID_ARGUMENT
// naming `what` when `regions` is null, the region is not registered or the range is not
// inside it; an input's tensor read from its range (INVALID_ARGUMENT when the range's size
// is not the tensor's); and the check, made before any output is written, that each
// output asked for in shared memory fits its range.
Result<SharedMemorySlice> shared_memory_range(const SharedMemoryRegistry* regions, const std::string& region, uint64_t offset,
                                              uint64_t byte_size, const std::string& what);
Result<Tensor> tensor_from_shared_memory(const SharedMemorySlice& slice, DType dtype, const Shape& shape,
                                         const std::string& input);
Status check_shared_memory_outputs(const InferRequest& request, const std::vector<size_t>& chosen,
                                   const std::vector<Tensor>& outputs);

// The response to `request` with the run's outputs (in `model_outputs` order). An output
// the request named that the model lacks, or one larger than the shared-memory range it
// asked to be written to, is INVALID_ARGUMENT (nothing is written to any range then).
Result<InferResponse> make_infer_response(const std::string& model_name, const std::string& version,
                                          const InferRequest& request, const std::vector<ValueInfo>& model_outputs,
                                          const std::vector<Tensor>& outputs);

// The checks every front end (JSON, gRPC) makes of an input before reading its data:
// the sizes (none negative, the element count bounded), the name (a model input, not given
// before in `so_far`) and the datatype (the model's). Then that none is missing.
Result<Shape> checked_shape(std::span<const int64_t> sizes, const std::string& input, int64_t* elements);
Result<const ValueInfo*> match_input(const std::string& name, const std::string& datatype,
                                     const std::vector<ValueInfo>& model_inputs, const InferRequest& so_far);
Status check_every_input_given(const InferRequest& request, const std::vector<ValueInfo>& model_inputs);

// Model metadata ({name, versions, platform, inputs, outputs}); -1 for a dim the model leaves open.
nlohmann::json tensor_metadata(const ValueInfo& value);

}  // namespace strider::serve
