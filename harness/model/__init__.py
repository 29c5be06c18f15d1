"""A real model under llama.cpp's own tools: the GGUF files (fetched once, sha256-pinned, or a user's own),
what a file holds, llama.cpp's tools built from the tree under test (riscv64 under the emulator, and the
host's build), their runs on a fixed text and what ``llama-perplexity --kl-divergence`` reports about them,
the requantized and synthetic models that reach every type."""
