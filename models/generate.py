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

Output is deterministic: fixed seeds, one intra-op thread, files written from sorted data.
"""

import argparse
import collections
import copy
import io
import json
import os
import sys

import numpy as np
import onnx
import torch
from onnx import numpy_helper
from torch import nn

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


def build(name, lowering):
    cls, shape, seed = MODULES[name]
    torch.manual_seed(seed)
    module = cls(lowering)
    gen = torch.Generator().manual_seed(seed + 1000)
    for bn in (m for m in module.modules() if isinstance(m, nn.BatchNorm2d)):
        c = bn.num_features
        with torch.no_grad():
            bn.weight.copy_(torch.empty(c).uniform_(0.5, 1.5, generator=gen))
            bn.bias.copy_(torch.randn(c, generator=gen) * 0.1)
            bn.running_mean.copy_(torch.randn(c, generator=gen) * 0.1)
            bn.running_var.copy_(torch.empty(c).uniform_(0.5, 1.5, generator=gen))
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
    assert group == 1 and all(s == 1 for s in strides) and all(d == 1 for d in dilations)
    kh, kw = w.shape[2:]
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh, ow = xp.shape[2] - kh + 1, xp.shape[3] - kw + 1
    y = np.zeros((x.shape[0], w.shape[0], oh, ow))
    for i in range(kh):
        for j in range(kw):
            y += np.einsum("nchw,oc->nohw", xp[:, :, i:i + oh, j:j + ow], w[:, :, i, j])
    return y if b is None else y + b.reshape(1, -1, 1, 1)


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


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "seed"))
    p.add_argument("--bench", metavar="MODULES", help="comma-separated modules to export at --batches instead")
    p.add_argument("--batches", default="1,32")
    args = p.parse_args()
    if args.bench:
        generate_bench(args.out, args.bench.split(","), [int(b) for b in args.batches.split(",")])
    else:
        generate(args.out)


if __name__ == "__main__":
    main()
