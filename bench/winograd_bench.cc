// winograd_bench: strider's Winograd F(4x4, 3x3) convolution (hal/cpu/winograd_conv.h)
// against oneDNN's direct convolution on the same channels-last views, for every 3x3
// stride-1 convolution shape of the YOLOv8n-style detector at 320 and smaller-channel ones,
// with bias and SiLU (a post-op for oneDNN, the output transform's for Winograd), on the
// calling thread's OpenMP team (OMP_NUM_THREADS). Also the largest error of each against a float64 direct convolution,
// relative to the output's largest magnitude. Prints a table; where "ratio" (Winograd time
// over direct time) is under 1, Winograd pays. Run: build/bench/winograd_bench [reps [ic oc h w]]
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <vector>

#include "hal/cpu/onednn.h"
#include "hal/cpu/parallel.h"
#include "hal/cpu/staged_output.h"
#include "hal/cpu/winograd_conv.h"

namespace strider::cpu {
namespace {

struct Shape {
  int64_t ic, oc, h, w;
};

// The median of single calls, each after 64 MB were written: in a model, a layer's weights
// were last read a whole run ago and are out of cache, and Winograd's transformed weights
// are four times the direct kernel's, so timing warm repeated calls would flatter it
// (WINOGRAD_BENCH_WARM=1 times them warm).
double median_us(const std::function<void()>& call, int reps) {
  static std::vector<char> flush(64 << 20);
  for (int i = 0; i < 3; ++i) call();
  std::vector<double> us;
  for (int r = 0; r < reps; ++r) {
    if (!std::getenv("WINOGRAD_BENCH_WARM"))
      for (size_t i = 0; i < flush.size(); i += 64) flush[i] = char(r + i);
    auto t0 = std::chrono::steady_clock::now();
    call();
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

// float64 direct convolution, pad 1, channels-last x [h, w, ic], weights [oc, ic, 3, 3].
std::vector<double> reference(const Shape& s, const std::vector<float>& x, const std::vector<float>& w,
                              const std::vector<float>& bias) {
  std::vector<double> y(size_t(s.h * s.w * s.oc));
  for (int64_t oh = 0; oh < s.h; ++oh)
    for (int64_t ow = 0; ow < s.w; ++ow)
      for (int64_t k = 0; k < s.oc; ++k) {
        double sum = bias[size_t(k)];
        for (int64_t r = 0; r < 3; ++r)
          for (int64_t q = 0; q < 3; ++q) {
            const int64_t ih = oh + r - 1, iw = ow + q - 1;
            if (ih < 0 || ih >= s.h || iw < 0 || iw >= s.w) continue;
            for (int64_t c = 0; c < s.ic; ++c)
              sum += double(x[size_t((ih * s.w + iw) * s.ic + c)]) * w[size_t(((k * s.ic + c) * 3 + r) * 3 + q)];
          }
        y[size_t((oh * s.w + ow) * s.oc + k)] = sum / (1.0 + std::exp(-sum));
      }
  return y;
}

double relative_error(const std::vector<double>& want, const float* got) {
  double worst = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, std::fabs(want[i] - double(got[i])));
    scale = std::max(scale, std::fabs(want[i]));
  }
  return worst / std::max(scale, 1e-30);
}

void run_shape(const Shape& s, int reps) {
  using dnnl::memory;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> uniform(-1.f, 1.f);
  std::vector<float> x(size_t(s.h * s.w * s.ic)), w(size_t(s.oc * s.ic * 9)), bias(size_t(s.oc));
  for (auto* v : {&x, &w, &bias})
    for (float& e : *v) e = uniform(rng);
  for (float& e : w) e /= std::sqrt(float(s.ic * 9));
  KernelScratch xs = make_kernel_scratch(int64_t(x.size() * 4), "x"), ys = make_kernel_scratch(s.h * s.w * s.oc * 4, "y"),
                bs = make_kernel_scratch(s.oc * 4, "bias");
  std::copy(x.begin(), x.end(), reinterpret_cast<float*>(xs.bytes.get()));
  std::copy(bias.begin(), bias.end(), reinterpret_cast<float*>(bs.bytes.get()));
  TensorView xv = *make_view(*xs.allocation, 0, DType::kF32, {1, s.ic, s.h, s.w}, {s.h * s.w * s.ic, 1, s.w * s.ic, s.ic}, "x");
  TensorView yv = *make_view(*ys.allocation, 0, DType::kF32, {1, s.oc, s.h, s.w}, {s.h * s.w * s.oc, 1, s.w * s.oc, s.oc}, "y");
  TensorView bv = *make_view(*bs.allocation, 0, DType::kF32, {s.oc}, {1}, "bias");
  WinogradConvArgs args{.x = xv, .y = yv, .weights = w.data(), .weight_strides = {s.ic * 9, 9, 3, 1}};
  args.bias = bv;
  args.pad_top = args.pad_left = 1;
  args.activation = WinogradActivation::kSilu;
  auto kernel = make_winograd_conv(args, "bench");
  if (!kernel.is_ok()) {
    std::printf("| %ld->%ld %ldx%ld | Winograd refused: %s |\n", long(s.ic), long(s.oc), long(s.h), long(s.w),
                kernel.status().message().c_str());
    return;
  }
  QueueContext context{};
  const float* y = reinterpret_cast<const float*>(ys.bytes.get());
  const double winograd_us = median_us([&] { (void)(*kernel)->run(context); }, reps);
  std::vector<double> want = reference(s, x, w, bias);
  const double winograd_error = relative_error(want, y);

  memory::desc x_md({1, s.ic, s.h, s.w}, memory::data_type::f32, memory::format_tag::nhwc);
  memory::desc y_md({1, s.oc, s.h, s.w}, memory::data_type::f32, memory::format_tag::nhwc);
  memory::desc w_md({s.oc, s.ic, 3, 3}, memory::data_type::f32, memory::format_tag::any);
  memory::desc w_plain({s.oc, s.ic, 3, 3}, memory::data_type::f32, memory::format_tag::oihw);
  memory::desc b_md({s.oc}, memory::data_type::f32, memory::format_tag::x);
  dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, x_md,
                                    w_md, b_md, y_md, {1, 1}, {1, 1}, {1, 1});
  dnnl::post_ops ops;
  ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_swish, 1.0f, 0.0f);
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  dnnl::convolution_forward::primitive_desc pd(d, attr, onednn_engine());
  memory w_mem = reorder_constant(memory(w_plain, onednn_engine(), w.data()), pd.weights_desc());
  dnnl::convolution_forward conv(pd);
  std::unordered_map<int, memory> conv_args{{DNNL_ARG_SRC, memory(x_md, onednn_engine(), xs.bytes.get())},
                                            {DNNL_ARG_WEIGHTS, w_mem},
                                            {DNNL_ARG_BIAS, memory(b_md, onednn_engine(), bs.bytes.get())},
                                            {DNNL_ARG_DST, memory(y_md, onednn_engine(), ys.bytes.get())}};
  const double direct_us = median_us([&] {
    conv.execute(onednn_stream(), conv_args);
    onednn_stream().wait();
  }, reps);
  const double direct_error = relative_error(want, y);
  std::printf("| %ld->%ld %ldx%ld | %.1f | %.1f | %.2f | %.1e | %.1e | %s |\n", long(s.ic), long(s.oc), long(s.h),
              long(s.w), winograd_us, direct_us, winograd_us / direct_us, winograd_error, direct_error,
              winograd_conv_pays(s.ic, s.oc, s.h, s.w) ? "yes" : "no");
}

}  // namespace
}  // namespace strider::cpu

int main(int argc, char** argv) {
  using strider::cpu::Shape;
  const int reps = argc > 1 ? std::atoi(argv[1]) : 10;
  strider::cpu::thread_starts_teams = true;  // as a queue's worker: OMP_NUM_THREADS threads
  std::printf("| conv (channels, size) | Winograd us | oneDNN direct us | ratio | Winograd error | direct error | chosen |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  if (argc == 6) {  // one shape: reps ic oc h w
    strider::cpu::run_shape(Shape{std::atol(argv[2]), std::atol(argv[3]), std::atol(argv[4]), std::atol(argv[5])}, reps);
    return 0;
  }
  for (const Shape& s : {Shape{16, 16, 80, 80}, Shape{32, 32, 40, 40}, Shape{64, 64, 20, 20}, Shape{128, 128, 10, 10},
                         Shape{64, 64, 40, 40}, Shape{64, 80, 40, 40}, Shape{80, 80, 40, 40}, Shape{128, 64, 20, 20},
                         Shape{64, 80, 20, 20}, Shape{80, 80, 20, 20}, Shape{256, 64, 10, 10}, Shape{64, 80, 10, 10},
                         Shape{80, 80, 10, 10}, Shape{8, 8, 80, 80}, Shape{16, 16, 20, 20}, Shape{24, 24, 40, 40}})
    strider::cpu::run_shape(s, reps);
}
