"""`/` in the GPU pods pane (issue 22): every GPU pod is searched, the matches outside the pane's node
scope are counted (`2 match on other nodes: press a`), and a match stays in sight where the usual
cut of a name would hide it (`/serving` at 80 columns: `infe…/…serving-…`, not `infe…/lla…kc`)."""
from __future__ import annotations

import pytest

from gputui.sim.scenarios import demo
from gputui.ui.names import cut_name, showing
from tests.ui.ui_helpers import app_on, screen_text, start_cluster, wait_for

SERVING = ("inference", "llama-70b-serving-5d8f7c9b6d-964kc")


@pytest.mark.parametrize("width", [16, 20, 24, 31, 40])
@pytest.mark.parametrize("needle", ["serving", "llama-70b", "c8d7", "f5-2pv", "-eu", "big", "ference/ll"])
def test_a_match_stays_in_sight_when_it_fits(width, needle):
    names = [SERVING, ("inference", "whisper-asr-6b9c8d7f5-2pvwr"), ("ml-training-eu", "llm-pretrain-worker-0"),
             ("ml-training", "llm-pretrain-big-worker-0")]
    for namespace, name in names:
        if needle not in f"{namespace}/{name}":
            assert showing(namespace, name, width, needle) == (None, 0)
            continue
        differ, keep = showing(namespace, name, width, needle)
        shown = "".join(cut_name(namespace, name, width, differ, keep))
        assert len(shown) <= width
        usual = "".join(cut_name(namespace, name, width))
        if needle in usual:
            assert (differ, keep) == (None, 0)  # no match hidden: the usual cut
        elif len(needle) <= width // 2 - 4 and "/" not in needle:  # room for it, two `…` and the namespace's part
            assert needle in shown, (usual, shown)


@pytest.fixture(scope="module")
def cluster():
    yield from start_cluster(demo.build())


async def test_slash_in_the_pods_pane_searches_every_node(cluster):
    app = app_on(cluster)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.model is not None and app.model.pods_known and app.nodes_table.row_count, what="the pods")
        app.jump_to_node("h100-2")
        await wait_for(pilot, lambda: app.selected_node == "h100-2" and "inference/" + SERVING[1] in app.pods_table.shown_keys,
                       what="h100-2's pods")

        def name_cell(key: tuple[str, str]) -> str:
            return app.pods_pane.view[key][2][0].plain

        assert "serving" not in name_cell(SERVING)  # the usual cut at 80 columns hides it
        app.pods_table.focus()
        await pilot.press("slash", *"serving")
        await wait_for(pilot, lambda: app.pods_table.shown_keys == ["inference/" + SERVING[1]], what="the one match")
        await wait_for(pilot, lambda: "serving" in name_cell(SERVING), what="the match in sight")
        assert "serving" in screen_text(app)
        await pilot.press("enter", "escape")  # the filter kept, then cleared: the usual cut back
        await wait_for(pilot, lambda: not app.pods_table.filter_text and "serving" not in name_cell(SERVING), what="the usual cut")

        whisper = [key for key, (entry, _, _) in app.pods_pane.view.items() if "whisper" in key[1]]
        assert len(whisper) >= 2 and all(app.pods_pane.view[key][0].pod.node != "h100-2" for key in whisper)
        await pilot.press("slash", *"whisper")
        await wait_for(pilot, lambda: f"no pod matches 'whisper' here · {len(whisper)} match on other nodes: press a" in screen_text(app),
                       what="the matches on other nodes counted")
        await pilot.press("enter", "a")
        await wait_for(pilot, lambda: sorted(app.pods_table.shown_keys) == sorted(f"{ns}/{name}" for ns, name in whisper),
                       what="every whisper pod on all nodes")
        assert "match on other nodes" not in screen_text(app)
        await pilot.press("a", "slash", *["backspace"] * 7, *"ml-")  # the node scope again: pending ml-training pods are shown first
        await wait_for(pilot, lambda: "more match on other nodes: press a" in screen_text(app), what="more matches elsewhere")
        assert app.pods_table.shown_keys and all(k.startswith("ml-training/") for k in app.pods_table.shown_keys)
