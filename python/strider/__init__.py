"""strider: an ONNX inference runtime for CPUs and NVIDIA GPUs.

The interface is ONNX Runtime's, so code written for it runs by changing the import:

    import strider as ort
    session = ort.InferenceSession("model.onnx", providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    outputs = session.run(None, {name: array})

strider's own options are keyword arguments (or a SessionOptions): device="cuda:0",
dtype="bf16", layout="nhwc", queues=2, sanitize=True, storage_mode="unified", ...

Input shapes may change from run to run within what the model's symbolic dims allow: a
new shape is planned on its first run and cached (least recently used out, at most
`max_cached_shapes`), so later runs of it plan nothing. Errors are strider.Error
subclasses (strider.errors) carrying the status code and a one-line message.
"""

import json as _json
import os as _os

from . import errors
from ._strider import DeviceValue, Session as _Session
from ._strider import __version__, check_json as _check_json, cuda_available, inspect_json as _inspect_json
from .errors import Error

__all__ = [
    "InferenceSession", "IOBinding", "SessionOptions", "NodeArg", "GraphOptimizationLevel", "Error", "errors",
    "get_available_providers", "get_device", "check", "inspect", "__version__",
]


def check(model, **options):
    """What `strider check --json` reports, as a dict: the model run (random inputs, or each
    test_data_set_N of a folder in the ONNX test layout, or inputs_dir) and every output
    compared with the float64 reference (or expected_dir's files): "data_sets" with each
    output's max_abs_error, cosine, passed...; "passed" and "failed" counts. Options: device,
    dtype, layout, queues, sanitize, storage_mode, fusion, winograd, inputs_dir, expected_dir, rtol,
    atol, seed, shapes ({name: dims}), max_memory."""
    return _json.loads(_check_json(_os.fspath(model), options))


def inspect(model, **options):
    """What `strider inspect --json` reports, as a dict: the memory plan's figures and steps
    (each operand's allocation, offset, strides and how it got its bytes). Options as check's."""
    return _json.loads(_inspect_json(_os.fspath(model), options))

# strider's dtype names -> ONNX Runtime's type strings.
_ORT_TYPES = {
    "f32": "tensor(float)", "f16": "tensor(float16)", "bf16": "tensor(bfloat16)", "f64": "tensor(double)",
    "i64": "tensor(int64)", "i32": "tensor(int32)", "i8": "tensor(int8)", "u8": "tensor(uint8)",
    "bool": "tensor(bool)",
}


class GraphOptimizationLevel:
    """ONNX Runtime's levels; strider maps ORT_DISABLE_ALL to fusion off, every other level to on."""

    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_ALL = 99


class SessionOptions:
    """Options of an InferenceSession (keyword arguments of the session override them).

    strider's: dtype ("f32" or "bf16"), layout ("nchw", "nhwc", "auto"), queues, threads
    (cpu: threads each kernel may use; 0: every core), share_cores (cpu: take part in the
    process's core budget, sessions taking turns on its cores; default False), sanitize,
    storage_mode (cuda: "device", "unified", "host"), allow_tf32, winograd (cpu), cuda_graph, fusion,
    max_memory_bytes (0: the default budget), pinned_dims ({"batch": 8}: symbolic dims fixed
    for every run), max_cached_shapes (plans kept at once), prepared_shapes ([{"x": [4, 3, 16, 16]}]:
    input shapes planned at load).

    ONNX Runtime's graph_optimization_level is honoured as above; intra_op_num_threads is
    strider's threads (when threads is not set); inter_op_num_threads is accepted and unused
    (independent branches spread over `queues`).
    """

    def __init__(self):
        self.dtype = "f32"
        self.layout = "auto"
        self.queues = 1
        self.threads = 0
        self.share_cores = False
        self.sanitize = False
        self.storage_mode = "device"
        self.allow_tf32 = False
        self.winograd = True
        self.cuda_graph = True
        self.fusion = True
        self.max_memory_bytes = 0
        self.pinned_dims = {}
        self.max_cached_shapes = 8
        self.prepared_shapes = []
        self.graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_ALL
        self.intra_op_num_threads = 0
        self.inter_op_num_threads = 0


class NodeArg:
    """An input or output as ONNX Runtime describes it: name, shape (ints, symbolic names
    as strings, None for an unnamed dynamic dim) and type ("tensor(float)")."""

    def __init__(self, name, dtype, shape):
        self.name = name
        self.type = _ORT_TYPES.get(dtype, dtype)
        self.shape = list(shape)
        self.dtype = dtype

    def __repr__(self):
        return f"NodeArg(name={self.name!r}, type={self.type!r}, shape={self.shape!r})"


def get_available_providers():
    """The providers this machine can run: CUDA first when a GPU is usable, then CPU."""
    return (["CUDAExecutionProvider"] if cuda_available() else []) + ["CPUExecutionProvider"]


def get_device():
    """"GPU" when a CUDA device is usable, else "CPU" (as onnxruntime.get_device())."""
    return "GPU" if cuda_available() else "CPU"


def _device_for(providers):
    """The device of the first provider in `providers` that this machine has."""
    for provider in providers:
        name, options = (provider if isinstance(provider, (tuple, list)) else (provider, {}))
        if name == "CUDAExecutionProvider":
            if cuda_available():
                return f"cuda:{int(options.get('device_id', 0))}"
        elif name == "CPUExecutionProvider":
            return "cpu"
        else:
            raise errors.InvalidArgument("INVALID_ARGUMENT", f"unknown provider {name!r}; strider has "
                                         "CUDAExecutionProvider and CPUExecutionProvider")
    raise errors.DeviceError("DEVICE_ERROR", f"none of the providers {list(providers)!r} is available here")


def _as_host_array(name, value):
    """A feed value as something numpy reads without a copy where it can: numpy arrays as
    they are, DLPack producers (torch, CuPy) through numpy.from_dlpack."""
    import numpy
    if isinstance(value, numpy.ndarray) or not hasattr(value, "__dlpack__"):
        return value
    device = value.__dlpack_device__() if hasattr(value, "__dlpack_device__") else (1, 0)
    if device[0] != 1:  # kDLCPU
        raise errors.Unsupported("UNSUPPORTED", f"input {name!r} lives on DLPack device {tuple(device)}; "
                                 "strider takes host memory for now (device-resident inputs are not built yet)")
    return numpy.from_dlpack(value)


class InferenceSession:
    """A model loaded for one device, run many times with any input shapes its dims allow."""

    def __init__(self, path_or_bytes, sess_options=None, providers=None, provider_options=None, *,
                 device=None, **kwargs):
        if hasattr(path_or_bytes, "__fspath__"):
            path_or_bytes = path_or_bytes.__fspath__()
        if not isinstance(path_or_bytes, str):
            raise errors.InvalidArgument("INVALID_ARGUMENT", "strider loads models from a path; "
                                         "serialized model bytes are not supported")
        options = sess_options or SessionOptions()
        settings = {key: getattr(options, key) for key in (
            "dtype", "layout", "queues", "threads", "share_cores", "sanitize", "storage_mode", "allow_tf32", "winograd", "cuda_graph", "fusion",
            "max_memory_bytes")}
        if not settings["threads"] and options.intra_op_num_threads:
            settings["threads"] = int(options.intra_op_num_threads)
        if options.graph_optimization_level == GraphOptimizationLevel.ORT_DISABLE_ALL:
            settings["fusion"] = False
        pinned = dict(kwargs.pop("pinned_dims", options.pinned_dims))
        cached = int(kwargs.pop("max_cached_shapes", options.max_cached_shapes))
        prepared = [{name: [int(d) for d in shape] for name, shape in shapes.items()}
                    for shapes in kwargs.pop("prepared_shapes", options.prepared_shapes)]
        unknown = set(kwargs) - set(settings)
        if unknown:
            raise errors.InvalidArgument("INVALID_ARGUMENT", f"unknown option(s) {sorted(unknown)}")
        settings.update(kwargs)
        if provider_options is not None and providers is not None:
            providers = [(p, o) for p, o in zip(providers, provider_options)]
        settings["device"] = device or _device_for(providers or ["CPUExecutionProvider"])
        self._device = settings["device"]
        self._session = _Session(path_or_bytes, settings, pinned, cached, prepared)
        self._inputs = [NodeArg(*info) for info in self._session.inputs()]
        self._outputs = [NodeArg(*info) for info in self._session.outputs()]

    def get_inputs(self):
        return list(self._inputs)

    def get_outputs(self):
        return list(self._outputs)

    def get_providers(self):
        return ["CUDAExecutionProvider" if self._device.startswith("cuda") else "CPUExecutionProvider"]

    @property
    def device(self):
        """The device the session runs on ("cpu", "cuda:0", "sim")."""
        return self._device

    def run(self, output_names, input_feed, run_options=None):
        """The outputs named (all, in model order, when None) as numpy arrays that own the
        output bytes (no copy; they export DLPack, so torch.from_dlpack shares them). Inputs
        are numpy arrays or anything numpy can read: lists, or CPU tensors through DLPack."""
        outputs = self._session.run({name: _as_host_array(name, value) for name, value in dict(input_feed).items()})
        if not output_names:
            return outputs
        index = {arg.name: i for i, arg in enumerate(self._outputs)}
        missing = [name for name in output_names if name not in index]
        if missing:
            raise errors.NotFound("NOT_FOUND", f"no output named {missing[0]!r}; the model's outputs are "
                                  f"{[arg.name for arg in self._outputs]}")
        return [outputs[index[name]] for name in output_names]

    def prepare(self, input_shapes):
        """Plans for these input shapes ({name: shape}) now, so their first run plans nothing."""
        self._session.prepare({name: [int(d) for d in shape] for name, shape in input_shapes.items()})

    @property
    def plans_made(self):
        """How many input-shape plans this session has made (a cached shape makes none)."""
        return self._session.plans_made()

    @property
    def cached_shapes(self):
        return self._session.cached_shapes()

    def io_binding(self):
        """An IOBinding (ONNX Runtime's name): inputs and outputs bound to tensors that stay
        where they are, on the session's device (torch or CuPy CUDA tensors) or the host."""
        return IOBinding(self)

    def run_with_iobinding(self, binding, run_options=None):
        """Runs on the bound tensors' memory: kernels read the inputs and write the outputs
        in place (no copy either way). The bound outputs hold the results when it returns."""
        binding._run()


def _dlpack_device(value):
    if not hasattr(value, "__dlpack__") or not hasattr(value, "__dlpack_device__"):
        raise errors.InvalidArgument("INVALID_ARGUMENT", f"{type(value).__name__} does not export DLPack "
                                     "(__dlpack__ and __dlpack_device__): bind a torch, CuPy or numpy array")
    return value.__dlpack_device__()


def _wait_for_producer(value):
    """A CUDA tensor's producer may still be writing it on its library's current stream:
    wait for that stream (strider's queues run on their own streams), so the bound memory
    holds its values when strider's kernels read it."""
    module = type(value).__module__.split(".")[0]
    if module == "torch":
        import torch
        torch.cuda.current_stream(value.device).synchronize()
    elif module == "cupy":
        import cupy
        cupy.cuda.get_current_stream().synchronize()
    else:
        raise errors.Unsupported("UNSUPPORTED", f"binding CUDA memory of a {type(value).__name__}: strider orders "
                                 "against torch and CuPy streams only")


class IOBinding:
    """Names bound to tensors that strider reads and writes where they are (DLPack, no copy),
    or outputs strider allocates on the session's device. Keep bound tensors alive while
    bound; rebinding new memory makes new kernels once."""

    def __init__(self, session):
        self._session = session
        self._inputs, self._outputs, self._allocated = {}, {}, {}

    def bind_input(self, name, value):
        _dlpack_device(value)
        self._inputs[name] = value

    def bind_output(self, name, value=None, device_id=0, element_type=None, shape=None, buffer_ptr=None):
        """Output `name` into `value` (a torch, CuPy or numpy tensor, written in place), or,
        with no tensor or a device type as ONNX Runtime takes it ("cuda", "cpu"), into memory
        strider allocates on the session's device each run: get_outputs() then gives a
        strider.DeviceValue, which exports DLPack (torch.from_dlpack shares it, no copy). A
        later run never writes a DeviceValue still referenced; it reuses dropped ones."""
        if buffer_ptr is not None:
            raise errors.Unsupported("UNSUPPORTED", "binding a raw pointer: bind a tensor that exports DLPack")
        if value is None or isinstance(value, str):
            wanted = value.lower() if isinstance(value, str) else None
            device = self._session.device
            if wanted is not None and not device.startswith(wanted):
                raise errors.Unsupported("UNSUPPORTED", f"output {name!r}: strider allocates outputs on the session's "
                                         f"device ({device}), not {value!r}; use run() for host arrays")
            self._outputs.pop(name, None)
            self._allocated[name] = None
            return
        _dlpack_device(value)
        self._allocated.pop(name, None)
        self._outputs[name] = value

    def clear_binding_inputs(self):
        self._inputs.clear()

    def clear_binding_outputs(self):
        self._outputs.clear()
        self._allocated.clear()

    def get_outputs(self):
        """The outputs in the model's output order, as the last run left them: bound tensors,
        and strider.DeviceValue for outputs strider allocated (None before a run)."""
        outputs = []
        for arg in self._session.get_outputs():
            if arg.name in self._outputs:
                outputs.append(self._outputs[arg.name])
            elif arg.name in self._allocated:
                outputs.append(self._allocated[arg.name])
        return outputs

    def copy_outputs_to_cpu(self):
        """The outputs as numpy arrays (a copy from a GPU; host memory is shared)."""
        return [value.numpy() if isinstance(value, DeviceValue) else _np.from_dlpack(value) if hasattr(_np, "from_dlpack")
                else _np.asarray(value) for value in self.get_outputs()]

    def _run(self):
        _CUDA = 2  # kDLCUDA
        for value in list(self._inputs.values()) + list(self._outputs.values()):
            if _dlpack_device(value)[0] == _CUDA:
                _wait_for_producer(value)
        inputs = {name: value.__dlpack__() for name, value in self._inputs.items()}
        outputs = {name: value.__dlpack__() for name, value in self._outputs.items()}
        # The previous results stay the caller's if referenced elsewhere; the binding's own
        # references go first, so memory only it held is reused.
        self._allocated = dict.fromkeys(self._allocated)
        self._allocated.update(self._session._session.run_bound(inputs, outputs, list(self._allocated)))

    def _bound_addresses(self):
        """Where the last run's kernels read each input and wrote each output (for tests)."""
        return self._session._session.bound_addresses()
