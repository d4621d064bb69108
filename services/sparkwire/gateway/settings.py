"""``sparkwire gateway`` options (flags with matching ``SPARKWIRE_*`` environment variables) and the
settings every connection gets from them."""

from __future__ import annotations

import argparse
import os
import socket
from dataclasses import dataclass

from sparkwire.gateway.auth.keys import HmacKey, JwksKeys, KeyFileKeys, KeySource
from sparkwire.gateway.auth.tokens import MIN_SECRET_BYTES, SCOPE_CLAIM, STREAMS_CLAIM, Auth, Verifier
from sparkwire.options import (
    add_flag,
    add_option,
    add_renamed_seconds,
    add_secret,
    non_negative_int,
    positive_int,
    read_secret,
)
from sparkwire.protocol.limits import (
    DEFAULT_ACK_EVERY,
    DEFAULT_ACK_INTERVAL_MS,
    DEFAULT_ACKS_PER_SECOND,
    HELLO_TIMEOUT_S,
    MAX_ACK_INTERVAL_MS,
    MAX_CLIENT_FRAME_BYTES,
    MAX_SERVER_FRAME_BYTES,
    PING_INTERVAL_S,
    PONG_TIMEOUT_S,
)


@dataclass(frozen=True)
class ConnectionSettings:
    """What every connection of a pod is configured with (``connection_settings`` builds it from the options)."""

    ack_every: int
    ack_interval_ms: int
    hello_timeout_s: float
    max_client_frame_bytes: int
    max_server_frame_bytes: int
    page_size: int
    # The shared secret (HS256, default claims), a Verifier (keys from an IdP, issuer/audience/claims), or "".
    auth_secret: Auth
    ping_interval_s: float = PING_INTERVAL_S
    pong_timeout_s: float = PONG_TIMEOUT_S
    acks_per_second: int = DEFAULT_ACKS_PER_SECOND

    def ack_policy(self, connections: int) -> tuple[int, int]:
        """(ackEvery, ackIntervalMs) to ask of a client joining a pod that holds ``connections``: the
        configured ones, stretched so that all clients together ack about ``acks_per_second`` times a
        second. Acks only move the server-side bookmark (clients resume from their cursors), and parsing
        and storing them was the pod's largest cost after the sends at 5,000 clients."""
        stretch = max(1.0, connections / self.acks_per_second)
        interval_ms = min(int(self.ack_interval_ms * stretch), max(MAX_ACK_INTERVAL_MS, self.ack_interval_ms))
        return int(self.ack_every * interval_ms / self.ack_interval_ms), interval_ms


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_option(parser, "--host", default="0.0.0.0", help="address to listen on")
    add_option(parser, "--port", type=positive_int, default=8080, help="port to listen on")
    add_option(parser, "--redis-url", default="redis://127.0.0.1:6379/0",
               help="Redis holding the replay log: redis://host:port/db, or through Redis Sentinel "
                    "redis+sentinel://[:password@]host1:port1,host2:port2/<master-name>[/<db>]")
    add_option(parser, "--redis-pool-size", type=positive_int, default=32,
               help="Redis connections per pod for connections' calls (plus one per stream for its reader); "
                    "calls wait for a free one rather than fail")
    add_option(parser, "--redis-timeout-ms", type=positive_int, default=10_000,
               help="a Redis connect or command not answered within this fails, and is retried on a new "
                    "connection: a link gone silent (a peer that vanished without a reset) then closes its "
                    "clients with 4503, which resume elsewhere, instead of holding them for the ~15 min TCP "
                    "takes to give up; above the stream readers' 1 s blocking read and any snapshot read")
    add_option(parser, "--streams", default="metrics", help="comma-separated streams this gateway serves")
    add_option(parser, "--allowed-origins", default="",
               help="comma-separated Origin values allowed to connect; empty allows any (no check)")
    add_flag(parser, "--allow-missing-origin", default=False,
             help="with --allowed-origins, also accept connections that send no Origin header "
                  "(non-browser clients; every browser sends one)")
    add_secret(parser, "--auth-secret",
               help=f"HMAC secret of client tokens (JWT HS256, at least {MIN_SECRET_BYTES} bytes; required unless "
                    "--insecure-no-auth)")
    add_option(parser, "--auth-jwks-url", default="",
               help="verify client tokens (RS256/ES256) with the identity provider's keys at this JWKS URL "
                    "(instead of --auth-secret; requires --auth-issuer and --auth-audience)")
    add_option(parser, "--auth-public-key-file", default="",
               help="verify client tokens (RS256/ES256) with the PEM public key or JWKS JSON in this file, read "
                    "again when it changes (instead of --auth-secret; requires --auth-issuer and --auth-audience)")
    add_option(parser, "--auth-issuer", default="",
               help="the iss claim every token must carry (required with a JWKS URL or key file)")
    add_option(parser, "--auth-audience", default="",
               help="an aud value every token must carry (required with a JWKS URL or key file)")
    add_option(parser, "--auth-streams-claim", default=STREAMS_CLAIM,
               help="the claim listing the streams a token grants (e.g. https://example.com/streams)")
    add_option(parser, "--auth-scope-claim", default=SCOPE_CLAIM,
               help="the claim holding a token's scope (stream -> filter)")
    add_flag(parser, "--insecure-no-auth", default=False,
             help="serve without authentication: anyone who reaches the pod reads every stream")
    add_option(parser, "--ring-size", type=positive_int, default=10_000,
               help="recent entries kept in memory per stream for replays")
    add_option(parser, "--send-queue", type=positive_int, default=256,
               help="live batches queued per connection before it is closed as a slow consumer")
    add_option(parser, "--page-size", type=positive_int, default=500, help="entries per history read")
    add_option(parser, "--ack-every", type=positive_int, default=DEFAULT_ACK_EVERY,
               help="clients ack after this many entries")
    add_option(parser, "--ack-interval-ms", type=positive_int, default=DEFAULT_ACK_INTERVAL_MS,
               help="clients ack at least this often while entries arrive")
    add_option(parser, "--acks-per-second", type=positive_int, default=DEFAULT_ACKS_PER_SECOND,
               help="with more clients than this, each is asked to ack less often (up to 10 s apart) so that "
                    "all of them together ack about this often")
    add_option(parser, "--session-ttl-ms", type=positive_int, default=86_400_000,
               help="how long a session's position outlives its last ack (rounded up to whole seconds)")
    add_renamed_seconds(parser, "--session-ttl-seconds", "--session-ttl-ms")
    add_option(parser, "--hello-timeout-ms", type=positive_int, default=int(HELLO_TIMEOUT_S * 1000),
               help="close connections that send no hello within this time")
    add_option(parser, "--ping-interval-ms", type=positive_int, default=int(PING_INTERVAL_S * 1000),
               help="send an application ping to each client this often")
    add_option(parser, "--pong-timeout-ms", type=positive_int, default=int(PONG_TIMEOUT_S * 1000),
               help="close (resumable 4408) a client that sent no frame for this long")
    add_option(parser, "--header-timeout-ms", type=positive_int, default=10_000,
               help="close a connection whose request headers (the WebSocket upgrade's included) are not complete "
                    "this long after it opened or its request began: a client that sends nothing, or a byte now "
                    "and then (slowloris), cannot hold a socket (uvicorn itself has no such timeout)")
    add_option(parser, "--max-connections", type=non_negative_int, default=20_000,
               help="connections this pod holds at most (WebSocket, SSE and plain HTTP, open or opening); past "
                    "it a WebSocket upgrade or an HTTP request gets 503 and the client retries, on another pod "
                    "behind a Service; 0: no cap")
    add_option(parser, "--max-frame-bytes", type=positive_int, default=MAX_CLIENT_FRAME_BYTES,
               help="largest client frame accepted")
    add_flag(parser, "--per-message-deflate", default=False,
             help="offer WebSocket compression; costs a zlib context (~300 KB) and deflate CPU per connection")
    add_option(parser, "--drain-ms", type=non_negative_int, default=10_000,
               help="on SIGTERM, how long to wait for clients to leave after closing them")
    add_renamed_seconds(parser, "--drain-seconds", "--drain-ms")
    add_option(parser, "--pod-name", default=socket.gethostname(), help="this pod's name in session hashes")
    add_option(parser, "--log-level", default="INFO",
               help="log level (DEBUG adds a line per WebSocket opened and closed)")


def connection_settings(args: argparse.Namespace) -> ConnectionSettings:
    return ConnectionSettings(
        ack_every=args.ack_every,
        ack_interval_ms=args.ack_interval_ms,
        hello_timeout_s=args.hello_timeout_ms / 1000,
        max_client_frame_bytes=args.max_frame_bytes,
        max_server_frame_bytes=MAX_SERVER_FRAME_BYTES,
        page_size=args.page_size,
        auth_secret=token_auth(args),
        ping_interval_s=args.ping_interval_ms / 1000,
        pong_timeout_s=args.pong_timeout_ms / 1000,
        acks_per_second=args.acks_per_second,
    )


def split_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def auth_problem(args: argparse.Namespace) -> str | None:
    """Why these options must not start a gateway, or None (``args.auth_secret`` resolved: :func:`resolve_auth`).

    Without a secret the gateway would serve every stream to anyone, so that takes an explicit
    ``--insecure-no-auth`` rather than a forgotten variable; both together are a mistake either way. Exactly
    one of the secret, ``--auth-jwks-url`` and ``--auth-public-key-file``; the last two with an issuer and an
    audience (an identity provider signs tokens for other applications too).
    """
    sources = [name for name, value in (("a token secret (SPARKWIRE_AUTH_SECRET or --auth-secret-file)",
                                           args.auth_secret),
                                          ("--auth-jwks-url", args.auth_jwks_url),
                                          ("--auth-public-key-file", args.auth_public_key_file)) if value]
    if len(sources) > 1:
        return f"{' and '.join(sources)} are alternatives: configure exactly one way of verifying tokens"
    public_key = bool(args.auth_jwks_url or args.auth_public_key_file)
    if public_key and args.insecure_no_auth:
        return f"{sources[0]} and --insecure-no-auth contradict each other: drop one"
    if public_key and not (args.auth_issuer and args.auth_audience):
        return (f"{sources[0]} requires --auth-issuer and --auth-audience (SPARKWIRE_AUTH_ISSUER, "
                "SPARKWIRE_AUTH_AUDIENCE): an identity provider signs tokens for other applications too")
    if args.auth_public_key_file and not os.access(args.auth_public_key_file, os.R_OK):
        return f"the key file {args.auth_public_key_file} (--auth-public-key-file) cannot be read"
    if public_key:
        return None
    if args.insecure_no_auth and args.auth_secret:
        return ("a token secret (SPARKWIRE_AUTH_SECRET or --auth-secret-file) and --insecure-no-auth contradict "
                "each other: drop --insecure-no-auth (SPARKWIRE_INSECURE_NO_AUTH) to require tokens, or unset the "
                "secret to serve without them")
    if args.insecure_no_auth:
        return None
    if not args.auth_secret:
        return ("no token secret: the gateway requires signed client tokens; set SPARKWIRE_AUTH_SECRET or pass "
                f"--auth-secret-file PATH (a secret of at least {MIN_SECRET_BYTES} bytes), or verify your identity "
                "provider's tokens with --auth-jwks-url or --auth-public-key-file (with --auth-issuer and "
                "--auth-audience), or pass --insecure-no-auth to serve every stream without authentication")
    if len(args.auth_secret.encode()) < MIN_SECRET_BYTES:
        # HS256 with a short key: one captured token lets an attacker brute-force the key offline.
        return (f"the token secret (SPARKWIRE_AUTH_SECRET or --auth-secret-file) is shorter than {MIN_SECRET_BYTES} "
                f"bytes, too short for HS256: use a longer one, e.g. `openssl rand -hex {MIN_SECRET_BYTES}`")
    return None


def resolve_auth(args: argparse.Namespace) -> None:
    """``args.auth_secret`` from SPARKWIRE_AUTH_SECRET or ``--auth-secret-file`` (exits naming the fix)."""
    args.auth_secret = read_secret(args, "--auth-secret")


def token_auth(args: argparse.Namespace) -> Auth:
    """What the gateway checks tokens with (options checked by :func:`auth_problem`): "" for none, the secret
    alone as before, else a Verifier (a key file that cannot be read exits naming it)."""
    keys: KeySource
    if args.auth_jwks_url:
        keys = JwksKeys(args.auth_jwks_url)
    elif args.auth_public_key_file:
        keys = KeyFileKeys(args.auth_public_key_file)
    elif not args.auth_secret:
        return ""
    elif not (args.auth_issuer or args.auth_audience or args.auth_streams_claim != STREAMS_CLAIM
              or args.auth_scope_claim != SCOPE_CLAIM):
        return str(args.auth_secret)
    else:
        keys = HmacKey(args.auth_secret)
    return Verifier(keys, issuer=args.auth_issuer, audience=args.auth_audience,
                    streams_claim=args.auth_streams_claim, scope_claim=args.auth_scope_claim)
