#!/usr/bin/env bash
# The main job: the differential suite against the pinned ggml (or --ggml-src PATH)
# at every VLEN and every ISA build, without and with QEMU's tail/mask stress
# mode, on all cores.  Sets up whatever is missing first.  Extra arguments go
# to pytest (e.g. --ggml-src ~/llama.cpp, -k vec_dot, --max-examples 200).
set -euo pipefail
cd "$(dirname "$0")/.."
ci/setup.sh
exec .venv/bin/pytest cases -n auto --vlen all --isa all --rvv-stress both "$@"
