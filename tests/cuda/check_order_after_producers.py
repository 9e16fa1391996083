#!/usr/bin/env python3
"""Every kernel of strider's own begins with order_after_producers().

strider launches its kernels as programmatic dependent launches (hal/cuda/dependent_launch.cuh):
a kernel's blocks may be resident while the kernel before it in the stream still runs, and
only the `griddepcontrol.wait` in order_after_producers() orders them after it. A kernel
that touched global memory before that wait would read a producer's output before it is
written, or write under a producer still reading: the wrong answer this runtime exists to
rule out, and one no GPU-less machine would see. So this check reads the sources: the body
of every __global__ function in src/hal/cuda must open with the call.

usage: check_order_after_producers.py SOURCE_DIR   (prints each kernel; exit 1 on a miss)
"""
import pathlib
import re
import sys


def kernels(text):
    """(name, first statement of the body) of each __global__ function definition."""
    text = re.sub(r"//[^\n]*", "", text)  # comments name __global__ too
    text = re.sub(r"__launch_bounds__\([^)]*\)", "", text)
    for match in re.finditer(r"__global__", text):
        brace = text.index("{", match.end())
        header = text[match.end():brace]
        if ";" in header:  # a declaration, not a definition
            continue
        name = re.findall(r"(\w+)\s*\(", header)
        body = text[brace + 1:]
        yield (name[0] if name else "?"), body.split(";", 1)[0].strip()


def main():
    root = pathlib.Path(sys.argv[1]) / "src" / "hal" / "cuda"
    files = sorted(list(root.glob("*.cu")) + list(root.glob("*.cuh")))
    found, missing = 0, []
    for path in files:
        for name, first in kernels(path.read_text()):
            found += 1
            ok = re.fullmatch(r"(device::)?order_after_producers\(\)", first) is not None
            print("%-4s %s: %s" % ("ok" if ok else "MISS", path.name, name))
            if not ok:
                missing.append("%s: %s begins with `%s`" % (path.name, name, first[:60]))
    if found == 0:
        print("no kernels found under %s" % root)
        return 1
    for line in missing:
        print("kernel without order_after_producers() first:", line)
    print("%d kernels, %d without the wait first" % (found, len(missing)))
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
