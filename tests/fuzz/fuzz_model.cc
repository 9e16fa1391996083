// libFuzzer target: any bytes as an ONNX model (import, inference, planning, a run).
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  strider::fuzz::exercise_model(std::as_bytes(std::span(data, size)));
  return 0;
}
