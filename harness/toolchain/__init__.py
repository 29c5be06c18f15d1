"""Building a ggml tree for riscv64: the cross compiler, the CMake build of each ISA build, the kernel
server and its generated bindings.  Knows nothing of emulators or pytest."""
