"""rvvdiff: differential testing of ggml's RISC-V Vector kernels.

The data flows strategy -> case -> (oracle, kernel server in QEMU) ->
comparison -> report.  This package holds everything except the strategies
and tests (``cases/``) and the oracles (``oracles/``): the toolchain, the ggml
source, the builds, the kernel server protocol, the QEMU pool, the pytest
plugin and the comparison helpers.
"""
