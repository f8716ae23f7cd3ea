#!/usr/bin/env bash
# Run the Python ctypes tests against the libraries in <lib-dir> (default target/release).
#
#   bash capi-tests/python/run.sh [lib-dir]
#
# Needs python3 (>= 3.7) and pytest. If pytest is missing it is installed, trying in order:
#   1. python3 -m pip install --user pytest
#   2. the same with --break-system-packages (pip refuses plain --user on an "externally
#      managed" Debian/Ubuntu Python, PEP 668)
#   3. a virtual environment in target/py-venv (python3 -m venv, then its pip)
# and every step says what it does. No step is silent: if none works the script stops with the
# reason (and, on Debian, the packages that provide pip or venv).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
lib="${1:-$root/target/release}"
lib="$(cd "$lib" && pwd)"
say() { printf 'capi-tests/python: %s\n' "$*"; }

command -v python3 >/dev/null || { say "python3 is required but not installed (Debian: apt-get install python3)" >&2; exit 1; }
py=python3
python3 - <<'EOF' || { say "python3 >= 3.7 is required" >&2; exit 1; }
import sys
sys.exit(0 if sys.version_info >= (3, 7) else 1)
EOF
say "using $(python3 --version 2>&1) at $(command -v python3)"

has_pytest() { "$1" -c 'import pytest' >/dev/null 2>&1; }
venv="$root/target/py-venv"

if ! has_pytest "$py" && [ -x "$venv/bin/python" ] && has_pytest "$venv/bin/python"; then
  py="$venv/bin/python"
  say "using pytest from the virtual environment an earlier run made: $venv"
elif has_pytest "$py"; then
  say "pytest $("$py" -m pytest --version 2>&1 | head -1 | awk '{print $NF}') is installed"
else
  say "pytest is missing; installing it"
  installed=0
  if python3 -m pip --version >/dev/null 2>&1; then
    say "+ python3 -m pip install --user pytest"
    if python3 -m pip install --user pytest; then
      installed=1
    else
      say "+ python3 -m pip install --user --break-system-packages pytest (externally managed Python?)"
      python3 -m pip install --user --break-system-packages pytest && installed=1 || true
    fi
  else
    say "python3 has no pip module"
  fi
  # A --user install may land where this interpreter does not look (e.g. no user site).
  if [ "$installed" = 1 ] && ! has_pytest "$py"; then installed=0; fi
  if [ "$installed" = 0 ]; then
    say "+ python3 -m venv $venv && $venv/bin/pip install pytest"
    if python3 -m venv "$venv" && "$venv/bin/python" -m pip install pytest; then
      py="$venv/bin/python"
    else
      say "could not install pytest (Debian: apt-get install python3-pip python3-venv, or python3-pytest)" >&2
      exit 1
    fi
  fi
  has_pytest "$py" || { say "pytest still not importable by $py" >&2; exit 1; }
fi

"$root/shim/links.sh" "$lib" >/dev/null
say "OPENNRT_LIB_DIR=$lib"
export OPENNRT_LIB_DIR="$lib"
export PYTHONDONTWRITEBYTECODE=1   # no __pycache__ in the source tree
cd "$root/capi-tests/python"
say "+ $py -m pytest -q -p no:cacheprovider capi-tests/python"
"$py" -m pytest -q -p no:cacheprovider -o console_output_style=classic .
say "all Python tests passed"
