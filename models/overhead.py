#!/usr/bin/python3
"""Generate strider's per-step overhead model and its test data (no torch needed).

    /usr/bin/python3 models/overhead.py [--out models/overhead]

SoftmaxChain64: 64 Softmax nodes in a chain over a [1, 16] input. Each step computes almost
nothing (16 elements), no runtime fuses Softmax into Softmax, so the time of a call over
that of a one-node model, divided by the 63 extra steps, is what a runtime spends per step
(dispatch, ordering, its kernel's fixed cost): bench/cpu-peers/run prints it for strider and
ONNX Runtime side by side (issue 13, per-call overhead).
"""

import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

STEPS = 64


def softmax_chain(steps):
    nodes, name = [], "x"
    for i in range(steps):
        out = "y" if i == steps - 1 else f"s{i}"
        nodes.append(helper.make_node("Softmax", [name], [out], axis=-1, name=f"softmax_{i}"))
        name = out
    graph = helper.make_graph(nodes, f"SoftmaxChain{steps}",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="strider models/overhead.py")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def reference(x, steps):
    y = x.astype(np.float64)
    for _ in range(steps):
        e = np.exp(y - y.max(axis=-1, keepdims=True))
        y = e / e.sum(axis=-1, keepdims=True)
    return y.astype(np.float32)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "overhead"))
    args = parser.parse_args()
    folder = os.path.join(args.out, f"SoftmaxChain{STEPS}")
    data = os.path.join(folder, "test_data_set_0")
    os.makedirs(data, exist_ok=True)
    onnx.save(softmax_chain(STEPS), os.path.join(folder, "model.onnx"))
    x = np.random.default_rng(13).standard_normal((1, 16)).astype(np.float32) * 3
    for name, value in (("input_0.pb", numpy_helper.from_array(x, "x")),
                        ("output_0.pb", numpy_helper.from_array(reference(x, STEPS), "y"))):
        with open(os.path.join(data, name), "wb") as f:
            f.write(value.SerializeToString())
    print(f"wrote {folder}")


if __name__ == "__main__":
    main()
