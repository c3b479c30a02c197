"""ComputeDomains: the multi-node NVLink (IMEX) domains of NVIDIA's DRA driver for GPUs (k8s-dra-driver-gpu,
`resource.nvidia.com/v1beta1`, namespaced), and the verdict `compute-domain-not-ready` with its age.

The driver's controller sets `status.status` Ready once as many IMEX daemons are Ready as `spec.numNodes` asks
(NotReady until then, Failed on error); each daemon that started lists its node in `status.nodes[]` (name,
ipAddress, cliqueID, index, status). A node that did not join has no entry: gputui names it from the domain's
channel claims (their opaque config carries the domain's uid, `domainID`) allocated on a node the status does not
list. The status has no time: how long it has been NotReady is gputui's own watch (`stuck.StateMemory`); at the
first look a domain older than the threshold that is NotReady is said to be so since before that look.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from .gpu import Problem
from .quantities import parse_time
from .stuck import FIRST_LOOK, Finding, StateMemory, age_words
from .verdicts import Verdict

API = "/apis/resource.nvidia.com/v1beta1"
READY, NOT_READY, FAILED = "Ready", "NotReady", "Failed"


@dataclass(frozen=True)
class DomainNode:
    name: str
    ip: str
    clique: str
    status: str  # the node's IMEX daemon: Ready, NotReady, Failed ("" from drivers before 25.8: NotReady)


@dataclass(frozen=True)
class ComputeDomain:
    namespace: str
    name: str
    uid: str
    status: str  # Ready, NotReady, Failed; NotReady when not set yet (the CRD's default)
    num_nodes: int  # spec.numNodes: the daemons expected (0: not counted, the DNS-names mode)
    nodes: tuple[DomainNode, ...]
    created: float | None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def domain_from(obj: dict[str, Any]) -> ComputeDomain:
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    nodes = tuple(DomainNode(str(n.get("name") or "?"), str(n.get("ipAddress") or ""), str(n.get("cliqueID") or ""),
                             str(n.get("status") or NOT_READY))
                  for n in status.get("nodes") or [] if isinstance(n, dict))
    num = spec.get("numNodes")
    return ComputeDomain(meta.get("namespace") or "", meta.get("name") or "", meta.get("uid") or "", str(status.get("status") or NOT_READY),
                         num if isinstance(num, int) and not isinstance(num, bool) and num >= 0 else 0, nodes,
                         parse_time(meta.get("creationTimestamp")))


@dataclass(frozen=True)
class DomainView:
    """A domain with what gputui makes of it: the nodes its claims are on that did not join, its verdict."""

    domain: ComputeDomain
    not_joined: tuple[str, ...]  # nodes holding one of its channel claims with no entry in status.nodes
    finding: Finding

    def to_json(self) -> dict[str, Any]:
        d = self.domain
        problem = self.finding.problem
        return {"namespace": d.namespace, "name": d.name, "status": d.status, "num_nodes": d.num_nodes,
                "nodes": [{"name": n.name, "ip": n.ip, "clique": n.clique, "status": n.status} for n in d.nodes],
                "not_joined": list(self.not_joined),
                "problem": {"code": str(problem.code), "message": problem.message} if problem else None}


def view(domain: ComputeDomain, claim_nodes: Iterable[str], memory: StateMemory, now: float, after: float) -> DomainView:
    joined = {n.name for n in domain.nodes}
    not_joined = tuple(sorted(set(claim_nodes) - joined))
    since, exact = memory.seen("computedomain " + domain.key, "status", domain.status)
    if domain.status == READY:
        return DomainView(domain, not_joined, Finding(None))
    old = domain.created is not None and now - domain.created > after
    if domain.status != FAILED and not (exact and now - since > after) and not (not exact and old):
        return DomainView(domain, not_joined, Finding(None, since + after + 1))  # starting: not stuck yet
    words = age_words(since, exact, now)
    if words == FIRST_LOOK and domain.created is not None:
        words += f", created {age_words(domain.created, True, now).removeprefix('for ')} ago"
    message = f"ComputeDomain {domain.key} {domain.status} {words}: {_nodes_words(domain, not_joined)}"
    subject = None if words.startswith(FIRST_LOOK) else words.removeprefix("for ")
    return DomainView(domain, not_joined, Finding(Problem(Verdict.COMPUTE_DOMAIN_NOT_READY, message, subject), now + 60))


def _nodes_words(domain: ComputeDomain, not_joined: tuple[str, ...]) -> str:
    """`2 of 4 nodes joined, 1 Ready; not Ready: nvl-2; did not join: nvl-3, nvl-4 (their channel claims are there)`."""
    ready = [n.name for n in domain.nodes if n.status == READY]
    waiting = [f"{n.name} ({n.status})" if n.status != NOT_READY else n.name for n in domain.nodes if n.status != READY]
    expected = f" of {domain.num_nodes}" if domain.num_nodes else ""
    words = f"{len(domain.nodes)}{expected} node{'s' if (domain.num_nodes or len(domain.nodes)) != 1 else ''} joined, {len(ready)} Ready"
    if waiting:
        words += f"; not Ready: {', '.join(waiting)}"
    if not_joined:
        words += f"; did not join: {', '.join(not_joined)} (the domain's channel claims are allocated there)"
    elif domain.num_nodes > len(domain.nodes):
        words += f"; {domain.num_nodes - len(domain.nodes)} did not join (no channel claim names their nodes)"
    return words
