"""GPU plumbing states written onto a node object as their components write them (the oracle for kube/stuck.py):

- the MIG manager (NVIDIA/mig-parted): `nvidia.com/mig.config.state` pending or rebooting while it works, with the
  GPU clients it stops paused (`nvidia.com/gpu.deploy.<operand>=paused-for-mig-change`, only those that were
  `true`); success once it gave them back; failed leaves them as they are;
- the GPU driver upgrade controller (NVIDIA/k8s-operator-libs, driver name `gpu`): the state label
  `nvidia.com/gpu-driver-upgrade-state`, the node cordoned from cordon-required to uncordon-required (noting a
  cordon that was there before in `...node-initial-state.unschedulable`), the start of wait-for-jobs-required
  and validation-required in annotations, in Unix seconds;
- NVSentinel (NVIDIA/NVSentinel): its platform connector's node condition, typed after the health check
  (`<check>IsNotHealthy` True, `<check>IsHealthy` False with `No Health Failures`); its fault quarantine's cordon
  (the chart's default rule sets cordon and taint nothing) with the annotations `quarantineHealthEvent` (a JSON list
  of the events it holds the node for) and `quarantineHealthEventIsCordoned=True`, the labels
  `k8saas.nvidia.com/cordon-by=NVSentinel`, `cordon-reason` (the matching rule set's name, made a label value),
  `cordon-timestamp` (`2006-01-02T15-04-05Z`, UTC) and `dgxc.nvidia.com/nvsentinel-state=quarantined`. Once every
  check it holds the node for sent a healthy event it lifts all that and labels `uncordon-by`, `uncordon-timestamp`.

Each function changes a node object in place (a store mutation's body)."""
from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from .. import builders as b

Obj = dict[str, Any]

MIG_STATE = "nvidia.com/mig.config.state"
MIG_STATES = ("pending", "rebooting", "success", "failed")
MIG_CLIENTS = ("device-plugin", "gpu-feature-discovery", "dcgm-exporter", "dcgm")  # what the MIG manager stops
PAUSED = "paused-for-mig-change"
DEPLOY = "nvidia.com/gpu.deploy."

UPGRADE_STATE = "nvidia.com/gpu-driver-upgrade-state"
UPGRADE_STATES = ("upgrade-required", "cordon-required", "wait-for-jobs-required", "pod-deletion-required", "drain-required",
                  "node-maintenance-required", "post-maintenance-required", "pod-restart-required", "validation-required",
                  "uncordon-required", "upgrade-done", "upgrade-failed")
_CORDONED = UPGRADE_STATES[2:10] + ("upgrade-failed",)  # after cordon-required, until uncordon-required is done
UPGRADE_INITIAL = "nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable"
UPGRADE_STARTS = {"wait-for-jobs-required": "nvidia.com/gpu-driver-upgrade-wait-for-pod-completion-start-time",
                  "validation-required": "nvidia.com/gpu-driver-upgrade-validation-start-time"}

NVSENTINEL_PREFIX = "k8saas.nvidia.com/"  # the chart's fault-quarantine labelPrefix
NVSENTINEL_STATE = "dgxc.nvidia.com/nvsentinel-state"
QUARANTINE_ANNOTATION = "quarantineHealthEvent"
QUARANTINE_CORDONED = "quarantineHealthEventIsCordoned"
UNCORDONED_MANUALLY = "quarantinedNodeUncordonedManually"
_CORDON_LABELS = ("cordon-by", "cordon-reason", "cordon-timestamp")
# Which monitor sends a check, and the chart's rule set that cordons for its fatal events.
MONITORS = {"Gpu": ("gpu-health-monitor", "GPU fatal error ruleset"),
            "SysLogs": ("syslog-health-monitor", "Syslog fatal error ruleset")}


def _labels(node: Obj) -> dict[str, str]:
    return node["metadata"].setdefault("labels", {})


def _annotations(node: Obj) -> dict[str, str]:
    return node["metadata"].setdefault("annotations", {})


def set_mig_state(node: Obj, state: str) -> None:
    if state not in MIG_STATES:
        raise ValueError(f"MIG state {state!r}: one of {', '.join(MIG_STATES)}")
    labels = _labels(node)
    if state in ("pending", "rebooting"):
        for client in MIG_CLIENTS:
            if labels.get(DEPLOY + client) == "true":
                labels[DEPLOY + client] = PAUSED
    elif state == "success":
        for client in MIG_CLIENTS:
            if labels.get(DEPLOY + client) == PAUSED:
                labels[DEPLOY + client] = "true"
    labels[MIG_STATE] = state


def set_upgrade_state(node: Obj, state: str, now: datetime) -> None:
    if state not in UPGRADE_STATES:
        raise ValueError(f"driver upgrade state {state!r}: one of {', '.join(UPGRADE_STATES)}")
    labels, annotations, spec = _labels(node), _annotations(node), node.setdefault("spec", {})
    if state in _CORDONED and labels.get(UPGRADE_STATE) not in _CORDONED:  # the controller's cordon-required step
        if spec.get("unschedulable"):
            annotations[UPGRADE_INITIAL] = "true"
        spec["unschedulable"] = True
    if state == "upgrade-done" and labels.get(UPGRADE_STATE) in _CORDONED:  # uncordon-required, done
        if annotations.pop(UPGRADE_INITIAL, None) is None:
            spec.pop("unschedulable", None)
    for started, key in UPGRADE_STARTS.items():
        if started == state:
            annotations.setdefault(key, str(int(now.timestamp())))
        else:
            annotations.pop(key, None)
    labels[UPGRADE_STATE] = state


def set_condition(node: Obj, kind: str, problem: bool, reason: str, message: str, now: datetime) -> None:
    """A health monitor's node condition (True: the problem is there), its transition time moved when it changes."""
    conditions = node.setdefault("status", {}).setdefault("conditions", [])
    status, stamp = "True" if problem else "False", b.rfc3339(now)
    for c in conditions:
        if c.get("type") == kind:
            if c.get("status") != status:
                c["lastTransitionTime"] = stamp
            c.update(status=status, reason=reason, message=message, lastHeartbeatTime=stamp)
            return
    conditions.append(b.node_condition(kind, status, reason, message, stamp, stamp))


def monitor(check: str) -> tuple[str, str]:
    """(agent, rule set) of a health check: `GpuMemWatch` (the GPU health monitor's DCGM watches, GpuXidError),
    `SysLogsXIDError` (the syslog monitor's)."""
    for prefix, found in MONITORS.items():
        if check.startswith(prefix):
            return found
    raise ValueError(f"health check {check!r}: not one of NVSentinel's GPU or syslog monitors' (Gpu..., SysLogs...)")


def _events(node: Obj) -> list[Obj]:
    return json.loads(_annotations(node).get(QUARANTINE_ANNOTATION) or "[]")


def quarantine(node: Obj, check: str, message: str, now: datetime) -> None:
    """NVSentinel: a fatal health event: the check's condition True, then the fault quarantine's cordon; a node it
    holds already only gets the event added to its annotation."""
    agent, rule_set = monitor(check)
    set_condition(node, check, True, check + "IsNotHealthy", message, now)
    labels, annotations = _labels(node), _annotations(node)
    event = {"version": 1, "agent": agent, "componentClass": "GPU", "checkName": check, "isFatal": True,
             "isHealthy": False, "message": message, "nodeName": node["metadata"]["name"]}
    held = _events(node)
    if not any(e.get("checkName") == check for e in held):
        annotations[QUARANTINE_ANNOTATION] = json.dumps([*held, event])
    if held:
        return
    annotations.pop(UNCORDONED_MANUALLY, None)
    annotations[QUARANTINE_CORDONED] = "True"
    labels[NVSENTINEL_PREFIX + "cordon-by"] = "NVSentinel"
    labels[NVSENTINEL_PREFIX + "cordon-reason"] = re.sub(r"[^a-zA-Z0-9_.-]", "-", rule_set)[:63].strip("-")
    labels[NVSENTINEL_PREFIX + "cordon-timestamp"] = now.strftime("%Y-%m-%dT%H-%M-%SZ")
    labels[NVSENTINEL_STATE] = "quarantined"
    node.setdefault("spec", {})["unschedulable"] = True


def heal(node: Obj, check: str, now: datetime, *, halted: bool = False) -> None:
    """The monitor finds the node healthy again: its condition False. The fault quarantine drops the check and,
    none left, lifts its quarantine; `halted` (its circuit breaker tripped, or it is not running): it does not, and
    the node is left cordoned."""
    set_condition(node, check, False, check + "IsHealthy", "No Health Failures", now)
    held = _events(node)
    if halted or not held:
        return
    labels, annotations = _labels(node), _annotations(node)
    left = [e for e in held if e.get("checkName") != check]
    if left:
        annotations[QUARANTINE_ANNOTATION] = json.dumps(left)
        return
    for key in (QUARANTINE_ANNOTATION, QUARANTINE_CORDONED):
        annotations.pop(key, None)
    for name in _CORDON_LABELS:
        labels.pop(NVSENTINEL_PREFIX + name, None)
    labels.pop(NVSENTINEL_STATE, None)
    labels[NVSENTINEL_PREFIX + "uncordon-by"] = "NVSentinel"
    labels[NVSENTINEL_PREFIX + "uncordon-timestamp"] = now.strftime("%Y-%m-%dT%H-%M-%SZ")
    node.setdefault("spec", {}).pop("unschedulable", None)
