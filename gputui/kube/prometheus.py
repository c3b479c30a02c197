"""Prometheus' query API, the one client gputui asks it through (kube/usage.py, kube/fleet_prometheus.py).

    source = Prometheus("https://thanos.example.com")          # or "monitoring/prometheus-k8s:9090" with a cluster's client
    items = await source.query('count by (cluster) (up)', at=time.time())
    source.samples                                           # samples Prometheus read for the queries so far (stats=all)

Any Prometheus query API answers: Prometheus itself, Thanos, Mimir, VictoriaMetrics. No Textual here.
"""
from __future__ import annotations

import asyncio
import math
from typing import Any

import orjson

from .client import Client, HttpError, Timeout
from .config import describe_network_error, status_message

TIMEOUT = 60.0
STAT = "gputui_stat"  # the label that tells a tagged query's parts apart


class PrometheusError(Exception):
    """Prometheus cannot answer; the message is one line saying why."""


def tagged(stats: dict[str, str]) -> str:
    """One query for several expressions: each result labelled gputui_stat=NAME."""
    return " or ".join(f'label_replace(({expr}), "{STAT}", "{name}", "", "")' for name, expr in stats.items())


def value_of(item: dict[str, Any]) -> float | None:
    """An instant vector item's value; None when it is not a number (or NaN)."""
    try:
        value = float(item["value"][1])
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    return None if math.isnan(value) else value


def _results(body: bytes) -> tuple[list[dict[str, Any]], int]:
    try:
        answer = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise PrometheusError("the answer is not JSON") from None
    if not isinstance(answer, dict) or answer.get("status") != "success":
        raise PrometheusError(str(answer.get("error") or "the answer is not a success") if isinstance(answer, dict) else "not a Prometheus answer")
    data = answer.get("data") or {}
    result = data.get("result") or []
    samples = ((data.get("stats") or {}).get("samples") or {}).get("totalQueryableSamples") or 0
    return (result if isinstance(result, list) else []), int(samples) if isinstance(samples, (int, float)) else 0


class Prometheus:
    """Prometheus' query API: at an http(s):// URL, or a service NAMESPACE/NAME[:PORT] through the API server."""

    def __init__(self, where: str, api: Client | None = None) -> None:
        self.where = where
        if where.startswith(("http://", "https://")):
            self.client, self.path, self.own_client = Client(where.rstrip("/")), "/api/v1/query", True
        else:
            namespace, _, service = where.partition("/")
            if not namespace or not service or api is None:
                raise PrometheusError(f"prometheus {where!r}: expected an http(s):// URL, or NAMESPACE/SERVICE[:PORT] with a cluster")
            self.client, self.own_client = api, False
            self.path = f"/api/v1/namespaces/{namespace}/services/{service}/proxy/api/v1/query"
        self.requests = 0
        self.samples = 0  # Prometheus' own count of the samples its answers read (totalQueryableSamples)
        self.bytes = 0  # the answers' bodies
        self.absent = False  # the last answer was 404: no such service (or path)

    async def query(self, expr: str, at: float, timeout: float = TIMEOUT) -> list[dict[str, Any]]:
        """The instant query's result items; PrometheusError with one line saying why there are none."""
        body = await self.answer(expr, at, timeout, stats=True)
        try:
            items, samples = _results(body)
        except PrometheusError as exc:
            raise PrometheusError(f"Prometheus {self.where}: {exc}") from None
        self.samples += samples
        return items

    async def answer(self, expr: str, at: float, timeout: float = TIMEOUT, *, stats: bool = False) -> bytes:
        """The instant query's answer as it came (200); PrometheusError with one line saying why not."""
        self.requests += 1
        where = f"Prometheus {self.where}"
        params = {"query": expr, "time": f"{at:.3f}", "timeout": f"{timeout:g}s", **({"stats": "all"} if stats else {})}
        try:
            resp = await self.client.request("GET", self.path, params=params, timeout=Timeout(total=timeout + 5))
            async with resp:
                body = await resp.read()
        except asyncio.TimeoutError:
            raise PrometheusError(f"{where} did not answer within {timeout + 5:g} s") from None
        except (HttpError, OSError) as exc:
            raise PrometheusError(f"{where}: {describe_network_error(exc)}") from None
        self.bytes += len(body)
        self.absent = resp.status == 404  # no such service (or path)
        if resp.status == 403 and not self.own_client:
            raise PrometheusError(f"{where}: forbidden: cannot get services/proxy in namespace {self.where.partition('/')[0]}")
        if resp.status != 200:
            try:
                answer = orjson.loads(body)
            except orjson.JSONDecodeError:
                answer = None
            error = answer.get("error") if isinstance(answer, dict) else None  # Prometheus' own, else the API server's Status
            raise PrometheusError(f"{where}: {str(error or status_message(body))[:300]} ({resp.status})")
        return body

    async def close(self) -> None:
        if self.own_client:
            await self.client.close()
