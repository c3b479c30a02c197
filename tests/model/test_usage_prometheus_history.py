"""`--by label:KEY` from the recording rules (kube/usage.py) on Debian's real Prometheus, over a history backfilled
with promtool as tests/bench_usage_prometheus.py builds it (its series, its rules' backfill): a pod whose end falls
just before an hourly evaluation, at a time chosen to the second, which a live Prometheus gives only by chance.

One node, two pods of four GPUs, one of each team: team-a's runs throughout, team-b's ends 4 s after
kube-state-metrics' scrape at 16 s past an hour, a second before the hourly rules' evaluation at 17 s past it. Its
per-pod rules keep its GPUs until the next scrape would have come (its requests seen until their stale marker), past
that evaluation: the next one has its last GPUs but not its labels, whose last scrape is out of its hour."""
from __future__ import annotations

import asyncio
import copy
import subprocess
import time
from pathlib import Path

import pytest

from gputui.kube import usage as u
from tests import bench_usage_prometheus as bench
from tests import prometheus as prom

SCRAPE = 300  # the history's samples and the fine rules' interval, as the bench's
HOUR = 3600


def pod(template: dict, name: str, team: str) -> dict:
    out = copy.deepcopy(template)
    out["metadata"].update({"name": name, "uid": f"uid-{name}", "labels": {"team": team}})
    out["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "4"
    return out


def figures(url: str, at: int, window: int, **options) -> u.UsageView:
    s = u.UsageSettings(window=window, by="label:team", fine_interval=float(SCRAPE), **options)
    view = asyncio.run(bench.ask(url, s, at))["view"]
    assert view is not None
    return view


def rows(view: u.UsageView) -> dict[str, u.UsageRow]:
    assert {r.resource for r in view.rows} == {"nvidia_com_gpu"}
    return {r.group: r for r in view.rows}


def history(workdir: Path) -> tuple[bench.Server, int, int, int]:
    """The history, its rules backfilled (with the team label's own), and Prometheus started on it: the server, the
    hour team-b's pod ends after, the history's begin and end."""
    h0 = (int(time.time()) // HOUR - 6) * HOUR
    begin = h0 + 16  # the scrapes at 16 s past each 5 minutes; the hourly rules evaluate at 17 s past the hour
    end = begin + 3 * HOUR + SCRAPE  # past the third hourly evaluation
    ends = h0 + HOUR + 20  # team-b's pod: its last scrape at h0 + 1h + 16 s
    node = bench.plan(1, begin, end)[0]
    template = node.jobs[0].pod
    node.jobs = [bench.Job(pod(template, "a-0", "team-a"), begin - 600, end + 600, (0, 1, 2, 3), 60.0, None),
                 bench.Job(pod(template, "b-0", "team-b"), begin - 600, ends, (4, 5, 6, 7), 60.0, None)]
    path = workdir / "history.om"
    with path.open("w") as out:
        bench.write_history([node], begin, end, SCRAPE, out)
    server = bench.Server(workdir / "prometheus")
    subprocess.run([prom.PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", "-q", str(path), str(server.data)],
                   check=True, stdout=subprocess.DEVNULL)
    server.start()
    try:
        bench.backfill_rules(server, workdir, begin, end, SCRAPE, scrape=SCRAPE)
    except BaseException:
        server.stop()
        raise
    return server, h0 + HOUR, begin, end


@pytest.mark.skipif(prom.BINARY is None or prom.PROMTOOL is None, reason=prom.MISSING)
def test_a_pod_ending_just_before_an_hourly_evaluation_keeps_its_team(tmp_path):
    server, hour, begin, end = history(tmp_path)
    try:
        whole = end - begin
        # From the hourly per-pod rules: the peak joins each step to the pods' labels of the hours about it.
        per_pod = figures(server.url, end, whole, coarse_after=whole, label_rules=False)
        assert per_pod.method_words == "recording rules gputui:*:1h, per pod joined to label_team"
        got = rows(per_pod)
        assert set(got) == {"team-a", "team-b"}  # no group "": every pod has its team
        assert (got["team-a"].peak, got["team-b"].peak) == (4, 4)
        own = rows(figures(server.url, end, whole, coarse_after=whole))  # the label's own hourly rules
        assert set(own) == set(got)
        for team, row in got.items():  # the same pods' fine samples, summed per hour in other passes: to one of them
            assert row.allocated_h == pytest.approx(own[team].allocated_h, abs=4 * SCRAPE / HOUR), team
            assert row.peak == own[team].peak, team
        # A window from just after that evaluation: team-b's pod's last hourly GPU-hours are in it, its labels' sample
        # (the evaluation before) is not, nor is its last scrape in the last hour's kube_pod_labels.
        late = end - (hour + 100)
        got = rows(figures(server.url, end, late, coarse_after=late, label_rules=False))
        assert "" not in got and got["team-a"].peak == 4
        # The other paths, over either window: the raw series, the 1-minute per-pod rules, the label's own rules.
        for window in (whole, late):
            for options in ({"use_rules": False}, {"label_rules": False}, {}):
                view = figures(server.url, end, window, **options)
                assert "" not in rows(view) and rows(view)["team-a"].peak == 4, (window, options, view.method_words)
    finally:
        server.stop()
