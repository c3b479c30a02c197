"""gputui.sim.exporters.dcgm: the simulated exporter's text, read back with the real parser."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gputui.kube.dcgm import parse_metrics, xid_problems
from gputui.sim.exporters.dcgm import XID_ANNOTATION, ExporterOptions, exposition, gpu_uuid, parse_xid_annotation

REAL = Path("/work/shared/fixtures/real")


def node(name: str, labels: dict, capacity: dict | None = None, annotations: dict | None = None) -> dict:
    return {
        "metadata": {"name": name, "labels": labels, "annotations": annotations or {}},
        "status": {"capacity": capacity or {}, "allocatable": capacity or {}},
    }


def pod(name: str, node_name: str, limits: dict, namespace: str = "ml", created: str = "2025-01-01T00:00:00Z", phase: str = "Running") -> dict:
    return {
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": created},
        "spec": {"nodeName": node_name, "containers": [{"name": "main", "resources": {"limits": limits}}]},
        "status": {"phase": phase},
    }


A100_X8 = {
    "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
    "nvidia.com/gpu.memory": "81920",
    "nvidia.com/gpu.count": "8",
    "nvidia.com/cuda.driver-version.full": "550.54.15",
}


def h100_mixed() -> dict:
    labels = json.loads((REAL / "nodes/h100-80gb-hbm3-mig-mixed-all-balanced.node-labels.json").read_text())
    return node("s4124-0073", labels)


def test_every_default_counter_is_served_with_its_type_and_help():
    expected = {}
    for line in (REAL / "dcgm-exporter/default-counters.csv").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, kind, help_text = (part.strip() for part in line.split(",", 2))
            if kind != "label":
                expected[name] = (kind, help_text)
    text = exposition(node("a", A100_X8), [], now=100.0)
    served = {f.name: (f.type, f.documentation) for f in text_string_to_metric_families(text)}
    for name, (kind, help_text) in expected.items():
        # prometheus_client strips "_total" from counter family names.
        got = served.get(name) or served.get(name.removesuffix("_TOTAL"))
        assert got == (kind, help_text), name


@pytest.mark.parametrize("label", ["Hostname", "hostname"])
def test_eight_full_gpus_with_both_host_label_spellings(label):
    text = exposition(node("gpu-a", A100_X8), [], now=5.0, hostname_label=label)
    assert f'{label}="gpu-a"' in text
    readings = parse_metrics(text)
    assert [r.index for r in readings] == list(range(8))
    assert {r.host for r in readings} == {"gpu-a"}
    assert {r.model for r in readings} == {"NVIDIA A100-SXM4-80GB"}
    assert {r.driver_version for r in readings} == {"550.54.15"}
    assert [r.uuid for r in readings] == [gpu_uuid("gpu-a", i) for i in range(8)]
    for r in readings:
        assert r.util == 0 and r.fb_used_mib == 0 and r.pod is None and r.xid is None
        assert r.fb_free_mib + r.fb_used_mib <= 81920


def test_unknown_host_label_is_refused():
    with pytest.raises(ValueError):
        exposition(node("a", A100_X8), [], now=0, hostname_label="host")


def test_pods_are_attributed_oldest_first_and_busy_gpus_vary_over_time():
    n = node("gpu-a", A100_X8)
    pods = [
        pod("late", "gpu-a", {"nvidia.com/gpu": "1"}, created="2025-01-02T00:00:00Z"),
        pod("early", "gpu-a", {"nvidia.com/gpu": "2"}, created="2025-01-01T00:00:00Z"),
        pod("done", "gpu-a", {"nvidia.com/gpu": "1"}, phase="Succeeded"),
        pod("elsewhere", "gpu-b", {"nvidia.com/gpu": "1"}),
    ]
    readings = parse_metrics(exposition(n, pods, now=1000.0))
    assert [r.pod for r in readings[:4]] == ["ml/early", "ml/early", "ml/late", None]
    assert all(3 <= r.util <= 100 and r.fb_used_mib > 0 for r in readings[:3])
    later = parse_metrics(exposition(n, pods, now=1020.0))
    assert [r.util for r in later[:3]] != [r.util for r in readings[:3]]
    assert readings[0].power_w > readings[3].power_w


def test_same_inputs_same_text():
    n, pods = node("gpu-a", A100_X8), [pod("p", "gpu-a", {"nvidia.com/gpu": "3"})]
    assert exposition(n, pods, now=42.5) == exposition(n, pods, now=42.5)


def test_mig_mixed_node_from_real_labels():
    readings = parse_metrics(exposition(h100_mixed(), [pod("p", "s4124-0073", {"nvidia.com/mig-1g.10gb": "1"})], now=300.0))
    assert Counter(r.mig_profile for r in readings) == {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
    assert {r.index for r in readings} == {0}
    assert len({r.key for r in readings}) == 4
    busy = [r for r in readings if r.pod]
    assert len(busy) == 1 and busy[0].mig_profile == "1g.10gb" and busy[0].util > 0
    small = [r for r in readings if r.mig_profile == "1g.10gb"]
    assert all(r.fb_used_mib + r.fb_free_mib == 9984 for r in small)
    # temperature and power belong to the board: the same on every instance
    assert len({(r.temp_c, r.power_w) for r in readings}) == 1


def test_gpu_util_is_zero_on_mig_instances_but_engine_activity_is_not():
    text = exposition(h100_mixed(), [pod("p", "s4124-0073", {"nvidia.com/mig-3g.40gb": "1"})], now=10.0)
    families = {f.name: f for f in text_string_to_metric_families(text)}
    busy = [s for s in families["DCGM_FI_PROF_GR_ENGINE_ACTIVE"].samples if s.labels.get("pod") == "p"]
    assert busy and 0 < busy[0].value <= 1
    assert {s.value for s in families["DCGM_FI_DEV_GPU_UTIL"].samples} == {0}


def time_sliced(resource: str = "nvidia.com/gpu") -> tuple[dict, list[dict]]:
    labels = {**A100_X8, "nvidia.com/gpu.count": "1", "nvidia.com/gpu.replicas": "4"}
    pods = [pod(f"p{i}", "gpu-a", {resource: "1"}, created=f"2025-01-0{i + 1}T00:00:00Z") for i in range(3)]
    return node("gpu-a", labels, {resource: "4"}), pods


def test_a_time_sliced_gpu_names_one_of_its_pods():
    """dcgm-exporter's pod mapper keeps one pod per device: of the pods sharing a GPU, one is named."""
    n, pods = time_sliced()
    [reading] = parse_metrics(exposition(n, pods, now=1.0))
    assert reading.pods == ("ml/p2",)
    assert "vgpu=" not in exposition(n, pods, now=1.0)


def test_virtual_gpus_name_every_pod_with_its_replica():
    n, pods = time_sliced()
    text = exposition(n, pods, now=1.0, options=ExporterOptions(virtual_gpus=True))
    [reading] = parse_metrics(text)
    assert reading.pods == ("ml/p0", "ml/p1", "ml/p2")
    util = [s for f in text_string_to_metric_families(text) if f.name == "DCGM_FI_DEV_GPU_UTIL" for s in f.samples]
    assert [(s.labels["pod"], s.labels["vgpu"]) for s in util] == [("p0", "0"), ("p1", "1"), ("p2", "2")]
    # With virtual GPUs a GPU no pod holds has no series at all.
    assert parse_metrics(exposition(node("gpu-b", A100_X8), [], now=1.0, options=ExporterOptions(virtual_gpus=True))) == []


def test_a_renamed_shared_resource_is_named_only_when_listed():
    n, pods = time_sliced("nvidia.com/gpu.shared")
    [reading] = parse_metrics(exposition(n, pods, now=1.0))
    assert reading.pods == () and reading.util > 0  # held, and busy, but named on no series
    listed = ExporterOptions(resource_names=("nvidia.com/gpu.shared",))
    assert parse_metrics(exposition(n, pods, now=1.0, options=listed))[0].pods == ("ml/p2",)


def test_a_gpu_no_pod_holds_has_no_pod_labels_at_all():
    text = exposition(node("gpu-a", A100_X8), [pod("p", "gpu-a", {"nvidia.com/gpu": "1"})], now=1.0)
    util = [line for line in text.splitlines() if line.startswith("DCGM_FI_DEV_GPU_UTIL{")]
    assert 'pod="p"' in util[0] and all("pod=" not in line and "namespace=" not in line and "container=" not in line for line in util[1:])


@pytest.mark.parametrize(("container", "expected"), [
    ({}, ExporterOptions()),
    ({"args": ["-f", "/etc/dcgm-exporter/dcp-metrics-included.csv", "--kubernetes-virtual-gpus"]}, ExporterOptions(virtual_gpus=True)),
    ({"env": [{"name": "KUBERNETES_VIRTUAL_GPUS", "value": "true"}]}, ExporterOptions(virtual_gpus=True)),
    ({"env": [{"name": "KUBERNETES_VIRTUAL_GPUS", "value": "true"}], "args": ["--kubernetes-virtual-gpus=false"]}, ExporterOptions()),
    ({"env": [{"name": "NVIDIA_RESOURCE_NAMES", "value": "nvidia.com/gpu.shared,nvidia.com/a100"}]},
     ExporterOptions(resource_names=("nvidia.com/gpu.shared", "nvidia.com/a100"))),
    ({"command": ["dcgm-exporter", "--nvidia-resource-names", "nvidia.com/gpu.shared"]}, ExporterOptions(resource_names=("nvidia.com/gpu.shared",))),
])
def test_options_are_read_from_the_exporter_container(container, expected):
    assert ExporterOptions.of_container(container) == expected


def test_capacity_is_used_without_gfd_labels():
    readings = parse_metrics(exposition(node("bare", {}, {"nvidia.com/gpu": "2"}), [], now=1.0))
    assert [r.index for r in readings] == [0, 1]


def test_node_without_gpus_serves_nothing():
    assert exposition(node("cpu", {}), [], now=1.0) == ""


def test_memory_temperature_not_supported_on_gddr_boards():
    labels = {"nvidia.com/gpu.product": "Tesla-T4", "nvidia.com/gpu.count": "1", "nvidia.com/gpu.memory": "15360"}
    text = exposition(node("t4", labels), [], now=1.0)
    assert "DCGM_FI_DEV_MEMORY_TEMP" not in text  # DCGM's blank value is skipped, not printed
    [reading] = parse_metrics(text)
    assert reading.model == "Tesla T4" and reading.temp_c is not None


def test_injected_xids_become_the_verdict():
    n = node("gpu-a", A100_X8, annotations={XID_ANNOTATION: "3:79, 5:48"})
    readings = parse_metrics(exposition(n, [], now=1.0))
    assert {r.index: r.xid for r in readings if r.xid} == {3: 79, 5: 48}
    [problem] = xid_problems(readings)
    assert problem.code == "xid-errors" and "GPU 3: XID 79" in problem.message


def test_xid_annotation_parsing():
    assert parse_xid_annotation("79") == {0: 79}
    assert parse_xid_annotation("1:13,2:79") == {1: 13, 2: 79}
    assert parse_xid_annotation("") == {}
    with pytest.raises(ValueError, match="sim.gputui.io/xid"):
        parse_xid_annotation("gpu0=79")
    # a bad annotation does not break the exporter
    bad = node("gpu-a", A100_X8, annotations={XID_ANNOTATION: "oops"})
    assert all(r.xid is None for r in parse_metrics(exposition(bad, [], now=1.0)))


def test_label_values_are_escaped():
    n = node('we"ird', {**A100_X8, "nvidia.com/gpu.count": "1"})
    [reading] = parse_metrics(exposition(n, [], now=1.0))
    assert reading.host == 'we"ird'
