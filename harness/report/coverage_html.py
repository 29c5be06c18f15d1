"""rvvdiff's own HTML view of RVV line coverage (no genhtml needed): ``index.html`` with the per-target
totals, the function matrix and one page per in-scope source file, where every executable line shows
at which targets (VLEN x ISA build x stress mode) it ran: ● ran, ○ executable there but not run,
blank: not in that target's build.  Written by harness/report/coverage.py."""

from __future__ import annotations

import html
from collections import defaultdict
from pathlib import Path

from harness.report.html import page

_STYLE = ("body{font:13px sans-serif}td,th{border:1px solid #bbb;padding:1px 5px}table{border-collapse:collapse}"
          "pre{margin:0}.src td{border:none;padding:0 4px;font:12px monospace;white-space:pre}"
          ".all{background:#cfc}.some{background:#ffd}.none{background:#fcc}.m{text-align:center;width:1em}")


def short(path: str) -> str:
    """A source path as shown: from ``ggml-cpu/`` on."""
    i = path.rfind("/ggml-cpu/")
    return path[i + 1:] if i >= 0 else path


def write_html(cov, out: Path, functions: dict[str, dict[str, tuple[int, int]]], totals: list[str]) -> list[Path]:
    """index.html and ``files/<name>.html`` per in-scope source file (``cov``: a
    :class:`harness.report.coverage.Coverage`; its function matrix and totals); the paths written."""
    cols = [t.target for t in cov.targets]
    # (path, line) -> {target: ran?}
    where: dict[str, dict[int, dict[str, bool]]] = defaultdict(lambda: defaultdict(dict))
    for t in cov.targets:
        ran = {(p, ln) for p, ln, _ in t.executed}
        for p, ln, _ in t.executable:
            where[p][ln][t.target] = (p, ln) in ran
    written = []
    files = {}
    for path in sorted(where):
        name = short(path).replace("/", "_") + ".html"
        files[path] = name
        target = out / "files" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(_file_page(path, where[path], cols))
        written.append(target)
    body = ["<h1>RVV line coverage</h1><ul>", *[f"<li>{html.escape(x)}</li>" for x in totals], "</ul>"]
    if cov.problems:
        body += ["<h2>Problems</h2><ul>", *[f"<li>{html.escape(p)}</li>" for p in cov.problems], "</ul>"]
    body.append("<h2>Source files</h2><table><tr><th>file</th><th>lines run somewhere / executable</th></tr>")
    for path, name in files.items():
        lines = where[path]
        ran = sum(1 for v in lines.values() if any(v.values()))
        body.append(f"<tr><td><a href='files/{name}'>{html.escape(short(path))}</a></td><td>{ran}/{len(lines)}</td></tr>")
    body.append("</table><h2>Per function: lines executed / executable</h2><table><tr><th>function</th>"
                + "".join(f"<th>{html.escape(c)}</th>" for c in cols) + "</tr>")
    for fn, cells in sorted(functions.items()):
        row = [f"<tr><td><code>{html.escape(fn[:120])}</code></td>"]
        for c in cols:
            if c not in cells:
                row.append("<td>-</td>")
                continue
            h, n = cells[c]
            cls = "all" if h == n else "some" if h else "none"
            row.append(f"<td class={cls}>{h}/{n}</td>")
        body.append("".join(row) + "</tr>")
    body.append("</table>")
    index = out / "index.html"
    index.write_text(page("rvvdiff RVV line coverage", _STYLE, body, sep="\n"))
    return [index, *written]


def _file_page(path: str, lines: dict[int, dict[str, bool]], cols: list[str]) -> str:
    try:
        text = Path(path).read_text(errors="replace").splitlines()
    except OSError:
        text = []
    n = max([len(text), *lines])
    head = ("<tr><th>line</th>" + "".join(f"<th class=m title='{html.escape(c)}'>{i + 1}</th>" for i, c in enumerate(cols))
            + "<th>source</th></tr>")
    legend = "<p>Columns: " + ", ".join(f"{i + 1} = {html.escape(c)}" for i, c in enumerate(cols)) + \
             ". ● ran, ○ executable there but not run, blank: not in that build.</p>"
    rows = []
    for ln in range(1, n + 1):
        src = html.escape(text[ln - 1]) if ln <= len(text) else ""
        at = lines.get(ln)
        if at is None:
            rows.append(f"<tr><td>{ln}</td>" + "<td></td>" * len(cols) + f"<td>{src}</td></tr>")
            continue
        cls = "all" if all(at.values()) else "some" if any(at.values()) else "none"
        marks = "".join(f"<td class=m>{'●' if at[c] else '○'}</td>" if c in at else "<td></td>" for c in cols)
        rows.append(f"<tr class={cls} id=L{ln}><td>{ln}</td>{marks}<td>{src}</td></tr>")
    return page(short(path), _STYLE, [f"<h1>{html.escape(short(path))}</h1>", legend,
                                      "<table class=src>", head, *rows, "</table>"], sep="\n")
