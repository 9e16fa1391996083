// Being written: until then the CUDA device has no conv kernels.
#include "hal/cuda/cuda_kernels.h"

namespace strider::cuda {

void register_conv_kernels(std::vector<KernelEntry>& table) { (void)table; }

}  // namespace strider::cuda
