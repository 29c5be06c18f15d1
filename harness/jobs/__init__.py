"""The jobs made of several suite runs, below the command line that starts them: the PR gate's runs
and verdict (``gate_runs``: HEAD, BASE, HEAD again, the cost step), a fix's verification and all fixes
together (``fix_checks``), the failure a bisect replays (``bisect_failure``).  Every suite run goes
through harness/core/runner.py."""
