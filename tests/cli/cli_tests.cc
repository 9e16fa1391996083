// The `strider` command line as a user meets it: exit codes, one-line errors that name
// what is wrong, files written only on success.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "onnx/npy.h"
#include "onnx/tensor_proto.h"
#include "support/test_util.h"

namespace strider {
namespace {
namespace fs = std::filesystem;
using testing::TempDir;

struct CliResult {
  int exit_code = -1;
  std::string out, err;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

CliResult run_cli(const std::string& args) {
  TempDir dir;
  std::string command = std::string(STRIDER_BINARY_DIR) + "/strider " + args + " >" + dir.file("out") + " 2>" +
                        dir.file("err");
  int status = std::system(command.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(dir.file("out")), slurp(dir.file("err"))};
}

const std::string kSeed = std::string(STRIDER_SOURCE_DIR) + "/models/seed/LinearChunkLastDim_shape_op13";

int lines(const std::string& text) { return int(std::count(text.begin(), text.end(), '\n')); }

TEST(Cli, RunPrintsEveryOutputAndWritesNpyAndPb) {
  TempDir out;
  CliResult r = run_cli("run " + kSeed + "/model.onnx --inputs-dir " + kSeed + "/test_data_set_0 --output-dir " + out.path().string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("output 'y' f32[12, 5]: min"), std::string::npos) << r.out;
  auto npy = read_npy(out.file("output_0.npy"));
  auto pb = read_tensor_pb(out.file("output_0.pb"));
  ASSERT_TRUE(npy.is_ok() && pb.is_ok());
  EXPECT_TRUE(testing::same_tensor(*npy, *pb));
  auto torch = read_tensor_pb(kSeed + "/test_data_set_0/output_0.pb");
  for (int64_t i = 0; i < torch->num_elements(); ++i)
    EXPECT_NEAR(npy->data<float>()[i], torch->data<float>()[i], 1e-5);
}

// The help says a folder in the ONNX test layout may stand for its model.onnx: run, bench
// and inspect take one, as check does (run and bench refused it as "not a regular file").
TEST(Cli, RunBenchAndInspectTakeATestFolder) {
  TempDir out;
  CliResult run = run_cli("run " + kSeed + " --inputs-dir " + kSeed + "/test_data_set_0 --output-dir " + out.path().string());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("output 'y' f32[12, 5]: min"), std::string::npos) << run.out;
  CliResult bench = run_cli("bench " + kSeed + " --random-inputs --warmup 1 --iterations 2");
  EXPECT_EQ(bench.exit_code, 0) << bench.err;
  CliResult inspect = run_cli("inspect " + kSeed);
  EXPECT_EQ(inspect.exit_code, 0) << inspect.err;
}

// `strider bench --trace FILE` writes a Chrome trace of one run: the events of every
// command, on the host queue and the device's queues; an unwritable path is one error.
TEST(Cli, BenchWritesATraceOfOneRun) {
  TempDir out;
  const std::string c2f = std::string(STRIDER_SOURCE_DIR) + "/models/seed/C2f_split_op17/model.onnx";
  const std::string file = out.file("trace.json");
  CliResult bench = run_cli("bench " + c2f + " --random-inputs --warmup 1 --iterations 2 --queues 2 --trace " + file);
  ASSERT_EQ(bench.exit_code, 0) << bench.err;
  EXPECT_NE(bench.out.find("trace        12 commands over"), std::string::npos) << bench.out;
  std::ifstream in(file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const char* piece : {"\"traceEvents\"", "\"name\": \"FusedConv '/cv1/conv/Conv'\"", "\"name\": \"queue 2\"",
                            "\"name\": \"upload 'x'\"", "\"ph\": \"f\""})
    EXPECT_NE(text.find(piece), std::string::npos) << piece;
  CliResult unwritable = run_cli("bench " + c2f + " --random-inputs --warmup 1 --iterations 1 --trace " +
                                 out.file("no/such/folder/trace.json"));
  EXPECT_NE(unwritable.exit_code, 0);
  EXPECT_NE(unwritable.err.find("--trace"), std::string::npos) << unwritable.err;
}

// A failing output sends `strider check` looking for the first node whose output differs:
// with a tolerance no float run meets, that is the first step that computes anything.
TEST(Cli, CheckNamesTheFirstBadNodeWhenAnOutputFails) {
  TempDir out;
  const std::string c2f = std::string(STRIDER_SOURCE_DIR) + "/models/seed/C2f_split_op17/model.onnx";
  CliResult r = run_cli("check " + c2f + " --rtol 1e-12 --atol 0 --json " + out.file("report.json"));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  // The first step is a convolution fused with its SiLU: the line names both nodes.
  EXPECT_NE(r.out.find("first bad node: '/cv1/conv/Conv' (FusedConv of /cv1/conv/Conv,/cv1/act/Mul.fused) "
                       "output '/cv1/act/Mul_output_0'"),
            std::string::npos)
      << r.out;
  EXPECT_NE(slurp(out.file("report.json")).find("\"first_bad_node\""), std::string::npos);
  CliResult ok = run_cli("check " + c2f);
  EXPECT_EQ(ok.exit_code, 0) << ok.out;
  EXPECT_EQ(ok.out.find("first bad node"), std::string::npos) << ok.out;
}

// In bf16 a models/ folder's torch_bf16/ outputs are a second yardstick: an output that
// misses the tolerance passes when it is no worse than torch's own bf16 run, and fails
// when torch's run was closer (here a torch_bf16 made exact, so nothing can match it).
TEST(Cli, CheckInBf16PassesOutputsNoWorseThanTorchsOwnBf16Run) {
  const std::string c2f = std::string(STRIDER_SOURCE_DIR) + "/models/seed/C2f_split_op17";
  CliResult ok = run_cli("check " + c2f + " --dtype bf16 --rtol 1e-6 --atol 0");
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_NE(ok.out.find("PASS against torch's own bf16 run"), std::string::npos) << ok.out;
  TempDir copy;
  fs::copy(c2f, copy.path(), fs::copy_options::recursive);
  fs::copy_file(copy.path() / "test_data_set_0" / "output_0.pb", copy.path() / "torch_bf16" / "output_0.pb",
                fs::copy_options::overwrite_existing);
  TempDir out;
  CliResult closer = run_cli("check " + copy.path().string() + " --dtype bf16 --rtol 1e-6 --atol 0 --json " +
                             out.file("report.json"));
  EXPECT_EQ(closer.exit_code, 1) << closer.out;
  EXPECT_NE(closer.out.find("FAIL against torch's own bf16 run"), std::string::npos) << closer.out;
  EXPECT_NE(slurp(out.file("report.json")).find("\"torch_bf16\""), std::string::npos);
  // f32 has no such yardstick.
  CliResult f32 = run_cli("check " + c2f + " --rtol 1e-12 --atol 0");
  EXPECT_EQ(f32.exit_code, 1) << f32.out;
}

TEST(Cli, WrongInputShapeNamesTheInputAndWritesNothing) {
  TempDir files;
  ASSERT_TRUE(write_npy(files.file("x.npy"), testing::random_tensor(DType::kF32, {13, 7}, 3)).is_ok());
  CliResult r = run_cli("run " + kSeed + "/model.onnx --input x=" + files.file("x.npy") + " --output-dir " + files.file("out"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "strider: error: INVALID_ARGUMENT: input 'x' dim 0: got 13, expected 12\n");
  EXPECT_FALSE(fs::exists(files.file("out/output_0.npy")));
}

TEST(Cli, WrongInputDtypeIsAUsageError) {
  TempDir files;
  ASSERT_TRUE(write_npy(files.file("x.npy"), testing::random_tensor(DType::kF64, {12, 7}, 4)).is_ok());
  CliResult r = run_cli("run " + kSeed + "/model.onnx --input x=" + files.file("x.npy"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "strider: error: INVALID_ARGUMENT: input 'x': got f64, expected f32\n");
}

TEST(Cli, TruncatedModelIsAnInvalidModelInOneLine) {
  TempDir files;
  std::string bytes = slurp(kSeed + "/model.onnx");
  testing::write_bytes(files.file("half.onnx"), bytes.substr(0, bytes.size() / 2));
  CliResult r = run_cli("run " + files.file("half.onnx"));
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_EQ(r.err.rfind("strider: error: INVALID_MODEL: ", 0), 0u) << r.err;
}

// A fuzzer's model: a Scan whose scan input is an empty name, beside an int4 scalar input.
// --random-inputs made the int4 input from a missing float64 staging tensor (a crash), and
// the Scan's missing input was read as value -1 (another): now one INVALID_MODEL line.
TEST(Cli, RandomInt4InputAndAMissingScanInputAreOneError) {
  CliResult r = run_cli("run " + std::string(STRIDER_SOURCE_DIR) +
                        "/tests/corpus/model/scan_whose_scan_input_is_missing.onnx --random-inputs");
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("INVALID_MODEL: node 'Scan_0' (Scan): its input 1 is missing"), std::string::npos) << r.err;
}

TEST(Cli, UnsupportedOpsAreAllListedWithTheirNodes) {
  TempDir files;
  onnx::ModelProto model = testing::make_model(17);
  onnx::GraphProto* g = model.mutable_graph();
  testing::add_input(g, "x", onnx::TensorProto::FLOAT, {2, 3});
  testing::add_node(g, "FooOp", {"x"}, {"a"}, "foo_1");
  testing::add_node(g, "Relu", {"a"}, {"b"}, "relu");
  testing::add_node(g, "BarOp", {"b"}, {"c"}, "bar_1");
  testing::add_node(g, "BarOp", {"c"}, {"d"}, "bar_2");
  testing::add_output(g, "d");
  testing::write_bytes(files.file("m.onnx"), testing::serialize(model));
  CliResult r = run_cli("run " + files.file("m.onnx"));
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.err,
            "strider: error: UNSUPPORTED: the model uses 2 unsupported ops: BarOp (nodes 'bar_1', 'bar_2'), "
            "FooOp (node 'foo_1')\n");
}

TEST(Cli, MissingInitializerNamesTheNodeAndTheValue) {
  TempDir files;
  onnx::ModelProto model = testing::make_model(17);
  onnx::GraphProto* g = model.mutable_graph();
  testing::add_input(g, "x", onnx::TensorProto::FLOAT, {2, 3});
  testing::add_node(g, "MatMul", {"x", "weights"}, {"y"}, "project");
  testing::add_output(g, "y");
  testing::write_bytes(files.file("m.onnx"), testing::serialize(model));
  CliResult r = run_cli("run " + files.file("m.onnx"));
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(lines(r.err), 1);
  EXPECT_NE(r.err.find("'project'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("'weights'"), std::string::npos) << r.err;
}

TEST(Cli, MissingFilesAndBadFlagsAreUsageErrors) {
  EXPECT_EQ(run_cli("run /nonexistent/model.onnx").exit_code, 2);
  CliResult bad_flag = run_cli("run " + kSeed + "/model.onnx --no-such-flag");
  EXPECT_EQ(bad_flag.exit_code, 2);
  EXPECT_EQ(bad_flag.err.rfind("strider: error: INVALID_ARGUMENT: ", 0), 0u) << bad_flag.err;
  EXPECT_EQ(lines(bad_flag.err), 1) << bad_flag.err;
  EXPECT_EQ(run_cli("run " + kSeed + "/model.onnx --input x=/nonexistent.npy").exit_code, 2);
  EXPECT_EQ(run_cli("run " + kSeed + "/model.onnx --dtype f64").exit_code, 2);
}

TEST(Cli, CheckPassesAndFailsWithExitCodes) {
  CliResult pass = run_cli("check " + kSeed + "/model.onnx --inputs-dir " + kSeed + "/test_data_set_0");
  EXPECT_EQ(pass.exit_code, 0) << pass.out << pass.err;
  EXPECT_NE(pass.out.find("PASS"), std::string::npos);
  EXPECT_NE(pass.out.find("1 passed, 0 failed"), std::string::npos);
  // Expected outputs that are off by a little more than the tolerance fail the check.
  TempDir wrong;
  Tensor expected = *read_tensor_pb(kSeed + "/test_data_set_0/output_0.pb");
  expected.data<float>()[7] += 0.01f;
  ASSERT_TRUE(write_tensor_pb(wrong.file("output_0.pb"), expected, "y").is_ok());
  CliResult fail = run_cli("check " + kSeed + "/model.onnx --inputs-dir " + kSeed + "/test_data_set_0 --expected-dir " +
                           wrong.path().string() + " --json " + wrong.file("report.json"));
  EXPECT_EQ(fail.exit_code, 1) << fail.out << fail.err;
  EXPECT_NE(fail.out.find("FAIL"), std::string::npos);
  EXPECT_NE(fail.out.find("0 passed, 1 failed"), std::string::npos);
  std::string json = slurp(wrong.file("report.json"));
  EXPECT_NE(json.find("\"model_sha256\""), std::string::npos);
  EXPECT_NE(json.find("\"max_abs_error\""), std::string::npos);
}

// check compares every output: a wrong second output alone fails the check, and the line
// of the output that is right still passes (a check of only the first output would not
// notice; none of the seed models has two outputs).
TEST(Cli, CheckFailsWhenOnlyTheSecondOfTwoOutputsIsWrong) {
  TempDir dir;
  onnx::ModelProto model = testing::make_model(17);
  onnx::GraphProto* g = model.mutable_graph();
  testing::add_input(g, "x", onnx::TensorProto::FLOAT, {3, 4});
  testing::add_node(g, "Sigmoid", {"x"}, {"first"});
  testing::add_node(g, "Tanh", {"x"}, {"second"});
  testing::add_output(g, "first");
  testing::add_output(g, "second");
  testing::write_bytes(dir.file("m.onnx"), testing::serialize(model));
  ASSERT_TRUE(write_npy(dir.file("x.npy"), testing::random_tensor(DType::kF32, {3, 4}, 17)).is_ok());
  std::string base = "m.onnx --input x=" + dir.file("x.npy");
  CliResult ran = run_cli("run " + dir.file(base) + " --output-dir " + dir.file("expected"));
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  std::string check = "check " + dir.file(base) + " --expected-dir " + dir.file("expected");
  CliResult same = run_cli(check);
  EXPECT_EQ(same.exit_code, 0) << same.out << same.err;
  EXPECT_NE(same.out.find("2 passed, 0 failed"), std::string::npos) << same.out;
  for (int wrong : {1, 0}) {
    TempDir expected;
    for (int i = 0; i < 2; ++i) {
      Tensor t = *read_npy(dir.file(fmt::format("expected/output_{}.npy", i)));
      if (i == wrong) t.data<float>()[5] += 0.05f;
      ASSERT_TRUE(write_npy(expected.file(fmt::format("output_{}.npy", i)), t).is_ok());
    }
    CliResult r = run_cli("check " + dir.file(base) + " --expected-dir " + expected.path().string());
    EXPECT_EQ(r.exit_code, 1) << "output " << wrong << " wrong:\n" << r.out << r.err;
    EXPECT_NE(r.out.find("1 passed, 1 failed"), std::string::npos) << r.out;
    std::string name = wrong == 1 ? "'second'" : "'first'";
    size_t line = r.out.find("output " + name);
    ASSERT_NE(line, std::string::npos) << r.out;
    EXPECT_NE(r.out.substr(line, r.out.find('\n', line) - line).find("FAIL"), std::string::npos) << r.out;
  }
}

TEST(Cli, CheckOfATestFolderRunsEveryDataSetInBf16) {
  CliResult r = run_cli("check " + kSeed + " --dtype bf16");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("test_data_set_0 output 'y'"), std::string::npos) << r.out;
}

TEST(Cli, SanitizerFindingsFailTheCheckWithOneLineEach) {
  const std::string model = std::string(STRIDER_SOURCE_DIR) + "/models/seed/PointwiseC2f_split_op17";
  CliResult clean = run_cli("check " + model + " --device sim --queues 2 --sanitize --sim-seed 3");
  EXPECT_EQ(clean.exit_code, 0) << clean.out << clean.err;
  CliResult broken = run_cli("check " + model + " --device sim --queues 2 --sanitize --debug-drop-waits");
  EXPECT_EQ(broken.exit_code, 1) << broken.out << broken.err;
  ASSERT_GT(lines(broken.err), 0);
  size_t start = 0;
  while (start < broken.err.size()) {
    size_t end = broken.err.find('\n', start);
    std::string line = broken.err.substr(start, end - start);
    EXPECT_EQ(line.rfind("strider: hazard: ", 0), 0u) << line;
    EXPECT_NE(line.find("no wait orders them"), std::string::npos) << line;
    start = end + 1;
  }
}

TEST(Cli, HelpHasExamplesAndVersionNamesTheLibraries) {
  for (const char* command : {"run", "check"}) {
    CliResult r = run_cli(std::string(command) + " --help");
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_NE(r.out.find("Examples:"), std::string::npos) << command;
  }
  CliResult v = run_cli("--version");
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_NE(v.out.find("commit"), std::string::npos);
  EXPECT_NE(v.out.find("oneDNN"), std::string::npos);
  EXPECT_NE(v.out.find("protobuf"), std::string::npos);
}

}  // namespace
}  // namespace strider
