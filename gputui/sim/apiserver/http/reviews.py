"""SelfSubjectAccessReview and SelfSubjectRulesReview (authorization.k8s.io/v1), answered from the simulator's RBAC
(auth.py) for the user the request acts as, as kube-apiserver's registry/authorization does: `kubectl auth can-i`
and `kubectl auth can-i --list`."""
from __future__ import annotations

from typing import Any

from aiohttp import web

from ..auth import Request as AuthRequest
from ..auth import User
from .base import ApiBase
from .protobuf import MAGIC as PROTOBUF_MAGIC
from .protobuf import PROTOBUF, fields
from .request import Target
from .responses import ApiError, bad_request, json_response

Obj = dict[str, Any]



class Reviews(ApiBase):
    """Api's handler for creating the self-reviews (nothing is stored)."""

    async def review(self, request: web.Request, t: Target, user: User | None) -> web.Response:
        if request.content_type == PROTOBUF:  # kubectl sends its reviews so
            body = _from_protobuf(await request.read(), t.resource.kind)
        else:
            body = await self._body(request)
        if not isinstance(body, dict):
            raise bad_request(f"{t.resource.kind} in version \"v1\" cannot be handled as a {t.resource.kind}: the body is not an object")
        spec: Obj = body["spec"] if isinstance(body.get("spec"), dict) else {}
        if user is None:  # plain HTTP: no user on the request
            raise bad_request("no user present on request")
        if t.resource.kind == "SelfSubjectRulesReview":
            namespace = spec.get("namespace")
            if not namespace:
                raise bad_request("no namespace on request")
            resource_rules, non_resource_rules = self.cluster.authorizer.rules_for(user, str(namespace))
            status: Obj = {"resourceRules": resource_rules, "nonResourceRules": non_resource_rules, "incomplete": False}
        else:
            status = {"allowed": False}
            reason = self.cluster.authorizer.decide(user, _attributes(spec))
            if reason is not None:
                status["allowed"] = True
            if reason:
                status["reason"] = reason
        metadata: Obj = body["metadata"] if isinstance(body.get("metadata"), dict) else {}
        answer = {"kind": t.resource.kind, "apiVersion": t.resource.api_version, "metadata": {"creationTimestamp": None, **metadata},
                  "spec": spec, "status": status}
        return json_response(answer, status=201)


def _attributes(spec: Obj) -> AuthRequest:
    """What a SelfSubjectAccessReview asks about; 422 unless it is exactly one of resource or non-resource attributes
    (ValidateSelfSubjectAccessReviewSpec)."""
    resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if (resource is None) == (non_resource is None):
        field, words = (("spec.nonResourceAttributes", "cannot be specified in combination with resourceAttributes") if resource is not None
                        else ("spec.resourceAttributes", "exactly one of nonResourceAttributes or resourceAttributes must be specified"))
        value = "null" if non_resource is None else "{...}"
        message = f'Invalid value: "{value}": {words}'
        raise ApiError(422, "Invalid", f'SelfSubjectAccessReview.authorization.k8s.io "" is invalid: {field}: {message}',
                       {"group": "authorization.k8s.io", "kind": "SelfSubjectAccessReview",
                        "causes": [{"reason": "FieldValueInvalid", "message": message, "field": field}]})
    if isinstance(non_resource, dict):
        return AuthRequest(str(non_resource.get("verb") or ""), path=str(non_resource.get("path") or ""))
    if not isinstance(resource, dict):
        raise bad_request("SelfSubjectAccessReview in version \"v1\" cannot be handled as a SelfSubjectAccessReview: attributes are not objects")
    return AuthRequest(str(resource.get("verb") or ""), str(resource.get("group") or ""), str(resource.get("resource") or ""),
                       resource.get("subresource") or None, resource.get("namespace") or None, resource.get("name") or None)


# The fields of the reviews' protobuf messages (k8s.io/api/authorization/v1/generated.proto) read here: number -> name.
_RESOURCE_ATTRIBUTES = {1: "namespace", 2: "verb", 3: "group", 4: "version", 5: "resource", 6: "subresource", 7: "name"}
_NON_RESOURCE_ATTRIBUTES = {1: "path", 2: "verb"}


def _strings(data: bytes, names: dict[int, str]) -> Obj:
    return {names[n]: v.decode() for n, v in fields(data) if n in names and isinstance(v, bytes) and v}


def _from_protobuf(data: bytes, kind: str) -> Obj:
    """A review sent as Kubernetes protobuf (the `k8s\\0` envelope, a runtime.Unknown holding the object): its spec."""
    try:
        if not data.startswith(PROTOBUF_MAGIC):
            raise ValueError("no k8s protobuf envelope")
        raw = next((v for n, v in fields(data[len(PROTOBUF_MAGIC):]) if n == 2 and isinstance(v, bytes)), b"")
        spec_data = next((v for n, v in fields(raw) if n == 2 and isinstance(v, bytes)), b"")
        spec: Obj = {}
        for number, value in fields(spec_data):
            if not isinstance(value, bytes):
                continue
            if kind == "SelfSubjectRulesReview" and number == 1:
                spec["namespace"] = value.decode()
            elif kind == "SelfSubjectAccessReview" and number == 1:
                spec["resourceAttributes"] = _strings(value, _RESOURCE_ATTRIBUTES)
            elif kind == "SelfSubjectAccessReview" and number == 2:
                spec["nonResourceAttributes"] = _strings(value, _NON_RESOURCE_ATTRIBUTES)
    except (ValueError, IndexError, UnicodeDecodeError) as e:
        raise bad_request(f"the body of the request was in an unknown format: {e}") from None
    return {"spec": spec}
