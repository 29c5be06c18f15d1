"""The oracles: what each kernel should compute, in pure NumPy / ml_dtypes (float64 references,
ggml's data formats decoded and encoded, the error bounds derived for each kernel).  Imports
nothing of the harness."""
