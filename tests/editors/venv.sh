#!/usr/bin/env bash
# Creates, once, the virtual environment tests/editors/check_editors.py runs in (a TextMate
# engine from PyPI, and Pygments), and prints the path of its python. It lives outside the
# source tree, at ${SHMAPC_EDITORS_VENV:-$HOME/.cache/shmapc/editors-venv}, and is reused while it
# holds exactly the pinned packages; everything else goes to stderr (`PY=$(tests/editors/venv.sh)`).
set -euo pipefail

VENV=${SHMAPC_EDITORS_VENV:-$HOME/.cache/shmapc/editors-venv}
BASE=${SHMAPC_EDITORS_PYTHON:-python3}
# textmate-grammar-python: a TextMate grammar interpreter on Oniguruma (onigurumacffi), the
# regex engine VS Code's and GitHub's highlighters use.
PINS="textmate-grammar-python==0.6.1 onigurumacffi==1.5.0 pygments==2.20.0"
STAMP="$VENV/.shmapc-pins"

if ! { [ -x "$VENV/bin/python" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$PINS" ]; }; then
  echo "tests/editors/venv.sh: creating $VENV ($PINS)" >&2
  rm -rf "$VENV"
  "$BASE" -m venv "$VENV" >&2
  # shellcheck disable=SC2086
  "$VENV/bin/pip" install --quiet --disable-pip-version-check $PINS >&2
  echo "$PINS" > "$STAMP"
fi
echo "$VENV/bin/python"
