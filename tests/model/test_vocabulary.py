"""One vocabulary: the report and the app say what kubectl says, and format ages and quantities as it does.

References: kubectl's AGE is k8s.io/apimachinery `pkg/util/duration.HumanDuration` (duration.go), and
`<unknown>` without a timestamp (kubectl's `translateTimestampSince`); quantities are printed in
`resource.Quantity`'s canonical form (`CanonicalizeBytes`), as `kubectl describe node` shows them.
"""
from __future__ import annotations

import asyncio
import contextlib
import io

import pytest

from gputui.cli import main as cli_main
from gputui.kube import duration
from gputui.kube.quantities import format_quantity
from gputui.kube.records import daemonset_from, node_from
from gputui.kube.stack import (
    NOT_EXPECTED,
    daemonset_targets,
    detect_stack,
    node_components,
)
from gputui.report import contract, formats
from gputui.ui import render

MINUTE, HOUR, DAY, YEAR = 60, 3600, 86400, 365 * 86400

# (seconds, what kubectl prints): every branch of HumanDuration and both sides of each threshold.
HUMAN_DURATIONS = [
    (-2, "<invalid>"), (-1.5, "0s"), (-1, "0s"), (-0.5, "0s"), (0, "0s"), (0.9, "0s"), (1, "1s"), (45, "45s"),
    (119, "119s"), (119.9, "119s"), (2 * MINUTE, "2m"), (5 * MINUTE + 30, "5m30s"), (9 * MINUTE + 59, "9m59s"),
    (10 * MINUTE, "10m"), (10 * MINUTE + 59, "10m"), (179 * MINUTE + 59, "179m"), (3 * HOUR, "3h"),
    (3 * HOUR + 5 * MINUTE, "3h5m"), (7 * HOUR + 59 * MINUTE + 59, "7h59m"), (8 * HOUR, "8h"), (47 * HOUR + 59 * MINUTE, "47h"),
    (48 * HOUR, "2d"), (3 * DAY + 4 * HOUR, "3d4h"), (7 * DAY + 23 * HOUR, "7d23h"), (8 * DAY, "8d"), (400 * DAY, "400d"),
    (729 * DAY + 23 * HOUR, "729d"), (730 * DAY, "2y"), (2 * YEAR + 10 * DAY, "2y10d"), (7 * YEAR + 364 * DAY, "7y364d"),
    (8 * YEAR, "8y"), (8 * YEAR + 100 * DAY, "8y"), (20 * YEAR, "20y"),
]


@pytest.mark.parametrize(("seconds", "expected"), HUMAN_DURATIONS)
def test_ages_are_kubectls_human_duration(seconds, expected):
    assert duration.human_duration(seconds) == expected
    now = 1_750_000_000.0
    # the app's ages and the report's are the same function
    assert render.age(now - seconds, now) == formats.age(now - seconds, now) == expected


def test_an_unknown_time_reads_as_kubectl_reads_it():
    assert render.age(None, 0.0) == formats.age(None, 0.0) == "<unknown>"


# (as the cluster wrote it, as kubectl prints it)
QUANTITIES = [
    ("2147483648Ki", "2Ti"), ("1073741824Ki", "1Ti"), ("1072693248Ki", "1023Gi"), ("65842868Ki", "65842868Ki"),
    ("1843238896Ki", "1843238896Ki"), ("1698714478591", "1698714478591"), ("1.5Gi", "1536Mi"), ("0.5Ki", "512"),
    ("1023Ki", "1023Ki"), ("1024", "1024"), ("2000", "2k"), ("1500", "1500"), ("1.5", "1500m"), ("0.1", "100m"),
    ("95500m", "95500m"), ("96", "96"), ("110", "110"), ("0", "0"), ("0Gi", "0"), ("1e3", "1e3"), ("12e6", "12e6"),
    ("500M", "500M"), ("1000M", "1G"), ("1n", "1n"), ("0.0000000001", "1n"), ("-2Gi", "-2Gi"), ("lots", "lots"),
]


@pytest.mark.parametrize(("raw", "expected"), QUANTITIES)
def test_quantities_in_kubernetes_canonical_form(raw, expected):
    assert format_quantity(raw) == expected
    assert render.quantity(raw) == expected


def _node_row_data(name: str = "gpu-1") -> dict:
    return {
        "name": name, "ready": True, "schedulable": True, "product": "NVIDIA-H100-80GB-HBM3",
        "gpu": {"nvidia.com/gpu": {"capacity": 8, "allocatable": 7, "allocated": 3, "free": 4}},
        "problems": [{"code": "unhealthy-gpus", "message": "1 of 8 GPUs unhealthy"}, {"code": "plugin-not-running", "message": "x"}],
        "components": {},
    }


def _report(nodes: list[dict]) -> dict:
    return {
        "context": "c", "stack": {"kind": "none", "install": None, "namespace": None, "cluster_policy": None},
        "nodes": nodes,
        "pods": [{"namespace": "ml", "name": "train", "node": "gpu-1", "phase": "Running", "gpu": {"nvidia.com/gpu": 3},
                  "reason": None, "claims": [], "asks": []}],
        "totals": {"nvidia.com/gpu": {"capacity": 8, "allocatable": 7, "allocated": 3, "free": 4}},
        "missing": [], "unreadable": [],
    }


def test_report_table_uses_kubectls_words_and_ages():
    out = io.StringIO()
    now = 1_750_000_000.0
    formats.write_table(_report([_node_row_data()]), out, {("ml", "train"): now - (2 * YEAR + 10 * DAY)}, now=now)
    lines = out.getvalue().splitlines()
    node_header = next(line for line in lines if line.startswith("NODE"))
    assert node_header.split()[3:] == ["RESOURCE", "CAPACITY", "ALLOCATABLE", "ALLOCATED", "FREE", "PROBLEMS"]
    row = next(line for line in lines if line.startswith("gpu-1"))
    assert row.split()[2:7] == ["gpu", "8", "7", "3", "4"]
    totals_header = next(line for line in lines if line.strip().startswith("RESOURCE") and "PROBLEMS" not in line)
    assert totals_header.split() == ["RESOURCE", "CAPACITY", "ALLOCATABLE", "ALLOCATED", "FREE"]
    assert not any(word in line.split() for line in lines for word in ("ALLOC", "USED", "CAP"))
    pod = next(line for line in lines if "ml/train" in line)
    assert pod.split()[-1] == "2y10d"  # kubectl's age, not `740d`


def test_report_table_counts_a_pods_dra_only_devices():
    report = _report([_node_row_data()])
    report["pods"].append({"namespace": "ml", "name": "asr", "node": "gpu-1", "phase": "Running", "gpu": {"mig.nvidia.com": 1},
                           "reason": None, "claims": [{"claim": "ml/asr-mig", "devices": ["gpu-7-mig-1g10gb-19-0"]}], "asks": []})
    out = io.StringIO()
    formats.write_table(report, out, {}, now=0.0)
    pod = next(line for line in out.getvalue().splitlines() if "ml/asr" in line)
    assert pod.split()[1:4] == ["gpu-1", "Running", "mig.nvidia.com=1"]  # the DeviceClass, as JSON and TSV name it


def test_report_table_never_cuts_a_name_it_widens_instead():
    """Names are for pasting into kubectl: a long one widens its lines, whole; the rest stay as they were."""
    long_node = "ip-10-0-123-234.us-west-2.compute.internal"
    long_pod = "llm-pretrain-70b-with-a-very-long-descriptive-suffix-worker-0"
    report = _report([_node_row_data(long_node), _node_row_data()])
    report["pods"].append({"namespace": "research-vision-team", "name": long_pod, "node": long_node, "phase": "Running",
                           "gpu": {"nvidia.com/gpu": 1}, "reason": None, "claims": [], "asks": []})
    out = io.StringIO()
    formats.write_table(report, out, {}, now=0.0)
    lines = out.getvalue().splitlines()
    assert next(line for line in lines if line.startswith("ip-10-0")).split()[0] == long_node
    pod = next(line for line in lines if long_pod in line)
    assert pod.split()[:2] == [f"research-vision-team/{long_pod}", long_node]
    assert "…" not in out.getvalue()
    assert next(line for line in lines if line.startswith("gpu-1")).split()[-1] == "unhealthy-gpus"  # the codes stay whole
    header = next(line for line in lines if line.startswith("NODE"))
    assert header.rstrip().endswith("PROBLEMS") and "CAPACITY ALLOCATABLE ALLOCATED FREE" in header


# -- "not expected" names what the node or the ClusterPolicy actually says ---------------------

OPERATOR_NS = "gpu-operator"


def _gpu_node(labels: dict[str, str]):
    return node_from({"metadata": {"name": "g1", "labels": {"nvidia.com/gpu.present": "true", **labels}},
                      "status": {"capacity": {"nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": "8"}}})


def _operator_daemonset(app: str, selector: dict[str, str] | None = None):
    return daemonset_from({
        "metadata": {"name": app, "namespace": OPERATOR_NS, "labels": {"app": app}},
        "spec": {"selector": {"matchLabels": {"app": app}},
                 "template": {"metadata": {"labels": {"app": app}},
                              "spec": {"nodeSelector": selector or {}, "containers": [{"name": app, "image": "x"}]}}},
        "status": {},
    })


def _policy(spec: dict | None = None) -> dict:
    return {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
            "spec": spec or {}, "status": {"state": "ready", "namespace": OPERATOR_NS}}


def test_not_expected_names_the_deploy_label_the_node_has():
    stack = detect_stack([_operator_daemonset("nvidia-dcgm-exporter")], [_policy()])
    state = node_components(stack, _gpu_node({"nvidia.com/gpu.deploy.operands": "false"}), [])["dcgm-exporter"]
    assert state.state == NOT_EXPECTED
    # the node has no nvidia.com/gpu.deploy.dcgm-exporter label: the reason names the one it has
    assert "nvidia.com/gpu.deploy.operands=false" in state.detail and "deploy.dcgm-exporter" not in state.detail
    own = node_components(stack, _gpu_node({"nvidia.com/gpu.deploy.dcgm-exporter": "false"}), [])["dcgm-exporter"]
    assert own.state == NOT_EXPECTED and "nvidia.com/gpu.deploy.dcgm-exporter=false" in own.detail


def test_not_expected_names_the_clusterpolicy_setting():
    stack = detect_stack([], [_policy({"driver": {"enabled": False}})])
    state = node_components(stack, _gpu_node({}), [])["driver"]
    assert state.state == NOT_EXPECTED and state.detail == "disabled in ClusterPolicy cluster-policy: spec.driver.enabled=false"


def test_a_node_selector_mismatch_names_the_nodes_value():
    ds = _operator_daemonset("nvidia-dcgm-exporter", {"nvidia.com/gpu.deploy.dcgm-exporter": "true"})
    ok, why = daemonset_targets(ds, _gpu_node({"nvidia.com/gpu.deploy.dcgm-exporter": "paused"}))
    assert not ok and why == ("its nodeSelector wants nvidia.com/gpu.deploy.dcgm-exporter=true; "
                              "the node has nvidia.com/gpu.deploy.dcgm-exporter=paused")


# -- the command line -----------------------------------------------------------------------------


def test_report_with_an_unknown_flag_shows_reports_usage():
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as stopped:
        cli_main.main(["report", "--bogus"])
    assert stopped.value.code == 2
    assert err.getvalue().startswith("usage: gputui report ") and "gputui report: error: unrecognized arguments: --bogus" in err.getvalue()
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit):
        cli_main.main(["--bogus", "report"])  # before the subcommand: the top-level flags' usage
    assert err.getvalue().startswith("usage: gputui [") and "gputui: error: unrecognized arguments: --bogus" in err.getvalue()


def test_report_reads_the_config_files_metrics_settings(tmp_path, monkeypatch):
    config = tmp_path / "config.toml"
    config.write_text("exec_timeout = 7\n[metrics]\nconcurrency = 2\nreads_per_minute = 30\ninterval = 0\n")
    seen = {}

    async def fake_collect(kubeconfig, context, namespace, extra=frozenset(), **options):
        seen.update(options)
        return _report([]), {}

    monkeypatch.setattr(contract, "collect", fake_collect)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = cli_main.main(["report", "--config", str(config), "-o", "json"])
    assert rc == 0
    assert seen["metrics"]["metrics_concurrency"] == 2 and seen["metrics"]["metrics_reads_per_minute"] == 30
    assert seen["exec_timeout"] == 7
    bad = tmp_path / "bad.toml"
    bad.write_text("[metrics]\nconcurrency = 0\n")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert cli_main.main(["report", "--config", str(bad)]) == 2
    assert err.getvalue().startswith("gputui report: config ") and "metrics.concurrency" in err.getvalue()


class _Exporter:
    def __init__(self, pod: str | None, unavailable: str | None = None) -> None:
        self.namespace, self.pod, self.unavailable = "gpu-operator", pod, unavailable


class _Poller:
    """What read_exporters uses of the model's MetricsPoller; records when each node's read starts."""

    def __init__(self, concurrency: int, reads_per_minute: int) -> None:
        self.concurrency, self.reads_per_minute = concurrency, reads_per_minute
        self.started: dict[str, float] = {}
        self.asked: list[list[str]] = []

    def targets(self):
        return {f"n{i}": _Exporter(f"dcgm-{i}") for i in range(4)} | {"cpu-ish": _Exporter(None, "no DCGM exporter on this node")}

    async def poll_once(self, nodes=None):
        self.asked.append(list(nodes))
        for node in nodes:
            self.started[node] = asyncio.get_running_loop().time()


class _Model:
    def __init__(self, poller: _Poller) -> None:
        self.metrics = poller


async def test_report_paces_exporter_reads_by_reads_per_minute():
    poller = _Poller(concurrency=1, reads_per_minute=300)  # one at a time, then one every 0.2 s
    start = asyncio.get_running_loop().time()
    await contract.read_exporters(_Model(poller))
    assert ["cpu-ish"] in poller.asked  # told why, without a read
    times = [poller.started[f"n{i}"] - start for i in range(4)]
    assert times[0] < 0.1
    assert all(later - earlier >= 0.19 for earlier, later in zip(times, times[1:], strict=False)), times
    fast = _Poller(concurrency=8, reads_per_minute=600)  # the defaults: four nodes at once
    start = asyncio.get_running_loop().time()
    await contract.read_exporters(_Model(fast))
    assert max(fast.started.values()) - start < 0.1
