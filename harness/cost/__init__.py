"""What a kernel call costs: measuring it (instructions under Spike, counted from a start-up snapshot,
or a board's hardware counters), pricing it (estimated cycles on real cores, LLVM's X60 model),
holding the estimates against boards (calibration), and the cost reports (tables per VLEN, compilers
side by side, the model-shaped case per token, the PR gate's cost lists); the runs of the cost suite
(costs/) on one or two trees, on a board, for the gate and for a fix."""
