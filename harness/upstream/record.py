"""The runs behind an issue text, kept beside it (``docs/upstream/<finding>/runs.json``) so that
``rvvdiff report --rerender`` writes the text again on any checkout, without building or running.

:func:`dump` and :func:`load` write and read the record: the verdicts (each tree, compiler, ISA build, VLEN, tail/mask
mode and emulator, with the program's output), the stock commands' runs, the program's description and the issue's
other inputs (cause, impact, fix, trap, recorded target); the tree is the pinned one, read when the text is rendered.
A record names the machine it was made on nowhere (:func:`unlocal`): trees by label and commit, no cache path, no
log file.
:func:`from_text` reads such a record back from an issue text that was written before records were kept (its
verdict table, its notes, its output and stock-run lines), for a text whose runs are kept nowhere else.
"""

from __future__ import annotations

import dataclasses
import json
import re
import types
from pathlib import Path
from typing import Any

from harness.core.config import VLENS, cache_dir
from harness.core.matrix import Point
from harness.upstream import stock
from harness.upstream.runs import Verdict

RECORD = "runs.json"
_LABELS = {v: k for k, v in stock.LABELS.items()}


#: A path into rvvdiff's cache on some machine (any home, ``~``, or the cache directory of this run: :func:`unlocal`).
_CACHED = re.compile(r"(?:~|(?:/[\w.+-]+)*)/\.cache/rvvdiff/([\w./+-]*[\w+-])")
#: How a record names what a cache path held: a pinned tree, a tree with a fix, or else the path inside the cache.
_NAMES = ((re.compile(r"^src/llama\.cpp-(\w+)$"), r"llama.cpp \1"), (re.compile(r"^fixes/.+$"), "the tree with the fix"),
          (re.compile(r"^(.+)$"), r"the cache's \1"))


def _named(m: re.Match[str]) -> str:
    """What the cache path of ``m`` held, by :data:`_NAMES`."""
    return next(rx.sub(to, m.group(1)) for rx, to in _NAMES if rx.match(m.group(1)))


def unlocal(value: Any) -> Any:
    """``value`` (a record, or any of its strings, lists and dicts) without the machine it was made on: the log files
    a message points at dropped, each tree in the cache named by its commit (``ggml 0.25.3 at /root/.cache/rvvdiff/
    src/llama.cpp-0c1e570`` -> ``ggml 0.25.3 (llama.cpp 0c1e570)``), a fixed tree as such, other cache paths relative
    to the cache; the ``root`` of a tree (a dict with a ``label``) left out."""
    if isinstance(value, dict):
        return {k: unlocal(v) for k, v in value.items() if k != "root" or "label" not in value}
    if isinstance(value, list):
        return [unlocal(v) for v in value]
    if not isinstance(value, str):
        return value
    text = value.replace(f"{cache_dir()}/", "~/.cache/rvvdiff/")
    text = re.sub(r"; log " + _CACHED.pattern, "", text)
    text = re.sub(r" at " + _CACHED.pattern, lambda m: f" ({_named(m)})", text)
    return _CACHED.sub(_named, text)


def dump(out: Path, data: dict, pub, program: str, verdicts: list[Verdict], kwargs: dict) -> Path:
    """Write ``out/runs.json``: what :func:`harness.upstream.issue.issue` needs besides the tree (the recorded target
    as its stress mode, ``vlen_example`` and ``isa_example``), without the machine's paths (:func:`unlocal`)."""
    kw = {k: v for k, v in kwargs.items() if k not in ("tree", "enable", "stock_runs", "recorded")}
    at = kwargs["recorded"]
    rec = {"data": {k: data[k] for k in ("ggml", "comparison", "target") if k in data},
           "pub": {k: getattr(pub, k) for k in ("function", "what", "inputs", "signal") if hasattr(pub, k)},
           "verdicts": [dataclasses.asdict(v) for v in verdicts],
           "stock_runs": [dataclasses.asdict(v) for v in kwargs.get("stock_runs", ())],
           "kwargs": {"stress": at.stress, "vlen_example": at.vlen, **kw, "isa_example": at.isa.name}}
    path = out / RECORD
    path.write_text(json.dumps(unlocal(rec), indent=1, ensure_ascii=False) + "\n")
    return path


def load(out: Path, tree) -> tuple[types.SimpleNamespace, types.SimpleNamespace, str, list[Verdict], dict]:
    """(case, pub, program, verdicts, kwargs) of ``out/runs.json`` for :func:`harness.upstream.issue.issue`."""
    rec = json.loads((out / RECORD).read_text())
    kw = dict(rec["kwargs"])
    kw["recorded"] = Point(kw.pop("vlen_example"), kw.pop("isa_example"), kw.pop("stress"))
    kw["stock_runs"] = [Verdict(**v) for v in rec["stock_runs"]]
    enable = out / "enable.patch"
    kw["enable"] = enable.read_text() if enable.is_file() else ""
    kw["tree"] = tree
    prog = out / "repro.c"
    return (types.SimpleNamespace(data=rec["data"]), types.SimpleNamespace(**rec["pub"]),
            prog.read_text() if prog.is_file() else "", [Verdict(**v) for v in rec["verdicts"]], kw)


def _para(text: str, label: str) -> str:
    m = re.search(rf"^\*\*{re.escape(label)}\.\*\* (.+)$", text, re.M)
    return m.group(1).strip() if m else ""


def from_text(text: str) -> dict:
    """The record of an issue text written by the generator before records were kept (the table rows and their
    notes, the output and stock-run lines, the program's description, cause and impact), as :func:`dump` writes it."""
    lines = text.splitlines()
    title = lines[0].removeprefix("### ")
    stress = title.endswith(", when tail-agnostic elements are written with ones") or ", when tail-agnostic elements" \
        in title
    trap = ": traps at " in title
    tree_ln = next(ln for ln in lines if ln.startswith("Tree: "))
    m = re.match(r"Tree: (.+), commit (\w+)\. The program: (.+) \(ggml's public API only\):$", tree_ln)
    what, _, inputs = m.group(3).rpartition(", with ")
    rows = [ln for ln in lines if ln.startswith("| ")]
    head = [c.strip() for c in rows[0].strip("|").split("|")]
    vlens = [int(c.split()[1]) for c in head[3:]]
    notes = lines[lines.index(rows[-1]) + 1:]
    unbuilt = {(u.group(1), u.group(2)): u.group(3) for ln in notes
               if (u := re.match(r"(\S+(?: 14)?) cannot build (\w+): (.+)$", ln))}
    why_not_run = next((ln.removeprefix("not run: ") for ln in notes if ln.startswith("not run: ")), "")
    spike_rows = any(" (spike)" in r for r in rows)
    out_m = re.search(r"Output at VLEN (\d+), (\w+) build: `([^`]*)`", text)
    verdicts = []
    for r in rows[1:]:
        cells = [c.strip() for c in r.strip("|").split("|")]
        tree, emu = (cells[0].split(" (")[0], "spike") if "(spike)" in cells[0] else (cells[0], "qemu")
        cc_word, _, with_stress = cells[1].partition(", ")
        cc = _LABELS.get(cc_word, cc_word)
        st = (not stress) if with_stress else stress
        for isa in [b.strip() for b in cells[2].split(",")]:
            for vl, cell in zip(vlens, cells[3:]):
                e = emu if spike_rows else ("spike" if vl not in VLENS else "qemu")
                if cell == "not built":
                    verdicts.append(Verdict(tree, isa, vl, None, "not built: " + unbuilt.get((cc_word, isa), ""), e, cc, st))
                elif cell == "not run":
                    if not spike_rows and why_not_run and e == "spike":
                        verdicts.append(Verdict(tree, isa, vl, None, why_not_run, e, cc, st))
                elif cell in ("wrong", "trap", "ok", "runs"):
                    out = ""
                    if out_m and cell in ("wrong", "trap") and int(out_m.group(1)) == vl and out_m.group(2) == isa:
                        out = out_m.group(3).replace(" / ", "\n")
                    verdicts.append(Verdict(tree, isa, vl, cell in ("wrong", "trap"), out, e, cc, st))
    stock_runs = []
    sm = re.search(r"These commands, run here: (.+?)\. (?:Output at|Run here)", text)
    for one in re.finditer(r"(clang|GCC 14), (\w+) tree(, with stress)? (wrong|right|trap|no trap|not run)"
                           r"(?: \(`([^`]*)`\)| \(([^)]*)\))?", sm.group(1) if sm else ""):
        failing = {"wrong": True, "trap": True, "right": False, "no trap": False, "not run": None}[one.group(4)]
        said = (one.group(5) or "").replace(" / ", "\n") if one.group(5) is not None else (one.group(6) or "")
        stock_runs.append({"tree": one.group(2), "compiler": _LABELS.get(one.group(1), one.group(1)),
                           "failing": failing, "text": said, "stress": stress != bool(one.group(3))})
    block = text.split("```sh", 1)[1].split("```", 1)[0] if "```sh" in text else ""
    vm = re.search(r"vlen=(\d+)", block)
    cause = _para(text, "What goes wrong")
    for tail in (" It depends on what the hart writes", " The program stops with a trap"):
        cause = cause.split(tail)[0]
    return {"title": title, "ggml": {"label": m.group(1), "commit": m.group(2)}, "what": what, "inputs": inputs,
            "function": title.split(" (RISC-V")[0], "stress": stress, "trap": trap, "verdicts": verdicts,
            "stock_runs": stock_runs, "vlen_example": int(vm.group(1)) if vm else 512,
            "isa_example": ("zvfbfwma" if "-DGGML_RV_ZVFBFWMA=ON" in block else "zvfh" if "-DGGML_RV_ZVFH=ON" in block
                            else "v"), "cause": cause, "impact": _para(text, "Who hits it")}


def bootstrap(out: Path, fix: str, cause: str = "", impact: str = "") -> Path:
    """``out/runs.json`` made from ``out/issue.md`` (:func:`from_text`); the stock runs placed where the issue's
    commands ran them (:func:`harness.upstream.issue.example`)."""
    from harness.upstream.issue import example

    got = from_text((out / "issue.md").read_text())
    recorded = Point(got["vlen_example"], got["isa_example"], got["stress"])
    runs = []
    for s in got["stock_runs"]:
        at = example(got["verdicts"], dataclasses.replace(recorded, compiler=s["compiler"]))
        runs.append(Verdict.of(s["tree"], at, s["failing"], s["text"]))
    data = {"ggml": got["ggml"], "comparison": {"name": "C"}}
    pub = types.SimpleNamespace(function=got["function"], what=got["what"], inputs=got["inputs"])
    kwargs = dict(recorded=recorded, stock_runs=runs, cause=cause or got["cause"], impact=impact or got["impact"],
                  fix=fix, trap=got["trap"])
    return dump(out, data, pub, "", got["verdicts"], kwargs)
