"""The verdicts (problem codes), one enumeration: each code with its words, its short words (a narrow
Nodes pane, the Fleet screen) and its severity. The members are in severity order, worst first: a
node's problems come in this order (`gpu.by_severity`), the Nodes pane shows the first and counts the
rest. Each has a row in the README's problem-code table (tests/model/test_vocabulary.py checks).

A new verdict: a member here, a pure function of records that returns `Problem(Verdict.X, message)`
(kube/gpu.py, kube/stack.py), a README row, and an oracle test in tests/model/.
"""
from __future__ import annotations

from enum import Enum

PROBLEM, WARNING = "problem", "warning"  # ✗ and !: a problem, or a node merely held back (cordoned)


class Verdict(str, Enum):
    """A problem code: its value is the code (`not-ready`), as JSON and the README write it."""

    words: str
    short: str
    severity: str
    cluster: bool

    def __new__(cls, code: str, words: str = "", short: str = "", severity: str = PROBLEM, cluster: bool = False) -> Verdict:
        member = str.__new__(cls, code)
        member._value_ = code
        member.words = words
        member.short = short or words
        member.severity = severity
        member.cluster = cluster  # a cluster's verdict, not a node's
        return member

    def __str__(self) -> str:
        return self.value

    NOT_READY = "not-ready", "not ready"
    PLUGIN_NOT_REGISTERED = "plugin-not-registered", "plugin not registered", "unregistered"
    PLUGIN_NOT_RUNNING = "plugin-not-running", "plugin not running", "plugin down"
    XID_ERRORS = "xid-errors", "XID errors", "XID"
    HEALTH_CONDITION = "health-condition", "health"  # shown with the condition's type: `GpuMemWatch`
    UNHEALTHY_GPUS = "unhealthy-gpus", "unhealthy GPUs", "unhealthy"
    COMPONENT_FAILING = "component-failing", "component failing", "stack part"
    MIG_STUCK = "mig-stuck", "MIG change stuck", "MIG stuck"  # shown with its age: `MIG stuck 42m`
    DRIVER_UPGRADE_STUCK = "driver-upgrade-stuck", "driver upgrade stuck", "upgrade stuck"
    OVERCOMMITTED = "overcommitted", "overcommitted", "overcommit"
    TAINTED = "tainted", "tainted"  # shown with the taint's key: `taint nvidia.com/gpu-error`
    SEVERAL_PLUGINS = "several-plugins", "several plugins", "2+ plugins"
    LEFT_CORDONED = "left-cordoned", "left cordoned", "", WARNING  # by NVSentinel, healthy again
    CORDONED = "cordoned", "cordoned", "", WARNING
    OPERATOR_NOT_READY = "operator-not-ready", "operator not ready", "", PROBLEM, True
    COMPUTE_DOMAIN_NOT_READY = "compute-domain-not-ready", "ComputeDomain not ready", "domain not ready", PROBLEM, True


NODE_VERDICTS = tuple(v for v in Verdict if not v.cluster)  # worst first
_RANK = {v.value: rank for rank, v in enumerate(Verdict)}
_BY_CODE = {v.value: v for v in Verdict}


def rank(code: str) -> int:
    """A code's place in the severity order (an unknown code last)."""
    return _RANK.get(code, len(_RANK))


def verdict(code: str) -> Verdict | None:
    """The member of a code, None for a code this gputui does not know (a newer fleet member's)."""
    return _BY_CODE.get(code)
