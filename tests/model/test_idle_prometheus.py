"""Idle allocated GPUs from a real Prometheus (Debian's `prometheus`, started here) scraping the simulated
exporters through the API server's pod proxy: the figures against the exporters' profiles and against
Prometheus' own raw samples, found through the service proxy or given as a URL, with the exporter's pod
labels as they come (`pod`) and as a ServiceMonitor's target labels rename them (`exported_pod`)."""
from __future__ import annotations

import asyncio
import json
import math
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from datetime import datetime

import pytest
import pytest_asyncio

from gputui.kube.config import connect
from gputui.kube.idle import PROMETHEUS, IdleSettings, IdleTracker, holders
from gputui.kube.model import ClusterModel
from gputui.sim import SimCluster
from gputui.sim import builders as b
from gputui.sim.cluster import ADMIN_TOKEN
from gputui.sim.apiserver.proxy import BACKEND_ANNOTATION
from gputui.sim.apiserver.tls import authority
from gputui.sim.exporters.dcgm import UTIL_ANNOTATION
from tests.model.scenario import FAST, until
from tests.model.test_idle import MIG_PERCENT, memory_of, profiled
from tests.model.test_report import report_of

pytestmark = pytest.mark.asyncio(loop_scope="module")
PROMETHEUS_BINARY = shutil.which("prometheus")
WINDOW = 60
RENAMED_NODE = "gpu-2"  # its exporter is scraped with target labels namespace and pod, as a ServiceMonitor's are


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape_config(sim: SimCluster, tmp_path) -> str:
    """One job per exporter pod, through the API server's pod proxy with the admin token."""
    (tmp_path / "ca.pem").write_bytes(authority().pem)
    (tmp_path / "token").write_text(ADMIN_TOKEN)
    jobs = []
    for pod in sim.store.objects("pods", "gpu-operator"):
        name, node = pod["metadata"]["name"], pod["spec"].get("nodeName")
        if not name.startswith("nvidia-dcgm-exporter-"):
            continue
        labels = f", labels: {{namespace: gpu-operator, pod: {name}}}" if node == RENAMED_NODE else ""
        jobs.append(f"""  - job_name: {name}
    scheme: https
    tls_config: {{ca_file: {tmp_path}/ca.pem}}
    authorization: {{credentials_file: {tmp_path}/token}}
    metrics_path: /api/v1/namespaces/gpu-operator/pods/{name}:9400/proxy/metrics
    static_configs: [{{targets: ["127.0.0.1:{sim.port}"]{labels}}}]
""")
    return "global: {scrape_interval: 1s, evaluation_interval: 1s}\nscrape_configs:\n" + "".join(jobs)


def ask(port: int, query: str, at: float) -> list[dict]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": query, "time": f"{at:.3f}"})
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.load(resp)["data"]["result"]


class Setup:
    def __init__(self, sim: SimCluster, objects: list[dict], stop_at: float, port: int) -> None:
        self.sim, self.objects, self.stop_at, self.port = sim, objects, stop_at, port
        self.url = f"http://127.0.0.1:{port}"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def setup(tmp_path_factory):
    if PROMETHEUS_BINARY is None:
        pytest.skip("the prometheus binary is not installed (Debian's prometheus package: apt-get install prometheus; .ci/run installs it)")
    tmp_path = tmp_path_factory.mktemp("prometheus")
    # ml/batch-eval-0 busy until Prometheus has seen it busy (its start takes seconds on a loaded machine), then stopped
    objects, _ = profiled(stop_in=3600.0)
    port = free_port()
    # Prometheus in the cluster, where gputui looks for it by default, behind the API server's service proxy.
    objects.append(b.service("prometheus-k8s", "monitoring", {"app.kubernetes.io/name": "prometheus"}, [("web", 9090, 9090)],
                             annotations={BACKEND_ANNOTATION: f"127.0.0.1:{port}"}))
    objects.insert(0, b.namespace("monitoring"))
    async with SimCluster(objects, run_controllers=False) as sim:
        (tmp_path / "prometheus.yml").write_text(scrape_config(sim, tmp_path))
        log = (tmp_path / "prometheus.log").open("w")
        process = subprocess.Popen(  # noqa: ASYNC220  (started once; it runs beside the test)
            [PROMETHEUS_BINARY, f"--config.file={tmp_path}/prometheus.yml", f"--storage.tsdb.path={tmp_path}/data",
             f"--web.listen-address=127.0.0.1:{port}"], stdout=subprocess.DEVNULL, stderr=log)
        try:
            def scraped() -> bool:
                try:
                    found = ask(port, "count_over_time(DCGM_FI_DEV_GPU_UTIL[1m])", time.time())
                except OSError:
                    return False
                return len(found) >= 10 and all(float(r["value"][1]) >= 3 for r in found)  # every GPU, three samples each

            for _ in range(150):
                if await asyncio.to_thread(lambda: len([v for _, v in raw_samples(port, "batch-eval-0", time.time()) if v >= 5]) >= 3):
                    break
                await asyncio.sleep(0.2)
            else:
                raise AssertionError(f"Prometheus never saw the job busy: {(tmp_path / 'prometheus.log').read_text()[-2000:]}")
            stop_at = stop_soon(sim, objects, stop_in=2.0)
            await until(lambda: time.time() > stop_at + 4, timeout=20, what="the job stopped 4 s ago")
            for _ in range(100):
                if await asyncio.to_thread(scraped):
                    break
                await asyncio.sleep(0.2)
            else:
                raise AssertionError(f"Prometheus scraped too little: {(tmp_path / 'prometheus.log').read_text()[-2000:]}")
            yield Setup(sim, objects, stop_at, port)
        finally:
            process.terminate()
            process.wait(timeout=10)
            log.close()


async def view_of(setup: Setup, settings: IdleSettings):
    async with await connect(str(setup.sim.kubeconfig_path)) as conn:
        async with ClusterModel(conn.api, **FAST) as model:
            assert await model.wait_synced(10)
            tracker = IdleTracker(conn.api, settings, scope=conn.server)
            view = await tracker.refresh(holders(model))
            requests = tracker.prometheus.requests if tracker.prometheus else 0
            await tracker.close()
            return view, requests


def raw_samples(port: int, pod: str, at: float) -> list[tuple[float, float]]:
    """Prometheus' own samples of the pod's first GPU in the window (Prometheus' names or the renamed ones)."""
    try:
        found = [*ask(port, f'DCGM_FI_DEV_GPU_UTIL{{pod="{pod}"}}[{WINDOW}s]', at),
                 *ask(port, f'DCGM_FI_DEV_GPU_UTIL{{exported_pod="{pod}"}}[{WINDOW}s]', at)]
    except OSError:  # Prometheus not listening yet
        return []
    if not found:
        return []
    series = sorted(found, key=lambda r: r["metric"]["gpu"])[0]
    return [(float(t), float(v)) for t, v in series["values"]]


def stop_soon(sim: SimCluster, objects: list[dict], stop_in: float) -> float:
    """ml/batch-eval-0 stops using its GPUs `stop_in` seconds from now (its profile counts from its start, in whole
    seconds): the pod's annotation changed in the store, which the exporters read at each scrape. When it stops."""
    batch = next(o for o in objects if o["kind"] == "Pod" and o["metadata"]["name"] == "batch-eval-0")
    started = datetime.fromisoformat(batch["status"]["startTime"]).timestamp()
    after = math.ceil(time.time() + stop_in - started)
    profile = f"stopped-after-{after}s"
    batch["metadata"]["annotations"][UTIL_ANNOTATION] = profile
    sim.store.mutate("pods", "ml", "batch-eval-0", lambda pod: pod["metadata"]["annotations"].update({UTIL_ANNOTATION: profile}))
    return started + after


async def test_the_figures_follow_the_profiles_and_prometheus_own_samples(setup):
    view, requests = await view_of(setup, IdleSettings(window=WINDOW, prometheus=setup.url))
    assert (view.source, view.note, requests) == (PROMETHEUS, None, 1)  # one query for the whole cluster
    pods = {(p.namespace, p.name): p for p in view.pods}
    h100, a100 = memory_of(setup.objects, "gpu-1"), memory_of(setup.objects, "gpu-2")

    trainer = pods[("ml", "llm-train-0")]
    assert (trainer.gpus, trainer.idle_s, trainer.mean_util, trainer.peak_util, trainer.fb_used_mib) == (4, 0.0, 90.0, 90.0, 4 * round(h100 * 0.74))
    notebook = pods[("ml", "notebook-alice")]
    assert (notebook.mean_util, notebook.peak_util, notebook.fb_used_mib, notebook.idle_at_least) == (0.0, 0.0, round(h100 * 0.2), True)
    assert notebook.idle_s == pytest.approx(notebook.covered_s) and 3 <= notebook.covered_s <= WINDOW
    assert pods[("research", "notebook-bob")].mean_util == pytest.approx(MIG_PERCENT)  # GR engine activity on MIG
    assert pods[("research", "sweep-0")].mean_util == 3.0 and pods[("research", "sweep-0")].idle_at_least

    # ml/batch-eval-0 (on the node whose labels Prometheus renamed) against Prometheus' raw samples.
    batch = pods[("ml", "batch-eval-0")]
    samples = raw_samples(setup.port, "batch-eval-0", view.at)
    assert all(v == (90.0 if t < setup.stop_at else 0.0) for t, v in samples if abs(t - setup.stop_at) > 0.2)  # the profile
    last_busy = max(t for t, v in samples if v >= 5)
    assert batch.mean_util == pytest.approx(sum(v for _, v in samples) / len(samples), abs=0.01)
    assert batch.peak_util == 90.0 and not batch.idle_at_least and batch.fb_used_mib == 2 * round(a100 * 0.74)
    assert batch.idle_s == pytest.approx(view.at - last_busy, abs=1.5)  # the query's 1 s steps
    assert batch.idle_s == pytest.approx(view.at - setup.stop_at, abs=2.5)


async def test_the_renamed_pod_labels_are_the_workloads(setup):
    renamed = ask(setup.port, 'DCGM_FI_DEV_GPU_UTIL{exported_pod!=""}', time.time())
    assert {r["metric"]["exported_pod"] for r in renamed} == {"batch-eval-0", "sweep-0"}
    assert {r["metric"]["pod"] for r in renamed} == {p["metadata"]["name"] for p in setup.sim.store.objects("pods", "gpu-operator")
                                                     if p["spec"].get("nodeName") == RENAMED_NODE and "dcgm" in p["metadata"]["name"]}


async def test_found_through_the_api_servers_service_proxy_by_default(setup, make_kubectl):
    # A job that stopped using its GPUs has a mean that falls as time passes: the proxied view's, read
    # between two direct ones, lies between theirs; every other figure is the same.
    before, _ = await view_of(setup, IdleSettings(window=WINDOW, prometheus=setup.url))
    view, requests = await view_of(setup, IdleSettings(window=WINDOW))  # monitoring/prometheus-k8s:9090
    direct, _ = await view_of(setup, IdleSettings(window=WINDOW, prometheus=setup.url))
    assert (view.source, view.note, requests) == (PROMETHEUS, None, 1)
    # by name: the order is worst first, by idle GPU-seconds, and a stopped job's grow between reads
    assert {p.name: (p.gpus, p.peak_util, p.fb_used_mib) for p in view.pods} == {
        p.name: (p.gpus, p.peak_util, p.fb_used_mib) for p in direct.pods}
    assert len(view.pods) == len(direct.pods) == 5
    means_before, means_after = ({p.name: p.mean_util for p in v.pods} for v in (before, direct))
    for proxied in view.pods:
        low, high = sorted((means_before[proxied.name], means_after[proxied.name]))
        assert low <= proxied.mean_util <= high, (proxied.name, proxied.mean_util, low, high)
    # The real kubectl reads Prometheus through the same service proxy.
    kubectl = make_kubectl(setup.sim.kubeconfig_path)
    raw = json.loads(await asyncio.to_thread(kubectl, "get", "--raw", "/api/v1/namespaces/monitoring/services/prometheus-k8s:9090/proxy/api/v1/query?query=up"))
    assert raw["status"] == "success" and len(raw["data"]["result"]) == 3


async def test_the_report_says_the_same(setup):
    # A job that stopped using its GPUs has a mean that falls as time passes: the report's, read between
    # two views, lies between theirs; every other figure is the same.
    before, _ = await view_of(setup, IdleSettings(prometheus=setup.url))
    rc, out, err = await report_of("--kubeconfig", str(setup.sim.kubeconfig_path), "-o", "json", "--prometheus", setup.url)
    assert rc == 0, err
    idle = json.loads(out)["idle"]
    view, _ = await view_of(setup, IdleSettings(prometheus=setup.url))
    assert (view.source, view.note, idle["source"], idle["window_s"]) == (PROMETHEUS, None, PROMETHEUS, 3600)
    assert abs(idle["covered_s"] - view.covered_s) <= 2
    reported = {p["name"]: (p["gpus"], p["peak_util"], p["fb_used_mib"]) for p in idle["pods"]}
    assert reported == {p.name: (p.gpus, round(p.peak_util, 1), round(p.fb_used_mib)) for p in view.pods}
    means = {p["name"]: p["mean_util"] for p in idle["pods"]}
    for first, last in zip(before.pods, sorted(view.pods, key=lambda p: [q.name for q in before.pods].index(p.name)), strict=True):
        low, high = sorted((round(first.mean_util, 1), round(last.mean_util, 1)))
        assert low - 0.1 <= means[first.name] <= high + 0.1, (first.name, means[first.name], low, high)
    rc, out, err = await report_of("--kubeconfig", str(setup.sim.kubeconfig_path), "-o", "json", "--prometheus", "monitoring/prometheus:9090")
    assert json.loads(out)["idle"]["source"] == "exporters"
    assert err == 'gputui report: warning: Prometheus monitoring/prometheus:9090: services "prometheus" not found (404); using gputui\'s own exporter samples\n'
