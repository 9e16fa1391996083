// Pad and Tile on the GPU: the node's index maps (ops/index_map.h, shared with the CPU) as
// per-axis tables of element offsets, uploaded once when the kernel is made.
#include <fmt/format.h>

#include "hal/cuda/cuda_kernels.h"
#include "hal/cuda/device_buffer.h"
#include "hal/cuda/launch.h"
#include "ops/index_map.h"

namespace strider::cuda {
namespace {

static_assert(kIndexMapNoSource == kNoSource);

class IndexMapKernel final : public Kernel {
 public:
  IndexMapKernel(std::string name, DeviceBuffer tables, IndexMapLaunch launch)
      : name_(std::move(name)), tables_(std::move(tables)), launch_(launch) {}
  Status run(const QueueContext& context) override { return run_index_map(launch_, stream_of(context)); }
  std::string implementation() const override { return "strider-cuda:" + name_; }

 private:
  std::string name_;
  DeviceBuffer tables_;
  IndexMapLaunch launch_;
};

Result<std::unique_ptr<Kernel>> make_index_map(const KernelRequest& r, const CudaContext&) {
  STRIDER_ASSIGN_OR_RETURN(IndexMapParams p, resolve_index_map(NodeInputs(r.graph, r.node)));
  std::vector<int64_t> flat;
  for (const std::vector<int64_t>& table : index_map_tables(p, r.inputs[0].strides))
    flat.insert(flat.end(), table.begin(), table.end());
  DeviceBuffer tables;
  STRIDER_RETURN_IF_ERROR(tables.upload(std::as_bytes(std::span<const int64_t>(flat))));
  IndexMapLaunch launch;
  STRIDER_RETURN_IF_ERROR(prepare_index_map(r.inputs[0], r.outputs[0], tables.as<const int64_t>(),
                                            int(dtype_size(r.outputs[0].dtype)), &launch));
  launch.value_bits = pad_value_bits(p.value, r.outputs[0].dtype);
  if (p.value_input >= 0) launch.value = device_data<const std::byte>(r.inputs[size_t(p.value_input)]);
  return std::unique_ptr<Kernel>(new IndexMapKernel(r.node.op_type, std::move(tables), launch));
}

}  // namespace

void register_index_map_kernels(std::vector<KernelEntry>& table) {
  table.push_back({"Pad", make_index_map});
  table.push_back({"Tile", make_index_map});
}

}  // namespace strider::cuda
