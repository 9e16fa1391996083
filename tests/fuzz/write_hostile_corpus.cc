// Writes every model of the hostile-model table (tests/hostile) into a folder, one file
// per case, to seed the model fuzzers with the shapes of attack already known.
#include <cstdio>
#include <filesystem>

#include "hostile/hostile_cases.h"

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  if (argc != 2) {
    std::fprintf(stderr, "usage: hostile_corpus FOLDER\n");
    return 2;
  }
  fs::create_directories(argv[1]);
  int written = 0;
  for (const auto& c : strider::testing::hostile_cases()) {
    strider::testing::TempDir dir;
    c.setup(dir);
    for (const char* model : {"model.onnx", "m/model.onnx"}) {
      std::error_code ec;
      if (!fs::is_regular_file(dir.path() / model, ec)) continue;
      fs::copy_file(dir.path() / model, fs::path(argv[1]) / (c.name + ".onnx"), fs::copy_options::overwrite_existing);
      ++written;
    }
  }
  std::printf("wrote %d hostile models to %s\n", written, argv[1]);
  return 0;
}
