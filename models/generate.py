#!/usr/bin/python3
"""Generate strider's seed ONNX models and their test data.

Run with Debian's python (torch 1.13.1, onnx 1.12):

    /usr/bin/python3 models/generate.py [--out models/seed]

Every module is exported with both lowerings of `chunk` that torch 1.13 can produce,
at opset 13 and opset 17 (the newest this exporter supports):

  shape  `Tensor.chunk`, traced as prim::ConstantChunk, which torch 1.13 exports (opset >= 11)
         as Shape -> Gather -> Add -> Div -> Mul -> Slice, even though every shape is static.
  split  `torch.unsafe_chunk` (same eager semantics), which torch 1.13 exports as one ONNX
         Split node with constant split sizes.

With --real it writes the real models of issue 6 (architectures.py) to models/real instead, and
with --real --full also the big exports that are not committed, to models/real-full.

Output is deterministic: fixed seeds, one intra-op thread, files written from sorted data.
"""

import argparse
import collections
import copy
import io
import json
import os
import sys
import time

import numpy as np
import onnx
import torch
from onnx import numpy_helper
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import architectures  # noqa: E402  (the real models of issue 6)

OPSETS = (13, 17)
LOWERINGS = ("shape", "split")


def chunk(t, chunks, dim, lowering):
    """`t.chunk(chunks, dim)`, written so the exporter emits the requested lowering."""
    if lowering == "shape":
        return t.chunk(chunks, dim)
    if lowering == "split":
        return torch.unsafe_chunk(t, chunks, dim)
    raise ValueError(lowering)


class LinearChunkLastDim(nn.Module):
    def __init__(self, lowering):
        super().__init__()
        self.lowering = lowering
        self.linear1 = nn.Linear(7, 16, bias=False)
        self.linear2 = nn.Linear(8, 5, bias=False)

    def forward(self, x):
        _, second = chunk(self.linear1(x), 2, -1, self.lowering)
        return self.linear2(second)


class LinearChunkFirstDim(nn.Module):
    def __init__(self, lowering):
        super().__init__()
        self.lowering = lowering
        self.linear1 = nn.Linear(7, 16, bias=False)
        self.linear2 = nn.Linear(16, 5, bias=False)

    def forward(self, x):
        _, second = chunk(self.linear1(x), 2, 0, self.lowering)
        return self.linear2(second)


class LinearChunkCatLastDim(nn.Module):
    def __init__(self, lowering):
        super().__init__()
        self.lowering = lowering
        self.linear1 = nn.Linear(7, 16, bias=False)
        self.linear2 = nn.Linear(24, 5, bias=False)

    def forward(self, x):
        a, b = chunk(self.linear1(x), 2, -1, self.lowering)
        return self.linear2(torch.cat([b, a, b], -1))


class LinearNestedChunk(nn.Module):
    """Chunk of a chunk; both linears have a bias (exported as Gemm)."""

    def __init__(self, lowering):
        super().__init__()
        self.lowering = lowering
        self.linear1 = nn.Linear(7, 16)
        self.linear2 = nn.Linear(4, 5)

    def forward(self, x):
        _, second = chunk(self.linear1(x), 2, -1, self.lowering)
        _, inner = chunk(second, 2, -1, self.lowering)
        return self.linear2(inner)


class Inner(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 1)
        self.conv2 = nn.Conv2d(c, c, 1)

    def forward(self, x):
        return x + self.conv2(torch.relu(self.conv1(x)))


class PointwiseC2f(nn.Module):
    def __init__(self, lowering):
        super().__init__()
        self.lowering = lowering
        self.conv_in = nn.Conv2d(16, 16, 1)
        self.blocks = nn.ModuleList([Inner(8), Inner(8)])
        self.conv_out = nn.Conv2d(32, 16, 1)

    def forward(self, x):
        parts = list(chunk(self.conv_in(x), 2, 1, self.lowering))
        for block in self.blocks:
            parts.append(block(parts[-1]))
        return self.conv_out(torch.cat(parts, dim=1))


class Conv(nn.Module):
    """YOLOv8 Conv: Conv2d (no bias) + BatchNorm2d + SiLU."""

    def __init__(self, c1, c2, k=1):
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, 1, k // 2, bias=False)
        self.bn = nn.BatchNorm2d(c2)
        self.act = nn.SiLU()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class Bottleneck(nn.Module):
    def __init__(self, c1, c2, shortcut=True, k=(3, 3), e=1.0):
        super().__init__()
        c_ = int(c2 * e)
        self.cv1 = Conv(c1, c_, k[0])
        self.cv2 = Conv(c_, c2, k[1])
        self.add = shortcut and c1 == c2

    def forward(self, x):
        return x + self.cv2(self.cv1(x)) if self.add else self.cv2(self.cv1(x))


class C2f(nn.Module):
    """YOLOv8 C2f(c1=16, c2=32, n=2, shortcut=True, e=0.5)."""

    def __init__(self, lowering, c1=16, c2=32, n=2, shortcut=True, e=0.5):
        super().__init__()
        self.lowering = lowering
        self.c = int(c2 * e)
        self.cv1 = Conv(c1, 2 * self.c, 1)
        self.cv2 = Conv((2 + n) * self.c, c2, 1)
        self.m = nn.ModuleList(
            Bottleneck(self.c, self.c, shortcut, k=(3, 3), e=1.0) for _ in range(n))

    def forward(self, x):
        y = list(chunk(self.cv1(x), 2, 1, self.lowering))
        for m in self.m:
            y.append(m(y[-1]))
        return self.cv2(torch.cat(y, 1))


# name -> (class, input shape, seed). The seed fixes weights and input; it is the same for both
# lowerings and both opsets, so all four files of a module share weights, input and outputs.
MODULES = collections.OrderedDict([
    ("LinearChunkLastDim", (LinearChunkLastDim, (12, 7), 101)),
    ("LinearChunkFirstDim", (LinearChunkFirstDim, (12, 7), 102)),
    ("LinearChunkCatLastDim", (LinearChunkCatLastDim, (12, 7), 103)),
    ("LinearNestedChunk", (LinearNestedChunk, (12, 7), 104)),
    ("PointwiseC2f", (PointwiseC2f, (2, 16, 8, 8), 105)),
    ("C2f", (C2f, (1, 16, 20, 20), 106)),
])


def set_bn_stats(module, seed):
    """Realistic BatchNorm statistics, so activations stay O(1) in eval mode."""
    gen = torch.Generator().manual_seed(seed)
    for bn in (m for m in module.modules() if isinstance(m, nn.BatchNorm2d)):
        c = bn.num_features
        with torch.no_grad():
            bn.weight.copy_(torch.empty(c).uniform_(0.5, 1.5, generator=gen))
            bn.bias.copy_(torch.randn(c, generator=gen) * 0.1)
            bn.running_mean.copy_(torch.randn(c, generator=gen) * 0.1)
            bn.running_var.copy_(torch.empty(c).uniform_(0.5, 1.5, generator=gen))


def build(name, lowering):
    cls, shape, seed = MODULES[name]
    torch.manual_seed(seed)
    module = cls(lowering)
    set_bn_stats(module, seed + 1000)
    module.eval()
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(seed + 2000))
    return module, x


def run_eager(module, x, dtype):
    m = copy.deepcopy(module).to(dtype)
    with torch.no_grad():
        return m(x.to(dtype)).to(torch.float64).numpy()


def export(module, x, opset):
    f = io.BytesIO()
    # Constant folding only pre-transposes the MatMul weights and folds BatchNorm into Conv
    # (the eval peephole does the latter anyway); it leaves the Shape arithmetic alone.
    torch.onnx.export(module, (x,), f, opset_version=opset, input_names=["x"],
                      output_names=["y"], do_constant_folding=True)
    return f.getvalue()


# ---- a tiny float64 numpy interpreter, to check each file reproduces torch's output ----------

def _conv(x, w, b, pads, strides, dilations, group):
    if w.ndim == 3:  # 1-D: as 2-D with a height of 1
        y = _conv(x[:, :, None], w[:, :, None], b, [0, pads[0], 0, pads[1]], [1] + list(strides),
                  [1] + list(dilations), group)
        return y[:, :, 0]
    kh, kw = w.shape[2:]
    (sh, sw), (dh, dw) = strides, dilations
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh, ow = (xp.shape[2] - dh * (kh - 1) - 1) // sh + 1, (xp.shape[3] - dw * (kw - 1) - 1) // sw + 1
    y = np.zeros((x.shape[0], w.shape[0], oh, ow))
    cg, og = x.shape[1] // group, w.shape[0] // group
    for i in range(kh):
        for j in range(kw):
            tap = xp[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw]
            if group == 1:
                y += np.einsum("nchw,oc->nohw", tap, w[:, :, i, j])
            elif cg == 1 and og == 1:  # depthwise
                y += tap * w[:, 0, i, j].reshape(1, -1, 1, 1)
            else:
                for g in range(group):
                    y[:, g * og:(g + 1) * og] += np.einsum(
                        "nchw,oc->nohw", tap[:, g * cg:(g + 1) * cg], w[g * og:(g + 1) * og, :, i, j])
    return y if b is None else y + b.reshape(1, -1, 1, 1)


def _max_pool(x, kernel, pads, strides):
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])), constant_values=-np.inf)
    oh = (xp.shape[2] - kernel[0]) // strides[0] + 1
    ow = (xp.shape[3] - kernel[1]) // strides[1] + 1
    y = np.full(x.shape[:2] + (oh, ow), -np.inf)
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            y = np.maximum(y, xp[:, :, i:i + strides[0] * (oh - 1) + 1:strides[0],
                                 j:j + strides[1] * (ow - 1) + 1:strides[1]])
    return y


def _resize_nearest(x, scales, a):
    assert (a.get("mode") == b"nearest" and a.get("coordinate_transformation_mode") == b"asymmetric"
            and a.get("nearest_mode") == b"floor"), a
    for axis, s in enumerate(scales):
        out = int(np.floor(x.shape[axis] * s))
        x = np.take(x, np.floor(np.arange(out) / s).astype(np.int64), axis=axis)
    return x


def interpret(model, feeds):
    env = {t.name: numpy_helper.to_array(t).astype(np.float64) if t.data_type == onnx.TensorProto.FLOAT
           else numpy_helper.to_array(t) for t in model.graph.initializer}
    env.update(feeds)
    for n in model.graph.node:
        a = {at.name: onnx.helper.get_attribute_value(at) for at in n.attribute}
        i = [env[v] if v else None for v in n.input]
        t = n.op_type
        if t == "Constant":
            v = numpy_helper.to_array(a["value"])
            out = [v.astype(np.float64) if v.dtype == np.float32 else v]
        elif t == "Shape":
            out = [np.array(i[0].shape, dtype=np.int64)]
        elif t == "Gather":
            out = [np.take(i[0], i[1], axis=a.get("axis", 0))]
        elif t in ("Add", "Sub", "Mul"):
            out = [{"Add": np.add, "Sub": np.subtract, "Mul": np.multiply}[t](i[0], i[1])]
        elif t == "Div":
            out = [i[0] // i[1] if i[0].dtype.kind == "i" else i[0] / i[1]]
        elif t == "Slice":
            axes = i[3] if len(i) > 3 and i[3] is not None else range(len(i[1]))
            steps = i[4] if len(i) > 4 and i[4] is not None else [1] * len(i[1])
            sl = [slice(None)] * i[0].ndim
            for s, e, ax, st in zip(i[1], i[2], axes, steps):
                sl[int(ax)] = slice(int(s), int(e), int(st))
            out = [i[0][tuple(sl)]]
        elif t == "Split":
            bounds = np.cumsum(i[1])[:-1]
            out = np.split(i[0], bounds, axis=a.get("axis", 0))
        elif t == "Concat":
            out = [np.concatenate(i, axis=a["axis"])]
        elif t == "MatMul":
            out = [i[0] @ i[1]]
        elif t == "Gemm":
            A = i[0].T if a.get("transA", 0) else i[0]
            B = i[1].T if a.get("transB", 0) else i[1]
            out = [a.get("alpha", 1.0) * A @ B + a.get("beta", 1.0) * (i[2] if len(i) > 2 else 0)]
        elif t == "Transpose":
            out = [np.transpose(i[0], a.get("perm"))]
        elif t == "Conv":
            nd = i[1].ndim - 2
            out = [_conv(i[0], i[1], i[2] if len(i) > 2 else None, a.get("pads", [0] * 2 * nd),
                         a.get("strides", [1] * nd), a.get("dilations", [1] * nd), a.get("group", 1))]
        elif t == "Relu":
            out = [np.maximum(i[0], 0)]
        elif t == "Sigmoid":
            out = [1 / (1 + np.exp(-i[0]))]
        elif t == "Tanh":
            out = [np.tanh(i[0])]
        elif t == "Clip":
            lo = i[1] if len(i) > 1 and i[1] is not None else -np.inf
            hi = i[2] if len(i) > 2 and i[2] is not None else np.inf
            out = [np.clip(i[0], lo, hi)]
        elif t == "Softmax":  # opset >= 13: along one axis
            e = np.exp(i[0] - i[0].max(axis=a.get("axis", -1), keepdims=True))
            out = [e / e.sum(axis=a.get("axis", -1), keepdims=True)]
        elif t == "Identity":
            out = [i[0]]
        elif t == "Reshape":
            shape = [i[0].shape[k] if s == 0 and not a.get("allowzero", 0) else int(s)
                     for k, s in enumerate(i[1])]
            out = [i[0].reshape(shape)]
        elif t == "Flatten":
            ax = a.get("axis", 1)
            out = [i[0].reshape(int(np.prod(i[0].shape[:ax])), -1)]
        elif t == "Unsqueeze":  # opset >= 13: axes as an input
            out = [np.expand_dims(i[0], tuple(int(v) for v in i[1]))]
        elif t == "Expand":
            out = [np.broadcast_to(i[0], np.broadcast_shapes(i[0].shape, tuple(i[1]))).copy()]
        elif t == "MaxPool":
            assert not a.get("ceil_mode", 0) and all(d == 1 for d in a.get("dilations", [1, 1]))
            out = [_max_pool(i[0], a["kernel_shape"], a.get("pads", [0] * 4), a.get("strides", [1, 1]))]
        elif t == "GlobalAveragePool":
            out = [i[0].mean(axis=tuple(range(2, i[0].ndim)), keepdims=True)]
        elif t == "Resize":
            out = [_resize_nearest(i[0], i[2], a)]
        else:
            raise NotImplementedError(t)
        for name, v in zip(n.output, out):
            env[name] = v
    return [env[o.name] for o in model.graph.output]


# ---- driver --------------------------------------------------------------------------------

def write_pb(path, array, name):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(np.ascontiguousarray(array, dtype=np.float32), name)
                .SerializeToString())


def value_info(v):
    dims = [d.dim_value if d.HasField("dim_value") else d.dim_param
            for d in v.type.tensor_type.shape.dim]
    return {"name": v.name, "shape": dims,
            "dtype": onnx.TensorProto.DataType.Name(v.type.tensor_type.elem_type).lower()}


def cosine(a, b):
    a, b = a.ravel(), b.ravel()
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def check_lowering(model, lowering, stem):
    ops = collections.Counter(n.op_type for n in model.graph.node)
    if lowering == "shape":
        ok = ops["Shape"] and ops["Gather"] and ops["Slice"] and not ops["Split"]
    else:
        ok = ops["Split"] and not (ops["Shape"] or ops["Gather"] or ops["Slice"])
    if not ok:
        sys.exit("%s: unexpected ops for the %s lowering: %s" % (stem, lowering, dict(ops)))
    for v in list(model.graph.input) + list(model.graph.output):
        if not all(d.HasField("dim_value") for d in v.type.tensor_type.shape.dim):
            sys.exit("%s: %s has a symbolic shape" % (stem, v.name))


def generate(out_dir):
    torch.set_num_threads(1)
    os.makedirs(out_dir, exist_ok=True)
    manifest = collections.OrderedDict()
    for name in MODULES:
        for lowering in LOWERINGS:
            module, x = build(name, lowering)
            y32 = run_eager(module, x, torch.float32)
            y64 = run_eager(module, x.double(), torch.float64)
            try:
                y16 = run_eager(module, x, torch.bfloat16)
                bf16 = {"supported": True, "cosine_vs_f64": cosine(y16, y64),
                        "max_abs_err_vs_f64": float(np.abs(y16 - y64).max())}
            except RuntimeError as e:  # an op without a bf16 CPU kernel in torch 1.13
                y16, bf16 = None, {"supported": False, "error": str(e).splitlines()[0]}
            for opset in OPSETS:
                stem = "%s_%s_op%d" % (name, lowering, opset)
                data = export(module, x, opset)
                model = onnx.load_from_string(data)
                onnx.checker.check_model(model)
                check_lowering(model, lowering, stem)
                (y_onnx,) = interpret(model, {"x": x.double().numpy()})
                d = os.path.join(out_dir, stem)
                os.makedirs(d, exist_ok=True)
                with open(os.path.join(d, "model.onnx"), "wb") as f:
                    f.write(data)
                write_pb(os.path.join(d, "test_data_set_0", "input_0.pb"), x.numpy(), "x")
                write_pb(os.path.join(d, "test_data_set_0", "output_0.pb"), y32, "y")
                if y16 is not None:
                    write_pb(os.path.join(d, "torch_bf16", "output_0.pb"), y16, "y")
                ops = collections.Counter(n.op_type for n in model.graph.node)
                manifest[stem] = collections.OrderedDict([
                    ("module", name), ("lowering", lowering), ("opset", opset),
                    ("inputs", [value_info(v) for v in model.graph.input]),
                    ("outputs", [value_info(v) for v in model.graph.output]),
                    ("op_counts", dict(sorted(ops.items()))),
                    ("node_count", len(model.graph.node)),
                    ("f32_max_abs_err_vs_f64", float(np.abs(y32 - y64).max())),
                    ("f32_cosine_vs_f64", cosine(y32, y64)),
                    ("bf16", bf16),
                    ("onnx_f64_interpreter_max_abs_err_vs_torch_f64",
                     float(np.abs(y_onnx - y64).max())),
                ])
                print("%-32s %s" % (stem, dict(sorted(ops.items()))))
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    total = model_total = 0
    for root, _, files in os.walk(out_dir):
        for fn in files:
            size = os.path.getsize(os.path.join(root, fn))
            total += size
            model_total += size if fn == "model.onnx" else 0
    print("%d models; model.onnx total %d bytes; all files total %d bytes"
          % (len(manifest), model_total, total))


def generate_bench(out_dir, modules, batches):
    """Benchmark-sized models (not committed): `<module>_b<batch>.onnx`, split lowering,
    opset 17, the batch dim of the seed input replaced by `batch`."""
    os.makedirs(out_dir, exist_ok=True)
    for name in modules:
        module, x = build(name, "split")
        for batch in batches:
            shape = (batch,) + tuple(x.shape[1:])
            sample = torch.randn(*shape, generator=torch.Generator().manual_seed(7))
            path = os.path.join(out_dir, "%s_b%d.onnx" % (name, batch))
            with open(path, "wb") as f:
                f.write(export(module, sample, 17))
            print("wrote", path)


# ---- the real models of issue 6 (architectures.py) -----------------------------------------

class Real:
    """One architecture. `factory(lowering)` makes the module; `sizes` maps a stem tag to an input
    shape (all sizes share one set of weights, calibrated on the first); `chunks` is the number of
    chunk calls in a forward and `splits` the number of other Splits, to check the lowering."""

    def __init__(self, name, factory, sizes, image, seed, chunks, splits=0, outputs=("y",),
                 classifier=False):
        self.name, self.factory, self.sizes, self.image, self.seed = name, factory, sizes, image, seed
        self.chunks, self.splits, self.outputs, self.classifier = chunks, splits, outputs, classifier


REAL = [
    # CI-sized variants (committed): the same graphs, narrower. YOLOv8 at width 1/16 (channels
    # 8..64; the Detect head keeps its 64 DFL and 80 class channels), MobileNetV2 at width
    # 0.25 with 100 classes (the 1280x1000 classifier alone would be 5 MB).
    Real("YOLOv8ci", lambda L: architectures.YOLOv8(L, width=0.0625),
         collections.OrderedDict([("128", (1, 3, 128, 128))]),
         image=True, seed=207, chunks=9, splits=1, outputs=("boxes", "scores")),
    Real("MobileNetV2ci", lambda L: architectures.MobileNetV2(0.25, num_classes=100), {"": (1, 3, 224, 224)},
         image=True, seed=208, chunks=0, classifier=True),
    # Full-size (benchmarks, --full only).
    Real("YOLOv8n", lambda L: architectures.YOLOv8(L),
         collections.OrderedDict([("128", (1, 3, 128, 128)), ("320", (1, 3, 320, 320))]),
         image=True, seed=201, chunks=9, splits=1, outputs=("boxes", "scores")),
    Real("MobileNetV2_w025", lambda L: architectures.MobileNetV2(0.25), {"": (1, 3, 224, 224)},
         image=True, seed=202, chunks=0, classifier=True),
    Real("MobileNetV2", lambda L: architectures.MobileNetV2(1.0), {"": (1, 3, 224, 224)},
         image=True, seed=203, chunks=0, classifier=True),
    Real("GatedChain11", lambda L: architectures.GatedChain(L, 11), {"": (1, 64, 256)},
         image=False, seed=204, chunks=11),
    Real("GatedChain20", lambda L: architectures.GatedChain(L, 20), {"": (1, 64, 256)},
         image=False, seed=205, chunks=20),
    Real("WaveNet8", lambda L: architectures.WaveNet(L), {"": (1, 32, 1024)},
         image=False, seed=206, chunks=8),
    # The C2f block of issue 13's CPU table at its size there (output 1x32x40x40): YOLOv8's
    # C2f(16, 32, n=2, shortcut) as models/seed has it at 20x20.
    Real("C2f", lambda L: architectures.C2f(L, 16, 32, n=2, shortcut=True), {"40": (1, 16, 40, 40)},
         image=True, seed=209, chunks=1),
]


def committed(stem):
    """What models/real holds: of the small models and the CI-sized variants, the shape
    lowering at opset 13 and the Split lowering at opset 17 (both lowerings, both opsets;
    the other pairs differ only in their opset header); the full-size YOLOv8n (3.16M
    parameters, 12.6 MB) and MobileNetV2s, and every other export, only with --full."""
    small = stem.startswith(("GatedChain", "WaveNet", "YOLOv8ci", "MobileNetV2ci"))
    return small and (stem.endswith(("shape_op13", "split_op17")) or stem == "MobileNetV2ci_op17")


def real_input(spec, shape, seed):
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(*shape, generator=gen) if spec.image else torch.randn(*shape, generator=gen)


def lsuv(module, x):
    """Scale each conv/linear (weight and bias), in execution order, so that its output has unit
    std on the calibration input x (LSUV, Mishkin & Matas 2015): with the BatchNorm statistics
    above this keeps every activation O(1), as in a trained network. The DFL conv (fixed weights,
    no grad) is left alone."""
    def hook(mod, inputs, out):
        scale = 1.0 / float(out.std())
        with torch.no_grad():
            mod.weight.mul_(scale)
            if mod.bias is not None:
                mod.bias.mul_(scale)
        return out * scale
    hooks = [m.register_forward_hook(hook) for m in module.modules()
             if isinstance(m, (nn.Conv1d, nn.Conv2d, nn.Linear)) and m.weight.requires_grad]
    with torch.no_grad():
        module(*x) if isinstance(x, tuple) else module(x)
    for h in hooks:
        h.remove()


def build_real(spec, lowering):
    torch.manual_seed(spec.seed)
    module = spec.factory(lowering)
    set_bn_stats(module, spec.seed + 1000)
    module.eval()
    lsuv(module, real_input(spec, next(iter(spec.sizes.values())), spec.seed + 3000))
    return module


def run_eager_all(module, x, dtype):
    m = copy.deepcopy(module).to(dtype)
    with torch.no_grad():
        y = m(x.to(dtype))
    return [t.to(torch.float64).numpy() for t in (y if isinstance(y, tuple) else (y,))]


def export_real(module, x, opset, output_names):
    f = io.BytesIO()
    torch.onnx.export(module, (x,), f, opset_version=opset, input_names=["x"],
                      output_names=list(output_names), do_constant_folding=True)
    return f.getvalue()


def check_real_lowering(model, spec, lowering, stem):
    ops = collections.Counter(n.op_type for n in model.graph.node)
    if lowering == "split":
        ok = ops["Split"] == spec.chunks + spec.splits and not ops["Shape"]
    elif lowering == "shape":
        ok = ops["Split"] == spec.splits and ops["Shape"] == spec.chunks
    else:
        ok = not ops["Split"] and not ops["Shape"]
    if not ok:
        sys.exit("%s: unexpected ops for the %s lowering: %s" % (stem, lowering, dict(ops)))
    for v in list(model.graph.input) + list(model.graph.output):
        if not all(d.HasField("dim_value") for d in v.type.tensor_type.shape.dim):
            sys.exit("%s: %s has a symbolic shape" % (stem, v.name))


def output_record(name, y32, y64, y16, y_onnx, stem):
    if not np.all(np.isfinite(y64)) or y64.std() < 1e-3 or np.abs(y64).max() > 1e4:
        sys.exit("%s: output %s is not sane: std %g, max abs %g" % (stem, name, y64.std(), np.abs(y64).max()))
    return collections.OrderedDict([
        ("name", name), ("shape", list(y64.shape)),
        ("f64_stats", collections.OrderedDict([
            ("min", float(y64.min())), ("max", float(y64.max())),
            ("mean", float(y64.mean())), ("std", float(y64.std()))])),
        ("f32_max_abs_err_vs_f64", float(np.abs(y32 - y64).max())),
        ("f32_cosine_vs_f64", cosine(y32, y64)),
        ("bf16_cosine_vs_f64", cosine(y16, y64)),
        ("bf16_max_abs_err_vs_f64", float(np.abs(y16 - y64).max())),
    ] + ([] if y_onnx is None else [  # models/zoo has no numpy interpreter (tests/models has the reference)
        ("onnx_f64_interpreter_max_abs_err_vs_torch_f64", float(np.abs(y_onnx - y64).max()))]))


def top5(y):
    return [int(i) for i in np.argsort(-y.ravel(), kind="stable")[:5]]


def classification_record(y32, y64, y16, stem):
    logits = np.sort(y32.ravel())[::-1]
    gap = float(np.diff(-logits[:6]).min())  # smallest gap between neighbours in the top 6
    if gap < 1e-3 * float(np.abs(logits).max()):
        sys.exit("%s: top-5 logits are not distinguishable (smallest gap %g)" % (stem, gap))
    return collections.OrderedDict([
        ("f32_argmax", top5(y32)[0]), ("f32_top5", top5(y32)),
        ("f32_top5_logits", [float(v) for v in logits[:5]]), ("f32_top6_min_gap", gap),
        ("f64_top5", top5(y64)), ("bf16_argmax", top5(y16)[0]), ("bf16_top5", top5(y16)),
    ])


def write_stem(d, data, x, outputs, y32, y16):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "model.onnx"), "wb") as f:
        f.write(data)
    write_pb(os.path.join(d, "test_data_set_0", "input_0.pb"), x.numpy(), "x")
    for k, name in enumerate(outputs):
        write_pb(os.path.join(d, "test_data_set_0", "output_%d.pb" % k), y32[k], name)
        write_pb(os.path.join(d, "torch_bf16", "output_%d.pb" % k), y16[k], name)


def dir_size(path):
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(path) for f in fs)


def generate_real(out_dir, full_dir):
    """Every export is built, checked and recorded in out_dir/manifest.json; the committed ones
    are written to out_dir, the others only with --full (to full_dir)."""
    torch.set_num_threads(1)
    os.makedirs(out_dir, exist_ok=True)
    manifest = collections.OrderedDict()
    for spec in REAL:
        state = None
        for lowering in (LOWERINGS if spec.chunks else (None,)):
            t0 = time.time()
            module = build_real(spec, lowering or "split")
            if state is None:
                state = module.state_dict()
            elif any(not torch.equal(v, module.state_dict()[k]) for k, v in state.items()):
                sys.exit("%s: the lowerings got different weights" % spec.name)
            params = sum(p.numel() for p in module.parameters())
            for tag, shape in spec.sizes.items():
                x = real_input(spec, shape, spec.seed + 2000)
                y32 = run_eager_all(module, x, torch.float32)
                y64 = run_eager_all(module, x.double(), torch.float64)
                y16 = run_eager_all(module, x, torch.bfloat16)
                for opset in OPSETS:
                    stem = "_".join([spec.name] + [p for p in (tag, lowering) if p] + ["op%d" % opset])
                    data = export_real(module, x, opset, spec.outputs)
                    model = onnx.load_from_string(data)
                    onnx.checker.check_model(model)
                    check_real_lowering(model, spec, lowering, stem)
                    y_onnx = interpret(model, {"x": x.double().numpy()})
                    keep = committed(stem)
                    where = out_dir if keep else full_dir
                    if where:
                        write_stem(os.path.join(where, stem), data, x, spec.outputs, y32, y16)
                    ops = collections.Counter(n.op_type for n in model.graph.node)
                    entry = collections.OrderedDict([
                        ("module", spec.name), ("lowering", lowering), ("opset", opset),
                        ("committed", keep),
                        ("path", "%s/%s" % ("real" if keep else "real-full", stem)),
                        ("parameters", params), ("model_bytes", len(data)),
                        ("inputs", [value_info(v) for v in model.graph.input]),
                        ("input_distribution", "uniform [0, 1)" if spec.image else "normal (0, 1)"),
                        ("op_counts", dict(sorted(ops.items()))),
                        ("node_count", len(model.graph.node)),
                        ("outputs", [output_record(n, a, b, c, d, stem) for n, a, b, c, d
                                     in zip(spec.outputs, y32, y64, y16, y_onnx)]),
                    ])
                    if spec.classifier:
                        entry["classification"] = classification_record(y32[0], y64[0], y16[0], stem)
                    manifest[stem] = entry
                    print("%-28s %s %8d B  %s" % (stem, "commit" if keep else "--full", len(data),
                                                  dict(sorted(ops.items()))))
            print("  (%s %s: %.1f s)" % (spec.name, lowering, time.time() - t0))
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    print("%s: %d bytes in all" % (out_dir, dir_size(out_dir)))
    if full_dir:
        print("%s: %d bytes in all" % (full_dir, dir_size(full_dir)))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.abspath(__file__))
    p.add_argument("--out", help="default models/seed, or models/real with --real")
    p.add_argument("--bench", metavar="MODULES", help="comma-separated modules to export at --batches instead")
    p.add_argument("--batches", default="1,32")
    p.add_argument("--real", action="store_true", help="the real models of issue 6 instead")
    p.add_argument("--full", action="store_true",
                   help="with --real: also write the uncommitted exports (YOLOv8n at 320, MobileNetV2 "
                   "width 1.0, the other lowerings/opsets of both) to --full-out")
    p.add_argument("--full-out", default=os.path.join(here, "real-full"))
    args = p.parse_args()
    if args.real:
        generate_real(args.out or os.path.join(here, "real"), args.full_out if args.full else None)
    elif args.bench:
        generate_bench(args.out or os.path.join(here, "seed"), args.bench.split(","),
                       [int(b) for b in args.batches.split(",")])
    else:
        generate(args.out or os.path.join(here, "seed"))


if __name__ == "__main__":
    main()
