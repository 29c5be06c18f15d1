"""The jobs made of several suite runs or replays, below the command line that starts them: the PR gate's runs
and verdict (``gate_runs``: HEAD, BASE, HEAD again, the cost step), a fix's verification and all fixes
together (``fix_checks``), the suite on several trees (``tree_runs``), planted bugs detected and the
false-positive audit (``mutant_runs``), the failure a bisect replays (``bisect_failure``) and the bisect
itself (``bisect_runs``: a replay per commit, its verdict, git bisect driven), a failure report made an
upstream issue text and checked true (``issue_runs``: its program built and run on the tree and on the fixed
tree), a failure report replayed outside pytest (``repro_runs``: on QEMU, a board, or Spike beside QEMU; the
standalone reproducers), every known failure re-checked on Spike (``spike_checks``), where the suite's time
goes (``bench_runs``), the model family's studies outside the suite (``model_studies``: what each finding does to
a real model, the noise between correct builds its bound is derived from), and the runs of the cost suite
(costs/): ``rvvdiff cost`` on HEAD and BASE (``cost_suite_runs``), on a board (``board_cost_runs``), the gate's
cost step (``gate_cost_step``), a fix's cost (``fix_cost_runs``) and a calibration row measured again
(``calibration_runs``).  Every suite run goes through harness/core/runner.py."""
