"""docs/python.md's notebook session, cell by cell in one namespace, from the repository root."""

import os
import re

import pytest

from conftest import ROOT

pytest.importorskip("pandas")


def cells() -> list:
    text = (ROOT / "docs" / "python.md").read_text()
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_docs_have_cells():
    assert len(cells()) >= 5


def test_notebook_session_runs(capsys):
    namespace: dict = {}
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        import matplotlib  # noqa: F401
        have_matplotlib = True
    except ImportError:
        have_matplotlib = False
    try:
        for i, cell in enumerate(cells()):
            if cell.startswith("import matplotlib") and not have_matplotlib:
                continue  # the figures' cell (docs/python.md "Pictures")
            exec(compile(cell, f"docs/python.md cell {i + 1}", "exec"), namespace)
    finally:
        os.chdir(cwd)
    out = capsys.readouterr().out
    # The printed values the comments in the cells promise.
    assert "28672 66 8484" in out
    assert "GPU KV cache size: 543,008 tokens" in out
    assert "19366 azure" in out
    assert "[1, 2, 3, 4, 5, 6, 7]" in out
    assert "12 3" in out
    assert "0 [1, 2, 3, 4, 5, 6, 7]" in out
    assert "[8]" in out
    assert "[8, 9, 10, 7, 6, 5, 4, 3, 2, 1]" in out
    if have_matplotlib:
        assert "['Concurrency vs the capacity formula', 'KV usage and last-block padding']" in out
