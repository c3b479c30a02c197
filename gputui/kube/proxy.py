"""Which proxy a request to the API server goes through, as kubectl chooses it.

The kubeconfig cluster's `proxy-url` (http://, https:// or socks5://) wins; else the environment, read as
Go's net/http reads it for kubectl (not as Python's urllib does): HTTPS_PROXY (or https_proxy) for an
https:// server, HTTP_PROXY (or http_proxy) for an http:// one, a value without a scheme taken as
http://; never for `localhost` or a loopback address; not for a server NO_PROXY (or no_proxy) names,
a comma-separated list of `*`, host names (`example.com` or `.example.com`: it and its subdomains),
IP addresses and CIDR ranges, each maybe with a `:port`.
"""
from __future__ import annotations

import ipaddress
import os
from urllib.parse import urlsplit


def _environ(*names: str) -> str:
    return next((os.environ[name] for name in names if os.environ.get(name)), "")


def _with_scheme(proxy: str) -> str:
    parts = urlsplit(proxy)
    return proxy if parts.scheme and parts.netloc else f"http://{proxy}"


def _excluded(host: str, port: str, no_proxy: str) -> bool:
    """NO_PROXY's entries name this host (and port)."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        ip = None
    for entry in (e.strip().lower() for e in no_proxy.split(",")):
        if not entry:
            continue
        if entry == "*":
            return True
        if "/" in entry:
            try:
                if ip is not None and ip in ipaddress.ip_network(entry, strict=False):
                    return True
            except ValueError:
                pass
            continue
        name, entry_port = entry, ""
        if entry.startswith("["):  # [IPv6]:port
            name, _, rest = entry[1:].partition("]")
            entry_port = rest.removeprefix(":")
        elif entry.count(":") == 1:
            name, entry_port = entry.split(":")
        if entry_port and entry_port != port:
            continue
        try:
            entry_ip = ipaddress.ip_address(name)
        except ValueError:
            entry_ip = None
        if entry_ip is not None:
            if entry_ip == ip:
                return True
            continue
        subdomains_only = name.startswith((".", "*."))  # `example.com` is also the host itself
        domain = name.removeprefix("*").lstrip(".")
        if domain and (host.endswith("." + domain) or (host == domain and not subdomains_only)):
            return True
    return False


def environment_proxy(server: str) -> str | None:
    """The proxy the environment names for this server, as Go's http.ProxyFromEnvironment picks it; None: direct."""
    parts = urlsplit(server)
    host = (parts.hostname or "").lower()
    port = str(parts.port or (443 if parts.scheme == "https" else 80))
    proxy = _environ("HTTPS_PROXY", "https_proxy") if parts.scheme == "https" else _environ("HTTP_PROXY", "http_proxy")
    if not proxy or host == "localhost":
        return None
    try:
        if ipaddress.ip_address(host).is_loopback:
            return None
    except ValueError:
        pass
    if _excluded(host, port, _environ("NO_PROXY", "no_proxy")):
        return None
    return _with_scheme(proxy)


def choose_proxy(server: str, proxy_url: str | None) -> str | None:
    """The kubeconfig's proxy-url, else the environment's proxy for this server; None: connect directly."""
    return proxy_url or environment_proxy(server)
