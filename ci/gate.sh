#!/usr/bin/env bash
# The kernel-PR gate, runnable anywhere: tests a llama.cpp / ggml checkout with the
# differential suite and exits non-zero only on new failures (listed findings in
# known_failures.toml are expected failures; one that starts to pass fails the gate).
#
#   ci/gate.sh PATH/TO/llama.cpp [pytest options...]
#   ci/gate.sh ~/llama.cpp --vlen 512 --isa zvfh          # one shard of the CI matrix
#
# Writes reports/ (failure reports, summary.md, summary.html, results.json, junit.xml);
# appends summary.md to $GITHUB_STEP_SUMMARY when it is set.  RVVDIFF_WORKERS sets
# pytest-xdist's -n (default: auto).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 1 ] || { echo "usage: ci/gate.sh PATH/TO/llama.cpp [pytest options]" >&2; exit 2; }
tree=$(cd "$1" && pwd); shift
cd "$here"
ci/setup.sh
set +e
.venv/bin/pytest cases -n "${RVVDIFF_WORKERS:-auto}" --vlen all --isa all --rvv-stress both \
  --ggml-src "$tree" --report-dir reports --junitxml reports/junit.xml "$@"
status=$?
set -e
if [ -n "${GITHUB_STEP_SUMMARY:-}" ] && [ -f reports/summary.md ]; then
  cat reports/summary.md >> "$GITHUB_STEP_SUMMARY"
fi
if [ "$status" -ne 0 ] && [ -d reports/cases ]; then
  echo "gate: failure reports are in $here/reports/cases; replay one with: .venv/bin/rvvdiff repro reports/cases/<name> --c"
fi
exit "$status"
