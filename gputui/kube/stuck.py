"""GPU plumbing that is stuck, as verdicts with their age: pure functions of a node's record and `StateMemory`.

- `mig-stuck`: the MIG manager's `nvidia.com/mig.config.state` is `pending` or `rebooting` for longer than
  `mig_after`, or `failed`; or operands are `nvidia.com/gpu.deploy.*=paused-for-mig-change` while no
  reconfiguration is under way (the MIG manager gives them back before it sets `success`).
- `driver-upgrade-stuck`: the driver upgrade controller's `nvidia.com/gpu-driver-upgrade-state`
  (NVIDIA/k8s-operator-libs) stays in one working state for longer than `upgrade_after`, or is
  `upgrade-failed`. A cordon it made is said to be its, not an admin's (`cordon_words`).
- `left-cordoned`: NVSentinel's fault quarantine cordoned the node (its annotation
  `quarantineHealthEventIsCordoned=True`) and the node's health conditions are healthy again. NVSentinel
  uncordons a node itself once every check it tracks (`quarantineHealthEvent`) sent a healthy event; still
  cordoned, that did not happen (its fault quarantine halted, or the event never came). Its labels
  `<labelPrefix>cordon-by` (NVSentinel, or `<agent>-<creator>` when forced), `cordon-reason` (the names of the rule
  sets that matched) and `cordon-timestamp` stay after a manual uncordon: they alone do not say it cordoned the node.

How long: the times the components write where they write one (the upgrade controller's start-time
annotations, in Unix seconds; NVSentinel's `cordon-timestamp` label, `2006-01-02T15-04-05Z` UTC; a condition's
lastTransitionTime); else when gputui first saw the state (`StateMemory`): a state already there at its
first look began before it (`exact` False) and is not called stuck for its age alone.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable

from .duration import human_duration
from .gpu import KUBELET_CONDITIONS, Problem, health_condition_problems
from .records import Node
from .verdicts import Verdict

CODES = (Verdict.MIG_STUCK, Verdict.DRIVER_UPGRADE_STUCK, Verdict.LEFT_CORDONED)  # this module's verdicts, each with its age
DEFAULT_MIG_AFTER = 30 * 60.0  # a MIG reconfiguration pending or rebooting this long is stuck
DEFAULT_UPGRADE_AFTER = 60 * 60.0  # a driver upgrade in one state this long is stuck
DEFAULT_DOMAIN_AFTER = 10 * 60.0  # a ComputeDomain NotReady this long is stuck (its daemons start in a minute or two)

MIG_STATE = "nvidia.com/mig.config.state"
MIG_CONFIG = "nvidia.com/mig.config"
MIG_WORKING = ("pending", "rebooting")
PAUSED_FOR_MIG = "paused-for-mig-change"
DEPLOY_PREFIX = "nvidia.com/gpu.deploy."

UPGRADE_STATE = "nvidia.com/gpu-driver-upgrade-state"
UPGRADE_FAILED, UPGRADE_DONE, UPGRADE_REQUIRED = "upgrade-failed", "upgrade-done", "upgrade-required"
# The states in which the controller holds the node cordoned (it cordons in cordon-required, uncordons in
# uncordon-required), and the annotations that carry when some of them began.
UPGRADE_CORDONED = ("wait-for-jobs-required", "pod-deletion-required", "drain-required", "node-maintenance-required",
                    "post-maintenance-required", "pod-restart-required", "validation-required", "uncordon-required",
                    UPGRADE_FAILED)
UPGRADE_STARTED = {"wait-for-jobs-required": "nvidia.com/gpu-driver-upgrade-wait-for-pod-completion-start-time",
                   "validation-required": "nvidia.com/gpu-driver-upgrade-validation-start-time"}
UPGRADE_WAS_CORDONED = "nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable"  # cordoned before the upgrade

# NVSentinel's fault quarantine (NVIDIA/NVSentinel fault-quarantine/pkg/common/common.go, reconciler.go).
QUARANTINE_CORDONED = "quarantineHealthEventIsCordoned"  # "True" while the cordon is its own
QUARANTINE_EVENTS = "quarantineHealthEvent"  # JSON: the health events it holds the node for
CORDON_AT, CORDON_REASON = "cordon-timestamp", "cordon-reason"  # after its label prefix (`k8saas.nvidia.com/`)


@dataclass(frozen=True)
class StuckSettings:
    """How long a state may last before it is stuck (ClusterModel's `stuck_settings`)."""

    mig_after: float = DEFAULT_MIG_AFTER
    upgrade_after: float = DEFAULT_UPGRADE_AFTER
    domain_after: float = DEFAULT_DOMAIN_AFTER  # a ComputeDomain NotReady this long (compute_domains.py)


class StateMemory:
    """When gputui first saw each (subject, what) in its current value: `seen` is called whenever a summary is
    made, with None for no value, so that a value that appears later is known to have begun then."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._seen: dict[tuple[str, str], tuple[object, float, bool]] = {}  # -> (value, since, exact)

    def seen(self, subject: str, what: str, value: object) -> tuple[float, bool]:
        """(since, exact): since when the value has been so; exact False when it was there at the first look."""
        now = self.clock()
        before = self._seen.get((subject, what))
        if before is None:
            self._seen[(subject, what)] = (value, now, False)
            return now, False
        if before[0] != value:
            self._seen[(subject, what)] = (value, now, True)
            return now, True
        return before[1], before[2]

    def forget(self, subject: str) -> None:
        for key in [k for k in self._seen if k[0] == subject]:
            del self._seen[key]


@dataclass(frozen=True)
class Finding:
    """A stuck verdict, or a state on its way to one (`problem` None, `due` when it would be)."""

    problem: Problem | None
    due: float | None = None  # when to look again: the state becomes stuck, or its age's words change


FIRST_LOOK = "since before gputui's first look"


def age_words(since: float, exact: bool, now: float) -> str:
    """`for 42m`, or `for over 42m` when it began before gputui first saw it (a minute ago at least: `over 0s` would
    say nothing; then `since before gputui's first look`)."""
    age = max(0.0, now - since)
    if not exact and age < 60:
        return FIRST_LOOK
    return f"for {'over ' if not exact else ''}{human_duration(age)}"


def _timed(code: Verdict, what: str, since: float, exact: bool, now: float, after: float | None) -> Finding:
    """A state that is stuck once it lasted `after` seconds (None: stuck now). The age is `since`'s: for a state
    there at gputui's first look, a lower bound, so that a single look (a report) never calls it stuck for its age."""
    if after is not None and now - since <= after:
        return Finding(None, since + after + 1)
    words = age_words(since, exact, now)
    subject = None if words == FIRST_LOOK else words.removeprefix("for ")  # the age in a short cell: `MIG stuck 42m`
    return Finding(Problem(code, f"{what} {words}", subject), now + 60)


def mig_findings(node: Node, memory: StateMemory, now: float, settings: StuckSettings) -> list[Finding]:
    labels = node.labels
    state = labels.get(MIG_STATE)
    config = labels.get(MIG_CONFIG) or "?"
    since, exact = memory.seen(node.name, MIG_STATE, state)
    out = []
    if state in MIG_WORKING:
        out.append(_timed(Verdict.MIG_STUCK, f"MIG reconfiguration to {config} {state} ({MIG_STATE}={state})", since, exact,
                          now, settings.mig_after))
    elif state == "failed":
        out.append(_timed(Verdict.MIG_STUCK, f"the MIG manager failed to apply MIG config {config} ({MIG_STATE}=failed)",
                          since, exact, now, None))
    paused = _paused(node)
    paused_since, paused_exact = memory.seen(node.name, PAUSED_FOR_MIG, paused)
    if paused and state not in MIG_WORKING:
        under = f"{MIG_STATE}={state}" if state else f"no {MIG_STATE}"
        out.append(_timed(Verdict.MIG_STUCK, f"operands paused for a MIG change with none under way ({under}): "
                          f"{', '.join(paused)}", paused_since, paused_exact, now, None))
    return out


def upgrade_findings(node: Node, memory: StateMemory, now: float, settings: StuckSettings) -> list[Finding]:
    state = node.labels.get(UPGRADE_STATE) or None
    since, exact = memory.seen(node.name, UPGRADE_STATE, state)
    if state in (None, UPGRADE_DONE, UPGRADE_REQUIRED):  # required: waiting for its turn (maxParallelUpgrades)
        return []
    started = _unix(node.annotations.get(UPGRADE_STARTED.get(state or "", "")))
    if started is not None:
        since, exact = started, True
    if state == UPGRADE_FAILED:
        return [_timed(Verdict.DRIVER_UPGRADE_STUCK, f"the GPU driver upgrade failed ({UPGRADE_STATE}={state})", since, exact, now, None)]
    return [_timed(Verdict.DRIVER_UPGRADE_STUCK, f"the GPU driver upgrade is in {state} ({UPGRADE_STATE}={state})", since, exact,
                   now, settings.upgrade_after)]


def nvsentinel_cordoned(node: Node) -> bool:
    """NVSentinel's fault quarantine holds the node cordoned."""
    return node.unschedulable and node.annotations.get(QUARANTINE_CORDONED) == "True"


def _nvsentinel_label(node: Node, name: str) -> str | None:
    """NVSentinel's `<labelPrefix><name>` label; the prefix is its configuration's (`k8saas.nvidia.com/` by default)."""
    return next((v for k, v in node.labels.items() if k.endswith("/" + name)), None)


def _quarantined_checks(node: Node) -> list[str]:
    """The checks NVSentinel holds the node for: a JSON list of health events (one event in its older releases)."""
    try:
        events = json.loads(node.annotations.get(QUARANTINE_EVENTS) or "[]")
    except ValueError:
        return []
    events = events if isinstance(events, list) else [events]
    return sorted({e["checkName"] for e in events if isinstance(e, dict) and isinstance(e.get("checkName"), str)})


def _paused(node: Node) -> tuple[str, ...]:
    """The operands the MIG manager paused on the node."""
    return tuple(sorted(k.removeprefix(DEPLOY_PREFIX) for k, v in node.labels.items() if k.startswith(DEPLOY_PREFIX) and v == PAUSED_FOR_MIG))


def _left(node: Node) -> bool:
    """Cordoned by NVSentinel, and no health condition is True any more."""
    return nvsentinel_cordoned(node) and not health_condition_problems(node)


def observe(node: Node, memory: StateMemory) -> None:
    """Note the node's states as they are now (each node change): a state that appears later began then."""
    memory.seen(node.name, MIG_STATE, node.labels.get(MIG_STATE))
    memory.seen(node.name, PAUSED_FOR_MIG, _paused(node))
    memory.seen(node.name, UPGRADE_STATE, node.labels.get(UPGRADE_STATE) or None)
    memory.seen(node.name, "left-cordoned", _left(node) or None)


def left_cordoned(node: Node, memory: StateMemory, now: float) -> list[Finding]:
    if not _left(node):
        memory.seen(node.name, "left-cordoned", None)
        return []
    healed = [c.since for c in node.conditions if c.type not in KUBELET_CONDITIONS and c.since is not None]
    cordoned = _label_time(_nvsentinel_label(node, CORDON_AT))
    since, exact = memory.seen(node.name, "left-cordoned", True)
    if healed or cordoned is not None:
        since, exact = max([*healed, *([cordoned] if cordoned is not None else [])]), True
    checks, rules = ", ".join(_quarantined_checks(node)), _nvsentinel_label(node, CORDON_REASON)
    what = (f"cordoned by NVSentinel{f' for {checks}' if checks else ''}{f' ({rules})' if rules else ''}, "
            "its health conditions healthy again: left cordoned")
    return [_timed(Verdict.LEFT_CORDONED, what, since, exact, now, None)]


def node_findings(node: Node, memory: StateMemory, now: float, settings: StuckSettings) -> list[Finding]:
    """Every stuck verdict of the node, and states on their way to one."""
    return [*mig_findings(node, memory, now, settings), *upgrade_findings(node, memory, now, settings),
            *left_cordoned(node, memory, now)]


def cordon_words(node: Node) -> str | None:
    """Who cordoned the node, where a component says it did: the GPU driver upgrade (unless the node was cordoned
    before it began), NVSentinel."""
    if not node.unschedulable:
        return None
    state = node.labels.get(UPGRADE_STATE)
    if state in UPGRADE_CORDONED and UPGRADE_WAS_CORDONED not in node.annotations:
        return (f"node is cordoned by the GPU driver upgrade ({UPGRADE_STATE}={state}), not by an admin: "
                "the upgrade controller uncordons it when the upgrade is done")
    if nvsentinel_cordoned(node):
        return "node is cordoned by NVSentinel's fault quarantine: no new pods are scheduled on it"
    return None


def _unix(value: str | None) -> float | None:
    try:
        return float(int(value)) if value else None
    except ValueError:
        return None


def _label_time(value: str | None) -> float | None:
    """NVSentinel's label time, `2006-01-02T15-04-05Z` in UTC (a label value has no colons)."""
    try:
        return datetime.strptime(value, "%Y-%m-%dT%H-%M-%SZ").replace(tzinfo=timezone.utc).timestamp() if value else None
    except ValueError:
        return None
