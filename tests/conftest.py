"""The harness's own tests.  ``pytester`` runs pytest sessions in a subprocess, as a user would."""

import os
from pathlib import Path

from harness.core import config

pytest_plugins = ["pytester"]

# pytester points HOME at a fresh temporary directory for every session it runs; without these
# each of them would fetch the pinned source, probe the toolchain and build ggml again.
os.environ.setdefault("RVVDIFF_CACHE", str(config.cache_dir()))
os.environ.setdefault("ZIG_GLOBAL_CACHE_DIR",
                      str(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "zig"))
