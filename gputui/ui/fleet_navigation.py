"""The app's way around a fleet: FleetNavigation shows the Fleet screen first, opens a cluster from it
(`enter`, the palette's "Open cluster"), and goes back to it (`esc` on the main screen).

The Fleet screen itself (fleet.py) renders the fleet's rows; the app owns the fleet, its connections and
models. fleet.py is imported only where there is a fleet: a single cluster loads none of it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Coroutine, Protocol

from rich.text import Text

if TYPE_CHECKING:
    from textual.await_complete import AwaitComplete
    from textual.screen import Screen
    from textual.widget import AwaitMount
    from textual.worker import Worker

    from gputui.kube.fleet import Fleet
    from gputui.kube.model import ClusterModel

    from .header import ClusterHeader

FLEET_SCREEN = "fleet"  # the Fleet screen's name among the app's installed screens


class FleetHost(Protocol):
    """The app, as the way around its fleet needs it."""

    @property
    def fleet(self) -> Fleet | None: ...
    @property
    def context(self) -> str | None: ...
    @property
    def model(self) -> ClusterModel | None: ...
    @property
    def screen(self) -> Screen[object]: ...
    @property
    def cluster_header(self) -> ClusterHeader: ...
    def install_screen(self, screen: Screen[None], name: str) -> None: ...
    def push_screen(self, screen: str) -> AwaitMount: ...
    def pop_screen(self) -> AwaitComplete: ...
    def run_worker(self, work: Callable[[], Coroutine[None, None, None]], name: str | None = ..., group: str = ...,
                   description: str = ..., exit_on_error: bool = ..., start: bool = ..., exclusive: bool = ...) -> Worker[None]: ...
    def switch_context(self, context: str) -> None:
        """Connect to this context instead (a fleet's member: its own watches)."""
    def verification_running(self) -> bool:
        """Verification pods are running on the cluster shown."""


class FleetNavigation:
    """The app's, with a fleet: the Fleet screen first, a cluster opened from it, `esc` back to it.
    The screen is installed, so that leaving it for a cluster keeps it (its order, filter and cursor)."""

    def __init__(self, host: FleetHost) -> None:
        self._host = host
        self._installed = False  # the Fleet screen exists: `esc` may go back to it

    @property
    def in_fleet(self) -> bool:
        """The app runs a fleet: `esc` on the main screen goes back to its screen."""
        return self._host.fleet is not None

    def start(self) -> None:
        """The main screen is up: start the fleet, then show its screen."""
        self._host.run_worker(self._start, "start_fleet", group="fleet")

    async def _start(self) -> None:
        from .fleet import FleetScreen  # noqa: PLC0415

        host = self._host
        fleet = host.fleet
        assert fleet is not None
        await fleet.start()
        host.cluster_header.update(Text("fleet: choose a cluster (enter)", style="dim"))
        host.install_screen(FleetScreen(fleet, self.open_cluster), name=FLEET_SCREEN)
        self._installed = True
        await host.push_screen(FLEET_SCREEN)

    def open_cluster(self, context: str) -> None:
        """The Fleet screen's `enter`: this cluster's main screen, on the fleet's own watches."""
        from .fleet import FleetScreen  # noqa: PLC0415

        host = self._host
        if isinstance(host.screen, FleetScreen):
            host.pop_screen()
        if context != host.context or host.model is None:
            host.switch_context(context)

    def back(self) -> None:
        """`esc` on the main screen: the Fleet screen again."""
        if not self._installed or self._host.verification_running():
            return  # a running verification keeps its cluster on screen: esc cancels it there
        self._host.push_screen(FLEET_SCREEN)
