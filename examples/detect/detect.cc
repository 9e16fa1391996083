// examples/detect: run a YOLOv8-style detector with strider's public C++ API and print the
// best boxes after a score threshold and non-maximum suppression.
//
//   detect MODEL.onnx [IMAGE.npy] [--device cpu|cuda] [--threshold 0.25] [--iou 0.45]
//
// The model takes images (1, 3, H, W) in [0, 1] and returns boxes (1, 4, A) as
// (center x, center y, width, height) in pixels and scores (1, C, A) after a sigmoid.
// Without an image, a seeded random one of the model's input size is used.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "strider/session.h"

namespace {

struct Box {
  float x0, y0, x1, y1, score;
  int cls;
};

float iou(const Box& a, const Box& b) {
  float w = std::max(0.0f, std::min(a.x1, b.x1) - std::max(a.x0, b.x0));
  float h = std::max(0.0f, std::min(a.y1, b.y1) - std::max(a.y0, b.y0));
  float inter = w * h;
  float uni = (a.x1 - a.x0) * (a.y1 - a.y0) + (b.x1 - b.x0) * (b.y1 - b.y0) - inter;
  return uni > 0 ? inter / uni : 0.0f;
}

// Best class per anchor above the threshold, then greedy per-class NMS.
std::vector<Box> detections(const strider::Tensor& boxes, const strider::Tensor& scores, float threshold, float max_iou) {
  int64_t anchors = boxes.shape()[2], classes = scores.shape()[1];
  const float* b = boxes.data<float>();
  const float* s = scores.data<float>();
  std::vector<Box> candidates;
  for (int64_t a = 0; a < anchors; ++a) {
    int best = 0;
    for (int64_t c = 1; c < classes; ++c)
      if (s[c * anchors + a] > s[best * anchors + a]) best = int(c);
    float score = s[best * anchors + a];
    if (score < threshold) continue;
    float cx = b[a], cy = b[anchors + a], w = b[2 * anchors + a], h = b[3 * anchors + a];
    candidates.push_back({cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2, score, best});
  }
  std::sort(candidates.begin(), candidates.end(), [](const Box& x, const Box& y) { return x.score > y.score; });
  std::vector<Box> kept;
  for (const Box& c : candidates) {
    bool suppressed = std::any_of(kept.begin(), kept.end(),
                                  [&](const Box& k) { return k.cls == c.cls && iou(k, c) > max_iou; });
    if (!suppressed) kept.push_back(c);
  }
  return kept;
}

strider::Tensor random_image(const strider::Shape& shape) {
  strider::Tensor image(strider::DType::kF32, shape);
  std::mt19937 rng(2024);
  std::uniform_real_distribution<float> pixel(0.0f, 1.0f);
  for (int64_t i = 0; i < image.num_elements(); ++i) image.data<float>()[i] = pixel(rng);
  return image;
}

int fail(const strider::Status& status) {
  std::fprintf(stderr, "detect: error: %s\n", status.to_string().c_str());
  return status.code() == strider::StatusCode::kInvalidArgument ? 2 : 3;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: detect MODEL.onnx [--device cpu|cuda] [--threshold T] [--iou I]\n");
    return 2;
  }
  strider::SessionOptions options;
  float threshold = 0.25f, max_iou = 0.45f;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--device") options.device = argv[i + 1];
    else if (flag == "--threshold") threshold = std::strtof(argv[i + 1], nullptr);
    else if (flag == "--iou") max_iou = std::strtof(argv[i + 1], nullptr);
  }
  auto session = strider::Session::load(argv[1], options);
  if (!session.is_ok()) return fail(session.status());
  const strider::ValueInfo& input = (*session)->inputs().at(0);
  auto outputs = (*session)->run({random_image(input.shape)});
  if (!outputs.is_ok()) return fail(outputs.status());
  if (outputs->size() != 2 || (*outputs)[0].rank() != 3 || (*outputs)[1].rank() != 3) {
    std::fprintf(stderr, "detect: error: expected boxes (1, 4, A) and scores (1, C, A)\n");
    return 3;
  }
  std::vector<Box> found = detections((*outputs)[0], (*outputs)[1], threshold, max_iou);
  std::printf("%zu detections above %.2f on a %lldx%lld image (%lld anchors)\n", found.size(), threshold,
              (long long)input.shape[3], (long long)input.shape[2], (long long)(*outputs)[0].shape()[2]);
  for (size_t i = 0; i < std::min<size_t>(found.size(), 10); ++i)
    std::printf("  class %2d  score %.3f  box [%.1f, %.1f, %.1f, %.1f]\n", found[i].cls, found[i].score, found[i].x0,
                found[i].y0, found[i].x1, found[i].y1);
  return 0;
}
