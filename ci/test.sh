#!/usr/bin/env bash
# The project's own tests (harness, oracles, planted bugs).  Sets up whatever is
# missing first.  Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
ci/setup.sh
exec .venv/bin/pytest tests -rs "$@"
