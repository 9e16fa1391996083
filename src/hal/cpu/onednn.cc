#include "hal/cpu/onednn.h"

namespace strider::cpu {

dnnl::engine& onednn_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& onednn_stream() {
  thread_local dnnl::stream stream(onednn_engine());
  return stream;
}

dnnl::primitive_attr onednn_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

std::optional<dnnl::memory::data_type> onednn_type(DType dtype) {
  using dt = dnnl::memory::data_type;
  switch (dtype) {
    case DType::kF32: return dt::f32;
    case DType::kBF16: return dt::bf16;
    case DType::kI32: return dt::s32;
    case DType::kI8: return dt::s8;
    case DType::kU8: return dt::u8;
    default: return std::nullopt;
  }
}

dnnl::memory::desc onednn_desc(DType dtype, const Shape& sizes, const Strides& strides) {
  dnnl::memory::dims dims(sizes.begin(), sizes.end());
  dnnl::memory::dims element_strides(strides.begin(), strides.end());
  return dnnl::memory::desc(dims, *onednn_type(dtype), element_strides);
}

dnnl::memory::desc onednn_desc(const TensorView& view) {
  return onednn_desc(view.dtype, view.sizes, view.strides);
}

dnnl::memory onednn_memory(const TensorView& view, const dnnl::memory::desc& desc) {
  return dnnl::memory(desc, onednn_engine(), view.host_data());
}

std::string onednn_impl_name(const dnnl::primitive_desc_base& pd) {
  return std::string("onednn:") + pd.impl_info_str();
}

}  // namespace strider::cpu
