#!/usr/bin/env python3
"""What a new input shape costs in strider's Python API: the first run of a shape (shape
inference, planning, kernels, then the run) against later runs of a cached shape.

  PYTHONPATH=build/python /usr/bin/python3 bench/python_shapes.py [--device cuda] [--repeats 50]

Prints a table: model, shape, first run (ms), cached run (median ms), plans made.
"""
import argparse
import pathlib
import statistics
import time

import numpy as np

import strider

ROOT = pathlib.Path(__file__).resolve().parents[1]


def feeds():
    rng = np.random.default_rng(0)
    for batch in (1, 4, 32):
        yield "SmallCnn_dynamic_batch", f"x[{batch},3,16,16]", {"x": rng.random((batch, 3, 16, 16), dtype=np.float32)}
    for batch, length in ((1, 16), (4, 32), (8, 64)):
        ids = rng.integers(0, 100, (batch, length))
        yield "BertEncoder_dynamic", f"[{batch},{length}]", {"input_ids": ids,
                                                             "attention_mask": np.ones((batch, length), np.int64)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    sessions = {}
    rows = []
    for model, shape, feed in feeds():
        if model not in sessions:
            sessions[model] = strider.InferenceSession(str(ROOT / "models/dynamic" / model / "model.onnx"),
                                                       device=args.device)
        session = sessions[model]
        start = time.perf_counter()
        session.run(None, feed)
        first = (time.perf_counter() - start) * 1e3
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            session.run(None, feed)
            times.append((time.perf_counter() - start) * 1e3)
        rows.append((model, shape, first, statistics.median(times), session.plans_made))
    print(f"{'model':26} {'shape':16} {'first run ms':>12} {'cached ms':>10} {'plans':>6}")
    for model, shape, first, cached, plans in rows:
        print(f"{model:26} {shape:16} {first:12.2f} {cached:10.3f} {plans:6d}")


if __name__ == "__main__":
    main()
