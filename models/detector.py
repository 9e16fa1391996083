#!/usr/bin/python3
"""Generate the detector with post-processing in the graph (issue 15) into models/detector.

Run with Debian's python (python3-torch 1.13.1, python3-torchvision 0.14, python3-onnx):

    /usr/bin/python3 models/detector.py [--out models/detector]

TinyNmsDetector: a small YOLO-style backbone and head over a 64x64 image giving one box
(centre, size) and one score per cell of an 8x8 grid, then the post-processing a deployed
detector keeps in its graph: the boxes whose score passes 0.48 (a boolean mask, which torch
exports as NonZero) and torchvision's NMS at IoU 0.5 (NonMaxSuppression). Both outputs'
lengths depend on the values, so strider splits the session at each (exec/staged_session.h).
Outputs: the kept boxes [K, 4] (x1, y1, x2, y2), their scores [K] and their cell indices
[K] (int64). The folder holds model.onnx and test_data_set_0/{input_0,output_k}.pb (torch
f32). Weights are seeded and scaled so that scores spread over (0, 1) and boxes overlap.
"""

import argparse
import os

import numpy as np
import onnx
import torch
import torchvision
from onnx import numpy_helper
from torch import nn

GRID = 8
IMAGE = 64


class TinyNmsDetector(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Conv2d(3, 16, 3, 2, 1), nn.SiLU(),
            nn.Conv2d(16, 32, 3, 2, 1), nn.SiLU(),
            nn.Conv2d(32, 32, 3, 2, 1), nn.SiLU())
        self.head = nn.Conv2d(32, 5, 1)
        ys, xs = torch.meshgrid(torch.arange(GRID), torch.arange(GRID), indexing="ij")
        self.register_buffer("cells", torch.stack([xs, ys], -1).reshape(-1, 2).float())

    def forward(self, x):
        p = self.head(self.backbone(x)).flatten(2).transpose(1, 2)[0]  # [cells, 5]
        stride = IMAGE / GRID
        centre = (self.cells + torch.sigmoid(p[:, 0:2])) * stride
        size = torch.sigmoid(p[:, 2:4]) * 6 * stride
        boxes = torch.cat([centre - size / 2, centre + size / 2], 1)
        scores = torch.sigmoid(p[:, 4])
        candidates = scores > 0.48
        boxes, scores = boxes[candidates], scores[candidates]
        cells = torch.arange(GRID * GRID)[candidates]
        keep = torchvision.ops.nms(boxes, scores, 0.5)
        return boxes[keep], scores[keep], cells[keep]


def write(path, array):
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(np.ascontiguousarray(array)).SerializeToString())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "detector"))
    args = parser.parse_args()
    torch.manual_seed(1500)
    torch.set_num_threads(1)
    model = TinyNmsDetector().eval()
    with torch.no_grad():
        for conv in [m for m in model.modules() if isinstance(m, nn.Conv2d)]:
            conv.weight.mul_(2.0)
    x = torch.rand(1, 3, IMAGE, IMAGE, generator=torch.Generator().manual_seed(1501))
    with torch.no_grad():
        outputs = model(x)
    folder = os.path.join(args.out, "TinyNmsDetector_op17")
    os.makedirs(os.path.join(folder, "test_data_set_0"), exist_ok=True)
    torch.onnx.export(model, (x,), os.path.join(folder, "model.onnx"), opset_version=17,
                      input_names=["x"], output_names=["boxes", "scores", "cells"], do_constant_folding=True)
    onnx.checker.check_model(onnx.load(os.path.join(folder, "model.onnx")))
    write(os.path.join(folder, "test_data_set_0", "input_0.pb"), x.numpy())
    for k, out in enumerate(outputs):
        write(os.path.join(folder, "test_data_set_0", f"output_{k}.pb"), out.numpy())
    ops = sorted({n.op_type for n in onnx.load(os.path.join(folder, "model.onnx")).graph.node})
    print(f"{folder}: {len(outputs[0])} boxes kept of {GRID * GRID} cells; ops: {', '.join(ops)}")


if __name__ == "__main__":
    main()
