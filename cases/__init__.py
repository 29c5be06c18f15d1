"""The differential tests: for each kernel family a definition module (its kernel table, its
strategies, the loops it must cross, its coverage scan) beside the test module that runs it."""
