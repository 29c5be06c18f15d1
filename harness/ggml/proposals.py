"""Proposals for ggml: changes rvvdiff verifies before a person sends them (``harness/data/proposals/*.patch``).

A proposal is no fix of a finding (those are ``harness/data/fixes/``, verified by the PR gate against a finding's
tests): it adds something the tree lacks, and what verifies it is named by its header.  The file is a
:class:`harness.ggml.patches.Patch`: ``key: value`` lines, then a unified diff with llama.cpp paths.  Its header:

``rvvdiff proposal``
    the title;
``text``
    the upstream text it belongs to (``docs/upstream/proposals/<name>.md``), which carries the patch and the
    figures that verify it;
``variants``
    for a proposal to the distribution's build: the riscv64 CPU variants the patched tree declares, in order
    (harness/toolchain/dispatch_build.py's ``tree_variants`` reads them);
``isa``
    the ISA build of the kernel families that tests the proposal's new code (``--isa``, harness/core/matrix.py);
``why``
    one sentence.

The patched tree is made like a mutant's or a fix's (a hard-linked copy, the patched files replaced, once per patch
and source content: :func:`harness.ggml.patches.apply`); ``rvvdiff proposal NAME`` prints its path for
``--ggml-src`` (docs/dispatch.md).
"""

from __future__ import annotations

from harness.core.config import DATA_DIR
from harness.ggml import patches
from harness.ggml.source import GgmlSource

PROPOSALS_DIR = DATA_DIR / "proposals"


class Proposal(patches.Patch):
    @property
    def title(self) -> str:
        return self.meta.get("rvvdiff proposal", self.name)

    @property
    def text_path(self) -> str:
        """The upstream text the proposal belongs to, relative to the repository (header ``text``)."""
        return self.meta.get("text", "").strip()

    @property
    def variants(self) -> tuple[str, ...]:
        """The riscv64 CPU variants the patched tree declares, in order (header ``variants``)."""
        return tuple(v.strip() for v in self.meta.get("variants", "").split(",") if v.strip())

    @property
    def isa(self) -> str:
        """The ISA build that tests the proposal's new code (header ``isa``); empty: none."""
        return self.meta.get("isa", "").strip()


def catalogue() -> dict[str, Proposal]:
    return patches.catalogue(PROPOSALS_DIR, Proposal)  # type: ignore[return-value]


def get(name: str) -> Proposal:
    return patches.named(PROPOSALS_DIR, [name], "proposal", Proposal)[0]  # type: ignore[return-value]


def apply(proposal: Proposal, source: GgmlSource) -> GgmlSource:
    """The tree of ``source`` with ``proposal`` applied (made once, then reused)."""
    return patches.apply([proposal], source, "proposal")
