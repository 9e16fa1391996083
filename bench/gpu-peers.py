#!/usr/bin/env python3
"""Time strider against PyTorch eager and torch.compile(mode="reduce-overhead") on a GPU.

Run on the GPU machine from the repository root, after scripts/gpu-bundle made the
binaries and `/usr/bin/python3 models/generate.py --bench C2f,PointwiseC2f,LinearChunkLastDim
--out bench/models` made the benchmark models (both on the build machine):

    python3 bench/gpu-peers.py --strider /tmp/strider-gpu/bin/strider

For each model, dtype (f32, bf16) and batch (1, 32) it times the same module in PyTorch
eager and torch.compile(mode="reduce-overhead") with CUDA events around one call on
device-resident inputs (median and p90 of 200 calls after warm-up, peak memory), runs
`strider bench --device cuda` on the exported ONNX model (device time of the steps with
CUDA events, inputs on the device), and prints a table with strider's ratio to each.
f32 stays true f32 on both sides (TF32 off).
"""

import argparse
import json
import os
import statistics
import time
import subprocess
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))
import generate  # noqa: E402  (the seed modules, as exported)

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}


def time_calls(fn, x, warmup=20, iterations=200):
    with torch.no_grad():
        for _ in range(warmup):
            fn(x)
        torch.cuda.synchronize()
        times = []
        for _ in range(iterations):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn(x)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        walls = []  # host wall-clock of one call until the GPU finished it
        for _ in range(iterations):
            t0 = time.perf_counter()
            fn(x)
            torch.cuda.synchronize()
            walls.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.9)], statistics.median(walls)


def torch_figures(name, dtype, batch):
    module, x = generate.build(name, "split")
    shape = (batch,) + tuple(x.shape[1:])
    module = module.to(device="cuda", dtype=DTYPES[dtype]).eval()
    inputs = torch.randn(*shape, device="cuda", dtype=DTYPES[dtype])
    figures = {}
    for label, fn in (("eager", module), ("compile", torch.compile(module, mode="reduce-overhead"))):
        torch.cuda.reset_peak_memory_stats()
        median, p90, wall = time_calls(fn, inputs)
        figures[label] = {"median": median, "p90": p90, "wall_median": wall,
                          "peak_mib": torch.cuda.max_memory_allocated() / 2**20}
    return figures


def strider_figures(binary, name, dtype, batch, layout):
    model = os.path.join(HERE, "models", "%s_b%d.onnx" % (name, batch))
    out = "/tmp/strider-bench-%s-%s-%d-%s.json" % (name, dtype, batch, layout)
    cmd = [binary, "bench", model, "--device", "cuda", "--dtype", dtype, "--layout", layout, "--json", out,
           "--iterations", "200"]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        return {"error": (result.stderr or result.stdout).strip().splitlines()[-1]}
    with open(out) as f:
        j = json.load(f)
    return {"median": j["device_ms_median"], "p90": j["device_ms_p90"], "run_median": j["run_ms_median"],
            "planned_mib": j["planned_bytes"] / 2**20,
            "layout": j["layout"], "graph": j["cuda_graph"]}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--strider", required=True)
    p.add_argument("--models", default="C2f,PointwiseC2f,LinearChunkLastDim")
    p.add_argument("--batches", default="1,32")
    p.add_argument("--layouts", default="nchw,nhwc", help="strider's activation layouts to time")
    args = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print("torch", torch.__version__, torch.cuda.get_device_name())
    rows = []
    for name in args.models.split(","):
        for dtype in DTYPES:
            for batch in (int(b) for b in args.batches.split(",")):
                t = torch_figures(name, dtype, batch)
                for layout in args.layouts.split(","):
                    s = strider_figures(args.strider, name, dtype, batch, layout)
                    rows.append((name, dtype, batch, layout, t, s))
                    print(name, dtype, batch, layout, json.dumps({"torch": t, "strider": s}), flush=True)
    print()
    print("=== strider vs PyTorch (median ms per call; device: CUDA events around the call, inputs on the GPU;")
    print("    wall: host clock until the GPU is done; strider's wall is run(): upload, steps, download) ===")
    print("%-19s %-4s %5s %-5s %8s %8s %8s %7s %7s | %8s %8s %7s" % (
        "model", "dtype", "batch", "layout", "eager", "compile", "strider", "/eager", "/compile",
        "c.wall", "s.wall", "/c.wall"))
    for name, dtype, batch, layout, t, s in rows:
        eager, comp = t["eager"], t["compile"]
        if "error" in s:
            print("%-19s %-4s %5d %-5s %8.4f %8.4f  error: %s" % (name, dtype, batch, layout, eager["median"],
                                                                comp["median"], s["error"]))
            continue
        print("%-19s %-4s %5d %-5s %8.4f %8.4f %8.4f %7.2f %7.2f | %8.4f %8.4f %7.2f" % (
            name, dtype, batch, layout, eager["median"], comp["median"], s["median"],
            s["median"] / eager["median"], s["median"] / comp["median"],
            comp["wall_median"], s["run_median"], s["run_median"] / comp["wall_median"]))

if __name__ == "__main__":
    main()
