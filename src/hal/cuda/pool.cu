// Being written: until then the CUDA device has no pool kernels.
#include "hal/cuda/cuda_kernels.h"

namespace strider::cuda {

void register_pool_kernels(std::vector<KernelEntry>& table) { (void)table; }

}  // namespace strider::cuda
