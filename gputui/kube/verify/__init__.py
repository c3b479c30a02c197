"""The verification pod: run nvidia-smi on one chosen node, watch it, judge it, always clean up.

For one node:
    plan = await plan_verification(api, "gpu-node-1", options, namespace="default")
    print(plan.to_yaml())                      # what will be created, for a confirmation
    verdict = await run_plan(api, plan, options, on_update=print)

`run_plan` creates the pod, watches it and its events, streams its logs and
judges the outcome; the pod is deleted (and its deletion confirmed) on every
path: pass, fail, timeout, an exception or the task being cancelled. On a node
whose GPUs only Dynamic Resource Allocation hands out, the plan is a
ResourceClaim (the NVIDIA DRA driver's DeviceClass gpu.nvidia.com, named and
labelled like the pod) and a pod using it: the claim is created first and
deleted, confirmed, after the pod. Progress
reaches a live view as `Update`s through the callback, or through the async
iterator `updates()`. `run_plans` verifies several nodes with bounded
concurrency; `find_leftovers` finds pods an earlier, killed run left behind.

Everything read from the cluster (names, events, logs) is plain text here;
whoever renders it must escape it. No Textual in this package.

The modules, each depending only on those above it:
    options    VerifyOptions, the pod's fixed names and labels, VerifyError/ReadOnlyError/ApiError
    plan       the resource choice, pod name, manifest (build_pod), node_obstacles, plan_for (pure)
    smi        parsing nvidia-smi (SmiReport) and its disagreements with GPU Feature Discovery labels
    judging    PodEvent, stages, verdict codes, Verdict, Update, judge
    api        raw JSON calls and watches, read_node, gpu_node_names, plan_verification, delete_pod
    run        the run loop and its cleanup: run_plan, verify_node, run_plans, updates
    leftovers  Leftover, find_leftovers, delete_leftovers
"""
from __future__ import annotations

from .api import (
    RETRY_PAUSE,
    create_denied_message,
    delete_claim,
    delete_pod,
    gpu_node_names,
    plan_verification,
    pods_on_node,
    read_dra_gpus,
    read_node,
    refusal,
)
from .judging import (
    API_ERROR,
    CANCELLED,
    CHECK_NOT_MADE,
    CREATING,
    DELETING,
    DONE,
    FORBIDDEN,
    IMAGE_PULL,
    IMAGE_PULL_REASONS,
    JUDGING,
    NVIDIA_SMI,
    PASS,
    POD_FAILED,
    REFUSED,
    RUNNING,
    RUNTIME,
    RUNTIME_EVENT_REASONS,
    RUNTIME_REASONS,
    TIMEOUT,
    UNSCHEDULABLE,
    WAITING,
    OnUpdate,
    PodEvent,
    Update,
    Verdict,
    judge,
    pod_display_status,
)
from .leftovers import Leftover, delete_leftovers, find_leftovers
from .options import (
    CONTAINER,
    DEFAULT_CPU,
    DEFAULT_IMAGE,
    DEFAULT_MEMORY,
    DEFAULT_TIMEOUT,
    DELETE_CONFIRM_TIMEOUT,
    LEFTOVER_SELECTOR,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    NAME,
    NAME_LABEL,
    NODE_ANNOTATION,
    NODE_LABEL,
    RUN_AS_USER,
    ApiError,
    ReadOnlyError,
    VerifyError,
    VerifyOptions,
)
from .plan import (
    DRA_DEVICE_CLASS, DraGpus, Plan, build_claim, build_pod, choose_resource, dra_gpus, gpu_usage, mig_size, node_label_value, node_obstacles,
    plan_for, pod_name, uses_dra,
)
from .run import MAX_LOG_LINE, run_plan, run_plans, updates, verify_node
from .smi import SmiGpu, SmiMig, SmiReport, disagreements, gfd_cuda_version, gfd_driver_version, parse_nvidia_smi

__all__ = [
    # options
    "CONTAINER",
    "DEFAULT_CPU",
    "DEFAULT_IMAGE",
    "DEFAULT_MEMORY",
    "DEFAULT_TIMEOUT",
    "DELETE_CONFIRM_TIMEOUT",
    "LEFTOVER_SELECTOR",
    "MANAGED_BY",
    "MANAGED_BY_LABEL",
    "NAME",
    "NAME_LABEL",
    "NODE_ANNOTATION",
    "NODE_LABEL",
    "RUN_AS_USER",
    "ApiError",
    "ReadOnlyError",
    "VerifyError",
    "VerifyOptions",
    # plan
    "DRA_DEVICE_CLASS",
    "DraGpus",
    "Plan",
    "build_claim",
    "build_pod",
    "dra_gpus",
    "uses_dra",
    "choose_resource",
    "gpu_usage",
    "mig_size",
    "node_label_value",
    "node_obstacles",
    "plan_for",
    "pod_name",
    # smi
    "SmiGpu",
    "SmiMig",
    "SmiReport",
    "disagreements",
    "gfd_cuda_version",
    "gfd_driver_version",
    "parse_nvidia_smi",
    # judging
    "API_ERROR",
    "CANCELLED",
    "CHECK_NOT_MADE",
    "CREATING",
    "DELETING",
    "DONE",
    "FORBIDDEN",
    "IMAGE_PULL",
    "IMAGE_PULL_REASONS",
    "JUDGING",
    "NVIDIA_SMI",
    "PASS",
    "POD_FAILED",
    "REFUSED",
    "RUNNING",
    "RUNTIME",
    "RUNTIME_EVENT_REASONS",
    "RUNTIME_REASONS",
    "TIMEOUT",
    "UNSCHEDULABLE",
    "WAITING",
    "OnUpdate",
    "PodEvent",
    "Update",
    "Verdict",
    "judge",
    "pod_display_status",
    # api
    "RETRY_PAUSE",
    "create_denied_message",
    "delete_claim",
    "delete_pod",
    "read_dra_gpus",
    "gpu_node_names",
    "plan_verification",
    "pods_on_node",
    "read_node",
    "refusal",
    # run
    "MAX_LOG_LINE",
    "run_plan",
    "run_plans",
    "updates",
    "verify_node",
    # leftovers
    "Leftover",
    "delete_leftovers",
    "find_leftovers",
]
