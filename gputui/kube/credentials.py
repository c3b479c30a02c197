"""Credentials and TLS as kubectl reads them from a kubeconfig's cluster and user entries.

    creds = await load_credentials(cluster_entry, user_entry, base_dir, server)
    creds.ssl            # an SSLContext (CA, client certificate), or False for insecure-skip-tls-verify
    await creds.headers()  # {"Authorization": ...}; an exec plugin's token renewed before it expires

Key and certificate data never stay on disk: `*-data` fields are handed to
OpenSSL through an anonymous in-memory file (memfd) where the system has one,
else through a private temporary file removed as soon as the context holds it.
Exec credential plugins run without a terminal, in a process group of their
own, with a timeout; the group is killed when it runs over, is cancelled, when
the interpreter exits, and by `kill_plugins()`, which the commands call on
SIGTERM and SIGHUP before they end (`gputui.cli.arguments.plugins_end_with_us`).
A plugin's command is found as kubectl finds it: as written when absolute,
relative to its kubeconfig's directory when it holds a slash, else on PATH;
never through symlinks (a virtualenv's python is a symlink to one without the
virtualenv). Every failure is a CredentialError whose str() is one line without
any secret: a failing plugin's stderr is shown redacted (`redact`).
"""
from __future__ import annotations

import asyncio
import atexit
import base64
import binascii
import contextlib
import ipaddress
import os
import re
import shutil
import signal
import ssl
import tempfile
import time
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

EXEC_TIMEOUT = 60.0  # seconds an exec credential plugin may take
RENEW_MARGIN = 30.0  # renew an expiring token this long before it expires (or at 10 % of a shorter life left)
EXEC_API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")


class CredentialError(Exception):
    """The kubeconfig's credentials cannot be used; str() is one line, never a secret."""


@dataclass
class ExecPlugin:
    """`users[].user.exec`: a command that prints an ExecCredential."""

    command: str
    args: list[str]
    env: dict[str, str]
    api_version: str
    base_dir: Path
    cluster_info: dict[str, Any] | None  # with provideClusterInfo
    timeout: float = EXEC_TIMEOUT

    @classmethod
    def from_entry(cls, spec: Mapping[str, Any], base_dir: Path, cluster: Mapping[str, Any], server: str, timeout: float) -> "ExecPlugin":
        command = spec.get("command")
        if not isinstance(command, str) or not command:
            raise CredentialError("exec plugin: no command given")
        api_version = spec.get("apiVersion") or EXEC_API_VERSIONS[0]
        if api_version not in EXEC_API_VERSIONS:
            raise CredentialError(f"exec plugin {command}: apiVersion {api_version} is not supported (use {EXEC_API_VERSIONS[0]})")
        if spec.get("interactiveMode") == "Always":
            raise CredentialError(f"exec plugin {command}: interactiveMode Always needs a terminal, which gputui does not lend it")
        env = {}
        for item in spec.get("env") or []:
            if isinstance(item, Mapping) and isinstance(item.get("name"), str):
                env[item["name"]] = str(item.get("value") or "")
        info = None
        if spec.get("provideClusterInfo"):
            info = {"server": server, "insecure-skip-tls-verify": bool(cluster.get("insecure-skip-tls-verify"))}
            if cluster.get("certificate-authority-data"):
                info["certificate-authority-data"] = cluster["certificate-authority-data"]
            if cluster.get("tls-server-name"):
                info["tls-server-name"] = cluster["tls-server-name"]
        args = [str(a) for a in spec.get("args") or []]
        return cls(command, args, env, api_version, base_dir, info, timeout)

    def executable(self) -> str:
        """kubectl's rule: an absolute command as written; one with a path separator joined to the
        kubeconfig's directory as Go's filepath.Join does (`..` taken away by name, not through a symlinked
        directory); else looked up on PATH."""
        if os.path.isabs(self.command):
            return self.command
        if os.sep in self.command:
            return _joined(self.base_dir, self.command)
        found = shutil.which(self.command)
        if found is None:
            raise CredentialError(f"exec plugin {self.command}: not found on PATH")
        return found

    async def run(self) -> dict[str, Any]:
        """The plugin's ExecCredential status: token or client certificate, and expiry."""
        spec: dict[str, Any] = {"interactive": False}
        if self.cluster_info is not None:
            spec["cluster"] = self.cluster_info
        env = {**os.environ, **self.env,
               "KUBERNETES_EXEC_INFO": orjson.dumps({"apiVersion": self.api_version, "kind": "ExecCredential", "spec": spec}).decode()}
        try:
            proc = await asyncio.create_subprocess_exec(
                self.executable(), *self.args, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, env=env, start_new_session=True,
            )
        except OSError as exc:
            raise CredentialError(f"exec plugin {self.command}: cannot run it: {exc.strerror or exc}") from None
        _RUNNING.add(proc.pid)  # its process group's id (a session of its own)
        try:
            async with asyncio.timeout(self.timeout):
                out, err = await proc.communicate()
        except TimeoutError:
            raise CredentialError(f"exec plugin {self.command}: no answer within {self.timeout:g} s (killed)") from None
        finally:
            if proc.returncode is None:
                _kill_group(proc.pid)
                with contextlib.suppress(ProcessLookupError):
                    await proc.wait()
            _RUNNING.discard(proc.pid)
        if proc.returncode != 0:
            last = stderr_line(err)
            raise CredentialError(f"exec plugin {self.command}: exit status {proc.returncode}" + (f": {last}" if last else ""))
        try:
            doc = orjson.loads(out)
            status = doc["status"]
            if not isinstance(status, dict):
                raise TypeError
        except (orjson.JSONDecodeError, KeyError, TypeError):
            raise CredentialError(f"exec plugin {self.command}: did not print an ExecCredential with a status") from None
        if not status.get("token") and not status.get("clientCertificateData"):
            raise CredentialError(f"exec plugin {self.command}: its ExecCredential has neither a token nor a client certificate")
        return status


_RUNNING: set[int] = set()  # the process groups of the plugins running now


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def kill_plugins() -> None:
    """Kill every running plugin's process group (each is in a session of its own, so nothing else ends
    it with us): at exit, and from a signal handler before the process ends. Also any child of ours that
    leads a session of its own: a plugin started but not yet in _RUNNING (the signal came in between)."""
    for pid in {*_RUNNING, *_session_leading_children()}:
        _kill_group(pid)


def _session_leading_children() -> set[int]:
    """Linux: our children that lead a session (from /proc/PID/stat: ppid and session); none elsewhere."""
    found: set[int] = set()
    me = os.getpid()
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                with contextlib.suppress(OSError, ValueError, IndexError):
                    with open(f"/proc/{entry.name}/stat", "rb") as stat:
                        fields = stat.read().rsplit(b")", 1)[1].split()  # state ppid pgrp session ...
                    if int(fields[1]) == me and int(fields[3]) == int(entry.name):
                        found.add(int(entry.name))
    return found


@atexit.register
def _kill_running() -> None:
    for pid in list(_RUNNING):
        _kill_group(pid)

# What a failing plugin's stderr may hold that must not be shown: PEM blocks (to their end, or the
# text's), a JWT, a value given to a name that says secret (token=..., "password": "...", client_secret: ...),
# an Authorization scheme's credentials, and long runs of base64 or hex.
_PEM = re.compile(r"-----BEGIN [^-\n]*-----.*?(?:-----END [^-\n]*-----|\Z)", re.S)
_JWT = re.compile(r"\beyJ[\w-]*\.[\w-]+\.[\w-]*")
_ASSIGNED = re.compile(  # name=value, name: "value", name: value (not "name: Label: ...", a message's words)
    r"""(?i)((?:[\w-]*(?:token|secret|passw(?:or)?d|api[_-]?key|private[_-]?key|credential)s?)["']?"""
    r"""(?:\s*=\s*|\s*:\s*(?=["'])|:\s*(?![^\s"',;&]+:)))(?:"[^"\n]*"|'[^'\n]*'|[^\s"',;&]+)""")
_SCHEME = re.compile(r"(?i)\b(bearer|basic)(\s+)[^\s\"',;]+")
_RUN = re.compile(r"[A-Za-z0-9+/=_-]{20,}")
REDACTED = "[redacted]"


def _secret_run(match: re.Match[str]) -> str:
    """A long run of base64 or hex: a secret when it mixes letters and digits or is 32 long, unless it is
    shaped as a path (slashes, no capital, no + or =: a base64 run of 20 without a capital is 1 in 30,000)."""
    run = match.group()
    if "/" in run and not any(c.isupper() or c in "+=" for c in run):
        return run
    letters, digits = any(c.isalpha() for c in run), any(c.isdigit() for c in run)
    return REDACTED if len(run) >= 32 or (letters and digits) else run


def redact(text: str) -> str:
    """Text with anything shaped like a token or a key replaced by [redacted]."""
    text = _PEM.sub(REDACTED, text)
    text = _JWT.sub(REDACTED, text)
    text = _ASSIGNED.sub(lambda m: f"{m.group(1)}{REDACTED}", text)
    text = _SCHEME.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    return _RUN.sub(_secret_run, text)


def stderr_line(err: bytes, limit: int = 200) -> str:
    """A failing plugin's stderr as one printable line: its last, redacted (the whole text first: a PEM
    block spans lines), at most `limit` characters."""
    lines = redact(err.decode("utf-8", "replace")).strip().splitlines() or [""]
    last = "".join(ch if ch.isprintable() else "?" for ch in lines[-1].strip())
    return last if len(last) <= limit else last[: limit - 1] + "…"


def _expiry(status: Mapping[str, Any]) -> float | None:
    stamp = status.get("expirationTimestamp")
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


@dataclass
class Credentials:
    """What every request carries: TLS settings and an Authorization header."""

    ssl: ssl.SSLContext | bool
    client_certificate: bool = False  # the TLS context presents one
    insecure: bool = False  # insecure-skip-tls-verify: the server's certificate is not checked
    server_hostname: str | None = None  # tls-server-name
    proxy: str | None = None
    token: str | None = None
    token_file: Path | None = None
    basic: str | None = None  # base64 of user:password
    plugin: ExecPlugin | None = None
    oidc: Any = None  # an oidc.OidcProvider (set by config.py): its id-token, refreshed when it expires
    expires_at: float | None = None  # the plugin token's expiry (epoch seconds)
    _issued_at: float = 0.0
    _lock: asyncio.Lock | None = field(default=None, repr=False)
    clock: Any = field(default=time.time, repr=False)

    def __repr__(self) -> str:  # never a token in a traceback or a log line
        return f"Credentials(tls={'on' if self.ssl is not False else 'insecure'}, kind={self.kind})"

    @property
    def kind(self) -> str:
        if self.plugin is not None:
            return "exec"
        if self.oidc is not None:
            return "oidc"
        if self.token is not None or self.token_file is not None:
            return "token"
        if self.basic is not None:
            return "basic"
        return "client-certificate" if self.client_certificate else "none"

    def _needs_renewal(self) -> bool:
        if self.plugin is None:
            return False
        if self.token is None:
            return True
        if self.expires_at is None:
            return False
        now = self.clock()
        margin = min(RENEW_MARGIN, 0.1 * max(0.0, self.expires_at - self._issued_at))
        return now >= self.expires_at - margin

    async def renew(self) -> None:
        """Run the exec plugin again (on expiry, or after a 401)."""
        assert self.plugin is not None
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            status = await self.plugin.run()
            self.token = status.get("token") or None
            self._issued_at = self.clock()
            self.expires_at = _expiry(status)

    @property
    def notices(self) -> list[str]:
        """What to tell the user once (an OIDC id-token refreshed)."""
        return [self.oidc.notice] if self.oidc is not None and self.oidc.notice else []

    async def headers(self) -> dict[str, str]:
        if self._needs_renewal():
            await self.renew()
        if self.oidc is not None:
            return {"Authorization": f"Bearer {await self.oidc.token()}"}  # CredentialError if it cannot be refreshed
        if self.token_file is not None:
            try:
                token = self.token_file.read_text().strip()  # re-read: projected tokens rotate
            except OSError as exc:
                raise CredentialError(f"tokenFile {self.token_file}: cannot read: {exc.strerror or exc}") from None
            return {"Authorization": f"Bearer {token}"}
        if self.token:
            return {"Authorization": f"Bearer {self.token}"}
        if self.basic:
            return {"Authorization": f"Basic {self.basic}"}
        return {}


def _decode(entry: Mapping[str, Any], key: str) -> bytes:
    try:
        return base64.b64decode(str(entry[key]), validate=False)
    except (binascii.Error, ValueError):
        raise CredentialError(f"{key} is not valid base64") from None


def _joined(base_dir: Path, relative: str) -> str:
    """A kubeconfig's relative path as kubectl makes it absolute: filepath.Join, which cleans `..` by name."""
    return os.path.normpath(os.path.join(base_dir, relative))


def _file(entry: Mapping[str, Any], key: str, base_dir: Path) -> Path:
    path = Path(os.path.expanduser(str(entry[key])))
    path = path if path.is_absolute() else Path(_joined(base_dir, str(path)))
    if not path.is_file():
        raise CredentialError(f"{key} {entry[key]}: no such file")
    return path


@contextlib.contextmanager
def _in_memory(data: bytes) -> Iterator[str]:
    """A path OpenSSL can read `data` from, gone when the block ends (and with the process)."""
    memfd = getattr(os, "memfd_create", None)
    if memfd is not None:
        fd = memfd("gputui-credential", getattr(os, "MFD_CLOEXEC", 0))
        try:
            os.write(fd, data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    fd, path = tempfile.mkstemp(prefix="gputui-")
    try:
        os.write(fd, data)
        os.close(fd)
        fd = -1
        yield path
    finally:
        if fd >= 0:
            os.close(fd)
        os.unlink(path)


def _load_client_cert(context: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    with _in_memory(cert) as cert_path, _in_memory(key) as key_path:
        try:
            context.load_cert_chain(cert_path, key_path)
        except ssl.SSLError as exc:
            raise CredentialError(f"client certificate and key cannot be used together or are not PEM ({exc.reason or 'bad data'})") from None


def tls_context(cluster: Mapping[str, Any], user: Mapping[str, Any], base_dir_cluster: Path, base_dir_user: Path,
                exec_status: Mapping[str, Any] | None = None) -> tuple[ssl.SSLContext | bool, bool]:
    """The SSLContext for a cluster entry and its user (False: insecure-skip-tls-verify), and
    whether it presents a client certificate."""
    insecure = bool(cluster.get("insecure-skip-tls-verify"))
    if cluster.get("certificate-authority"):
        _file(cluster, "certificate-authority", base_dir_cluster)  # a missing file is an error even when unused
        if cluster.get("certificate-authority-data"):
            raise CredentialError("certificate-authority and certificate-authority-data are both given: keep one "
                                  "(kubectl refuses both too)")
    # As kubectl: only the kubeconfig's authority is trusted where it names one, else the system's
    # (whose store takes some 40 ms to load, so it is not loaded when unused).
    if insecure:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif cluster.get("certificate-authority-data"):
        try:
            context = ssl.create_default_context(cadata=_decode(cluster, "certificate-authority-data").decode("ascii", "replace"))
        except ssl.SSLError:
            raise CredentialError("certificate-authority-data is not a PEM certificate") from None
    elif cluster.get("certificate-authority"):
        try:
            context = ssl.create_default_context(cafile=str(_file(cluster, "certificate-authority", base_dir_cluster)))
        except ssl.SSLError:
            raise CredentialError(f"certificate-authority {cluster['certificate-authority']}: not a PEM certificate") from None
    else:
        context = ssl.create_default_context()
    cert = key = None
    if exec_status and exec_status.get("clientCertificateData"):
        cert = str(exec_status["clientCertificateData"]).encode()
        key = str(exec_status.get("clientKeyData") or "").encode()
    else:
        if user.get("client-certificate-data"):
            cert = _decode(user, "client-certificate-data")
        elif user.get("client-certificate"):
            cert = _file(user, "client-certificate", base_dir_user).read_bytes()
        if user.get("client-key-data"):
            key = _decode(user, "client-key-data")
        elif user.get("client-key"):
            key = _file(user, "client-key", base_dir_user).read_bytes()
    if (cert is None) != (key is None):
        raise CredentialError("a client certificate needs its key, and a key its certificate")
    if cert is not None and key is not None:
        _load_client_cert(context, cert, key)
    if insecure and cert is None:
        return False, False
    return context, cert is not None


def _loopback(server: str) -> bool:
    host = urllib.parse.urlsplit(server).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def load_credentials(cluster: Mapping[str, Any], user: Mapping[str, Any], base_dir_cluster: Path, base_dir_user: Path,
                           server: str, *, exec_timeout: float = EXEC_TIMEOUT) -> Credentials:
    """TLS and authentication for a kubeconfig context (an exec plugin runs here, once)."""
    sent = [key for key in ("token", "tokenFile", "exec", "auth-provider", "password") if user.get(key)]
    if sent and str(server).startswith("http://") and not _loopback(server):
        # Anyone on the path would read them (and replay a token): said before an exec plugin even runs.
        # Loopback has no path (a local proxy, a port forward): allowed.
        raise CredentialError(f"refusing to send credentials ({sent[0]}) over plain HTTP to {server}: use https")
    proxy = cluster.get("proxy-url") or None
    if proxy and not str(proxy).startswith(("http://", "https://", "socks5://")):
        raise CredentialError(f"proxy-url {str(proxy).split('://')[0]}:// is not supported (use http://, https:// or socks5://, as kubectl)")
    if user.get("auth-provider"):
        provider = user["auth-provider"] or {}
        if provider.get("name") != "oidc":
            raise CredentialError(f"auth-provider {provider.get('name')!s} is not supported: use an exec credential plugin "
                                  "(kubectl dropped the built-in providers but oidc in 1.26)")
    creds_exec = None
    status = None
    if user.get("exec"):
        creds_exec = ExecPlugin.from_entry(user["exec"], base_dir_user, cluster, server, exec_timeout)
        status = await creds_exec.run()
    context, client_certificate = tls_context(cluster, user, base_dir_cluster, base_dir_user, status)
    creds = Credentials(ssl=context, client_certificate=client_certificate, server_hostname=cluster.get("tls-server-name") or None, proxy=proxy,
                        insecure=bool(cluster.get("insecure-skip-tls-verify")) and str(server).startswith("https://"))
    if creds_exec is not None and status is not None:
        creds.plugin = creds_exec
        creds.token = status.get("token") or None
        creds._issued_at = creds.clock()
        creds.expires_at = _expiry(status)
    elif user.get("token"):
        creds.token = str(user["token"])
    elif user.get("tokenFile"):
        creds.token_file = _file(user, "tokenFile", base_dir_user)
    elif user.get("username") is not None and user.get("password") is not None:
        creds.basic = base64.b64encode(f"{user['username']}:{user['password']}".encode()).decode()
    return creds
