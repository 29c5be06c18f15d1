"""Reading a ggml tree without compiling it: where the source comes from (pinned sdist, path, git
revision), the C reader (preprocessor, functions, fingerprints), what the tree has, what changed
between two trees, patches and planted mutants, and the known failures that apply to it."""
