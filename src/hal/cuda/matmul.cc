// Being written: until then the CUDA device has no matmul kernels.
#include "hal/cuda/cuda_kernels.h"

namespace strider::cuda {

void register_matmul_kernels(std::vector<KernelEntry>& table) { (void)table; }

}  // namespace strider::cuda
