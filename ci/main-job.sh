#!/usr/bin/env bash
# The main job: the differential suite against the pinned ggml (or --ggml-src PATH)
# at every VLEN and every ISA build, without and with QEMU's tail/mask stress
# mode, built by zig's clang and, for ggml's default ISA build (zvfh), by GCC 14
# too (docs/compilers.md), on all cores.  Sets up whatever is missing first (GCC 14
# optionally: where it cannot be installed its targets are skipped with the reason).
# Extra arguments go to pytest (e.g. --ggml-src ~/llama.cpp, -k vec_dot, --cc all).
#
# Then the budgeted part of a distribution's build (docs/dispatch.md): the kernel families
# on GCC 14's riscv64_v variant library at VLEN 256 without stress, every call held to
# the static twin (v) byte for byte, its reports in reports/dispatch; and GCC 14's
# dispatch table (which variant each emulated CPU gets).  Then SpacemiT's IME1 GEMMs under Spike with
# rvvdiff's IME1 library at the K1's VLEN (docs/spacemit.md; reports in reports/ime1; of the user's arguments
# only --ggml-src reaches it).  With --thorough (also passed
# on to pytest): that slice at every VLEN with and without stress, the model family on
# GCC 14's distribution build (llama-perplexity with every CPU variant, riscv64_v loaded by
# score, at every VLEN with and without stress; reports in reports/dispatch-model), and
# clang's dispatch table: the pinned tree's held to its findings (tests/test_dispatch.py
# --long), a tree given by --ggml-src judged by `rvvdiff dispatch --cc clang` itself.  Every step runs;
# each prints its name and exit status; the job exits with the first failing step's status.
set -euo pipefail
cd "$(dirname "$0")/.."
# Keep Python's compiled modules even where the machine sets PYTHONDONTWRITEBYTECODE: without them every pytest
# and rvvdiff process compiles and assertion-rewrites the harness's modules afresh (docs/performance.md, start-up).
unset PYTHONDONTWRITEBYTECODE
ci/setup.sh --gcc14=optional --spike

# The steps' selections (tests/test_matrix.py holds them to the matrix's parser).
SUITE=(.venv/bin/pytest cases -n auto --vlen all --isa all --rvv-stress both --cc clang,gcc14:zvfh)
DISPATCH_SLICE=(.venv/bin/pytest cases -n auto --deselect cases/test_model.py --deselect cases/test_flash_attn.py)
DISPATCH_TARGETS=(--isa riscv64_v --cc gcc14 --vlen 256 --rvv-stress off --report-dir reports/dispatch)
DISPATCH_TARGETS_THOROUGH=(--isa riscv64_v --cc gcc14 --vlen all --rvv-stress both --report-dir reports/dispatch)
DISPATCH_MODEL=(.venv/bin/pytest cases/test_model.py -n auto)
DISPATCH_MODEL_TARGETS=(--isa riscv64_v --cc gcc14 --vlen all --rvv-stress both --report-dir reports/dispatch-model)
DISPATCH_TABLE=(.venv/bin/rvvdiff dispatch --cc gcc14)
DISPATCH_TABLE_CLANG=(.venv/bin/pytest tests/test_dispatch.py --long -p no:xdist -k "every_emulated and clang")
DISPATCH_TABLE_CLANG_TREE=(.venv/bin/rvvdiff dispatch --cc clang)
IME1=(.venv/bin/pytest cases/test_spacemit_gemm.py -n auto --emulator spike --isa spacemit --vlen 256 --report-dir reports/ime1)

thorough=no
tree=()
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
    case ${args[i]} in
        --thorough) thorough=yes ;;
        --ggml-src) tree=(--ggml-src "${args[i + 1]:-}") ;;
        --ggml-src=*) tree=("${args[i]}") ;;
    esac
done

status=0
step() {
    local name=$1 rc=0
    shift
    echo "main-job: step $name: $*"
    "$@" || rc=$?
    echo "main-job: step $name: exit status $rc"
    if ((rc != 0 && status == 0)); then
        status=$rc
    fi
}

step suite "${SUITE[@]}" "$@"
if [[ $thorough == yes ]]; then
    step dispatch-slice "${DISPATCH_SLICE[@]}" "$@" "${DISPATCH_TARGETS_THOROUGH[@]}"
    step dispatch-model "${DISPATCH_MODEL[@]}" "$@" "${DISPATCH_MODEL_TARGETS[@]}"
else
    step dispatch-slice "${DISPATCH_SLICE[@]}" "$@" "${DISPATCH_TARGETS[@]}"
fi
step dispatch-table "${DISPATCH_TABLE[@]}" ${tree[@]+"${tree[@]}"}
step ime1 "${IME1[@]}" ${tree[@]+"${tree[@]}"}
if [[ $thorough == yes && ${#tree[@]} -eq 0 ]]; then
    step dispatch-table-clang "${DISPATCH_TABLE_CLANG[@]}"
elif [[ $thorough == yes ]]; then
    step dispatch-table-clang "${DISPATCH_TABLE_CLANG_TREE[@]}" "${tree[@]}"
fi
exit $status
