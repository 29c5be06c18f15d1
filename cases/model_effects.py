"""``python -m cases.model_effects``: an alias kept for one release of ``rvvdiff model effects`` (what each
finding does to a real model; harness/jobs/model_studies.py)."""

from __future__ import annotations

import sys

from harness.core.legacy import forward

if __name__ == "__main__":
    sys.exit(forward("cases.model_effects", ["model", "effects"], sys.argv[1:]))
