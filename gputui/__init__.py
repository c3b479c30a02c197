"""gputui: where are my GPUs? A terminal UI for Kubernetes clusters with NVIDIA GPUs."""

__version__ = "0.1.0"
