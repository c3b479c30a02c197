"""The `pods/proxy` and `services/proxy` subresources, for the simulated DCGM exporters.

    GET /api/v1/namespaces/NS/pods/NAME[:PORT]/proxy/PATH
    GET /api/v1/namespaces/NS/services/NAME[:PORT]/proxy/PATH

Behind the proxy only DCGM exporter containers listen (a container whose image
names dcgm-exporter, on the port of its DCGM_EXPORTER_LISTEN, default 9400);
their `/metrics` is `dcgm.exposition` for the node the pod runs on, the pods
bound there and the current time.  Like the real API server:

- a pod's port is given by number; without one the proxy dials the first port a container declares
  (`ports[0].containerPort` of the first container that has any, as kube-apiserver's pod ResourceLocation),
  else port 80; a pod with no IP yet: 400 "address not allowed";
- a service port is given by name (`:gpu-metrics`) or number (`:9400`); without
  one only an unnamed service port matches; endpoints are the ready pods the
  selector matches, taken in turn (round robin, where the real server picks at
  random);
- a pod whose exporter is not running, or a port nothing listens on: 503
  "error trying to reach service: ... connection refused"; a node that is not
  Ready: 503 "... i/o timeout" (at once, not after the real 30 s).
- a cluster served from a dump (`SimCluster(exporters=False)`) runs nothing: every dial is
  refused, so no reading is made up.

The exporter names pods on its series as its container's flags and environment say
(`--kubernetes-virtual-gpus`, `--nvidia-resource-names`: dcgm.ExporterOptions).
The exporter labels the host `Hostname` (every released dcgm-exporter) unless
the pod is annotated `sim.gputui.io/dcgm-hostname-label: hostname` (newer
builds).  XIDs come from the node annotation `sim.gputui.io/xid`, utilisation
profiles from the pod annotation `sim.gputui.io/gpu-util` (dcgm.py).

A Service annotated `sim.gputui.io/backend: "127.0.0.1:PORT"` stands for a real
server on loopback (a Prometheus the tests start): its proxy forwards GETs,
path and query string, to that address instead of to pods.
"""
from __future__ import annotations

import itertools
import time
from typing import Any

from .. import builders as b
from ..exporters import dcgm
from .store import Store

Obj = dict[str, Any]

HOSTNAME_LABEL_ANNOTATION = "sim.gputui.io/dcgm-hostname-label"
BACKEND_ANNOTATION = "sim.gputui.io/backend"
LOOPBACK = ("127.0.0.1", "localhost", "[::1]")
METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
DEFAULT_EXPORTER_PORT = 9400


class ProxyError(Exception):
    """Answered as a `Status` object by the server."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message


def split_name_port(ident: str, kind: str = "pod") -> tuple[str, str]:
    """`[scheme:]name[:port]` → (name, port); a malformed one is the client's error (400)."""
    parts = ident.split(":")
    if len(parts) == 3 and parts[0] in ("http", "https"):
        parts = parts[1:]
    if len(parts) > 2 or not parts[0]:
        raise ProxyError(400, "BadRequest", f'invalid {kind} request "{ident}"')
    return parts[0], parts[1] if len(parts) == 2 else ""


def _unavailable(message: str) -> ProxyError:
    return ProxyError(503, "ServiceUnavailable", message)


def _exporter_container(pod: Obj) -> Obj | None:
    return next((c for c in (pod.get("spec") or {}).get("containers") or [] if "dcgm-exporter" in c.get("image", "")), None)


def _exporter_port(pod: Obj) -> int | None:
    """The port the pod's DCGM exporter container listens on, if the pod has one."""
    container = _exporter_container(pod)
    if container is None:
        return None
    for env in container.get("env") or []:
        if env.get("name") == "DCGM_EXPORTER_LISTEN" and str(env.get("value", "")).rsplit(":", 1)[-1].isdigit():
            return int(str(env["value"]).rsplit(":", 1)[-1])
    return DEFAULT_EXPORTER_PORT


def _exporter_running(pod: Obj) -> bool:
    if (pod.get("status") or {}).get("phase") != "Running":
        return False
    images = {c.get("name"): c.get("image", "") for c in (pod.get("spec") or {}).get("containers") or []}
    return any(
        "dcgm-exporter" in images.get(cs.get("name"), "") and (cs.get("state") or {}).get("running") is not None
        for cs in (pod.get("status") or {}).get("containerStatuses") or []
    )


class Proxy:
    def __init__(self, store: Store, *, listening: bool = True) -> None:
        self.store = store
        self.listening = listening  # False: no exporter runs anywhere (a dump), every dial is refused
        self._turns: dict[tuple[str, str], itertools.count] = {}

    def pod(self, namespace: str, ident: str, path: str) -> tuple[int, str, bytes]:
        """(status, content type, body) of GET PATH on the pod, or ProxyError."""
        name, port_text = split_name_port(ident)
        pod = self.store.find("pods", namespace, name)
        if pod is None:
            raise ProxyError(404, "NotFound", f'pods "{name}" not found')
        if port_text and not port_text.isdigit():
            raise ProxyError(400, "BadRequest", f'invalid port "{port_text}" for pod "{name}"')
        if not port_text:
            port_text = next((str(c["ports"][0].get("containerPort", "")) for c in (pod.get("spec") or {}).get("containers") or []
                              if c.get("ports")), "")
        if not (pod.get("status") or {}).get("podIP"):
            raise ProxyError(400, "BadRequest", "address not allowed")
        return self._dial(pod, int(port_text) if port_text.isdigit() else 80, path)

    def service(self, namespace: str, ident: str, path: str) -> tuple[int, str, bytes]:
        name, port_text = split_name_port(ident, "service")
        service = self.store.find("services", namespace, name)
        if service is None:
            raise ProxyError(404, "NotFound", f'services "{name}" not found')
        ports = (service.get("spec") or {}).get("ports") or []
        if port_text.isdigit():
            port = next((p for p in ports if p.get("port") == int(port_text)), None)
            if port is None:
                raise _unavailable(f'no service port {port_text} found for service "{name}"')
        else:
            port = next((p for p in ports if p.get("name", "") == port_text), None)
        endpoints = self._endpoints(namespace, service)
        if port is None or not endpoints:
            raise _unavailable(f'no endpoints available for service "{name}"')
        target = port.get("targetPort", port.get("port"))
        turn = self._turns.setdefault((namespace, name), itertools.count())
        pod = endpoints[next(turn) % len(endpoints)]
        if not isinstance(target, int):  # a named container port
            target = next((p.get("containerPort") for c in pod["spec"].get("containers") or []
                           for p in c.get("ports") or [] if p.get("name") == target), 0)
        return self._dial(pod, target, path)

    def backend(self, namespace: str, ident: str) -> str | None:
        """The loopback `host:port` a Service's proxy forwards to (BACKEND_ANNOTATION), or None."""
        name, port_text = split_name_port(ident, "service")
        service = self.store.find("services", namespace, name)
        if service is None:
            return None
        address = (service.get("metadata", {}).get("annotations") or {}).get(BACKEND_ANNOTATION)
        if address is None:
            return None
        ports = (service.get("spec") or {}).get("ports") or []
        if not any(str(p.get("port")) == port_text or p.get("name", "") == port_text for p in ports):
            raise _unavailable(f'no service port {port_text or "(unnamed)"} found for service "{name}"')
        if address.rsplit(":", 1)[0] not in LOOPBACK:
            raise _unavailable(f"error trying to reach service: {address} is not on loopback")
        return address

    async def forward(self, address: str, path: str, query: str) -> tuple[int, str, bytes]:
        """GET PATH?QUERY on the loopback server: its answer, or 503 as the API server gives for a refused dial."""
        import aiohttp  # noqa: PLC0415

        try:
            async with aiohttp.ClientSession() as session:
                async with session.get(f"http://{address}{path}" + (f"?{query}" if query else ""),
                                       timeout=aiohttp.ClientTimeout(total=30)) as resp:
                    return resp.status, resp.headers.get("Content-Type", "text/plain"), await resp.read()
        except (aiohttp.ClientError, OSError) as exc:
            raise _unavailable(f"error trying to reach service: dial tcp {address}: {exc}") from None

    def _endpoints(self, namespace: str, service: Obj) -> list[Obj]:
        """Ready pods the service's selector matches, by name (the Endpoints controller's addresses)."""
        selector = (service.get("spec") or {}).get("selector") or {}
        if not selector:
            return []
        pods = [
            p for p in self.store.objects("pods", namespace)
            if b.matches_labels(selector, p["metadata"].get("labels") or {})
            and b.pod_is_ready(p) and (p.get("status") or {}).get("podIP") and not p["metadata"].get("deletionTimestamp")
        ]
        return sorted(pods, key=lambda p: p["metadata"]["name"])

    def _dial(self, pod: Obj, port: int, path: str) -> tuple[int, str, bytes]:
        ip = (pod.get("status") or {}).get("podIP") or ""
        address = f"{ip}:{port}"
        node = self.store.find("nodes", "", (pod.get("spec") or {}).get("nodeName") or "")
        if node is not None and not b.node_is_ready(node):
            raise _unavailable(f"error trying to reach service: dial tcp {address}: i/o timeout")
        if not self.listening or node is None or port != _exporter_port(pod) or not _exporter_running(pod):
            raise _unavailable(f"error trying to reach service: dial tcp {address}: connect: connection refused")
        if path.rstrip("/") != "/metrics":
            return 404, "text/plain; charset=utf-8", b"404 page not found\n"
        label = ((pod["metadata"].get("annotations") or {}).get(HOSTNAME_LABEL_ANNOTATION)) or "Hostname"
        if label not in dcgm.HOSTNAME_LABELS:
            label = "Hostname"
        node_name = node["metadata"]["name"]
        pods_here = [p for p in self.store.objects("pods") if (p.get("spec") or {}).get("nodeName") == node_name]
        options = dcgm.ExporterOptions.of_container(_exporter_container(pod) or {})
        return 200, METRICS_CONTENT_TYPE, dcgm.exposition(node, pods_here, time.time(), label, options).encode()
