"""The model family's definition: real GGUF models run by llama.cpp's own ``llama-perplexity``, built from
the tree under test for riscv64 and run under the emulator, held against a reference by the KL divergence
of their logits.  This module holds the family's tables (the types, the cases, the paths, the run shapes,
the bound and which runs are worth making); the runs are harness/model's (``model_runs``, ``model_files``,
``machine``), the tests cases/test_model.py.

What a kernel family cannot see, this family sees: llama.cpp's graph and scheduler at a real model's shapes,
the ops between the kernels, the CPU_REPACK choice as llama.cpp makes it when it loads the weights, threads,
and the mix of tensor types of a real quantized file.

* **Models.** SmolLM2-135M-Instruct as shipped (Q4_1; harness/model/catalogue.py), and requantized by the
  host's ``llama-quantize`` to every type with an RVV vec_dot or repacked GEMM (``TYPES``).  SmolLM2's rows
  of 576 are not a multiple of 256, so a K- or i-quant takes only its ffn_down tensors (rows of 1536); the
  synthetic model (harness/model/synth.py: SmolLM2's own weights cut to hidden 512, FFN 1536) takes them
  on every tensor.
* **Reference.** The same tree built for riscv64 without V (``rv64gc``: ggml's generic C) by the same
  compiler, run under the emulator: the differential pair that isolates the RVV kernels.  Under clang the
  trees of this era need ``-U__riscv_v_intrinsic`` for it (llama.cpp #22159; harness/model/tools.py).
  The host's own build is the second opinion (``test_model_host``).
* **Verdict.** ``llama-perplexity --kl-divergence`` against the reference's logits: mean KLD, its 99.9th
  percentile, the share of positions with the same top token, the perplexity ratio; the bound (``BOUND``)
  and its derivation are below.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from cases.spacemit_tree import before_rewrite
from harness.core.config import IsaBuild
from harness.ggml.source import GgmlSource
from harness.model import gguf_file, model_files
from harness.model.perplexity import FUSION_OFF, Kld, Shape

# ------------------------------------------------------------------ the types


@dataclass(frozen=True)
class ModelType:
    """One type a model file is made in, and what RVV code it reaches."""

    #: The id part (ggml's spelling, lower case) and llama-quantize's type argument (None: as shipped).
    name: str
    quantize: str | None
    #: The base models it is made from: ``smollm2`` (the real model) and ``synth`` (rows a multiple of 256).
    bases: tuple[str, ...]
    #: The ggml type whose kernels it is for (the vec_dot / repack name), when not ``name``.
    ggml: str | None = None
    #: An importance matrix is needed (llama-quantize refuses the type without one) or helps.
    imatrix: bool = False
    #: The ISA builds whose kernels for the type differ (bf16's vector dot exists only in zvfbfwma).
    isas: tuple[str, ...] = ("v", "zvfh")

    @property
    def kernel_type(self) -> str:
        return self.ggml or self.name


#: The bases a type is made from: SmolLM2 (``REAL``), the model cut from it (``CUT``), or both.
REAL = ("smollm2",)
CUT = ("synth",)
REAL_AND_CUT = REAL + CUT

TYPES: tuple[ModelType, ...] = (
    ModelType("q4_1", None, REAL),  # the file as shipped
    ModelType("q4_0", "Q4_0", REAL),
    ModelType("q5_0", "Q5_0", REAL),
    ModelType("q5_1", "Q5_1", REAL),
    ModelType("q8_0", "Q8_0", REAL),
    ModelType("iq4_nl", "IQ4_NL", REAL, imatrix=True),
    ModelType("mxfp4", "MXFP4_MOE", REAL),
    ModelType("f16", "F16", REAL),
    ModelType("bf16", "BF16", REAL, isas=("v", "zvfh", "zvfbfwma")),
    ModelType("f32", "F32", REAL),
    ModelType("q2_k", "Q2_K", REAL_AND_CUT, ggml="q2_K"),
    ModelType("q3_k", "Q3_K_M", REAL_AND_CUT, ggml="q3_K"),
    ModelType("q4_k", "Q4_K_M", REAL_AND_CUT, ggml="q4_K"),
    ModelType("q5_k", "Q5_K_M", REAL_AND_CUT, ggml="q5_K"),
    ModelType("q6_k", "Q6_K", REAL_AND_CUT, ggml="q6_K"),
    ModelType("iq4_xs", "IQ4_XS", REAL_AND_CUT, imatrix=True),
    ModelType("iq3_s", "IQ3_S", REAL_AND_CUT, imatrix=True),
    ModelType("iq3_xxs", "IQ3_XXS", REAL_AND_CUT, imatrix=True),
    # llama-quantize's IQ2_S mix makes IQ2_XS tensors (its default type); IQ2_M's default type is IQ2_S.
    ModelType("iq2_s", "IQ2_M", REAL_AND_CUT, imatrix=True),
    ModelType("iq2_xs", "IQ2_XS", REAL_AND_CUT, imatrix=True),
    ModelType("iq2_xxs", "IQ2_XXS", REAL_AND_CUT, imatrix=True),
    ModelType("iq1_s", "IQ1_S", REAL_AND_CUT, imatrix=True),
    ModelType("iq1_m", "IQ1_M", REAL_AND_CUT, imatrix=True),
    ModelType("q1_0", "Q1_0", CUT),  # blocks of 128: SmolLM2's rows of 576 fall back
    ModelType("tq1_0", "TQ1_0", CUT),
    ModelType("tq2_0", "TQ2_0", CUT),
)

BY_NAME = {t.name: t for t in TYPES}

#: Kernels with an RVV path that no model file of this family exercises as weights, and why.
UNREACHED: dict[str, str] = {
    "q8_1 / q8_K activations": "activations, not weights: every quantized model above quantizes them (q8_1 for "
                               "q4_1 / q5_1, q8_K for the K- and i-quants and tq*, q8_0 for the rest)",
}


@dataclass(frozen=True)
class Case:
    """One model file: a base model in a type."""

    base: str
    type: ModelType
    #: The user's file (``--gguf``, base ``gguf``); None: the base is one rvvdiff makes.
    gguf: Path | None = None

    @property
    def id(self) -> str:
        return f"{self.base}-{self.type.name}"

    def file(self, source: GgmlSource) -> Path:
        """The case's model file: its base as it is or requantized by the host's tools of ``source``
        (harness/model/model_files.py)."""
        base = self.gguf or model_files.base_model(self.base)
        return model_files.model_file(source, base, self.type.quantize, self.type.imatrix)


CASES: tuple[Case, ...] = tuple(Case(b, t) for t in TYPES for b in t.bases)


def user_case(gguf: Path) -> Case:
    """``--gguf PATH``: the user's file as it is, named by its commonest weight type; refused (one line naming
    the file) when it is not a whole GGUF."""
    info = gguf_file.read(gguf)
    weights = [t.type for t in info.tensors if len(t.shape) == 2 and t.type not in ("f32",)] or ["f32"]
    main = max(set(weights), key=weights.count)
    kind = ModelType(main, None, ("gguf",), ggml=model_files.ggml_spelling(main), isas=("v", "zvfh", "zvfbfwma"))
    return Case("gguf", kind, gguf)

# ------------------------------------------------------------------ paths


@dataclass(frozen=True)
class RunPath:
    """How llama.cpp runs the model: weights repacked or not (``-nr``), on how many threads, with ggml-cpu's
    graph fusion or without it (``GGML_CPU_DISABLE_FUSION=1``)."""

    repack: bool = True
    threads: int = 1
    fuse: bool = True

    @property
    def id(self) -> str:
        return f"{'repack' if self.repack else 'norepack'}-t{self.threads}{'' if self.fuse else '-nofuse'}"

    def shape(self, base: Shape) -> Shape:
        """A run shape (:data:`SHAPE`, :data:`SHAPE_THOROUGH`) run this way."""
        return Shape(base.ctx, base.chunks, self.threads, self.repack, self.fuse)


#: The paths.  Fusion off is for builds whose backend claims an op ggml-cpu fuses first: ggml-cpu computes RMS_NORM
#: followed by MUL as one fused op (``ggml_cpu_try_fuse_ops``, ggml-cpu.c) before it asks an extra buffer type for
#: the op, so in llama.cpp's graph (every RMS norm is followed by its weight's MUL) SpacemiT's forward_rms_norm_f32
#: runs only with fusion off -- as on every tree without fusion, and where a user sets the variable.
PATHS = (RunPath(True, 1), RunPath(False, 1), RunPath(True, 4), RunPath(True, 1, fuse=False))

#: What ggml-cpu's source holds where it can turn its graph fusion off (trees without it fuse nothing).
FUSION_SWITCH = FUSION_OFF[0]


def _fusion_repeated(isa: IsaBuild) -> str | None:
    """Why the fusion-off path is not run at ``isa`` whatever the tree, or None (known before the model is made)."""
    if isa.backend == "spacemit":
        return None
    return (f"fusion off is run at the spacemit build only, whose backend claims RMS_NORM, which ggml-cpu fuses "
            f"with the next MUL before asking it; in the {isa.name} build both ways are ggml-cpu's own RMS_NORM "
            f"code (ops.cpp), whose vector part (ggml_vec_scale_f32) the vector-ops family tests")


def _fusion_absent(source: GgmlSource) -> str | None:
    """Why the fusion-off path would repeat the fusion-on run on ``source`` (a tree without fusion), or None."""
    cpu = source.ggml / "src" / "ggml-cpu" / "ggml-cpu.c"
    return _fusion_absent_in(cpu, cpu.stat().st_mtime_ns if cpu.is_file() else 0)


@functools.lru_cache(maxsize=8)
def _fusion_absent_in(cpu: Path, mtime_ns: int) -> str | None:
    """:func:`_fusion_absent` of one ggml-cpu.c, read once per content change (every model test asks)."""
    text = cpu.read_text(errors="replace") if mtime_ns else ""
    if not text or FUSION_SWITCH in text:
        return None
    if "_fused(" in text:
        return (f"this tree's ggml-cpu fuses ops with no switch to turn it off ({FUSION_SWITCH} is not in {cpu.name}): "
                f"no run of llama.cpp on it reaches an op ggml-cpu fuses first (SpacemiT's RMS_NORM)")
    return (f"this tree's ggml-cpu fuses no op ({FUSION_SWITCH} is not in {cpu.name}): its fusion-on run already "
            f"computes every op one by one, SpacemiT's RMS_NORM included")

# ------------------------------------------------------------------ run shapes

#: The main job's run: 2 chunks of 16 tokens, 7 positions of each scored (14: llama-perplexity gives the
#: running mean KLD, same-top share and perplexity ratio; its percentiles need 100 positions).  SmolLM2
#: under QEMU runs at the rates docs/model.md gives; the main job's budget allows this much.
SHAPE = Shape(ctx=16, chunks=2)
#: ``--thorough``: 4 chunks of 52 tokens, 100 positions scored: every statistic, the 99.9th percentile too.
SHAPE_THOROUGH = Shape(ctx=52, chunks=4)

# ------------------------------------------------------------------ the bound


@dataclass(frozen=True)
class Bound:
    mean_kld: float
    #: Judged where llama-perplexity prints it (from 100 scored positions: --thorough's shape).
    kld_999: float
    same_top: float  # percent, at least

    def violations(self, k: Kld) -> list[str]:
        out = []
        if not k.mean_kld <= self.mean_kld:
            out.append(f"mean KLD {k.mean_kld:.3g} > {self.mean_kld:g}")
        if k.kld_999 is not None and not k.kld_999 <= self.kld_999:
            out.append(f"99.9% KLD {k.kld_999:.3g} > {self.kld_999:g}")
        if not k.same_top >= self.same_top:
            out.append(f"same top token {k.same_top:.2f} % < {self.same_top:g} %")
        return out


#: The pass bound, derived from the noise between correct builds (docs/model.md, "The bound", has every
#: figure and its command).  Measured on SmolLM2 Q4_1 at the main job's shape (14 scored positions), the
#: pinned tree, 2026-11-27: the host's x86-64 build (AVX2, GCC 12) against clang's generic riscv64 build,
#: mean KLD 0.0185, same top token 92.9 %; clang's RVV build at VLEN 128 against the generic one, 0.0255,
#: 92.9 %; the RVV build against the host's, 0.0096, 85.7 %; the i-quant file (iq2_xxs requantized) at VLEN
#: 256 against its generic run, 0.0228, 92.9 %; and the largest, the host's build with an F32 KV cache and
#: no flash attention against the generic build run the same way, 0.041, 92.9 %.  This model is that
#: sensitive: the host's own build with flash attention on and off differs by 0.033.  At --thorough's shape
#: (100 positions) the host against clang's generic build: mean KLD 0.0099, 99.9th percentile 0.115, same
#: top token 95 %.  GCC 14's generic build against clang's: 0.0047, 100 %; GCC 14's RVV build at VLEN 128
#: against its generic one: 0.0175, 92.9 % (rvvdiff model noise, 2026-11-28).  Correct builds differ
#: by at most NOISE_MEAN in mean KLD, NOISE_999 in the 99.9th percentile and NOISE_TOP positions of 14 in top
#: token; the bound allows five times the KLDs and twice the
#: top-token share lost.  A finding is far outside it: the iq2_xxs file at VLEN 512 gives a mean KLD of 13.1
#: and the same top token at no position (with its fix: 0.0175, 100 %).
NOISE_MEAN, NOISE_999, NOISE_TOP = 0.041, 0.115, 100.0 - 85.7
BOUND = Bound(mean_kld=5 * NOISE_MEAN, kld_999=5 * NOISE_999, same_top=100.0 - 2 * NOISE_TOP)


#: The cases the spacemit build (SpacemiT's backend, harness/core/config.py) runs, besides a user's ``--gguf``.
#: Under QEMU the build runs with the X60's core type: its IME paths are off, so every weight stays in the CPU
#: buffer and MUL_MAT is ggml-cpu's own RVV vec_dot, the zvfh build's kernel of each type (its -march adds only
#: zba, zicbop, zihintpause); what the build changes is the ops its extra buffer type takes for every graph,
#: whatever the weights (RMS_NORM, ADD, MUL, CPY, CONT, GET_ROWS, FLASH_ATTN_EXT ...: docs/spacemit.md), all on
#: f32 / f16 activations.  So one weight type reaches them as well as all: the model as shipped.
SPACEMIT_CASES = ("smollm2-q4_1",)


#: The cases a distribution's build (the ``riscv64_v`` variant, docs/dispatch.md) runs, besides a user's ``--gguf``.
#: The variant's code is the static ``v`` build's (the same ``-march`` extensions; the kernel families hold every
#: call on its library to the ``v`` build byte for byte), so another type would repeat the ``v`` build's runs of it;
#: what the build changes is around the kernels (shared libraries, the variant ggml loads by score, OpenMP's
#: threads on ``-t 4``), whatever the weights.  So the model as shipped, on every path.
DISPATCH_CASES = ("smollm2-q4_1",)


#: Why the repacking paths of the spacemit build cannot run on a tree whose backend has no core types.
IME_ON_EVERY_CORE = ("this tree's SpacemiT backend predates its core types (ime_env.cpp, 2026-05): its IME1 MUL_MAT "
                     "takes the q4_0 / q4_1 / q4_K weights in its buffer type on every core, and no emulator runs "
                     "llama.cpp's tools with IME (QEMU has none, Spike runs no Linux program); the run with -nr "
                     "(weights in the CPU buffer) reaches the backend's norms")


def repeated_in(isa: IsaBuild, case: Case, path: RunPath, source: GgmlSource | None = None) -> str | None:
    """Why a (case, path) would repeat another run in a build of SpacemiT's backend (:data:`SPACEMIT_CASES`) or a
    distribution's variant (:data:`DISPATCH_CASES`), or None; known before the model file is made (a requantized
    file costs the host's tools build).  ``source``: the tree, where its SpacemiT backend's era decides (a backend
    without core types runs only -nr under QEMU: :data:`IME_ON_EVERY_CORE`)."""
    why = None if path.fuse else _fusion_repeated(isa)
    if why:
        return why
    if isa.variant:
        if case.base == "gguf" or case.id in DISPATCH_CASES:
            return None
        return (f"the {isa.name} variant runs {', '.join(DISPATCH_CASES)} only: its {case.type.kernel_type} kernels are "
                f"the {isa.twin} build's code (held to it byte for byte by the kernel families), so a run would "
                f"repeat the {isa.twin} build's run of {case.id}")
    if isa.backend != "spacemit":
        return None
    if case.base != "gguf" and case.id not in SPACEMIT_CASES:
        return (f"the spacemit build runs {', '.join(SPACEMIT_CASES)} only: under QEMU (the X60's core type, IME off) "
                f"its MUL_MAT of {case.type.kernel_type} is ggml-cpu's RVV vec_dot, the zvfh build's runs of "
                f"{case.id}, and SpacemiT's ops act on the activations, whatever the weights' type")
    if before_rewrite(source):
        return IME_ON_EVERY_CORE if path.repack else None
    if not path.repack:
        return ("-nr would repeat the run with repacking in the spacemit build: its CPU_REPACK is off, and on the "
                "X60's core type SpacemiT's buffer type takes no weight (-nr leaves its ops on: ggml-cpu asks the "
                "extra buffer types for every op, not only for weights in their buffers)")
    return None


def unreached(source: GgmlSource, case: Case, path: RunPath, vlen: int, isa: IsaBuild, model: Path) -> str | None:
    """Why a (case, path) is not worth a run at this VLEN and build (it would repeat another run), or None."""
    why = None if path.fuse else _fusion_repeated(isa) or _fusion_absent(source)
    if why:
        return why
    if isa.backend == "spacemit":
        return repeated_in(isa, case, path, source)
    # A dispatch variant runs its static twin's code (riscv64_v: the v build's).
    code = isa.twin if isa.variant and isa.twin else isa.name
    if code not in case.type.isas:
        return f"{case.type.name} has no kernel of its own in the {isa.name} build (its runs: {', '.join(case.type.isas)})"
    info = gguf_file.read(model)
    kernel = case.type.kernel_type.lower()
    if case.type.quantize and kernel not in {t.lower() for t in info.types}:
        held = ", ".join(f"{n} {t}" for t, n in sorted(info.types.items(), key=lambda x: -x[1]))
        return (f"llama-quantize's {case.type.quantize} puts no tensor of {case.base} in {kernel} (it holds {held}): a run "
                f"would not reach the {kernel} kernels")
    if not path.repack and not model_files.repacked(source, info, vlen, bool(isa.qemu.get("zvfh"))):
        return (f"no weight of {case.id} is repacked at VLEN {vlen} in the {isa.name} build (ggml's selection, read "
                "from the tree, for each tensor's type and rows): -nr would repeat the run with repacking")
    return None
