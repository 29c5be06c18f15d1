"""rvvdiff: differential testing of ggml's RISC-V Vector kernels.

The data flows strategy -> case -> (oracle, kernel server in an emulator) -> comparison -> report.
This package holds everything except the strategies and tests (``cases/``) and the oracles
(``oracles/``), in layers; a package imports only those above it in this list:

    core       configuration, settings, errors, subprocesses
    ggml       reading a ggml tree (sources, C reader, inventory, changes, known failures)
    toolchain  cross-compiling a tree and the kernel server
    binary     reading a built binary: ELF symbols, DWARF lines, vector instruction names
    emulators  QEMU and Spike behind one interface; the server pool
    model      real models under llama.cpp's own tools: GGUF files, the tools built from the tree, their runs
    check      comparison helpers and what a test observed
    cost       what a call costs: measured under Spike or on a board, priced on real cores, calibrated
               against boards; the cost reports and the runs of the cost suite
    report     failure reports, replay, reproducers, summaries
    upstream   what goes to ggml's maintainers: public-API programs, issue texts, the stock toolchain,
               fix series, ggml's own tests patched
    plugin     the pytest plugin
    jobs       the jobs made of several suite runs: the PR gate, a fix's verification
    commands   the rvvdiff command line
"""
