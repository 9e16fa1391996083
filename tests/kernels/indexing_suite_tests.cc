// The kernel suite's indexing, ordering and scan ops (kernel_suite_tests.cc says what the
// suite is): gathers and scatters with negative and repeated indices, every reduction,
// Reshape as a copy, TopK, Trilu, ArgMax/ArgMin and CumSum, on every device and layout.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "ir/builder.h"
#include "kernel_harness.h"
#include "kernel_suite.h"

namespace strider {
namespace {

using kernel_test::KernelSuite;

// GatherElements along a middle axis with negative indices, indices smaller than data
// in another dim, on f32 and int8.
TEST_P(KernelSuite, GatherElements) {
  for (DType dtype : {DType::kF32, DType::kI8}) {
    GraphBuilder b(17);
    b.output(b.op("GatherElements", {b.input("x", dtype, {3, 5, 4}), b.input("i", DType::kI64, {2, 6, 4})},
                  int_attribute("axis", 1)));
    Tensor indices(DType::kI64, {2, 6, 4});
    for (int64_t k = 0; k < indices.num_elements(); ++k) indices.data<int64_t>()[k] = (k * 7) % 10 - 5;  // [-5, 4]
    SCOPED_TRACE(dtype_name(dtype));
    check(b, {{"x", random_tensor(dtype, {3, 5, 4}, 3)}, {"i", indices}});
  }
}

// Index tensor of `shape` whose values cycle through [-dim, dim) (negative ones included),
// with duplicates: every scatter below hits some element twice, in a known order.
Tensor cycling_indices(const Shape& shape, int64_t dim, int64_t step) {
  Tensor t(DType::kI64, shape);
  for (int64_t k = 0; k < t.num_elements(); ++k) t.data<int64_t>()[k] = (k * step) % (2 * dim) - dim;
  return t;
}

// Gather of whole rows (an embedding): the CUDA kernel moves 16-, 8- or 4-byte words where
// the rows are contiguous and aligned (hal/cuda/gather.cu), elements where a layout of the
// catalog breaks that. Rows of 24 and 6 elements of 4, 2 and 1 bytes cover each word size,
// along the first axis and a middle one, with int32 indices too.
TEST_P(KernelSuite, GatherWholeRows) {
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kI8})
    for (int64_t row : {24, 6})
      for (int64_t axis : {0, 1}) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " row " + std::to_string(row) + " axis " + std::to_string(axis));
        Shape shape = axis == 0 ? Shape{7, row} : Shape{2, 7, row};
        DType index_type = row == 6 ? DType::kI32 : DType::kI64;
        Tensor indices = kernel_test::converted(cycling_indices({2, 5}, 7, 3), index_type);
        GraphBuilder b(17);
        b.output(b.op("Gather", {b.input("x", dtype, shape), b.input("i", index_type, {2, 5})},
                      int_attribute("axis", axis)));
        check(b, {{"x", random_tensor(dtype, shape, 11)}, {"i", indices}});
      }
}

// ScatterND with every reduction (updates applied in order: "none" with duplicates is the
// last one everywhere), slices of rank 1 and single elements, on f32 and int8.
TEST_P(KernelSuite, ScatterNDEveryReduction) {
  for (const char* reduction : {"none", "add", "mul", "max", "min"})
    for (DType dtype : {DType::kF32, DType::kI8}) {
      GraphBuilder b(18);
      AttributeMap attrs;
      attrs.set_string("reduction", reduction);
      b.output(b.op("ScatterND", {b.input("data", dtype, {4, 5, 3}), b.input("i", DType::kI64, {3, 2, 2}),
                                  b.input("u", dtype, {3, 2, 3})}, attrs));
      SCOPED_TRACE(std::string(reduction) + " " + std::string(dtype_name(dtype)));
      check(b, {{"data", random_tensor(dtype, {4, 5, 3}, 5)}, {"i", cycling_indices({3, 2, 2}, 4, 3)},
                {"u", random_tensor(dtype, {3, 2, 3}, 6)}});
    }
}

TEST_P(KernelSuite, ScatterElementsEveryReduction) {
  for (const char* reduction : {"none", "add", "mul", "max", "min"}) {
    GraphBuilder b(18);
    AttributeMap attrs = int_attribute("axis", 1);
    attrs.set_string("reduction", reduction);
    b.output(b.op("ScatterElements", {b.input("data", DType::kF32, {3, 5, 4}), b.input("i", DType::kI64, {2, 6, 4}),
                                      b.input("u", DType::kF32, {2, 6, 4})}, attrs));
    SCOPED_TRACE(reduction);
    check(b, {{"data", x({3, 5, 4})}, {"i", cycling_indices({2, 6, 4}, 5, 7)}, {"u", random_tensor(DType::kF32, {2, 6, 4}, 8)}});
  }
}

// GatherND with batch_dims 0 and 1, whole slices and single elements, on f32 and int8.
TEST_P(KernelSuite, GatherND) {
  for (int64_t batch_dims : {0, 1})
    for (DType dtype : {DType::kF32, DType::kI8}) {
      GraphBuilder b(13);
      const Shape indices = batch_dims ? Shape{3, 4, 1} : Shape{2, 3, 2};
      b.output(b.op("GatherND", {b.input("data", dtype, {3, 5, 4}), b.input("i", DType::kI64, indices)},
                    int_attribute("batch_dims", batch_dims)));
      SCOPED_TRACE("batch_dims " + std::to_string(batch_dims) + " " + std::string(dtype_name(dtype)));
      check(b, {{"data", random_tensor(dtype, {3, 5, 4}, 9)}, {"i", cycling_indices(indices, 3, 5)}});
    }
}

// Every reduction of ops/reduce_math.h over two axes; LogSum of positive values, and
// LogSumExp of values up to 150, where e^x overflows f32 without the row maximum.
TEST_P(KernelSuite, EveryReduction) {
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                         "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"}) {
    GraphBuilder b(18);
    b.output(b.op(op, {b.input("a", DType::kF32, {3, 4, 5}), b.constant("axes", i64_tensor({0, 2}))},
                  int_attribute("keepdims", 0)));
    Tensor a = x({3, 4, 5});
    for (int64_t i = 0; i < a.num_elements(); ++i) {
      float& v = a.data<float>()[i];
      if (std::string(op) == "ReduceLogSum") v = std::fabs(v) + 0.1f;
      if (std::string(op) == "ReduceLogSumExp") v *= 50.0f;
      if (std::string(op) == "ReduceProd") v = 0.5f + 0.25f * v;
    }
    SCOPED_TRACE(op);
    check(b, {{"a", a}});
  }
}

// Reshape run as a kernel (the harness gives the output bytes of its own): through every
// layout, including pairs where neither view can be seen in the other's sizes (the
// channels-last and reversed rows), which the devices copy element by element.
TEST_P(KernelSuite, ReshapeAsACopy) {
  GraphBuilder b(17);
  b.output(b.op("Reshape", {b.input("x", DType::kF32, {2, 6, 4, 5}), b.constant("shape", i64_tensor({2, 3, 8, 5}))}));
  check(b, {{"x", x({2, 6, 4, 5})}});
}

// TopK along a middle axis, largest and smallest, with ties (equal values by lower index)
// and a NaN (the largest value), on f32 and int8; values and indices both checked.
TEST_P(KernelSuite, TopKLargestAndSmallest) {
  for (int64_t largest : {1, 0})
    for (DType dtype : {DType::kF32, DType::kI8}) {
      GraphBuilder b(11);
      AttributeMap attrs = int_attribute("axis", 1);
      attrs.set_int("largest", largest);
      auto outs = b.ops("TopK", {b.input("x", dtype, {3, 7, 4}), b.constant("k", i64_tensor({3}))}, 2, attrs);
      b.output(outs[0]);
      b.output(outs[1]);
      Tensor x = random_tensor(dtype, {3, 7, 4}, 11);
      if (dtype == DType::kF32) {
        x.data<float>()[5] = x.data<float>()[9];  // a tie along the axis
        x.data<float>()[30] = std::nanf("");
      } else {
        x.data<int8_t>()[5] = x.data<int8_t>()[9];
      }
      SCOPED_TRACE(std::string(largest ? "largest " : "smallest ") + std::string(dtype_name(dtype)));
      check(b, {{"x", x}});
    }
}

// Trilu, upper and lower, with k of both signs and past the matrix, on f32 and int8.
TEST_P(KernelSuite, Trilu) {
  for (int64_t k : {int64_t(0), int64_t(2), int64_t(-1), int64_t(-9)})
    for (int upper : {1, 0}) {
      GraphBuilder b(14);
      b.output(b.op("Trilu", {b.input("x", DType::kF32, {2, 4, 6}), b.constant("k", i64_tensor({k}))},
                    int_attribute("upper", upper)));
      SCOPED_TRACE("k " + std::to_string(k) + (upper ? " upper" : " lower"));
      check(b, {{"x", x({2, 4, 6})}});
    }
  GraphBuilder b(14);
  b.output(b.op("Trilu", {b.input("x", DType::kI8, {3, 5})}));
  check(b, {{"x", random_tensor(DType::kI8, {3, 5}, 2)}});
}

// ArgMax and ArgMin over each axis, first and last of ties (int8 values tie often), a NaN.
TEST_P(KernelSuite, ArgMaxAndArgMin) {
  for (const char* op : {"ArgMax", "ArgMin"})
    for (int64_t axis : {0, 1, 2})
      for (int last : {0, 1}) {
        GraphBuilder b(13);
        AttributeMap attrs = int_attribute("axis", axis);
        attrs.set_int("select_last_index", last);
        attrs.set_int("keepdims", axis == 1 ? 0 : 1);
        b.output(b.op(op, {b.input("x", DType::kI8, {3, 4, 5})}, attrs));
        SCOPED_TRACE(std::string(op) + " axis " + std::to_string(axis) + " last " + std::to_string(last));
        check(b, {{"x", random_tensor(DType::kI8, {3, 4, 5}, 7)}});
      }
  GraphBuilder b(13);
  b.output(b.op("ArgMax", {b.input("x", DType::kF32, {3, 4})}, int_attribute("axis", 1)));
  Tensor t = x({3, 4});
  t.data<float>()[5] = NAN;
  check(b, {{"x", t}});
}

// CumSum along each axis, forward and reverse, inclusive and exclusive, f32 and int8.
TEST_P(KernelSuite, CumSum) {
  for (DType dtype : {DType::kF32, DType::kI8})
    for (int64_t axis : {0, -1})
      for (int flags = 0; flags < 4; ++flags) {
        GraphBuilder b(14);
        AttributeMap attrs = int_attribute("exclusive", flags & 1);
        attrs.set_int("reverse", flags >> 1);
        b.output(b.op("CumSum", {b.input("x", dtype, {3, 4, 5}), b.constant("axis", i64_tensor({axis}))}, attrs));
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " axis " + std::to_string(axis) + " flags " + std::to_string(flags));
        check(b, {{"x", random_tensor(dtype, {3, 4, 5}, 8)}});
      }
}

}  // namespace
}  // namespace strider
