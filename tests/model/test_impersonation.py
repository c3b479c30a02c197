"""Impersonation as kubectl does it: the kubeconfig user's `as`, `as-uid`, `as-groups` and `as-user-extra` and the
--as/--as-group/--as-uid flags become the same Impersonate-* headers kubectl sends (captured at the wire, beside the
real kubectl), and the simulator authorizes them as kube-apiserver does, then acts as the impersonated user."""
from __future__ import annotations

import asyncio
import base64
import contextlib
import io
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml
from aiohttp import web

from gputui.cli.main import _parse_all
from gputui.kube.client import ApiError, path
from gputui.kube.config import ConnectError, Impersonation, check, connect
from gputui.sim.cluster import SimCluster
from gputui.sim.apiserver.tls import authority, server_context
from tests.model.objects import node, plugin_pod
from tests.model.test_report import report_of

pytestmark = pytest.mark.asyncio(loop_scope="module")
ALICE = "alice-t0ken"  # alice may only impersonate; readonly-auditor may only read
RBAC = "rbac.authorization.k8s.io/v1"
POLICY = [
    {"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": "impersonate-auditor"},
     "rules": [{"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"], "resourceNames": ["readonly-auditor"]},
               {"apiGroups": [""], "resources": ["groups"], "verbs": ["impersonate"], "resourceNames": ["auditors"]},
               {"apiGroups": ["authentication.k8s.io"], "resources": ["userextras/scopes"], "verbs": ["impersonate"]}]},
    {"apiVersion": RBAC, "kind": "ClusterRoleBinding", "metadata": {"name": "alice-impersonates"},
     "subjects": [{"kind": "User", "name": "alice"}], "roleRef": {"kind": "ClusterRole", "name": "impersonate-auditor"}},
    {"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": "reader"},
     "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list", "watch"]}]},
    {"apiVersion": RBAC, "kind": "ClusterRoleBinding", "metadata": {"name": "auditor-reads"},
     "subjects": [{"kind": "User", "name": "readonly-auditor"}], "roleRef": {"kind": "ClusterRole", "name": "reader"}},
]
EXTRA = {"scopes": ["view", "edit"], "example.com/key a%": ["v"]}  # a key that must be %-escaped in a header name


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def write_kubeconfig(directory: Path, server: str, user: dict[str, Any], name: str = "kubeconfig", cluster: dict[str, Any] | None = None) -> Path:
    entry = {"server": server, "certificate-authority-data": b64(authority().pem), **(cluster or {})}
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": "ctx",
           "clusters": [{"name": "c", "cluster": entry}],
           "users": [{"name": "u", "user": user}], "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}]}
    path = directory / name
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def capture():
    """An HTTPS server on loopback that records each request's headers and answers 404."""
    async for served in _capture(tls=True):
        yield served


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def plain_capture():
    """capture, over plain HTTP."""
    async for served in _capture(tls=False):
        yield served


async def _capture(tls: bool):
    seen: list[list[tuple[str, str]]] = []

    async def record(request: web.Request) -> web.Response:
        seen.append([(k, v) for k, v in request.headers.items()])
        return web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "not here",
                                  "reason": "NotFound", "code": 404}, status=404)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", record)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_context() if tls else None)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]  # started: it has its sockets
    yield f"{'https' if tls else 'http'}://127.0.0.1:{port}", seen
    await runner.cleanup()


def impersonation_headers(headers: list[tuple[str, str]]) -> dict[str, list[str]]:
    """Impersonate-* headers by lower-cased name (header names are case-insensitive; Go capitalises them), values in order."""
    out: dict[str, list[str]] = {}
    for name, value in headers:
        if name.lower().startswith("impersonate-"):
            out.setdefault(name.lower(), []).append(value)
    return out


async def kubectl_headers(make_kubectl, kubeconfig: Path, seen: list, *flags: str) -> dict[str, list[str]]:
    done = await asyncio.to_thread(make_kubectl(kubeconfig).run, *flags, "get", "--raw", "/version")
    assert "not here" in done.stderr or "NotFound" in done.stderr, done.stderr
    return impersonation_headers(seen[-1])


async def gputui_headers(kubeconfig: Path, seen: list, flags: Impersonation | None = None) -> dict[str, list[str]]:
    async with await connect(str(kubeconfig), impersonate=flags) as conn:
        with pytest.raises(ConnectError):
            await check(conn)  # the capture answers 404
    return impersonation_headers(seen[-1])


@pytest.mark.parametrize(("user", "kubectl_flags", "flags"), [
    ({"as": "readonly-auditor", "as-groups": ["g1", "g2"], "as-uid": "u-1", "as-user-extra": EXTRA}, (), None),
    ({"as": "readonly-auditor", "as-groups": ["g1"], "as-uid": "u-1"}, ("--as", "other", "--as-group", "z", "--as-group", "y"),
     Impersonation("other", groups=("z", "y"))),
    ({"as": "readonly-auditor", "as-uid": "u-1"}, ("--as-uid", "u-2"), Impersonation(uid="u-2")),
    ({}, ("--as", "system:serviceaccount:ml:runner"), Impersonation("system:serviceaccount:ml:runner")),
    ({}, (), None),
], ids=["kubeconfig", "flags-replace", "uid-flag", "service-account", "none"])
async def test_the_headers_are_kubectls(capture, make_kubectl, tmp_path, user, kubectl_flags, flags):
    url, seen = capture
    kubeconfig = write_kubeconfig(tmp_path, url, {"token": "tok", **user})
    theirs = await kubectl_headers(make_kubectl, kubeconfig, seen, *kubectl_flags)
    ours = await gputui_headers(kubeconfig, seen, flags)
    assert ours == theirs
    if user.get("as-user-extra"):  # the escaped key, as client-go escapes it (Go capitalises the name's letters)
        assert ours["impersonate-extra-example.com%2fkey%20a%25"] == ["v"]
        assert ours["impersonate-extra-scopes"] == ["view", "edit"]


async def test_over_plain_http_the_impersonation_headers_are_kubectls_too(plain_capture, make_kubectl, tmp_path):
    """client-go sets the impersonation before it leaves out the credentials over plain HTTP: kubectl 1.32 sends
    Impersonate-* to an http:// server (captured here), so gputui does too."""
    url, seen = plain_capture
    kubeconfig = write_kubeconfig(tmp_path, url, {"as": "readonly-auditor", "as-groups": ["g1"]})
    theirs = await kubectl_headers(make_kubectl, kubeconfig, seen)
    ours = await gputui_headers(kubeconfig, seen)
    assert ours == theirs == {"impersonate-user": ["readonly-auditor"], "impersonate-group": ["g1"]}


async def test_groups_without_a_user_are_refused_before_connecting_as_kubectl_does(capture, make_kubectl, tmp_path):
    url, seen = capture
    kubeconfig = write_kubeconfig(tmp_path, url, {"token": "tok", "as-groups": ["g1"]})
    asked = len(seen)
    done = await asyncio.to_thread(make_kubectl(kubeconfig).run, "get", "--raw", "/version")
    assert done.returncode == 1 and "without impersonating a user" in done.stderr
    with pytest.raises(ConnectError, match="without impersonating a user"):
        await connect(str(kubeconfig))
    with pytest.raises(ConnectError, match="without impersonating a user"):
        await connect(str(write_kubeconfig(tmp_path, url, {"token": "tok"}, "flags")), impersonate=Impersonation(uid="u-9"))
    assert len(seen) == asked  # neither asked the server anything


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sim():
    objects = [node("gpu-1", capacity={"nvidia.com/gpu": 2}), plugin_pod("gpu-1"), *POLICY]
    async with SimCluster(objects, tokens={ALICE: "alice"}, run_controllers=False) as cluster:
        yield cluster


async def test_the_simulator_acts_as_the_impersonated_user_when_allowed(sim, make_kubectl, tmp_path):
    alice = write_kubeconfig(tmp_path, sim.url, {"token": ALICE}, "alice")
    auditor = write_kubeconfig(tmp_path, sim.url, {"token": ALICE, "as": "readonly-auditor"}, "auditor")
    # alice herself may read nothing; as readonly-auditor, the report is read
    rc, _, err = await report_of("--kubeconfig", str(alice), "-o", "json")
    assert rc == 2 and 'User "alice" cannot list resource "nodes"' in err
    rc, out, err = await report_of("--kubeconfig", str(auditor), "-o", "json")
    assert rc in (0, 1), err
    assert '"gpu-1"' in out
    rc, out, _ = await report_of("--kubeconfig", str(alice), "--as", "readonly-auditor", "-o", "json")
    assert rc in (0, 1) and '"gpu-1"' in out
    # and as readonly-auditor, nothing can be created (what `gputui verify` would do is refused)
    async with await connect(str(auditor)) as conn:
        assert conn.impersonation.user == "readonly-auditor"
        with pytest.raises(ApiError) as refused:
            await conn.api.json("POST", path("v1", "pods", namespace="default"), body={
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}, "spec": {"containers": [{"name": "c", "image": "i"}]}})
    assert refused.value.status == 403
    assert 'User "readonly-auditor" cannot create resource "pods"' in refused.value.message
    kubectl = make_kubectl(auditor)
    assert (await asyncio.to_thread(kubectl, "get", "nodes", "-o", "name")).split() == ["node/gpu-1"]


async def test_the_flags_before_the_subcommand_are_kept(sim, tmp_path):
    """`gputui --as USER --kubeconfig PATH report`: the main parser's flags reach the report (a subcommand's own
    copies, not given, used to put their defaults over them)."""
    alice = write_kubeconfig(tmp_path, sim.url, {"token": ALICE}, "alice")
    args = _parse_all(["--as", "readonly-auditor", "--kubeconfig", str(alice), "report", "-o", "json"])
    assert (args.as_user, args.kubeconfig) == ("readonly-auditor", str(alice))
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        rc = await asyncio.to_thread(args.run, args)
    assert rc in (0, 1) and '"gpu-1"' in out.getvalue()
    args = _parse_all(["--as", "readonly-auditor", "--kubeconfig", "top", "report", "--as", "admin", "--kubeconfig", "mine"])
    assert (args.as_user, args.kubeconfig) == ("admin", "mine")  # given after it, the subcommand's win
    args = _parse_all(["--as", "readonly-auditor", "--as-group", "g", "--context", "c", "verify", "gpu-1"])
    assert (args.as_user, args.as_groups, args.context) == ("readonly-auditor", ["g"], "c")


@pytest.mark.parametrize(("flags", "words"), [
    (("--as", "admin"), 'users "admin" is forbidden: User "alice" cannot impersonate resource "users" in API group "" at the cluster scope'),
    (("--as", "readonly-auditor", "--as-group", "system:masters"),
     'groups "system:masters" is forbidden: User "alice" cannot impersonate resource "groups" in API group "" at the cluster scope'),
    (("--as", "system:serviceaccount:ml:runner"),
     'serviceaccounts "runner" is forbidden: User "alice" cannot impersonate resource "serviceaccounts" in API group "" '
     'in the namespace "ml"'),
    (("--as", "readonly-auditor", "--as-uid", "1234"),
     'uids.authentication.k8s.io "1234" is forbidden: User "alice" cannot impersonate resource "uids" in API group '
     '"authentication.k8s.io" at the cluster scope'),
])
async def test_impersonation_not_allowed_is_a_403_with_kube_apiservers_words(sim, make_kubectl, tmp_path, flags, words):
    alice = write_kubeconfig(tmp_path, sim.url, {"token": ALICE}, "alice")
    # --raw: the Status's message as it came (kubectl's discovery words a 403 on /api as "unknown")
    done = await asyncio.to_thread(make_kubectl(alice).run, *flags, "get", "--raw", "/api/v1/nodes")
    assert done.returncode == 1 and words in done.stderr
    rc, _, err = await report_of("--kubeconfig", str(alice), *flags)
    assert rc == 2 and words in err and err.count("\n") == 1


async def test_an_allowed_group_and_extra_leave_the_user_its_own_rbac(sim, tmp_path):
    """alice may impersonate the group auditors and the scopes extra: as readonly-auditor in auditors, with scopes,
    the user reads as readonly-auditor (the group gives nothing more); an extra key alice may not set is refused."""
    kubeconfig = write_kubeconfig(tmp_path, sim.url, {"token": ALICE, "as": "readonly-auditor", "as-groups": ["auditors"],
                                                      "as-user-extra": {"scopes": ["view"]}}, "grouped")
    async with await connect(str(kubeconfig)) as conn:
        nodes = await conn.api.json("GET", path("v1", "nodes"))
    assert [n["metadata"]["name"] for n in nodes["items"]] == ["gpu-1"]
    kubeconfig = write_kubeconfig(tmp_path, sim.url, {"token": ALICE, "as": "readonly-auditor",
                                                      "as-user-extra": {"Example.com/Team": ["gpu"]}}, "extra")
    async with await connect(str(kubeconfig)) as conn:
        with pytest.raises(ApiError) as refused:
            await conn.api.json("GET", path("v1", "nodes"))
    assert refused.value.status == 403
    assert refused.value.message == ('userextras.authentication.k8s.io "gpu" is forbidden: User "alice" cannot impersonate resource '
                                     '"userextras/example.com/team" in API group "authentication.k8s.io" at the cluster scope')


async def test_a_dump_is_not_impersonated(tmp_path):
    dump = tmp_path / "nodes.yaml"
    dump.write_text("apiVersion: v1\nkind: List\nitems: []\n")
    rc, out, err = await report_of("--from", str(dump), "--as", "readonly-auditor")
    assert rc == 2 and out == "" and err.strip() == "gputui report: --from reads a dump, not a cluster: it does not go with --as"
