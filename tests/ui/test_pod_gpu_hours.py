"""Each running pod's allocated GPU-hours so far (kube/gpu.allocated_hours), in the GPU pods pane's GPU-H
column from 120 columns and in the pod's details: what it holds times the time since status.startTime,
each resource in its own unit; `?` when the start is not known, `-` for a pod not bound."""
from __future__ import annotations

import orjson

from gputui.kube.decoding import Decoding, PodShape, filled
from gputui.kube.gpu import GpuResources, allocated_hours, gpu_pod
from gputui.kube.records import pod_from
from gputui.ui import render
from gputui.ui.panes import pod_columns, pod_row, widths

NOW = 1_750_000_000.0


def entry(requests: dict[str, str], node: str | None = "a100-1", started: str | None = "2025-06-15T13:06:40Z"):
    """A pod of one container asking for `requests`; started 2 h before NOW (2025-06-15T15:06:40Z); decoded as
    the watches decode it (the pod's typed shape keeps status.startTime)."""
    status = {"phase": "Running" if node else "Pending", **({"startTime": started} if started else {})}
    obj = {"metadata": {"name": "train-0", "namespace": "ml", "uid": "u1", "creationTimestamp": "2025-06-15T12:00:00Z"},
           "spec": {"containers": [{"name": "main", "resources": {"limits": requests}}], **({"nodeName": node} if node else {})},
           "status": status}
    found = gpu_pod(pod_from(filled(Decoding.of(PodShape).object(orjson.dumps(obj)))), GpuResources())
    assert found is not None
    return found


def test_held_gpus_times_the_hours_since_the_kubelet_took_the_pod():
    assert allocated_hours(entry({"nvidia.com/gpu": "4"}), NOW) == {"nvidia.com/gpu": 8.0}
    assert render.gpu_hours(entry({"nvidia.com/gpu": "4"}), NOW) == "8.0"
    # A MIG slice counts as its profile, a shared GPU's replica as one replica: each its own figure, never summed.
    mixed = entry({"nvidia.com/mig-1g.10gb": "2", "nvidia.com/gpu.shared": "1"})
    assert allocated_hours(mixed, NOW) == {"nvidia.com/mig-1g.10gb": 4.0, "nvidia.com/gpu.shared": 2.0}
    words = render.gpu_hours_words(mixed, NOW).plain
    assert words.startswith("allocated so far: 2.0 gpu.shared-h + 4.0 mig-1g.10gb-h (held 120m, since status.startTime)")  # the GPUS cell's order
    assert "a MIG slice counts as its profile, not as a whole GPU" in words
    assert "a shared GPU's replica counts as one replica, not as a whole GPU" in words
    assert render.gpu_hours(entry({"nvidia.com/gpu": "1"}, started="2025-06-15T15:06:30Z"), NOW) == "<0.01"  # 10 s, not 1e-05


def test_unknown_start_is_a_question_mark_and_a_pending_pod_holds_nothing():
    unknown = entry({"nvidia.com/gpu": "2"}, started=None)
    assert allocated_hours(unknown, NOW) is None
    assert render.gpu_hours(unknown, NOW) == "?"
    assert "? GPU-hours" in render.gpu_hours_words(unknown, NOW).plain
    pending = entry({"nvidia.com/gpu": "2"}, node=None, started=None)
    assert allocated_hours(pending, NOW) == {} and render.gpu_hours(pending, NOW) == "-"
    assert render.gpu_hours_words(pending, NOW).plain == "allocated so far: nothing, not bound to a node"


def test_a_start_after_this_machines_clock_is_not_zero_hours():
    skewed = entry({"nvidia.com/gpu": "2"}, started="2025-06-15T15:07:00Z")  # 20 s after NOW
    assert allocated_hours(skewed, NOW) is None and render.gpu_hours(skewed, NOW) == "?"
    assert "later than this machine's clock" in render.gpu_hours_words(skewed, NOW).plain


def test_the_column_only_from_140_columns_and_reason_keeps_its_room():
    assert "hours" not in [c.key for c in pod_columns(True, 80)]
    assert "hours" not in [c.key for c in pod_columns(False, 139)]
    reason = {c.key: c.width for c in pod_columns(False, 120)}["reason"]
    assert {c.key: c.width for c in pod_columns(False, 140)}["reason"] >= reason  # a bad GPU's words are not cut for it
    columns = pod_columns(False, 140)
    assert [c.label for c in columns][-2:] == ["GPU-H", "REASON"]
    row = pod_row(entry({"nvidia.com/gpu": "4"}), "2h", False, widths(columns), hours="8.0")
    assert len(row) == len(columns) and row[-2].plain.strip() == "8.0"
    assert len(pod_row(entry({"nvidia.com/gpu": "4"}), "2h", False, widths(pod_columns(False, 139)))) == len(pod_columns(False, 139))
