"""The model family's table in a run's summary: type x path x target, with the figures llama-perplexity's
``--kl-divergence`` gave and the verdict.

The model tests (cases/test_model.py) put their figures into their reports (``rvvdiff.model_*``, moved into
``results.json`` without the prefix): mean KLD, the same-top-token share, the 99.9th percentile of the KLD
(only from 100 scored positions: ``--thorough``'s shape), the perplexity ratio and the tool's tokens per
second under the emulator.  A test that did not run says why (skipped: the model never reaches the type or
path; a known failure; a failure).
"""

from __future__ import annotations

from typing import Any

#: The figures a model test records, in the table's order, each with its column head and format.
FIGURES = (("model_top", "same top %", "{:.1f}"), ("model_kld", "mean KLD", "{:.3g}"),
           ("model_kld999", "99.9% KLD", "{:.3g}"), ("model_ppl_ratio", "PPL ratio", "{:.3f}"),
           ("model_tps", "tokens/s", "{:.2f}"))

_VERDICT = {"passed": "within the bound", "failed": "FAILS the bound", "xfailed": "known failure",
            "xpassed": "known failure passes", "skipped": "not run", "error": "ERROR"}


def _is_model(nodeid: str) -> bool:
    return "::test_model[" in nodeid or "::test_model_host[" in nodeid


def rows(results: list[dict[str, Any]]) -> list[tuple[str, str, list[str], str]]:
    """One row per model test: (type and path, target, formatted figures, verdict with its reason)."""
    out = []
    for r in results:
        if not _is_model(r["nodeid"]):
            continue
        param = r["nodeid"].split("[", 1)[1].rstrip("]")
        target = param[param.index("-vlen") + 1:] if "-vlen" in param else ""
        case = param[: param.index("-vlen")] if "-vlen" in param else param
        if "::test_model_host[" in r["nodeid"]:
            case, target = "host build (second opinion)", target or param
        figures = [fmt.format(r[key]) if isinstance(r.get(key), (int, float)) else "" for key, _, fmt in FIGURES]
        verdict = _VERDICT.get(r["outcome"], r["outcome"])
        if r["outcome"] != "passed" and r.get("reason"):
            verdict += f": {str(r['reason'])[:160]}"
        out.append((case, target, figures, verdict))
    return sorted(out, key=lambda row: (row[0], row[1]))


def markdown(results: list[dict[str, Any]]) -> list[str]:
    """The section for summary.md (none when no model test ran)."""
    rs = rows(results)
    if not rs:
        return []
    head = ["type and path", "target", *[h for _, h, _ in FIGURES], "verdict"]
    md = ["", "## The model family", "",
          "llama-perplexity of the tree under test against the generic riscv64 build's logits (docs/model.md).", "",
          "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    md += [f"| `{case}` | {target} | " + " | ".join(figs) + f" | {verdict} |" for case, target, figs, verdict in rs]
    return md
