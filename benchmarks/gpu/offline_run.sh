#!/bin/bash
# Run benchmarks/gpu/run.py on a GPU box with no network whose Python image already holds torch
# (here: Python 3.12, torch 2.11+cu130, numpy 2, onnxruntime without CUDA). Run from the checkout's
# root; results go to $OUT (default benchmarks/results/gpu). Two archives travel with it, made on
# a machine with pip (Python 3.12 wheels, manylinux x86_64):
#   .gpukit/pytriton.tar.xz  site-packages' pytriton/, nvidia_pytriton.libs/ and its dist-info
#                            (stubs for Python 3.12 only: 27 MB)
#   .gpukit/site312.tar.xz   `pip install --target` of numpy==1.26.4, tritonclient (Python side)
#                            and its http/grpc dependencies, plus perf_analyzer 2.51's binary in
#                            bin/ (from the tritonclient==2.51.0 wheel): 17 MB
# The stub takes its packages from the python3 first on PATH and must not see numpy 2
# (docs/gpu.md): so the run uses a venv with numpy 1.26 first and the image's site-packages
# (torch, onnxruntime, matplotlib) behind it.
set -u
ROOT=$(pwd)
OUT=${OUT:-$ROOT/benchmarks/results/gpu}
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
echo "== $(date -u) $(uname -m)"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
E=/tmp/gpuenv
python3 -m venv --without-pip $E || exit 3
SP=$($E/bin/python -c 'import sysconfig;print(sysconfig.get_paths()["purelib"])')
IMG=$(python3 -c 'import sysconfig;print(sysconfig.get_paths()["purelib"])')
# `wait` with no argument would also wait for the tee above, forever (bash 5.1+)
tar -xJf .gpukit/site312.tar.xz -C "$SP" & p1=$!; tar -xJf .gpukit/pytriton.tar.xz -C "$SP" & p2=$!
wait $p1 $p2 || exit 3
echo "import site; site.addsitedir('$IMG')" > "$SP/zz_image_site.pth"
echo "$ROOT" > "$SP/tritonkit_checkout.pth"
mkdir -p "$SP/tritonkit-0.1.0.dist-info"
printf 'Metadata-Version: 2.1\nName: tritonkit\nVersion: 0.1.0\n' > "$SP/tritonkit-0.1.0.dist-info/METADATA"
# perf_analyzer 2.51 wants libcudart.so.12 and libb64.so.0d: the pytriton wheel carries both
L=/tmp/gpulibs; mkdir -p $L
ln -sf "$SP"/nvidia_pytriton.libs/libcudart-*.so.12* $L/libcudart.so.12
ln -sf "$SP"/nvidia_pytriton.libs/libb64-*.so.0d $L/libb64.so.0d
PYLIB=$(python3 -c 'import sysconfig;print(sysconfig.get_config_var("LIBDIR"))')
export LD_LIBRARY_PATH=$L:$PYLIB:${LD_LIBRARY_PATH:-}
export PATH=$E/bin:$PATH PERF_ANALYZER=$SP/bin/perf_analyzer PYTHONUNBUFFERED=1
python3 -c 'import numpy, torch, onnxruntime; print(numpy.__version__, torch.__version__, torch.cuda.is_available(), onnxruntime.get_available_providers())' || exit 4
timeout "${BENCH_TIMEOUT:-500}" python3 benchmarks/gpu/run.py --out "$OUT"
echo "== rc=$? $(date -u)"
