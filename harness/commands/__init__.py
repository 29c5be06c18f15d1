"""The ``rvvdiff`` command line (:mod:`harness.commands.cli`): one module per subcommand (repro, gate,
bisect, fixes, trees, bench, cost, prices, calibration, mutation, spike-check), each parsing its arguments and
calling the job of the layers below (every suite run starts through one suite runner)."""
