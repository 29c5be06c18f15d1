"""From a measured instruction mix to estimated cycles on real RVV cores: every instruction at a core's
measured reciprocal throughput (``cores``: rvv-bench's tables, harness/data/cost/cores/), scalar instructions
by class (``scalar_classes``: the class of an instruction word; ``scalar_prices``: each class's price, from
rvv-bench's add / mul and LLVM's model of the core), the executed basic blocks on LLVM's SpacemiT X60 model
(``mca``: llvm-mca), the two estimates side by side (``estimate_pair``), and one transformer layer's
mul_mats per token from sliced measurements (``per_token``: the model-shaped case).  Nothing here reads a
board's measurement: the boards judge these estimates (harness/cost/calibration/)."""
