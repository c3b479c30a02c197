"""Rows stay distinguishable (issue 22, item 5): pod names cut to their column never read the same.

At 80 columns the demo's `ml-training/llm-pretrain-worker-0` and `…/llm-pretrain-big-worker-0`
both read `ml-tr…/llm-pr…rker-0`; each must keep where it differs, and go back to the usual cut
once the other is gone."""
from __future__ import annotations

import itertools

import pytest

from gputui.sim.scenarios import demo
from gputui.ui.names import DistinctNames, cut_name, safe_parts
from tests.ui.ui_helpers import app_on, show_all_pods, start_cluster, wait_for

BIG = ("ml-training", "llm-pretrain-big-worker-0")
SMALL = ("ml-training", "llm-pretrain-worker-0")


def shown(names: DistinctNames, key: tuple[str, str]) -> str:
    return "".join(cut_name(*safe_parts(*key), names.width, names.differ_at.get(key)))


@pytest.mark.parametrize("width", [16, 20, 24, 31, 40])
def test_names_that_would_read_alike_keep_where_they_differ(width):
    stems = ["llm-pretrain-", "llm-pretrain-big-", "llm-pretrain-small-", "whisper-asr-6b9c7d8f5-", "whisper-asr-6b9c7d8f4-"]
    keys = {(namespace, f"{stem}worker-{n}") for namespace in ("ml-training", "ml-training-eu", "research")
            for stem in stems for n in (0, 1, 12)}
    names = DistinctNames(width)
    names.update(keys, ())
    texts = {key: shown(names, key) for key in keys}
    assert len(set(texts.values())) == len(keys), sorted(texts.values())
    assert all(len(text) <= width for text in texts.values())
    usual = {key: "".join(cut_name(*key, width)) for key in keys}
    assert {key for key in keys if texts[key] != usual[key]} <= set(names.differ_at)  # only names that read alike change

    # one at a time, all gone: every cut goes back to the usual one, and each change is reported
    for key in sorted(keys):
        changed = names.update((), [key])
        assert all(shown(names, other) == usual[other] or other in names.differ_at for other in changed)
    assert names.differ_at == {}


def test_an_unambiguous_name_is_cut_as_before():
    assert cut_name("research", "notebook-bob-0", 40) == ("research", "/notebook-bob-0")
    assert cut_name("ml-training", "llm-pretrain-worker-0", 20) == ("ml-tr…", "/llm-pr…rker-0")
    assert cut_name("ml-training", "llm-pretrain-big-worker-0", 20, (None, 13)) == ("ml-tr…", "/…big-worker-0")
    assert cut_name("ml-training-eu", "llm-pretrain-worker-0", 20, (11, None)) == ("ml-tra…-eu", "/llm-…er-0")
    for n, m, at in itertools.product(range(1, 40, 3), range(8, 30), range(0, 80, 7)):
        for differ in ((at, None), (None, at), (at, at)):
            namespace, rest = cut_name("ns-" + "x" * n, "pod-" + "y" * n, m, differ)
            assert len(namespace + rest) <= m


@pytest.fixture(scope="module")
def cluster():
    yield from start_cluster(demo.build())


async def test_the_demos_alike_rows_read_apart_and_together_again(cluster):
    app = app_on(cluster)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.model is not None and app.model.pods_known, what="the pods")
        await show_all_pods(pilot, None)

        def name_cell(key):
            return app.pods_pane.view[key][2][0].plain

        width = app.pod_widths["pod"]
        await wait_for(pilot, lambda: name_cell(BIG) != name_cell(SMALL), what="the two llm-pretrain rows told apart")
        cells = [cells[0].plain for _, _, cells in app.pods_pane.view.values()]
        assert len(set(cells)) == len(cells) and all(len(cell) <= width for cell in cells)
        assert "big" in name_cell(BIG)

        cluster.call(cluster.sim.store.delete, "pods", *BIG)
        usual = "".join(cut_name(*SMALL, width))
        await wait_for(pilot, lambda: BIG not in app.pods_pane.view and name_cell(SMALL) == usual, what="the usual cut back")
