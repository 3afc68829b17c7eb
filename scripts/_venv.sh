# Sourced by the scripts: make sure .venv exists with the locked dependencies and the project (editable), then use it.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
VENV="$ROOT/.venv"
stamp="$VENV/.chartgw-installed"
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
# The exact versions of requirements.lock (scripts/lock writes it from pyproject.toml's ranges), then the project
# itself without resolving again. Not byte-compiled at install (half of a fresh install's minute of CPU, mostly for
# modules nothing imports): each module is compiled, and its cache written, when first imported.
lock="$ROOT/requirements.lock"
if [ ! -f "$stamp" ] || [ "$ROOT/pyproject.toml" -nt "$stamp" ] || [ "$lock" -nt "$stamp" ]; then
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile -r "$lock"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps -e "$ROOT"
  touch "$stamp"
fi
export PATH="$VENV/bin:$PATH"
