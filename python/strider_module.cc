// _strider: the C++ side of the Python package (python/strider/__init__.py holds the API
// users see). It wraps DynamicSession (include/strider/dynamic_session.h): numpy arrays in,
// numpy arrays out, with no copy on either side: an input array that is already row-major
// is borrowed (Tensor::borrow; the array is kept alive for the run, and its bytes are
// read once, into the session's input memory), and an output's bytes become the array's.
// Every strider error is raised as the strider.errors class of its status code, carrying
// the code and the one-line message; the GIL is released while a session plans or runs.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <string>

#include <dlpack/dlpack.h>

#include "commands.h"
#include "exec/session_internal.h"
#include "hal/device.h"
#include "strider/dynamic_session.h"

namespace py = pybind11;

namespace strider {
namespace {

[[noreturn]] void raise(const Status& status) {
  py::object errors = py::module_::import("strider.errors");
  py::object error = errors.attr("error_for")(std::string(status_code_name(status.code())), status.message());
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())), error.ptr());
  throw py::error_already_set();
}

template <typename T>
T take(Result<T> result) {
  if (!result.is_ok()) raise(result.status());
  return std::move(*result);
}

// numpy dtype <-> strider DType (bfloat16 has no numpy type: it is refused at the boundary).
py::dtype numpy_dtype(DType dtype) {
  switch (dtype) {
    case DType::kF32: return py::dtype::of<float>();
    case DType::kF64: return py::dtype::of<double>();
    case DType::kF16: return py::dtype("float16");
    case DType::kI64: return py::dtype::of<int64_t>();
    case DType::kI32: return py::dtype::of<int32_t>();
    case DType::kI8: return py::dtype::of<int8_t>();
    case DType::kU8: return py::dtype::of<uint8_t>();
    case DType::kBool: return py::dtype::of<bool>();
    case DType::kI16: return py::dtype::of<int16_t>();
    case DType::kU16: return py::dtype::of<uint16_t>();
    case DType::kU32: return py::dtype::of<uint32_t>();
    case DType::kU64: return py::dtype::of<uint64_t>();
    default: break;
  }
  raise(unsupported(std::string(dtype_name(dtype)) + " tensors have no numpy dtype"));
}

DType strider_dtype(const py::dtype& dtype, const std::string& name) {
  for (DType d : {DType::kF32, DType::kF64, DType::kF16, DType::kI64, DType::kI32, DType::kI16, DType::kI8, DType::kU64,
                  DType::kU32, DType::kU16, DType::kU8, DType::kBool})
    if (dtype.is(numpy_dtype(d)) || dtype.equal(numpy_dtype(d))) return d;
  raise(invalid_argument("input '" + name + "': numpy dtype " + py::str(static_cast<const py::handle&>(dtype)).cast<std::string>() + " is not supported"));
}

// A view of the array's bytes; `keep` holds the array (made row-major first: a strided
// array is copied by numpy) until the run has returned, as Tensor::borrow's rule asks.
Tensor to_tensor(const std::string& name, const py::array& given, std::vector<py::array>& keep) {
  py::array a = py::array::ensure(given, py::array::c_style);
  if (!a) raise(invalid_argument("input '" + name + "' is not an array"));
  const DType dtype = strider_dtype(a.dtype(), name);
  Shape shape(a.shape(), a.shape() + a.ndim());
  Tensor t = take(Tensor::borrow(dtype, shape, const_cast<void*>(a.data()), size_t(a.nbytes())));
  keep.push_back(std::move(a));
  return t;
}

// The output's own bytes become the array's (no copy): the Tensor moves into a capsule
// that the array keeps as its base and frees with it.
py::array to_numpy(Tensor t) {
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  const py::dtype dtype = numpy_dtype(t.dtype());
  if (t.byte_size() == 0) return py::array(dtype, shape);
  auto* owned = new Tensor(std::move(t));
  py::capsule base(owned, [](void* p) { delete static_cast<Tensor*>(p); });
  return py::array(dtype, shape, {}, owned->bytes(), base);
}

// A DLPack capsule ("dltensor", not consumed: its producer's deleter frees it with the
// capsule) as the memory it describes. Dense row-major only; host or CUDA memory.
MemoryRef memory_of(const std::string& name, const py::capsule& capsule) {
  if (std::string(capsule.name() ? capsule.name() : "") != "dltensor")
    raise(invalid_argument("'" + name + "': not an unused DLPack capsule"));
  const DLTensor& t = static_cast<DLManagedTensor*>(capsule.get_pointer())->dl_tensor;
  MemoryRef m;
  m.data = static_cast<std::byte*>(t.data) + t.byte_offset;
  m.shape.assign(t.shape, t.shape + t.ndim);
  const int code = t.dtype.code, bits = t.dtype.bits;
  constexpr int kBoolCode = 6;  // kDLBool (DLPack 0.8; Debian's header is 0.6)
  if (t.dtype.lanes != 1) raise(invalid_argument("'" + name + "': vector dtypes are not supported"));
  if (code == kDLFloat && bits == 32) m.dtype = DType::kF32;
  else if (code == kDLFloat && bits == 16) m.dtype = DType::kF16;
  else if (code == kDLFloat && bits == 64) m.dtype = DType::kF64;
  else if (code == kDLBfloat && bits == 16) m.dtype = DType::kBF16;
  else if (code == kDLInt && bits == 64) m.dtype = DType::kI64;
  else if (code == kDLInt && bits == 32) m.dtype = DType::kI32;
  else if (code == kDLInt && bits == 8) m.dtype = DType::kI8;
  else if (code == kDLInt && bits == 16) m.dtype = DType::kI16;
  else if (code == kDLUInt && bits == 16) m.dtype = DType::kU16;
  else if (code == kDLUInt && bits == 32) m.dtype = DType::kU32;
  else if (code == kDLUInt && bits == 64) m.dtype = DType::kU64;
  else if ((code == kDLUInt || code == kBoolCode) && bits == 8) m.dtype = code == kBoolCode ? DType::kBool : DType::kU8;
  else raise(invalid_argument("'" + name + "': DLPack dtype code " + std::to_string(code) + " bits " + std::to_string(bits) + " is not supported"));
  if (t.strides != nullptr) {
    int64_t expected = 1;
    for (int d = t.ndim; d-- > 0;) {
      if (t.shape[d] != 1 && t.strides[d] != expected)
        raise(invalid_argument("'" + name + "': not dense row-major (bind a .contiguous() tensor)"));
      expected *= t.shape[d];
    }
  }
  if (t.device.device_type == kDLCPU) m.device_ordinal = -1;
  else if (t.device.device_type == kDLCUDA) m.device_ordinal = t.device.device_id;
  else raise(unsupported("'" + name + "': DLPack device type " + std::to_string(int(t.device.device_type)) + " is not supported"));
  return m;
}

// An output in memory strider allocated (IoBinding::bind_output_to_device), handed to
// Python: DLPack out with no copy, numpy (a view for host memory, a copy from a GPU).
class DeviceValue {
 public:
  explicit DeviceValue(DeviceOutput output) : output_(std::move(output)) {}
  const MemoryRef& memory() const { return output_.memory(); }
  py::tuple shape() const { return py::cast(memory().shape); }
  std::string dtype() const { return std::string(dtype_name(memory().dtype)); }
  uintptr_t data_ptr() const { return reinterpret_cast<uintptr_t>(memory().data); }
  std::string device() const { return memory().device_ordinal < 0 ? "cpu" : "cuda:" + std::to_string(memory().device_ordinal); }
  py::tuple dlpack_device() const {
    const bool host = memory().device_ordinal < 0;
    return py::make_tuple(int(host ? kDLCPU : kDLCUDA), host ? 0 : memory().device_ordinal);
  }
  // `stream` needs nothing: run() returned after strider's kernels finished writing, so the
  // memory is complete for any consumer stream. `max_version` >= 1 gets the 0.x capsule
  // ("dltensor"), which the protocol lets a producer without versioned DLPack return.
  // `dl_device` other than where the memory is, or `copy=True`, is refused (BufferError): a
  // DeviceValue exports its own memory only.
  py::capsule dlpack(const py::object& stream, const py::object& max_version, const py::object& dl_device,
                     const py::object& copy) const;
  py::array numpy() const {
    if (memory().device_ordinal >= 0) return to_numpy(take(output_.to_host()));
    std::vector<py::ssize_t> shape(memory().shape.begin(), memory().shape.end());
    auto* held = new DeviceOutput(output_);
    py::capsule base(held, [](void* p) { delete static_cast<DeviceOutput*>(p); });
    return py::array(numpy_dtype(memory().dtype), shape, {}, memory().data, base);
  }

 private:
  DeviceOutput output_;
};

DLDataType dlpack_dtype(DType dtype) {
  switch (dtype) {
    case DType::kF32: return {kDLFloat, 32, 1};
    case DType::kF64: return {kDLFloat, 64, 1};
    case DType::kF16: return {kDLFloat, 16, 1};
    case DType::kBF16: return {kDLBfloat, 16, 1};
    case DType::kI64: return {kDLInt, 64, 1};
    case DType::kI32: return {kDLInt, 32, 1};
    case DType::kI8: return {kDLInt, 8, 1};
    case DType::kU8: return {kDLUInt, 8, 1};
    case DType::kBool: return {6 /* kDLBool */, 8, 1};
    case DType::kI16: return {kDLInt, 16, 1};
    case DType::kU16: return {kDLUInt, 16, 1};
    case DType::kU32: return {kDLUInt, 32, 1};
    case DType::kU64: return {kDLUInt, 64, 1};
    default: break;
  }
  raise(unsupported(std::string(dtype_name(dtype)) + " tensors have no DLPack dtype strider exports"));
}

// What a capsule owns until its consumer's deleter (or the unconsumed capsule) frees it.
struct ExportedTensor {
  DeviceOutput output;
  std::vector<int64_t> shape;
  DLManagedTensor managed{};
};

py::capsule DeviceValue::dlpack(const py::object& stream, const py::object& max_version, const py::object& dl_device,
                                const py::object& copy) const {
  (void)stream;
  (void)max_version;
  if (!copy.is_none() && copy.cast<bool>()) throw py::buffer_error("strider.DeviceValue exports its memory, not copies");
  if (!dl_device.is_none() && !dl_device.equal(dlpack_device()))
    throw py::buffer_error("strider.DeviceValue: the memory is on " + device() + "; move it with its consumer");
  auto* e = new ExportedTensor{output_, std::vector<int64_t>(memory().shape.begin(), memory().shape.end())};
  DLTensor& t = e->managed.dl_tensor;
  t.data = memory().data;
  t.device = memory().device_ordinal < 0 ? DLDevice{kDLCPU, 0} : DLDevice{kDLCUDA, memory().device_ordinal};
  t.ndim = int(e->shape.size());
  t.dtype = dlpack_dtype(memory().dtype);
  t.shape = e->shape.data();
  t.strides = nullptr;  // dense row-major
  t.byte_offset = 0;
  e->managed.manager_ctx = e;
  e->managed.deleter = [](DLManagedTensor* m) { delete static_cast<ExportedTensor*>(m->manager_ctx); };
  PyObject* capsule = PyCapsule_New(&e->managed, "dltensor", [](PyObject* c) {
    if (!PyCapsule_IsValid(c, "dltensor")) return;  // consumed: the consumer calls the deleter
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(c, "dltensor"));
    m->deleter(m);
  });
  if (capsule == nullptr) {
    delete e;
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::capsule>(capsule);
}

py::list describe(const std::vector<ValueInfo>& infos) {
  py::list list;
  for (const ValueInfo& info : infos) {
    py::list dims;
    for (size_t d = 0; d < info.shape.size(); ++d) {
      if (info.shape[d] >= 0) dims.append(info.shape[d]);
      else if (!info.dim_params[d].empty()) dims.append(info.dim_params[d]);
      else dims.append(py::none());
    }
    list.append(py::make_tuple(info.name, std::string(dtype_name(info.dtype)), dims));
  }
  return list;
}

SessionOptions session_options(const py::dict& o) {
  SessionOptions s;
  if (o.contains("device")) s.device = o["device"].cast<std::string>();
  if (o.contains("dtype")) {
    const std::string d = o["dtype"].cast<std::string>();
    if (d != "f32" && d != "bf16") raise(invalid_argument("dtype '" + d + "': expected 'f32' or 'bf16'"));
    s.dtype = d == "bf16" ? DType::kBF16 : DType::kF32;
  }
  if (o.contains("layout")) {
    const std::string text = o["layout"].cast<std::string>();
    std::optional<Layout> layout = parse_layout(text);
    if (!layout) raise(invalid_argument("layout '" + text + "': expected 'nchw', 'nhwc' or 'auto'"));
    s.layout = *layout;
  }
  if (o.contains("queues")) s.queues = o["queues"].cast<int>();
  if (o.contains("threads")) s.threads = o["threads"].cast<int>();
  if (o.contains("share_cores")) s.share_cores = o["share_cores"].cast<bool>();
  if (o.contains("sanitize")) s.sanitize = o["sanitize"].cast<bool>();
  if (o.contains("storage_mode")) {
    const std::string text = o["storage_mode"].cast<std::string>();
    std::optional<StorageMode> mode = parse_storage_mode(text);
    if (!mode) raise(invalid_argument("storage_mode '" + text + "': expected 'device', 'unified' or 'host'"));
    s.storage_mode = *mode;
  }
  if (o.contains("allow_tf32")) s.allow_tf32 = o["allow_tf32"].cast<bool>();
  if (o.contains("winograd")) s.winograd = o["winograd"].cast<bool>();
  if (o.contains("cuda_graph")) s.cuda_graph = o["cuda_graph"].cast<bool>();
  if (o.contains("fusion")) s.fusion = o["fusion"].cast<bool>();
  if (o.contains("max_memory_bytes")) s.max_memory_bytes = o["max_memory_bytes"].cast<int64_t>();
  return s;
}

// The CLI's model options from keyword arguments: device, dtype, layout, queues, sanitize,
// storage_mode, fusion ("on"/"off" or bool), inputs_dir, seed, shapes ({name: [dims]}).
cli::ModelOptions model_options(const std::string& model, const py::dict& o) {
  cli::ModelOptions m;
  m.model = model;
  m.random_inputs = true;
  auto text = [&](const char* key, std::string& field) {
    if (o.contains(key)) field = o[key].cast<std::string>();
  };
  text("device", m.device);
  text("dtype", m.dtype);
  text("layout", m.layout);
  text("storage_mode", m.storage_mode);
  text("inputs_dir", m.inputs_dir);
  text("max_memory", m.max_memory);
  if (o.contains("queues")) m.queues = o["queues"].cast<int>();
  if (o.contains("threads")) m.threads = o["threads"].cast<int>();
  if (o.contains("sanitize")) m.sanitize = o["sanitize"].cast<bool>();
  if (o.contains("seed")) m.seed = o["seed"].cast<uint64_t>();
  if (o.contains("fusion")) m.fusion = o["fusion"].cast<bool>() ? "on" : "off";
  if (o.contains("winograd")) m.winograd = o["winograd"].cast<bool>() ? "on" : "off";
  if (o.contains("shapes"))
    for (const auto& [name, dims] : o["shapes"].cast<std::map<std::string, std::vector<int64_t>>>()) {
      std::string spec = name + ":";
      for (size_t d = 0; d < dims.size(); ++d) {
        if (d) spec += 'x';  // (not `"x" + to_string(..)`: GCC 12 warns falsely on that)
        spec += std::to_string(dims[d]);
      }
      m.shapes.push_back(spec);
    }
  return m;
}

std::string check_json(const std::string& model, const py::dict& o) {
  cli::CheckOptions c;
  c.model = model_options(model, o);
  if (o.contains("expected_dir")) c.expected_dir = o["expected_dir"].cast<std::string>();
  if (o.contains("rtol")) c.rtol = o["rtol"].cast<double>();
  if (o.contains("atol")) c.atol = o["atol"].cast<double>();
  Result<nlohmann::json> report = [&] {
    py::gil_scoped_release unlocked;
    return cli::check_report(c, false);
  }();
  return take(std::move(report)).dump();
}

std::string inspect_json(const std::string& model, const py::dict& o) {
  cli::InspectOptions i;
  i.model = model_options(model, o);
  Result<std::string> plan = [&] {
    py::gil_scoped_release unlocked;
    return cli::inspect_report(i);
  }();
  return take(std::move(plan));
}

class PySession {
 public:
  PySession(const std::string& path, const py::dict& options, const std::map<std::string, int64_t>& pinned,
            int max_cached_shapes, const std::vector<std::map<std::string, Shape>>& prepared) {
    SessionOptions s = session_options(options);
    DynamicSession::Options dynamic;
    dynamic.pinned_dims = pinned;
    dynamic.max_cached_shapes = max_cached_shapes;
    dynamic.prepared_shapes = prepared;
    Result<std::unique_ptr<DynamicSession>> made = [&] {
      py::gil_scoped_release unlocked;
      return DynamicSession::load(path, s, dynamic);
    }();
    session_ = take(std::move(made));
  }

  py::list inputs() const { return describe(session_->inputs()); }
  py::list outputs() const { return describe(session_->outputs()); }

  py::list run(const py::dict& feed) {
    std::map<std::string, Tensor> inputs;
    std::vector<py::array> keep;  // the borrowed arrays, alive until the run returns
    for (const auto& [key, value] : feed) {
      const std::string name = py::str(key);
      inputs[name] = to_tensor(name, py::array::ensure(value), keep);
    }
    Result<std::vector<Tensor>> outputs = [&] {
      py::gil_scoped_release unlocked;
      return session_->run(inputs);
    }();
    py::list arrays;
    for (Tensor& t : take(std::move(outputs))) arrays.append(to_numpy(std::move(t)));
    return arrays;
  }

  // Runs on the bound tensors' own memory (strider/io_binding.h): `inputs` and `outputs`
  // map names to DLPack capsules, which the caller keeps alive; the outputs named in
  // `allocated` go to memory strider allocates, returned as DeviceValues by name.
  std::map<std::string, DeviceValue> run_bound(const std::map<std::string, py::capsule>& inputs,
                                               const std::map<std::string, py::capsule>& outputs,
                                               const std::vector<std::string>& allocated) {
    IoBinding binding;
    for (const auto& [name, capsule] : inputs) binding.bind_input(name, memory_of(name, capsule));
    for (const auto& [name, capsule] : outputs) binding.bind_output(name, memory_of(name, capsule));
    for (const std::string& name : allocated) binding.bind_output_to_device(name);
    Status s = [&] {
      py::gil_scoped_release unlocked;
      return session_->run(binding);
    }();
    if (!s.is_ok()) raise(s);
    std::map<std::string, DeviceValue> values;
    for (const auto& [name, output] : binding.device_outputs()) values.emplace(name, DeviceValue(output));
    return values;
  }

  // Where the last bound run's kernels read each input and wrote each output.
  std::vector<uintptr_t> bound_addresses() const {
    std::vector<uintptr_t> addresses;
    for (const void* a : strider::bound_addresses(*session_)) addresses.push_back(reinterpret_cast<uintptr_t>(a));
    return addresses;
  }

  void prepare(const std::map<std::string, Shape>& shapes) {
    Status s = [&] {
      py::gil_scoped_release unlocked;
      return session_->prepare(shapes);
    }();
    if (!s.is_ok()) raise(s);
  }

  int64_t plans_made() const { return session_->plans_made(); }
  int cached_shapes() const { return session_->cached_shapes(); }

 private:
  std::unique_ptr<DynamicSession> session_;
};

}  // namespace
}  // namespace strider

PYBIND11_MODULE(_strider, m) {
  using strider::PySession;
  m.doc() = "strider's C++ core; use the strider package";
  m.attr("__version__") = STRIDER_VERSION;
  py::class_<PySession>(m, "Session")
      .def(py::init<const std::string&, const py::dict&, const std::map<std::string, int64_t>&, int,
                    const std::vector<std::map<std::string, strider::Shape>>&>(),
           py::arg("path"), py::arg("options"), py::arg("pinned_dims"), py::arg("max_cached_shapes"),
           py::arg("prepared_shapes"))
      .def("inputs", &PySession::inputs)
      .def("outputs", &PySession::outputs)
      .def("run", &PySession::run, py::arg("feed"))
      .def("prepare", &PySession::prepare, py::arg("shapes"))
      .def("run_bound", &PySession::run_bound, py::arg("inputs"), py::arg("outputs"), py::arg("allocated"))
      .def("bound_addresses", &PySession::bound_addresses)
      .def("plans_made", &PySession::plans_made)
      .def("cached_shapes", &PySession::cached_shapes);
  py::class_<strider::DeviceValue>(m, "DeviceValue",
                                   "An output in memory strider allocated on the session's device (IOBinding)")
      .def_property_readonly("shape", &strider::DeviceValue::shape)
      .def_property_readonly("dtype", &strider::DeviceValue::dtype)
      .def_property_readonly("device", &strider::DeviceValue::device)
      .def("data_ptr", &strider::DeviceValue::data_ptr)
      .def("numpy", &strider::DeviceValue::numpy)
      .def("__dlpack_device__", &strider::DeviceValue::dlpack_device)
      .def("__dlpack__", &strider::DeviceValue::dlpack, py::kw_only(), py::arg("stream") = py::none(),
           py::arg("max_version") = py::none(), py::arg("dl_device") = py::none(), py::arg("copy") = py::none())
      .def("__repr__", [](const strider::DeviceValue& v) {
        return "<strider.DeviceValue " + v.dtype() + py::str(v.shape()).cast<std::string>() + " on " + v.device() + ">";
      });
  m.def("check_json", &strider::check_json, py::arg("model"), py::arg("options"));
  m.def("inspect_json", &strider::inspect_json, py::arg("model"), py::arg("options"));
  // Whether a CUDA device can be opened here (strider built with CUDA, a GPU and driver present).
  m.def("cuda_available", [] { return strider::create_device("cuda").is_ok(); });
}
