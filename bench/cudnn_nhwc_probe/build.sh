#!/usr/bin/env bash
# Builds the cuDNN NHWC channel-slice probe next to this script.
# NVCC / CUDA_HOME may be overridden; the default is the CUDA 13.0 toolkit (with cuDNN 9 inside).
set -euo pipefail
cd "$(dirname "$0")"
CUDA_HOME="${CUDA_HOME:-/usr/local/cuda-13.0}"
NVCC="${NVCC:-$CUDA_HOME/bin/nvcc}"
"$NVCC" -std=c++17 -O2 -arch=sm_90 \
  -I"$CUDA_HOME/include" -L"$CUDA_HOME/lib" -L"$CUDA_HOME/lib64" -Xlinker -rpath -Xlinker "$CUDA_HOME/lib" \
  probe.cu -o probe -lcudnn
echo "built $(pwd)/probe"
