#!/usr/bin/env bash
# The project's own tests (house style, harness, oracles, planted bugs), on every core (pytest-xdist
# -n auto unless an -n / --numprocesses is given).  Sets up whatever is missing first.  Extra arguments
# go to pytest (--long: also the long verifications, tests marked long; docs/setup.md).
set -euo pipefail
cd "$(dirname "$0")/.."
# Keep Python's compiled modules even where the machine sets PYTHONDONTWRITEBYTECODE: without them every pytest
# and rvvdiff process compiles and assertion-rewrites the harness's modules afresh (docs/performance.md, start-up).
unset PYTHONDONTWRITEBYTECODE
ci/setup.sh --spike --gcc14=optional --board --llvm-mca=optional   # Spike: the cost and Spike checks; GCC 14: the compiler axis; sshd: the stand-in board; llvm-mca: the second cost estimate
.venv/bin/ruff check .   # the house style (pyproject.toml [tool.ruff])
workers=(-n auto)
for a in "$@"; do
  case "$a" in -n|-n*|--numprocesses|--numprocesses=*) workers=() ;; esac
done
exec .venv/bin/pytest tests -rs --durations=25 "${workers[@]}" "$@"   # the 25 slowest tests at the end: where its time goes
