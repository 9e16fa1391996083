// Choosing among kernels for one node by timing them on its real views, at creation:
// cuDNN's own heuristics ranked its depthwise bf16 kernels first where a kernel of
// strider's was several times faster, and which is faster depends on the shape, the
// dtype and the layout. The winner is cached per key (shape, strides, dtype, attributes,
// device) for the process, so the second session with that node times nothing.
//
// Contract: every candidate is fully created for the same views and computes the same
// values; each writes only its outputs, whose memory exists at creation (the trial runs
// overwrite them, as cuDNN's algorithm trial always did). Timing runs on a private stream
// and waits for it; it never touches the queues' streams. What is timed is the device's
// time alone (a delay kernel first, so the host's enqueueing is hidden): plans run as CUDA
// graphs, where a library's host cost per call is gone; timed with it, cuDNN lost to
// kernels several times slower on the device. A candidate whose trial run
// fails is dropped; with none left, the first candidate's error is returned.
//
// STRIDER_CUDA_KERNEL_CHOICE_LOG=1 prints each timed choice's candidates and times.
//
// STRIDER_CUDA_KERNEL_CHOICE=own|library (a testing aid) skips the timing: `own` keeps
// the first candidate whose implementation starts with "strider-cuda:", `library` the
// first other one, so the conformance suites run each path whatever the timing says; any
// other value keeps the first candidate whose implementation starts with it (e.g.
// "cudnn-graph"), or times them as usual where none does.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "hal/kernel.h"

namespace strider::cuda {

Result<std::unique_ptr<Kernel>> fastest_kernel(const std::string& key, std::vector<std::unique_ptr<Kernel>> candidates);

}  // namespace strider::cuda
