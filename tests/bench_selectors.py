"""What asking only for what the screens need saves: bytes the API server sends (a script, not a test).

    python tests/bench_selectors.py                     # 2,000 nodes' worth: 20,000 pods, a minute of churn
    python tests/bench_selectors.py --pods 2000 --churn 120 --seconds 10   # smaller, quicker

A synthetic cluster (gputui.sim.scenarios.generated: GPU and CPU nodes, web, batch, training and serving
pods) with many finished Job pods and the events a busy cluster keeps (each pod's Scheduled,
Pulled, Created, Started; the nodes'; FailedScheduling for the pods that wait). The model
(nodes, pods, events) makes its initial sync, then follows a minute of churn: Job pods created,
scheduled, run and finished, with their events, and old finished pods deleted (as the TTL
controller does). The simulator counts the bytes of every list and watch (ApiCounts.bytes_sent).

Run three ways, the rest alike:
  none            every watch unfiltered (gputui before)
  pods            pods: status.phase!=Succeeded,status.phase!=Failed
  pods+events     and events: involvedObject.kind=Node, and FailedScheduling about pods (gputui now)
Each way must end with the same GPU view (the kept pods, the nodes' summaries, pending pods' reasons):
the bench checks it, then prints the bytes.
"""
from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gputui.kube.config import connect  # noqa: E402
from gputui.kube.model import EVENTS, NODES, NODE_EVENTS, PODS, SCHEDULING_EVENTS, UNFINISHED_PODS, ClusterModel  # noqa: E402
from gputui.sim import builders as b  # noqa: E402
from gputui.sim.cluster import SimCluster  # noqa: E402
from gputui.sim.scenarios.generated import generate  # noqa: E402

WAYS = {
    "none": {},
    "pods": {PODS: (UNFINISHED_PODS,)},
    "pods+events": {PODS: (UNFINISHED_PODS,), EVENTS: (NODE_EVENTS, SCHEDULING_EVENTS)},
}
POD_EVENTS = ("Scheduled", "Pulled", "Created", "Started")


def cluster(nodes: int, pods: int, finished_share: float, seed: int = 7) -> list[dict]:
    """The synthetic cluster, a share of its CPU batch and web pods finished, and their events."""
    rng = random.Random(seed)
    objects = generate(nodes, pods)
    events = []
    for obj in objects:
        if obj.get("kind") == "Node":
            events.append(b.event(obj, "NodeReady", f"Node {obj['metadata']['name']} status is now: NodeReady", component="kubelet"))
        if obj.get("kind") != "Pod":
            continue
        gpu = "nvidia.com/gpu" in str(obj["spec"]["containers"][0].get("resources"))
        if not gpu and obj["status"].get("phase") == "Running" and rng.random() < finished_share:
            obj["status"]["phase"] = "Succeeded"
        if obj["status"].get("phase") == "Pending":
            events.append(b.event(obj, "FailedScheduling", "0/5 nodes are available: 5 Insufficient nvidia.com/gpu.",
                                  kind="Warning", component="default-scheduler"))
            continue
        for serial, reason in enumerate(POD_EVENTS):
            events.append(b.event(obj, reason, f"{reason} {obj['metadata']['name']}", serial=serial))
    return objects + events


def job_pod(template: dict, n: int) -> dict:
    """A new pod like the template (its containers, labels, managedFields), not yet bound."""
    meta = {k: v for k, v in template["metadata"].items() if k not in ("resourceVersion", "uid", "creationTimestamp")}
    spec = {k: v for k, v in template["spec"].items() if k != "nodeName"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {**meta, "name": f"churn-{n:05d}"}, "spec": spec,
            "status": {"phase": "Pending", "qosClass": "Burstable"}}


async def churn(sim: SimCluster, lifecycles: int, seconds: float) -> int:
    """`lifecycles` Job pods, spread over `seconds`: created, bound, running, finished (a GPU pod one in
    five), their events, and the oldest finished pod deleted for each one that finishes. Returns the
    resourceVersion of the last pod to finish: the last change every way's pods watch is sent (a filtered
    one as DELETED), where the store's own last version may be a change a filtered watch never sees."""
    last_finished = 0
    store = sim.store
    pods = store.objects("pods")
    batch = next(p for p in pods if p["metadata"]["name"].startswith("batch-"))
    train = next(p for p in pods if p["metadata"]["name"].startswith("train-"))
    nodes = [n["metadata"]["name"] for n in store.objects("nodes")]
    finished = [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in pods if p["status"].get("phase") == "Succeeded"]
    step = seconds / max(1, lifecycles)
    started = time.monotonic()
    for n in range(lifecycles):
        pod = store.create("pods", job_pod(train if n % 5 == 0 else batch, n))
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        node = nodes[n % len(nodes)]
        store.mutate("pods", ns, name, lambda p, node=node: p["spec"].update(nodeName=node))
        store.mutate("pods", ns, name, lambda p: p["status"].update(phase="Running", hostIP="10.0.0.1"))
        for serial, reason in enumerate(POD_EVENTS):
            store.create("events", b.event(pod, reason, f"{reason} {name}", serial=serial))
        done = store.mutate("pods", ns, name, lambda p: p["status"].update(phase="Succeeded"))
        last_finished = int(done["metadata"]["resourceVersion"])
        finished.append((ns, name))
        if len(finished) > 1:
            store.delete("pods", *finished.pop(0))  # the TTL controller: the oldest finished pod goes
        await asyncio.sleep(max(0.0, started + (n + 1) * step - time.monotonic()))
    return last_finished


def view(model: ClusterModel) -> tuple:
    """What the screens show from pods and events: kept pods, node summaries' usage, pending pods' reasons."""
    summaries = tuple((s.name, tuple((k, u.allocated) for k, u in s.usage.items())) for s in model.node_summaries())
    reasons = tuple((g.pod.key, g.reason) for g in model.gpu_pods() if g.pod.node is None)
    return tuple(sorted(model.pods.records)), summaries, reasons


async def one_way(name: str, objects: list[dict], lifecycles: int, seconds: float) -> dict:
    async with SimCluster(objects, run_controllers=False) as sim:
        async with await connect(str(sim.kubeconfig_path)) as conn:
            model = ClusterModel(conn.api, kinds=(NODES, PODS, EVENTS), selectors=WAYS[name])
            async with model:
                assert await model.wait_synced(600), model.states
                synced = sim.api_counts.bytes_sent
                kept_events = len(model.events.records)
                last = await churn(sim, lifecycles, seconds)
                deadline = time.monotonic() + 60
                while any(r.resource_version is None or int(r.resource_version) < last for r in (model.reflectors[PODS],)):
                    if time.monotonic() > deadline:
                        raise SystemExit(f"{name}: the model did not follow the churn")
                    await asyncio.sleep(0.05)
                await asyncio.sleep(1.0)  # the events watches' last lines
                return {"sync": synced, "churn": sim.api_counts.bytes_sent - synced, "view": view(model),
                        "events_kept": kept_events, "pods_kept": len(model.pods.records)}


def mb(n: int) -> str:
    return f"{n / 1e6:8.2f} MB"


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, default=20_000)
    parser.add_argument("--finished", type=float, default=0.5, help="share of the CPU pods that are finished Jobs")
    parser.add_argument("--churn", type=int, default=600, help="Job pods run during the churn (600: ten a second for a minute)")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the churn lasts")
    args = parser.parse_args()
    objects = cluster(args.nodes, args.pods, args.finished)
    counts = {kind: sum(1 for o in objects if o.get("kind") == kind) for kind in ("Node", "Pod", "Event")}
    finished = sum(1 for o in objects if o.get("kind") == "Pod" and o["status"].get("phase") == "Succeeded")
    print(f"cluster: {counts['Node']} nodes, {counts['Pod']} pods ({finished} finished), {counts['Event']} events; "
          f"churn: {args.churn} Job pods over {args.seconds:g} s")
    results = {}
    for name in WAYS:
        results[name] = await one_way(name, objects, args.churn, args.seconds)
        r = results[name]
        print(f"  {name:12} initial sync {mb(r['sync'])}   churn {mb(r['churn'])}   total {mb(r['sync'] + r['churn'])}"
              f"   (kept: {r['pods_kept']} pods, {r['events_kept']} events after the sync)", flush=True)
    views = {name: r["view"] for name, r in results.items()}
    assert len(set(views.values())) == 1, "the ways disagree on what the screens show"
    before = results["none"]
    for name in ("pods", "pods+events"):
        r = results[name]
        print(f"  {name} saves {1 - r['sync'] / before['sync']:6.1%} of the sync's bytes, "
              f"{1 - r['churn'] / before['churn']:6.1%} of the churn's, against none")
    print("  the three ways show the same pods, node figures and pending reasons")


if __name__ == "__main__":
    asyncio.run(main())
