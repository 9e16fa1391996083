#include "hostile/hostile_cases.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <limits>

#include "support/model_maker.h"

namespace strider::testing {
namespace {
namespace fs = std::filesystem;

constexpr int64_t k2e62 = int64_t(1) << 62;
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

using Setup = std::function<void(const TempDir&)>;

// The model a case runs is {dir}/model.onnx.
Setup model(std::function<void(ModelMaker&)> build, int opset = 17) {
  return [build, opset](const TempDir& dir) {
    ModelMaker m(opset);
    build(m);
    m.save(dir.file("model.onnx"));
  };
}

// x -> op -> y on an input of `dims`, for ops of one input.
Setup unary(const std::string& op, const std::vector<Dim>& dims, int opset = 17) {
  return model([op, dims](ModelMaker& m) { m.input("x", kFloat, dims).node(op, {"x"}, {"y"}, "n").output("y"); },
               opset);
}

// An If whose then_branch is another such If, `depth` deep; every branch returns x + 1
// (read from the outermost graph) or the inner If's output.
onnx::GraphProto nested_if_branch(int depth) {
  ModelMaker b;
  if (depth == 0) {
    b.init_f32("one", {}, {1.0f}).node("Add", {"x", "one"}, {"r"}).output("r");
  } else {
    b.init_f32("one", {}, {1.0f}).node("Add", {"x", "one"}, {"e"});
    b.node("If", {"c"}, {"r"}).attr_graph("then_branch", nested_if_branch(depth - 1));
    ModelMaker other;
    other.node("Identity", {"e_outer"}, {"o"}).output("o");
    b.attr_graph("else_branch", nested_if_branch(0)).output("r");
  }
  return *b.graph();
}

Setup nested_ifs(int depth) {
  return model([depth](ModelMaker& m) {
    m.input("x", kFloat, {2}).input("c", onnx::TensorProto::BOOL, {});
    m.node("If", {"c"}, {"y"}, "if").attr_graph("then_branch", nested_if_branch(depth)).attr_graph("else_branch",
                                                                                                  nested_if_branch(0));
    m.output("y");
  });
}

// A Loop with no trip count whose body keeps its condition true: it never ends.
Setup endless_loop() {
  return model([](ModelMaker& m) {
    ModelMaker body;
    body.input("i", kInt64, {}).input("cond", onnx::TensorProto::BOOL, {}).input("v", kFloat, {2});
    body.node("Identity", {"cond"}, {"cond_out"}).node("Neg", {"v"}, {"v_out"});
    body.output("cond_out", onnx::TensorProto::BOOL).output("v_out");
    m.input("x", kFloat, {2}).node("Loop", {"", "", "x"}, {"y"}, "loop").attr_graph("body", *body.graph()).output("y");
  });
}

// An If whose branch reads a value no enclosing graph defines.
Setup branch_reading_nothing() {
  return model([](ModelMaker& m) {
    ModelMaker branch;
    branch.node("Neg", {"nowhere"}, {"r"}).output("r");
    m.input("x", kFloat, {2}).input("c", onnx::TensorProto::BOOL, {});
    m.node("If", {"c"}, {"y"}, "if").attr_graph("then_branch", *branch.graph()).attr_graph("else_branch", *branch.graph());
    m.output("y");
  });
}

Setup range_model(int elem, const std::vector<double>& start_limit_delta) {
  return model([elem, start_limit_delta](ModelMaker& m) {
    const char* names[] = {"start", "limit", "delta"};
    for (int k = 0; k < 3; ++k) {
      if (elem == kInt64)
        m.init_i64(names[k], {}, {int64_t(start_limit_delta[size_t(k)])});
      else
        m.init_f32(names[k], {}, {float(start_limit_delta[size_t(k)])});
    }
    // Range feeds a node with a run-time input, so its output is not a graph output.
    m.input("x", elem, {1});
    m.node("Range", {"start", "limit", "delta"}, {"r"}, "range").node("Add", {"r", "x"}, {"y"}, "add").output("y", elem);
  });
}

// Model in {dir}/m/model.onnx whose initializer 'w' (f32[2]) reads external data at
// `location`; `prepare` makes the files around it.
Setup external(const std::string& location, std::function<void(const TempDir&)> prepare, int64_t offset = -1) {
  return [location, prepare, offset](const TempDir& dir) {
    fs::create_directories(dir.path() / "m");
    write_bytes(dir.file("secret.bin"), std::string(8, 'S'));
    prepare(dir);
    ModelMaker m;
    m.input("x", kFloat, {2}).init_external("w", kFloat, {2}, location, offset);
    m.node("Add", {"x", "w"}, {"y"}, "add").output("y");
    m.save(dir.file("m/model.onnx"));
  };
}

void nothing(const TempDir&) {}

// x f32[1024] -> Expand to [1024, 1024] -> Relu -> y: 4 KiB in, 4 MiB in the arena and out.
Setup expand_then_relu() {
  return model([](ModelMaker& m) {
    m.input("x", kFloat, {1024}).init_i64("s", {2}, {1024, 1024});
    m.node("Expand", {"x", "s"}, {"e"}, "expand").node("Relu", {"e"}, {"y"}, "relu").output("y");
  });
}

std::vector<HostileCase> size_cases() {
  return {
      // The 150-byte model that leaked heap bytes: the element count wrapped to 0.
      {"GatherOfAnInputWhoseSizeWraps",
       model([](ModelMaker& m) {
         m.input("x", kFloat, {k2e62, 4}).init_i64("i", {1}, {0});
         m.node("Gather", {"x", "i"}, {"y"}, "gather").output("y");
       }),
       "run {dir}/model.onnx", 3, "graph input 'x' f32[4611686018427387904, 4] is too large"},
      {"AddOfAnInputWhoseSizeWraps", unary("Relu", {k2e62, 4}), "run {dir}/model.onnx", 3, "is too large"},
      {"ReduceSumOfAnInputWhoseSizeWraps", unary("ReduceSum", {k2e62, 4}), "run {dir}/model.onnx", 3, "is too large"},
      {"DimsWhoseProductWraps", unary("Relu", {int64_t(1) << 31, int64_t(1) << 31}), "run {dir}/model.onnx", 3,
       "is too large"},
      {"ExpandToAShapeWhoseSizeWraps",
       model([](ModelMaker& m) {
         m.input("x", kFloat, {1}).init_i64("s", {3}, {int64_t(1) << 40, int64_t(1) << 40, 8});
         m.node("Expand", {"x", "s"}, {"y"}, "expand").output("y");
       }),
       "run {dir}/model.onnx", 3, "node 'expand' (Expand): output 'y' f32[1099511627776, 1099511627776, 8] is too large"},
      {"TileWhoseRepeatsOverflow",
       model([](ModelMaker& m) {
         m.input("x", kFloat, {4}).init_i64("r", {1}, {k2e62});
         m.node("Tile", {"x", "r"}, {"y"}, "tile").output("y");
       }),
       "run {dir}/model.onnx", 3, "node 'tile' (Tile): repeats 4611686018427387904 on axis 0 of size 4 overflow"},
      {"PadsThatOverflow",
       model([](ModelMaker& m) {
         m.input("x", kFloat, {4}).init_i64("p", {2}, {kMax, kMax});
         m.node("Pad", {"x", "p"}, {"y"}, "pad").output("y");
       }),
       "run {dir}/model.onnx", 3,
       "node 'pad' (Pad): pads 9223372036854775807 and 9223372036854775807 on axis 0 of size 4 give no valid size"},
      {"ResizeScaleThatOverflows",
       model([](ModelMaker& m) {
         m.input("x", kFloat, {1, 1, 4, 4}).init_f32("roi", {0}, {}).init_f32("s", {4}, {1, 1, 1e30f, 1e30f});
         m.node("Resize", {"x", "roi", "s"}, {"y"}, "resize").output("y");
       }),
       "run {dir}/model.onnx", 3, "node 'resize' (Resize)"},
      {"PoolWindowWhoseExtentOverflows",
       model([](ModelMaker& m) {
         m.input("x", kFloat, {1, 1, 8, 8});
         m.node("MaxPool", {"x"}, {"y"}, "pool").attr("kernel_shape", std::vector<int64_t>{k2e62, 2})
             .attr("dilations", std::vector<int64_t>{4, 1}).output("y");
       }),
       "run {dir}/model.onnx", 3, "node 'pool' (MaxPool)"},
      // Weights from a folded ConstantOfShape: a tiny file asking for ~2^46 multiply-adds.
      {"ConvWhoseWorkIsAstronomical",
       model([](ModelMaker& m) {
         // Padding makes the work: a 64x64 image, a 1024x1024 kernel, 1024 pixels of pads
         // (the work counts every tap; the tensors stay small so the case is quick to refuse).
         m.input("x", kFloat, {1, 1, 64, 64}).init_i64("ws", {4}, {4, 1, 1024, 1024});
         m.node("ConstantOfShape", {"ws"}, {"w"}, "weights")
             .node("Conv", {"x", "w"}, {"y"}, "conv")
             .attr("pads", std::vector<int64_t>{1024, 1024, 1024, 1024})
             .output("y");
       }),
       "run {dir}/model.onnx --max-memory 8GiB", 4, "node 'conv' (Conv): needs 4974113193984 multiply-adds, more than the 2^42"},
      {"ConvStrideOfInt64Max",  // legal: one output position per axis
       model([](ModelMaker& m) {
         m.input("x", kFloat, {1, 2, 5, 5}).init_f32("w", {3, 2, 1, 1}, {0.5f, -1, 2, 0.25f, 1.5f, -0.75f});
         m.node("Conv", {"x", "w"}, {"y"}, "conv").attr("strides", std::vector<int64_t>{kMax, kMax}).output("y");
       }),
       "run {dir}/model.onnx", 0, ""},
  };
}

std::vector<HostileCase> budget_cases() {
  return {
      {"RandomInputsBeyondTheBudget", unary("Relu", {int64_t(1) << 33}), "run {dir}/model.onnx --max-memory 1GiB", 4,
       "RESOURCE_EXHAUSTED"},
      {"ShapeFlagBeyondTheBudget", unary("Relu", {"n"}), "run {dir}/model.onnx --shape x:8589934592 --max-memory 1GiB",
       4, "RESOURCE_EXHAUSTED"},
      {"DefaultBudgetRefusesATerabyte", unary("Relu", {int64_t(1) << 38}), "run {dir}/model.onnx", 4,
       "RESOURCE_EXHAUSTED"},
      {"FoldedConstantOfShapeBeyondTheBudget",
       model([](ModelMaker& m) {
         m.input("x", kFloat, {1}).init_i64("s", {1}, {int64_t(1) << 36});
         m.node("ConstantOfShape", {"s"}, {"c"}, "fill").node("Add", {"c", "x"}, {"y"}, "add").output("y");
       }),
       "run {dir}/model.onnx --max-memory 1GiB", 4, "RESOURCE_EXHAUSTED"},
      // Control flow: bodies nest at most 16 deep, loops unroll at most 4096 iterations, and
      // a body reads only what an enclosing graph defines.
      {"IfsNestedTooDeep", nested_ifs(24), "run {dir}/model.onnx --random-inputs", 3, "graphs nested more than 16 deep"},
      {"EndlessLoop", endless_loop(), "run {dir}/model.onnx --random-inputs", 3, "node 'loop' (Loop) runs more than 4096 iterations"},
      {"BranchReadingNothing", branch_reading_nothing(), "run {dir}/model.onnx --random-inputs", 3,
       "input 0 'nowhere' is not produced by any earlier node"},
      {"FoldedRangeBeyondTheBudget", range_model(kInt64, {0, double(int64_t(1) << 38), 1}),
       "run {dir}/model.onnx --max-memory 1GiB", 4, "RESOURCE_EXHAUSTED"},
      // A small input whose intermediates and outputs (4 MiB each) pass the budget: the
      // device's own allocations refuse it.
      {"ArenaBeyondTheBudget", expand_then_relu(), "run {dir}/model.onnx --max-memory 2MiB", 4,
       "cpu memory for the"},
      // The sim device brings its own queues; its allocations are bounded all the same
      // (they were not: found by fuzz_model_structure asking the sim for a 16 GiB arena).
      {"ArenaBeyondTheBudgetOnSim", expand_then_relu(), "run {dir}/model.onnx --device sim --queues 2 --max-memory 2MiB",
       4, "sim memory for the"},
      {"MaxMemoryMustBeASize", unary("Relu", {4}), "run {dir}/model.onnx --max-memory lots", 2, "--max-memory"},
      // A function body's constants (here OneHot's 2^36 positions) take their bytes from the
      // budget before they are built.
      {"ExpandedOneHotBeyondTheBudget",
       model([](ModelMaker& m) {
         m.input("i", kInt64, {1}).init_i64("depth", {1}, {int64_t(1) << 36}).init_f32("values", {2}, {0, 1});
         m.node("OneHot", {"i", "depth", "values"}, {"y"}, "hot").output("y");
       }, 11),
       "run {dir}/model.onnx --max-memory 1GiB", 4, "the positions of OneHot 'hot'"},
      // MatMulInteger runs in f32, exact only up to 258 products per output: longer sums
      // are refused by name, not returned rounded.
      {"MatMulIntegerBeyondExactF32",
       model([](ModelMaker& m) {
         m.input("a", onnx::TensorProto::UINT8, {2, 300}).input("b", onnx::TensorProto::UINT8, {300, 3});
         m.node("MatMulInteger", {"a", "b"}, {"y"}, "mmi").output("y", onnx::TensorProto::INT32);
       }, 10),
       "run {dir}/model.onnx --random-inputs", 3, "exact only up to 258"},
  };
}

std::vector<HostileCase> arithmetic_cases() {
  return {
      {"RangeInt64CountOverflows", range_model(kInt64, {0, double(kMin), -1}), "run {dir}/model.onnx", 3,
       "node 'range' (Range)"},
      {"RangeFloatToInfinity", range_model(kFloat, {0, std::numeric_limits<double>::infinity(), 1}),
       "run {dir}/model.onnx", 3, "node 'range' (Range)"},
      {"RangeFloatNaNDelta", range_model(kFloat, {0, 4, std::numeric_limits<double>::quiet_NaN()}),
       "run {dir}/model.onnx", 3, "node 'range' (Range)"},
      {"SliceStepsNearInt64Max",  // legal: one element
       model([](ModelMaker& m) {
         m.input("x", kFloat, {6}).init_i64("s", {1}, {0}).init_i64("e", {1}, {kMax}).init_i64("a", {1}, {0});
         m.init_i64("st", {1}, {kMax - 1});
         m.node("Slice", {"x", "s", "e", "a", "st"}, {"y"}, "slice").output("y");
       }),
       "run {dir}/model.onnx", 0, ""},
      {"SliceFromInt64MinToMaxBackwards",  // legal: the whole axis, reversed
       model([](ModelMaker& m) {
         m.input("x", kFloat, {6}).init_i64("s", {1}, {kMax}).init_i64("e", {1}, {kMin}).init_i64("a", {1}, {0});
         m.init_i64("st", {1}, {kMin});
         m.node("Slice", {"x", "s", "e", "a", "st"}, {"y"}, "slice").output("y");
       }),
       "run {dir}/model.onnx", 0, ""},
      {"ShapeFlagBeyondInt64", unary("Relu", {"n", 3}), "run {dir}/model.onnx --shape x:99999999999999999999x3", 2,
       "--shape"},
      // A kernel of 2^32 with SAME_UPPER padding: every window covers the input; must not spin.
      {"MaxPoolWithAHugeKernelFinishes",
       model([](ModelMaker& m) {
         m.input("x", kFloat, {1, 1, 8, 8});
         m.node("MaxPool", {"x"}, {"y"}, "pool").attr("kernel_shape", std::vector<int64_t>{int64_t(1) << 32, 3})
             .attr("auto_pad", std::string("SAME_UPPER")).output("y");
       }),
       "run {dir}/model.onnx", 0, ""},
  };
}

std::vector<HostileCase> structure_cases() {
  return {
      {"CastLikeMissingAnInput",
       model([](ModelMaker& m) { m.input("x", kFloat, {2}).node("CastLike", {"x"}, {"y"}, "cl").output("y"); }),
       "run {dir}/model.onnx", 3, "node 'cl' (CastLike) has 1 input"},
      {"SplitWithNoInput", model([](ModelMaker& m) {
         m.input("x", kFloat, {4}).node("Split", {}, {"a", "b"}, "split").output("a").output("b");
       }), "run {dir}/model.onnx", 3, "node 'split' (Split) has 0 inputs"},
      {"ReluWithThreeInputs",
       model([](ModelMaker& m) { m.input("x", kFloat, {2}).node("Relu", {"x", "x", "x"}, {"y"}, "r").output("y"); }),
       "run {dir}/model.onnx", 3, "node 'r' (Relu) has 3 inputs"},
      {"ReluWithTwoOutputs", model([](ModelMaker& m) {
         m.input("x", kFloat, {2}).node("Relu", {"x"}, {"y", "z"}, "r").node("Neg", {"z"}, {"w"}).output("w");
       }), "run {dir}/model.onnx", 3, "node 'r' (Relu) has 2 outputs"},
      {"RequiredAttributeMissing", model([](ModelMaker& m) {
         m.input("x", kFloat, {2}).node("Cast", {"x"}, {"y"}, "cast").output("y");
       }), "run {dir}/model.onnx", 3, "node 'cast' (Cast)"},
      {"MixedInputTypes", model([](ModelMaker& m) {
         m.input("x", kFloat, {2}).input("i", kInt64, {2}).node("Add", {"x", "i"}, {"y"}, "add").output("y");
       }), "run {dir}/model.onnx", 3, "node 'add' (Add)"},
      {"ElementTypeTheOpDoesNotTake", model([](ModelMaker& m) {
         m.input("x", kInt64, {2}).node("Sigmoid", {"x"}, {"y"}, "sig").output("y", kInt64);
       }), "run {dir}/model.onnx", 3, "node 'sig' (Sigmoid)"},
      {"DuplicateGraphOutputs", model([](ModelMaker& m) {
         m.input("x", kFloat, {2}).node("Relu", {"x"}, {"y"}).output("y").output("y");
       }), "run {dir}/model.onnx", 3, "graph output 'y' is listed twice"},
      {"OpsetOne", unary("Relu", {2}, 1), "run {dir}/model.onnx", 3, "opset 1"},
      {"OpsetNinetyNine", unary("Relu", {2}, 99), "run {dir}/model.onnx", 3, "opset 99"},
      {"StriderDomainNodeInAModel", model([](ModelMaker& m) {
         m.input("x", kFloat, {2}).node("Materialize", {"x"}, {"y"}, "m").domain("strider").output("y");
       }), "run {dir}/model.onnx", 3, "node 'm'"},
      {"CycleOfNodes", model([](ModelMaker& m) {
         m.input("x", kFloat, {2}).node("Add", {"x", "b"}, {"a"}, "n1").node("Relu", {"a"}, {"b"}, "n2").output("b");
       }), "run {dir}/model.onnx", 3, "cycle"},
      {"UndefinedInput", model([](ModelMaker& m) {
         m.input("x", kFloat, {2}).node("Add", {"x", "nowhere"}, {"y"}, "add").output("y");
       }), "run {dir}/model.onnx", 3, "'nowhere'"},
      {"AttributeOfTheWrongType", model([](ModelMaker& m) {
         m.input("x", kFloat, {2, 2}).node("Transpose", {"x"}, {"y"}, "t").attr("perm", std::string("0,1")).output("y");
       }), "run {dir}/model.onnx", 3, "'perm'"},
  };
}

std::vector<HostileCase> message_cases() {
  return {
      {"OpTypeWithControlBytesIsEscaped",
       model([](ModelMaker& m) {
         m.input("x", kFloat, {2}).node("Evil\nstrider: ok\x1b[2K", {"x"}, {"y"}, "n\x1b[31m").output("y");
       }),
       "run {dir}/model.onnx", 3, "Evil\\nstrider: ok\\x1b[2K"},
      {"NodeNameWithANewlineIsEscaped",
       model([](ModelMaker& m) { m.input("x", kFloat, {2}).node("Relu", {"x", "x", "x"}, {"y"}, "a\nb").output("y"); }),
       "run {dir}/model.onnx", 3, "node 'a\\nb' (Relu)"},
      {"HugeNodeNameIsTruncated",
       model([](ModelMaker& m) {
         m.input("x", kFloat, {2}).node("Relu", {"x", "x"}, {"y"}, std::string(100000, 'n')).output("y");
       }),
       "run {dir}/model.onnx", 3, "nnn..."},
  };
}

std::vector<HostileCase> file_cases() {
  auto symlink = [](const std::string& target, const std::string& link) {
    return [target, link](const TempDir& dir) { fs::create_symlink(target, dir.file(link)); };
  };
  return {
      {"ExternalDataDotDot", external("../secret.bin", nothing), "run {dir}/m/model.onnx", 3, "leaves the model's folder"},
      {"ExternalDataAbsolute", external("/etc/passwd", nothing), "run {dir}/m/model.onnx", 3, "absolute"},
      {"ExternalDataSymlinkedFile", external("w.bin", symlink("../secret.bin", "m/w.bin")), "run {dir}/m/model.onnx",
       3, "initializer 'w'"},
      {"ExternalDataSymlinkedFolder",
       external("d/w.bin", [](const TempDir& dir) {
         fs::create_directories(dir.path() / "outside");
         write_bytes(dir.file("outside/w.bin"), std::string(8, 'S'));
         fs::create_directory_symlink(dir.path() / "outside", dir.path() / "m" / "d");
       }),
       "run {dir}/m/model.onnx", 3, "initializer 'w'"},
      {"ExternalDataSymlinkChain",
       external("a.bin", [](const TempDir& dir) {
         fs::create_symlink("b.bin", dir.file("m/a.bin"));
         fs::create_symlink("../secret.bin", dir.file("m/b.bin"));
       }),
       "run {dir}/m/model.onnx", 3, "initializer 'w'"},
      {"ExternalDataDevZero", external("z.bin", symlink("/dev/zero", "m/z.bin")), "run {dir}/m/model.onnx", 3,
       "initializer 'w'"},
      {"ExternalDataWithNul", external(std::string("w.bin\0../secret.bin", 20), nothing), "run {dir}/m/model.onnx", 3,
       "initializer 'w'"},
      {"ExternalDataOffsetBeyondTheFile",
       external("w.bin", [](const TempDir& dir) { write_bytes(dir.file("m/w.bin"), std::string(8, 'w')); }, 1 << 20),
       "run {dir}/m/model.onnx", 3, "initializer 'w'"},
      {"ExternalDataIsAFifo",
       external("w.bin", [](const TempDir& dir) { ::mkfifo(dir.file("m/w.bin").c_str(), 0600); }),
       "run {dir}/m/model.onnx", 3, "initializer 'w'"},
      {"InputFileIsAFifo",
       [](const TempDir& dir) {
         ModelMaker m;
         m.input("x", kFloat, {2}).node("Relu", {"x"}, {"y"}).output("y").save(dir.file("model.onnx"));
         ::mkfifo(dir.file("x.npy").c_str(), 0600);
       },
       "run {dir}/model.onnx --input x={dir}/x.npy", 2, "x.npy"},
      {"MalformedNpy",
       [](const TempDir& dir) {
         ModelMaker m;
         m.input("x", kFloat, {2}).node("Relu", {"x"}, {"y"}).output("y").save(dir.file("model.onnx"));
         write_bytes(dir.file("x.npy"), std::string("\x93NUMPY\x01\x00\x10\x00{'descr': '<f4'", 26));
       },
       "run {dir}/model.onnx --input x={dir}/x.npy", 2, "x.npy"},
      {"NpyOfAnUnsupportedDtype",
       [](const TempDir& dir) {
         ModelMaker m;
         m.input("x", kFloat, {2}).node("Relu", {"x"}, {"y"}).output("y").save(dir.file("model.onnx"));
         std::string header = "{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }";
         header.resize(118, ' ');
         header += '\n';
         write_bytes(dir.file("x.npy"), std::string("\x93NUMPY\x01\x00\x76\x00", 10) + header + std::string(16, '\0'));
       },
       "run {dir}/model.onnx --input x={dir}/x.npy", 2, "x.npy"},
      {"PbInputWithExternalData",
       [](const TempDir& dir) {
         ModelMaker m;
         m.input("x", kFloat, {2}).node("Relu", {"x"}, {"y"}).output("y").save(dir.file("model.onnx"));
         ModelMaker holder;
         holder.init_external("x", kFloat, {2}, "../../etc/passwd");
         write_bytes(dir.file("x.pb"), holder.proto().graph().initializer(0).SerializeAsString());
       },
       "run {dir}/model.onnx --input x={dir}/x.pb", 2, "x.pb"},
  };
}

std::vector<HostileCase> cli_cases() {
  return {
      {"NegativeSeed", unary("Relu", {2}), "run {dir}/model.onnx --seed -1", 2, "--seed"},
      {"ShapeNamingNoInput", unary("Relu", {2}), "run {dir}/model.onnx --shape nosuch:1x2", 2, "'nosuch'"},
      {"OutputThatCannotBeRenamedLeavesNothing",
       [](const TempDir& dir) {
         ModelMaker m;
         m.input("x", kFloat, {2}).node("Relu", {"x"}, {"y"}).node("Neg", {"x"}, {"z"}).output("y").output("z");
         m.save(dir.file("model.onnx"));
         fs::create_directories(dir.path() / "out" / "output_1.pb" / "occupied");
       },
       "run {dir}/model.onnx", 4, "output_1.pb", /*cli_only=*/true},
  };
}

}  // namespace

std::vector<HostileCase> hostile_cases() {
  std::vector<HostileCase> all;
  for (auto part : {size_cases(), budget_cases(), arithmetic_cases(), structure_cases(), message_cases(), file_cases(),
                    cli_cases()})
    for (HostileCase& c : part) all.push_back(std::move(c));
  return all;
}

}  // namespace strider::testing
