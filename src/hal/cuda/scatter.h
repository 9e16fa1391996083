// ScatterND, ScatterElements and GatherND on the GPU, indices read at run time (a bad one is
// flagged in a MappedReport, gather.h, and fails the run after the queues are idle).
//
// The scatters keep ops/scatter.h's order without atomics: a thread owns the output
// elements that updates can collide on and applies those updates in the order they are
// listed. ScatterND: one thread per element of a slice, looping over the index tuples;
// ScatterElements: one thread per line along the axis, looping along it. The output is a
// copy of data first (launch_copy, skipped when the planner placed it there).
// Compiled by nvcc and the host compiler: no fmt.
#pragma once

#include <cuda_runtime.h>

#include "hal/cuda/gather.h"
#include "ops/scatter_math.h"

namespace strider::cuda {

struct ScatterLaunch {
  bool elements = false;  // ScatterElements, else ScatterND
  ScatterReduction reduction = ScatterReduction::kNone;
  DType dtype = DType::kF32;
  bool indices_i64 = true;
  // ND: threads over the slice (operands out, updates), loop over tuples (indices, updates).
  // Elements: threads over the lines (out, indices, updates), loop over `steps` along the axis.
  StridedIndexer<3> threads;
  StridedIndexer<2> tuples;
  int k = 0;                                   // ND: index tuple length
  int64_t dims[kMaxDims] = {};                 // ND: sizes of the k addressed dims; Elements: [0] the axis size
  int64_t out_strides[kMaxDims] = {};          // ND: out's strides of those dims; Elements: [0] along the axis
  int64_t index_step = 0;                      // ND: indices' stride along its last dim; Elements: along the axis
  int64_t update_step = 0;                     // Elements: updates' stride along the axis
  int64_t steps = 0;                           // Elements: updates' size along the axis
  void* out = nullptr;
  const void* indices = nullptr;
  const void* updates = nullptr;
  GatherReport* report = nullptr;
};
// UNSUPPORTED for bool with a reduction.
Status prepare_scatter(const TensorView& indices, const TensorView& updates, const TensorView& out, bool elements,
                       const ScatterParams& p, GatherReport* report, ScatterLaunch* launch);
Status run_scatter(const ScatterLaunch& launch, cudaStream_t stream);

struct GatherNDLaunch {
  StridedIndexer<3> ix;  // over the output: out, indices (0 on slice dims), data (batch and slice dims)
  int k = 0;
  int64_t dims[kMaxDims] = {};          // data's sizes of the k addressed dims
  int64_t data_strides[kMaxDims] = {};  // and its strides there
  int64_t index_step = 0;
  int element_size = 4;
  bool indices_i64 = true;
  void* out = nullptr;
  const void* data = nullptr;
  const void* indices = nullptr;
  GatherReport* report = nullptr;
};
Status prepare_gather_nd(const TensorView& data, const TensorView& indices, const TensorView& out,
                         const GatherNDParams& p, GatherReport* report, GatherNDLaunch* launch);
Status run_gather_nd(const GatherNDLaunch& launch, cudaStream_t stream);

}  // namespace strider::cuda
