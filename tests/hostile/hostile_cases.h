// The hostile-model table: models and command lines a stranger could hand strider, each
// with the exit code and the words of the one error line it must get. The cases are the
// ones found by hand and by fuzzing (issue 10) plus the classes that always held (external
// data escapes, cycles, malformed tensor files), so none of them can come back.
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "support/test_util.h"

namespace strider::testing {

struct HostileCase {
  std::string name;
  // Writes the model (model.onnx) and any other files into the case's folder.
  std::function<void(const TempDir&)> setup;
  // The command line after `strider`; {dir} is the case's folder. Every case also gets
  // --output-dir {dir}/out when it runs a model, and nothing may appear there on failure.
  std::string args;
  int exit_code = 0;
  // Must appear in the one stderr line (empty: the case succeeds, nothing is printed there).
  std::string message;
  // The failure lies in what the CLI does around the library (writing files).
  bool cli_only = false;
};

std::vector<HostileCase> hostile_cases();
// gtest prints a case by its name.
inline void PrintTo(const HostileCase& c, std::ostream* os) { *os << c.name; }

}  // namespace strider::testing
