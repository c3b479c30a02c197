"""The API server's answers: `Status` errors worded like the real server's, and JSON bodies (large ones in slices,
gzipped for a client that asks, as kube-apiserver's APIResponseCompression does)."""
from __future__ import annotations

import zlib
from typing import Any

import orjson
from aiohttp import web

from .. import admission
from ..resources import ResourceType

Obj = dict[str, Any]

JSON = "application/json"


class ApiError(Exception):
    """Answered as a `Status` object."""

    def __init__(self, code: int, reason: str, message: str, details: Obj | None = None, headers: dict[str, str] | None = None,
                 metadata: Obj | None = None) -> None:
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details
        self.headers = headers or {}
        self.metadata = metadata or {}  # the Status's ListMeta (a continue token)


def status_body(code: int, reason: str, message: str, details: Obj | None = None, metadata: Obj | None = None) -> Obj:
    body: Obj = {"kind": "Status", "apiVersion": "v1", "metadata": metadata or {}, "status": "Failure", "message": message}
    if reason:  # omitted when empty (StatusReasonUnknown), as metav1.Status serialises it
        body["reason"] = reason
    if details:
        body["details"] = details
    body["code"] = code
    return body


def json_response(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(body), status=status, content_type=JSON)


def raw_response(raw: bytes, status: int = 200) -> web.Response:
    return web.Response(body=raw, status=status, content_type=JSON)


LARGE_BODY = 1 << 20
# kube-apiserver compresses an answer it serializes (an object, a list, a Status; never a watch, a log or a
# proxied answer) when the request's Accept-Encoding names gzip and the body is longer than this; level 1.
GZIP_THRESHOLD = 128 * 1024


def accepts_gzip(request: web.Request) -> bool:
    """The (first) Accept-Encoding header lists the token `gzip` (`gzip;q=1` is not it, for kube-apiserver)."""
    return any(token.strip() == "gzip" for token in request.headers.get("Accept-Encoding", "").split(","))


def gzipped(body: bytes) -> bytes:
    packer = zlib.compressobj(1, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return packer.compress(body) + packer.flush()


# marks a proxied answer (in the response's own mapping; web.ResponseKey where aiohttp has it)
PASSED_THROUGH = web.ResponseKey("passed_through", bool) if hasattr(web, "ResponseKey") else "passed_through"


def compress_if_asked(request: web.Request, response: web.StreamResponse) -> None:
    """A serialized JSON answer over GZIP_THRESHOLD, gzipped when the request asks (before it is sent)."""
    if (isinstance(response, web.Response) and not response.prepared and response.content_type == JSON
            and not response.get(PASSED_THROUGH)
            and isinstance(response.body, bytes) and len(response.body) > GZIP_THRESHOLD and accepts_gzip(request)):
        response.body = gzipped(response.body)
        response.headers["Content-Encoding"] = "gzip"
        response.headers.add("Vary", "Accept-Encoding")


async def send_large(request: web.Request, body: bytes) -> web.StreamResponse:
    """A big JSON body written in slices of itself: aiohttp's plain Response copies it whole
    into the transport's buffer, which makes a 100 MB list several times slower."""
    if len(body) <= LARGE_BODY:
        return raw_response(body)
    response = web.StreamResponse(headers={"Content-Type": JSON})
    if accepts_gzip(request):
        body = gzipped(body)
        response.headers["Content-Encoding"] = "gzip"
        response.headers.add("Vary", "Accept-Encoding")
    response.content_length = len(body)
    await response.prepare(request)
    view = memoryview(body)
    for offset in range(0, len(body), LARGE_BODY):
        await response.write(view[offset:offset + LARGE_BODY])
    await response.write_eof()
    return response


def qualified(r: ResourceType) -> str:
    """How the real server names a resource in messages: `pods`, `daemonsets.apps`."""
    return r.key


def _details(r: ResourceType, name: str | None) -> Obj:
    details: Obj = {}
    if name:
        details["name"] = name
    if r.group:
        details["group"] = r.group
    details["kind"] = r.plural
    return details


def not_found(r: ResourceType, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{qualified(r)} "{name}" not found', _details(r, name))


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def conflict(r: ResourceType, name: str, why: str) -> ApiError:
    return ApiError(409, "Conflict", f'Operation cannot be fulfilled on {qualified(r)} "{name}": {why}', _details(r, name))


def too_large_status(wanted: int, current: int) -> Obj:
    """storage.NewTooLargeResourceVersionError: a 504 Timeout whose cause says ResourceVersionTooLarge."""
    return status_body(504, "Timeout", f"Timeout: Too large resource version: {wanted}, current: {current}", {
        "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
        "retryAfterSeconds": 1,
    })


PATH_NOT_FOUND = ApiError(404, "NotFound", "the server could not find the requested resource", {})


def _invalid(r: ResourceType, e: admission.Invalid) -> ApiError:
    details: Obj = {"name": e.name, "kind": r.kind}
    if r.group:
        details["group"] = r.group
    details["causes"] = [{"reason": c.reason, "message": c.message, "field": c.field} for c in e.causes]
    return ApiError(422, "Invalid", str(e), details)


def invalid_list_options(causes: list[tuple[str, str, str]]) -> ApiError:
    """kube-apiserver's answer to list or watch options that do not validate (ValidateListOptions):
    422 Invalid for the kind ListOptions. causes: (reason, field, message), e.g. ("FieldValueForbidden", ...)."""
    words = {"FieldValueForbidden": "Forbidden", "FieldValueNotSupported": "Unsupported value"}
    text = ", ".join(f"{fld}: {words.get(reason, reason)}: {message}" for reason, fld, message in causes)
    message = f'ListOptions.meta.k8s.io "" is invalid: {text}' if len(causes) == 1 else f'ListOptions.meta.k8s.io "" is invalid: [{text}]'
    details: Obj = {"group": "meta.k8s.io", "kind": "ListOptions",
                    "causes": [{"reason": reason, "message": f"{words.get(reason, reason)}: {msg}", "field": fld} for reason, fld, msg in causes]}
    return ApiError(422, "Invalid", message, details)


LIST_TOO_OLD = "The resourceVersion for the provided list is too old."


def expired_continue(token: str) -> ApiError:
    """The continue token of a list whose resourceVersion was compacted (etcd's ErrCompacted while paging): 410 with
    a new token that continues after the same key at the latest resourceVersion (etcd3's handleCompactedErrorForPaging)."""
    return ApiError(410, "Expired", "The provided continue parameter is too old to display a consistent list result. You can start a "
                    "new list without the continue parameter, or use the continue token in this response to retrieve the remainder of "
                    "the results. Continuing with the provided token results in an inconsistent list - objects that were created, "
                    "modified, or deleted between the time the first chunk was returned and now may show up in the list.", {},
                    metadata={"continue": token})
