"""The cost suite: fixed, seeded calls of every kernel family at the sizes real models use, counted
under Spike (harness/cost/measure/spike_count.py).  ``rvvdiff cost`` runs it; docs/cost.md says how to read it."""
