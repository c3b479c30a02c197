"""Options, the pod's fixed names and labels, and the errors that stop a verification before it starts."""
from __future__ import annotations

from dataclasses import dataclass

import orjson

DEFAULT_IMAGE = "nvidia/cuda:12.4.0-base-ubuntu22.04"
DEFAULT_TIMEOUT = 120.0
DELETE_CONFIRM_TIMEOUT = 30.0
CONTAINER = "nvidia-smi"

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


class ApiError(VerifyError):
    def __init__(self, status: int, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason

    @classmethod
    def from_body(cls, status: int, body: bytes) -> "ApiError":
        try:
            data = orjson.loads(body)
            message = str(data.get("message") or "")
            reason = str(data.get("reason") or "")
        except (orjson.JSONDecodeError, AttributeError):
            message, reason = body.decode(errors="replace").strip()[:300], ""
        return cls(status, message or f"HTTP {status}", reason)


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
