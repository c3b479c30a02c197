"""The run loop: create the pod, follow it and its events and logs to a verdict, always delete it.

The deletion runs on every path (pass, fail, timeout, an exception, cancellation) and is shielded.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..config import describe_network_error
from ..logs import LogError, stream_logs
from ..quantities import parse_time
from ..client import HttpError, path
from ..gpu import GPU
from .api import _delete_shielded, _json, _watch, plan_verification, refusal
from .judging import (
    API_ERROR,
    CANCELLED,
    CREATING,
    DELETING,
    DONE,
    FORBIDDEN,
    JUDGING,
    PASS,
    RUNNING,
    TIMEOUT,
    UNSCHEDULABLE,
    WAITING,
    OnUpdate,
    PodEvent,
    Update,
    Verdict,
    _container_status,
    judge,
    pod_display_status,
)
from .options import CONTAINER, ApiError, ReadOnlyError, VerifyError, VerifyOptions
from .plan import CLAIMS_API, Plan
from .smi import disagreements, parse_nvidia_smi

if TYPE_CHECKING:
    from ..client import Client

MAX_LOG_LINE = 64 * 1024  # bytes kept of one log line
LOG_RETRY = 0.5  # seconds between reads of a log that could not be read


# -- one verification ------------------------------------------------------


class _Run:
    """The lifecycle of one verification pod, from create to confirmed deletion."""

    def __init__(self, api: Client, plan: Plan, options: VerifyOptions, on_update: OnUpdate | None) -> None:
        self.api = api
        self.plan = plan
        self.options = options
        self.on_update = on_update
        self.started = time.monotonic()
        self.pod: dict[str, Any] = {}
        self.events: list[PodEvent] = []
        self.log_lines: list[str] = []
        self.logs_done = asyncio.Event()
        self.log_error = ""  # why the log could not be read, while it cannot
        self.may_exist = False
        self.claim_may_exist = False  # the plan's ResourceClaim (a verification through DRA)

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def emit(
        self, stage: str, events: Sequence[PodEvent] = (), log_lines: Sequence[str] = (), verdict: Verdict | None = None, status: str | None = None
    ) -> None:
        if self.on_update is not None:
            if status is None:
                status = pod_display_status(self.pod) if self.pod else ""
            self.on_update(Update(self.plan.node, stage, self.plan.name, status, self.elapsed, tuple(events), tuple(log_lines), verdict))

    def verdict(self, code: str, reason: str, **extra: Any) -> Verdict:
        return Verdict(
            node=self.plan.node, passed=code == PASS, code=code, reason=reason, pod=self.plan.name,
            namespace=self.plan.namespace, resource=self.plan.resource, count=self.plan.count, **extra,
        )

    async def run(self) -> Verdict:
        if self.options.read_only:
            raise ReadOnlyError("read-only mode: verification would create a pod")
        verdict: Verdict | None = None
        try:
            verdict = await self._create_and_follow()
        finally:
            # Runs on every path, cancellation included; the deletion itself is shielded.
            verdict = await self._clean_up(verdict)
        return verdict

    async def _create_and_follow(self) -> Verdict:
        plan = self.plan
        self.emit(CREATING)
        if plan.claim is not None:
            self.claim_may_exist = True  # from here on, even if the call below never returns
            try:
                await _json(self.api, "POST", path(CLAIMS_API, "resourceclaims", namespace=plan.namespace), body=plan.claim)
            except ApiError as e:
                self.claim_may_exist = False  # refused (a 409 name clash is someone else's claim: leave it alone)
                if (refused := refusal(e, "ResourceClaim", plan.namespace)) is not None:
                    return self.verdict(*refused)
                return self.verdict(API_ERROR, f"could not create the ResourceClaim: {e}")
            except (OSError, TimeoutError, HttpError) as e:
                return self.verdict(API_ERROR, f"could not create the ResourceClaim: {describe_network_error(e)}")
        self.may_exist = True  # from here on, even if the call below never returns
        try:
            self.pod = await _json(self.api, "POST", path("v1", "pods", namespace=plan.namespace), body=plan.manifest)
        except ApiError as e:
            self.may_exist = False  # refused (a 409 name clash is someone else's pod: leave it alone)
            # A ResourceClaim created for it stays claim_may_exist: _clean_up deletes it.
            if (refused := refusal(e, "pod", plan.namespace)) is not None:
                return self.verdict(*refused)
            return self.verdict(API_ERROR, f"could not create the pod: {e}")
        except (OSError, TimeoutError, HttpError) as e:
            return self.verdict(API_ERROR, f"could not create the pod: {describe_network_error(e)}")
        self.emit(WAITING)
        try:
            return await self._follow()
        except VerifyError as e:
            return self.verdict(API_ERROR, f"lost track of the pod: {e}")
        except (OSError, HttpError) as e:
            return self.verdict(API_ERROR, f"lost track of the pod: {describe_network_error(e)}")

    async def _clean_up(self, verdict: Verdict | None) -> Verdict:
        """Delete the pod if it may exist, and tell the view how that went (the last Update)."""
        plan = self.plan
        confirmed, cancelled_meanwhile = True, False
        if self.may_exist or self.claim_may_exist:
            self.emit(DELETING)
        if self.may_exist:
            confirmed, cancelled_meanwhile = await _delete_shielded(self.api, plan.namespace, plan.name, self.options.delete_timeout)
        claim_confirmed = True
        if self.claim_may_exist and plan.claim_name:
            # After the pod: the claim is deallocated, and can go, once no pod holds it.
            claim_confirmed, claim_cancelled = await _delete_shielded(
                self.api, plan.namespace, plan.claim_name, self.options.delete_timeout, claim=True)
            cancelled_meanwhile = cancelled_meanwhile or claim_cancelled
        leftover = None if confirmed and claim_confirmed else f"{plan.namespace}/{plan.name}"
        # Cancelled runs have no verdict of their own; the view still learns the pod's fate.
        final = verdict or self.verdict(CANCELLED, "cancelled")
        final = replace(final, elapsed=self.elapsed, deleted=confirmed and claim_confirmed, leftover=leftover)
        if not confirmed:
            final = replace(final, reason=f"{final.reason} (could not confirm deletion of pod {leftover}: delete it by hand)")
        if not claim_confirmed:
            final = replace(final, reason=f"{final.reason} (could not confirm deletion of ResourceClaim {plan.namespace}/{plan.claim_name}: "
                                          "delete it by hand)")
        status = "" if not self.may_exist else ("Deleted" if confirmed else "Terminating")
        self.emit(DONE, verdict=final, status=status)
        if cancelled_meanwhile:
            raise asyncio.CancelledError  # the caller asked for it while we were cleaning up
        return final

    async def _follow(self) -> Verdict:
        """Watch the pod, its events and logs until judged or timed out."""
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        uid = self.pod["metadata"]["uid"]
        since = self.pod["metadata"]["resourceVersion"]
        # The pod's resourceVersion means nothing to events (often an etcd of their own, far behind or ahead):
        # their watch starts from a list of them.
        feeders = [
            asyncio.create_task(self._feed(queue, "pod", path("v1", "pods", namespace=self.plan.namespace), f"metadata.name={self.plan.name}", since)),
            asyncio.create_task(self._feed(queue, "event", path("v1", "events", namespace=self.plan.namespace), f"involvedObject.uid={uid}", None)),
        ]
        try:
            async with asyncio.timeout(self.options.timeout):
                return await self._consume(queue, feeders)
        except TimeoutError:
            return self._timed_out()
        finally:
            for task in feeders:
                task.cancel()
            await asyncio.gather(*feeders, return_exceptions=True)

    async def _whole_log(self) -> Verdict | None:
        """The terminated container's log, read again until it can be (the verification's timeout bounds it):
        a verdict judged from a log read in part would blame the node for a connection's fault. A log the user
        may not read is a check not made."""
        while True:
            try:
                lines = [line async for line in self._log(follow=False)]
            except LogError as exc:
                if exc.status == 403:
                    return self.verdict(FORBIDDEN, f"forbidden: you may not get pods/log in namespace {self.plan.namespace}: "
                                                   f"no nvidia-smi output to judge ({exc})")
                self.log_error = str(exc)
                await asyncio.sleep(LOG_RETRY)
                continue
            shown, self.log_lines, self.log_error = len(self.log_lines), lines, ""
            self.emit(JUDGING, (), lines[shown:])  # a log is only ever appended to: the lines not shown yet
            return None

    def _timed_out(self) -> Verdict:
        last = self.events[-1] if self.events else None
        where = pod_display_status(self.pod)
        detail = f"; last event {last.reason}: {last.message}" if last else ""
        if self.log_error:
            detail += f"; its log could not be read ({self.log_error})"
        return self.verdict(TIMEOUT, f"timed out after {self.options.timeout:g} s while {where}{detail}")

    async def _feed(self, queue: asyncio.Queue[tuple[str, Any]], kind: str, collection: str, selector: str, since: str | None) -> None:
        try:
            async for change, obj in _watch(self.api, collection, selector, since):
                await queue.put((kind, (change, obj)))
        except Exception as e:  # noqa: BLE001  (the consumer decides what a broken feed means)
            await queue.put(("error", e))

    def _log(self, follow: bool) -> AsyncIterator[str]:
        lines = stream_logs(self.api, self.plan.namespace, self.plan.name, CONTAINER, tail=None, follow=follow,
                            max_line=MAX_LOG_LINE, whole=True)
        return (line.decode(errors="replace").rstrip("\r") async for line in lines)

    async def _stream_logs(self, queue: asyncio.Queue[tuple[str, Any]]) -> None:
        """The log as the container writes it, shown as it comes; a failure is noted for _whole_log."""
        try:
            async for line in self._log(follow=True):
                await queue.put(("log", line))
        except LogError as exc:
            self.log_error = str(exc)
        finally:
            self.logs_done.set()
            await queue.put(("logs-done", None))

    async def _consume(self, queue: asyncio.Queue[tuple[str, Any]], feeders: list[asyncio.Task[None]]) -> Verdict:
        log_task: asyncio.Task[None] | None = None
        try:
            while True:
                batch = [await queue.get()]
                while not queue.empty():
                    batch.append(queue.get_nowait())
                new_objects: list[Any] = []
                new_lines: list[str] = []
                for kind, item in batch:
                    if kind == "error":
                        raise item
                    if kind == "pod":
                        change, obj = item
                        if change == "DELETED":
                            raise VerifyError("the pod was deleted by someone else before it finished")
                        self.pod = obj
                    elif kind == "event":
                        change, obj = item
                        if change != "DELETED":
                            new_objects.append(obj)
                    elif kind == "log":
                        new_lines.append(item)
                # A list of events comes by name, not in the order they happened: shown by time.
                new_events = [PodEvent.from_object(obj) for obj in sorted(new_objects, key=_event_order)]
                self.events.extend(new_events)
                self.log_lines.extend(new_lines)
                state = _container_status(self.pod).get("state") or {}
                if log_task is None and (state.get("running") or state.get("terminated")):
                    log_task = asyncio.create_task(self._stream_logs(queue))
                terminated = bool(state.get("terminated")) or (self.pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
                stage = RUNNING if state.get("running") else (JUDGING if terminated else WAITING)
                self.emit(stage, new_events, new_lines)
                if terminated and log_task is not None and not self.logs_done.is_set():
                    continue  # judge with the whole log
                if terminated and self.log_error and (unread := await self._whole_log()) is not None:
                    return unread
                if (outcome := judge(self.pod, self.events, self.log_lines)) is not None:
                    return self._verdict_from(*outcome)
        finally:
            if log_task is not None:
                log_task.cancel()
                await asyncio.gather(log_task, return_exceptions=True)

    def _verdict_from(self, code: str, reason: str) -> Verdict:
        if code == UNSCHEDULABLE and self.plan.obstacles:
            words = reason.removeprefix("unschedulable: ")
            return self.verdict(code, f"unschedulable: {'; '.join(self.plan.obstacles)}. The scheduler says: {words}")
        if code != PASS:
            return self.verdict(code, reason)
        report = parse_nvidia_smi("\n".join(self.log_lines))
        mismatches = tuple(disagreements(report, self.plan.node_labels, GPU if self.plan.claim else self.plan.resource, self.plan.count))
        models = ", ".join(report.models)
        summary = f"{len(report.gpus)} x {models}, driver {report.driver or '?'}, CUDA {report.cuda or '?'}"
        if report.migs:
            summary += f", {len(report.migs)} MIG device(s)"
        if mismatches:
            summary += f"; disagrees with GFD labels: {'; '.join(mismatches)}"
        return self.verdict(PASS, summary, report=report, mismatches=mismatches)


def _event_order(obj: Any) -> tuple[int, int]:
    """When an event happened: its second, then its place in the events' own resourceVersion sequence. Whole
    seconds, because the kubelet's events (core/v1 `firstTimestamp`) say no more, while the scheduler's
    (events.k8s.io `eventTime`) carry microseconds: a `Scheduled` at .4 s comes before a `Pulling` at .0 s."""
    meta = obj.get("metadata") or {}
    when = parse_time(obj.get("eventTime") or obj.get("firstTimestamp") or obj.get("lastTimestamp") or meta.get("creationTimestamp"))
    rv = str(meta.get("resourceVersion") or "")
    return (int(when) if when is not None else 0, int(rv) if rv.isdigit() else 0)


async def run_plan(api: Client, plan: Plan, options: VerifyOptions, on_update: OnUpdate | None = None) -> Verdict:
    """Create the plan's pod, follow it to a verdict, delete it. Raises ReadOnlyError in read-only mode.

    Cancelling the task still deletes the pod (the last Update, stage DONE, says whether that was confirmed).
    """
    return await _Run(api, plan, options, on_update).run()


async def verify_node(api: Client, node: str, options: VerifyOptions, namespace: str, on_update: OnUpdate | None = None) -> Verdict:
    if options.read_only:
        raise ReadOnlyError("read-only mode: verification would create a pod")
    plan = await plan_verification(api, node, options, namespace)
    return await run_plan(api, plan, options, on_update)


async def run_plans(
    api: Client, plans: Sequence[Plan], options: VerifyOptions, on_update: OnUpdate | None = None, concurrency: int = 4
) -> list[Verdict]:
    """Verify several nodes, at most `concurrency` at once; verdicts in the plans' order."""
    if options.read_only:
        raise ReadOnlyError("read-only mode: verification would create pods")
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(plan: Plan) -> Verdict:
        async with gate:
            return await run_plan(api, plan, options, on_update)

    tasks = [asyncio.create_task(one(p)) for p in plans]
    try:
        return list(await asyncio.gather(*tasks))
    finally:
        # Cancelled or failed: every sibling must finish its own cleanup before we return.
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def updates(api: Client, plan: Plan, options: VerifyOptions) -> AsyncIterator[Update]:
    """The same as run_plan, as an async iterator of Updates; the last one carries the verdict.

    Leave early only inside `contextlib.aclosing(updates(...))` (or call aclose()):
    closing the iterator deletes the pod before aclose() returns. Cancelling the
    consuming task does the same.
    """
    queue: asyncio.Queue[Update] = asyncio.Queue()
    task = asyncio.create_task(run_plan(api, plan, options, queue.put_nowait))
    try:
        while True:
            update = await queue.get()
            yield update
            if update.stage == DONE:
                return
    finally:
        if not task.done():
            task.cancel()
        await asyncio.gather(task, return_exceptions=True)
