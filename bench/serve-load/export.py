#!/usr/bin/python3
"""Exports the load test's models with an open batch dim (dynamic batching merges requests
along it): issue 13's C2f block (YOLOv8's C2f(16, 32, n=2, shortcut), 16x40x40 in) and
MobileNetV2 (width 1.0, 224x224), built and initialized as models/generate.py builds the real
models (seeded weights, BatchNorm statistics, LSUV scaling), at opset 17.
Usage: export.py OUT_DIR    (Debian's python3-torch; STRIDER_SETUP_MODELS=1 scripts/setup)"""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "models"))
import architectures  # noqa: E402
import generate  # noqa: E402

MODELS = {
    "c2f": (lambda: architectures.C2f("split", 16, 32, n=2, shortcut=True), (1, 16, 40, 40), 106),
    "mobilenetv2": (lambda: architectures.MobileNetV2(1.0), (1, 3, 224, 224), 61),
}


def export(name, out_dir):
    factory, shape, seed = MODELS[name]
    torch.manual_seed(seed)
    module = factory()
    generate.set_bn_stats(module, seed + 1000)
    module.eval()
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(seed + 3000))
    generate.lsuv(module, x)
    path = os.path.join(out_dir, name, "1", "model.onnx")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    torch.onnx.export(module, (x,), path, opset_version=17, input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, do_constant_folding=True)
    print("wrote", path)


if __name__ == "__main__":
    for model in MODELS:
        export(model, sys.argv[1])
