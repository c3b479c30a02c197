"""Options, the pod's fixed names and labels, and the errors that stop a verification before it starts."""
from __future__ import annotations

from dataclasses import dataclass

from .. import client

DEFAULT_IMAGE = "nvidia/cuda:12.4.0-base-ubuntu22.04"
DEFAULT_TIMEOUT = 120.0
DELETE_CONFIRM_TIMEOUT = 30.0
CONTAINER = "nvidia-smi"
# The pod's own cpu and memory, requested and limited alike: enough for nvidia-smi, and what a namespace with a
# ResourceQuota on cpu or memory insists every container names.
DEFAULT_CPU = "100m"
DEFAULT_MEMORY = "128Mi"
# A user that is not root (nobody), so that the pod passes PodSecurity "restricted".
RUN_AS_USER = 65534

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "gputui"
NAME_LABEL = "app.kubernetes.io/name"
NAME = "gputui-verify"
NODE_LABEL = "gputui.io/verify-node"  # the node, cut to a valid label value
NODE_ANNOTATION = "gputui.io/verify-node"  # the node's full name
LEFTOVER_SELECTOR = f"{MANAGED_BY_LABEL}={MANAGED_BY},{NAME_LABEL}={NAME}"


class VerifyError(Exception):
    """The verification cannot start (node missing, read-only mode, API trouble)."""


class ReadOnlyError(VerifyError):
    pass


class ApiError(client.ApiError, VerifyError):
    """An API call of the verification failed (status, the server's message and reason)."""


# -- options ---------------------------------------------------------------


@dataclass(frozen=True)
class VerifyOptions:
    image: str = DEFAULT_IMAGE
    resource: str | None = None  # None: choose from what the node has free
    count: int = 1
    runtime_class: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    tolerate: tuple[str, ...] = ()  # taint keys to tolerate besides nvidia.com/gpu
    read_only: bool = False
    delete_timeout: float = DELETE_CONFIRM_TIMEOUT
    cpu: str = DEFAULT_CPU  # the container's cpu request and limit
    memory: str = DEFAULT_MEMORY  # its memory request and limit
