"""gputui's config file: `$XDG_CONFIG_HOME/gputui/config.toml` (default `~/.config/gputui/config.toml`).

    read_only = true                 # no verification pods, in the app and in `gputui verify`
    namespaces = ["ml", "research"]  # where to read pods, events and DaemonSets when they cannot be
                                     # listed cluster-wide (after the context's namespace; -n replaces both)

    [verify]
    image = "registry.example.com/nvidia/cuda:12.4.0-base-ubuntu22.04"
    namespace = "gpu-checks"
    runtime_class = "nvidia"
    timeout = 180                    # seconds
    resource = "nvidia.com/gpu"
    cpu = "100m"                     # the pod's cpu request and limit (what a ResourceQuota on cpu asks for)
    memory = "128Mi"                 # its memory request and limit

    [metrics]
    interval = 60                    # seconds between background reads of each GPU node's DCGM exporter; 0: off
    reads_per_minute = 600           # at most this many background exporter reads a minute (round-robin beyond)
    concurrency = 8                  # exporter reads at once

    [idle]                           # idle allocated GPUs (the Idle GPUs view, the report's "idle")
    window = 3600                    # seconds of use the figures cover
    threshold = 5                    # percent: a GPU used less is idle
    prometheus = "monitoring/prometheus-k8s:9090"  # NAMESPACE/SERVICE[:PORT] through the API server, or an
                                     # http(s):// URL; "" for none: gputui's own samples of the exporters
    history = "~/.local/state/gputui/idle.sqlite"  # keep those samples across restarts (default: in memory only)

    [fleet]                          # with no --context: open these contexts as a fleet (the Fleet screen)
    contexts = ["prod-*", "staging"] # names or globs, in the kubeconfig's order
    live = 8                         # clusters watched at once; the others summarised every few minutes
    prometheus = "https://thanos.example.com"  # every cluster's row from this Prometheus (an http(s):// URL
                                     # holding each cluster's kube-state-metrics and DCGM series), not from watches
    cluster_label = "cluster"        # the label naming each series' cluster there
    [fleet.cluster_contexts]         # a cluster whose kubeconfig context has another name (default: the same)
    "prod-eu-1" = "gke_acme_europe-west1_prod-eu-1"

    [stuck]                          # GPU plumbing stuck (problem codes mig-stuck, driver-upgrade-stuck)
    mig_after = 1800                 # seconds a MIG reconfiguration may stay pending or rebooting
    upgrade_after = 3600             # seconds the GPU driver upgrade may stay in one state
    domain_after = 600               # seconds a ComputeDomain may stay NotReady (compute-domain-not-ready)

    [health]                         # bad GPUs (the Health view, the report's bad_gpus)
    xid_old_after = 86400            # seconds after which an XID whose value has not changed reads as old

`--config PATH` or `GPUTUI_CONFIG` name another file (which must then exist);
flags override the file. Unknown settings are errors, so a typo is not
silently ignored. No Textual here: the headless commands read it too.
"""
from __future__ import annotations

import argparse
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .kube.idle import IdleSettings
    from .kube.stuck import StuckSettings
    from .kube.verify import VerifyOptions

ENV_VAR = "GPUTUI_CONFIG"
MAX_TIMEOUT = 86_400.0
# kube/metrics.py's defaults (not imported: it loads the client; tests/test_config.py checks they agree)
DEFAULT_METRICS_INTERVAL, DEFAULT_READS_PER_MINUTE, DEFAULT_CONCURRENCY = 60.0, 600, 8
DEFAULT_EXEC_TIMEOUT = 60.0  # kube/credentials.py's EXEC_TIMEOUT (tests/test_config.py checks they agree)
# kube/verify/options.py's (not imported: it loads the whole verification; tests/test_config.py checks they agree)
DEFAULT_VERIFY_IMAGE, DEFAULT_VERIFY_TIMEOUT = "nvidia/cuda:12.4.0-base-ubuntu22.04", 120.0
DEFAULT_VERIFY_CPU, DEFAULT_VERIFY_MEMORY = "100m", "128Mi"
# A Kubernetes quantity above zero, as cpu and memory are written ("100m", "0.5", "128Mi", "1G").
QUANTITY = re.compile(r"([0-9]+(\.[0-9]*)?|\.[0-9]+)([numkMGTPE]|[KMGTPE]i|[eE][0-9]+)?")
# kube/idle.py's (not imported: it loads the client; tests/test_config.py checks they agree)
DEFAULT_IDLE_WINDOW, DEFAULT_IDLE_THRESHOLD, DEFAULT_PROMETHEUS = 3600.0, 5.0, "monitoring/prometheus-k8s:9090"
MIN_IDLE_WINDOW, MAX_IDLE_WINDOW = 10.0, 7 * 86_400.0
# kube/stuck.py's and kube/health.py's (not imported: they load the model; tests/test_config.py checks they agree)
DEFAULT_MIG_AFTER, DEFAULT_UPGRADE_AFTER, DEFAULT_DOMAIN_AFTER, DEFAULT_XID_OLD_AFTER = 1800.0, 3600.0, 600.0, 86_400.0
MAX_STUCK_AFTER = 30 * 86_400.0
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
PROMETHEUS_SERVICE = re.compile(rf"{_DNS_LABEL}/(https?:)?{_DNS_LABEL}(:[a-z0-9]([-a-z0-9]*[a-z0-9])?)?")


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
    cpu: str | None = None
    memory: str | None = None


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
class IdleConfig:
    """The `[idle]` table: idle allocated GPUs."""

    window: float = DEFAULT_IDLE_WINDOW
    threshold: float = DEFAULT_IDLE_THRESHOLD
    prometheus: str | None = DEFAULT_PROMETHEUS  # None: none, the exporters' samples only
    history: str | None = None

    def settings(self, prometheus: str | None = None, history: str | None = None) -> IdleSettings:
        """kube/idle.py's settings: a flag's value where given (not None; --prometheus "" for none), else the file's."""
        from .kube.idle import IdleSettings  # noqa: PLC0415  (only the model needs it)

        chosen = self.prometheus if prometheus is None else prometheus or None
        return IdleSettings(window=self.window, threshold=self.threshold, prometheus=chosen, history=history or self.history)


@dataclass(frozen=True)
class StuckConfig:
    """The `[stuck]` table: how long GPU plumbing may stay in a working state before it is stuck."""

    mig_after: float = DEFAULT_MIG_AFTER
    upgrade_after: float = DEFAULT_UPGRADE_AFTER
    domain_after: float = DEFAULT_DOMAIN_AFTER

    def settings(self) -> StuckSettings:
        from .kube.stuck import StuckSettings  # noqa: PLC0415  (only the model needs it)

        return StuckSettings(mig_after=self.mig_after, upgrade_after=self.upgrade_after, domain_after=self.domain_after)


@dataclass(frozen=True)
class HealthConfig:
    """The `[health]` table: bad GPUs."""

    xid_old_after: float = DEFAULT_XID_OLD_AFTER


def prometheus_target(text: str) -> str:
    """A Prometheus to ask: `NAMESPACE/SERVICE[:PORT]` or an http(s):// URL (or "" for none); ValueError if neither."""
    if text == "" or text.startswith(("http://", "https://")) and len(text) > len("https://") or PROMETHEUS_SERVICE.fullmatch(text):
        return text
    raise ValueError(f"expected NAMESPACE/SERVICE[:PORT] (e.g. {DEFAULT_PROMETHEUS}), an http(s):// URL or \"\" for none, not {_shown(text)}")


@dataclass(frozen=True)
class Config:
    read_only: bool = False
    exec_timeout: float = DEFAULT_EXEC_TIMEOUT  # seconds a kubeconfig's exec credential plugin may take
    verify: VerifyConfig = field(default_factory=VerifyConfig)
    path: Path | None = None  # the file read; None when there was none
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    namespaces: tuple[str, ...] = ()  # to read one by one when a kind is forbidden cluster-wide
    idle: IdleConfig = field(default_factory=IdleConfig)
    fleet: FleetConfig = field(default_factory=lambda: FleetConfig())
    stuck: StuckConfig = field(default_factory=StuckConfig)
    health: HealthConfig = field(default_factory=HealthConfig)

    def model_options(self) -> dict[str, Any]:
        """ClusterModel's keyword arguments for the file's [metrics], [stuck] and [health]."""
        return {**self.metrics.model_options(), "stuck_settings": self.stuck.settings(), "xid_old_after": self.health.xid_old_after}

    def verify_options(
        self,
        *,
        read_only: bool | None = None,
        image: str | None = None,
        resource: str | None = None,
        runtime_class: str | None = None,
        timeout: float | None = None,
        **other: Any,
    ) -> VerifyOptions:
        """Verification options: a flag's value where given (not None), else the file's, else the default."""
        from .kube.verify import VerifyOptions  # noqa: PLC0415  (only verification needs it)

        file = self.verify
        return VerifyOptions(
            image=image or file.image or DEFAULT_VERIFY_IMAGE,
            resource=resource or file.resource,
            runtime_class=runtime_class or file.runtime_class,
            timeout=timeout or file.timeout or DEFAULT_VERIFY_TIMEOUT,
            read_only=self.read_only if read_only is None else read_only,
            **{"cpu": file.cpu or DEFAULT_VERIFY_CPU, "memory": file.memory or DEFAULT_VERIFY_MEMORY, **other},
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


def add_idle_args(parser: argparse.ArgumentParser, *, subcommand: bool = False) -> None:
    """--prometheus and --history (the config file's [idle] prometheus and history); a subcommand's copies
    leave the main parser's values alone when not given."""
    default: Any = argparse.SUPPRESS if subcommand else None

    def target(text: str) -> str:
        try:
            return prometheus_target(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    parser.add_argument(
        "--prometheus", metavar="URL|NS/SERVICE:PORT", type=target, default=default,
        help=f"the Prometheus that scrapes the DCGM exporters, for idle GPUs: an http(s):// URL, or a service reached "
        f"through the API server; \"\" for none (default: the config file's [idle] prometheus, else {DEFAULT_PROMETHEUS})",
    )
    parser.add_argument(
        "--history", metavar="PATH", default=default,
        help="keep gputui's own samples of the exporters in this SQLite file, so that idle figures survive restarts "
        "(default: the config file's [idle] history, else in memory only)",
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
    import tomllib  # noqa: PLC0415  (only with a file to read: most runs have none)

    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"config {path}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"config {path}: not valid TOML: {e}") from None
    return parse_config(data, path)


_TOP_KEYS = ("read_only", "exec_timeout", "verify", "metrics", "namespaces", "idle", "fleet", "stuck", "health")
_FLEET_KEYS = ("contexts", "live", "prometheus", "cluster_label", "cluster_contexts")
PROMETHEUS_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
DEFAULT_FLEET_LIVE = 8  # kube/fleet.py's MAX_LIVE (tests/test_config.py checks they agree)
NAMESPACE_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")  # a DNS-1123 label, as Kubernetes names namespaces
_VERIFY_KEYS = ("image", "namespace", "runtime_class", "timeout", "resource", "cpu", "memory")
_METRICS_KEYS = ("interval", "reads_per_minute", "concurrency")
_IDLE_KEYS = ("window", "threshold", "prometheus", "history")
_STUCK_KEYS = ("mig_after", "upgrade_after", "domain_after")
_HEALTH_KEYS = ("xid_old_after",)
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
    table = _section(data, "verify", _VERIFY_KEYS, bad)
    texts: dict[str, str | None] = {}
    for key in ("image", "namespace", "runtime_class", "resource"):
        value = table.get(key)
        if value is not None and (not isinstance(value, str) or not value.strip() or value != value.strip()):
            raise bad(f"verify.{key} must be a non-empty string without surrounding spaces, not {_shown(value)}")
        texts[key] = value
    for key in ("cpu", "memory"):
        value = table.get(key)
        if value is not None and not _positive_quantity(value):
            raise bad(f"verify.{key} must be a quantity above zero such as \"{DEFAULT_VERIFY_CPU if key == 'cpu' else DEFAULT_VERIFY_MEMORY}\", "
                      f"not {_shown(value)}")
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
                  metrics=_metrics(data, bad), namespaces=_namespaces(data, bad), idle=_idle(data, bad), fleet=_fleet(data, bad),
                  stuck=StuckConfig(**_durations(data, "stuck", _STUCK_KEYS, bad)),
                  health=HealthConfig(**_durations(data, "health", _HEALTH_KEYS, bad)))


def _positive_quantity(value: Any) -> bool:
    """A Kubernetes quantity above zero ("100m", "128Mi")."""
    match = QUANTITY.fullmatch(value) if isinstance(value, str) else None
    return match is not None and float(match.group(1)) > 0


def _idle(data: Mapping[str, Any], bad: Any) -> IdleConfig:
    table = _section(data, "idle", _IDLE_KEYS, bad)
    window = table.get("window", DEFAULT_IDLE_WINDOW)
    if isinstance(window, bool) or not isinstance(window, (int, float)) or not MIN_IDLE_WINDOW <= window <= MAX_IDLE_WINDOW:
        raise bad(f"idle.window must be a number of seconds between {MIN_IDLE_WINDOW:g} and {MAX_IDLE_WINDOW:g}, not {_shown(window)}")
    threshold = table.get("threshold", DEFAULT_IDLE_THRESHOLD)
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 < threshold <= 100:
        raise bad(f"idle.threshold must be a percent above 0 and at most 100, not {_shown(threshold)}")
    prometheus = table.get("prometheus", DEFAULT_PROMETHEUS)
    try:
        if not isinstance(prometheus, str):
            raise ValueError(f"expected a string, not {_shown(prometheus)}")
        prometheus_target(prometheus)
    except ValueError as e:
        raise bad(f"idle.prometheus: {e}") from None
    history = table.get("history")
    if history is not None and (not isinstance(history, str) or not history.strip()):
        raise bad(f"idle.history must be a file's path, not {_shown(history)}")
    return IdleConfig(window=float(window), threshold=float(threshold), prometheus=prometheus or None, history=history)


def _durations(data: Mapping[str, Any], name: str, keys: tuple[str, ...], bad: Any) -> dict[str, float]:
    """A table of seconds, each from 1 to MAX_STUCK_AFTER; those not given are left to the defaults."""
    out = {}
    for key, value in _section(data, name, keys, bad).items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 1 <= value <= MAX_STUCK_AFTER:
            raise bad(f"{name}.{key} must be a number of seconds between 1 and {MAX_STUCK_AFTER:.0f}, not {_shown(value)}")
        out[key] = float(value)
    return out


@dataclass(frozen=True)
class FleetConfig:
    """The `[fleet]` table: contexts opened as a fleet when none is chosen on the command line."""

    contexts: tuple[str, ...] = ()
    live: int = DEFAULT_FLEET_LIVE
    prometheus: str | None = None  # an http(s):// URL: the rows from there
    cluster_label: str = "cluster"
    cluster_contexts: Mapping[str, str] = field(default_factory=dict)  # a cluster label's value -> its context


def _fleet(data: Mapping[str, Any], bad: Any) -> FleetConfig:
    table = _section(data, "fleet", _FLEET_KEYS, bad)
    contexts = table.get("contexts", [])
    if not isinstance(contexts, list) or not all(isinstance(c, str) and c.strip() and c == c.strip() for c in contexts):
        raise bad(f"fleet.contexts must be a list of context names or globs, not {_shown(contexts)}")
    live = table.get("live", DEFAULT_FLEET_LIVE)
    if isinstance(live, bool) or not isinstance(live, int) or not 1 <= live <= 1000:
        raise bad(f"fleet.live must be a whole number from 1 to 1000, not {_shown(live)}")
    prometheus = table.get("prometheus", "")
    try:
        if not isinstance(prometheus, str):
            raise ValueError(f"expected a string, not {_shown(prometheus)}")
        fleet_prometheus_url(prometheus)
    except ValueError as e:
        raise bad(f"fleet.prometheus: {e}") from None
    label = table.get("cluster_label", "cluster")
    if not isinstance(label, str) or not PROMETHEUS_LABEL.fullmatch(label):
        raise bad(f"fleet.cluster_label must be a Prometheus label name, not {_shown(label)}")
    mapping = table.get("cluster_contexts", {})
    if not isinstance(mapping, dict) or not all(isinstance(k, str) and isinstance(v, str) and v for k, v in mapping.items()):
        raise bad(f"fleet.cluster_contexts must be a table of cluster = \"context\", not {_shown(mapping)}")
    return FleetConfig(tuple(dict.fromkeys(contexts)), live, prometheus or None, label, dict(mapping))


def fleet_prometheus_url(text: str) -> str:
    """The fleet's Prometheus: an http(s):// URL (no cluster to reach a service through), or "" for none."""
    if text == "" or text.startswith(("http://", "https://")) and len(text) > len("https://"):
        return text
    raise ValueError(f"expected an http(s):// URL (or \"\" for none), not {_shown(text)}")


def _namespaces(data: Mapping[str, Any], bad: Any) -> tuple[str, ...]:
    names = data.get("namespaces", [])
    if not isinstance(names, list) or not all(isinstance(n, str) and NAMESPACE_NAME.fullmatch(n) for n in names):
        raise bad(f"namespaces must be a list of namespace names (lowercase letters, digits and '-'), not {_shown(names)}")
    return tuple(dict.fromkeys(names))


def _metrics(data: Mapping[str, Any], bad: Any) -> MetricsConfig:
    table = _section(data, "metrics", _METRICS_KEYS, bad)
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


def _section(data: Mapping[str, Any], name: str, keys: tuple[str, ...], bad: Any) -> dict[str, Any]:
    """The `[name]` table (empty when absent), refused when it is not a table or holds a key not in `keys`."""
    table = data.get(name, {})
    if not isinstance(table, dict):
        raise bad(f"{name} must be a table ([{name}]), not {_shown(table)}")
    _no_unknown(table, keys, f"{name}.", bad)
    return table


def _no_unknown(table: Mapping[str, Any], known: tuple[str, ...], prefix: str, bad: Any) -> None:
    for key in table:
        if key not in known:
            raise bad(f"unknown setting {prefix}{key} (known: {', '.join(prefix + k for k in known)})")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:59] + "…"
