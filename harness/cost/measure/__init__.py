"""Counting what one kernel call executes: under Spike, two runs of the kernel server that differ only in
how often the call is repeated (``spike_runs``: the runs, their check, the cache of measurements), read into
instructions retired, vector work, the instruction mix and PC histograms (``spike_count``), both runs
started from the server's state after ggml's start-up (``snapshot``); or on a board, by its hardware cycle
and instruction counters around warm calls (``board_counters``).  The mix is priced by harness/cost/prices/."""
