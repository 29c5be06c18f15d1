"""``python -m cases.model_noise``: an alias kept for one release of ``rvvdiff model noise`` (the noise
between correct builds that the model family's bound is derived from; harness/jobs/model_studies.py)."""

from __future__ import annotations

import sys

from harness.core.legacy import forward

if __name__ == "__main__":
    sys.exit(forward("cases.model_noise", ["model", "noise"], sys.argv[1:]))
