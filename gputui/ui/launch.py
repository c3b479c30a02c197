"""The app made ready to run: its connector, contexts and verification settings.

Kept free of Textual and of the Kubernetes client at import time (`make_app`
loads them): the command (`gputui.cli.app`) imports this before the first frame.
"""
from __future__ import annotations

import asyncio
from typing import Any, Callable

from gputui.kube.config import ConnectError, context_names


def kubeconfig_contexts(kubeconfig: str | None) -> list[str]:
    """Context names for the palette; empty when the kubeconfig cannot be read (the app says why elsewhere)."""
    try:
        return context_names(kubeconfig)
    except ConnectError:
        return []


def verify_settings(config: Any, read_only: bool | None) -> Any:
    """What `v` creates, from the config file and the --read-only/--no-read-only flag."""
    from .verify import VerifySettings  # noqa: PLC0415

    return VerifySettings(config.verify_options(read_only=read_only), namespace=config.verify.namespace)


def make_app(
    kubeconfig: str | None,
    context: str | None = None,
    extra_resources: list[str] | tuple[str, ...] = (),
    *,
    clock: Callable[[], float] | None = None,
    kubeconfig_from: Callable[[], Any] | None = None,
    verify: Any = None,
    metrics: dict[str, Any] | None = None,
    fleet: list[str] | None = None,
    max_live: int | None = None,
    fleet_prometheus: Any = None,
    namespaces: list[str] | tuple[str, ...] = (),
    fallback_namespaces: list[str] | tuple[str, ...] = (),
    idle: Any = None,
    impersonate: Any = None,
) -> Any:
    """The app on a kubeconfig context (also used by tests, screenshots and the benchmark).
    kubeconfig_from: a blocking call that returns the kubeconfig path (the demo's simulator).
    verify: the verification pods' settings (`verify_settings`); None: the defaults.
    metrics: the model's options from the config file (`Config.model_options()`: [metrics], [stuck], [health]); None: the defaults.
    fleet: contexts to open as a fleet (the Fleet screen first); max_live: how many of them are watched.
    fleet_prometheus: the fleet's rows from there (the config's `FleetConfig`, its `prometheus` set); `fleet` then opens its clusters.
    namespaces: -n (the GPU pods shown; where to read pods when forbidden cluster-wide, else the context's
    namespace and then fallback_namespaces, the config file's).
    idle: the idle GPUs' settings (`IdleConfig.settings()`); None: no Prometheus, samples in memory.
    impersonate: --as, --as-group, --as-uid (`kube.config.impersonation_flags`); None: the kubeconfig's own."""
    from gputui.kube.config import connect  # noqa: PLC0415
    from gputui.kube.gpu import GpuResources  # noqa: PLC0415

    from .app import GpuTuiApp  # noqa: PLC0415

    path = kubeconfig

    async def connector(chosen: str | None) -> Any:
        nonlocal path
        if path is None and kubeconfig_from is not None:
            try:
                path = str(await asyncio.to_thread(kubeconfig_from))
            except RuntimeError as error:
                raise ConnectError(str(error)) from None
        return await connect(path, chosen, **({"impersonate": impersonate} if impersonate is not None else {}))

    options: dict[str, Any] = {} if clock is None else {"clock": clock}
    if verify is not None:
        options["verify"] = verify
    if metrics is not None:
        options["model_options"] = metrics
    if idle is not None:
        options["idle"] = idle
    resources = GpuResources(frozenset(extra_resources))
    if namespaces or fallback_namespaces:
        options.update(namespaces=tuple(namespaces), fallback_namespaces=tuple(fallback_namespaces))
    if fleet or (fleet is not None and fleet_prometheus is not None):
        from gputui.kube.fleet import MAX_LIVE, Fleet  # noqa: PLC0415

        fleet_options: dict[str, Any] = {} if clock is None else {"clock": clock}
        if fleet_prometheus is not None:
            from gputui.kube.fleet_prometheus import FleetQueries, PrometheusFleet  # noqa: PLC0415
            from gputui.kube.prometheus import Prometheus  # noqa: PLC0415

            queries = FleetQueries(fleet_prometheus.cluster_label, frozenset(extra_resources))
            source = PrometheusFleet(Prometheus(fleet_prometheus.prometheus), queries, **fleet_options)
            fleet_options.update(prometheus=source, cluster_contexts=fleet_prometheus.cluster_contexts)
        options["fleet"] = Fleet(fleet, connector, max_live=max_live or MAX_LIVE, resources=resources, model_options=metrics,
                                 namespaces=namespaces, configured_namespaces=fallback_namespaces, **fleet_options)
    return GpuTuiApp(
        connector,
        context=context,
        contexts=lambda: kubeconfig_contexts(path) if path or kubeconfig_from is None else [],
        resources=resources,
        **options,
    )
