#!/usr/bin/env python3
"""Models with symbolic input dims, for the Python API's any-shape-per-run tests
(python/tests) and `strider check` of several shapes of one model.

  SmallCnn_dynamic_batch: conv, relu, pool, linear, softmax with x [batch, 3, 16, 16];
      test_data_set_0..2 hold batch 1, 4 and 32 with torch's outputs.
  BertEncoder_dynamic: models/text.py's BERT with input_ids and attention_mask
      [batch, sequence]; data sets (1, 16) and (4, 8).
  Unary_every_dtype: one unary op per dtype numpy has (Neg on the signed and float types,
      Identity on uint8, Not on bool), each input [n]; made with onnx.helper.

Run with Debian's python3-torch 1.13 and python3-onnx:  /usr/bin/python3 models/dynamic.py
Deterministic: the same files every time.
"""
import io
import os
import sys

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import text  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dynamic")


class SmallCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        y = torch.relu(self.conv(x)).mean(dim=(2, 3))
        return torch.softmax(self.fc(y), dim=-1)


def write_tensor(path, array, name):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(np.ascontiguousarray(array), name).SerializeToString())


def export(module, inputs, names, outputs, dynamic_axes, folder, data_sets):
    module.eval()
    f = io.BytesIO()
    torch.onnx.export(module, inputs, f, opset_version=17, input_names=names, output_names=outputs,
                      dynamic_axes=dynamic_axes, do_constant_folding=True)
    model = onnx.load_from_string(f.getvalue())
    onnx.checker.check_model(model)
    d = os.path.join(OUT, folder)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "model.onnx"), "wb") as out:
        out.write(f.getvalue())
    for k, values in enumerate(data_sets):
        with torch.no_grad():
            ys = module(*values)
        ys = ys if isinstance(ys, tuple) else (ys,)
        for i, (name, x) in enumerate(zip(names, values)):
            write_tensor(os.path.join(d, "test_data_set_%d" % k, "input_%d.pb" % i), x.numpy(), name)
        for i, (name, y) in enumerate(zip(outputs, ys)):
            write_tensor(os.path.join(d, "test_data_set_%d" % k, "output_%d.pb" % i), y.numpy(), name)


def small_cnn():
    torch.manual_seed(2100)
    module = SmallCnn()
    sets = [(torch.rand(b, 3, 16, 16, generator=torch.Generator().manual_seed(2100 + b)),) for b in (1, 4, 32)]
    export(module, sets[0], ["x"], ["y"], {"x": {0: "batch"}, "y": {0: "batch"}}, "SmallCnn_dynamic_batch", sets)


def bert():
    torch.manual_seed(2200)
    module = text.BertEncoder()
    sets = []
    for batch, length in ((1, 16), (4, 8)):
        g = torch.Generator().manual_seed(2200 + batch)
        ids = torch.randint(0, text.VOCAB, (batch, length), generator=g)
        mask = torch.ones(batch, length, dtype=torch.int64)
        mask[:, length - 2:] = 0  # padding at the end of every row
        sets.append((ids, mask))
    axes = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"},
            "last_hidden_state": {0: "batch", 1: "sequence"}, "pooled": {0: "batch"}}
    export(module, sets[0], list(text.BertEncoder.inputs), list(text.BertEncoder.outputs), axes,
           "BertEncoder_dynamic", sets)


def unary_every_dtype():
    kinds = [("f32", TensorProto.FLOAT, "Neg"), ("f16", TensorProto.FLOAT16, "Neg"),
             ("f64", TensorProto.DOUBLE, "Neg"), ("i64", TensorProto.INT64, "Neg"),
             ("i32", TensorProto.INT32, "Neg"), ("i8", TensorProto.INT8, "Neg"),
             ("u8", TensorProto.UINT8, "Identity"), ("bool", TensorProto.BOOL, "Not")]
    nodes, inputs, outputs = [], [], []
    for name, code, op in kinds:
        inputs.append(helper.make_tensor_value_info("x_" + name, code, ["n"]))
        outputs.append(helper.make_tensor_value_info("y_" + name, code, ["n"]))
        nodes.append(helper.make_node(op, ["x_" + name], ["y_" + name], name=op + "_" + name))
    graph = helper.make_graph(nodes, "unary_every_dtype", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="models/dynamic.py")
    onnx.checker.check_model(model)
    d = os.path.join(OUT, "Unary_every_dtype")
    os.makedirs(d, exist_ok=True)
    onnx.save(model, os.path.join(d, "model.onnx"))


if __name__ == "__main__":
    small_cnn()
    bert()
    unary_every_dtype()
