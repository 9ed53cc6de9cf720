#!/usr/bin/env bash
# Creates, once, the Python virtual environment the JAX twins run in (tests/jax/run_twins.py), and
# prints the path of its python. The venv lives outside the source tree, at
# ${SHMAPC_JAX_VENV:-$HOME/.cache/shmapc/jax-venv}, and is reused while it holds exactly the
# pinned packages below; otherwise it is rebuilt (CPU wheels from PyPI, about a minute).
#
# The base interpreter is ${SHMAPC_JAX_PYTHON:-python3}, the first python3 on PATH: any 3.11+
# with the venv module (Debian 12's needs python3-venv, which tools/setup.sh installs; pip
# comes into the venv by ensurepip). Everything else this script prints goes to stderr, so
# `PY=$(tests/jax/venv.sh)` works.
set -euo pipefail

VENV=${SHMAPC_JAX_VENV:-$HOME/.cache/shmapc/jax-venv}
BASE=${SHMAPC_JAX_PYTHON:-python3}
# Verified together (CPU only: jaxlib's wheel carries the XLA CPU backend; optax for the stdlib
# optimizers' twins).
PINS="jax==0.10.2 jaxlib==0.10.2 numpy==2.4.6 ml_dtypes==0.6.0 opt_einsum==3.4.0 scipy==1.17.1 optax==0.2.8 absl-py==2.5.1"
STAMP="$VENV/.shmapc-pins"

ready() {
  [ -x "$VENV/bin/python" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$PINS" ] &&
    "$VENV/bin/python" -c 'import jax, numpy' >/dev/null 2>&1
}

mkdir -p "$(dirname "$VENV")"
# One installer at a time (two test runs may start together); the lock file sits beside the venv.
exec 9>"$VENV.lock"
if command -v flock >/dev/null; then flock 9; fi

if ! ready; then
  echo "tests/jax/venv.sh: creating $VENV with $PINS (once)" >&2
  start=$(date +%s)
  rm -rf "$VENV"
  "$BASE" -m venv "$VENV" >&2
  # --only-binary: wheels only, never a source build; PIP_* settings of the machine apply.
  "$VENV/bin/python" -m pip install --quiet --only-binary=:all: $PINS >&2
  printf '%s' "$PINS" >"$STAMP"
  echo "tests/jax/venv.sh: installed in $(( $(date +%s) - start )) s" >&2
fi
echo "$VENV/bin/python"
