// version_text (strider/tools.h): strider's version and commit, and the libraries it was built with.
#include <fmt/format.h>
#include <google/protobuf/stubs/common.h>
#include <oneapi/dnnl/dnnl.hpp>

#include "strider/tools.h"

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

}  // namespace strider
