// Pad and Tile on the CPU (ops/index_map.h): each output element copies the input element
// its per-axis table entries add up to, or the pad value. Element bytes are moved as they
// are, so every dtype takes the same loop.
#include <cstring>

#include "hal/cpu/cpu_kernels.h"
#include "hal/cpu/dtype_dispatch.h"
#include "ops/index_map.h"

namespace strider::cpu {
namespace {

class IndexMapKernel final : public Kernel {
 public:
  IndexMapKernel(std::string op, TensorView in, TensorView out, std::vector<std::vector<int64_t>> tables,
                 uint64_t value_bits, TensorView value_view)
      : op_(std::move(op)), in_(std::move(in)), out_(std::move(out)), tables_(std::move(tables)),
        value_bits_(value_bits), value_view_(std::move(value_view)) {}

  Status run(const QueueContext&) override {
    const int64_t esize = dtype_size(out_.dtype);
    uint64_t value = value_bits_;
    if (value_view_.allocation) std::memcpy(&value, value_view_.host_data(), size_t(esize));
    const size_t rank = out_.sizes.size();
    std::vector<int64_t> index(rank, 0);
    const int64_t count = out_.num_elements();
    for (int64_t e = 0; e < count; ++e) {
      int64_t source = 0, target = 0;
      bool pad = false;
      for (size_t d = 0; d < rank; ++d) {
        const int64_t entry = tables_[d][size_t(index[d])];
        pad |= entry == kNoSource;
        source += pad ? 0 : entry;
        target += index[d] * out_.strides[d];
      }
      std::byte* dst = out_.host_data() + target * esize;
      if (pad) std::memcpy(dst, &value, size_t(esize));
      else std::memcpy(dst, in_.host_data() + source * esize, size_t(esize));
      for (size_t d = rank; d-- > 0;) {
        if (++index[d] < out_.sizes[d]) break;
        index[d] = 0;
      }
    }
    return Status::ok();
  }
  std::string implementation() const override { return "strider:" + op_; }

 private:
  std::string op_;
  TensorView in_, out_;
  std::vector<std::vector<int64_t>> tables_;
  uint64_t value_bits_;
  TensorView value_view_;
};

Result<std::unique_ptr<Kernel>> make_index_map(const KernelRequest& r) {
  STRIDER_ASSIGN_OR_RETURN(IndexMapParams p, resolve_index_map(NodeInputs(r.graph, r.node)));
  TensorView value_view = p.value_input >= 0 ? r.inputs[size_t(p.value_input)] : TensorView{};
  return std::unique_ptr<Kernel>(new IndexMapKernel(r.node.op_type, r.inputs[0], r.outputs[0],
                                                    index_map_tables(p, r.inputs[0].strides),
                                                    pad_value_bits(p.value, r.outputs[0].dtype), value_view));
}

}  // namespace

void register_index_map_kernels(std::vector<KernelEntry>& table) {
  table.push_back({"Pad", make_index_map});
  table.push_back({"Tile", make_index_map});
}

}  // namespace strider::cpu
