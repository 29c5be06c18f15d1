"""The bottom layer: what every other package reads (VLENs, ISA builds, paths, the cache, the
``RVVDIFF_*`` settings, the error root) and running subprocesses.  Imports nothing else of rvvdiff."""
