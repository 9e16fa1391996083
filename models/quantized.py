#!/usr/bin/python3
"""Generate the QDQ int8 models (issue 15) into models/quantized.

Run with Debian's python (python3-torch 1.13.1, python3-onnx):

    /usr/bin/python3 models/quantized.py [--out models/quantized]

The models a static int8 quantization tool writes (ONNX Runtime's quantize_static, TensorRT's
QDQ flow): every Conv and Linear reads its activation through QuantizeLinear ->
DequantizeLinear (per tensor, uint8, asymmetric: scale and zero point from the min and max
seen on a calibration input) and its weight through a per-output-channel int8 symmetric
QuantizeLinear -> DequantizeLinear, with BatchNorm folded into the conv first. torch's
fake-quantize ops are quantize-then-dequantize, and torch exports them as exactly these
pairs, so the torch module is the model's own oracle.

  MobileNetV2ci_qdq   the committed MobileNetV2ci (models/real: width 0.25, 100 classes,
                      224x224), same weights, quantized.
  BertEncoder_qdq     models/text.py's BertEncoder (width 64, 4 heads, 2 layers), every
                      Linear quantized (the attention products stay float, as in a
                      quantization tool's default for BERT).

Weights are stored as int8 initializers read through DequantizeLinear (store_weights_quantized).
Each folder holds model.onnx and test_data_set_0/{input_k,output_k}.pb (torch f32 on an input
other than the calibration one). manifest.json records, per model, how far the quantized
output is from the float model's (so a broken calibration is visible), how far torch's own
output moves when its inputs move by 1e-6 (the precision any comparison with torch can
have: MobileNetV2's moves by about 2% of its scale), and the op counts.
"""

import argparse
import json
import os

import numpy as np
import onnx
import torch
from onnx import numpy_helper
from torch import nn
from torch.nn import functional as F

import generate
import text


class Calibrated(nn.Module):
    """A Conv2d or Linear whose input and weight pass through fake quantization. Until
    `freeze`, it records the range of its input (calibration) and runs in float."""

    def __init__(self, layer):
        super().__init__()
        self.layer = layer
        self.low, self.high = 0.0, 0.0
        self.frozen = False

    def freeze(self):
        weight = self.layer.weight.detach()
        channels = weight.shape[0]
        amax = weight.reshape(channels, -1).abs().amax(1).clamp(min=1e-8)
        self.w_scale = (amax / 127).double().float()
        self.w_zero = torch.zeros(channels, dtype=torch.int32)
        scale = max(self.high - self.low, 1e-8) / 255
        self.x_scale = float(scale)
        self.x_zero = int(min(255, max(0, round(-self.low / scale))))
        self.frozen = True

    def forward(self, x):
        if not self.frozen:
            self.low = min(self.low, float(x.min()))
            self.high = max(self.high, float(x.max()))
            return self.layer(x)
        x = torch.fake_quantize_per_tensor_affine(x, self.x_scale, self.x_zero, 0, 255)
        w = torch.fake_quantize_per_channel_affine(self.layer.weight, self.w_scale, self.w_zero, 0, -128, 127)
        if isinstance(self.layer, nn.Linear):
            return F.linear(x, w, self.layer.bias)
        c = self.layer
        return F.conv2d(x, w, c.bias, c.stride, c.padding, c.dilation, c.groups)


def fold_batch_norms(module):
    """Folds every Conv2d directly followed by a BatchNorm2d in a Sequential into the conv."""
    for child in module.children():
        fold_batch_norms(child)
    if isinstance(module, nn.Sequential):
        names = list(module._modules)
        for a, b in zip(names, names[1:]):
            conv, bn = module._modules[a], module._modules[b]
            if isinstance(conv, nn.Conv2d) and isinstance(bn, nn.BatchNorm2d):
                module._modules[a] = torch.nn.utils.fusion.fuse_conv_bn_eval(conv, bn)
                module._modules[b] = nn.Identity()


def wrap_layers(module, kinds):
    for name, child in module.named_children():
        if isinstance(child, kinds):
            setattr(module, name, Calibrated(child))
        else:
            wrap_layers(child, kinds)


def quantize(module, calibration, kinds):
    wrap_layers(module, kinds)
    with torch.no_grad():
        module(*calibration)
    layers = [m for m in module.modules() if isinstance(m, Calibrated)]
    for layer in layers:
        layer.freeze()
    return len(layers)


def store_weights_quantized(model):
    """Replaces each QuantizeLinear of a weight (an initializer, with constant scale and zero
    point) by the int8 initializer it computes, as quantization tools store weights: the
    graph then reads int8 weights through DequantizeLinear only. The rounding is ONNX's
    (half to even), checked against torch's fake quantization of the same weight."""
    graph = model.graph
    initializers = {t.name: t for t in graph.initializer}
    constants = {n.output[0]: numpy_helper.to_array(n.attribute[0].t) for n in graph.node if n.op_type == "Constant"}
    kept = []
    for node in graph.node:
        if node.op_type != "QuantizeLinear" or node.input[0] not in initializers:
            kept.append(node)
            continue
        w = numpy_helper.to_array(initializers[node.input[0]])
        scale, zero = constants[node.input[1]], constants[node.input[2]]
        axis = next((a.i for a in node.attribute if a.name == "axis"), 1)
        shape = [1] * w.ndim
        shape[axis] = -1
        q = np.rint(w / scale.reshape(shape)) + zero.reshape(shape).astype(np.int32) if scale.ndim else \
            np.rint(w / scale) + int(zero)
        info = np.iinfo(zero.dtype)
        q = np.clip(q, info.min, info.max).astype(zero.dtype)
        torch_q = torch.fake_quantize_per_channel_affine(
            torch.from_numpy(w), torch.from_numpy(scale.reshape(-1)), torch.from_numpy(zero.reshape(-1).astype(np.int32)),
            axis, int(info.min), int(info.max)) if scale.ndim else None
        if torch_q is not None:  # torch multiplies by 1/scale: a value within an ulp of a tie may round the other way
            ours = (q.astype(np.float32) * scale.reshape(shape)).astype(np.float32)
            differ = int((torch_q.numpy() != ours).sum())
            assert differ <= 2, f"{node.name}: {differ} weights quantize differently in torch"
            if differ:
                print(f"  {node.name}: {differ} of {w.size} weights round the other way in torch (1/scale)")
        graph.initializer.append(numpy_helper.from_array(q, node.output[0]))
    del graph.node[:]
    graph.node.extend(kept)
    used = {i for n in graph.node for i in n.input}
    for name in [t.name for t in graph.initializer if t.name not in used and t.name in initializers]:
        graph.initializer.remove(next(t for t in graph.initializer if t.name == name))
    return model


def write(path, array):
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(np.ascontiguousarray(array)).SerializeToString())


def as_tuple(y):
    return y if isinstance(y, tuple) else (y,)


def export(name, module, inputs, input_names, output_names, out_dir, quantized_layers, float_outputs):
    with torch.no_grad():
        outputs = as_tuple(module(*inputs))
    folder = os.path.join(out_dir, name)
    os.makedirs(os.path.join(folder, "test_data_set_0"), exist_ok=True)
    path = os.path.join(folder, "model.onnx")
    torch.onnx.export(module, inputs, path, opset_version=13, input_names=list(input_names),
                      output_names=list(output_names), do_constant_folding=True)
    model = store_weights_quantized(onnx.load(path))
    onnx.checker.check_model(model)
    onnx.save(model, path)
    for k, x in enumerate(inputs):
        write(os.path.join(folder, "test_data_set_0", f"input_{k}.pb"), x.numpy())
    for k, y in enumerate(outputs):
        write(os.path.join(folder, "test_data_set_0", f"output_{k}.pb"), y.numpy())
    ops = {}
    for node in model.graph.node:
        ops[node.op_type] = ops.get(node.op_type, 0) + 1
    drift = [float((q - f).abs().max() / f.abs().max()) for q, f in zip(outputs, float_outputs)]
    # How far torch's own output moves when the float inputs move by 1e-6: a value that
    # crosses a rounding boundary in one QuantizeLinear changes by a whole step, and in a deep
    # CNN such flips spread, so no second implementation can match torch closer than this
    # (the float64 reference can match strider: both round the same f32 values).
    nudged = tuple(x + 1e-6 * torch.randn(x.shape, generator=torch.Generator().manual_seed(9)) if x.is_floating_point()
                   else x for x in inputs)
    sensitivity = [None] * len(outputs)  # integer inputs (token ids) only: nothing to move
    if any(x.is_floating_point() for x in inputs):
        with torch.no_grad():
            sensitivity = [float((a - b).abs().max() / b.abs().max()) for a, b in zip(as_tuple(module(*nudged)), outputs)]
    print(f"{folder}: {quantized_layers} layers quantized; |quantized - float| / max|float| per output "
          f"{', '.join(f'{d:.3f}' for d in drift)}; inputs moved 1e-6 move it "
          f"{', '.join('-' if d is None else f'{d:.1e}' for d in sensitivity)}; QuantizeLinear {ops.get('QuantizeLinear', 0)}")
    return {"quantized_layers": quantized_layers, "relative_drift_from_float": drift,
            "relative_change_for_inputs_moved_1e-6": sensitivity,
            "op_counts": dict(sorted(ops.items()))}


def mobilenet(out_dir):
    spec = next(r for r in generate.REAL if r.name == "MobileNetV2ci")
    module = generate.build_real(spec, "")
    fold_batch_norms(module)
    shape = spec.sizes[""]
    calibration = generate.real_input(spec, shape, spec.seed + 3000)
    x = generate.real_input(spec, shape, spec.seed + 2000)
    with torch.no_grad():
        float_y = as_tuple(module(x))
    layers = quantize(module, (calibration,), (nn.Conv2d, nn.Linear))
    return export("MobileNetV2ci_qdq", module, (x,), ("x",), ("y",), out_dir, layers, float_y)


def bert(out_dir):
    torch.manual_seed(1520)
    module = text.BertEncoder().eval()
    calibration = text.example_inputs(module, 1521)
    inputs = text.example_inputs(module, 1522)
    with torch.no_grad():
        float_y = as_tuple(module(*inputs))
    layers = quantize(module, calibration, (nn.Linear,))
    return export("BertEncoder_qdq", module, inputs, module.inputs, module.outputs, out_dir, layers, float_y)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "quantized"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    manifest = {"MobileNetV2ci_qdq": mobilenet(args.out), "BertEncoder_qdq": bert(args.out)}
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
