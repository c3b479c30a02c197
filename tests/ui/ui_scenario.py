"""Small, fixed clusters for the UI tests and snapshots (every time relative to NOW).

`gpu_cluster()`: four GPU nodes (plain, MIG mixed, time-sliced, one cordoned
with an unhealthy GPU whose plugin crash-loops or is missing), a CPU node, the static device plugin on each GPU node,
GPU pods (one pending with the scheduler's reason) and a few events.
`hostile_cluster()`: the same shape, with markup, ANSI escapes, control
characters and very long strings wherever the cluster can put text.
"""
from __future__ import annotations

from datetime import datetime, timezone

from gputui.sim import builders as b

NOW = datetime(2025, 6, 1, 12, 0, 0, tzinfo=timezone.utc)
NOW_TS = NOW.timestamp()
DAY = 86400.0
PLUGIN_NS = "kube-system"
PLUGIN_LABELS = {"name": "nvidia-device-plugin-ds"}
PLUGIN_CONTAINER = "nvidia-device-plugin-ctr"
PLUGIN_IMAGE = "nvcr.io/nvidia/k8s-device-plugin:v0.17.1"
CUDA_IMAGE = "nvcr.io/nvidia/pytorch:24.05-py3"

PENDING_REASON = (
    "0/5 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, "
    "4 Insufficient nvidia.com/gpu. preemption: 0/5 nodes are available: 5 No preemption victims found for incoming pod."
)


def plugin_pod_name(node: str) -> str:
    return f"nvidia-device-plugin-daemonset-{b.suffix('plugin', node)}"


def _node(name: str, index: int, labels: dict[str, str], resources: dict[str, tuple[int, int]], **kw: object) -> dict:
    return b.node(name, index, labels=labels, extra_resources=resources, now=NOW, **kw)


def _gpu_pod(name: str, namespace: str, node: dict | None, index: int, slot: int, gpus: dict[str, int], age_s: float, **kw: object) -> dict:
    ctr = b.container("main", CUDA_IMAGE, limits={k: str(v) for k, v in gpus.items()})
    pod = b.pod(name, namespace, [ctr], node_name=node["metadata"]["name"] if node else None, age_s=age_s, now=NOW, **kw)
    if node is not None:
        b.set_running(pod, node, index, slot, started_s=age_s - 30, now=NOW)
    return pod


def gpu_cluster(*, node_name_prefix: str = "", text: dict[str, str] | None = None, crash_loop: bool = True) -> list[dict]:
    """The objects; `text` overrides the strings hostile_cluster() poisons. With crash_loop, a100-2's
    plugin crash-loops (the simulated kubelet keeps restarting it); without, it has no plugin pod
    at all, so nothing changes by itself (snapshots)."""
    text = text or {}
    p = node_name_prefix
    nodes = [
        _node(f"{p}a100-1", 0, b.gfd_labels("NVIDIA-A100-SXM4-80GB", 8, operator=False), {"nvidia.com/gpu": (8, 8)}),
        _node(
            f"{p}h100-mig-1", 1,
            {**b.gfd_labels("NVIDIA-H100-80GB-HBM3", 2, operator=False, mig_strategy="mixed"),
             **b.mig_labels("NVIDIA-H100-80GB-HBM3", {"1g.10gb": 7, "3g.40gb": 2})},
            {"nvidia.com/gpu": (0, 0), "nvidia.com/mig-1g.10gb": (7, 7), "nvidia.com/mig-3g.40gb": (2, 2)},
        ),
        _node(
            f"{p}t4-shared-1", 2,
            b.gfd_labels("Tesla-T4", 1, operator=False, replicas=4, sharing="time-slicing", renamed_shared=True),
            {"nvidia.com/gpu.shared": (4, 4)},
        ),
        _node(f"{p}a100-2", 3, b.gfd_labels("NVIDIA-A100-SXM4-80GB", 8, operator=False), {"nvidia.com/gpu": (8, 7)}, unschedulable=True),
        _node(f"{p}cpu-1", 4, {}, {}),
    ]
    by_name = {n["metadata"]["name"]: (i, n) for i, n in enumerate(nodes)}
    objects: list[dict] = [*nodes]

    example = None
    for i, node in enumerate(nodes[:4]):
        name = node["metadata"]["name"]
        if name.endswith("a100-2") and not crash_loop:
            continue
        ctr = b.container(PLUGIN_CONTAINER, PLUGIN_IMAGE)
        pod = b.pod(plugin_pod_name(name), PLUGIN_NS, [ctr], node_name=name, labels=dict(PLUGIN_LABELS),
                    owner=("apps/v1", "DaemonSet", "nvidia-device-plugin-daemonset"), age_s=20 * DAY, now=NOW)
        b.set_running(pod, node, i, 0, started_s=20 * DAY, now=NOW)
        if name.endswith("a100-2"):
            status = pod["status"]["containerStatuses"][0]
            status["ready"] = False
            status["restartCount"] = 14
            status["state"] = {"waiting": {"reason": "CrashLoopBackOff", "message": text.get("crash", "back-off 5m0s restarting failed container")}}
            pod["status"]["conditions"] = [c if c["type"] not in ("Ready", "ContainersReady") else {**c, "status": "False"} for c in pod["status"]["conditions"]]
        objects.append(pod)
        example = pod
    objects.append(b.daemonset("nvidia-device-plugin-daemonset", PLUGIN_NS, dict(PLUGIN_LABELS), example, now=NOW))

    a100_i, a100 = by_name[f"{p}a100-1"]
    mig_i, mig = by_name[f"{p}h100-mig-1"]
    t4_i, t4 = by_name[f"{p}t4-shared-1"]
    a2_i, a2 = by_name[f"{p}a100-2"]
    pending = _gpu_pod(text.get("pending_name", "llm-pretrain-0"), "ml-training", None, 0, 0, {"nvidia.com/gpu": 16}, 600)
    pending["status"]["conditions"] = [
        b.pod_condition("PodScheduled", "False", b.ago(590, NOW), reason="Unschedulable", message=text.get("reason", PENDING_REASON))
    ]
    objects += [
        _gpu_pod(text.get("pod_name", "finetune-a100-0"), "ml-training", a100, a100_i, 1, {"nvidia.com/gpu": 6}, 2 * 3600,
                 labels={"team": text.get("label", "nlp")}),
        _gpu_pod("whisper-asr-7f9c4", "inference", mig, mig_i, 1, {"nvidia.com/mig-1g.10gb": 2}, 3 * DAY),
        _gpu_pod("embeddings-5d8f2", "inference", mig, mig_i, 2, {"nvidia.com/mig-3g.40gb": 1}, 2 * DAY),
        _gpu_pod("stable-diffusion-x8cgq", "inference", t4, t4_i, 1, {"nvidia.com/gpu.shared": 3}, 4 * DAY),
        _gpu_pod("notebook-alice-0", "research", a2, a2_i, 1, {"nvidia.com/gpu": 2}, 5 * 3600),
        pending,
        b.event(pending, "FailedScheduling", text.get("event", PENDING_REASON), kind="Warning", component="default-scheduler",
                last=b.ago(60, NOW), first=b.ago(590, NOW), count=9),
        b.event(a2, "NodeNotSchedulable", text.get("node_event", f"Node {p}a100-2 status is now: NodeNotSchedulable"),
                component="kubelet", last=b.ago(3600, NOW), first=b.ago(3600, NOW)),
    ]
    return objects


HOSTILE = {
    "pod_name": "evil-[bold red]pwned[/]",
    "pending_name": "pend-[link=http://x]click[/link]",
    "label": "\x1b[31mred\x1b[0m[b]",
    "reason": "[red]0/5 nodes[/red] \x1b]0;title\x07are\x00 available\r\n" + "x" * 5000,
    "event": "[bold]FailedScheduling[/bold] \x1b[2J\x1b[Hcleared? \u202eevil",
    "node_event": "[i]node[/i] \x07\x08\x7f message",
    "crash": "[blink]back-off[/blink]\x1b[5m",
}


def hostile_cluster() -> list[dict]:
    return gpu_cluster(text=HOSTILE)


HOSTILE_LOG_LINES = [
    b"[bold red]not markup[/] \x1b[31mred\x1b[0m",
    b"ctrl \x00\x07\x08\x1b[2J done",
    b"bad utf-8 \xff\xfe\xfd end",
    b"y" * (1 << 20),
    "bidi \u202eevil tab\there".encode(),
]
