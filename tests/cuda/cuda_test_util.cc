#include "cuda_test_util.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstring>
#include <numeric>
#include <random>
#include <set>

#include "base/float16.h"
#include "hal/cuda/cuda_kernels.h"
#include "ops/op_registry.h"
#include "reference/reference.h"

namespace strider::cuda_test {

bool have_gpu() {
  static const bool have = [] {
    int count = 0;
    return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
  }();
  return have;
}

namespace {

constexpr uint8_t kPoison = 0xA5;

// Calls fn(i, element offset) for every element of the view in row-major order.
template <typename Fn>
void for_each_element(const TensorView& v, Fn fn) {
  std::vector<int64_t> index(v.sizes.size(), 0);
  for (int64_t i = 0; i < v.num_elements(); ++i) {
    int64_t offset = 0;
    for (size_t d = 0; d < index.size(); ++d) offset += index[d] * v.strides[d];
    fn(i, offset);
    for (size_t d = index.size(); d-- > 0;) {
      if (++index[d] < v.sizes[d]) break;
      index[d] = 0;
    }
  }
}

struct Stream {
  cudaStream_t stream = nullptr;
  Stream() { cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking); }
  ~Stream() { cudaStreamDestroy(stream); }
};

std::vector<double> doubles(const Tensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.num_elements(); ++i) v.push_back(t.element_as_double(i));
  return v;
}

}  // namespace

DeviceTensor::DeviceTensor(DType dtype, const Shape& sizes, ViewLayout layout) {
  kernel_test::Placement p = kernel_test::place(sizes, layout, false);
  const int64_t esize = dtype_size(dtype);
  const int64_t bytes = p.elements * esize;
  host_.assign(size_t(bytes), std::byte{kPoison});
  EXPECT_EQ(cudaMalloc(&device_, size_t(bytes)), cudaSuccess);
  allocation_ = std::make_unique<Allocation>(9, "test", "cuda", static_cast<std::byte*>(device_), bytes, 256,
                                             StorageMode::kDevice, false);
  auto view = make_view(*allocation_, p.offset * esize, dtype, sizes, p.strides, "test view");
  EXPECT_TRUE(view.is_ok()) << view.status().to_string();
  if (view.is_ok()) view_ = *view;
}

DeviceTensor::~DeviceTensor() {
  if (device_) cudaFree(device_);
}

void DeviceTensor::upload(const Tensor* t, void* stream) {
  const int64_t esize = dtype_size(view_.dtype);
  if (t) {
    EXPECT_EQ(t->dtype(), view_.dtype);
    EXPECT_EQ(t->shape(), view_.sizes);
    for_each_element(view_, [&](int64_t i, int64_t offset) {
      std::memcpy(host_.data() + view_.byte_offset + offset * esize, t->bytes() + i * esize, size_t(esize));
    });
  }
  EXPECT_EQ(cudaMemcpyAsync(device_, host_.data(), host_.size(), cudaMemcpyHostToDevice, cudaStream_t(stream)), cudaSuccess);
}

void DeviceTensor::download(void* stream) {
  EXPECT_EQ(cudaMemcpyAsync(host_.data(), device_, host_.size(), cudaMemcpyDeviceToHost, cudaStream_t(stream)), cudaSuccess);
}

Tensor DeviceTensor::elements() const {
  Tensor t(view_.dtype, view_.sizes);
  const int64_t esize = dtype_size(view_.dtype);
  for_each_element(view_, [&](int64_t i, int64_t offset) {
    std::memcpy(t.bytes() + i * esize, host_.data() + view_.byte_offset + offset * esize, size_t(esize));
  });
  return t;
}

std::vector<int64_t> DeviceTensor::clobbered() const {
  const int64_t esize = dtype_size(view_.dtype);
  std::vector<bool> mine(host_.size(), false);
  for_each_element(view_, [&](int64_t, int64_t offset) {
    for (int64_t b = 0; b < esize; ++b) mine[size_t(view_.byte_offset + offset * esize + b)] = true;
  });
  std::vector<int64_t> bad;
  for (size_t b = 0; b < host_.size(); ++b)
    if (!mine[b] && uint8_t(host_[b]) != kPoison) bad.push_back(int64_t(b));
  return bad;
}

Tensor tensor_of(DType dtype, const Shape& shape, const std::vector<double>& values) {
  Tensor t(DType::kF64, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<double>()[i] = values.at(size_t(i));
  return kernel_test::converted(t, dtype);
}

Tensor random_magnitudes(DType dtype, const Shape& shape, uint32_t seed, double low, double high, bool positive) {
  positive = positive || dtype == DType::kU8;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> uniform(low, high);
  Tensor t(DType::kF64, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    double v = uniform(rng);
    if (!positive && (rng() & 1)) v = -v;
    t.data<double>()[i] = is_floating(dtype) ? v : std::round(v);
  }
  return kernel_test::converted(t, dtype);
}

namespace {

// Downloads the outputs of a prepared node and waits for everything on `stream`.
Status run_and_download(PreparedNode& node, cudaStream_t stream) {
  STRIDER_RETURN_IF_ERROR(node.kernel->run(QueueContext{1, stream}));
  for (auto& out : node.outputs)
    if (out) out->download(stream);
  cudaError_t error = cudaStreamSynchronize(stream);
  if (error != cudaSuccess) return device_error(std::string("kernel failed: ") + cudaGetErrorString(error));
  return node.kernel->check_completed();
}

}  // namespace

void check_node(Graph graph, const std::map<std::string, Tensor>& inputs, ViewLayout layout, const Graph* reference) {
  ASSERT_EQ(graph.num_nodes(), 1);
  InferContext context(graph, 0);
  const Node& node = graph.node(0);
  const OpSchema* schema = find_op_schema(node.domain, node.op_type);
  ASSERT_NE(schema, nullptr) << node.op_type;
  Status inferred = schema->infer(context);
  ASSERT_TRUE(inferred.is_ok()) << inferred.to_string();
  auto expected = evaluate_reference(reference ? *reference : graph, inputs);
  ASSERT_TRUE(expected.is_ok()) << expected.status().to_string();
  Stream stream;
  const std::string what = node.op_type + " (" + layout_name(layout) + ")";
  auto prepared = prepare_node(graph, inputs, layout, stream.stream);
  ASSERT_TRUE(prepared.is_ok()) << what << ": " << prepared.status().to_string();
  Status ran = run_and_download(*prepared, stream.stream);
  ASSERT_TRUE(ran.is_ok()) << what << ": " << ran.to_string();
  const auto& outputs = prepared->outputs;
  ASSERT_EQ(graph.outputs().size(), expected->outputs.size());
  for (size_t i = 0, k = 0; i < outputs.size(); ++i) {
    if (!outputs[i]) continue;
    const DeviceTensor& out = *outputs[i];
    const RefTensor& ref = expected->outputs[k++];
    std::vector<double> reference;
    for (int64_t e = 0; e < ref.num_elements(); ++e) reference.push_back(ref.element_as_double(e));
    DType dtype = out.view().dtype;
    Comparison c = compare_values(doubles(out.elements()), reference, tolerance_for(dtype), !is_floating(dtype));
    EXPECT_TRUE(c.passed) << what << " output " << i << ": " << c.reason;
    std::vector<int64_t> bad = out.clobbered();
    EXPECT_TRUE(bad.empty()) << what << " output " << i << " wrote " << bad.size() << " bytes outside its view, first "
                             << (bad.empty() ? 0 : bad[0]);
  }
}

void check_node_all_layouts(const Graph& graph, const std::map<std::string, Tensor>& inputs, const Graph* reference) {
  for (ViewLayout layout : kAllLayouts) check_node(graph, inputs, layout, reference);
}

// cuDNN and cuBLASLt handles for kernels that call the libraries (convolutions, matmuls),
// made once per process as a CudaDevice makes them once per device.
cuda::CudaContext library_context() {
  static cudnnHandle_t dnn = [] {
    cudnnHandle_t h = nullptr;
    EXPECT_EQ(cudnnCreate(&h), CUDNN_STATUS_SUCCESS);
    return h;
  }();
  static cublasLtHandle_t lt = [] {
    cublasLtHandle_t h = nullptr;
    EXPECT_EQ(cublasLtCreate(&h), CUBLAS_STATUS_SUCCESS);
    return h;
  }();
  cuda::CudaContext context;
  context.cudnn = dnn;
  context.cublaslt = lt;
  return context;
}

Result<PreparedNode> prepare_node(const Graph& graph, const std::map<std::string, Tensor>& inputs, ViewLayout layout,
                                  void* stream) {
  const Node& node = graph.node(0);
  PreparedNode prepared;
  KernelRequest request{graph, node, {}, {}};
  for (ValueId id : node.inputs) {
    if (id == kNoValue) {
      request.inputs.emplace_back();
      continue;
    }
    const Value& v = graph.value(id);
    auto it = inputs.find(v.name);
    if (!v.is_constant() && it == inputs.end()) return invalid_argument("no value for input " + v.name);
    const Tensor& value = v.is_constant() ? *v.constant : it->second;
    prepared.inputs.push_back(std::make_unique<DeviceTensor>(v.dtype, v.shape, v.is_constant() ? ViewLayout::kDense : layout));
    prepared.inputs.back()->upload(&value, stream);
    request.inputs.push_back(prepared.inputs.back()->view());
  }
  for (ValueId id : node.outputs) {
    if (id == kNoValue) {
      request.outputs.emplace_back();
      prepared.outputs.push_back(nullptr);
      continue;
    }
    const Value& v = graph.value(id);
    prepared.outputs.push_back(std::make_unique<DeviceTensor>(v.dtype, v.shape, layout));
    prepared.outputs.back()->upload(nullptr, stream);  // poison only
    request.outputs.push_back(prepared.outputs.back()->view());
  }
  for (const auto* views : {&request.inputs, &request.outputs})
    for (const TensorView& v : *views) prepared.bytes += v.allocation ? v.num_elements() * dtype_size(v.dtype) : 0;
  STRIDER_ASSIGN_OR_RETURN(prepared.kernel, cuda::create_kernel(request, library_context()));
  return prepared;
}

Result<std::vector<Tensor>> run_dense(const Graph& graph, const std::map<std::string, Tensor>& inputs) {
  Stream stream;
  STRIDER_ASSIGN_OR_RETURN(PreparedNode prepared, prepare_node(graph, inputs, ViewLayout::kDense, stream.stream));
  STRIDER_RETURN_IF_ERROR(run_and_download(prepared, stream.stream));
  std::vector<Tensor> result;
  for (const auto& out : prepared.outputs) result.push_back(out ? out->elements() : Tensor());
  return result;
}

Tensor f32(Shape shape, std::vector<float> v) { return Tensor::from_values<float>(DType::kF32, std::move(shape), v); }

}  // namespace strider::cuda_test
