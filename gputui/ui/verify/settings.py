"""What `v` creates (VerifySettings), and the constants the verification screens and the app share."""
from __future__ import annotations

import random
from dataclasses import dataclass, field

from gputui.kube import verify as v

VERIFY_GROUP = "verify"  # workers that own a verification pod
READ_ONLY_MESSAGE = "read-only mode: verification creates a pod, disabled"
FLUSH_INTERVAL = 0.1
DEFAULT_CONCURRENCY = 4


@dataclass(frozen=True)
class VerifySettings:
    """What `v` creates: the pod's options (read-only among them), its namespace, how many at once."""

    options: v.VerifyOptions = field(default_factory=v.VerifyOptions)
    namespace: str | None = None  # None: the context's namespace
    concurrency: int = DEFAULT_CONCURRENCY
    rng: random.Random | None = None  # the pod names' random suffixes (fixed in tests)

    @property
    def read_only(self) -> bool:
        return self.options.read_only
