"""What rvvdiff hands to ggml's maintainers, in their terms and with their tools.

A finding leaves rvvdiff as things a ggml developer can run without it: the recorded call as a public
ggml op (``public``: ``ggml_mul_mat`` through ``ggml.h``, or why there is none), that op as a standalone
C program (``program``), the program built against every ISA build and run at every VLEN
(``runs``), the issue text with its verdict table (``issue``; the paragraphs every text shares: ``paragraphs``;
a reproducer where no public op reaches the code: ``direct``, SpacemiT's functions called through the backend's
headers: ``spacemit_direct``; the runs kept beside each text, naming no path of
the machine: ``record``; what no text may say: ``wording``; the llama.cpp issues and pull requests the texts cite,
as read in the tracker: ``references``), the stock toolchain's commands that
build ggml and link such a program (``stock``: Debian's clang-22 or rvvdiff's zig, ggml's own
CMake), the fixes as pull-request series, one stack, written as ``git format-patch`` writes them by the person who
runs rvvdiff (``fix_series``, ``formatpatch``; their descriptions and index: ``series_pages``;
checked, run and written by ``series_runs``; their regression test as a maintainer runs it: ``testcmd``; and off
RISC-V, on x86-64 and aarch64: ``other_arch``)
and ggml's own tests patched to catch the findings (``ggml_own_tests``).  The programs run under the
emulators of :mod:`harness.emulators`; the ``rvvdiff report --upstream``, ``series`` and ``ggml-tests``
subcommands are in :mod:`harness.commands`.
"""
