"""The simulated kube-apiserver's HTTP layer (aiohttp).

Every kind of the cluster's store (resources.RESOURCES, and the custom
resources of a scenario's CRDs) is served generically by one catch-all route: `/api/v1/...` and `/apis/{group}/{version}/...`, namespaced and
cluster-scoped, with subresources (status, log, binding, proxy: proxy.py). A
custom resource is served only while its CustomResourceDefinition exists.
Lists are built by
joining each object's stored JSON (Entry.raw), never re-serialising objects
per request. Error bodies are `Status` objects worded like the real server's.

    responses.py     Status errors (ApiError and the real server's wordings), JSON responses
    request.py       resolving a path to a Target, query parameters, continue tokens
    base.py          ApiBase: the cluster, which kinds are served, selectors, bodies
    discovery.py     /version, /api, /apis and the resource lists; /api and /apis aggregated (with an ETag)
    reading.py       get, list (pages, tables) and watch
    writing.py       create, update, patch, delete, deletecollection
    subresources.py  binding, proxy, log
    reviews.py       SelfSubjectAccessReview, SelfSubjectRulesReview (from RBAC)
    app.py           Api (routing, fault hooks) and make_app(cluster), the entry
"""
from __future__ import annotations

from .app import Api, make_app

__all__ = ["Api", "make_app"]
