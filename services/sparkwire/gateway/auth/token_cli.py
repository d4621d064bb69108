"""``sparkwire token``: print a client token (JWT HS256) signed with the gateways' secret.

The secret is read from an environment variable (``--secret-env``) or a file (``--secret-file``), never from
a flag's value, so it stays out of shell history and process listings. Inside a gateway pod
``SPARKWIRE_AUTH_SECRET`` and ``SPARKWIRE_STREAMS`` are already set, so
``kubectl exec deploy/<release>-gateway -- sparkwire token`` is enough.

``--scope`` restricts the token to some rows (docs/protocol.md, "Filtered subscriptions"): what a backend
that knows a user's tenant mints for that user, e.g. ``--scope '{"orders": {"tenant": "acme"}}'``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from sparkwire.gateway.auth.tokens import MIN_SECRET_BYTES, issue_token
from sparkwire.gateway.settings import split_list
from sparkwire.options import add_option, add_renamed_seconds, positive_int
from sparkwire.protocol.filter_form import FilterError
from sparkwire.protocol.scope import parse_scope_claim

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_option(parser, "--secret-env", default="SPARKWIRE_AUTH_SECRET",
               help="environment variable holding the gateways' token secret")
    add_option(parser, "--secret-file", default="",
               help="a file holding the gateways' token secret (one line), instead of --secret-env's variable")
    add_option(parser, "--streams", default="metrics",
               help="comma-separated streams the token grants; * grants every stream")
    add_option(parser, "--ttl-ms", type=positive_int, default=3_600_000,
               help="how long until the token expires (rounded up to whole seconds: a JWT's exp)")
    add_renamed_seconds(parser, "--ttl", "--ttl-ms")
    add_option(parser, "--subject", default="client",
               help="the token's sub claim: sessions are tied to it")
    add_option(parser, "--scope", default="",
               help='JSON object stream (or "*") -> filter: the rows the token may read, e.g. '
                    '\'{"orders": {"tenant": "acme"}}\' (empty: every row of the granted streams)')


def _error(text: str) -> int:
    print(f"sparkwire token: error: {text}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    if args.secret_file:
        try:
            secret = Path(args.secret_file).read_text().rstrip("\r\n")
        except OSError as exc:
            return _error(f"--secret-file {args.secret_file}: cannot read it ({exc.strerror}): give a readable "
                          "file holding the gateways' secret")
        where = f"--secret-file {args.secret_file}"
    else:
        secret = os.environ.get(args.secret_env, "")
        where = args.secret_env
        if not secret:
            return _error(f"{args.secret_env} is not set (the gateways' token secret): export it, name another "
                          "variable with --secret-env, or pass --secret-file PATH")
    if len(secret.encode()) < MIN_SECRET_BYTES:
        return _error(f"the secret in {where} is shorter than {MIN_SECRET_BYTES} bytes; the gateways refuse it: "
                      "use the secret the gateways run with")
    streams = split_list(args.streams)
    if not streams:
        return _error("--streams is empty: name the streams the token grants (comma-separated), or * for all")
    scope = None
    if args.scope:
        try:
            scope = parse_scope_claim(json.loads(args.scope))
        except (ValueError, RecursionError) as exc:  # FilterError and JSONDecodeError are ValueErrors
            kind = "filter" if isinstance(exc, FilterError) else "JSON"
            return _error(f"--scope is not a valid scope ({kind}): {exc}")
    ttl_s = -(-args.ttl_ms // 1000)  # whole seconds, rounded up
    print(issue_token(secret, streams, ttl_s, subject=args.subject, now=int(time.time()), scope=scope))
    return 0
