// Resize and Upsample on the CPU (being written; until then the CPU has no Resize kernel
// and sessions report the op as unsupported).
#include "hal/cpu/cpu_kernels.h"

namespace strider::cpu {

void register_resize_kernels(std::vector<KernelEntry>& table) { (void)table; }

}  // namespace strider::cpu
