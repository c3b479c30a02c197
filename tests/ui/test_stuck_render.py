"""Stuck GPU plumbing with its age where the screens are short of room: the Fleet row's worst problem, and the
GPU stack screen's lines above the matrix (pure renderers)."""
from __future__ import annotations

from gputui.kube import fleet as f
from gputui.kube import stack
from gputui.kube.gpu import Problem, Usage
from gputui.kube.verdicts import Verdict
from gputui.ui.fleet import detail_line, fleet_columns, row_cells
from gputui.ui.stack_render import fit_summary, stack_summary


def test_the_fleet_row_says_how_long_its_worst_problem_has_been_stuck():
    row = f.ClusterRow("prod", f.LIVE, totals={"nvidia.com/gpu": Usage(8, 8, 0)}, gpu_nodes=3, problem_nodes=1,
                       worst=(Verdict.DRIVER_UPGRADE_STUCK, "up-1"), worst_subject="over 42m")
    cells = dict(zip([c.key for c in fleet_columns(120)], row_cells(row, fleet_columns(120), 0.0, 0.0), strict=False))
    assert cells["problems"].plain == "✗ 1/3 upgrade stuck >42m"  # the age rather than the node, when both do not fit
    assert detail_line(row, 0.0).plain == "prod: live · worst: driver upgrade stuck over 42m on up-1"  # the cell may cut it
    unaged = f.ClusterRow("prod", f.LIVE, totals={"nvidia.com/gpu": Usage(8, 8, 0)}, gpu_nodes=3, problem_nodes=1,
                          worst=(Verdict.MIG_STUCK, "mig-1"))
    cells = dict(zip([c.key for c in fleet_columns(120)], row_cells(unaged, fleet_columns(120), 0.0, 0.0), strict=False))
    assert cells["problems"].plain == "✗ 1/3 MIG stuck mig-1"


def test_the_stack_screen_lists_stuck_plumbing_with_its_age_and_counts_the_rest():
    operator = stack.Stack("gpu-operator", "operator", "gpu-operator", None)
    stuck = [("mig-1", Problem(Verdict.MIG_STUCK, "the MIG manager failed to apply MIG config x for 42m", "42m")),
             ("nvs-1", Problem(Verdict.LEFT_CORDONED, "cordoned by NVSentinel (GpuMemWatch), ...: left cordoned for 2h", "2h"))]
    lines = stack_summary(operator, "ready", [], [], stuck).plain.splitlines()
    assert "✗ mig-1: the MIG manager failed to apply MIG config x for 42m" in lines
    assert "! nvs-1: cordoned by NVSentinel (GpuMemWatch), ...: left cordoned for 2h" in lines  # a warning's mark
    many = [(f"n-{i}", Problem(Verdict.MIG_STUCK, f"stuck {i}" + " word" * 3 * i, None)) for i in range(12)]
    whole = stack_summary(operator, "ready", [], [], many)
    assert "✗ n-11: stuck 11" in whole.plain  # all of them: the screen's fit counts what it cannot hold
    lines = fit_summary(whole, 40, 10).plain.splitlines()  # 3 rows of stack, n-0 and n-1 a row each, n-2 and n-3 two
    assert len(lines) == 10 and all(len(line) <= 40 for line in lines)
    assert lines[-1] == "… 8 more not shown · f: every finding" and lines[-3].startswith("✗ n-3: stuck 3")  # whole lines kept
    assert fit_summary(whole, 400, 20).plain == whole.plain  # all fits: nothing said


def test_the_stack_screen_names_a_gpu_cluster_and_how_long_it_is_not_ready():
    policy = stack.ClusterPolicyStatus("gpu-cluster", "notReady", "Waiting for operand pods to be ready", "GPUCluster", 0.0)
    problems = stack.policy_problems(policy, 7200.0)
    lines = stack_summary(stack.Stack("gpu-operator", "operator", "gpu-operator", policy), "notReady", problems, [], now=7200.0).plain.splitlines()
    assert "GPUCluster gpu-cluster ✗ notReady for 120m: Waiting for operand pods to be ready" in lines  # kubectl's age
