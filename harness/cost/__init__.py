"""What a kernel call costs, in four subpackages, each importing only those before it in this list:

* ``prices``: an instruction mix made estimated cycles on real cores -- each instruction at a core's measured
  price (``cores``; scalar ones by class: ``scalar_classes``, ``scalar_prices``), the executed basic blocks on
  LLVM's X60 model (``mca``), the two side by side (``estimate_pair``), a model layer per token (``per_token``);
* ``measure``: one call counted -- under Spike (``spike_count``, ``spike_runs``, from a start-up ``snapshot``)
  or by a board's hardware counters (``board_counters``);
* ``calibration``: the estimates held against what boards measured (``kernel_rows``, ``model_rows``), each
  row's committed cost output (``sources``), two versions of the data file side by side (``data_diff``);
* ``tables``: what the cost suite's rows are read into -- per kernel, VLEN and ISA build, HEAD against BASE
  (``suite_tables``, ``batch_paths``), compilers side by side (``compiler_gaps``), what was measured of what
  was selected (``run_tally``), the PR gate's lists (``gate_lists``), a fix's cost and speed (``fix_cost``,
  ``fix_speed``).

The runs of the cost suite (costs/) are jobs (harness/jobs/: ``cost_suite_runs``, ``board_cost_runs``,
``gate_cost_step``, ``fix_cost_runs``, ``calibration_runs``); ``rvvdiff cost``, ``rvvdiff prices`` and
``rvvdiff calibration`` are their commands (harness/commands/); the pytest side of a measured call is
harness/plugin/costlog.py."""
