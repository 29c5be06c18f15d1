#!/usr/bin/env bash
# The kernel-PR gate, runnable anywhere: judges a HEAD tree against its BASE with the
# differential suite (harness/commands/gate.py, docs/gate.md).  Regressions, failing new kernels and
# changed RVV code no test reaches block (exit 1); failures BASE has too are reported, and so
# are fixes, with the known_failures.toml entry to remove.  A cost step that measured nothing on
# HEAD or BASE (no Spike: --no-cost skips the step) exits 3 when nothing blocks.
#
#   ci/gate.sh HEAD [--base BASE] [--target-branch BRANCH] [--changed-only] [pytest options...]
#   ci/gate.sh ~/llama.cpp                                 # BASE: merge-base of HEAD with origin/master
#   ci/gate.sh ~/llama.cpp --base upstream/master --vlen 512 --isa zvfh   # one shard of the CI matrix
#   ci/gate.sh /tmp/head --base /tmp/base                  # two directories (no git needed)
#
# BASE is a directory or a revision of HEAD's git checkout (materialised in the cache, never in
# the checkout).  Writes reports/gate/ (summary.md, summary.html, gate.json) and each run's
# reports (reports/head, reports/base, reports/head-replay); appends the gate's summary to
# $GITHUB_STEP_SUMMARY when it is set.  RVVDIFF_WORKERS sets pytest-xdist's -n (default: auto).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 1 ] || { echo "usage: ci/gate.sh HEAD [--base BASE] [pytest options]" >&2; exit 2; }
tree=$(cd "$1" && pwd); shift
cd "$here"
ci/setup.sh
exec .venv/bin/rvvdiff gate "$tree" "$@"
