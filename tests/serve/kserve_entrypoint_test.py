#!/usr/bin/python3
"""deploy/strider-kserve-entrypoint as KServe runs it: KServe's arguments over a model folder
of version subfolders become a `strider serve` that serves the folder's name from its
highest version, takes STRIDER_SERVE_ARGS, and exits 0 on SIGTERM (the entrypoint execs the
server, so the signal reaches it); an argument KServe would not pass is refused.
Usage: kserve_entrypoint_test.py STRIDER_BINARY SOURCE_DIR"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import requests

STRIDER, SOURCE = sys.argv[1], sys.argv[2]
ENTRYPOINT = os.path.join(SOURCE, "deploy", "strider-kserve-entrypoint")
CNN = os.path.join(SOURCE, "models/dynamic/SmallCnn_dynamic_batch/model.onnx")
BERT = os.path.join(SOURCE, "models/dynamic/BertEncoder_dynamic/model.onnx")

work = tempfile.mkdtemp(prefix="strider-entrypoint-")
models = os.path.join(work, "mnt", "classifier")
for version, source in (("1", BERT), ("2", CNN)):  # version 2 (the CNN) is the one served
    os.makedirs(os.path.join(models, version))
    shutil.copy(source, os.path.join(models, version, "model.onnx"))
env = dict(os.environ, PATH=os.path.dirname(os.path.abspath(STRIDER)) + ":" + os.environ["PATH"],
           STRIDER_SERVE_ARGS="--host 127.0.0.1 --port-file %s/ports --threads 1" % work)
bad = subprocess.run([ENTRYPOINT, "--model_dir=" + models, "--workers=4"], env=env, capture_output=True, text=True)
assert bad.returncode == 2 and "unknown argument '--workers=4'" in bad.stderr, bad.stderr
server = subprocess.Popen([ENTRYPOINT, "--model_dir=" + models, "--http_port=0", "--grpc_port=-1"], env=env)
try:
    deadline = time.time() + 120
    while not os.path.exists(os.path.join(work, "ports")):
        assert server.poll() is None and time.time() < deadline, "the server did not start"
        time.sleep(0.1)
    ports = dict(line.split() for line in open(os.path.join(work, "ports")).read().splitlines())
    url = "http://127.0.0.1:%s" % ports["http"]
    assert ports["grpc"] == "-1", ports
    meta = requests.get(url + "/v2/models/classifier").json()
    assert meta["inputs"][0]["shape"] == [-1, 3, 16, 16], meta  # version 2's CNN, named after the folder
    assert requests.get(url + "/v2/health/ready").status_code == 200
finally:
    server.send_signal(signal.SIGTERM)
    code = server.wait(timeout=30)
assert code == 0, "exit %d after SIGTERM" % code
shutil.rmtree(work)
print("the entrypoint serves classifier (version 2) from KServe's arguments; SIGTERM exits 0")
