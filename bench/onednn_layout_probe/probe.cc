// Does oneDNN 2.6 run YOLOv8n's and MobileNetV2's convolutions faster on blocked nChw16c /
// nChw8c activations than on channels-last (nhwc), the layout strider plans? Times each
// conv shape of the two models (f32, forward inference, the weights in the layout oneDNN
// asks for) in every activation layout, on the calling thread's OpenMP team.
//   g++ -O2 -std=c++20 probe.cc -ldnnl -o probe && OMP_NUM_THREADS=1 ./probe
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

using namespace dnnl;
using tag = memory::format_tag;

struct Shape {
  int ic, oc, h, w, k, stride, group;
};

double time_conv(engine& eng, stream& s, const Shape& c, tag layout, std::string* impl) {
  const int pad = c.k / 2, oh = (c.h + 2 * pad - c.k) / c.stride + 1, ow = (c.w + 2 * pad - c.k) / c.stride + 1;
  memory::desc x({1, c.ic, c.h, c.w}, memory::data_type::f32, layout);
  memory::desc y({1, c.oc, oh, ow}, memory::data_type::f32, layout);
  memory::dims wdims = c.group == 1 ? memory::dims{c.oc, c.ic, c.k, c.k}
                                    : memory::dims{c.group, c.oc / c.group, c.ic / c.group, c.k, c.k};
  memory::desc w(wdims, memory::data_type::f32, tag::any);
  memory::desc b({c.oc}, memory::data_type::f32, tag::x);
  convolution_forward::desc d(prop_kind::forward_inference, algorithm::convolution_direct, x, w, b, y,
                              {c.stride, c.stride}, {pad, pad}, {pad, pad});
  convolution_forward::primitive_desc pd(d, eng);
  *impl = pd.impl_info_str();
  memory xm(x, eng), ym(y, eng), wm(pd.weights_desc(), eng), bm(b, eng);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  for (memory* m : {&xm, &wm, &bm}) {
    float* p = static_cast<float*>(m->get_data_handle());
    for (size_t i = 0; i < m->get_desc().get_size() / 4; ++i) p[i] = u(rng);
  }
  convolution_forward conv(pd);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, xm}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_BIAS, bm}, {DNNL_ARG_DST, ym}};
  for (int i = 0; i < 20; ++i) conv.execute(s, args);
  s.wait();
  std::vector<double> us;
  for (int r = 0; r < 15; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 20; ++i) conv.execute(s, args);
    s.wait();
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / 20);
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

int main() {
  engine eng(engine::kind::cpu, 0);
  stream s(eng);
  // (ic, oc, h, w, k, stride, group) as the models have them, with their counts.
  std::vector<std::pair<int, Shape>> shapes = {
      {1, {80, 80, 40, 40, 3, 1, 1}},   {1, {64, 80, 40, 40, 3, 1, 1}},   {2, {64, 64, 40, 40, 3, 1, 1}},
      {1, {128, 80, 20, 20, 3, 1, 1}},  {1, {16, 32, 160, 160, 3, 2, 1}}, {1, {32, 64, 80, 80, 3, 2, 1}},
      {1, {64, 128, 40, 40, 3, 2, 1}},  {1, {128, 256, 20, 20, 3, 2, 1}}, {1, {128, 64, 20, 20, 3, 1, 1}},
      {1, {80, 80, 20, 20, 3, 1, 1}},   {2, {16, 16, 80, 80, 3, 1, 1}},   {6, {32, 32, 40, 40, 3, 1, 1}},
      {9, {64, 64, 20, 20, 3, 1, 1}},   {4, {128, 128, 10, 10, 3, 1, 1}}, {1, {192, 64, 40, 40, 1, 1, 1}},
      {1, {384, 128, 20, 20, 1, 1, 1}}, {1, {48, 32, 80, 80, 1, 1, 1}},   {3, {192, 128, 20, 20, 1, 1, 1}},
      {1, {16, 96, 112, 112, 1, 1, 1}}, {1, {320, 1280, 7, 7, 1, 1, 1}},  {2, {24, 144, 56, 56, 1, 1, 1}},
      {1, {144, 144, 56, 56, 3, 1, 144}}, {1, {32, 32, 112, 112, 3, 1, 32}}, {1, {96, 96, 112, 112, 3, 2, 96}},
      {4, {384, 384, 14, 14, 3, 1, 384}}};
  const std::vector<std::pair<const char*, tag>> layouts = {{"nhwc", tag::nhwc}, {"nChw16c", tag::nChw16c},
                                                            {"nChw8c", tag::nChw8c}};
  double totals[3] = {};
  std::printf("%-28s %5s %10s %10s %10s   %s\n", "conv (ic,oc,h,w,k,s,g)", "count", "nhwc us", "nChw16c", "nChw8c",
              "nhwc impl / nChw16c impl");
  for (const auto& [count, c] : shapes) {
    double us[3];
    std::string impl[3];
    for (int l = 0; l < 3; ++l) {
      us[l] = time_conv(eng, s, c, layouts[l].second, &impl[l]);
      totals[l] += count * us[l];
    }
    char name[64];
    std::snprintf(name, sizeof name, "%d,%d,%d,%d,%d,%d,%d", c.ic, c.oc, c.h, c.w, c.k, c.stride, c.group);
    std::printf("%-28s %5d %10.1f %10.1f %10.1f   %s / %s\n", name, count, us[0], us[1], us[2], impl[0].c_str(),
                impl[1].c_str());
  }
  std::printf("%-28s %5s %10.1f %10.1f %10.1f\n", "weighted total", "", totals[0], totals[1], totals[2]);
}
