"""The ggml type ids the tests send come from the tree under test's ggml.h (harness/ggml/tree.py),
and cases/quant_variants.py's ``tree_types`` is the one place the kernel server's view of them is
compared with the tree's: a disagreement fails loudly (a server built from another tree, an enum the
header reader misreads)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from cases import quant_variants as V
from harness.ggml import source, tree


class _Server:
    """A target whose kernel server reports ``ids`` as its type ids (``quant_types``)."""

    id = "vlen128-zvfh"

    def __init__(self, ids: dict[str, int]) -> None:
        self.message = " ".join(f"type.{name}={i},32,34,1,1,8,1,1,1" for name, i in ids.items())

    def server(self) -> SimpleNamespace:
        return SimpleNamespace(build=SimpleNamespace(server="/builds/one/rvvdiff-server"))

    def call(self, kernel: str) -> SimpleNamespace:
        assert kernel == "quant_types"
        return SimpleNamespace(message=self.message)


@pytest.fixture
def pinned(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    src = source.pinned()
    monkeypatch.setattr(V, "session", lambda: SimpleNamespace(source=src))
    monkeypatch.setattr(V, "_TYPES", {})
    return tree.of(src).types


def test_type_ids_are_the_trees(pinned: dict[str, int]) -> None:
    target = _Server(pinned)
    assert V.type_id(target, "q4_0") == pinned["q4_0"] == 2 and V.type_id(target, "bf16") == pinned["bf16"]
    assert V.tree_types(target)["q4_K"].id == pinned["q4_K"]


def test_a_server_that_disagrees_with_the_tree_fails_loudly(pinned: dict[str, int]) -> None:
    target = _Server({**pinned, "q4_K": pinned["q4_K"] + 1})
    with pytest.raises(AssertionError, match=r"type ids are not the tree's \[quant_types, vlen128-zvfh, .*\]:\n"
                                             rf"  q4_K={pinned['q4_K'] + 1}, but the tree's ggml.h says {pinned['q4_K']}$"):
        V.type_id(target, "q4_0")
