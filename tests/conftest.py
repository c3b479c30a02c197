"""Fixtures shared by every test directory: running the real kubectl against a simulated cluster."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Callable

import pytest

from gputui.cli.loop import new_loop

KUBECTL = shutil.which("kubectl")


class Kubectl:
    """The real kubectl with its own kubeconfig and discovery cache (kubectl caches discovery per server)."""

    def __init__(self, binary: str, kubeconfig: Path, cache_dir: Path) -> None:
        self.binary, self.kubeconfig, self.cache_dir = binary, kubeconfig, cache_dir

    def run(self, *args: str, input: str | None = None, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.binary, "--kubeconfig", str(self.kubeconfig), "--cache-dir", str(self.cache_dir), *args],
            capture_output=True, text=True, input=input, timeout=timeout,
        )

    def __call__(self, *args: str, input: str | None = None, timeout: float = 30) -> str:
        """stdout of a command that must succeed."""
        done = self.run(*args, input=input, timeout=timeout)
        assert done.returncode == 0, f"kubectl {' '.join(args)} failed ({done.returncode}): {done.stderr}"
        return done.stdout


def pytest_asyncio_loop_factories(config: pytest.Config, item: pytest.Item) -> dict[str, Callable[[], object]]:
    """Async tests run on the event loop gputui's commands run on."""
    return {"gputui": new_loop}


@pytest.fixture(scope="session")
def kubectl_binary() -> str:
    if KUBECTL is None:
        pytest.skip("kubectl is not installed (.ci/run installs it)")
    return KUBECTL


@pytest.fixture(scope="module")
def make_kubectl(kubectl_binary: str, tmp_path_factory: pytest.TempPathFactory) -> Callable[[Path], Kubectl]:
    """make_kubectl(kubeconfig_path) -> Kubectl, each with a fresh cache dir."""

    def make(kubeconfig: Path) -> Kubectl:
        return Kubectl(kubectl_binary, Path(kubeconfig), tmp_path_factory.mktemp("kubectl-cache"))

    return make
