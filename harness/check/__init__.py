"""Comparing a kernel's outputs with an oracle's (bitwise, within a derived bound, within ULPs) and
recording what a test observed, for its report."""
