// Being written: until then the CUDA device has no reduce kernels.
#include "hal/cuda/cuda_kernels.h"

namespace strider::cuda {

void register_reduce_kernels(std::vector<KernelEntry>& table) { (void)table; }

}  // namespace strider::cuda
