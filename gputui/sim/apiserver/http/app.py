"""The API server's routing and fault hooks (Api, made of the handler classes), and make_app(cluster)."""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from aiohttp import web

from ..features import DEFAULT_MINOR
from ..auth import ImpersonationRefused, Request as AuthRequest, Unauthenticated, User, forbidden_message, impersonated
from ...faults import FAULT_USER
from ..selectors import required_name
from .discovery import Discovery, aggregated_version
from .reading import Reading
from .request import Target, _flag, _verb, parse_resource_path
from .responses import PATH_NOT_FOUND, ApiError, _details, compress_if_asked, json_response, qualified, status_body
from .reviews import Reviews
from .subresources import Subresources
from .writing import Writing

if TYPE_CHECKING:
    from aiohttp.typedefs import Handler, Middleware

    from ...cluster import SimCluster

log = logging.getLogger("gputui.sim")

# Where the authenticated user rides on the request (web.RequestKey where aiohttp has it).
USER_KEY = web.RequestKey("user", User) if hasattr(web, "RequestKey") else "user"


class Api(Discovery, Reading, Writing, Subresources, Reviews):
    """The API server: routes each request to its handler (discovery, reading, writing, subresources)."""

    # -- routing ---------------------------------------------------------
    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        try:
            response = await self._dispatch(request)
        except ApiError as e:
            response = json_response(status_body(e.code, e.reason, e.message, e.details, e.metadata), status=e.code)
            response.headers.update(e.headers)
        except Exception as e:  # noqa: BLE001  (a request the simulator cannot serve is a 500 Status and a log line, never its end)
            cause = f"{type(e).__name__}: {e}"
            log.warning("kube-apiserver: %s %s: %s", request.method, request.path, cause)
            response = json_response(status_body(500, "InternalError", f"Internal error occurred: {cause}",
                                                 {"causes": [{"message": cause}]}), status=500)
        faults = self.cluster.faults
        if faults.enabled and faults.corrupt and not response.prepared and isinstance(response, web.Response) \
                and response.body and faults.take_corrupt():
            body = bytes(response.body)  # type: ignore[arg-type]  # aiohttp types body as a payload; ours are bytes, set by json_response
            response.body = body[: max(1, len(body) // 2)]  # a JSON body cut off mid-object
        return response

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        segments = [s for s in request.path.split("/") if s]
        if not segments or segments[0] not in ("api", "apis"):
            raise PATH_NOT_FOUND
        if segments in (["api"], ["apis"]) and request.method == "GET":
            version = aggregated_version(request.headers.get("Accept", ""), int(getattr(self.cluster, "server_minor", DEFAULT_MINOR)))
            if version is not None:
                return self.aggregated(request, segments == ["api"], version)
        if segments == ["api"]:
            return json_response(self._core_versions(request))
        if segments == ["apis"]:
            return json_response(self._group_list())
        if segments[0] == "apis" and len(segments) == 2:
            versions = self._groups().get(segments[1])
            if not versions:
                raise PATH_NOT_FOUND
            return json_response({"kind": "APIGroup", "apiVersion": "v1", **self._group(segments[1], versions)})
        if (segments[0] == "api" and len(segments) == 2) or (segments[0] == "apis" and len(segments) == 3):
            group, version = ("", segments[1]) if segments[0] == "api" else (segments[1], segments[2])
            body = self._resource_list(group, version)
            if body is None:
                raise PATH_NOT_FOUND
            return json_response(body)
        target = parse_resource_path(segments, self.served, self.store.resource_at)
        query = request.query
        watching = request.method == "GET" and target.name is None and _flag(query.get("watch"))
        self._authorize(request, target, watching)
        await self._apply_faults(request, target, watching)
        return await self._handle(request, target, watching)

    async def _handle(self, request: web.Request, t: Target, watching: bool) -> web.StreamResponse:
        method, sub = request.method, t.subresource
        verb = _verb(method, t, watching)
        if sub is None and verb not in t.resource.verbs and not (verb == "deletecollection" and "delete" in t.resource.verbs):
            # A kind kept as given is read-only: kube-apiserver answers a verb a kind lacks so.
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource",
                           _details(t.resource, t.name))
        if t.name is None:
            if method == "GET":
                return await (self.watch(request, t) if watching else self.list(request, t))
            if method == "POST" and t.resource.group == "authorization.k8s.io":
                return await self.review(request, t, request.get(USER_KEY))
            if method == "POST":
                return await self.create(request, t)
            if method == "DELETE":
                return await self.delete_collection(request, t)
        elif sub == "log" and method == "GET":
            return await self.logs(request, t)
        elif sub == "binding" and method == "POST":
            return await self.bind(request, t)
        elif sub == "proxy" and t.resource.kind in ("Pod", "Service") and method in ("GET", "HEAD"):
            return await self.proxied(request, t)
        elif sub in (None, "status"):
            if method == "GET":
                return self.get(request, t)
            if method == "PUT":
                return await self.update(request, t)
            if method == "PATCH":
                return await self.patch(request, t)
            if method == "DELETE" and sub is None:
                return await self.delete(request, t)
        raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource", _details(t.resource, t.name))

    def _authorize(self, request: web.Request, t: Target, watching: bool) -> None:
        """403 with kube-apiserver's words unless the request's user may do this (auth.py)."""
        user: User | None = request.get(USER_KEY)
        if user is None:
            return
        verb = _verb(request.method, t, watching)
        name = t.name
        if verb in ("list", "watch"):
            # A list or watch whose fieldSelector requires metadata.name=X is for X (RequestInfoFactory): RBAC's
            # resourceNames allow it, and a refusal names it.
            name = required_name(request.query.get("fieldSelector"))
        wanted = AuthRequest(verb, t.resource.group, t.resource.plural, t.subresource, t.namespace, name)
        if not self.cluster.authorizer.allowed(user, wanted):
            subject = qualified(t.resource) + (f' "{name}"' if name else "")
            raise ApiError(403, "Forbidden", forbidden_message(user.name, wanted, subject), _details(t.resource, name))

    async def _apply_faults(self, request: web.Request, t: Target, watching: bool) -> None:
        faults = self.cluster.faults
        if not faults.enabled:
            return
        fault = (t.subresource and faults.lookup(f"{t.resource.key}/{t.subresource}")) or faults.lookup(t.resource.key)
        if fault is None:
            return
        if fault.delay:  # until the delay is over, or the fault cleared (the slowness gone)
            try:
                async with asyncio.timeout(fault.delay):
                    await fault.cleared.wait()
            except TimeoutError:
                pass
        if fault.code is not None:
            fault.refused += 1
        if fault.code == 403:
            verb = _verb(request.method, t, watching)
            resource = t.resource.plural + (f"/{t.subresource}" if t.subresource else "")
            scope = f'in the namespace "{t.namespace}"' if t.namespace else "at the cluster scope"
            subject = qualified(t.resource) + (f' "{t.name}"' if t.name else "")
            message = (
                f'{subject} is forbidden: User "{FAULT_USER}" cannot {verb} resource "{resource}" '
                f'in API group "{t.resource.group}" {scope}'
            )
            raise ApiError(403, "Forbidden", message, _details(t.resource, t.name))
        if fault.code == 500:
            cause = f"simulated failure serving {qualified(t.resource)}"
            raise ApiError(500, "InternalError", f"Internal error occurred: {cause}", {"causes": [{"message": cause}]})
        if fault.code == 429:  # API Priority and Fairness turning a request away
            raise ApiError(429, "TooManyRequests", "Too many requests, please try again later.",
                           {"retryAfterSeconds": fault.retry_after}, headers={"Retry-After": str(fault.retry_after)})
        if fault.code == 503:
            raise ApiError(503, "ServiceUnavailable", "the server is currently unable to handle the request",
                           {"retryAfterSeconds": fault.retry_after}, headers={"Retry-After": str(fault.retry_after)})


def _resource_path(path: str) -> bool:
    """A path that names a resource (authorized in dispatch, where its verb and scope are known)."""
    segments = [s for s in path.split("/") if s]
    return (len(segments) > 2 and segments[0] == "api") or (len(segments) > 3 and segments[0] == "apis")


def _authentication(cluster: "SimCluster") -> Middleware:
    """Every request: who sends it (a client certificate, a bearer token, or anonymous), else 401, and whom it
    acts as (impersonation, authorized); a path that is not a resource is authorized here (nonResourceURLs), a
    resource in dispatch."""

    @web.middleware
    async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
        authenticator = cluster.authenticator
        if authenticator is None:  # plain HTTP: the old insecure port, no authentication at all
            return await handler(request)
        transport = request.transport
        peercert = transport.get_extra_info("peercert") if transport is not None else None
        try:
            user = authenticator.authenticate(peercert, request.headers.get("Authorization"))
        except Unauthenticated:
            return json_response(status_body(401, "Unauthorized", "Unauthorized"), status=401)
        try:
            user = impersonated(cluster.authorizer, user, request.headers.items()) or user
        except ImpersonationRefused as refused:
            reason = "Forbidden" if refused.code == 403 else "InternalError"
            return json_response(status_body(refused.code, reason, refused.message, refused.details), status=refused.code)
        request[USER_KEY] = user
        if not _resource_path(request.path):
            wanted = AuthRequest(request.method.lower() if request.method != "HEAD" else "get", path=request.path)
            if not cluster.authorizer.allowed(user, wanted):
                return json_response(status_body(403, "Forbidden", forbidden_message(user.name, wanted, ""), {}), status=403)
        return await handler(request)

    return authenticate


def _answering(cluster: "SimCluster") -> Middleware:
    """Every request waits while the server is silenced (faults.silence): connections accepted, nothing answered."""

    @web.middleware
    async def answer(request: web.Request, handler: Handler) -> web.StreamResponse:
        if cluster.faults.enabled:
            await cluster.faults.answering()
        return await handler(request)

    return answer


def _counting(api: Api) -> Middleware:
    """Every request, by verb, counted as it comes (a watch as it opens), and the bodies of the answers to the
    reads that are neither lists nor watches (those count their own bytes): features.ApiCounts."""

    @web.middleware
    async def count(request: web.Request, handler: Handler) -> web.StreamResponse:
        verb = _request_verb(request, api)
        counts = api.cluster.api_counts
        counts.request(verb)
        response = await handler(request)
        if request.method == "GET" and verb not in ("list", "watch") and isinstance(response, web.Response) \
                and isinstance(response.body, bytes):
            counts.get_bytes += len(response.body)
        return response

    return count


def _compressing() -> Middleware:
    """Every serialized answer over 128 KiB, gzipped for a client that asks (responses.compress_if_asked);
    outermost, so that the counts are of the bodies before compression."""

    @web.middleware
    async def compress(request: web.Request, handler: Handler) -> web.StreamResponse:
        response = await handler(request)
        compress_if_asked(request, response)
        return response

    return compress


def _request_verb(request: web.Request, api: Api) -> str:
    """The verb as kube-apiserver's audit log names it; "discovery" under /api and /apis, else "other"."""
    segments = [s for s in request.path.split("/") if s]
    if not _resource_path(request.path):
        return "discovery" if segments[:1] in (["api"], ["apis"]) else "other"
    try:
        t = parse_resource_path(segments, api.served, api.store.resource_at)
    except ApiError:
        return "other"
    return _verb(request.method, t, request.method == "GET" and t.name is None and _flag(request.query.get("watch")))


def make_app(cluster: "SimCluster") -> web.Application:
    api = Api(cluster)
    app = web.Application(client_max_size=64 * 1024 * 1024, middlewares=[_compressing(), _answering(cluster), _counting(api), _authentication(cluster)])
    app.router.add_get("/version", api.version)
    app.router.add_get("/version/", api.version)  # the Python clients' VersionApi asks here
    for probe in ("/healthz", "/livez", "/readyz"):
        app.router.add_get(probe, api.health)
    app.router.add_route("*", "/{tail:.*}", api.dispatch)
    return app
