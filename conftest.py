"""What the differential suite (cases/) and the harness's own tests (tests/) share.

* This checkout's packages.  pytest puts this file's directory first on ``sys.path`` (a rootdir
  conftest, prepend import mode), so ``cases``, ``harness`` and ``oracles`` come from here in
  both suites.  The ``rvvdiff`` plugin is loaded before any conftest, from wherever the venv
  installed it; if that is another checkout, the two would mix, so the session stops and says
  how to run it.
* The families' definition modules (cases/conversions.py, vec_dot.py, vec_ops.py, mul_mat.py,
  flash_attn.py) hold the checks their tests call; both suites import them (tests/ through
  cases/families.py and the oracles' tests), so pytest rewrites their asserts as it does a test
  module's and a failing check explains itself.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import harness

pytest.register_assert_rewrite("cases.conversions", "cases.vec_dot", "cases.vec_ops", "cases.mul_mat",
                               "cases.flash_attn")

ROOT = Path(__file__).resolve().parent
_LOADED = Path(harness.__file__).resolve().parent.parent
if _LOADED != ROOT:
    pytest.exit(f"the rvvdiff plugin was imported from {_LOADED}, not from this checkout {ROOT}: run "
                f"`PYTHONPATH={ROOT} python -m pytest ...` (or `pip install -e {ROOT}` in this venv)", returncode=4)
