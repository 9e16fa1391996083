// libFuzzer target: any bytes as a .npy file and as a TensorProto .pb file, the two
// formats `strider run --input` and `--inputs-dir` read.
#include "fuzz_support.h"
#include "onnx/npy.h"
#include "onnx/tensor_proto.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto bytes = std::as_bytes(std::span(data, size));
  strider::fuzz::require_clean(strider::parse_npy(bytes, "fuzz.npy").status());
  strider::fuzz::require_clean(strider::parse_tensor_pb(bytes, "", "fuzz.pb").status());
  return 0;
}
