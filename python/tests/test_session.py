"""The Python package as ONNX Runtime users use it: InferenceSession, get_inputs/outputs,
run(output_names, feed), numpy in and out; any input shape per run; errors; threads."""
import concurrent.futures
import pathlib

import numpy as np
import pytest

import strider
from conftest import MODELS, data_set, strider_cli

SEED = MODELS / "seed" / "LinearChunkCatLastDim_shape_op13"
CNN = MODELS / "dynamic" / "SmallCnn_dynamic_batch"
BERT = MODELS / "dynamic" / "BertEncoder_dynamic"
UNARY = MODELS / "dynamic" / "Unary_every_dtype"


def ort_style(model, feed_of):
    """What ONNX Runtime code does, with only the import changed."""
    import strider as ort
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    feed = {arg.name: value for arg, value in zip(session.get_inputs(), feed_of)}
    return session.run(None, feed)


def test_ort_style_code_matches_torch_and_the_cli(tmp_path):
    inputs, expected = data_set(SEED)
    outputs = ort_style(SEED / "model.onnx", inputs)
    assert len(outputs) == len(expected)
    for got, want in zip(outputs, expected):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    code, _, err = strider_cli("run", SEED, "--inputs-dir", SEED / "test_data_set_0", "--output-dir", tmp_path)
    assert code == 0, err
    np.testing.assert_array_equal(outputs[0], np.load(tmp_path / "output_0.npy"))  # the same bits as the CLI
    code, out, err = strider_cli("check", SEED)
    assert code == 0 and "PASS" in out, err


def test_inputs_and_outputs_as_ort_describes_them():
    session = strider.InferenceSession(str(BERT / "model.onnx"))
    inputs = session.get_inputs()
    assert [(a.name, a.type, a.shape) for a in inputs] == [
        ("input_ids", "tensor(int64)", ["batch", "sequence"]),
        ("attention_mask", "tensor(int64)", ["batch", "sequence"])]
    outputs = session.get_outputs()
    assert [a.name for a in outputs] == ["last_hidden_state", "pooled"]
    assert outputs[0].type == "tensor(float)" and outputs[0].shape[0] == "batch"
    assert session.get_providers() == ["CPUExecutionProvider"]
    assert "CPUExecutionProvider" in strider.get_available_providers()


def test_one_session_runs_batch_1_4_and_32_planning_each_shape_once():
    session = strider.InferenceSession(CNN / "model.onnx")  # a path-like works too
    assert session.plans_made == 0  # dynamic: nothing can be planned before a run
    for k in (0, 1, 2, 1, 0):  # batch 1, 4, 32, then 4 and 1 again
        (x,), (want,) = data_set(CNN, k)
        (y,) = session.run(["y"], {"x": x})
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
    assert session.plans_made == 3  # the repeated shapes found their plans cached
    assert session.cached_shapes == 3


def test_new_sequence_lengths_and_batches_of_a_transformer():
    session = strider.InferenceSession(BERT / "model.onnx")
    for k in (0, 1):  # (1, 16) then (4, 8)
        inputs, expected = data_set(BERT, k)
        outputs = session.run(None, dict(zip(["input_ids", "attention_mask"], inputs)))
        for got, want in zip(outputs, expected):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert session.plans_made == 2


def test_the_cache_is_bounded_and_pins_and_prepare_work():
    session = strider.InferenceSession(CNN / "model.onnx", max_cached_shapes=2)
    x = np.random.default_rng(3).random((5, 3, 16, 16), dtype=np.float32)
    for batch in (1, 2, 3):
        session.run(None, {"x": x[:batch]})
    assert session.cached_shapes == 2 and session.plans_made == 3
    session.run(None, {"x": x[:1]})  # evicted first (least recently used): planned again
    assert session.plans_made == 4
    pinned = strider.InferenceSession(CNN / "model.onnx", pinned_dims={"batch": 2})
    assert pinned.get_inputs()[0].shape == [2, 3, 16, 16]
    assert pinned.plans_made == 1  # every dim known: planned at load
    with pytest.raises(strider.errors.InvalidArgument, match=r"input 'x' dim 0 \('batch'\): got 3, expected 2"):
        pinned.run(None, {"x": x[:3]})
    session.prepare({"x": [5, 3, 16, 16]})
    made = session.plans_made
    session.run(None, {"x": x})
    assert session.plans_made == made
    prepared = strider.InferenceSession(CNN / "model.onnx", prepared_shapes=[{"x": [5, 3, 16, 16]}, {"x": [2, 3, 16, 16]}])
    assert prepared.plans_made == 2
    prepared.run(None, {"x": x})
    assert prepared.plans_made == 2


def test_every_numpy_dtype_round_trips():
    session = strider.InferenceSession(UNARY / "model.onnx")
    rng = np.random.default_rng(7)
    feed = {
        "x_f32": rng.standard_normal(6).astype(np.float32), "x_f16": rng.standard_normal(6).astype(np.float16),
        "x_f64": rng.standard_normal(6), "x_i64": rng.integers(-2**40, 2**40, 6),
        "x_i32": rng.integers(-2**20, 2**20, 6).astype(np.int32), "x_i8": rng.integers(-100, 100, 6).astype(np.int8),
        "x_u8": rng.integers(0, 255, 6).astype(np.uint8), "x_bool": rng.integers(0, 2, 6).astype(bool),
    }
    outputs = dict(zip([a.name for a in session.get_outputs()], session.run(None, feed)))
    for name, x in feed.items():
        y = outputs["y_" + name[2:]]
        assert y.dtype == x.dtype, name
        want = np.logical_not(x) if x.dtype == bool else (x if x.dtype == np.uint8 else -x)
        np.testing.assert_array_equal(y, want, err_msg=name)
    strided = feed["x_f32"][::2]  # a strided numpy view goes in as its elements
    assert session.run(["y_f32"], {**{k: v[:3] for k, v in feed.items()}, "x_f32": strided})[0].tolist() == (-strided).tolist()


def test_errors_carry_the_status_code_and_one_line():
    with pytest.raises(strider.errors.NotFound) as missing:
        strider.InferenceSession("/no/such/model.onnx")
    assert missing.value.code == "NOT_FOUND" and "\n" not in str(missing.value)
    session = strider.InferenceSession(CNN / "model.onnx")
    with pytest.raises(strider.errors.InvalidArgument, match="input 'x'"):
        session.run(None, {"x": np.zeros((1, 3, 16, 16), dtype=np.float64)})  # wrong dtype
    with pytest.raises(strider.errors.InvalidArgument, match="dim 2"):
        session.run(None, {"x": np.zeros((1, 3, 15, 16), dtype=np.float32)})  # a static dim differs
    with pytest.raises(strider.errors.InvalidArgument, match="missing input 'x'"):
        session.run(None, {})
    assert session.plans_made == 0  # nothing was planned for the bad inputs
    with pytest.raises(strider.errors.NotFound, match="no output named 'z'"):
        session.run(["z"], {"x": np.zeros((1, 3, 16, 16), dtype=np.float32)})
    with pytest.raises(strider.errors.InvalidArgument, match="unknown provider"):
        strider.InferenceSession(CNN / "model.onnx", providers=["TensorrtExecutionProvider"])
    with pytest.raises(strider.Error):
        strider.InferenceSession(CNN / "model.onnx", dtype="f64")


def test_a_malformed_model_is_an_invalid_model(tmp_path):
    bad = tmp_path / "truncated.onnx"
    bad.write_bytes((CNN / "model.onnx").read_bytes()[:100])
    with pytest.raises(strider.errors.InvalidModel):
        strider.InferenceSession(bad)


def test_threads_share_one_session():
    session = strider.InferenceSession(CNN / "model.onnx")
    rng = np.random.default_rng(11)
    batches = [rng.random((b, 3, 16, 16), dtype=np.float32) for b in (1, 2, 3, 4) * 4]
    serial = [session.run(None, {"x": x})[0] for x in batches]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        parallel = list(pool.map(lambda x: session.run(None, {"x": x})[0], batches))
    for a, b in zip(serial, parallel):
        np.testing.assert_array_equal(a, b)


def test_sessions_running_at_once_share_the_cores_or_not():
    rng = np.random.default_rng(12)
    batches = [rng.random((b, 3, 16, 16), dtype=np.float32) for b in (1, 2, 3, 4) * 4]
    expected = [strider.InferenceSession(CNN / "model.onnx").run(None, {"x": x})[0] for x in batches]
    for share in (True, False):
        options = strider.SessionOptions()
        options.share_cores = share
        sessions = [strider.InferenceSession(CNN / "model.onnx", options) for _ in range(3)]
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            got = list(pool.map(lambda k: sessions[k % 3].run(None, {"x": batches[k]})[0], range(len(batches))))
        for a, b in zip(expected, got):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    with pytest.raises(strider.errors.InvalidArgument):
        strider.InferenceSession(CNN / "model.onnx", share_cores_typo=True)


def test_cuda_when_a_gpu_is_here():
    if "CUDAExecutionProvider" not in strider.get_available_providers():
        pytest.skip("no CUDA device here")
    inputs, expected = data_set(CNN, 1)
    session = strider.InferenceSession(CNN / "model.onnx", providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    assert session.get_providers() == ["CUDAExecutionProvider"]
    np.testing.assert_allclose(session.run(None, {"x": inputs[0]})[0], expected[0], rtol=1e-5, atol=1e-6)


def test_outputs_own_their_bytes_and_share_them_through_dlpack():
    session = strider.InferenceSession(CNN / "model.onnx")
    (x,), _ = data_set(CNN, 1)
    (y,) = session.run(None, {"x": x})
    assert y.base is not None and not y.flags["OWNDATA"]  # the output's own buffer, not a copy
    shared = np.from_dlpack(y)
    assert shared.ctypes.data == y.ctypes.data


def test_torch_cpu_tensors_go_in_and_outputs_come_out_through_dlpack():
    torch = pytest.importorskip("torch", reason="Debian's python3-torch is not installed here")
    session = strider.InferenceSession(CNN / "model.onnx")
    (x,), (want,) = data_set(CNN, 1)
    (y,) = session.run(None, {"x": torch.from_numpy(x)})
    t = torch.from_dlpack(y)
    assert t.data_ptr() == y.ctypes.data  # no copy out
    np.testing.assert_allclose(t.numpy(), want, rtol=1e-5, atol=1e-6)
    with pytest.raises(strider.errors.InvalidArgument):
        session.run(None, {"x": torch.from_numpy(x).double()})


def _need_cuda():
    if "CUDAExecutionProvider" not in strider.get_available_providers():
        pytest.skip("no CUDA device here")


def _torch_on_cuda():
    """torch, when strider and torch both see a GPU here."""
    _need_cuda()
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no GPU")
    return torch


def test_cuda_runs_new_shapes_and_matches_the_cli():
    _need_cuda()
    session = strider.InferenceSession(BERT / "model.onnx", device="cuda:0")
    for k in (0, 1, 0):  # (1, 16), (4, 8), (1, 16) again: planned twice
        inputs, expected = data_set(BERT, k)
        outputs = session.run(None, dict(zip(["input_ids", "attention_mask"], inputs)))
        for got, want in zip(outputs, expected):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert session.plans_made == 2
    report = strider.check(BERT, device="cuda")
    assert report["passed"] == 4 and report["failed"] == 0, report  # two outputs, two data sets


def test_run_refuses_cuda_tensors_clearly_bind_them_instead():
    torch = _torch_on_cuda()
    session = strider.InferenceSession(CNN / "model.onnx", device="cuda:0")
    (x,), _ = data_set(CNN, 1)
    with pytest.raises(strider.errors.Unsupported):
        session.run(None, {"x": torch.from_numpy(x).cuda()})


def _bind_and_run(session, x, y):
    """Binds the CNN's x and y to these tensors and runs once; returns the binding."""
    binding = session.io_binding()
    binding.bind_input("x", x)
    binding.bind_output("y", y)
    session.run_with_iobinding(binding)
    return binding


def test_io_binding_reads_and_writes_numpy_memory_in_place():
    # An NCHW plan: its input and output are the caller's dense arrays themselves (an NHWC
    # plan would stage them through its own strided buffers).
    options = strider.SessionOptions()
    options.layout = "nchw"
    session = strider.InferenceSession(CNN / "model.onnx", options)
    (x,), (want,) = data_set(CNN, 1)
    x = np.ascontiguousarray(x)
    y = np.full(want.shape, -7.0, dtype=np.float32)
    binding = _bind_and_run(session, x, y)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
    assert binding.get_outputs()[0] is y
    assert binding._bound_addresses() == [x.ctypes.data, y.ctypes.data]  # no copy either way
    x *= 2  # new values in the same memory, no rebinding
    session.run_with_iobinding(binding)
    np.testing.assert_array_equal(y, session.run(None, {"x": x})[0])
    with pytest.raises(strider.errors.InvalidArgument):
        bad = session.io_binding()
        bad.bind_input("x", x)
        bad.bind_output("y", np.zeros(want.shape, dtype=np.float64))
        session.run_with_iobinding(bad)


def _check_outputs_strider_allocates(session, x, doubled):
    """bind_output with no tensor: strider allocates y on the session's device and hands it
    out as a DeviceValue. A held one is never overwritten by the next run; dropped ones are
    reused. `doubled()` doubles x in place."""
    binding = session.io_binding()
    binding.bind_input("x", x)
    binding.bind_output("y")
    assert binding.get_outputs() == [None]
    session.run_with_iobinding(binding)
    first = binding.get_outputs()[0]
    assert isinstance(first, strider.DeviceValue)
    assert first.device == session.device.replace("sim", "cpu")
    values = first.numpy().copy()
    doubled()
    session.run_with_iobinding(binding)
    second = binding.get_outputs()[0]
    assert second.data_ptr() != first.data_ptr()
    np.testing.assert_array_equal(first.numpy(), values)  # held: the second run wrote elsewhere
    return binding, first, second, values


def test_io_binding_outputs_strider_allocates_leave_through_dlpack():
    session = strider.InferenceSession(CNN / "model.onnx")
    (x,), (want,) = data_set(CNN, 1)
    x = np.ascontiguousarray(x)
    x0 = x.copy()
    binding, first, second, values = _check_outputs_strider_allocates(session, x, lambda: x.__imul__(2))
    np.testing.assert_allclose(values, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(second.numpy(), session.run(None, {"x": 2 * x0})[0])
    shared = np.from_dlpack(second)  # no copy: numpy's array is strider's memory
    assert shared.ctypes.data == second.data_ptr()
    np.testing.assert_array_equal(np.from_dlpack(first), values)
    assert binding.copy_outputs_to_cpu()[0].ctypes.data == second.data_ptr()
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:  # Debian's python3-torch, where installed
        assert torch.from_dlpack(second).data_ptr() == second.data_ptr()
    # Dropped everywhere (the binding lets go of its own before each run): one allocation serves every run.
    del first, second, shared
    seen = set()
    for _ in range(4):
        session.run_with_iobinding(binding)
        seen.add(binding.get_outputs()[0].data_ptr())
    assert len(seen) == 1
    with pytest.raises(BufferError):
        binding.get_outputs()[0].__dlpack__(copy=True)
    with pytest.raises(strider.errors.Unsupported):
        binding.bind_output("y", "cuda")  # a cpu session allocates on the host only


def test_io_binding_outputs_strider_allocates_on_cuda_leave_through_dlpack():
    torch = _torch_on_cuda()
    session = strider.InferenceSession(CNN / "model.onnx", device="cuda:0")
    (x_host,), (want,) = data_set(CNN, 1)
    x = torch.from_numpy(x_host).cuda()
    binding, first, second, values = _check_outputs_strider_allocates(session, x, lambda: x.mul_(2))
    np.testing.assert_allclose(values, want, rtol=1e-4, atol=1e-5)
    assert first.__dlpack_device__() == (2, 0)
    shared = torch.from_dlpack(second)
    assert shared.is_cuda and shared.data_ptr() == second.data_ptr()  # strider's memory, no copy
    np.testing.assert_allclose(shared.cpu().numpy(), session.run(None, {"x": x.cpu().numpy()})[0], rtol=1e-5, atol=1e-6)
    total = (shared * 3).sum()  # queued on torch's stream, reading strider's memory
    del shared, first, second
    session.run_with_iobinding(binding)  # may reuse that memory: waits for torch's work first
    assert torch.isfinite(total).item()


def test_io_binding_of_a_bf16_session_converts_on_the_device():
    session = strider.InferenceSession(CNN / "model.onnx", dtype="bf16")
    (x,), (want,) = data_set(CNN, 1)
    x = np.ascontiguousarray(x)
    y = np.zeros(want.shape, dtype=np.float32)
    binding = _bind_and_run(session, x, y)
    np.testing.assert_array_equal(y, session.run(None, {"x": x})[0])


def test_io_binding_of_a_bf16_session_with_torch_cuda_tensors():
    torch = _torch_on_cuda()
    session = strider.InferenceSession(CNN / "model.onnx", device="cuda:0", dtype="bf16")
    (x_host,), (want,) = data_set(CNN, 1)
    x = torch.from_numpy(x_host).cuda()
    y = torch.zeros(want.shape, dtype=torch.float32, device="cuda")
    binding = _bind_and_run(session, x, y)
    np.testing.assert_array_equal(y.cpu().numpy(), session.run(None, {"x": x_host})[0])


def test_io_binding_with_torch_cuda_tensors_copies_nothing():
    torch = _torch_on_cuda()
    session = strider.InferenceSession(CNN / "model.onnx", device="cuda:0")
    (x_host,), (want,) = data_set(CNN, 1)
    x = torch.from_numpy(x_host).cuda()
    y = torch.empty(want.shape, dtype=torch.float32, device="cuda")
    binding = _bind_and_run(session, x, y)
    np.testing.assert_allclose(y.cpu().numpy(), want, rtol=1e-4, atol=1e-5)
    assert binding._bound_addresses() == [x.data_ptr(), y.data_ptr()]  # strider's kernels used torch's memory
    x.mul_(2)  # written by torch on its stream; strider waits for it
    session.run_with_iobinding(binding)
    np.testing.assert_allclose(y.cpu().numpy(), session.run(None, {"x": x.cpu().numpy()})[0], rtol=1e-5, atol=1e-6)
    out = torch.from_dlpack(binding.get_outputs()[0])
    assert out.data_ptr() == y.data_ptr()
