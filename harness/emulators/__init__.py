"""Running kernel servers: the emulator interface with QEMU and Spike behind it, the frame protocol,
the pool of live servers (restarts, timeouts, crashes) and execution traces."""
