"""The exec credential plugin of the simulator's `gputui-sim-exec` context (`python -m gputui.sim.credential`).

Prints an ExecCredential (client.authentication.k8s.io, the version kubectl asks for in
KUBERNETES_EXEC_INFO) whose token is $GPUTUI_SIM_TOKEN, expiring after $GPUTUI_SIM_TOKEN_TTL seconds
(default 3600).
"""
from __future__ import annotations

import datetime
import json
import os
import sys


def main() -> int:
    token = os.environ.get("GPUTUI_SIM_TOKEN")
    if not token:
        print("gputui sim credential: GPUTUI_SIM_TOKEN is not set", file=sys.stderr)
        return 1
    try:
        api_version = json.loads(os.environ.get("KUBERNETES_EXEC_INFO") or "{}").get("apiVersion")
    except ValueError:
        api_version = None
    ttl = float(os.environ.get("GPUTUI_SIM_TOKEN_TTL") or 3600)
    expiry = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=ttl)
    print(json.dumps({
        "apiVersion": api_version or "client.authentication.k8s.io/v1", "kind": "ExecCredential",
        "status": {"token": token, "expirationTimestamp": expiry.strftime("%Y-%m-%dT%H:%M:%SZ")},
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
