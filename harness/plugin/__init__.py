"""The pytest plugin (entry point :mod:`harness.plugin.hooks`): options, targets (VLEN x ISA build x
stress mode), marks (not in this tree, known failures), budgets and selections, the bench log."""
