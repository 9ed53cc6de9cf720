#!/usr/bin/env bash
# Creates, once, the Python virtual environment bench/train_step/run.py compares against (JAX
# and PyTorch on the CPU, one thread), and prints the path of its python. The venv lives
# outside the source tree, at ${SHMAPC_BENCH_VENV:-$HOME/.cache/shmapc/bench-venv}, apart
# from the JAX twins' venv (tests/jax/venv.sh), and is reused while it holds exactly the
# pinned packages below; otherwise it is rebuilt (wheels from PyPI: about 2.3 GB to download,
# about 4 GB on disk, a few minutes).
#
# The base interpreter is ${SHMAPC_BENCH_PYTHON:-python3}, the first python3 on PATH: any
# 3.11+ with the venv module (Debian 12's needs python3-venv, which tools/setup.sh installs;
# pip comes into the venv by ensurepip). Everything else this script prints goes to stderr,
# so `PY=$(bench/setup.sh)` works.
set -euo pipefail

VENV=${SHMAPC_BENCH_VENV:-$HOME/.cache/shmapc/bench-venv}
BASE=${SHMAPC_BENCH_PYTHON:-python3}

# The same JAX as tests/jax/venv.sh, read from its PINS line so the two never drift.
JAX_PINS=$(sed -n 's/^PINS="\(.*\)"$/\1/p' "$(dirname "$0")/../tests/jax/venv.sh")
[ -n "$JAX_PINS" ] || { echo "bench/setup.sh: no PINS line in tests/jax/venv.sh" >&2; exit 1; }
# torch's own requirements other than CUDA (Requires-Dist of torch-2.15.0's METADATA), and
# theirs (MarkupSafe for jinja2, mpmath for sympy); installed with dependency resolution.
TORCH_DEPS="filelock==4.2.12 typing-extensions==4.16.0 setuptools==84.2.1 sympy==1.14.0
mpmath==1.3.0 networkx==3.6.1 jinja2==3.1.6 MarkupSafe==3.0.4 fsspec==2026.9.0"
# PyTorch itself, installed with --no-deps. PyPI's only torch for Linux x86_64 is the CUDA
# build (the CPU-only wheels live on PyTorch's own index, which is not reachable here), and
# its Requires-Dist pulls all of CUDA 13 (cuda-toolkit[...], cuda-bindings, triton, ...).
# Its libtorch_cpu/libtorch_cuda/libtorch_python.so link (DT_NEEDED, loaded at `import torch`
# even with no GPU) against these libraries, found through torch's RPATH
# ($ORIGIN/../../nvidia/{cu13,cudnn,nccl,cusparselt,nvshmem}/lib), so each wheel below is
# needed: without any one of them `import torch` fails with "libX.so: cannot open shared
# object file" (checked one by one with the system's CUDA hidden):
#   nvidia-cuda-runtime   libcudart.so.13        (libtorch_global_deps, libtorch_cpu, ...)
#   nvidia-cuda-cupti     libcupti.so.13         (libtorch_cpu)
#   nvidia-cublas         libcublas(Lt).so.13    (libtorch_cuda)
#   nvidia-cuda-nvrtc     libnvrtc.so.13         (libtorch_cuda)
#   nvidia-cufft          libcufft.so.12         (libtorch_cuda)
#   nvidia-cusparse       libcusparse.so.12      (libtorch_cuda)
#   nvidia-cufile         libcufile.so.0         (libtorch_cuda, libtorch_python)
#   nvidia-cudnn-cu13     libcudnn.so.9          (libtorch_cuda, libtorch_python)
#   nvidia-cusparselt-cu13 libcusparseLt.so.0    (libtorch_cuda)
#   nvidia-nccl-cu13      libnccl.so.2           (libtorch_cuda)
#   nvidia-nvshmem-cu13   libnvshmem_host.so.3   (libtorch_nvshmem, from libtorch_cuda)
# Left out, as nothing loads them on the CPU: nvidia-nvjitlink (cusparse and cufft dlopen it
# only to JIT-link GPU code), nvidia-cusolver (libtorch_cuda_linalg, loaded lazily),
# nvidia-curand, nvidia-nvtx, nvidia-cuda-cccl (headers), cuda-bindings, triton. Versions are
# the ones torch 2.15.0 pins (cuda-toolkit==13.2.2 and its own ==). The cpp-kernels machine's
# /usr/local/cuda-13.0 does not do instead: its NCCL is too old (undefined ncclCommResume).
TORCH_PINS="torch==2.15.0 nvidia-cuda-runtime==13.2.86 nvidia-cuda-cupti==13.2.86
nvidia-cublas==13.4.1.3 nvidia-cuda-nvrtc==13.2.86 nvidia-cufft==12.2.0.57
nvidia-cusparse==12.7.10.12 nvidia-cufile==1.17.1.22 nvidia-cudnn-cu13==9.26.0.51
nvidia-cusparselt-cu13==0.8.1 nvidia-nccl-cu13==2.30.7 nvidia-nvshmem-cu13==3.7.2"
PINS="$JAX_PINS $TORCH_DEPS $TORCH_PINS"
STAMP="$VENV/.shmapc-pins"

# What the benchmarks need: both frameworks import, and torch shares memory with numpy.
CHECK='import jax, numpy as np, torch
a = np.arange(6, dtype=np.float32).reshape(2, 3)
torch.from_numpy(a).add_(1)
assert a[1, 2] == 6 and (torch.from_numpy(a) @ torch.ones(3)).numpy().tolist() == [6, 15]'

ready() {
  [ -x "$VENV/bin/python" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$PINS" ] &&
    "$VENV/bin/python" -c 'import jax, numpy, torch' >/dev/null 2>&1
}

mkdir -p "$(dirname "$VENV")"
# One installer at a time (two runs may start together); the lock file sits beside the venv.
exec 9>"$VENV.lock"
if command -v flock >/dev/null; then flock 9; fi

if ! ready; then
  echo "bench/setup.sh: creating $VENV with $(echo $PINS) (once, a few minutes)" >&2
  start=$(date +%s)
  rm -rf "$VENV"
  "$BASE" -m venv "$VENV" >&2
  # --only-binary: wheels only, never a source build; PIP_* settings of the machine apply.
  # --no-cache-dir: the CUDA wheels would otherwise take another 2.3 GB in pip's cache.
  "$VENV/bin/python" -m pip install --quiet --no-cache-dir --only-binary=:all: \
    $JAX_PINS $TORCH_DEPS >&2
  "$VENV/bin/python" -m pip install --quiet --no-cache-dir --only-binary=:all: --no-deps \
    $TORCH_PINS >&2
  if ! "$VENV/bin/python" -c "$CHECK" >&2; then
    echo "bench/setup.sh: $VENV does not import jax and torch; not marking it ready" >&2
    exit 1
  fi
  printf '%s' "$PINS" >"$STAMP"
  echo "bench/setup.sh: installed in $(( $(date +%s) - start )) s" >&2
fi
echo "$VENV/bin/python"
