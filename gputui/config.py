"""gputui's config file: `$XDG_CONFIG_HOME/gputui/config.toml` (default `~/.config/gputui/config.toml`).

    read_only = true                 # no verification pods, in the app and in `gputui verify`

    [verify]
    image = "registry.example.com/nvidia/cuda:12.4.0-base-ubuntu22.04"
    namespace = "gpu-checks"
    runtime_class = "nvidia"
    timeout = 180                    # seconds
    resource = "nvidia.com/gpu"

    [metrics]
    interval = 60                    # seconds between background reads of each GPU node's DCGM exporter; 0: off
    reads_per_minute = 600           # at most this many background exporter reads a minute (round-robin beyond)
    concurrency = 8                  # exporter reads at once

`--config PATH` or `GPUTUI_CONFIG` name another file (which must then exist);
flags override the file. Unknown settings are errors, so a typo is not
silently ignored. No Textual here: the headless commands read it too.
"""
from __future__ import annotations

import argparse
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .kube import verify as v

ENV_VAR = "GPUTUI_CONFIG"
MAX_TIMEOUT = 86_400.0
# kube/metrics.py's defaults (not imported: it loads the client; tests/test_config.py checks they agree)
DEFAULT_METRICS_INTERVAL, DEFAULT_READS_PER_MINUTE, DEFAULT_CONCURRENCY = 60.0, 600, 8
DEFAULT_EXEC_TIMEOUT = 60.0  # kube/credentials.py's EXEC_TIMEOUT (tests/test_config.py checks they agree)


class ConfigError(Exception):
    """The config file cannot be used; the message is one line naming the file and the problem."""


@dataclass(frozen=True)
class VerifyConfig:
    """The `[verify]` table; None where the file says nothing."""

    image: str | None = None
    namespace: str | None = None
    runtime_class: str | None = None
    timeout: float | None = None
    resource: str | None = None


@dataclass(frozen=True)
class MetricsConfig:
    """The `[metrics]` table: the background reads of every GPU node's DCGM exporter."""

    interval: float = DEFAULT_METRICS_INTERVAL  # 0: no background reads (details still read their node)
    reads_per_minute: int = DEFAULT_READS_PER_MINUTE
    concurrency: int = DEFAULT_CONCURRENCY

    def model_options(self) -> dict[str, Any]:
        """ClusterModel's keyword arguments for these settings."""
        return {
            "metrics_background_interval": self.interval,
            "metrics_reads_per_minute": self.reads_per_minute,
            "metrics_concurrency": self.concurrency,
        }


@dataclass(frozen=True)
class Config:
    read_only: bool = False
    exec_timeout: float = DEFAULT_EXEC_TIMEOUT  # seconds a kubeconfig's exec credential plugin may take
    verify: VerifyConfig = field(default_factory=VerifyConfig)
    path: Path | None = None  # the file read; None when there was none
    metrics: MetricsConfig = field(default_factory=MetricsConfig)

    def verify_options(
        self,
        *,
        read_only: bool | None = None,
        image: str | None = None,
        resource: str | None = None,
        runtime_class: str | None = None,
        timeout: float | None = None,
        **other: Any,
    ) -> v.VerifyOptions:
        """Verification options: a flag's value where given (not None), else the file's, else the default."""
        file = self.verify
        return v.VerifyOptions(
            image=image or file.image or v.DEFAULT_IMAGE,
            resource=resource or file.resource,
            runtime_class=runtime_class or file.runtime_class,
            timeout=timeout or file.timeout or v.DEFAULT_TIMEOUT,
            read_only=self.read_only if read_only is None else read_only,
            **other,
        )


def add_config_args(parser: argparse.ArgumentParser, *, subcommand: bool = False) -> None:
    """--config and --read-only/--no-read-only. A subcommand's copies leave the main
    parser's values alone when not given (so `gputui --read-only verify` works too)."""
    default: Any = argparse.SUPPRESS if subcommand else None
    parser.add_argument(
        "--config", metavar="PATH", default=default,
        help=f"config file (default: ${ENV_VAR}, then $XDG_CONFIG_HOME/gputui/config.toml or ~/.config/gputui/config.toml)",
    )
    parser.add_argument(
        "--read-only", action=argparse.BooleanOptionalAction, default=default,
        help="create nothing in the cluster: verification is disabled (default: the config file's read_only, else off)",
    )


def config_path(explicit: str | None = None, environ: Mapping[str, str] | None = None) -> tuple[Path, bool]:
    """(the file to read, whether the user named it: then it must exist)."""
    env = os.environ if environ is None else environ
    if explicit:
        return Path(explicit).expanduser(), True
    if env.get(ENV_VAR):
        return Path(env[ENV_VAR]).expanduser(), True
    base = env.get("XDG_CONFIG_HOME", "")
    if not base or not os.path.isabs(base):  # the XDG spec: a relative path is to be ignored
        base = os.path.join(env.get("HOME") or os.path.expanduser("~"), ".config")
    return Path(base) / "gputui" / "config.toml", False


def load_config(explicit: str | None = None, environ: Mapping[str, str] | None = None) -> Config:
    """The config in effect: the named or default file, or the defaults when the default file is absent."""
    path, named = config_path(explicit, environ)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        if named:
            raise ConfigError(f"config {path}: no such file") from None
        return Config()
    except OSError as e:
        raise ConfigError(f"config {path}: cannot read it: {e.strerror or e}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"config {path}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"config {path}: not valid TOML: {e}") from None
    return parse_config(data, path)


_TOP_KEYS = ("read_only", "exec_timeout", "verify", "metrics")
_VERIFY_KEYS = ("image", "namespace", "runtime_class", "timeout", "resource")
_METRICS_KEYS = ("interval", "reads_per_minute", "concurrency")
MAX_READS_PER_MINUTE = 60_000
MAX_CONCURRENCY = 64


def parse_config(data: Mapping[str, Any], path: Path | None = None) -> Config:
    """A Config from parsed TOML; ConfigError names the first bad setting."""
    where = f"config {path}" if path else "config"

    def bad(message: str) -> ConfigError:
        return ConfigError(f"{where}: {message}")

    _no_unknown(data, _TOP_KEYS, "", bad)
    read_only = data.get("read_only", False)
    if not isinstance(read_only, bool):
        raise bad(f"read_only must be true or false, not {_shown(read_only)}")
    table = data.get("verify", {})
    if not isinstance(table, dict):
        raise bad(f"verify must be a table ([verify]), not {_shown(table)}")
    _no_unknown(table, _VERIFY_KEYS, "verify.", bad)
    texts: dict[str, str | None] = {}
    for key in ("image", "namespace", "runtime_class", "resource"):
        value = table.get(key)
        if value is not None and (not isinstance(value, str) or not value.strip() or value != value.strip()):
            raise bad(f"verify.{key} must be a non-empty string without surrounding spaces, not {_shown(value)}")
        texts[key] = value
    timeout = table.get("timeout")
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= MAX_TIMEOUT:
            raise bad(f"verify.timeout must be a number of seconds between 0 and {MAX_TIMEOUT:g}, not {_shown(timeout)}")
        timeout = float(timeout)
    exec_timeout = data.get("exec_timeout", DEFAULT_EXEC_TIMEOUT)
    if isinstance(exec_timeout, bool) or not isinstance(exec_timeout, (int, float)) or not 0 < exec_timeout <= MAX_TIMEOUT:
        raise bad(f"exec_timeout must be a number of seconds between 0 and {MAX_TIMEOUT:g}, not {_shown(exec_timeout)}")
    return Config(read_only=read_only, exec_timeout=float(exec_timeout), verify=VerifyConfig(timeout=timeout, **texts), path=path,
                  metrics=_metrics(data, bad))


def _metrics(data: Mapping[str, Any], bad: Any) -> MetricsConfig:
    table = data.get("metrics", {})
    if not isinstance(table, dict):
        raise bad(f"metrics must be a table ([metrics]), not {_shown(table)}")
    _no_unknown(table, _METRICS_KEYS, "metrics.", bad)
    interval = table.get("interval", DEFAULT_METRICS_INTERVAL)
    if isinstance(interval, bool) or not isinstance(interval, (int, float)) or not (interval == 0 or 1 <= interval <= MAX_TIMEOUT):
        raise bad(f"metrics.interval must be 0 (off) or a number of seconds between 1 and {MAX_TIMEOUT:g}, not {_shown(interval)}")
    whole = {}
    for key, default, top in (("reads_per_minute", DEFAULT_READS_PER_MINUTE, MAX_READS_PER_MINUTE), ("concurrency", DEFAULT_CONCURRENCY, MAX_CONCURRENCY)):
        value = table.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
            raise bad(f"metrics.{key} must be a whole number between 1 and {top}, not {_shown(value)}")
        whole[key] = value
    return MetricsConfig(interval=float(interval), **whole)


def _no_unknown(table: Mapping[str, Any], known: tuple[str, ...], prefix: str, bad: Any) -> None:
    for key in table:
        if key not in known:
            raise bad(f"unknown setting {prefix}{key} (known: {', '.join(prefix + k for k in known)})")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:59] + "…"
