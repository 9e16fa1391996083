// The public API over the caller's memory (strider/tensor.h, strider/session.h): borrowed
// tensors are views, not copies; a tensor that adopted a host buffer owns it (copies copy
// the bytes, moves move the buffer, the last owner releases it once); a run writes its outputs into the caller's tensors in
// place; a wrong output tensor is refused before anything runs, leaving it untouched.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>
#include <thread>

#include "exec/session_internal.h"
#include "onnx/tensor_proto.h"
#include "strider/io_binding.h"
#include "strider/model.h"
#include "strider/reference.h"
#include "strider/session.h"
#include "strider/tools.h"

namespace strider {
namespace {
namespace fs = std::filesystem;

const fs::path kModel = fs::path(STRIDER_SOURCE_DIR) / "models/seed/C2f_split_op17";

Tensor read(const char* file) {
  auto t = read_tensor_pb((kModel / "test_data_set_0" / file).string());
  EXPECT_TRUE(t.is_ok()) << t.status().to_string();
  return t.is_ok() ? *t : Tensor();
}

std::unique_ptr<Session> load(DType dtype = DType::kF32, Layout layout = Layout::kAuto) {
  SessionOptions options;
  options.dtype = dtype;
  options.layout = layout;
  auto session = Session::load((kModel / "model.onnx").string(), options);
  EXPECT_TRUE(session.is_ok()) << session.status().to_string();
  return session.is_ok() ? std::move(session).value() : nullptr;
}

// A HostBuffer of `bytes` whose release counts into `released` (and frees the memory).
HostBuffer counted_buffer(size_t bytes, int* released) {
  return HostBuffer(new std::byte[bytes], bytes, [released](std::byte* p) {
    ++*released;
    delete[] p;
  });
}

TEST(AdoptedTensor, OwnsItsBufferThroughCopiesAndMoves) {
  int released = 0;
  {
    HostBuffer buffer = counted_buffer(4 * 6 + 8, &released);  // larger than needed: allowed
    std::byte* memory = buffer.data();
    Result<Tensor> adopted = Tensor::adopt(DType::kF32, {2, 3}, std::move(buffer));
    ASSERT_TRUE(adopted.is_ok()) << adopted.status().to_string();
    Tensor t = std::move(*adopted);
    EXPECT_EQ(t.bytes(), memory) << "the tensor's bytes are the buffer's";
    EXPECT_TRUE(t.owns_bytes());
    EXPECT_EQ(t.byte_size(), 24u) << "its own size, not the buffer's";
    std::mt19937 rng(34);
    for (int i = 0; i < 6; ++i) t.data<float>()[i] = float(rng() % 1000) / 7.0f;

    Tensor copy = t;  // a copy owns a copy of the bytes in ordinary memory
    EXPECT_NE(copy.bytes(), memory);
    EXPECT_TRUE(copy.owns_bytes());
    EXPECT_EQ(std::memcmp(copy.bytes(), t.bytes(), 24), 0);
    copy.data<float>()[0] = -1.0f;
    EXPECT_NE(t.data<float>()[0], -1.0f) << "nothing aliases an owning tensor";

    Tensor moved = std::move(t);  // a move hands the buffer on
    EXPECT_EQ(moved.bytes(), memory);
    EXPECT_EQ(t.byte_size(), 0u) << "the moved-from tensor points at nothing";
    Tensor assigned;
    assigned = std::move(moved);
    EXPECT_EQ(assigned.bytes(), memory);
    Tensor copy_assigned;
    copy_assigned = assigned;
    EXPECT_NE(copy_assigned.bytes(), memory);
    EXPECT_EQ(std::memcmp(copy_assigned.bytes(), assigned.bytes(), 24), 0);
    EXPECT_EQ(released, 0) << "released while a tensor still held it";
    assigned = Tensor(DType::kF32, {1});  // overwriting the last owner releases it
    EXPECT_EQ(released, 1);
  }
  EXPECT_EQ(released, 1) << "released exactly once";
}

TEST(AdoptedTensor, RefusesABufferTooSmall) {
  int released = 0;
  Result<Tensor> adopted = Tensor::adopt(DType::kF32, {2, 3}, counted_buffer(23, &released));
  ASSERT_FALSE(adopted.is_ok());
  EXPECT_EQ(adopted.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(released, 1) << "a refused buffer is still released";
}

TEST(Tensor, BorrowIsAViewOfTheCallersBytes) {
  std::vector<float> memory(6);
  auto t = Tensor::borrow(DType::kF32, {2, 3}, memory.data(), memory.size() * sizeof(float));
  ASSERT_TRUE(t.is_ok());
  EXPECT_FALSE(t->owns_bytes());
  EXPECT_EQ(t->data<float>(), memory.data());
  memory[4] = 2.5f;
  EXPECT_EQ(t->data<float>()[4], 2.5f);
  Tensor copy = *t;  // another view of the same bytes
  EXPECT_EQ(copy.data<float>(), memory.data());
  EXPECT_EQ(Tensor::borrow(DType::kF32, {2, 3}, memory.data(), 20).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Tensor::borrow(DType::kF32, {2, 3}, nullptr, 24).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Tensor::borrow(DType::kF32, {-1, 3}, memory.data(), 24).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Tensor(DType::kF32, {2}).owns_bytes());
}

TEST(Session, WritesOutputsIntoTheCallersMemory) {
  auto session = load();
  ASSERT_NE(session, nullptr);
  Tensor input = read("input_0.pb"), expected = read("output_0.pb");
  std::vector<float> input_memory(size_t(input.num_elements()));
  std::memcpy(input_memory.data(), input.bytes(), input.byte_size());
  std::vector<float> output_memory(size_t(expected.num_elements()), -7.0f);
  std::vector<Tensor> inputs{*Tensor::borrow(DType::kF32, input.shape(), input_memory.data(), input.byte_size())};
  std::vector<Tensor> outputs{
      *Tensor::borrow(DType::kF32, expected.shape(), output_memory.data(), expected.byte_size())};
  for (int run = 0; run < 2; ++run) {
    Status ran = session->run(inputs, outputs);
    ASSERT_TRUE(ran.is_ok()) << ran.to_string();
    EXPECT_EQ(outputs[0].data<float>(), output_memory.data()) << "the output tensor was replaced, not written";
    for (size_t i = 0; i < output_memory.size(); ++i)
      ASSERT_NEAR(output_memory[i], expected.data<float>()[i], 1e-4) << "element " << i;
    std::fill(output_memory.begin(), output_memory.end(), -7.0f);  // the second run writes them all again
  }
  // Owned output tensors are written in place too.
  std::vector<Tensor> owned{Tensor(DType::kF32, expected.shape())};
  const std::byte* address = owned[0].bytes();
  ASSERT_TRUE(session->run(inputs, owned).is_ok());
  EXPECT_EQ(owned[0].bytes(), address);
  EXPECT_EQ(std::memcmp(owned[0].bytes(), session->run(inputs)->at(0).bytes(), owned[0].byte_size()), 0);
}

// Timing reruns the steps on the inputs of the last run: before any run there are none
// (the steps would read whatever the arena held), so it is refused until a run succeeded.
TEST(Session, TimingTheStepsNeedsARunFirst) {
  auto session = load();
  ASSERT_NE(session, nullptr);
  for (Status before : {time_device_steps(*session).status(), time_each_step(*session).status()}) {
    EXPECT_EQ(before.code(), StatusCode::kInvalidArgument) << before.to_string();
    EXPECT_NE(before.message().find("has not run yet"), std::string::npos) << before.to_string();
  }
  ASSERT_TRUE(session->run({read("input_0.pb")}).is_ok());
  EXPECT_TRUE(time_device_steps(*session).is_ok());
  EXPECT_TRUE(time_each_step(*session).is_ok());
}

// SessionOptions::winograd: the YOLOv8 detector's 3x3 convolutions of 32 channels run as
// Winograd by default and as oneDNN's direct convolution with it off; both match the
// test data the model came with.
TEST(Session, WinogradCanBeTurnedOff) {
  const fs::path model = fs::path(STRIDER_SOURCE_DIR) / "models/real/YOLOv8ci_128_split_op17";
  auto input = read_tensor_pb((model / "test_data_set_0/input_0.pb").string());
  auto expected = read_tensor_pb((model / "test_data_set_0/output_0.pb").string());
  ASSERT_TRUE(input.is_ok() && expected.is_ok());
  for (bool winograd : {true, false}) {
    SCOPED_TRACE(winograd ? "winograd on" : "winograd off");
    SessionOptions options;
    options.winograd = winograd;
    options.layout = Layout::kNhwc;
    auto session = Session::load((model / "model.onnx").string(), options);
    ASSERT_TRUE(session.is_ok()) << session.status().to_string();
    EXPECT_EQ(plan_text(**session).find("winograd") != std::string::npos, winograd);
    auto out = (*session)->run({*input});
    ASSERT_TRUE(out.is_ok()) << out.status().to_string();
    for (int64_t i = 0; i < expected->num_elements(); ++i)
      ASSERT_NEAR((*out)[0].data<float>()[i], expected->data<float>()[i], 1e-3 * (1 + std::fabs(expected->data<float>()[i])))
          << "element " << i;
  }
}

TEST(Session, RefusesAWrongOutputTensorBeforeRunning) {
  auto session = load();
  ASSERT_NE(session, nullptr);
  Tensor input = read("input_0.pb"), expected = read("output_0.pb");
  Shape wrong_shape = expected.shape();
  wrong_shape[1] += 1;
  std::vector<float> memory(size_t(Tensor(DType::kF32, wrong_shape).num_elements()), -7.0f);
  std::vector<Tensor> outputs{*Tensor::borrow(DType::kF32, wrong_shape, memory.data(), memory.size() * 4)};
  Status ran = session->run({input}, outputs);
  EXPECT_EQ(ran.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(ran.message().find("output '" + session->outputs()[0].name + "'"), std::string::npos) << ran.message();
  for (float v : memory) ASSERT_EQ(v, -7.0f) << "a refused run wrote the caller's memory";
  std::vector<Tensor> wrong_dtype{Tensor(DType::kF64, expected.shape())};
  EXPECT_EQ(session->run({input}, wrong_dtype).code(), StatusCode::kInvalidArgument);
  std::vector<Tensor> none;
  EXPECT_EQ(session->run({input}, none).code(), StatusCode::kInvalidArgument);
}

// A bf16 session still takes and gives the model's f32: its outputs are converted into the
// caller's f32 tensors.
TEST(Session, Bf16SessionConvertsIntoTheCallersF32) {
  auto session = load(DType::kBF16);
  ASSERT_NE(session, nullptr);
  Tensor input = read("input_0.pb"), expected = read("output_0.pb");
  std::vector<float> memory(size_t(expected.num_elements()), -7.0f);
  std::vector<Tensor> outputs{*Tensor::borrow(DType::kF32, expected.shape(), memory.data(), expected.byte_size())};
  ASSERT_TRUE(session->run({input}, outputs).is_ok());
  auto fresh = session->run({input});
  ASSERT_TRUE(fresh.is_ok());
  EXPECT_EQ(std::memcmp(memory.data(), (*fresh)[0].bytes(), expected.byte_size()), 0);
}

// Empty outputs of a bf16 session converted into the caller's empty f32 tensors, for a
// static plan (Relu of [3, 0]) and a staged one (the fuzzers' Compress of a [3, 2, 0]
// input): nothing to copy, and an empty tensor's bytes may be null, which memcpy may not be
// given even for zero bytes (UBSan in CI's ASan build).
TEST(Session, Bf16SessionConvertsEmptyOutputsIntoTheCallers) {
  SessionOptions options;
  options.dtype = DType::kBF16;
  const fs::path corpus = fs::path(STRIDER_SOURCE_DIR) / "tests/corpus/model";
  struct Case {
    const char* model;
    std::vector<Tensor> inputs;
    Shape out;
  };
  const Case cases[] = {
      {"relu_of_an_empty_input.onnx", {Tensor(DType::kF32, {3, 0})}, {3, 0}},
      {"compress_along_an_axis_of_an_empty_input.onnx",
       {Tensor(DType::kF32, {3, 2, 0}), Tensor::from_values<uint8_t>(DType::kBool, {3}, std::vector<uint8_t>{1, 0, 1})},
       {2, 2, 0}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.model);
    auto session = Session::load((corpus / c.model).string(), options);
    ASSERT_TRUE(session.is_ok()) << session.status().to_string();
    float unused = 0;
    std::vector<Tensor> outputs{*Tensor::borrow(DType::kF32, c.out, &unused, 0)};
    ASSERT_TRUE((*session)->run(c.inputs, outputs).is_ok());
    EXPECT_EQ(outputs[0].shape(), c.out);
  }
}

// Runs of one Session from several threads take turns: each thread's outputs, written into
// its own memory, are what one thread alone gets (TSan checks this in CI).
TEST(Session, ThreadsWriteTheirOwnOutputs) {
  auto session = load();
  ASSERT_NE(session, nullptr);
  Tensor input = read("input_0.pb"), expected = read("output_0.pb");
  std::vector<std::vector<float>> memory(4, std::vector<float>(size_t(expected.num_elements())));
  std::vector<int> failures(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      Tensor mine(DType::kF32, input.shape());  // a scaled copy: each thread's answer differs
      const float scale = 1.0f + 0.25f * float(t);
      for (int64_t i = 0; i < input.num_elements(); ++i) mine.data<float>()[i] = input.data<float>()[i] * scale;
      std::vector<Tensor> outputs{*Tensor::borrow(DType::kF32, expected.shape(), memory[size_t(t)].data(),
                                                  expected.byte_size())};
      for (int k = 0; k < 5; ++k) failures[size_t(t)] += !session->run({mine}, outputs).is_ok();
    });
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < 4; ++t) {
    EXPECT_EQ(failures[size_t(t)], 0);
    Tensor mine(DType::kF32, input.shape());
    const float scale = 1.0f + 0.25f * float(t);
    for (int64_t i = 0; i < input.num_elements(); ++i) mine.data<float>()[i] = input.data<float>()[i] * scale;
    auto alone = session->run({mine});
    ASSERT_TRUE(alone.is_ok());
    EXPECT_EQ(std::memcmp(memory[size_t(t)].data(), (*alone)[0].bytes(), expected.byte_size()), 0) << "thread " << t;
  }
}

// 64-byte aligned host memory for binding (std::vector's is only 16-byte aligned at best).
struct AlignedFloats {
  explicit AlignedFloats(size_t n) : bytes(n * sizeof(float) + 64) {
    data = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(bytes.data()) + 63) / 64 * 64);
  }
  std::vector<std::byte> bytes;
  float* data;
};

MemoryRef host_ref(float* data, const Shape& shape) { return MemoryRef{data, DType::kF32, shape, -1}; }

// The kernels read the bound input and write the bound output where they are: the bound
// addresses are the caller's, a change to the input between runs (no rebinding) shows in
// the output, and the same addresses make no new kernels.
TEST(IoBinding, KernelsUseTheCallersMemory) {
  SessionOptions options;
  options.layout = Layout::kNchw;
  auto loaded = Session::load((kModel / "model.onnx").string(), options);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  Session& session = **loaded;
  Tensor input = read("input_0.pb"), expected = read("output_0.pb");
  AlignedFloats x(size_t(input.num_elements())), y(size_t(expected.num_elements()));
  std::memcpy(x.data, input.bytes(), input.byte_size());
  IoBinding binding;
  binding.bind_input(session.inputs()[0].name, host_ref(x.data, input.shape()));
  binding.bind_output(session.outputs()[0].name, host_ref(y.data, expected.shape()));
  Status ran = session.run(binding);
  ASSERT_TRUE(ran.is_ok()) << ran.to_string();
  for (int64_t i = 0; i < expected.num_elements(); ++i) ASSERT_NEAR(y.data[i], expected.data<float>()[i], 1e-4) << i;
  EXPECT_EQ(bound_addresses(session), (std::vector<const void*>{x.data, y.data}));
  // New values in the same memory: the next run reads them there.
  Tensor doubled(DType::kF32, input.shape());
  for (int64_t i = 0; i < input.num_elements(); ++i) doubled.data<float>()[i] = x.data[i] = 2 * input.data<float>()[i];
  ASSERT_TRUE(session.run(binding).is_ok());
  auto want = session.run({doubled});
  ASSERT_TRUE(want.is_ok());
  EXPECT_EQ(std::memcmp(y.data, (*want)[0].bytes(), expected.byte_size()), 0);
  EXPECT_EQ(bound_variants_made(session), 1) << "the same addresses made new kernels";
}

TEST(IoBinding, RefusesWhatCannotBeBoundNamingIt) {
  auto session = load(DType::kF32, Layout::kNchw);
  ASSERT_NE(session, nullptr);
  Tensor input = read("input_0.pb"), expected = read("output_0.pb");
  const std::string in = session->inputs()[0].name, out = session->outputs()[0].name;
  AlignedFloats x(size_t(input.num_elements())), y(size_t(expected.num_elements()));
  IoBinding b;
  b.bind_input(in, host_ref(x.data, input.shape()));
  Status missing = session->run(b);
  EXPECT_EQ(missing.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(missing.message(), "output '" + out + "' is not bound");
  b.bind_output(out, host_ref(y.data + 1, expected.shape()));  // 4-byte aligned only
  EXPECT_NE(session->run(b).message().find("aligned"), std::string::npos);
  b.bind_output(out, host_ref(x.data, expected.shape()));  // over the input
  EXPECT_NE(session->run(b).message().find("overlaps"), std::string::npos);
  b.bind_output(out, MemoryRef{y.data, DType::kF32, expected.shape(), 0});  // cuda:0 memory on a cpu session
  EXPECT_NE(session->run(b).message().find("cuda:0"), std::string::npos);
  b.bind_output(out, MemoryRef{y.data, DType::kF64, expected.shape(), -1});
  EXPECT_EQ(session->run(b).code(), StatusCode::kInvalidArgument);
  b.bind_output(out, host_ref(y.data, {1}));
  EXPECT_EQ(session->run(b).code(), StatusCode::kInvalidArgument);
  b.bind_output("nope", host_ref(y.data, expected.shape()));
  EXPECT_EQ(session->run(b).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bound_variants_made(*session), 0) << "a refused binding made kernels";
}

// A value the caller's memory cannot hold as the session does (a bf16 session's f32 input
// and output; a channels-last plan's strided input) is copied between the caller's memory
// and the session's on the device: the binding gives what run() gives, bit for bit.
TEST(IoBinding, ConvertedAndStridedValuesAreCopiedOnTheDevice) {
  Tensor input = read("input_0.pb"), expected = read("output_0.pb");
  for (auto [dtype, layout] : {std::pair{DType::kBF16, Layout::kNchw}, std::pair{DType::kF32, Layout::kNhwc},
                               std::pair{DType::kBF16, Layout::kNhwc}}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + std::string(layout_name(layout)));
    auto session = load(dtype, layout);
    ASSERT_NE(session, nullptr);
    AlignedFloats x(size_t(input.num_elements())), y(size_t(expected.num_elements()));
    std::memcpy(x.data, input.bytes(), input.byte_size());
    IoBinding binding;
    binding.bind_input(session->inputs()[0].name, host_ref(x.data, input.shape()));
    binding.bind_output(session->outputs()[0].name, host_ref(y.data, expected.shape()));
    for (int k = 0; k < 2; ++k) {  // the second run on the same variant
      for (int64_t i = 0; i < input.num_elements(); ++i) x.data[i] = float(k + 1) * input.data<float>()[i];
      Status ran = session->run(binding);
      ASSERT_TRUE(ran.is_ok()) << ran.to_string();
      auto want = session->run(std::vector<Tensor>{*Tensor::borrow(DType::kF32, input.shape(), x.data, input.byte_size())});
      ASSERT_TRUE(want.is_ok());
      EXPECT_EQ(std::memcmp(y.data, (*want)[0].bytes(), expected.byte_size()), 0) << "run " << k;
    }
    EXPECT_EQ(bound_variants_made(*session), 1);
  }
}

// Outputs strider allocates: the run's values, in memory the caller then holds. A held
// output is never written by a later run (that run gets other memory); a dropped one is
// reused, so a loop that drops each result keeps one address and makes no new kernels.
TEST(IoBinding, OutputsStriderAllocatesAreTheCallersUntilDropped) {
  auto session = load(DType::kF32, Layout::kNchw);
  ASSERT_NE(session, nullptr);
  Tensor input = read("input_0.pb"), expected = read("output_0.pb");
  const std::string in = session->inputs()[0].name, out = session->outputs()[0].name;
  AlignedFloats x(size_t(input.num_elements()));
  std::memcpy(x.data, input.bytes(), input.byte_size());
  IoBinding binding;
  binding.bind_input(in, host_ref(x.data, input.shape()));
  binding.bind_output_to_device(out);
  EXPECT_FALSE(binding.device_outputs().at(out).to_host().is_ok()) << "nothing ran yet";
  ASSERT_TRUE(session->run(binding).is_ok());
  DeviceOutput first = binding.device_outputs().at(out);
  ASSERT_EQ(first.memory().shape, expected.shape());
  EXPECT_EQ(first.memory().device_ordinal, -1);
  auto first_values = first.to_host();
  ASSERT_TRUE(first_values.is_ok());
  for (int64_t i = 0; i < expected.num_elements(); ++i)
    ASSERT_NEAR(static_cast<const float*>(first.memory().data)[i], expected.data<float>()[i], 1e-4) << i;
  // Held across a run on new input values: the second result lands elsewhere.
  for (int64_t i = 0; i < input.num_elements(); ++i) x.data[i] = 2 * input.data<float>()[i];
  ASSERT_TRUE(session->run(binding).is_ok());
  DeviceOutput second = binding.device_outputs().at(out);
  EXPECT_NE(second.memory().data, first.memory().data);
  EXPECT_EQ(std::memcmp(first.memory().data, first_values->bytes(), first_values->byte_size()), 0)
      << "a run wrote an output the caller still holds";
  auto doubled = session->run(std::vector<Tensor>{*Tensor::borrow(DType::kF32, input.shape(), x.data, input.byte_size())});
  ASSERT_TRUE(doubled.is_ok());
  EXPECT_EQ(std::memcmp(second.memory().data, (*doubled)[0].bytes(), expected.byte_size()), 0);
  // Dropped: reused from then on. The binding itself holds the latest result, so a loop
  // alternates between two allocations, and two sets of kernels serve every run.
  first = DeviceOutput();
  second = DeviceOutput();
  ASSERT_TRUE(session->run(binding).is_ok());
  ASSERT_TRUE(session->run(binding).is_ok());
  const int64_t variants = bound_variants_made(*session);
  std::set<const void*> seen;
  for (int k = 0; k < 6; ++k) {
    ASSERT_TRUE(session->run(binding).is_ok());
    seen.insert(binding.device_outputs().at(out).memory().data);
  }
  EXPECT_EQ(seen.size(), 2u) << "dropped outputs were not reused";
  EXPECT_EQ(bound_variants_made(*session), variants) << "runs on reused memory made new kernels";
}

// A Model is imported once; sessions made from it run as Session::load's do, and the
// reference on it gives what the expected outputs hold. An input that decides a shape (a
// Reshape's target) is listed, since a session takes it as a constant.
TEST(Model, SessionsFromOneImportAndTheReferenceOnIt) {
  auto model = Model::load((kModel / "model.onnx").string());
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  auto loaded = load();
  ASSERT_NE(loaded, nullptr);
  ASSERT_EQ((*model)->inputs().size(), loaded->inputs().size());
  EXPECT_EQ((*model)->inputs()[0].name, loaded->inputs()[0].name);
  EXPECT_TRUE((*model)->shape_inputs().empty());
  auto a = Session::create(**model), b = Session::create(**model);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  Tensor input = read("input_0.pb"), expected = read("output_0.pb");
  auto want = loaded->run({input});
  auto got_a = (*a)->run({input}), got_b = (*b)->run({input});
  ASSERT_TRUE(want.is_ok() && got_a.is_ok() && got_b.is_ok());
  EXPECT_EQ(std::memcmp((*got_a)[0].bytes(), (*want)[0].bytes(), expected.byte_size()), 0);
  EXPECT_EQ(std::memcmp((*got_b)[0].bytes(), (*want)[0].bytes(), expected.byte_size()), 0);
  auto reference = evaluate_model_reference(**model, {{(*model)->inputs()[0].name, input}}, DType::kF32);
  ASSERT_TRUE(reference.is_ok()) << reference.status().to_string();
  ASSERT_EQ(reference->outputs[0].size(), size_t(expected.num_elements()));
  for (int64_t i = 0; i < expected.num_elements(); ++i)
    ASSERT_NEAR(reference->outputs[0][size_t(i)], expected.data<float>()[i], 1e-4) << i;
  EXPECT_TRUE(reference->values.empty()) << "values are kept only when asked";

  const fs::path reshape = fs::path(STRIDER_SOURCE_DIR) / "tests/conformance/onnx-node-tests/test_reshape_extended_dims/model.onnx";
  auto with_shape_input = Model::load(reshape.string());
  ASSERT_TRUE(with_shape_input.is_ok()) << with_shape_input.status().to_string();
  EXPECT_EQ((*with_shape_input)->shape_inputs(), std::vector<std::string>{"shape"});
  auto missing = Model::load("/nonexistent/model.onnx");
  EXPECT_FALSE(missing.is_ok());
}

}  // namespace
}  // namespace strider
