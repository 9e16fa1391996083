// version_text and cpu_dtype_notice (strider/tools.h): strider's version and commit, the
// libraries it was built with, and what this CPU's instructions mean for a dtype.
#include <fmt/format.h>
#include <google/protobuf/stubs/common.h>
#include <oneapi/dnnl/dnnl.hpp>

#include "strider/tools.h"
#include "hal/cpu/widened_kernels.h"

namespace strider {

std::string version_text() {
  const dnnl_version_t* dnnl = dnnl_version();
  int protobuf = GOOGLE_PROTOBUF_VERSION;
  return fmt::format(
      "strider {} (commit {})\n"
      "  oneDNN {}.{}.{} (cpu runtime: {})\n"
      "  protobuf {}.{}.{}\n"
      "  ONNX protobuf schema {}\n"
      "  fmt {}.{}.{}\n",
      STRIDER_VERSION, STRIDER_GIT_COMMIT, dnnl->major, dnnl->minor, dnnl->patch,
      dnnl->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other", protobuf / 1000000, protobuf / 1000 % 1000,
      protobuf % 1000, STRIDER_ONNX_VERSION, FMT_VERSION / 10000, FMT_VERSION / 100 % 100, FMT_VERSION % 100);
}

std::string cpu_dtype_notice(DType dtype) {
  return dtype == DType::kBF16 ? cpu::bf16_arithmetic_notice() : std::string();
}

}  // namespace strider
