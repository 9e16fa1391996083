// CUDA, cuBLAS(Lt) and cuDNN calls as Statuses: every fallible call in the CUDA backend
// goes through one of these, so an error names the call, the code and what it was for.
#pragma once

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <string>

#include "strider/status.h"

namespace strider::cuda {

inline Status cuda_status(cudaError_t error, const char* call, std::string_view what = {}) {
  if (error == cudaSuccess) return Status::ok();
  // Out of memory is a resource the caller can give more of, not a broken device.
  Status (*make)(std::string) = error == cudaErrorMemoryAllocation ? resource_exhausted : device_error;
  return make(fmt::format("{}{}{} failed: {} ({})", what, what.empty() ? "" : ": ", call,
                                  cudaGetErrorString(error), cudaGetErrorName(error)));
}

}  // namespace strider::cuda

// STRIDER_CUDA_RETURN(cudaMalloc(...), "what"): returns a DEVICE_ERROR Status on failure
// (RESOURCE_EXHAUSTED when the GPU is out of memory).
#define STRIDER_CUDA_RETURN(call, ...) \
  STRIDER_RETURN_IF_ERROR(::strider::cuda::cuda_status((call), #call __VA_OPT__(, ) __VA_ARGS__))
