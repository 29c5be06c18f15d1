"""The ``rvvdiff`` command line (:mod:`harness.commands.cli`): one module per subcommand (repro, gate,
bisect, fixes, trees, bench, mutation, spike-check), each starting pytest through one suite runner."""
