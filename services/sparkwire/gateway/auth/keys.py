"""Where the keys that verify client tokens come from (issue 43, part 6): a shared secret (HS256), an identity
provider's JWKS URL, or a key file (a PEM public key or a JWKS JSON document) mounted from a Secret.

Each source answers ``key_for(token)``: the key and the algorithms a token may be signed with, from what it
holds (never a network call), or ``KeyUnavailable``. ``prepare(token)`` is awaited before: the JWKS source
fetches there, in a thread, when the token names a ``kid`` it does not hold (rate-limited), so a rotated key
verifies without a restart and the event loop never waits on the identity provider."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import os
import threading
import time
from typing import Any, Protocol

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import load_pem_public_key

log = logging.getLogger(__name__)

HMAC_ALGORITHMS = ("HS256",)
# Public-key modes accept only these: never "none" and never an HMAC algorithm, so a token "signed" with the
# public key as an HMAC secret (the key-confusion attack) is refused by its header alone.
PUBLIC_KEY_ALGORITHMS = ("RS256", "ES256")
JWKS_LIFESPAN_S = 300.0  # a held key set is refetched (in the background) after this
JWKS_REFETCH_INTERVAL_S = 10.0  # fetches start at most this often, whatever the tokens' kids
JWKS_TIMEOUT_S = 5.0  # one fetch waits at most this (in a thread: the hello waiting on it, not the pod)


class KeyUnavailable(Exception):
    """No key verifies this token (unknown kid, unreadable key file): the token is refused as badly signed."""


class KeySource(Protocol):
    async def prepare(self, token: str) -> None: ...

    def key_for(self, token: str) -> tuple[Any, list[str]]: ...


class HmacKey:
    """A shared secret: HS256 only."""

    def __init__(self, secret: str) -> None:
        self.secret = secret

    async def prepare(self, token: str) -> None:
        return None

    def key_for(self, token: str) -> tuple[Any, list[str]]:
        return self.secret, list(HMAC_ALGORITHMS)


def _kid(token: str) -> str | None:
    try:
        kid = jwt.get_unverified_header(token).get("kid")
    except jwt.InvalidTokenError:
        return None
    return kid if isinstance(kid, str) else None


def _jwk_keys(jwk_set: jwt.PyJWKSet) -> dict[str | None, jwt.PyJWK]:
    """kid -> key of a JWK set's signing keys of an accepted algorithm (others skipped)."""
    keys: dict[str | None, jwt.PyJWK] = {}
    for key in jwk_set.keys:
        if key.public_key_use in ("sig", None) and key.algorithm_name in PUBLIC_KEY_ALGORITHMS:
            keys[key.key_id] = key
    return keys


def _pick(keys: dict[str | None, jwt.PyJWK], token: str, where: str) -> tuple[Any, list[str]]:
    kid = _kid(token)
    key = keys.get(kid)
    if key is None and kid is None and len(keys) == 1:  # a token without kid, one key: that key
        key = next(iter(keys.values()))
    if key is None:
        raise KeyUnavailable(f"no key {kid!r} in {where}" if kid else f"the token names no key (kid) of {where}")
    return key.key, [key.algorithm_name]


class JwksKeys:
    """The signing keys an identity provider publishes at ``url``, fetched with PyJWT's ``PyJWKClient`` in a
    worker thread. The keys are held here rather than in PyJWKClient's cache, which a failed fetch after its
    ``lifespan`` leaves empty-handed: the last keys fetched stay in use while the endpoint is down, and a set
    older than ``lifespan_s`` is refreshed in the background at the next token. A token naming an unknown
    ``kid`` starts a fetch unless one started less than ``refetch_interval_s`` ago (PyJWKClient's own
    cooldown only counts successful fetches: a down IdP would be asked on every forged kid), and concurrent
    tokens share one fetch."""

    def __init__(self, url: str, *, lifespan_s: float = JWKS_LIFESPAN_S,
                 refetch_interval_s: float = JWKS_REFETCH_INTERVAL_S, timeout_s: float = JWKS_TIMEOUT_S) -> None:
        self.url = url
        self.client = jwt.PyJWKClient(url, cache_jwk_set=True, lifespan=lifespan_s, timeout=timeout_s)
        self.lifespan_s = lifespan_s
        self.refetch_interval_s = refetch_interval_s
        self.fetches = 0  # attempted, for tests and logs
        self._keys: dict[str | None, jwt.PyJWK] = {}
        self._fetched_at: float | None = None
        self._last_attempt: float | None = None
        self._inflight: concurrent.futures.Future[None] | None = None
        self._guard = threading.Lock()
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="jwks")

    async def prepare(self, token: str) -> None:
        kid = _kid(token)
        now = time.monotonic()
        stale = self._fetched_at is None or now - self._fetched_at >= self.lifespan_s
        known = kid in self._keys or (kid is None and len(self._keys) == 1)
        if known and not stale:
            return
        future = self._start_fetch(now)
        if known or future is None:  # a known key verifies now; the refresh goes on in the background
            return
        await asyncio.wrap_future(future)

    def _start_fetch(self, now: float) -> concurrent.futures.Future[None] | None:
        with self._guard:
            if self._inflight is not None:
                return self._inflight
            if self._last_attempt is not None and now - self._last_attempt < self.refetch_interval_s:
                return None
            self._last_attempt = now
            self.fetches += 1
            future = self._executor.submit(self._fetch)
            self._inflight = future
            return future

    def _fetch(self) -> None:
        # Always from the endpoint: this is called only when the held set is stale or lacks a kid, and a
        # set PyJWKClient still caches could lack the kid that made the call.
        try:
            keys = _jwk_keys(self.client.get_jwk_set(refresh=True))
        except (jwt.PyJWKClientError, jwt.PyJWKError, OSError, ValueError) as error:
            log.warning("JWKS %s could not be fetched (%s); keeping the %d keys held", self.url, error,
                        len(self._keys))
        else:
            self._keys, self._fetched_at = keys, time.monotonic()
        finally:
            with self._guard:
                self._inflight = None

    def key_for(self, token: str) -> tuple[Any, list[str]]:
        return _pick(self._keys, token, f"the JWKS at {self.url}")

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


class KeyFileKeys:
    """A PEM public key (RSA: RS256, EC P-256: ES256) or a JWKS JSON document in a file, read again when its
    modification time changes (a rotated Secret mount takes effect without a restart). A file that cannot be
    read or parsed after a change keeps the keys read before (logged)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._mtime: int | None = None
        self._keys: dict[str | None, jwt.PyJWK] = {}
        self._pem: tuple[Any, list[str]] | None = None
        self._reload()
        if self._mtime is None:
            raise KeyUnavailable(f"the key file {path} could not be read")

    async def prepare(self, token: str) -> None:
        return None

    def _reload(self) -> None:
        try:
            mtime = os.stat(self.path).st_mtime_ns
            if mtime == self._mtime:
                return
            with open(self.path, "rb") as file:
                data = file.read()
            if data.lstrip().startswith(b"{"):
                self._keys, self._pem = _jwk_keys(jwt.PyJWKSet.from_dict(json.loads(data))), None
            else:
                self._keys, self._pem = {}, _pem_key(data)
            self._mtime = mtime
        except (OSError, ValueError, TypeError, jwt.PyJWKError, KeyUnavailable) as error:
            log.warning("key file %s could not be read (%s); keeping the keys read before", self.path, error)

    def key_for(self, token: str) -> tuple[Any, list[str]]:
        self._reload()
        if self._pem is not None:
            return self._pem
        return _pick(self._keys, token, f"the key file {self.path}")


def _pem_key(data: bytes) -> tuple[Any, list[str]]:
    key = load_pem_public_key(data)
    if isinstance(key, rsa.RSAPublicKey):
        return key, ["RS256"]
    if isinstance(key, ec.EllipticCurvePublicKey) and isinstance(key.curve, ec.SECP256R1):
        return key, ["ES256"]
    raise KeyUnavailable(f"a {type(key).__name__} is not an RS256 or ES256 key")
