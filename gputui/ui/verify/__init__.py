"""Verification in the app: `v` checks the selected (or marked) nodes against their real GPUs.

`v` plans a pod per node (gputui.kube.verify), a confirmation screen shows the
exact pod spec, then a live screen follows one node (phase, events, logs,
elapsed time, verdict) or a table follows several. Each screen runs the
verification in a worker of the VERIFY_GROUP group that drives
`gputui.kube.verify`; cancelling that worker (esc, ctrl+c, leaving the
screen, quitting) deletes the pod, and `VerifyFlow.stop`
lets the app wait for those deletions before it closes its connection.

The modules, each depending only on those listed before it:
  settings   VerifySettings and the shared constants (VERIFY_GROUP, READ_ONLY_MESSAGE, FLUSH_INTERVAL)
  words      stages and codes in words, a verdict as text (verdict_text, pod_fate), event lines, elapsed time
  confirm    ConfirmVerifyScreen: the exact pod spec, before anything is created
  live       VerifyScreen: one node, live
  results    VerifyManyScreen: several nodes in a results table
  leftovers  LeftoversScreen: pods an earlier run left behind
  actions    VerifyFlow: the app's part (keys, leftovers at connection, quitting and cleanup)
"""
from .actions import MARK, STOP_TIMEOUT, VerifyFlow, VerifyHost
from .confirm import ConfirmVerifyScreen
from .leftovers import LeftoversScreen
from .live import VerifyScreen
from .results import RESULT_COLUMNS, VerifyManyScreen
from .settings import DEFAULT_CONCURRENCY, FLUSH_INTERVAL, READ_ONLY_MESSAGE, VERIFY_GROUP, VerifySettings
from .words import CODE_WORDS, STAGE_WORDS, kubectl_delete, pod_fate, verdict_text

__all__ = [
    "CODE_WORDS",
    "DEFAULT_CONCURRENCY",
    "FLUSH_INTERVAL",
    "MARK",
    "READ_ONLY_MESSAGE",
    "RESULT_COLUMNS",
    "STAGE_WORDS",
    "STOP_TIMEOUT",
    "VERIFY_GROUP",
    "ConfirmVerifyScreen",
    "LeftoversScreen",
    "VerifyFlow",
    "VerifyHost",
    "VerifyManyScreen",
    "VerifyScreen",
    "VerifySettings",
    "kubectl_delete",
    "pod_fate",
    "verdict_text",
]
