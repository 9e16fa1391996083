#!/usr/bin/python3
"""Generate the transformer and hybrid models of issue 11 (text.py, vision.py) into models/zoo.

Run with Debian's python (python3-torch 1.13.1, python3-torchvision 0.14, python3-onnx):

    /usr/bin/python3 models/zoo.py [--out models/zoo] [--only NAME,NAME]

Each model is exported at opset 17 (LayerNormalization is one node) and opset 14 (the exporter
writes LayerNorm as ReduceMean/Sub/Pow/Sqrt/Div; where no node differs from the opset-17 graph,
the opset-14 copy is not written and the manifest says so), static shapes, constant folding on, with
random weights calibrated by LSUV (generate.py) and random BatchNorm statistics, so that every
activation is O(1) as in a trained network. A folder per export holds model.onnx,
test_data_set_0/input_<k>.pb (the seeded inputs, in the graph's input order) and output_<k>.pb
(torch f32), and torch_bf16/output_<k>.pb (torch's own bf16 run, the yardstick of the bf16
rule in tests/models). manifest.json records sizes, op counts and output statistics.
Deterministic: fixed seeds and one torch thread.
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import generate  # noqa: E402  (LSUV, BatchNorm statistics, output records)
import text  # noqa: E402
import vision  # noqa: E402  (written by the vision helper)

OPSETS = (17, 14)


class Spec:
    def __init__(self, name, factory, make_inputs, input_names, output_names, seed, classifier=False):
        self.name, self.factory, self.make_inputs, self.seed = name, factory, make_inputs, seed
        self.input_names, self.output_names, self.classifier = input_names, output_names, classifier


def text_spec(name, seed):
    cls = text.MODELS[name]
    return Spec(name, cls, lambda module, s: text.example_inputs(module, s), cls.inputs, cls.outputs, seed)


def vision_spec(name, seed):
    size = vision.IMAGE_SIZES[name]
    make = lambda module, s: (torch.rand(1, 3, size, size, generator=torch.Generator().manual_seed(s)),)
    return Spec(name, getattr(vision, name), make, ("x",), ("y",), seed, classifier=True)


SPECS = [text_spec(n, 1100 + i) for i, n in enumerate(text.MODELS)] + \
        [vision_spec(n, 1200 + i) for i, n in enumerate(vision.IMAGE_SIZES)]


def cast_floats(values, dtype):
    return tuple(v.to(dtype) if v.is_floating_point() else v for v in values)


def run_torch(module, inputs, dtype):
    m = copy.deepcopy(module).to(dtype)
    with torch.no_grad():
        y = m(*cast_floats(inputs, dtype))
    return [t.to(torch.float64).numpy() for t in (y if isinstance(y, (tuple, list)) else (y,))]


def build(spec):
    torch.manual_seed(spec.seed)
    module = spec.factory()
    generate.set_bn_stats(module, spec.seed + 1000)
    module.eval()
    generate.lsuv(module, spec.make_inputs(module, spec.seed + 3000))
    return module


def export(module, inputs, opset, spec):
    f = io.BytesIO()
    torch.onnx.export(module, inputs, f, opset_version=opset, input_names=list(spec.input_names),
                      output_names=list(spec.output_names), do_constant_folding=True)
    model = onnx.load_from_string(f.getvalue())
    onnx.checker.check_model(model)
    # Inputs are static; an output may be symbolic where the exporter's shape inference gave up
    # (Swin's mask arithmetic): strider infers it from the inputs.
    for v in model.graph.input:
        if not all(d.HasField("dim_value") for d in v.type.tensor_type.shape.dim):
            sys.exit("%s: %s has a symbolic shape" % (spec.name, v.name))
    if [v.name for v in model.graph.input] != list(spec.input_names):
        sys.exit("%s: graph inputs %s, expected %s" % (spec.name, [v.name for v in model.graph.input],
                                                      spec.input_names))
    return f.getvalue(), model


def write_tensor(path, array, name):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if array.dtype == np.float64:
        array = array.astype(np.float32)
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(np.ascontiguousarray(array), name).SerializeToString())


def write_export(d, data, spec, inputs, y32, y16):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "model.onnx"), "wb") as f:
        f.write(data)
    for k, (name, x) in enumerate(zip(spec.input_names, inputs)):
        write_tensor(os.path.join(d, "test_data_set_0", "input_%d.pb" % k), x.numpy(), name)
    for k, name in enumerate(spec.output_names):
        write_tensor(os.path.join(d, "test_data_set_0", "output_%d.pb" % k), y32[k], name)
        if y16 is not None:
            write_tensor(os.path.join(d, "torch_bf16", "output_%d.pb" % k), y16[k], name)


def generate_zoo(out_dir, only):
    torch.set_num_threads(1)
    os.makedirs(out_dir, exist_ok=True)
    manifest_path = os.path.join(out_dir, "manifest.json")
    manifest = collections.OrderedDict()
    if only and os.path.exists(manifest_path):
        with open(manifest_path) as f:
            manifest = json.load(f, object_pairs_hook=collections.OrderedDict)
    for spec in SPECS:
        if only and spec.name not in only:
            continue
        t0 = time.time()
        module = build(spec)
        inputs = spec.make_inputs(module, spec.seed + 2000)
        y32 = run_torch(module, inputs, torch.float32)
        y64 = run_torch(module, cast_floats(inputs, torch.float64), torch.float64)
        y16 = run_torch(module, inputs, torch.bfloat16)
        params = sum(p.numel() for p in module.parameters())
        first_nodes = None
        for opset in OPSETS:
            stem = "%s_op%d" % (spec.name, opset)
            data, model = export(module, inputs, opset, spec)
            nodes = [n.SerializeToString() for n in model.graph.node]
            if nodes == first_nodes:  # no op of the graph changed between the opsets: not kept twice
                manifest["%s_op%d" % (spec.name, OPSETS[0])]["same_graph_at_opset"] = opset
                print("%-24s the op%d graph, node for node: not written" % (stem, OPSETS[0]))
                continue
            first_nodes = first_nodes or nodes
            write_export(os.path.join(out_dir, stem), data, spec, inputs, y32, y16)
            ops = collections.Counter(n.op_type for n in model.graph.node)
            entry = collections.OrderedDict([
                ("module", spec.name), ("opset", opset), ("parameters", params),
                ("model_bytes", len(data)),
                ("inputs", [generate.value_info(v) for v in model.graph.input]),
                ("op_counts", dict(sorted(ops.items()))), ("node_count", len(model.graph.node)),
                ("outputs", [generate.output_record(n, a, b, c, None, stem)
                             for n, a, b, c in zip(spec.output_names, y32, y64, y16)]),
            ])
            if spec.classifier:
                entry["classification"] = generate.classification_record(y32[0], y64[0], y16[0], stem)
            manifest[stem] = entry
            print("%-24s %8d B %6d params  %s" % (stem, len(data), params, dict(sorted(ops.items()))))
        print("  (%s: %.1f s)" % (spec.name, time.time() - t0))
    with open(manifest_path, "w") as f:
        json.dump(collections.OrderedDict(sorted(manifest.items())), f, indent=1)
        f.write("\n")
    print("%s: %d bytes in all" % (out_dir, generate.dir_size(out_dir)))


def generate_bench(out_dir):
    """The benchmark-size transformers (text.BENCH_SIZES) at opset 17, `<name>_bench_op17`, with
    their seeded inputs and torch's f32 outputs: for timing, so no LSUV calibration and no bf16."""
    torch.set_num_threads(1)
    for i, (name, sizes) in enumerate(text.BENCH_SIZES.items()):
        spec = text_spec(name, 1300 + i)
        torch.manual_seed(spec.seed)
        module = text.MODELS[name](**sizes).eval()
        inputs = text.example_inputs(module, spec.seed + 2000, seq=text.BENCH_SEQ, vocab=text.BENCH_VOCAB)
        y32 = run_torch(module, inputs, torch.float32)
        data, _ = export(module, inputs, 17, spec)
        write_export(os.path.join(out_dir, "%s_bench_op17" % name), data, spec, inputs, y32, None)
        print("%s_bench_op17: %d B, %d params" % (name, len(data), sum(p.numel() for p in module.parameters())))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.abspath(__file__))
    p.add_argument("--out", default=None, help="default models/zoo, or models/bench-full with --bench")
    p.add_argument("--only", default="", help="comma-separated model names (others keep their files)")
    p.add_argument("--bench", action="store_true", help="the benchmark-size transformers instead")
    args = p.parse_args()
    if args.bench:
        generate_bench(args.out or os.path.join(here, "bench-full"))
    else:
        generate_zoo(args.out or os.path.join(here, "zoo"), set(filter(None, args.only.split(","))))


if __name__ == "__main__":
    main()
