#!/usr/bin/env bash
# The main job: the differential suite against the pinned ggml (or --ggml-src PATH)
# at every VLEN and every ISA build, without and with QEMU's tail/mask stress
# mode, built by zig's clang and, for ggml's default ISA build (zvfh), by GCC 14
# too (docs/compilers.md), on all cores.  Sets up whatever is missing first (GCC 14
# optionally: where it cannot be installed its targets are skipped with the reason).
# Extra arguments go to pytest (e.g. --ggml-src ~/llama.cpp, -k vec_dot, --cc all).
set -euo pipefail
cd "$(dirname "$0")/.."
# Keep Python's compiled modules even where the machine sets PYTHONDONTWRITEBYTECODE: without them every pytest
# and rvvdiff process compiles and assertion-rewrites the harness's modules afresh (docs/performance.md, start-up).
unset PYTHONDONTWRITEBYTECODE
ci/setup.sh --gcc14=optional
exec .venv/bin/pytest cases -n auto --vlen all --isa all --rvv-stress both --cc clang,gcc14:zvfh "$@"
