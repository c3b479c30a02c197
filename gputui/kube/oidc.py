"""A kubeconfig user's `auth-provider: oidc`, as client-go's provider uses it.

The id-token is sent while it is good; when there is none, or it expires within 10 seconds (its JWT's `exp`),
it is refreshed with the refresh-token at the issuer's token endpoint, found through
`{idp-issuer-url}/.well-known/openid-configuration`, the client-id and client-secret sent as HTTP Basic
credentials (as Go's oauth2 does first). The issuer's certificate is checked against
idp-certificate-authority(-data), else the system's authorities. The new tokens are kept in memory only:
client-go writes them back into the kubeconfig; gputui writes nothing, and says once that it refreshed.
"""
from __future__ import annotations

import asyncio
import base64
import binascii
import time
import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Callable
from urllib.parse import quote, urlencode, urlsplit

import orjson

from .credentials import CredentialError, Credentials, _decode, _file

EXPIRY_MARGIN = 10.0  # seconds: a token that expires sooner is refreshed first (client-go's expiryDelta)
FORM = "application/x-www-form-urlencoded"
REFRESH_TIMEOUT = 30.0


class OidcError(CredentialError):
    """The id-token cannot be used or refreshed; str() is one line, without a token."""

    def __init__(self, message: str) -> None:
        super().__init__(f"auth-provider oidc: {message}")


def _expiry(id_token: str) -> float:
    """The JWT's `exp` (epoch seconds)."""
    try:
        payload = id_token.split(".")[1]
        claims = orjson.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        return float(claims["exp"])
    except (IndexError, binascii.Error, ValueError, KeyError, TypeError, orjson.JSONDecodeError):
        raise OidcError("the id-token is not a JWT with an expiry (exp)") from None


class OidcProvider:
    """config: the auth-provider's; base_dir: its kubeconfig's directory (a relative idp-certificate-authority);
    describe: how a network failure is worded (config.describe_network_error)."""

    def __init__(self, config: Mapping[str, Any], base_dir: Path, describe: Callable[[BaseException], str],
                 clock: Callable[[], float] = time.time) -> None:
        self.issuer = str(config.get("idp-issuer-url") or "").rstrip("/")
        self.client_id = str(config.get("client-id") or "")
        self.client_secret = str(config.get("client-secret") or "")
        self.id_token = str(config.get("id-token") or "")
        self.refresh_token = str(config.get("refresh-token") or "")
        self.tls = _issuer_tls(config, base_dir)
        self.describe = describe
        self.clock = clock
        self.notice: str | None = None  # set by the first refresh: what to tell the user once
        self.on_notice: Callable[[str], None] | None = None  # told the notice when it is set (a refresh in the session)
        self._lock = asyncio.Lock()
        if not self.issuer or not self.client_id:
            raise OidcError("needs idp-issuer-url and client-id")
        if not self.id_token and not self.refresh_token:
            raise OidcError("has neither an id-token nor a refresh-token")

    def __repr__(self) -> str:  # never a token in a traceback
        return f"OidcProvider({self.issuer!r})"

    def expired(self) -> bool:
        return not self.id_token or self.clock() + EXPIRY_MARGIN >= _expiry(self.id_token)

    async def token(self) -> str:
        """A good id-token, refreshed first when needed (OidcError if it cannot be)."""
        async with self._lock:
            if self.expired():
                await self._refresh()
            return self.id_token

    async def _refresh(self) -> None:
        from .client import ApiError, Client, HttpError  # noqa: PLC0415

        if not self.refresh_token:
            raise OidcError("the id-token has expired and there is no refresh-token to renew it: log in again")
        issuer = Client(self.issuer, Credentials(ssl=self.tls))
        try:
            discovery = await issuer.json("GET", "/.well-known/openid-configuration")
            endpoint = str(discovery.get("token_endpoint") or "")
            if not endpoint.startswith(("https://", "http://")):
                raise OidcError(f"the issuer {self.issuer} names no token endpoint")
            parts = urlsplit(endpoint)
            token_server = Client(f"{parts.scheme}://{parts.netloc}", Credentials(ssl=self.tls, basic=self._basic()))
            try:
                resp = await token_server.request(
                    "POST", parts.path + (f"?{parts.query}" if parts.query else ""), content_type=FORM,
                    body=urlencode({"grant_type": "refresh_token", "refresh_token": self.refresh_token}).encode(),
                )
                async with resp:
                    body = await resp.read()
            finally:
                await token_server.close()
        except (HttpError, OSError) as exc:
            raise OidcError(f"cannot refresh the id-token at {self.issuer}: {self.describe(exc)}") from None
        except ApiError as exc:
            raise OidcError(f"cannot refresh the id-token at {self.issuer}: {exc.status} {exc.message}".rstrip()) from None
        finally:
            await issuer.close()
        answer = _parsed(body)
        if resp.status != 200:
            reason = answer.get("error_description") or answer.get("error") or f"HTTP {resp.status}"
            raise OidcError(f"the issuer {self.issuer} refused to refresh the id-token: {str(reason)[:200]}")
        if not answer.get("id_token"):
            raise OidcError(f"the issuer {self.issuer} answered the refresh without an id_token")
        self.id_token = str(answer["id_token"])
        self.refresh_token = str(answer.get("refresh_token") or self.refresh_token)
        _expiry(self.id_token)  # a token that is not a JWT is no better
        if self.notice is None:
            self.notice = (f"the OIDC id-token had expired and was refreshed at {self.issuer}; the new one is kept in memory "
                           "only (the kubeconfig is not written)")
            if self.on_notice is not None:
                self.on_notice(self.notice)

    def _basic(self) -> str:
        """client_id:client_secret as HTTP Basic credentials, each form-encoded first (RFC 6749, 2.3.1), base64."""
        pair = f"{quote(self.client_id, safe='')}:{quote(self.client_secret, safe='')}"
        return base64.b64encode(pair.encode()).decode()


def _parsed(body: bytes) -> dict[str, Any]:
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _issuer_tls(config: Mapping[str, Any], base_dir: Path) -> ssl.SSLContext:
    """The SSLContext that checks the issuer: idp-certificate-authority-data, idp-certificate-authority, else the system's."""
    try:
        if config.get("idp-certificate-authority-data"):
            return ssl.create_default_context(cadata=_decode(config, "idp-certificate-authority-data").decode("ascii", "replace"))
        if config.get("idp-certificate-authority"):
            return ssl.create_default_context(cafile=str(_file(config, "idp-certificate-authority", base_dir)))
    except ssl.SSLError:
        raise OidcError("its idp-certificate-authority is not a PEM certificate") from None
    return ssl.create_default_context()
