#include "hal/cpu/map_kernel.h"

namespace strider::cpu {

MapKernelBase::MapKernelBase(std::string name, TensorView out, std::vector<TensorView> ins,
                             std::vector<int64_t> element_sizes, AnyRow row)
    : name_(std::move(name)),
      out_(std::move(out)),
      ins_(std::move(ins)),
      element_sizes_(std::move(element_sizes)),
      row_(row) {}

template <size_t N>
void MapKernelBase::run_with() const {
  StridedOperands<N> ops;
  ops.base[0] = out_.host_data();
  ops.strides[0] = out_.strides.data();
  for (size_t k = 0; k < N; ++k) ops.element_size[k] = element_sizes_[k];
  for (size_t k = 0; k + 1 < N; ++k) {
    ops.base[k + 1] = ins_[k].host_data();
    ops.strides[k + 1] = ins_[k].strides.data();
  }
  // Elements are independent (an in-place map reads each element before writing it).
  parallel_for_each_strided_row<N>(out_.sizes, ops, 1, reinterpret_cast<StridedRow<N>>(row_), this);
}

Status MapKernelBase::run(const QueueContext&) {
  switch (ins_.size() + 1) {
    case 2: run_with<2>(); break;
    case 3: run_with<3>(); break;
    case 4: run_with<4>(); break;
    case 5: run_with<5>(); break;
    case 6: run_with<6>(); break;
    default: return internal_error(name_ + ": a map of " + std::to_string(ins_.size()) + " inputs");
  }
  return Status::ok();
}

std::string MapKernelBase::implementation() const { return "strider:" + name_; }

Result<std::vector<TensorView>> broadcast_map_inputs(std::span<const TensorView> ins, const TensorView& out) {
  std::vector<TensorView> broadcast(ins.size());
  for (size_t k = 0; k < ins.size(); ++k) {
    STRIDER_ASSIGN_OR_RETURN(broadcast[k], broadcast_view(ins[k], out.sizes));
  }
  return broadcast;
}

}  // namespace strider::cpu
