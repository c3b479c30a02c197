"""The fault hooks and the counts from outside: a loopback control endpoint (`gputui sim --faults`) and its client (`gputui sim fault`).

    POST /faults  {"action": "drop-watches"}                       every open watch stream ends
                  {"action": "compact"}                            older watches get 410 Expired
                  {"action": "fail", "resource": "pods", "code": 403}   (or 500; "pods/proxy" for a subresource)
                  {"action": "slow", "resource": "nodes", "seconds": 1.5}
                  {"action": "restart", "fresh": false, "downtime": 0.5, "writes": 0}   (writes: made while down)
                  {"action": "silence"}                            accept connections, answer nothing, until clear
                  {"action": "corrupt", "count": 1}                the next response's body is broken JSON
                  {"action": "clear", "resource": null}            one resource's faults, or all of them
                  {"action": "xid", "node": "gpu-1", "gpu": 1, "code": 79}      the exporter's XID on a GPU (0: none)
                  {"action": "gpu-health", "node": "gpu-1", "gpu": 1, "healthy": false}   the device plugin's health
                  {"action": "taint-device", "node": "gpu-1", "device": "gpu-1", "key": "gpu.nvidia.com/xid",
                   "value": "43", "effect": "NoSchedule"}          a DRA device taint on the node's ResourceSlice
                  {"action": "untaint-device", "node": "gpu-1", "device": "gpu-1", "key": null}
                  {"action": "mig-state", "node": "mig-1", "state": "pending"}   the MIG manager's state
                  {"action": "upgrade-state", "node": "gpu-1", "state": "drain-required"}   the driver upgrade's
                  {"action": "quarantine", "node": "gpu-1", "condition": "GpuXidError", "message": "XID 79"}  NVSentinel
                  {"action": "heal", "node": "gpu-1", "condition": "GpuXidError", "halted": false}   healthy again:
                                                                   uncordoned, or left cordoned when halted
                  {"action": "compute-domain", "namespace": "ml", "name": "nvl-train", "joined": ["nvl-1"],
                   "notReady": []}                                 which IMEX daemons of a ComputeDomain started
    GET  /faults                                                   what is active
    GET  /counts                what the API server has answered (features.ApiCounts: requests by verb, reads
                                from the watch cache or etcd, bytes sent), its resourceVersion, and the
                                simulator's memory: rssMb now, peakRssMb (VmHWM) since the start or the last reset
    POST /counts  {"action": "reset-peak"}                         peakRssMb starts again from rssMb (Linux)

Answers are JSON: {"ok": true, "message": ..., "faults": ..., "corruptNext": N}, or {"ok": false, "error": ...}
with status 400. The endpoint listens on its own loopback port (never on the API server's, which stays a
Kubernetes API server); `gputui sim --faults --kubeconfig-out PATH` records its address in `PATH.faults`.
"""
from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web

from .faults import FaultsDisabled

if TYPE_CHECKING:
    from .cluster import SimCluster

ACTIONS = ("drop-watches", "compact", "fail", "slow", "restart", "silence", "corrupt", "clear", "xid", "gpu-health",
           "taint-device", "untaint-device", "mig-state", "upgrade-state", "quarantine", "heal", "compute-domain")


def address_file(kubeconfig: Path) -> Path:
    """Where the control endpoint's address is recorded, next to the kubeconfig."""
    return kubeconfig.with_name(kubeconfig.name + ".faults")


class ControlError(Exception):
    pass


async def apply(sim: "SimCluster", request: dict[str, Any]) -> str:
    """Carry out one control request on the cluster's fault hooks; returns what was done, or raises ControlError."""
    faults = sim.faults
    action = request.get("action")
    try:
        if action == "drop-watches":
            return f"dropped {faults.drop_watches()} watches"
        if action == "compact":
            faults.compact()
            return "compacted: older watches get 410 Expired"
        if action == "fail":
            resource, code = _text(request, "resource"), request.get("code")
            if not isinstance(code, int) or isinstance(code, bool):
                raise ControlError("fail needs an integer code (403, 429, 500 or 503)")
            faults.fail(resource, code)
            return f"{resource}: every request answers {code}"
        if action == "slow":
            resource, seconds = _text(request, "resource"), request.get("seconds")
            if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or seconds < 0:
                raise ControlError("slow needs seconds, a number not below 0")
            faults.slow(resource, float(seconds))
            return f"{resource}: every response waits {float(seconds):g}s"
        if action == "restart":
            fresh, downtime, writes = bool(request.get("fresh")), request.get("downtime", 0.5), request.get("writes", 0)
            if not isinstance(downtime, (int, float)) or isinstance(downtime, bool) or downtime < 0:
                raise ControlError("downtime must be a number not below 0")
            if not isinstance(writes, int) or isinstance(writes, bool) or writes < 0:
                raise ControlError("writes must be a whole number not below 0")
            await faults.restart(downtime=float(downtime), fresh=fresh, writes_while_down=writes)
            state = "fresh state from the scenario" if fresh else "the same state"
            return f"restarted with {state}" + (f" and {writes} writes made while down" if writes else "")
        if action == "silence":
            faults.silence()
            return "silent: connections accepted, nothing answered, until clear"
        if action == "corrupt":
            count = request.get("count", 1)
            if not isinstance(count, int) or isinstance(count, bool) or count < 1:
                raise ControlError("corrupt needs a count of 1 or more")
            faults.corrupt_next(count)
            return f"the next {count} response(s) will have a broken JSON body"
        if action == "clear":
            cleared = request.get("resource")
            if cleared is not None and not isinstance(cleared, str):
                raise ControlError("clear takes a resource name or none")
            faults.clear(cleared)
            return f"cleared {cleared}" if cleared else "cleared every fault"
        if action == "xid":
            node, gpu, code = _text(request, "node"), _whole(request, "gpu"), _whole(request, "code")
            faults.xid(node, gpu, code)
            return f"{node} GPU {gpu}: XID {code}" if code else f"{node} GPU {gpu}: no XID"
        if action == "gpu-health":
            node, gpu, healthy = _text(request, "node"), _whole(request, "gpu"), request.get("healthy")
            if not isinstance(healthy, bool):
                raise ControlError("gpu-health needs healthy: true or false")
            faults.gpu_health(node, gpu, healthy)
            return f"{node} GPU {gpu}: the device plugin reports it {'healthy' if healthy else 'unhealthy'}"
        if action == "taint-device":
            node, device, key = _text(request, "node"), _text(request, "device"), _text(request, "key")
            value, effect = request.get("value") or "", request.get("effect") or "NoSchedule"
            if not isinstance(value, str) or not isinstance(effect, str):
                raise ControlError("value and effect are strings")
            faults.taint_device(node, device, key, value, effect)
            return f"{node} device {device}: tainted {key}{'=' + value if value else ''}:{effect}"
        if action == "untaint-device":
            node, device, only = _text(request, "node"), _text(request, "device"), request.get("key")
            if only is not None and not isinstance(only, str):
                raise ControlError("untaint-device takes a taint key or none")
            faults.untaint_device(node, device, only)
            return f"{node} device {device}: " + (f"taint {only} taken off" if only else "every taint taken off")
        if action == "mig-state":
            node, state = _text(request, "node"), _text(request, "state")
            faults.mig_state(node, state)
            return f"{node}: nvidia.com/mig.config.state={state}"
        if action == "upgrade-state":
            node, state = _text(request, "node"), _text(request, "state")
            faults.upgrade_state(node, state)
            return f"{node}: nvidia.com/gpu-driver-upgrade-state={state}"
        if action == "quarantine":
            node, condition, message = _text(request, "node"), _text(request, "condition"), request.get("message") or ""
            if not isinstance(message, str):
                raise ControlError("message is a string")
            faults.quarantine(node, condition, message)
            return f"{node}: {condition} True, cordoned by NVSentinel"
        if action == "heal":
            node, condition, halted = _text(request, "node"), _text(request, "condition"), request.get("halted", False)
            if not isinstance(halted, bool):
                raise ControlError("halted is true or false")
            faults.heal(node, condition, halted)
            return f"{node}: {condition} False" + (", still cordoned (fault quarantine halted)" if halted else "")
        if action == "compute-domain":
            namespace, name = _text(request, "namespace"), _text(request, "name")
            joined, not_ready = request.get("joined"), request.get("notReady") or []
            if not isinstance(joined, list) or not isinstance(not_ready, list) or not all(isinstance(n, str) for n in joined + not_ready):
                raise ControlError("compute-domain needs joined (and notReady): lists of node names")
            status = faults.compute_domain(namespace, name, joined, not_ready)
            return f"ComputeDomain {namespace}/{name}: {len(joined)} joined, {status}"
    except (ValueError, FaultsDisabled) as exc:
        raise ControlError(str(exc)) from None
    raise ControlError(f"unknown action {action!r}; one of: {', '.join(ACTIONS)}")


def _text(request: dict[str, Any], name: str) -> str:
    value = request.get(name)
    if not isinstance(value, str) or not value:
        raise ControlError(f"{request.get('action')} needs a {name}")
    return value


def _whole(request: dict[str, Any], name: str) -> int:
    value = request.get(name)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ControlError(f"{request.get('action')} needs {name}, a whole number")
    return value


def counts(sim: "SimCluster") -> dict[str, Any]:
    """The API server's counts, its resourceVersion and the process's memory (None where /proc cannot say)."""
    return {**sim.api_counts.as_dict(), "resourceVersion": sim.store.resource_version, **_memory()}


def _memory() -> dict[str, float | None]:
    try:
        lines = Path("/proc/self/status").read_text().splitlines()
    except OSError:
        return {"rssMb": None, "peakRssMb": None}
    kb = {line.split(":")[0]: int(line.split()[1]) for line in lines if line.startswith(("VmRSS:", "VmHWM:"))}
    return {"rssMb": kb["VmRSS"] / 1024 if "VmRSS" in kb else None, "peakRssMb": kb["VmHWM"] / 1024 if "VmHWM" in kb else None}


def reset_peak() -> None:
    """Start the peak (VmHWM) again from the resident size now (proc(5): clear_refs 5)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError as exc:
        raise ControlError(f"cannot reset the peak memory: {exc.strerror or exc}") from None


def make_app(sim: "SimCluster") -> web.Application:
    async def post(request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except ValueError:
            return web.json_response({"ok": False, "error": "the body is not JSON"}, status=400)
        if not isinstance(body, dict):
            return web.json_response({"ok": False, "error": "the body must be a JSON object"}, status=400)
        try:
            message = await apply(sim, body)
        except ControlError as exc:
            return web.json_response({"ok": False, "error": str(exc)}, status=400)
        return web.json_response({"ok": True, "message": message, **sim.faults.describe()})

    async def get(request: web.Request) -> web.Response:
        return web.json_response({"ok": True, **sim.faults.describe()})

    async def get_counts(request: web.Request) -> web.Response:
        return web.json_response({"ok": True, **counts(sim)})

    async def post_counts(request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except ValueError:
            body = None
        if not isinstance(body, dict) or body.get("action") != "reset-peak":
            return web.json_response({"ok": False, "error": 'the only action here is {"action": "reset-peak"}'}, status=400)
        try:
            reset_peak()
        except ControlError as exc:
            return web.json_response({"ok": False, "error": str(exc)}, status=400)
        return web.json_response({"ok": True, **counts(sim)})

    app = web.Application()
    app.router.add_post("/faults", post)
    app.router.add_get("/faults", get)
    app.router.add_get("/counts", get_counts)
    app.router.add_post("/counts", post_counts)
    return app


class ControlServer:
    """The control endpoint, on its own loopback port."""

    def __init__(self, sim: "SimCluster", host: str = "127.0.0.1", port: int = 0) -> None:
        self.sim, self.host, self.port = sim, host, port
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> "ControlServer":
        self._runner = web.AppRunner(make_app(self.sim), access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]  # aiohttp's TCPSite has no public accessor for its bound port
        self.url = f"http://{self.host}:{self.port}"
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


# -- the client (`gputui sim fault`) ---------------------------------------

def find_url(kubeconfig: Path | None, url: str | None) -> str:
    """The control endpoint: --url, else the address recorded next to --kubeconfig."""
    if url:
        return url.rstrip("/")
    if kubeconfig is None:
        raise ControlError("say where the simulator is: --kubeconfig PATH (as given to --kubeconfig-out) or --url URL")
    recorded = address_file(kubeconfig)
    try:
        text = recorded.read_text().strip()
    except OSError:
        raise ControlError(f"{recorded}: no control address recorded (is `gputui sim --faults --kubeconfig-out "
                           f"{kubeconfig}` running?)") from None
    if not text.startswith("http://"):
        raise ControlError(f"{recorded}: not a control address: {text[:80]!r}")
    return text


def send(url: str, request: dict[str, Any] | None, timeout: float = 30.0, path: str = "/faults") -> dict[str, Any]:
    """POST one request (GET with None) to /faults or /counts; the endpoint's answer, or ControlError."""
    data = None if request is None else json.dumps(request).encode()
    req = urllib.request.Request(f"{url}{path}", data=data, method="GET" if data is None else "POST",  # noqa: S310  (loopback, http only)
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as response:  # noqa: S310  (loopback, http only)
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        try:
            answer = json.loads(exc.read())
        except ValueError:
            raise ControlError(f"{url}: HTTP {exc.code}") from None
        raise ControlError(str(answer.get("error") or f"HTTP {exc.code}")) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ControlError(f"cannot reach the simulator's control endpoint at {url}: {reason}") from None
