#!/usr/bin/env bash
# CTest's jax.twins: creates the JAX venv if needed (tests/jax/venv.sh), then runs every twin
# (tests/jax/run_twins.py). Arguments go to the runner.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
PY="$("$HERE/venv.sh")"
exec "$PY" "$HERE/run_twins.py" "$@"
