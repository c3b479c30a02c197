"""`gputui prometheus-rules`: print the recording rules gputui's usage figures read when present."""
from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from gputui.cli.output import writing_stdout

# A Kubernetes label key: an optional DNS subdomain prefix and `/`, then a name of up to 63 characters.
LABEL_KEY = re.compile(r"(?:[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "prometheus-rules",
        help="print recording rules for GPU allocation and use (load them into the Prometheus `report --usage` reads)",
        description="Print a Prometheus rules file: GPU allocation and use per cluster, namespace and node every minute, "
        "per cluster, namespace and GPU model every hour, per pod at both, from kube-state-metrics and the DCGM exporters; "
        "with --label KEY, per value of that pod label at both too. "
        "`gputui report --usage` and the Usage screen read them when present (long windows answer in seconds) "
        "and the raw series otherwise.",
    )
    parser.add_argument("--cluster-label", metavar="LABEL", default="cluster",
                        help="the label that names each series' cluster in a Prometheus of many (default cluster)")
    parser.add_argument("--threshold", metavar="PERCENT", type=float, default=None,
                        help="a GPU used less than this is idle (default: the config file's [idle] threshold, else 5)")
    parser.add_argument("--label", metavar="KEY", action="append", default=[],
                        help="a pod label key (e.g. team) whose values `report --usage --by label:KEY` groups by: rules of its own, "
                        "a few series per value instead of every pod's (repeatable; kube-state-metrics' "
                        "--metric-labels-allowlist must name it)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from gputui.config import ConfigError, load_config  # noqa: PLC0415
    from gputui.kube.usage import rules_file  # noqa: PLC0415

    if not re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", args.cluster_label):
        print(f"gputui prometheus-rules: --cluster-label {args.cluster_label!r}: not a Prometheus label name", file=sys.stderr)
        return 2
    for key in args.label:
        if not LABEL_KEY.fullmatch(key):
            print(f"gputui prometheus-rules: --label {key!r}: not a Kubernetes label key", file=sys.stderr)
            return 2
    threshold = args.threshold
    if threshold is None:
        try:
            threshold = load_config(getattr(args, "config", None)).idle.threshold
        except ConfigError as exc:
            print(f"gputui prometheus-rules: {exc}", file=sys.stderr)
            return 2
    if not 0 <= threshold <= 100:
        print(f"gputui prometheus-rules: --threshold {threshold:g}: expected a percent from 0 to 100", file=sys.stderr)
        return 2
    with writing_stdout():
        sys.stdout.write(rules_file(args.cluster_label, threshold=threshold, labels=tuple(args.label)))
    return 0
