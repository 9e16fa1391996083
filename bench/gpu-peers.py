#!/usr/bin/env python3
"""Time strider against PyTorch eager and torch.compile(mode="reduce-overhead") on a GPU.

Models (--models, default all): the seed module PointwiseC2f (models/generate.py MODULES), the
real models of models/generate.py REAL at their benchmark sizes (C2f at 40x40, YOLOv8n at
320x320, MobileNetV2 width 1.0 at 224, GatedChain20, WaveNet8; built and exported as
generate_real does: the Split lowering of models/real-full/*_split_op17, MobileNetV2_op17) and
the benchmark-size transformers of `models/zoo.py --bench` (BertEncoder, Gpt2Decoder,
LlamaDecoder: text.BENCH_SIZES, sequence 128), at batch 1 and 32 (every input's batch dim) in
f32 and bf16. `seed:NAME` adds another seed module (e.g. seed:LinearChunkLastDim).

1. On the build machine (Debian's python: torch 1.13, onnx 1.12), export the ONNX models
   (opset 17, static shapes, constant folding; b1 and b32 share weights, and each b1 file is
   byte for byte the committed or --full export):

       /usr/bin/python3 bench/gpu-peers.py --export bench/models

   It writes bench/models/<Name>_b1.onnx and <Name>_b32.onnx (git-ignored; 140 MB together) and
   bench/models/compact/ (1.7 MB), the same graphs with every f32 initializer of 1024 elements
   or more stored as its mean and std alone: the device tool carries at most 64 MiB. The timing
   run fills those weights with seeded normal values of that mean and std (activations stay
   O(1)) into a temporary folder before strider loads them; timing does not depend on weight
   values, and torch's modules have other random weights anyway.

2. On the GPU machine (torch 2.x, onnx, numpy), from the repository root, with bench/models
   (or only bench/models/compact) there and the strider binary's LD_LIBRARY_PATH set:

       PYTHONUNBUFFERED=1 python3 bench/gpu-peers.py --strider /tmp/strider-gpu/bin/strider \
           [--json rows.json] [--profile DIR]

   The torch modules are rebuilt from the same code (models/generate.py, architectures.py,
   text.py) with the same seeds. For each model, batch and dtype it times the module in eager
   and torch.compile(mode="reduce-overhead", dynamic=False) with CUDA events around one call on
   device-resident inputs (median and p90 of --iterations calls after --warmup, peak memory;
   f32 stays true f32: TF32 off), then runs `strider bench --device cuda --iterations N
   --warmup W` on the ONNX model for each of strider's activation layouts (--layouts for the
   conv nets; nchw for the transformers) with the very same inputs (written as .npy, passed
   with --input: token ids in the vocabulary, BERT's padding mask 0/1; strider's own
   --random-inputs would give a mask of 0..7). It prints progress and a JSON line per row,
   then the table of every row with strider's ratio to eager and to compile and the best
   layout's ratio to compile, then per model the ratio of strider's best layout to
   torch.compile and to eager by batch and dtype (markdown, as bench/RESULTS.md's tables),
   and run() against its floor: the device time plus the bytes moved at --link-gbps (53).
   A strider, eager or torch.compile failure shows in its row and the run goes on. Rows that
   start past --compile-deadline-s (450 s) skip torch.compile, so that one call stays inside
   the device tool's 10 minutes; --json FILE is rewritten after every row, and
   `--tables-from A.json,B.json` prints the tables of several runs together (e.g. the conv nets
   and the transformers run as two commands). --profile DIR adds --profile to each strider
   run and saves its stdout and stderr as DIR/<model>_<dtype>_b<batch>_<layout>.txt (with
   STRIDER_CUDA_KERNEL_CHOICE_LOG set, every timed choice's candidates) and its JSON, every
   step's time and kernel, as .json beside it;
   --strider-args="..." passes more options to every strider bench run; --no-compile times
   eager alone (a second, profiling run).

A hidden --dry-run-cpu runs the whole loop on the CPU with few iterations (torch 1.13 has no
torch.compile: those cells read "compile failed"; strider with --device cpu) and checks that no
forward creates a tensor without device= (it would be on the CPU in the GPU run).
"""

import argparse
import copy
import io
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))
import generate  # noqa: E402  (seed modules, the real models of REAL, LSUV; imports onnx)
import text  # noqa: E402  (the transformers and their benchmark sizes)

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}


# ---- the models, built as models/generate.py and models/zoo.py build them for export ---------

class Seed:
    """A seed module of generate.MODULES, Split lowering, as `generate.py --bench` exports it."""
    conv, input_names, output_names = True, ("x",), ("y",)

    def __init__(self, name, module, label):
        self.name, self.module, self.label = name, module, label

    def build(self):
        return generate.build(self.module, "split")[0]

    def inputs(self, module, batch):
        shape = (batch,) + tuple(generate.MODULES[self.module][1][1:])
        return (torch.randn(*shape, generator=torch.Generator().manual_seed(7)),)

    def export(self, module, inputs):
        data = generate.export(module, inputs[0], 17)
        generate.check_lowering(onnx_model(data), "split", self.name)
        return data


class Real:
    """A model of generate.REAL at one of its sizes, as generate_real builds and exports it."""
    conv = True
    input_names = ("x",)

    def __init__(self, name, spec, size, label):
        self.name, self.spec_name, self.size, self.label = name, spec, size, label
        self.spec = next(s for s in generate.REAL if s.name == spec)
        self.output_names = self.spec.outputs

    def build(self):
        return generate.build_real(self.spec, "split")  # generate_real: `lowering or "split"`

    def inputs(self, module, batch):
        shape = (batch,) + tuple(self.spec.sizes[self.size][1:])
        return (generate.real_input(self.spec, shape, self.spec.seed + 2000),)

    def export(self, module, inputs):
        data = generate.export_real(module, inputs[0], 17, self.spec.outputs)
        generate.check_real_lowering(onnx_model(data), self.spec, "split" if self.spec.chunks else None, self.name)
        return data


class Text:
    """A benchmark-size transformer, as `zoo.py --bench` builds it (zoo.generate_bench: seed
    1300 + its index in text.BENCH_SIZES, no LSUV); inputs by text.example_inputs."""
    conv = False

    def __init__(self, name, label):
        self.name, self.label = name, label
        self.seed = 1300 + list(text.BENCH_SIZES).index(name)
        self.input_names, self.output_names = text.MODELS[name].inputs, text.MODELS[name].outputs

    def build(self):
        torch.manual_seed(self.seed)
        return text.MODELS[self.name](**text.BENCH_SIZES[self.name]).eval()

    def inputs(self, module, batch):
        return text.example_inputs(module, self.seed + 2000, seq=text.BENCH_SEQ, vocab=text.BENCH_VOCAB,
                                   batch=batch)

    def export(self, module, inputs):
        import zoo  # imports torchvision (vision.py): only here, on the build machine
        return zoo.export(module, inputs, 17, zoo.text_spec(self.name, self.seed))[0]


MODELS = [
    Seed("PointwiseC2f", "PointwiseC2f", "pointwise C2f"),
    Real("C2f", "C2f", "40", "C2f block 40x40"),
    Real("YOLOv8n", "YOLOv8n", "320", "YOLOv8n-style 320"),
    Real("MobileNetV2", "MobileNetV2", "", "MobileNetV2 224"),
    Real("GatedChain20", "GatedChain20", "", "gated chain 20 units"),
    Real("WaveNet8", "WaveNet8", "", "WaveNet stack"),
    Text("BertEncoder", "BERT encoder s128"),
    Text("Gpt2Decoder", "GPT-2 decoder s128"),
    Text("LlamaDecoder", "Llama decoder s128"),
]


def find_model(name):
    for m in MODELS:
        if m.name == name:
            return m
    if name.startswith("seed:") and name[5:] in generate.MODULES:
        return Seed("seed-" + name[5:], name[5:], "seed " + name[5:])
    sys.exit("unknown model %r: one of %s, or seed:NAME with NAME in %s"
             % (name, ",".join(m.name for m in MODELS), ",".join(generate.MODULES)))


def onnx_model(data):
    import onnx
    return onnx.load_from_string(data)


def onnx_path(out_dir, model, batch):
    return os.path.join(out_dir, "%s_b%d.onnx" % (model.name, batch))


# ---- the compact form: what travels to the GPU machine -------------------------------------
# The full exports are 140 MB together, over the device tool's 64 MiB for everything a call
# carries. In DIR/compact every f32 initializer of FILL_MIN elements or more (the weights; shape
# constants, indices, masks and small tensors keep their values) is stored as its name, mean and
# std alone; the GPU run refills it with seeded normal values of that mean and std (activations
# stay O(1) as with the real weights) before strider loads it. Timing does not depend on weight
# values; strider and torch have different random weights anyway.
FILL_KEY, FILL_MIN = "strider_bench_fill", 1024


def compact(data):
    import onnx
    from onnx import numpy_helper
    model = onnx.load_from_string(data)
    fills = []
    for init in model.graph.initializer:
        count = int(np.prod(init.dims)) if init.dims else 1
        if init.data_type == onnx.TensorProto.FLOAT and count >= FILL_MIN:
            a = numpy_helper.to_array(init).astype(np.float64)
            if not np.all(np.isfinite(a)):  # a mask (-inf): kept as it is
                continue
            fills.append({"name": init.name, "mean": float(a.mean()), "std": float(a.std())})
            init.ClearField("raw_data")
            init.ClearField("float_data")
    entry = model.metadata_props.add()
    entry.key, entry.value = FILL_KEY, json.dumps(fills)
    return model.SerializeToString()


def materialize(model, dst):
    """Writes the compact ModelProto `model` to `dst` with its weights filled in."""
    import zlib
    import onnx
    props = {p.key: p.value for p in model.metadata_props}
    fills = {f["name"]: f for f in json.loads(props[FILL_KEY])}
    for init in model.graph.initializer:
        f = fills.pop(init.name, None)
        if f is not None:
            rng = np.random.default_rng(zlib.crc32(init.name.encode()))
            values = rng.standard_normal(int(np.prod(init.dims))) * f["std"] + f["mean"]
            init.raw_data = values.astype("<f4").tobytes()
    if fills:
        raise ValueError("no initializers %s" % sorted(fills))
    kept = [(p.key, p.value) for p in model.metadata_props if p.key != FILL_KEY]
    model.ClearField("metadata_props")
    for key, value in kept:
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value
    onnx.save(model, dst)


# ---- export (build machine) ----------------------------------------------------------------

def export_all(out_dir, models, batches):
    import onnx
    torch.set_num_threads(1)  # as generate.py and zoo.py: deterministic weights
    os.makedirs(os.path.join(out_dir, "compact"), exist_ok=True)
    for model in models:
        t0 = time.time()
        module = model.build()
        for batch in batches:
            inputs = model.inputs(module, batch)
            data = model.export(module, inputs)
            graph = onnx.load_from_string(data)
            onnx.checker.check_model(graph)
            problem = input_mismatch(graph, model, inputs)
            if problem:
                sys.exit("%s b%d: %s" % (model.name, batch, problem))
            path = onnx_path(out_dir, model, batch)
            with open(path, "wb") as f:
                f.write(data)
            small = compact(data)
            with open(onnx_path(os.path.join(out_dir, "compact"), model, batch), "wb") as f:
                f.write(small)
            print("wrote %-40s %9d B (compact/ %7d B)  inputs %s" % (path, len(data), len(small), ", ".join(
                "%s %s %s" % (n, "x".join(map(str, t.shape)), str(t.dtype).replace("torch.", ""))
                for n, t in zip(model.input_names, inputs))), flush=True)
        print("  (%s: %.1f s)" % (model.name, time.time() - t0), flush=True)


ONNX_DTYPES = {1: torch.float32, 7: torch.int64, 6: torch.int32, 9: torch.bool}


def input_mismatch(graph, model, inputs):
    """Why the ONNX graph's inputs are not `inputs` (names, static shapes, dtypes), or None."""
    declared = [(v.name, [d.dim_value if d.HasField("dim_value") else d.dim_param
                          for d in v.type.tensor_type.shape.dim], v.type.tensor_type.elem_type)
                for v in graph.graph.input]
    ours = [(n, list(t.shape), t.dtype) for n, t in zip(model.input_names, inputs)]
    if [d[0] for d in declared] != [o[0] for o in ours]:
        return "graph inputs %s, expected %s" % ([d[0] for d in declared], [o[0] for o in ours])
    for (name, dims, elem), (_, shape, dtype) in zip(declared, ours):
        if dims != shape or ONNX_DTYPES.get(elem) != dtype:
            return "input %s is %s (onnx type %d), expected %s %s" % (name, dims, elem, shape, dtype)
    return None


# ---- timing --------------------------------------------------------------------------------

class DeviceCheck(torch.overrides.TorchFunctionMode):
    """--dry-run-cpu: records factory calls without device=, which make a CPU tensor on a GPU run."""
    FACTORIES = {"arange", "full", "zeros", "ones", "empty", "tensor", "rand", "randn", "randint",
                 "linspace", "eye", "tril_indices", "triu_indices", "as_tensor", "scalar_tensor"}

    def __init__(self):
        super().__init__()
        self.missing = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name in self.FACTORIES and func is getattr(torch, name, None) and "device" not in kwargs:
            self.missing.add(name)
        return func(*args, **kwargs)


def time_calls(fn, inputs, device, warmup, iterations):
    """First call's seconds (compile for torch.compile), median and p90 device ms, median wall ms."""
    cuda = device.startswith("cuda")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    with torch.no_grad():
        t0 = time.perf_counter()
        fn(*inputs)
        sync()
        first_s = time.perf_counter() - t0
        for _ in range(warmup - 1):
            fn(*inputs)
        sync()
        times = []
        for _ in range(iterations):
            if cuda:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn(*inputs)
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
            else:
                t = time.perf_counter()
                fn(*inputs)
                times.append((time.perf_counter() - t) * 1e3)
        walls = []  # host wall-clock of one call until the GPU finished it
        for _ in range(iterations):
            t = time.perf_counter()
            fn(*inputs)
            sync()
            walls.append((time.perf_counter() - t) * 1e3)
    times.sort()
    return first_s, statistics.median(times), times[int(len(times) * 0.9)], statistics.median(walls)


def short(e):
    lines = [l for l in str(e).strip().splitlines() if l.strip()]
    return ("%s: %s" % (type(e).__name__, lines[0] if lines else ""))[:160]


def torch_figures(model, cpu_module, cpu_inputs, dtype, args, allow_compile):
    device, dt = args.device, DTYPES[dtype]
    module = copy.deepcopy(cpu_module).to(device=device, dtype=dt).eval()
    inputs = tuple(t.to(device=device, dtype=dt) if t.is_floating_point() else t.to(device)
                   for t in cpu_inputs)
    figures = {}
    runs = [("eager", lambda: module)]
    if args.no_compile:
        figures["compile"] = {"error": "compile skipped: --no-compile"}
    elif not allow_compile:
        figures["compile"] = {"error": "compile skipped: past --compile-deadline-s"}
    elif not hasattr(torch, "compile"):
        figures["compile"] = {"error": "compile failed: torch %s has no torch.compile" % torch.__version__}
    else:
        runs.append(("compile", lambda: torch.compile(module, mode="reduce-overhead", dynamic=False)))
    for label, make in runs:
        fn = None
        try:
            if device.startswith("cuda"):
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats()
            fn = make()
            check = DeviceCheck() if args.dry_run_cpu and label == "eager" else None
            if check:
                with check:
                    with torch.no_grad():
                        fn(*inputs)
                if check.missing:
                    raise RuntimeError("the forward creates tensors without device=: %s (they would be "
                                       "on the CPU in the GPU run)" % sorted(check.missing))
            first_s, median, p90, wall = time_calls(fn, inputs, device, args.warmup, args.iterations)
            figures[label] = {"median": median, "p90": p90, "wall_median": wall, "first_call_s": first_s,
                              "peak_mib": torch.cuda.max_memory_allocated() / 2**20
                              if device.startswith("cuda") else None}
        except Exception as e:  # noqa: BLE001 (a failing row must not stop the run)
            figures[label] = {"error": ("compile failed: " if label == "compile" else "eager failed: ") + short(e)}
            if label == "eager":
                figures.setdefault("compile", {"error": "compile not tried: eager failed"})
                break
        finally:
            del fn
            if label == "compile" and hasattr(torch, "_dynamo"):
                torch._dynamo.reset()  # frees the CUDA graphs and the compiled code
    del module, inputs
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return figures


def write_inputs(model, inputs, batch, folder):
    """The torch inputs as .npy (f32 or int64, as the ONNX graph declares them): strider --input."""
    specs = []
    for name, t in zip(model.input_names, inputs):
        path = os.path.join(folder, "%s_b%d_%s.npy" % (model.name, batch, name))
        np.save(path, t.numpy())
        specs.append("%s=%s" % (name, path))
    return specs


def strider_figures(args, model, dtype, batch, layout, path, input_specs, problem):
    if problem:
        return {"error": problem}
    out = os.path.join(args.tmp, "bench-%s-%s-%d-%s.json" % (model.name, dtype, batch, layout))
    device = "cpu" if args.dry_run_cpu else "cuda"
    cmd = [args.strider, "bench", path, "--device", device, "--dtype", dtype, "--layout", layout, "--json", out,
           "--iterations", str(args.iterations), "--warmup", str(args.warmup), "--link-gbps", str(args.link_gbps)]
    for spec in input_specs:
        cmd += ["--input", spec]
    if args.profile:
        cmd.append("--profile")
    cmd += shlex.split(args.strider_args)
    try:
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=args.strider_timeout_s)
    except subprocess.TimeoutExpired:
        return {"error": "strider bench timed out after %d s" % args.strider_timeout_s}
    except OSError as e:
        return {"error": short(e)}
    if args.profile:  # the printed profile and stderr (STRIDER_CUDA_KERNEL_CHOICE_LOG's lines), every step in the JSON
        row = os.path.join(args.profile, "%s_%s_b%d_%s" % (model.name, dtype, batch, layout))
        with open(row + ".txt", "w") as f:
            f.write(result.stdout)
            f.write(result.stderr)
        if os.path.exists(out):
            shutil.copy(out, row + ".json")
    if result.returncode != 0:
        lines = (result.stderr or result.stdout).strip().splitlines()
        return {"error": "exit %d: %s" % (result.returncode, lines[-1] if lines else "")}
    with open(out) as f:
        j = json.load(f)
    if j.get("device_ms_median") is None:
        return {"error": "no device time in strider's JSON"}
    return {"median": j["device_ms_median"], "p90": j["device_ms_p90"], "run_median": j["run_ms_median"],
            "floor": j.get("floor_ms"), "planned_mib": j["planned_bytes"] / 2**20, "layout": j["layout"],
            "graph": j["cuda_graph"]}


def prepare_onnx(model, batch, inputs, onnx_dir, tmp):
    """The model file for strider (ONNX_DIR/<name>_b<batch>.onnx, else the one of ONNX_DIR/compact
    with its weights filled in, under tmp) and why it does not fit these torch inputs, or None."""
    path = onnx_path(onnx_dir, model, batch)
    small = onnx_path(os.path.join(onnx_dir, "compact"), model, batch)
    if not os.path.exists(path) and not os.path.exists(small):
        return path, "%s is missing: export it with /usr/bin/python3 bench/gpu-peers.py --export %s" % (
            path, onnx_dir)
    try:
        import onnx
        path = path if os.path.exists(path) else small
        graph = onnx.load(path, load_external_data=False)
        if any(p.key == FILL_KEY for p in graph.metadata_props):
            path = os.path.join(tmp, "%s_b%d_filled.onnx" % (model.name, batch))
            materialize(graph, path)
        problem = input_mismatch(graph, model, inputs)
    except Exception as e:  # noqa: BLE001
        return path, "cannot read %s: %s" % (path, short(e))
    return path, problem and "%s: %s; export it again" % (path, problem)


# ---- tables --------------------------------------------------------------------------------

def ratio(a, b):
    return None if a is None or b is None else a / b


def num(v, width, digits):
    return ("%*.*f" % (width, digits, v)) if v is not None else "%*s" % (width, "-")


def best_strider(group):
    ok = [s for s in group if "error" not in s]
    return min(ok, key=lambda s: s["median"]) if ok else None


def print_tables(rows, models, batches, dtypes):
    print()
    print("=== strider vs PyTorch (median ms per call; device: CUDA events around the call, inputs on the GPU;")
    print("    wall: host clock until the GPU is done; strider's wall is run(): upload, steps, download;")
    print("    best/c: strider's best layout over torch.compile) ===")
    print("%-14s %-4s %5s %-5s %8s %8s %8s %7s %7s %7s | %8s %8s %7s" % (
        "model", "dtype", "batch", "layout", "eager", "compile", "strider", "/eager", "/compile", "best/c",
        "c.wall", "s.wall", "/c.wall"))
    groups = {}
    for r in rows:
        groups.setdefault((r["model"], r["dtype"], r["batch"]), []).append(r["strider"])
    for r in rows:
        t, s = r["torch"], r["strider"]
        eager = t["eager"].get("median")
        comp = t["compile"].get("median")
        best = best_strider(groups[(r["model"], r["dtype"], r["batch"])])
        head = "%-14s %-4s %5d %-5s %s %s" % (r["model"], r["dtype"], r["batch"], r["layout"], num(eager, 8, 4),
                                            num(comp, 8, 4))
        notes = [v["error"] for v in (t["eager"], t["compile"]) if "error" in v]
        if "error" in s:
            print(head + "  strider error: %s%s" % (s["error"], "".join("; " + n for n in notes)))
            continue
        print(head + " %s %s %s %s | %s %s %s%s" % (
            num(s["median"], 8, 4), num(ratio(s["median"], eager), 7, 2), num(ratio(s["median"], comp), 7, 2),
            num(ratio(best and best["median"], comp), 7, 2), num(t["compile"].get("wall_median"), 8, 4),
            num(s["run_median"], 8, 4), num(ratio(s["run_median"], t["compile"].get("wall_median")), 7, 2),
            "".join("  (" + n + ")" for n in notes)))
    for against, title in (("compile", "torch.compile(mode=\"reduce-overhead\")"), ("eager", "PyTorch eager")):
        def ratio_cell(model, mine, against=against):
            best = best_strider([r["strider"] for r in mine])
            peer = mine[0]["torch"][against]
            if best is None:
                return "strider error"
            if "error" in peer:
                return "%s failed" % against if "skipped" not in peer["error"] else "%s skipped" % against
            layout = " %s" % best["layout"] if model.conv and len(mine) > 1 else ""
            return "%.2f%s" % (best["median"] / peer["median"], layout)
        print_markdown_table("strider (best layout) / %s, median device time (< 1: strider faster)" % title,
                             rows, models, batches, dtypes, ratio_cell)

    # Issue 14's last bar: run() host to host (upload, steps, download) against the floor,
    # the device time plus the bytes moved at --link-gbps, strider's best layout.
    def floor_cell(model, mine):
        best = best_strider([r["strider"] for r in mine])
        floor = best and best.get("floor")
        return "%.2f (%.3f / %.3f ms)" % (best["run_median"] / floor, best["run_median"], floor) if floor else ""
    print_markdown_table("strider run() / (device time + bytes in and out at the link's speed), best layout "
                         "(bar: 1.5 at b32)", rows, models, batches, dtypes, floor_cell)


def print_markdown_table(title, rows, models, batches, dtypes, cell):
    """A markdown table, a row per model and a column per (batch, dtype): cell(model, its rows
    of that batch and dtype), empty where it has none."""
    print()
    print("=== %s ===" % title)
    columns = [(b, d) for b in batches for d in dtypes]
    print("| model | " + " | ".join("b%d %s" % c for c in columns) + " |")
    print("|---|" + "---|" * len(columns))
    for model in models:
        cells = []
        for batch, dtype in columns:
            mine = [r for r in rows if r["model"] == model.name and r["batch"] == batch and r["dtype"] == dtype]
            cells.append(cell(model, mine) if mine else "")
        print("| %s | %s |" % (model.label, " | ".join(cells)))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--strider", help="the strider binary (timing mode)")
    p.add_argument("--export", metavar="DIR", help="export the ONNX models to DIR instead (build machine)")
    p.add_argument("--models", default=",".join(m.name for m in MODELS),
                   help="comma-separated, of %s, or seed:NAME" % ",".join(m.name for m in MODELS))
    p.add_argument("--batches", default="1,32")
    p.add_argument("--dtypes", default="f32,bf16")
    p.add_argument("--layouts", default="nchw,nhwc",
                   help="strider's activation layouts to time for the conv nets (the transformers: nchw)")
    p.add_argument("--onnx-dir", default=os.path.join(HERE, "models"), help="where --export wrote the models")
    p.add_argument("--profile", metavar="DIR", help="also save strider bench --profile's stdout per row here")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--iterations", type=int, default=100)
    p.add_argument("--compile-deadline-s", type=float, default=450,
                   help="skip torch.compile for rows that start later than this after the start (0: never)")
    p.add_argument("--no-compile", action="store_true", help="time eager only (e.g. for a --profile run)")
    p.add_argument("--strider-timeout-s", type=int, default=240)
    p.add_argument("--link-gbps", type=float, default=53,
                   help="the host link's GB/s for run()'s floor (53: pinned copies on the H200 and H100 machines)")
    p.add_argument("--strider-args", default="",
                   help="more options for every strider bench run, as one string: --strider-args=\"--fusion off\"")
    p.add_argument("--json", metavar="FILE", help="write the rows so far as JSON here after each row")
    p.add_argument("--tables-from", metavar="FILE,...",
                   help="only print the tables from the rows that --json wrote (several runs: comma-separated)")
    p.add_argument("--dry-run-cpu", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.tables_from:
        rows = []
        for path in args.tables_from.split(","):
            with open(path) as f:
                rows += json.load(f)
        names = list(dict.fromkeys(r["model"] for r in rows))
        print_tables(rows, [find_model(n.replace("seed-", "seed:", 1)) for n in names],
                     sorted({r["batch"] for r in rows}), [d for d in DTYPES if any(r["dtype"] == d for r in rows)])
        return
    models = [find_model(n) for n in args.models.split(",") if n]
    batches = [int(b) for b in args.batches.split(",")]
    dtypes = args.dtypes.split(",")
    for d in dtypes:
        if d not in DTYPES:
            sys.exit("unknown dtype %r: f32 or bf16" % d)
    if args.export:
        export_all(args.export, models, batches)
        return
    if not args.strider:
        p.error("--strider is required (or --export DIR)")
    args.device = "cpu" if args.dry_run_cpu else "cuda"
    if args.dry_run_cpu:
        args.warmup, args.iterations = min(args.warmup, 2), min(args.iterations, 3)
    if args.profile:
        os.makedirs(args.profile, exist_ok=True)
    args.tmp = tempfile.mkdtemp(prefix="strider-gpu-peers-")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print("torch", torch.__version__, torch.cuda.get_device_name() if args.device == "cuda" else "cpu (dry run)",
          flush=True)
    start = time.time()
    rows = []
    for model in models:
        t0 = time.time()
        try:
            cpu_module = model.build()
        except Exception as e:  # noqa: BLE001
            print("[%6.1f s] %s: build failed: %s" % (time.time() - start, model.name, short(e)), flush=True)
            continue
        layouts = args.layouts.split(",") if model.conv else ["nchw"]
        print("[%6.1f s] %s built (%.1f s, %d parameters)" % (time.time() - start, model.name, time.time() - t0,
                                                             sum(q.numel() for q in cpu_module.parameters())),
              flush=True)
        for batch in batches:
            cpu_inputs = model.inputs(cpu_module, batch)
            path, problem = prepare_onnx(model, batch, cpu_inputs, args.onnx_dir, args.tmp)
            specs = [] if problem else write_inputs(model, cpu_inputs, batch, args.tmp)
            for dtype in dtypes:
                allow = not args.compile_deadline_s or time.time() - start < args.compile_deadline_s
                t = torch_figures(model, cpu_module, cpu_inputs, dtype, args, allow)
                print("[%6.1f s] %s %s b%d torch: eager %s, compile %s" % (
                    time.time() - start, model.name, dtype, batch,
                    "%.4f ms" % t["eager"]["median"] if "median" in t["eager"] else t["eager"]["error"],
                    "%.4f ms (first call %.1f s)" % (t["compile"]["median"], t["compile"]["first_call_s"])
                    if "median" in t["compile"] else t["compile"]["error"]), flush=True)
                for layout in layouts:
                    s = strider_figures(args, model, dtype, batch, layout, path, specs, problem)
                    row = {"model": model.name, "dtype": dtype, "batch": batch, "layout": layout, "torch": t,
                           "strider": s,
                           "onnx": "compact, weights filled" if path.startswith(args.tmp) else path}
                    rows.append(row)
                    print(model.name, dtype, batch, layout, json.dumps({"torch": t, "strider": s}), flush=True)
                    if args.json:  # after each row: a run cut short keeps what it measured
                        with open(args.json, "w") as f:
                            json.dump(rows, f, indent=1)
                            f.write("\n")
            for path in [os.path.join(args.tmp, fn) for fn in os.listdir(args.tmp) if "_b%d_" % batch in fn]:
                os.remove(path)  # b32 YOLOv8n's input is 39 MB
    print("[%6.1f s] done" % (time.time() - start), flush=True)
    shutil.rmtree(args.tmp, ignore_errors=True)
    print_tables(rows, models, batches, dtypes)


if __name__ == "__main__":
    main()
