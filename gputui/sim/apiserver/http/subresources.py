"""The subresources with handlers of their own: pods/binding, pods|services/proxy (proxy.py), pods/log."""
from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone
from typing import Any

from aiohttp import web

from ...behaviour.logs import LogOptions, StreamCut
from ..proxy import ProxyError, split_name_port
from ..store import now_rfc3339
from .base import ApiBase
from .request import Target, _flag, _int_param
from .responses import PASSED_THROUGH, ApiError, _details, bad_request, json_response, not_found

Obj = dict[str, Any]


class Subresources(ApiBase):
    """Api's handlers for pods/binding, pods|services/proxy and pods/log."""

    async def bind(self, request: web.Request, t: Target) -> web.Response:
        body = await self._body(request)
        node = ((body or {}).get("target") or {}).get("name") if isinstance(body, dict) else None
        if not node:
            raise ApiError(422, "Invalid", f'Binding "{t.name}" is invalid: target.name: Required value',
                           {"name": t.name, "kind": "Binding", "causes": [{"reason": "FieldValueRequired", "message": "Required value", "field": "target.name"}]})
        pod = self.store.find("pods", t.namespace or "", t.name or "")
        if pod is None:
            raise not_found(t.resource, t.name or "")
        if pod["metadata"].get("deletionTimestamp"):
            raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on pods/binding "{t.name}": pod {t.name} is being deleted, cannot be assigned to a host', {"name": t.name, "kind": "pods/binding"})
        if (pod.get("spec") or {}).get("nodeName"):
            raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on pods/binding "{t.name}": pod {t.name} is already assigned to node "{pod["spec"]["nodeName"]}"', {"name": t.name, "kind": "pods/binding"})

        def assign(p: Obj) -> None:
            p.setdefault("spec", {})["nodeName"] = node
            conditions = [c for c in (p.setdefault("status", {}).get("conditions") or []) if c.get("type") != "PodScheduled"]
            conditions.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": now_rfc3339()})
            p["status"]["conditions"] = conditions

        self.store.mutate("pods", t.namespace or "", t.name or "", assign)
        return json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}, status=201)

    # -- proxy -----------------------------------------------------------
    async def proxied(self, request: web.Request, t: Target) -> web.Response:
        at = self.proxy.pod if t.resource.kind == "Pod" else self.proxy.service
        try:
            backend = self.proxy.backend(t.namespace or "", t.name or "") if t.resource.kind == "Service" else None
            if backend is not None:  # a real server on loopback (proxy.py)
                status, content_type, body = await self.proxy.forward(backend, t.proxy_path, request.query_string)
            else:
                status, content_type, body = at(t.namespace or "", t.name or "", t.proxy_path)
        except ProxyError as e:
            details = _details(t.resource, split_name_port(t.name or "")[0]) if e.code == 404 else None
            raise ApiError(e.code, e.reason, e.message, details) from None
        response = web.Response(body=body, status=status)
        response.headers["Content-Type"] = content_type
        response[PASSED_THROUGH] = True  # the backend's answer as it came: never compressed here
        return response

    # -- logs ------------------------------------------------------------
    async def logs(self, request: web.Request, t: Target) -> web.StreamResponse:
        options, limit = _log_options(request.query, t.name or "")
        pod = self._entry(t).obj
        query = request.query
        container = self._log_container(pod, query.get("container", ""))
        previous = _flag(query.get("previous"))
        follow = _flag(query.get("follow"))
        if not (pod.get("spec") or {}).get("nodeName"):
            return web.Response(body=b"", content_type="text/plain")
        self._check_log_state(pod, container, previous)
        ns, name = t.namespace or "", t.name or ""
        if not follow or previous:
            lines = self.cluster.logs.read(ns, name, container, previous=previous, options=options) or []
            data = b"".join(lines)
            return web.Response(body=data[:limit] if limit else data, content_type="text/plain")
        response = web.StreamResponse(headers={"Content-Type": "text/plain", "Cache-Control": "no-cache, private"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        sent = 0
        try:
            async for line in self.cluster.logs.follow(ns, name, container, options=options):
                if limit:
                    line = line[: limit - sent]
                await response.write(line)
                sent += len(line)
                if limit and sent >= limit:
                    break
            await response.write_eof()
        except StreamCut:
            if request.transport is not None:  # cut, not ended: no last chunk, as a dropped connection
                request.transport.abort()
        except (ConnectionError, asyncio.CancelledError):
            pass
        return response

    @staticmethod
    def _log_container(pod: Obj, container: str) -> str:
        spec = pod.get("spec") or {}
        names = [c.get("name", "") for c in spec.get("containers") or []]
        init_names = [c.get("name", "") for c in spec.get("initContainers") or []]
        pod_name = pod["metadata"]["name"]
        if not container:
            if len(names) == 1:
                return names[0]
            message = f"a container name must be specified for pod {pod_name}, choose one of: [{' '.join(names)}]"
            if init_names:
                message += f" or one of the init containers: [{' '.join(init_names)}]"
            raise bad_request(message)
        if container not in names and container not in init_names:
            raise bad_request(f"container {container} is not valid for pod {pod_name}")
        return container

    @staticmethod
    def _check_log_state(pod: Obj, container: str, previous: bool) -> None:
        """The kubelet's refusals for a container with no logs to show."""
        status = pod.get("status") or {}
        statuses = (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or [])
        cs = next((s for s in statuses if s.get("name") == container), None)
        pod_name = pod["metadata"]["name"]
        state = (cs or {}).get("state") or {}
        last = (cs or {}).get("lastState") or {}
        if previous:
            if not last.get("terminated"):
                raise bad_request(f'previous terminated container "{container}" in pod "{pod_name}" not found')
            return
        if state.get("running") is not None or state.get("terminated") or last.get("terminated"):
            return
        reason = (state.get("waiting") or {}).get("reason") or "ContainerCreating"
        if reason == "ErrImagePull":
            reason = "image can't be pulled"
        elif reason == "ImagePullBackOff":
            reason = "trying and failing to pull image"
        raise bad_request(f'container "{container}" in pod "{pod_name}" is waiting to start: {reason}')


def _log_options(query: Any, pod: str) -> tuple[LogOptions, int | None]:
    """PodLogOptions from the query, refused as kube-apiserver's ValidatePodLogOptions refuses them (422 before the
    pod is even looked up); (what lines to show, limitBytes)."""
    tail = _int_param(query, "tailLines")
    limit = _int_param(query, "limitBytes")
    since_seconds = _int_param(query, "sinceSeconds")
    since_time = None
    if query.get("sinceTime"):
        try:
            since_time = datetime.fromisoformat(query["sinceTime"])
        except ValueError:
            raise bad_request(f'parsing time "{query["sinceTime"]}" as "2006-01-02T15:04:05Z07:00": cannot parse') from None
        if since_time.tzinfo is None:
            raise bad_request(f'parsing time "{query["sinceTime"]}" as "2006-01-02T15:04:05Z07:00": missing time zone')
    causes = []
    if tail is not None and tail < 0:
        causes.append(("FieldValueInvalid", "tailLines", f"Invalid value: {tail}: must be greater than or equal to 0"))
    if limit is not None and limit < 1:
        causes.append(("FieldValueInvalid", "limitBytes", f"Invalid value: {limit}: must be greater than 0"))
    if since_seconds is not None and since_time is not None:
        causes.append(("FieldValueForbidden", "", "Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified"))
    elif since_seconds is not None and since_seconds < 1:
        causes.append(("FieldValueInvalid", "sinceSeconds", f"Invalid value: {since_seconds}: must be greater than 0"))
    if causes:
        text = ", ".join(f"{fld}: {body}" for _, fld, body in causes)
        raise ApiError(422, "Invalid", f'PodLogOptions "{pod}" is invalid: {text if len(causes) == 1 else f"[{text}]"}',
                       {"name": pod, "kind": "PodLogOptions",
                        "causes": [{"reason": reason, "message": body, **({"field": fld} if fld else {})} for reason, fld, body in causes]})
    since = since_time
    if since_seconds is not None:
        since = datetime.now(timezone.utc) - timedelta(seconds=since_seconds)
    return LogOptions(tail=tail, since=since, timestamps=_flag(query.get("timestamps"))), limit
