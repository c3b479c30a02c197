"""The load benchmark runs (tiny): its table is printed, every figure a number, and gputui's shape holds.

The shape, not the speed: gputui reads no list page from etcd (the simulator plays kube-apiserver 1.34,
whose watch cache serves them), does not list again in the steady phase, and pays per change, not per
cluster size: from 300 pods at 40 changes/s to 3,000 pods at 80 changes/s its steady bytes a minute follow
the changes, not the pods. Each figure is the simulator's own count, so a loaded machine changes how many
changes there are, not what one costs.
"""
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench_load.py"
N = r"([\d,]+(?:\.\d+)?)"
ROW = re.compile(rf"^(gputui|kubectl-w|seed)\s+(\d+) \|\s*{N}\s+{N}\s+{N}\s+{N}\s+([+-]\d+) \|\s*{N}\s+{N}\s+{N}\s+{N}\s+{N}\s+{N}\s+{N}$")


def number(text: str) -> float:
    return float(text.replace(",", ""))


@pytest.mark.timeout(180)
def test_bench_load_smoke_prints_its_table_and_gputui_pays_per_change():
    out = subprocess.run([sys.executable, str(BENCH), "--smoke"], capture_output=True, text=True, timeout=170)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    text = out.stdout
    figures = json.loads(text.rstrip().splitlines()[-1])
    assert sorted(figures) == ["100x3000", "20x300"], text
    small = {r["group"]: r for r in figures["20x300"]}
    big = {r["group"]: r for r in figures["100x3000"]}
    assert sorted(small) == ["gputui", "kubectl-w", "seed"] and sorted(big) == ["gputui"], text

    # the printed tables: one row per group and size, every cell a number, the same as the figures
    tables = text.split("\n== 20 nodes, 300 pods ==\n")[1].split("\n== 100 nodes, 3,000 pods ==\n")
    for block, results in zip(tables, (small, big), strict=True):
        rows = [ROW.match(line) for line in block.splitlines() if line.startswith(tuple(results)) and "|" in line]
        assert len(rows) == len(results) and all(rows), block
        for row in rows:
            r = results[row.group(1)]
            cells = [number(c) for c in row.groups()[1:]]
            clients, requests, sent, etcd, peak, rise, *steady = cells
            assert (clients, requests, sent, etcd) == (r["clients"], r["initial"]["requests"], r["initial"]["bytes"], r["initial"]["etcd"])
            assert peak > 0 and rise >= 0 and all(not math.isnan(c) and c >= 0 for c in steady), row.group(0)
            assert steady[1] == round(r["steady"]["bytes"]), row.group(0)
    for r in [*small.values(), *big.values()]:
        for phase in ("initial", "steady"):
            assert all(isinstance(v, (int, float)) and v >= 0 for k, v in r[phase].items() if k != "verbs"), r
        assert r["initial"]["requests"] > 0 and r["initial"]["bytes"] > 0, r
        assert r["steady"]["changes"] >= 50, f"the churn did not run: {r}"
    # the churn's writes are not counted as any group's reads
    assert small["kubectl-w"]["steady"]["requests"] == 0 and small["seed"]["steady"]["requests"] > 0, text

    for ours in (small["gputui"], big["gputui"]):
        # served from the watch cache (1.34): not one list page from etcd; every watch stayed open, nothing listed again
        assert ours["initial"]["etcd"] == 0 and ours["steady"]["etcd"] == 0, ours
        assert ours["steady"]["lists"] == 0 and "list" not in ours["steady"]["verbs"] and "watch" not in ours["steady"]["verbs"], ours
        assert ours["notes"] == {"relists": 0, "events": ours["notes"]["events"], "not_live": 0}, ours
        assert ours["notes"]["events"] > 0, ours
    assert "PASS  20x300: gputui: no list page served from etcd (0)" in text

    # ten times the pods: the initial sync costs more; the steady phase costs what the changes do
    grew = big["gputui"]["initial"]["bytes"] / small["gputui"]["initial"]["bytes"]
    assert grew > 5, (grew, text)
    per_change = [r["steady"]["bytes"] / r["steady"]["changes"] / r["clients"] for r in (small["gputui"], big["gputui"])]
    assert 0.5 < per_change[1] / per_change[0] < 2, (per_change, text)
    # and a change reaches each model: at least a few hundred bytes of it, each
    assert min(per_change) > 300, (per_change, text)
