"""The pytest plugin (entry point :mod:`harness.plugin.hooks`): options, one session object per run
holding its state and hooks (:mod:`harness.plugin.session`), targets (VLEN x ISA build x stress
mode), marks (not in this tree, known failures), budgets and selections, the bench log."""
