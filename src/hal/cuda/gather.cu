// The Gather kernel (gather.h): one thread per output word, the index read per word. A word
// is one element, or up to 16 bytes of elements where the output's innermost dim is
// contiguous in out and data and not indexed (an embedding row): the kernel then moves whole
// rows' 16-byte pieces, which is what makes a token embedding run at memory speed.
#include "hal/cuda/dependent_launch.cuh"
#include "hal/cuda/gather.h"

namespace strider::cuda {
namespace {

template <typename Word, typename Index>
__global__ void gather_kernel(StridedIndexer<3> ix, Word* out, const Word* data, const Index* indices, int64_t dim,
                              int64_t axis_stride, GatherReport* report) {
  device::order_after_producers();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < ix.count; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t offset[3];
    ix.offsets(i, offset);
    int64_t k = int64_t(indices[offset[2]]);
    if (k < -dim || k >= dim) {
      // Racing writers store whole values: the report holds one of the bad indices.
      report->bad_index = k;
      report->dim = dim;
      report->flagged = 1;
      continue;
    }
    if (k < 0) k += dim;
    out[offset[0]] = data[offset[1] + k * axis_stride];
  }
}

template <typename Word, typename Index>
void launch_typed(const GatherLaunch& l, cudaStream_t stream) {
  launch_dependent(gather_kernel<Word, Index>, grid_for(l.ix.count), 256, 0, stream,
                   l.ix, static_cast<Word*>(l.out), static_cast<const Word*>(l.data),
                   static_cast<const Index*>(l.indices), l.dim, l.axis_stride, l.report);
}

template <typename Word>
void launch_words(const GatherLaunch& l, cudaStream_t stream) {
  static_assert(alignof(Word) == sizeof(Word));
  if (l.indices_i64) launch_typed<Word, int64_t>(l, stream);
  else launch_typed<Word, int32_t>(l, stream);
}

// Makes the launch move `word` bytes at a time where it can (see the file comment): the
// innermost collapsed dim is contiguous in out and data, not an index dim, and a multiple of
// the word; every other element stride of out and data, the axis stride and both addresses
// are too. The launch is unchanged where any of these fails.
bool widen_to_word(int word, GatherLaunch* l) {
  StridedIndexer<3>& ix = l->ix;
  int last = ix.rank - 1;
  if (last < 0 || word <= l->element_size || word % l->element_size != 0) return false;
  if (ix.strides[0][last] != 1 || ix.strides[1][last] != 1 || ix.strides[2][last] != 0) return false;
  int64_t k = word / l->element_size;
  auto multiple = [k](int64_t v) { return v % k == 0; };
  if (!multiple(ix.sizes[last]) || !multiple(l->axis_stride)) return false;
  for (int d = 0; d < last; ++d)
    if (!multiple(ix.strides[0][d]) || !multiple(ix.strides[1][d])) return false;
  if (reinterpret_cast<uintptr_t>(l->out) % word || reinterpret_cast<uintptr_t>(l->data) % word) return false;
  ix.sizes[last] /= k;
  ix.count /= k;
  for (int d = 0; d < last; ++d) {
    ix.strides[0][d] /= k;
    ix.strides[1][d] /= k;
  }
  l->axis_stride /= k;
  l->element_size = word;
  return true;
}

// The launch over the output's elements with per-output-dim strides of out, data (0 where
// the index supplies the axis offset) and indices.
Status finish_gather(const TensorView& data, const TensorView& indices, const TensorView& out, int64_t axis,
                     const std::vector<Strides>& strides, GatherReport* report, GatherLaunch* launch) {
  GatherLaunch l;
  STRIDER_RETURN_IF_ERROR(make_indexer<3>(out.sizes, strides, &l.ix));
  l.dim = data.sizes[size_t(axis)];
  l.axis_stride = data.strides[size_t(axis)];
  l.element_size = int(dtype_size(data.dtype));
  l.indices_i64 = indices.dtype == DType::kI64;
  l.out = device_data<void>(out);
  l.data = device_data<const void>(data);
  l.indices = device_data<const void>(indices);
  l.report = report;
  for (int word : {16, 8, 4})
    if (widen_to_word(word, &l)) break;
  *launch = l;
  return Status::ok();
}

}  // namespace

Status prepare_gather(const TensorView& data, const TensorView& indices, const TensorView& out, int64_t axis,
                      GatherReport* report, GatherLaunch* launch) {
  if (indices.dtype != DType::kI64 && indices.dtype != DType::kI32)
    return unsupported("Gather indices must be int64 or int32");
  int64_t index_rank = indices.rank();
  if (out.rank() != data.rank() - 1 + index_rank) return internal_error("Gather: output rank does not match");
  // Per output dim: the data's stride (0 across the index dims; the index adds the axis
  // offset) and the indices' stride (0 outside the index dims).
  Strides data_strides, index_strides;
  for (int64_t d = 0; d < out.rank(); ++d) {
    bool index_dim = d >= axis && d < axis + index_rank;
    int64_t data_dim = d < axis ? d : d - index_rank + 1;
    data_strides.push_back(index_dim ? 0 : data.strides[size_t(data_dim)]);
    index_strides.push_back(index_dim ? indices.strides[size_t(d - axis)] : 0);
  }
  return finish_gather(data, indices, out, axis, {out.strides, data_strides, index_strides}, report, launch);
}

Status prepare_gather_elements(const TensorView& data, const TensorView& indices, const TensorView& out, int64_t axis,
                               GatherReport* report, GatherLaunch* launch) {
  if (indices.dtype != DType::kI64 && indices.dtype != DType::kI32)
    return unsupported("GatherElements indices must be int64 or int32");
  if (out.rank() != data.rank() || indices.rank() != data.rank()) return internal_error("GatherElements: ranks differ");
  Strides data_strides = data.strides;
  data_strides[size_t(axis)] = 0;
  return finish_gather(data, indices, out, axis, {out.strides, data_strides, indices.strides}, report, launch);
}

MappedReport::~MappedReport() {
  if (host_) cudaFreeHost(host_);
}

Status MappedReport::init() {
  if (cudaHostAlloc(reinterpret_cast<void**>(&host_), sizeof(GatherReport), cudaHostAllocMapped) != cudaSuccess) {
    host_ = nullptr;
    return resource_exhausted("cannot allocate the pinned index report");
  }
  *host_ = GatherReport{};
  if (cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_), host_, 0) != cudaSuccess)
    return internal_error("no device address for the pinned index report");
  return Status::ok();
}

bool MappedReport::take(GatherReport* what) {
  if (!host_->flagged) return false;
  *what = *host_;
  *host_ = GatherReport{};
  return true;
}

Status launch_gather(const GatherLaunch& l, cudaStream_t stream) {
  if (l.ix.count == 0) return Status::ok();
  if (l.element_size == 16) launch_words<uint4>(l, stream);
  else dispatch_words(l.element_size, [&]<typename Word>() { launch_words<Word>(l, stream); });
  return launch_status("Gather");
}

}  // namespace strider::cuda
