#!/usr/bin/env python3
"""Writes bench/attention/attention_<b>x<h>x<s>x<d>.onnx: one unfused attention block as torch
exports it (MatMul(q, k^T) / sqrt(d) + mask, Softmax, MatMul with v; q, k, v and the mask as
inputs, no weights), for timing strider's FusedAttention against the unfused kernels:

  strider bench bench/attention/attention_4x12x1024x64.onnx --random-inputs --device cuda --fusion on|off

Run with Debian's python3-onnx: /usr/bin/python3 bench/attention_models.py
"""
import math
import os

import onnx
from onnx import TensorProto, helper

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "attention")


def attention(b, h, s, d):
    f = TensorProto.FLOAT
    inputs = [helper.make_tensor_value_info("q", f, [b, h, s, d]), helper.make_tensor_value_info("k", f, [b, h, s, d]),
              helper.make_tensor_value_info("v", f, [b, h, s, d]), helper.make_tensor_value_info("mask", f, [b, 1, 1, s])]
    scale = helper.make_tensor("scale", f, [], [math.sqrt(d)])
    nodes = [
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
        helper.make_node("MatMul", ["q", "kt"], ["scores"]),
        helper.make_node("Div", ["scores", "scale"], ["scaled"]),
        helper.make_node("Add", ["scaled", "mask"], ["masked"]),
        helper.make_node("Softmax", ["masked"], ["probs"], axis=-1),
        helper.make_node("MatMul", ["probs", "v"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "attention", inputs, [helper.make_tensor_value_info("y", f, [b, h, s, d])],
                              initializer=[scale])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="bench/attention_models.py")
    onnx.checker.check_model(model)
    os.makedirs(OUT, exist_ok=True)
    onnx.save(model, os.path.join(OUT, f"attention_{b}x{h}x{s}x{d}.onnx"))


if __name__ == "__main__":
    for shape in ((1, 12, 128, 64), (4, 12, 512, 64), (4, 12, 1024, 64), (1, 32, 2048, 128)):
        attention(*shape)
