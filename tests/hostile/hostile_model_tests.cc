// Every hostile case, run as a user would: `strider run` on the model (under a time limit,
// so a hang fails), asserting the exit code, one clean error line that names what is
// wrong, and that nothing was written to the output folder. The same models also go
// through the library (Session::load + run) in this process, so no exception, crash or
// heap read can hide behind the CLI.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "hostile/hostile_cases.h"
#include "strider/session.h"

namespace strider::testing {
namespace {
namespace fs = std::filesystem;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string substitute(std::string text, const std::string& dir) {
  for (size_t at; (at = text.find("{dir}")) != std::string::npos;) text.replace(at, 5, dir);
  return text;
}

std::set<std::string> entries(const fs::path& dir) {
  std::set<std::string> names;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return names;
  for (const auto& e : fs::recursive_directory_iterator(dir)) names.insert(e.path().string());
  return names;
}

class Hostile : public ::testing::TestWithParam<HostileCase> {};

TEST_P(Hostile, OneCleanLineTheRightExitCodeAndNothingWritten) {
  const HostileCase& c = GetParam();
  TempDir dir;
  c.setup(dir);
  std::string args = substitute(c.args, dir.path().string());
  if (args.rfind("run ", 0) == 0) args += " --output-dir " + dir.file("out");
  std::set<std::string> before = entries(dir.path() / "out");
  std::string command = "timeout 60 " + std::string(STRIDER_BINARY_DIR) + "/strider " + args + " >" +
                        dir.file("stdout") + " 2>" + dir.file("stderr") + " </dev/null";
  int status = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status)) << "killed by a signal: " << command;
  int code = WEXITSTATUS(status);
  std::string err = slurp(dir.file("stderr"));
  ASSERT_NE(code, 124) << "did not finish within 60 s: " << command;
  EXPECT_EQ(code, c.exit_code) << command << "\n" << err;
  if (c.exit_code == 0) {
    EXPECT_EQ(err, "");
    return;
  }
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_EQ(err.rfind("strider: error: ", 0), 0u) << err;
  EXPECT_NE(err.find(c.message), std::string::npos) << "expected '" << c.message << "' in\n" << err;
  EXPECT_LE(err.size(), 2048u) << "an error line is for reading";
  for (size_t i = 0; i + 1 < err.size(); ++i)
    ASSERT_TRUE(static_cast<unsigned char>(err[i]) >= 0x20 && err[i] != 0x7f)
        << "control byte " << int(err[i]) << " at " << i << " of " << err;
  EXPECT_EQ(err.find(STRIDER_SOURCE_DIR "/src"), std::string::npos) << "a source path in " << err;
  EXPECT_EQ(entries(dir.path() / "out"), before) << "a failed run wrote outputs";
}

// The library never throws or crashes either: load and (if that succeeds) run with
// seeded inputs; a failure is a Status.
TEST_P(Hostile, TheLibraryReturnsAStatus) {
  const HostileCase& c = GetParam();
  if (c.cli_only || c.args.find("--") != std::string::npos || c.args.rfind("run {dir}/", 0) != 0)
    GTEST_SKIP() << "a CLI-only case";
  TempDir dir;
  c.setup(dir);
  std::string path = substitute(c.args.substr(4), dir.path().string());
  SessionOptions options;
  options.max_memory_bytes = int64_t(1) << 30;
  auto session = Session::load(path, options);
  if (!session.is_ok()) {
    EXPECT_NE(c.exit_code, 0) << session.status().to_string();
    return;
  }
  std::vector<Tensor> inputs;
  for (const ValueInfo& info : (*session)->inputs()) inputs.push_back(random_tensor(info.dtype, info.shape, 5));
  auto outputs = (*session)->run(inputs);
  EXPECT_EQ(outputs.is_ok(), c.exit_code == 0) << outputs.status().to_string();
}

INSTANTIATE_TEST_SUITE_P(Cases, Hostile, ::testing::ValuesIn(hostile_cases()),
                         [](const ::testing::TestParamInfo<HostileCase>& info) { return info.param.name; });

}  // namespace
}  // namespace strider::testing
