// The real models end to end (models/real/*: the YOLOv8-style detector, MobileNetV2, the WaveNet
// stack and the gated chains; models/zoo/*: the transformers and hybrids of issue 11, BERT, GPT-2,
// Llama, T5, Whisper, a KV-cache decoder, ViT, Swin, ConvNeXt, MobileNetV3, EfficientNet,
// MobileViT; all CI-sized): every model x device (cpu; sim and cuda with two queues and the
// sanitizer; cuda skips without a GPU) x layout (nchw, and nhwc where the model has a
// convolution) x dtype (f32, bf16). A model has as many inputs as its folder's input_<k>.pb.
//   f32: every output within 1e-4 of its scale of torch's f32 output and of the float64 reference;
//   bf16: every output's cosine to the float64 reference at most 0.002 below the cosine torch's own
//         bf16 run reaches on the same input (torch_bf16/ beside the model);
//   classifiers (one output of shape 1xK): argmax and top-5 equal the reference's in f32, argmax
//   in bf16.
// The float64 reference of each model is computed once and shared by its cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <numeric>

#include "strider/compare.h"
#include "exec/session_internal.h"
#include "hal/cuda_device_factory.h"
#include "onnx/importer.h"
#include "support/test_util.h"
#include "onnx/tensor_proto.h"
#include "reference/reference.h"

namespace strider {
namespace {
namespace fs = std::filesystem;

// STRIDER_REAL_MODELS names other folders of the same form, separated by ':', to sweep
// instead: generate.py --real --full's --full-out, or a copy of the tree on a GPU machine.
std::vector<fs::path> model_folders() {
  const char* other = std::getenv("STRIDER_REAL_MODELS");
  if (other && *other) {
    std::vector<fs::path> folders;
    std::string list = other;
    for (size_t start = 0, end; start <= list.size(); start = end + 1) {
      end = std::min(list.find(':', start), list.size());
      if (end > start) folders.emplace_back(list.substr(start, end - start));
    }
    return folders;
  }
  return {fs::path(STRIDER_SOURCE_DIR) / "models/real", fs::path(STRIDER_SOURCE_DIR) / "models/zoo"};
}

// Model name -> its folder.
const std::map<std::string, fs::path>& real_models() {
  static const std::map<std::string, fs::path> models = [] {
    std::map<std::string, fs::path> found;
    for (const fs::path& folder : model_folders())
      for (const auto& entry : fs::directory_iterator(folder))
        if (fs::exists(entry.path() / "model.onnx")) found[entry.path().filename().string()] = entry.path();
    return found;
  }();
  return models;
}

template <typename T>
std::vector<double> values_of(const T& t) {
  std::vector<double> v(static_cast<size_t>(t.num_elements()));
  for (int64_t i = 0; i < t.num_elements(); ++i) v[static_cast<size_t>(i)] = t.element_as_double(i);
  return v;
}

// What a model's folder holds, read once: the inputs (in graph order), torch's f32 and bf16
// outputs, and the float64 reference's outputs on those inputs.
struct ModelData {
  Graph graph;
  std::vector<Tensor> inputs;
  std::vector<std::vector<double>> torch_f32, torch_bf16, reference;
};

bool has_convolution(const Graph& graph) {
  for (NodeId id = 0; id < graph.num_nodes(); ++id)
    if (graph.node(id).op_type == "Conv") return true;
  return false;
}

Result<ModelData> load_model_data(const std::string& name) {
  fs::path dir = real_models().at(name);
  ModelData data;
  STRIDER_ASSIGN_OR_RETURN(data.graph, import_model_file((dir / "model.onnx").string()));
  std::map<std::string, Tensor> feeds;
  for (size_t k = 0; k < data.graph.inputs().size(); ++k) {
    std::string file = "test_data_set_0/input_" + std::to_string(k) + ".pb";
    STRIDER_ASSIGN_OR_RETURN(Tensor input, read_tensor_pb((dir / file).string()));
    feeds[data.graph.value(data.graph.inputs()[k]).name] = input;
    data.inputs.push_back(std::move(input));
  }
  for (size_t k = 0; k < data.graph.outputs().size(); ++k) {
    std::string file = "output_" + std::to_string(k) + ".pb";
    STRIDER_ASSIGN_OR_RETURN(Tensor f32, read_tensor_pb((dir / "test_data_set_0" / file).string()));
    STRIDER_ASSIGN_OR_RETURN(Tensor bf16, read_tensor_pb((dir / "torch_bf16" / file).string()));
    data.torch_f32.push_back(values_of(f32));
    data.torch_bf16.push_back(values_of(bf16));
  }
  STRIDER_ASSIGN_OR_RETURN(ReferenceResult reference, evaluate_reference(data.graph, feeds));
  for (const RefTensor& output : reference.outputs) data.reference.push_back(values_of(output));
  return data;
}

const ModelData& model_data(const std::string& name) {
  static std::map<std::string, ModelData> cache;
  auto it = cache.find(name);
  if (it == cache.end()) {
    auto loaded = load_model_data(name);
    if (!loaded.is_ok()) throw std::runtime_error(name + ": " + loaded.status().to_string());
    it = cache.emplace(name, std::move(*loaded)).first;
  }
  return it->second;
}

struct RealCase {
  std::string model, device, layout;
};
void PrintTo(const RealCase& c, std::ostream* os) { *os << c.model << " " << c.device << " " << c.layout; }

SessionOptions options_for(const RealCase& c, DType dtype) {
  SessionOptions options;
  options.device = c.device;
  options.layout = *parse_layout(c.layout);
  options.dtype = dtype;
  options.poison_memory = true;  // an element no kernel writes stays NaN and fails the check
  if (c.device != "cpu") {
    options.queues = 2;
    options.sanitize = true;
    options.sim_seed = 7;
  }
  return options;
}

std::vector<std::vector<double>> run_case(const RealCase& c, const ModelData& data, DType dtype) {
  auto session = create_session(data.graph, options_for(c, dtype));
  if (!session.is_ok()) throw std::runtime_error(session.status().to_string());
  auto outputs = (*session)->run(data.inputs);
  if (!outputs.is_ok()) throw std::runtime_error(outputs.status().to_string());
  std::vector<std::vector<double>> values;
  for (const Tensor& output : *outputs) values.push_back(values_of(output));
  return values;
}

std::vector<size_t> top_k(const std::vector<double>& v, size_t k) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] > v[b]; });
  order.resize(std::min(k, order.size()));
  return order;
}

bool is_classifier(const ModelData& data) {
  return data.reference.size() == 1 && data.graph.value(data.graph.outputs()[0]).shape.size() == 2;
}

class RealModel : public ::testing::TestWithParam<RealCase> {
 protected:
  void SetUp() override {
    if (GetParam().device == "cuda" && !create_cuda_device(0, DeviceOptions{}).is_ok())
      GTEST_SKIP() << "no CUDA device: the cuda rows run on a GPU only";
  }
};

TEST_P(RealModel, F32MatchesTorchAndTheFloat64Reference) {
  const ModelData& data = model_data(GetParam().model);
  auto outputs = run_case(GetParam(), data, DType::kF32);
  ASSERT_EQ(outputs.size(), data.reference.size());
  Tolerance f32{1e-4, 0.0, 0.9999};
  for (size_t k = 0; k < outputs.size(); ++k) {
    Comparison vs_reference = compare_values(outputs[k], data.reference[k], f32, false);
    EXPECT_TRUE(vs_reference.passed) << "output " << k << " vs reference: " << vs_reference.reason;
    Comparison vs_torch = compare_values(outputs[k], data.torch_f32[k], f32, false);
    EXPECT_TRUE(vs_torch.passed) << "output " << k << " vs torch: " << vs_torch.reason;
    std::printf("[ real ] %s %s %s f32 out%zu max_abs_err %.3g cosine %.9f\n", GetParam().model.c_str(),
                GetParam().device.c_str(), GetParam().layout.c_str(), k, vs_reference.max_abs_error,
                vs_reference.cosine);
  }
  if (is_classifier(data)) {
    EXPECT_EQ(top_k(outputs[0], 5), top_k(data.reference[0], 5)) << "top-5 differs from the reference";
  }
}

TEST_P(RealModel, BF16CosineWithin0002OfTorchBf16) {
  const ModelData& data = model_data(GetParam().model);
  auto outputs = run_case(GetParam(), data, DType::kBF16);
  ASSERT_EQ(outputs.size(), data.reference.size());
  Tolerance any{1e30, 0.0, -1.0};  // only the cosine is judged here
  for (size_t k = 0; k < outputs.size(); ++k) {
    Comparison ours = compare_values(outputs[k], data.reference[k], any, false);
    Comparison torch = compare_values(data.torch_bf16[k], data.reference[k], any, false);
    EXPECT_GE(ours.cosine, torch.cosine - 0.002) << "output " << k << ": torch bf16 reaches " << torch.cosine;
    // bf16 must actually be used: the result differs from the reference.
    EXPECT_GT(ours.max_abs_error, 0.0) << "output " << k;
    std::printf("[ real ] %s %s %s bf16 out%zu max_abs_err %.3g cosine %.9f (torch bf16 %.9f)\n",
                GetParam().model.c_str(), GetParam().device.c_str(), GetParam().layout.c_str(), k,
                ours.max_abs_error, ours.cosine, torch.cosine);
  }
  if (is_classifier(data)) {
    EXPECT_EQ(top_k(outputs[0], 1), top_k(data.reference[0], 1)) << "argmax differs from the reference";
  }
}

std::vector<RealCase> cases() {
  std::vector<RealCase> all;
  size_t group = 0;
  for (const auto& [model, folder] : real_models()) {
    if (!strider::testing::group_in_this_shard(group++)) continue;  // another shard's model
    auto graph = import_model_file((folder / "model.onnx").string());
    bool convolutional = !graph.is_ok() || has_convolution(*graph);  // a bad file fails its rows
    for (const char* device : {"cpu", "sim", "cuda"})
      for (const char* layout : {"nchw", "nhwc"})
        if ((convolutional || std::string(layout) == "nchw") && (STRIDER_TEST_CUDA_ROWS || std::string(device) != "cuda"))
          all.push_back({model, device, layout});
  }
  return all;
}

// A shard may hold none of the models (more shards than models in STRIDER_REAL_MODELS).
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(RealModel);
INSTANTIATE_TEST_SUITE_P(Models, RealModel, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<RealCase>& info) {
                           return info.param.model + "_" + info.param.device + "_" + info.param.layout;
                         });

}  // namespace
}  // namespace strider
