"""The bottom layer: what every other package reads (VLENs, ISA builds, paths, the cache, the test
matrix and its options, the ``RVVDIFF_*`` settings, the error root), running subprocesses, and the one suite runner (``runner``: a
child pytest run of rvvdiff's tests and the results it leaves).  Imports nothing else of rvvdiff."""
