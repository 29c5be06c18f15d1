"""rvvdiff's estimates held against what boards measured (docs/calibration.md): the data file's rows, each a
published change with a board's llama-bench speed-ups, and the error factor of each estimate of the changed
kernel (``kernel_rows``: the table, the summary line ``rvvdiff cost`` prints) and of the model-shaped case
(``model_rows``); each row's committed ``rvvdiff cost`` output and the estimates made from it (``sources``);
two versions of the data file side by side (``data_diff``).  ``rvvdiff calibration`` is the command
(harness/commands/calibration.py); a row measured again is harness/jobs/calibration_runs.py."""
