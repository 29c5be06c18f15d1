"""The model family's runs: llama.cpp's ``llama-perplexity`` of the tree under test, built for a riscv64
target and run under the run's emulator, held against the reference's logits.

The reference is the same tree built for riscv64 without V (``rv64gc``: ggml's generic C) by the same
compiler, run under the same emulator: the differential pair that isolates the RVV kernels.  Under clang the
trees of this era need ``-U__riscv_v_intrinsic`` for it (llama.cpp #22159; harness/model/tools.py).  The
host's own build is the second opinion on that reference (:func:`host_against_reference`), the no-V build
as the tree is (no workaround) is what a board without V compiles (:func:`novector_build`), and two
compilers' references against each other are part of the noise the bound is derived from
(:func:`generic_against_generic`).

At a dispatch variant's ISA build (``riscv64_v``) the tools are a distribution's build (shared libraries, every CPU
variant, one loaded by score: harness/model/tools.py's ``dispatch_tools``), run against the GCC 14 root's C library;
which variant ggml loaded is read from its log, and a run that loaded another than the build's (or none) fails with
:class:`WrongVariant` before its figures are judged: they would be another build's.
"""

from __future__ import annotations

from pathlib import Path

from harness.core.config import NOVECTOR
from harness.core.errors import RvvdiffError
from harness.ggml.source import GgmlSource
from harness.model import gguf_file
from harness.model.machine import HOST, Machine
from harness.model.model_files import host
from harness.model.perplexity import LOG_LOADS, Kld, Shape, measure
from harness.model.reference import Reference, reference
from harness.model.tools import Tools, riscv_tools


class WrongVariant(RvvdiffError):
    """A dispatch build's run loaded another CPU variant than the target's (or none): its figures are not the
    variant's."""


def _expect_variant(k: Kld, tools: Tools, on: Machine) -> None:
    """:class:`WrongVariant` unless the run ``k`` of ``tools`` (a dispatch build) loaded ``tools.variant``."""
    if not tools.variant or k.loaded_variant == tools.variant:
        return
    got = (f"ggml loaded {k.loaded} (variant {k.loaded_variant})" if k.loaded else
           "ggml loaded no CPU backend library (no 'loaded CPU backend from' line in its log)")
    raise WrongVariant(
        f"{got}, where the {on.isa.name} target {on.describe()} must load libggml-cpu-{tools.variant}.so of "
        f"{tools.dir / 'bin'}: the run's figures would be another build's, so they are not judged ({k.line()}); "
        f"replay: {' '.join(k.argv)}")


def reference_tools(source: GgmlSource, compiler: str) -> Tools:
    """The reference build of ``source`` by ``compiler``: rv64gc, with ``-U__riscv_v_intrinsic`` under clang."""
    return riscv_tools(source, NOVECTOR, compiler, workaround=compiler != "gcc14")


def reference_for(source: GgmlSource, model: Path, shape: Shape, on: Machine) -> Reference:
    """The reference logits of ``model`` at ``shape``: ``source``'s reference build by ``on``'s compiler, run
    under ``on``'s emulator (made once, kept in the cache)."""
    return reference(reference_tools(source, on.compiler), on.reference(), model, shape)


def check(source: GgmlSource, model: Path, on: Machine, shape: Shape, *, label: str, timeout: float = 3600,
          reference_source: GgmlSource | None = None) -> Kld:
    """``llama-perplexity`` of ``source``'s tools for ``on`` on ``model`` (called ``label`` in messages), at
    ``shape`` (its threads and repacking too), against the reference's logits: the no-V build of
    ``reference_source`` (default ``source``: a fixed tree is held against its own tree's generic C), which
    should also have made ``model``, so that a tree and its fixed copy run the same file.  The caller judges
    the figures against the family's bound."""
    gguf_file.check_against_tree(gguf_file.read(model), source.root, source.ggml / "include" / "ggml.h")
    ref = reference_for(reference_source or source, model, shape, on)
    tools = riscv_tools(source, on.isa, on.compiler)
    on = on.with_runtime(tools.runtime)
    k = measure(on, tools.tool("llama-perplexity"), model, shape, ref.path, timeout=timeout,
                what=f"llama-perplexity ({tools.describe()}) on {label}", extra=LOG_LOADS if tools.variant else ())
    _expect_variant(k, tools, on)
    return k


def novector_build(source: GgmlSource, compiler: str) -> Tools:
    """ggml of ``source`` built for rv64gc by ``compiler`` as the tree is (no workaround): what a board without
    V builds.  Under clang the trees of this era fail here (llama.cpp #22159)."""
    return riscv_tools(source, NOVECTOR, compiler, workaround=False, targets=("ggml-cpu",))


def host_against_reference(source: GgmlSource, model: Path, shape: Shape, on: Machine, *, label: str) -> Kld:
    """The second opinion: the host's own build of ``source`` against the riscv64 reference's logits (run
    natively, on two threads: seconds)."""
    ref = reference_for(source, model, shape, on)
    return measure(HOST, host(source).tool("llama-perplexity"), model, Shape(shape.ctx, shape.chunks, 2), ref.path,
                   timeout=1800, what=f"the host's llama-perplexity on {label}")


def generic_against_generic(source: GgmlSource, model: Path, shape: Shape, on: Machine, other: str, *,
                            label: str) -> Kld:
    """Compiler ``other``'s reference build held against ``on``'s compiler's reference (both ggml's generic C,
    under ``on``'s emulator)."""
    ref = reference_for(source, model, shape, on)
    tools = reference_tools(source, other)
    return measure(on.reference(), tools.tool("llama-perplexity"), model, shape, ref.path, timeout=3600,
                   what=f"llama-perplexity ({tools.describe()}) on {label}")
