"""A real model under llama.cpp's own tools: the GGUF files (fetched once, sha256-pinned, or a user's own),
what a file holds, the requantized and synthetic models that reach every type, llama.cpp's tools built from
the tree under test (riscv64, and the host's build), where they run (the host, or a riscv64 target under the
run's emulator, refused with the reason where the emulator cannot run them), what ``llama-perplexity
--kl-divergence`` reports, and the model family's runs: the tree under test against its no-V reference."""
