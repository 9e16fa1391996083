#include "served_cnn.h"

#include <cstdio>
#include <cstdlib>

namespace strider::fuzz {

serve::ModelRepository& served_cnn() {
  static const char kModel[] = STRIDER_SOURCE_DIR "/models/dynamic/SmallCnn_dynamic_batch/model.onnx";
  // Never destroyed: the batcher's threads may still run at exit.
  static serve::ModelRepository* repository = [] {
    auto* r = new serve::ModelRepository;
    serve::ModelDefaults defaults;
    defaults.threads = 1;
    defaults.max_queue = 4;
    bool ok = r->load_model("cnn", kModel, defaults).is_ok();
    defaults.max_batch = 4;
    defaults.measure_batch = false;
    ok = ok && r->load_model("cnnb", kModel, defaults).is_ok();
    if (!ok || !r->find("cnn")->ready() || !r->find("cnnb")->ready()) {
      std::fprintf(stderr, "served_cnn: the repository did not load %s\n", kModel);
      std::abort();
    }
    return r;
  }();
  return *repository;
}

}  // namespace strider::fuzz
