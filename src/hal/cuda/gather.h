// Gather on the GPU with indices read at run time: out[pre..., j..., post...] =
// data[pre..., indices[j...], post...], one launch over the output's elements.
//
// An index outside [-dim, dim) cannot stop a kernel; the launch records the first one it
// meets in a report in pinned, host-mapped memory, which GatherKernel reads in
// check_completed() after the run's queues are idle (so the run fails with OUT_OF_RANGE and
// its outputs are never handed out). Compiled by nvcc and the host compiler: no fmt.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "hal/cuda/indexer.h"
#include "memory/tensor_view.h"
#include "strider/status.h"

namespace strider::cuda {

// Written by the device, read by the host after the stream is synchronized.
struct GatherReport {
  int64_t bad_index = 0;
  int64_t dim = 0;  // the size of the dim it was read for
  int32_t flagged = 0;
};

// A GatherReport in pinned, host-mapped memory: kernels write it through device(), the
// host reads it after the run's queues are idle, without a copy. Shared by every kernel
// that reads indices at run time (Gather, GatherElements, GatherND, the scatters).
class MappedReport {
 public:
  MappedReport() = default;
  MappedReport(const MappedReport&) = delete;
  MappedReport& operator=(const MappedReport&) = delete;
  ~MappedReport();
  Status init();
  GatherReport* device() const { return device_; }
  // Whether a bad index was flagged; if so, what it was (and the report is cleared, so the
  // next run starts clean).
  bool take(GatherReport* what);

 private:
  GatherReport* host_ = nullptr;
  GatherReport* device_ = nullptr;
};

struct GatherLaunch {
  StridedIndexer<3> ix;  // over the output: strides of out, data (axis dim 0), indices
  int64_t dim = 0;           // data's size along the axis
  int64_t axis_stride = 0;   // data's stride along the axis, in elements
  int element_size = 4;
  bool indices_i64 = true;
  void* out = nullptr;
  const void* data = nullptr;
  const void* indices = nullptr;
  GatherReport* report = nullptr;  // device address of the mapped report
};

// Builds the launch for views `data`, `indices` (i32 or i64) and `out` along `axis`.
Status prepare_gather(const TensorView& data, const TensorView& indices, const TensorView& out, int64_t axis,
                      GatherReport* report, GatherLaunch* launch);
// GatherElements: out[p] = data[p with its axis coordinate indices[p]] (the same kernel:
// the data's stride along the axis is 0 and the index adds the axis offset).
Status prepare_gather_elements(const TensorView& data, const TensorView& indices, const TensorView& out, int64_t axis,
                               GatherReport* report, GatherLaunch* launch);
Status launch_gather(const GatherLaunch& launch, cudaStream_t stream);

}  // namespace strider::cuda
