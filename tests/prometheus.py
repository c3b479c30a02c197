"""Debian's real `prometheus` for the tests: started on a free loopback port with a config the test writes,
asked through its HTTP API, stopped at the end. Tests skip, saying why, where the binary is not installed."""
from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from gputui.kube import prometheus as client
from gputui.sim.cluster import ADMIN_TOKEN
from gputui.sim.apiserver.tls import authority

BINARY = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
MISSING = "the prometheus binary is not installed (Debian's prometheus package: apt-get install prometheus; .ci/run installs it)"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def exporter_jobs(sim, tmp_path: Path, labels: dict[str, str] | None = None) -> str:
    """One scrape job per DCGM exporter pod of the simulated cluster, through the API server's pod proxy
    with the admin token (as a Prometheus outside the cluster reaches them); `labels` on every target."""
    (tmp_path / "ca.pem").write_bytes(authority().pem)
    (tmp_path / "token").write_text(ADMIN_TOKEN)
    extra = "".join(f", {k}: {v}" for k, v in (labels or {}).items())
    jobs = []
    for pod in sim.store.objects("pods", "gpu-operator"):
        name = pod["metadata"]["name"]
        if name.startswith("nvidia-dcgm-exporter-"):
            jobs.append(f"""  - job_name: {sim.context}-{name}
    scheme: https
    tls_config: {{ca_file: {tmp_path}/ca.pem}}
    authorization: {{credentials_file: {tmp_path}/token}}
    metrics_path: /api/v1/namespaces/gpu-operator/pods/{name}:9400/proxy/metrics
    static_configs: [{{targets: ["127.0.0.1:{sim.port}"], labels: {{job: dcgm-exporter{extra}}}}}]
""")
    return "".join(jobs)


def ksm_job(name: str, url: str, labels: dict[str, str] | None = None) -> str:
    """kube-state-metrics' scrape job, honor_labels as its ServiceMonitors set it (its namespace and pod
    labels are the objects', not the target's)."""
    extra = "".join(f", {k}: {v}" for k, v in (labels or {}).items())
    return f"""  - job_name: {name}
    honor_labels: true
    static_configs: [{{targets: ["{url.removeprefix('http://')}"], labels: {{job: kube-state-metrics{extra}}}}}]
"""


class Prometheus:
    def __init__(self, port: int, workdir: Path) -> None:
        self.port, self.workdir = port, workdir
        self.url = f"http://127.0.0.1:{port}"

    def ask(self, query: str, at: float | None = None) -> list[dict]:
        params = {"query": query, "time": f"{time.time() if at is None else at:.3f}"}
        with urllib.request.urlopen(f"{self.url}/api/v1/query?" + urllib.parse.urlencode(params), timeout=10) as resp:
            return json.load(resp)["data"]["result"]

    def log(self) -> str:
        return (self.workdir / "prometheus.log").read_text()[-3000:]

    async def until(self, ready: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
        """Wait (polling every 0.2 s) until `ready()`, asked in a thread, is true."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if await asyncio.to_thread(ready):
                    return
            except OSError:
                pass
            await asyncio.sleep(0.2)
        raise AssertionError(f"Prometheus: {what} not within {timeout:g} s: {self.log()}")


class WithoutRules(client.Prometheus):
    """gputui's client of a Prometheus, whose presence query (kube/usage.py's `coverage`) finds none of the rules
    named in `hidden` (its stats' names): what a rules file older than them answers, the other rules and series there."""

    def __init__(self, where: str, hidden: tuple[str, ...] = ()) -> None:
        super().__init__(where)
        self.hidden = hidden

    async def query(self, expr: str, at: float, timeout: float = client.TIMEOUT) -> list[dict]:
        return [item for item in await super().query(expr, at, timeout) if (item.get("metric") or {}).get(client.STAT) not in self.hidden]


def _write_config(workdir: Path, config: str, interval: str, rules: str | None, external_labels: dict[str, str] | None) -> None:
    workdir.mkdir(parents=True, exist_ok=True)
    head = f"global: {{scrape_interval: {interval}, evaluation_interval: {interval}"
    if external_labels:
        head += ", external_labels: {" + ", ".join(f"{k}: {v}" for k, v in external_labels.items()) + "}"
    head += "}\n"
    if rules is not None:
        (workdir / "rules.yml").write_text(rules)
        head += f"rule_files: [{workdir}/rules.yml]\n"
    (workdir / "prometheus.yml").write_text(head + "scrape_configs:\n" + config)


@contextlib.asynccontextmanager
async def running(workdir: Path, config: str, *, interval: str = "1s", rules: str | None = None,
                  external_labels: dict[str, str] | None = None, port: int | None = None) -> AsyncIterator[Prometheus]:
    """A Prometheus scraping and evaluating every `interval`, with these scrape_configs (the YAML list's
    items) and, given, a rules file."""
    if BINARY is None:
        pytest.skip(MISSING)
    _write_config(workdir, config, interval, rules, external_labels)
    port = port or free_port()
    with (workdir / "prometheus.log").open("w") as log:
        process = subprocess.Popen(  # noqa: ASYNC220  (started once; it runs beside the test)
            [BINARY, f"--config.file={workdir}/prometheus.yml", f"--storage.tsdb.path={workdir}/data",
             f"--web.listen-address=127.0.0.1:{port}"], stdout=subprocess.DEVNULL, stderr=log)
        try:
            server = Prometheus(port, workdir)
            await server.until(lambda: server.ask("up") is not None, "ready")
            yield server
        finally:
            process.terminate()
            process.wait(timeout=10)
