// The one compiled copy of the type-erased strided loop per operand count (strided_loop.h).
#include "hal/cpu/strided_loop.h"

namespace strider::cpu {

template void parallel_for_each_strided_row<2>(std::span<const int64_t>, const StridedOperands<2>&, int64_t,
                                               StridedRow<2>, const void*);
template void parallel_for_each_strided_row<3>(std::span<const int64_t>, const StridedOperands<3>&, int64_t,
                                               StridedRow<3>, const void*);
template void parallel_for_each_strided_row<4>(std::span<const int64_t>, const StridedOperands<4>&, int64_t,
                                               StridedRow<4>, const void*);
template void parallel_for_each_strided_row<5>(std::span<const int64_t>, const StridedOperands<5>&, int64_t,
                                               StridedRow<5>, const void*);
template void parallel_for_each_strided_row<6>(std::span<const int64_t>, const StridedOperands<6>&, int64_t,
                                               StridedRow<6>, const void*);

}  // namespace strider::cpu
