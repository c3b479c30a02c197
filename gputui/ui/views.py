"""Every screen drawn from the model, each a ModelView (seam.py): the type checker checks each one's show()
against the protocol here, and tests/test_architecture.py checks that every screen of gputui/ui that reads the
model is listed. A new screen that shows the model is added to MODEL_VIEWS."""
from __future__ import annotations

from .capacity import CapacityScreen
from .health import HealthScreen
from .idle import IdleScreen
from .queues import QueuesScreen
from .screens import NodeDetailsScreen
from .seam import ModelView
from .stack import ComponentLogScreen, StackScreen
from .usage import UsageScreen
from .verify.live import VerifyScreen
from .verify.results import VerifyManyScreen

MODEL_VIEWS: tuple[type[ModelView], ...] = (
    CapacityScreen,
    ComponentLogScreen,
    HealthScreen,
    IdleScreen,
    NodeDetailsScreen,
    QueuesScreen,
    StackScreen,
    UsageScreen,
    VerifyManyScreen,
    VerifyScreen,
)
