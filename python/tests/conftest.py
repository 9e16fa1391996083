"""Helpers for the Python package's tests (run by ctest as python_tests, with PYTHONPATH
pointing at the build tree's python/ folder)."""
import os
import pathlib
import subprocess

import numpy as np
import pytest

SOURCE = pathlib.Path(os.environ.get("STRIDER_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
BINARY = pathlib.Path(os.environ.get("STRIDER_BINARY_DIR", SOURCE / "build"))
MODELS = SOURCE / "models"

# TensorProto data_type codes -> numpy dtypes (what the test models' files hold).
_PB_DTYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 6: np.int32, 7: np.int64, 9: np.bool_, 10: np.float16,
              11: np.float64}


def _varint(data, i):
    value, shift = 0, 0
    while True:
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, i


def read_pb(path):
    """A TensorProto file with raw_data (as numpy_helper writes them) as a numpy array.
    Written here so the tests need no onnx package."""
    data = pathlib.Path(path).read_bytes()
    dims, dtype, raw, i = [], None, b"", 0
    while i < len(data):
        key, i = _varint(data, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
            if field == 1:
                dims.append(value)
            elif field == 2:
                dtype = value
        elif wire == 2:
            length, i = _varint(data, i)
            chunk = data[i:i + length]
            i += length
            if field == 1:  # packed dims
                j = 0
                while j < len(chunk):
                    value, j = _varint(chunk, j)
                    dims.append(value)
            elif field == 9:
                raw = chunk
        elif wire == 5:
            i += 4
        elif wire == 1:
            i += 8
        else:
            raise ValueError(f"{path}: wire type {wire}")
    return np.frombuffer(raw, dtype=_PB_DTYPES[dtype]).reshape(dims).copy()


def data_set(folder, k=0):
    """(inputs, outputs) of test_data_set_k as lists of numpy arrays."""
    d = pathlib.Path(folder) / f"test_data_set_{k}"
    count = lambda prefix: len(list(d.glob(prefix + "_*.pb")))
    return ([read_pb(d / f"input_{i}.pb") for i in range(count("input"))],
            [read_pb(d / f"output_{i}.pb") for i in range(count("output"))])


def strider_cli(*args):
    """Runs the strider CLI of this build; (exit code, stdout, stderr)."""
    done = subprocess.run([str(BINARY / "strider"), *map(str, args)], capture_output=True, text=True)
    return done.returncode, done.stdout, done.stderr


@pytest.fixture
def seed_model():
    return MODELS / "seed" / "LinearChunkLastDim_shape_op13"
