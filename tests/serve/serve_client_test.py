#!/usr/bin/python3
"""`strider serve` through a real HTTP client (Debian's python3-requests), on loopback.

Starts the server as a user would (a Triton model repository with a good CNN, a BERT-style
encoder with int64 inputs, a corrupt model and a folder without a model; an ephemeral port),
then checks: health and metadata; JSON and binary-extension inference give the same outputs
as `strider run` on the same seeded random inputs; malformed requests, wrong shapes and
datatypes, an oversized body and an abrupt disconnect each get their error and leave the
server serving; concurrent clients all get right answers; statistics and /metrics count what
happened; the gRPC service answers the same (raw and typed contents, its error codes);
a device list spreads instances over devices (cpu,sim here), counted per device in
/metrics; SIGTERM exits 0. Usage: serve_client_test.py STRIDER_BINARY SOURCE_DIR
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import requests

STRIDER, SOURCE = sys.argv[1], sys.argv[2]
CNN = os.path.join(SOURCE, "models/dynamic/SmallCnn_dynamic_batch/model.onnx")
BERT = os.path.join(SOURCE, "models/dynamic/BertEncoder_dynamic/model.onnx")
failures = []


def check(condition, what):
    print(("ok   " if condition else "FAIL ") + what, flush=True)
    if not condition:
        failures.append(what)


def strider_run(model, inputs, work):
    """Outputs of `strider run` on these inputs (name -> array), by position."""
    args = [STRIDER, "run", model, "--output-dir", os.path.join(work, "out")]
    for name, array in inputs.items():
        path = os.path.join(work, name + ".npy")
        np.save(path, array)
        args += ["--input", "%s=%s" % (name, path)]
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    outputs, i = [], 0
    while os.path.exists(os.path.join(work, "out", "output_%d.npy" % i)):
        outputs.append(np.load(os.path.join(work, "out", "output_%d.npy" % i)))
        i += 1
    shutil.rmtree(os.path.join(work, "out"))
    return outputs


def make_repository(root):
    for name, source in (("cnn", CNN), ("bert", BERT)):
        os.makedirs(os.path.join(root, name, "1"))
        shutil.copy(source, os.path.join(root, name, "1", "model.onnx"))
    os.makedirs(os.path.join(root, "cnn", "3"))  # the highest version is served
    shutil.copy(CNN, os.path.join(root, "cnn", "3", "model.onnx"))
    os.makedirs(os.path.join(root, "broken", "1"))
    with open(os.path.join(root, "broken", "1", "model.onnx"), "wb") as f:
        f.write(b"\x08\x07 this is not a model" * 10)
    os.makedirs(os.path.join(root, "empty"))


def start_server(root, work, *extra, log="server.log"):
    port_file = os.path.join(work, "port")
    if os.path.exists(port_file):
        os.remove(port_file)
    server = subprocess.Popen([STRIDER, "serve", "--model-repository", root, "--host", "127.0.0.1", "--http-port", "0",
                               "--grpc-port", "0", "--port-file", port_file, "--max-body-mb", "1", "--threads", "1"]
                              + list(extra),
                              stderr=open(os.path.join(work, log), "w"))
    deadline = time.time() + 120
    while time.time() < deadline and not os.path.exists(port_file):
        if server.poll() is not None:
            print(open(os.path.join(work, log)).read())
            sys.exit("the server exited with %d before listening" % server.returncode)
        time.sleep(0.1)
    ports = dict(line.split() for line in open(port_file).read().splitlines())
    return server, "http://127.0.0.1:%s" % ports["http"], "127.0.0.1:%s" % ports["grpc"]


def json_infer(url, model, inputs, outputs=None):
    body = {"id": "r1", "inputs": [{"name": n, "shape": list(a.shape), "datatype": "FP32" if a.dtype == np.float32 else "INT64",
                                    "data": a.flatten().tolist()} for n, a in inputs.items()]}
    if outputs:
        body["outputs"] = [{"name": o} for o in outputs]
    return requests.post("%s/v2/models/%s/infer" % (url, model), data=json.dumps(body))


def binary_infer(url, model, inputs):
    header = {"inputs": [{"name": n, "shape": list(a.shape), "datatype": "FP32" if a.dtype == np.float32 else "INT64",
                          "parameters": {"binary_data_size": a.nbytes}} for n, a in inputs.items()],
              "parameters": {"binary_data_output": True}}
    head = json.dumps(header).encode()
    body = head + b"".join(a.tobytes() for a in inputs.values())
    r = requests.post("%s/v2/models/%s/infer" % (url, model), data=body,
                      headers={"Inference-Header-Content-Length": str(len(head))})
    if r.status_code != 200:
        return r, None
    length = int(r.headers["Inference-Header-Content-Length"])
    meta, rest, arrays = json.loads(r.content[:length]), r.content[length:], []
    for out in meta["outputs"]:
        size = out["parameters"]["binary_data_size"]
        arrays.append(np.frombuffer(rest[:size], dtype=np.float32).reshape(out["shape"]))
        rest = rest[size:]
    return r, arrays


def check_metadata(url):
    check(requests.get(url + "/v2/health/live").status_code == 200, "live")
    check(requests.get(url + "/v2/health/ready").status_code == 200, "ready with two of four models loaded")
    meta = requests.get(url + "/v2/models/cnn").json()
    check(meta["versions"] == ["3"] and meta["inputs"][0]["shape"] == [-1, 3, 16, 16], "cnn metadata: version 3, open batch dim")
    check(requests.get(url + "/v2/models/cnn/versions/3/ready").status_code == 200, "cnn version 3 ready")
    check(requests.get(url + "/v2/models/cnn/versions/1/ready").status_code == 404, "cnn version 1 not served: 404")
    broken = requests.get(url + "/v2/models/broken")
    check(broken.status_code == 503 and "broken" in broken.json()["error"], "a corrupt model is reported by name: " + broken.text[:120])
    check(requests.get(url + "/v2/models/empty/ready").status_code == 503, "a folder without a model is not ready")
    check(requests.get(url + "/v2/models/nope").status_code == 404, "unknown model: 404")
    check(requests.get(url + "/v2/nowhere").json().get("error", "").startswith("no route"), "unknown path: JSON error")
    check("binary_tensor_data" in requests.get(url + "/v2").json()["extensions"], "server metadata")
    check(requests.get(url + "/v2/models/cnn/config").json()["input"][0]["data_type"] == "TYPE_FP32", "Triton config")


def check_inference(url, work):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 3, 16, 16)).astype(np.float32)
    expected = strider_run(CNN, {"x": x}, work)
    r = json_infer(url, "cnn", {"x": x})
    got = np.array(r.json()["outputs"][0]["data"], dtype=np.float32).reshape(r.json()["outputs"][0]["shape"])
    check(r.status_code == 200 and r.json()["id"] == "r1" and np.array_equal(got, expected[0]), "cnn JSON infer == strider run")
    r, arrays = binary_infer(url, "cnn", {"x": x})
    check(arrays is not None and np.array_equal(arrays[0], expected[0]), "cnn binary infer == strider run")
    ids = rng.integers(0, 100, size=(2, 7)).astype(np.int64)
    mask = np.ones((2, 7), dtype=np.int64)
    mask[1, 5:] = 0
    expected = strider_run(BERT, {"input_ids": ids, "attention_mask": mask}, work)
    r = json_infer(url, "bert", {"input_ids": ids, "attention_mask": mask}, outputs=["pooled"])
    out = r.json()["outputs"]
    check(r.status_code == 200 and len(out) == 1 and out[0]["name"] == "pooled", "bert: only the output asked for")
    got = np.array(out[0]["data"], dtype=np.float32).reshape(out[0]["shape"])
    check(np.array_equal(got, expected[1]), "bert INT64 JSON infer == strider run (max diff %g)" % np.abs(got - expected[1]).max())
    r, arrays = binary_infer(url, "bert", {"input_ids": ids, "attention_mask": mask})
    check(arrays is not None and np.array_equal(arrays[0], expected[0]), "bert binary infer == strider run")
    return x


def check_shared_memory(url, work, x):
    """Triton's system shared-memory extension: the image read from a registered POSIX
    shared-memory object and the output written into it, equal to `strider run`."""
    from multiprocessing import shared_memory
    expected = strider_run(CNN, {"x": x}, work)[0]
    output = requests.get(url + "/v2/models/cnn").json()["outputs"][0]["name"]
    shm = shared_memory.SharedMemory(create=True, size=64 + x.nbytes + expected.nbytes)
    base = url + "/v2/systemsharedmemory"
    try:
        key = "/" + shm.name
        shm.buf[64:64 + x.nbytes] = x.tobytes()
        r = requests.post(base + "/region/io/register", data=json.dumps({"key": key, "offset": 0, "byte_size": shm.size}))
        check(r.status_code == 200, "register a shared memory region: " + r.text[:200])
        check(requests.get(base + "/status").json() == [{"name": "io", "key": key, "offset": 0, "byte_size": shm.size}],
              "shared memory status lists the region")
        at = 64 + x.nbytes
        body = {"inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32",
                            "parameters": {"shared_memory_region": "io", "shared_memory_byte_size": x.nbytes,
                                           "shared_memory_offset": 64}}],
                "outputs": [{"name": output, "parameters": {"shared_memory_region": "io", "shared_memory_offset": at,
                                                            "shared_memory_byte_size": expected.nbytes}}]}
        r = requests.post(url + "/v2/models/cnn/infer", data=json.dumps(body))
        out = r.json()["outputs"][0] if r.status_code == 200 else {}
        got = np.frombuffer(bytes(shm.buf[at:at + expected.nbytes]), dtype=np.float32).reshape(expected.shape)
        check(r.status_code == 200 and "data" not in out and out["parameters"]["shared_memory_byte_size"] == expected.nbytes
              and np.array_equal(got, expected), "cnn shared-memory infer == strider run: " + r.text[:200])
        check(requests.post(base + "/region/io/unregister").status_code == 200, "unregister the region")
        r = requests.post(url + "/v2/models/cnn/infer", data=json.dumps(body))
        check(r.status_code == 400 and "no shared memory region 'io'" in r.json()["error"], "infer after unregister: 400 " + r.text[:160])
        check(requests.get(base + "/region/io/status").status_code == 400, "status of an unknown region: 400")
        r = requests.post(base + "/region/bad/register", data=json.dumps({"key": "/strider-no-such-object", "byte_size": 8}))
        check(r.status_code == 400 and "no shared-memory object" in r.json()["error"], "register a missing object: 400")
    finally:
        shm.close()
        shm.unlink()


def check_bad_requests(url, x):
    infer = url + "/v2/models/cnn/infer"
    small_binary = json.dumps({"inputs": [{"name": "x", "shape": [1, 3, 16, 16], "datatype": "FP32",
                                           "parameters": {"binary_data_size": 8}}]}).encode()
    cases = [
        ("malformed JSON", requests.post(infer, data="{\"inputs\": [")),
        ("wrong datatype", requests.post(infer, data=json.dumps({"inputs": [{"name": "x", "shape": [1, 3, 16, 16], "datatype": "FP64",
                                                                             "data": [0.0] * 768}]}))),
        ("wrong shape", json_infer(url, "cnn", {"x": x[:, :2]})),
        ("data not matching the shape", requests.post(infer, data=json.dumps({"inputs": [{"name": "x", "shape": [1, 3, 16, 16],
                                                                                          "datatype": "FP32", "data": [1.0, 2.0]}]}))),
        ("unknown input", requests.post(infer, data=json.dumps({"inputs": [{"name": "z", "shape": [1], "datatype": "FP32", "data": [1]}]}))),
        ("binary size mismatch", requests.post(infer, data=small_binary + b"12345678",
                                                headers={"Inference-Header-Content-Length": str(len(small_binary))})),
        ("bad header length", requests.post(infer, data="{}", headers={"Inference-Header-Content-Length": "x"})),
    ]
    for what, r in cases:
        ok = r.status_code == 400 and "error" in r.json()
        check(ok, "%s: 400 %s" % (what, r.text[:100]))
    r = requests.post(infer, data=b"[" + b"1.0," * 400000 + b"1.0]")
    check(r.status_code == 413 and "limit" in r.json()["error"], "a body over --max-body-mb: 413")
    with socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1]))) as s:  # an abrupt disconnect mid-body
        s.sendall(b"POST /v2/models/cnn/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{\"inputs\": [")
    r = json_infer(url, "cnn", {"x": x})
    check(r.status_code == 200, "still serving after all of that")


def check_concurrency(url):
    rng = np.random.default_rng(11)
    inputs = [rng.standard_normal((1, 3, 16, 16)).astype(np.float32) for _ in range(4)]
    reference = [binary_infer(url, "cnn", {"x": a})[1][0] for a in inputs]
    wrong = []

    def client(k):
        for i in range(10):
            j = (k + i) % 4
            r, arrays = binary_infer(url, "cnn", {"x": inputs[j]})
            if arrays is None or not np.array_equal(arrays[0], reference[j]):
                wrong.append((k, i, r.status_code))
    threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check(not wrong, "8 concurrent clients x 10 requests, each its own right answer (%d wrong)" % len(wrong))


def check_statistics(url):
    stats = requests.get(url + "/v2/models/cnn/stats").json()["model_stats"][0]["inference_stats"]
    check(stats["success"]["count"] >= 86 and stats["fail"]["count"] >= 6, "statistics: %s" % json.dumps(stats)[:160])
    metrics = requests.get(url + "/metrics").text
    line = [l for l in metrics.splitlines() if l.startswith('nv_inference_request_success{model="cnn"')]
    check(line and int(line[0].split()[-1]) == stats["success"]["count"], "metrics agree with statistics: %s" % line)
    held = [l for l in metrics.splitlines() if l.startswith('strider_device_memory_bytes{model="cnn"')]
    check(held and int(held[0].split()[-1]) > 0, "metrics report the device memory the model holds: %s" % held)


def stop(server, work, log):
    server.send_signal(signal.SIGTERM)
    try:
        code = server.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.kill()
        code = "hung"
    check(code == 0, "SIGTERM: exit %s" % code)
    check('"message":"stopped"' in open(os.path.join(work, log)).read(), "the log ends with the shutdown")


def check_grpc_deadline(url, address, x):
    """A gRPC client whose 5-ms deadline passes inside the 200-ms batching delay: the client
    sees DEADLINE_EXCEEDED, and the server drops the request without running it."""
    import grpc
    import grpc_service_pb2 as pb
    runs = lambda: requests.get(url + "/v2/models/cnn/stats").json()["model_stats"][0]["execution_count"]
    before = runs()
    stub = grpc.insecure_channel(address).unary_unary(
        "/inference.GRPCInferenceService/ModelInfer", request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=pb.ModelInferResponse.FromString)
    request = pb.ModelInferRequest(model_name="cnn", inputs=[pb.ModelInferRequest.InferInputTensor(
        name="x", datatype="FP32", shape=list(x.shape))], raw_input_contents=[x.tobytes()])
    try:
        stub(request, timeout=0.005)
        code = grpc.StatusCode.OK
    except grpc.RpcError as e:
        code = e.code()
    time.sleep(0.5)  # past the delay: the request's batch formed (without it)
    after = runs()
    check(code == grpc.StatusCode.DEADLINE_EXCEEDED and after == before,
          "gRPC deadline inside the batching delay: %s, runs %d -> %d (dropped, not run)" % (code, before, after))


def check_http_disconnect(url, x):
    """An HTTP client that sends a whole request and closes its connection inside the
    200-ms batching delay: the server drops the request without running it."""
    runs = lambda: requests.get(url + "/v2/models/cnn/stats").json()["model_stats"][0]["execution_count"]
    before = runs()
    head = json.dumps({"inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32",
                                   "parameters": {"binary_data_size": x.nbytes}}]}).encode()
    body = head + x.tobytes()
    host, port = url.rsplit("/", 1)[1].split(":")
    with socket.create_connection((host, int(port))) as s:
        s.sendall(b"POST /v2/models/cnn/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"
                  b"Inference-Header-Content-Length: %d\r\n\r\n" % (len(body), len(head)) + body)
        time.sleep(0.02)
    time.sleep(0.5)
    after = runs()
    check(after == before, "HTTP client gone inside the batching delay: runs %d -> %d (dropped, not run)" % (before, after))
    r = binary_infer(url, "cnn", {"x": x})[1]
    check(r is not None, "a request after it is answered")


def check_batching(root, work):
    """A second server with --max-batch 8: concurrent one- and multi-row requests are merged
    (fewer runs than requests), each gets its own rows, and a request whose timeout passes
    in the queue is refused, never run."""
    server, url, grpc_address = start_server(root, work, "--max-batch", "8", "--max-queue-delay-us", "200000", "--batch-cap", "fixed",
                               log="batching.log")
    try:
        rng = np.random.default_rng(5)
        inputs = [rng.standard_normal((1 + k % 3, 3, 16, 16)).astype(np.float32) for k in range(12)]
        expected = strider_run(CNN, {"x": np.concatenate(inputs)}, work)[0]
        first = np.cumsum([0] + [len(a) for a in inputs])
        results = [None] * len(inputs)

        def client(k):
            results[k] = binary_infer(url, "cnn", {"x": inputs[k]})[1]
        threads = [threading.Thread(target=client, args=(k,)) for k in range(len(inputs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wrong = [k for k in range(len(inputs)) if results[k] is None or
                 not np.allclose(results[k][0], expected[first[k]:first[k + 1]], rtol=1e-5, atol=1e-6)]
        check(not wrong, "batched: 12 concurrent requests of 1-3 rows, each its own rows (wrong: %s)" % wrong)
        metrics = requests.get(url + "/metrics").text
        runs = [int(l.split()[-1]) for l in metrics.splitlines() if l.startswith('strider_batch_size_count{model="cnn"')]
        check(runs and runs[0] < len(inputs), "batched: %s runs for %d requests" % (runs, len(inputs)))
        body = {"inputs": [{"name": "x", "shape": [1, 3, 16, 16], "datatype": "FP32", "data": inputs[0].flatten().tolist()}],
                "parameters": {"timeout": 1000}}
        r = requests.post(url + "/v2/models/cnn/infer", data=json.dumps(body))
        check(r.status_code == 503 and "timeout" in r.json()["error"], "a 1-ms timeout inside a 200-ms batching delay: 503 " + r.text[:90])
        check_grpc_deadline(url, grpc_address, inputs[0])
        check_http_disconnect(url, inputs[0])
        log = open(os.path.join(work, "batching.log")).read()
        check(re.search(r'"batching":"on","level":"info","max_batch":8,"message":"model ready","model":"cnn"', log),
              "the log says the cnn batches, up to 8 rows (--batch-cap fixed)")
    finally:
        stop(server, work, "batching.log")


def check_grpc(address, work):
    """The gRPC service through Debian's python3-grpcio, with message classes that protoc
    generates from tools/serve/proto/grpc_service.proto here (no grpc_tools needed)."""
    import grpc
    subprocess.run(["protoc", "--python_out=" + work, "-I", os.path.join(SOURCE, "tools/serve/proto"), "grpc_service.proto"],
                   check=True)
    sys.path.insert(0, work)
    import grpc_service_pb2 as pb
    channel = grpc.insecure_channel(address)

    def call(method, request, response_type):
        stub = channel.unary_unary("/inference.GRPCInferenceService/" + method, request_serializer=lambda m: m.SerializeToString(),
                                   response_deserializer=response_type.FromString)
        return stub(request, timeout=60)
    check(call("ServerLive", pb.ServerLiveRequest(), pb.ServerLiveResponse).live, "gRPC ServerLive")
    check(call("ServerReady", pb.ServerReadyRequest(), pb.ServerReadyResponse).ready, "gRPC ServerReady")
    check(call("ModelReady", pb.ModelReadyRequest(name="cnn"), pb.ModelReadyResponse).ready, "gRPC ModelReady")
    meta = call("ModelMetadata", pb.ModelMetadataRequest(name="bert"), pb.ModelMetadataResponse)
    check([i.datatype for i in meta.inputs] == ["INT64", "INT64"] and list(meta.inputs[0].shape) == [-1, -1],
          "gRPC ModelMetadata: INT64 inputs, open dims")
    check("binary_tensor_data" in call("ServerMetadata", pb.ServerMetadataRequest(), pb.ServerMetadataResponse).extensions,
          "gRPC ServerMetadata")
    rng = np.random.default_rng(9)
    x = rng.standard_normal((3, 3, 16, 16)).astype(np.float32)
    expected = strider_run(CNN, {"x": x}, work)[0]
    raw = pb.ModelInferRequest(model_name="cnn", id="g1", inputs=[pb.ModelInferRequest.InferInputTensor(
        name="x", datatype="FP32", shape=list(x.shape))], raw_input_contents=[x.tobytes()])
    r = call("ModelInfer", raw, pb.ModelInferResponse)
    y = np.frombuffer(r.raw_output_contents[0], dtype=np.float32).reshape(list(r.outputs[0].shape))
    check(r.id == "g1" and np.array_equal(y, expected), "gRPC ModelInfer, raw contents == strider run")
    typed = pb.ModelInferRequest(model_name="cnn", inputs=[pb.ModelInferRequest.InferInputTensor(
        name="x", datatype="FP32", shape=list(x.shape), contents=pb.InferTensorContents(fp32_contents=x.flatten().tolist()))])
    r = call("ModelInfer", typed, pb.ModelInferResponse)
    y = np.frombuffer(r.raw_output_contents[0], dtype=np.float32).reshape(list(r.outputs[0].shape))
    check(np.array_equal(y, expected), "gRPC ModelInfer, typed contents == strider run")
    for what, request, code in [
            ("unknown model", pb.ModelInferRequest(model_name="nope"), grpc.StatusCode.NOT_FOUND),
            ("raw bytes short", pb.ModelInferRequest(model_name="cnn", inputs=raw.inputs, raw_input_contents=[x.tobytes()[:-4]]),
             grpc.StatusCode.INVALID_ARGUMENT),
            ("wrong datatype", pb.ModelInferRequest(model_name="cnn", inputs=[pb.ModelInferRequest.InferInputTensor(
                name="x", datatype="INT32", shape=[1])]), grpc.StatusCode.INVALID_ARGUMENT),
            ("not ready", pb.ModelInferRequest(model_name="broken"), grpc.StatusCode.UNAVAILABLE)]:
        try:
            call("ModelInfer", request, pb.ModelInferResponse)
            check(False, "gRPC %s: no error" % what)
        except grpc.RpcError as e:
            check(e.code() == code, "gRPC %s: %s %s" % (what, e.code(), e.details()[:80]))
    check_grpc_shared_memory(call, pb, work)


def check_grpc_shared_memory(call, pb, work):
    """Triton's system shared-memory calls over gRPC: register, status, an input and an output
    in a region (the output's raw_output_contents entry empty, as Triton answers), one input in
    a region and the other raw (raw_input_contents then has one entry), a short output range
    refused before anything is written, unregister-all."""
    import grpc
    from multiprocessing import shared_memory
    rng = np.random.default_rng(21)
    x = rng.standard_normal((2, 3, 16, 16)).astype(np.float32)
    expected = strider_run(CNN, {"x": x}, work)[0]
    ids = rng.integers(0, 100, size=(2, 5)).astype(np.int64)
    mask = np.ones((2, 5), dtype=np.int64)
    mask[0, 3:] = 0
    bert_expected = strider_run(BERT, {"input_ids": ids, "attention_mask": mask}, work)
    shm = shared_memory.SharedMemory(create=True, size=64 + x.nbytes + expected.nbytes + mask.nbytes)
    param = pb.InferParameter
    try:
        key = "/" + shm.name
        shm.buf[64:64 + x.nbytes] = x.tobytes()
        at = 64 + x.nbytes
        call("SystemSharedMemoryRegister", pb.SystemSharedMemoryRegisterRequest(name="g", key=key, byte_size=shm.size),
             pb.SystemSharedMemoryRegisterResponse)
        status = call("SystemSharedMemoryStatus", pb.SystemSharedMemoryStatusRequest(), pb.SystemSharedMemoryStatusResponse)
        check(list(status.regions) == ["g"] and status.regions["g"].key == key and status.regions["g"].byte_size == shm.size,
              "gRPC shared memory status lists the region")

        def region(offset, size):
            return {"shared_memory_region": param(string_param="g"), "shared_memory_offset": param(int64_param=offset),
                    "shared_memory_byte_size": param(int64_param=size)}
        x_in = pb.ModelInferRequest.InferInputTensor(name="x", datatype="FP32", shape=list(x.shape), parameters=region(64, x.nbytes))
        out = pb.ModelInferRequest.InferRequestedOutputTensor(name="y", parameters=region(at, expected.nbytes))
        meta = call("ModelMetadata", pb.ModelMetadataRequest(name="cnn"), pb.ModelMetadataResponse)
        out.name = meta.outputs[0].name
        r = call("ModelInfer", pb.ModelInferRequest(model_name="cnn", inputs=[x_in], outputs=[out]), pb.ModelInferResponse)
        got = np.frombuffer(bytes(shm.buf[at:at + expected.nbytes]), dtype=np.float32).reshape(expected.shape)
        check(len(r.raw_output_contents) == 1 and r.raw_output_contents[0] == b"" and np.array_equal(got, expected),
              "gRPC shared-memory infer == strider run, its raw entry empty")
        shm.buf[at:at + expected.nbytes] = bytes(expected.nbytes)
        short = pb.ModelInferRequest.InferRequestedOutputTensor(name=out.name, parameters=region(at, expected.nbytes - 4))
        try:
            call("ModelInfer", pb.ModelInferRequest(model_name="cnn", inputs=[x_in], outputs=[short]), pb.ModelInferResponse)
            check(False, "gRPC output range too short: no error")
        except grpc.RpcError as e:
            check(e.code() == grpc.StatusCode.INVALID_ARGUMENT and "does not fit" in e.details()
                  and not any(shm.buf[at:at + expected.nbytes]), "gRPC output range too short: refused, nothing written")
        m_at = at + expected.nbytes
        shm.buf[m_at:m_at + mask.nbytes] = mask.tobytes()
        mixed = pb.ModelInferRequest(model_name="bert", inputs=[
            pb.ModelInferRequest.InferInputTensor(name="input_ids", datatype="INT64", shape=list(ids.shape)),
            pb.ModelInferRequest.InferInputTensor(name="attention_mask", datatype="INT64", shape=list(mask.shape),
                                                  parameters=region(m_at, mask.nbytes))], raw_input_contents=[ids.tobytes()])
        r = call("ModelInfer", mixed, pb.ModelInferResponse)
        got = [np.frombuffer(r.raw_output_contents[i], dtype=np.float32).reshape(list(r.outputs[i].shape)) for i in range(2)]
        check(all(np.array_equal(g, e) for g, e in zip(got, bert_expected)),
              "gRPC bert, attention_mask from shared memory and input_ids raw == strider run")
        call("SystemSharedMemoryUnregister", pb.SystemSharedMemoryUnregisterRequest(), pb.SystemSharedMemoryUnregisterResponse)
        try:
            call("ModelInfer", pb.ModelInferRequest(model_name="cnn", inputs=[x_in]), pb.ModelInferResponse)
            check(False, "gRPC infer after unregister-all: no error")
        except grpc.RpcError as e:
            check(e.code() == grpc.StatusCode.INVALID_ARGUMENT and "no shared memory region 'g'" in e.details(),
                  "gRPC infer after unregister-all: INVALID_ARGUMENT")
    finally:
        shm.close()
        shm.unlink()


def check_instances_on_devices(work):
    """A server over a device list (cpu,sim) with two instances per device: four instances of
    the model, each counted in /metrics by device; concurrent clients get right answers from
    more than one of them; a model whose config.json names a device twice is refused by name."""
    root = os.path.join(work, "devices")
    os.makedirs(os.path.join(root, "cnn", "1"))
    shutil.copy(CNN, os.path.join(root, "cnn", "1", "model.onnx"))
    os.makedirs(os.path.join(root, "twice", "1"))
    shutil.copy(CNN, os.path.join(root, "twice", "1", "model.onnx"))
    with open(os.path.join(root, "twice", "config.json"), "w") as f:
        json.dump({"device": "cpu,cpu"}, f)
    server, url, _ = start_server(root, work, "--device", "cpu,sim", "--instances-per-device", "2", log="devices.log")
    try:
        twice = requests.get(url + "/v2/models/twice")
        check(twice.status_code == 503 and "cpu twice" in twice.json()["error"], "a device named twice: " + twice.text[:120])
        rng = np.random.default_rng(13)  # 16 rows a request: runs long enough to overlap
        inputs = [rng.standard_normal((16, 3, 16, 16)).astype(np.float32) for _ in range(4)]
        expected = [strider_run(CNN, {"x": a}, work)[0] for a in inputs]
        wrong = []

        def client(k):
            for i in range(6):
                j = (k + i) % 4
                arrays = binary_infer(url, "cnn", {"x": inputs[j]})[1]
                if arrays is None or not np.allclose(arrays[0], expected[j], rtol=1e-5, atol=1e-6):
                    wrong.append((k, i))
        threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        check(not wrong, "cpu,sim x 2 instances: 8 clients x 6 requests, each its own right answer (%d wrong)" % len(wrong))
        counts = {}
        for line in requests.get(url + "/metrics").text.splitlines():
            m = re.match(r'strider_instance_exec_count\{model="cnn",version="1",device="(\w+)",instance="(\d)"\} (\d+)', line)
            if m:
                counts[(m.group(1), int(m.group(2)))] = int(m.group(3))
        check(sorted(counts) == [("cpu", 0), ("cpu", 1), ("sim", 0), ("sim", 1)], "/metrics: one line per instance: %s" % counts)
        check(sum(counts.values()) == 48 and sum(1 for c in counts.values() if c > 0) > 1,
              "the 48 runs are spread over the instances: %s" % counts)
        rotation = re.findall(r'strider_instance_in_rotation\{model="cnn",[^}]*\} (\d)', requests.get(url + "/metrics").text)
        check(rotation == ["1"] * 4, "/metrics: all four instances in rotation: %s" % rotation)
    finally:
        stop(server, work, "devices.log")


def main():
    work = tempfile.mkdtemp(prefix="strider-serve-")
    root = os.path.join(work, "repository")
    make_repository(root)
    server, url, grpc_address = start_server(root, work)
    try:
        check_metadata(url)
        x = check_inference(url, work)
        check_shared_memory(url, work, x)
        check_bad_requests(url, x)
        check_concurrency(url)
        check_statistics(url)
        check_grpc(grpc_address, work)
    finally:
        stop(server, work, "server.log")
    check_batching(root, work)
    check_instances_on_devices(work)
    shutil.rmtree(work)
    if failures:
        sys.exit("%d failed: %s" % (len(failures), "; ".join(failures)))
    print("all passed")


main()
