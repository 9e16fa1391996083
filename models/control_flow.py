#!/usr/bin/python3
"""Generate the model with If and Loop (issue 15) into models/control_flow.

Run with Debian's python (python3-torch 1.13.1, python3-onnx):

    /usr/bin/python3 models/control_flow.py [--out models/control_flow]

ScriptedRecurrence: what torch.jit.script exports for Python control flow. A recurrent cell
run over the sequence by a `for` loop whose trip count is the input's length (a Loop whose
count folds from the static shape, so strider unrolls it at session creation), then a
branch on the values (`if h.mean() > 0`: an If whose condition is known only when the model
runs, so the session splits there and the branch taken is inlined per run). Input x [12, 16];
output y [8]. The folder holds model.onnx and test_data_set_0/{input_0,output_0}.pb (torch
f32) for an input that takes the `then` branch, and test_data_set_1 for one that takes the
`else` branch.
"""

import argparse
import os

import numpy as np
import onnx
import torch
from onnx import numpy_helper
from torch import nn


class ScriptedRecurrence(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.Linear(16, 16)
        self.recur = nn.Linear(16, 16, bias=False)
        self.head = nn.Linear(16, 8)

    def forward(self, x):
        h = torch.zeros(16)
        for t in range(x.size(0)):
            h = torch.tanh(self.cell(x[t]) + self.recur(h))
        if bool(h.mean() > 0):
            y = self.head(h)
        else:
            y = self.head(-h) * 0.5
        return y


def write(path, array):
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(np.ascontiguousarray(array)).SerializeToString())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "control_flow"))
    args = parser.parse_args()
    torch.manual_seed(1530)
    torch.set_num_threads(1)
    model = ScriptedRecurrence().eval()
    scripted = torch.jit.script(model)
    folder = os.path.join(args.out, "ScriptedRecurrence_op17")
    path = os.path.join(folder, "model.onnx")
    os.makedirs(folder, exist_ok=True)
    gen = torch.Generator().manual_seed(1531)
    found = {}
    while len(found) < 2:  # one input per branch
        x = torch.randn(12, 16, generator=gen)
        with torch.no_grad():
            h = torch.zeros(16)
            for t in range(12):
                h = torch.tanh(model.cell(x[t]) + model.recur(h))
            branch = bool(h.mean() > 0)
            if branch not in found and abs(float(h.mean())) > 1e-3:  # not decided by rounding
                found[branch] = (x, model(x))
    torch.onnx.export(scripted, (found[True][0],), path, opset_version=17, input_names=["x"], output_names=["y"])
    model_proto = onnx.load(path)
    onnx.checker.check_model(model_proto)
    for k, branch in enumerate([True, False]):
        x, y = found[branch]
        os.makedirs(os.path.join(folder, f"test_data_set_{k}"), exist_ok=True)
        write(os.path.join(folder, f"test_data_set_{k}", "input_0.pb"), x.numpy())
        write(os.path.join(folder, f"test_data_set_{k}", "output_0.pb"), y.detach().numpy())
    ops = sorted({n.op_type for n in model_proto.graph.node})
    print(f"{folder}: ops {', '.join(ops)}")


if __name__ == "__main__":
    main()
