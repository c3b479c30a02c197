"""The verdicts, one enumeration (kube/verdicts.py): each code has its words, its severity and its row in
the README's problem-code table, and nothing in gputui makes a problem of a code outside it."""
from __future__ import annotations

import re
from pathlib import Path

from gputui.kube import gpu, verdicts
from gputui.kube.verdicts import PROBLEM, WARNING, Verdict
from gputui.ui import render

ROOT = Path(__file__).resolve().parents[2]


def readme_codes() -> tuple[list[str], str]:
    """The problem-code table's codes, in order, and the README's text."""
    text = (ROOT / "README.md").read_text()
    table = text[text.index("Problem codes, worst first"):]
    table = table[: table.index("\n\n", table.index("| code | meaning |"))]
    return re.findall(r"^\| `([a-z-]+)` \|", table, re.M), text


def test_each_verdict_has_words_a_severity_and_a_readme_row():
    rows, text = readme_codes()
    for v in Verdict:
        assert v.words and v.short, v
        assert v.severity in (PROBLEM, WARNING), v
        assert render.verdict_word(gpu.Problem(v, ""))[1] == (render.WARN_STYLE if v.severity == WARNING else render.BAD_STYLE)
        if v.cluster:
            assert f"`{v.value}`" in text, f"{v.value}: the README says nothing of it"
        else:
            assert v.value in rows, f"{v.value}: no row in the README's problem-code table"
    assert rows == [v.value for v in verdicts.NODE_VERDICTS]  # the table in severity order, none extra


def test_severity_order_is_the_enumeration_order():
    assert gpu.SEVERITY_ORDER == tuple(v.value for v in verdicts.NODE_VERDICTS)
    shuffled = [gpu.Problem(Verdict.CORDONED, ""), gpu.Problem("from-a-newer-gputui", ""), gpu.Problem(Verdict.NOT_READY, "")]
    assert [p.code for p in gpu.by_severity(shuffled)] == ["not-ready", "cordoned", "from-a-newer-gputui"]
    assert render.verdict_word(gpu.Problem("from-a-newer-gputui", "")) == ("from-a-newer-gputui", render.BAD_STYLE)


def test_no_problem_is_made_of_a_bare_string():
    for path in (ROOT / "gputui").rglob("*.py"):
        assert not re.search(r"Problem\(\s*\"", path.read_text()), f"{path}: Problem(\"...\") instead of a Verdict member"
