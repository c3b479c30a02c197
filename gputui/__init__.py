"""gputui: where are my GPUs? A terminal UI for Kubernetes clusters with NVIDIA GPUs."""
import logging

__version__ = "0.1.0"

# Nothing of gputui's logging reaches a terminal by itself (Python's last-resort handler would
# print warnings and tracebacks over the screen): `--debug` attaches a handler (cli/main.py).
logging.getLogger(__name__).addHandler(logging.NullHandler())
