"""``sparkwire token``: print a client token (JWT HS256) signed with the gateways' secret.

The secret is read from an environment variable, never from a flag, so it stays out of shell history
and process listings. Inside a gateway pod ``SPARKWIRE_AUTH_SECRET`` and ``SPARKWIRE_STREAMS`` are
already set, so ``kubectl exec deploy/<release>-gateway -- sparkwire token`` is enough.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from sparkwire.gateway.auth import MIN_SECRET_BYTES, issue_token
from sparkwire.gateway.settings import split_list
from sparkwire.options import add_option, positive_int

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_option(parser, "--secret-env", default="SPARKWIRE_AUTH_SECRET",
               help="environment variable holding the gateways' --auth-secret")
    add_option(parser, "--streams", default="metrics",
               help="comma-separated streams the token grants; * grants every stream")
    add_option(parser, "--ttl", type=positive_int, default=3600, help="seconds until the token expires")
    add_option(parser, "--subject", default="client",
               help="the token's sub claim: sessions are tied to it")


def run(args: argparse.Namespace) -> int:
    secret = os.environ.get(args.secret_env, "")
    if not secret:
        print(f"sparkwire token: error: {args.secret_env} is not set (the gateways' --auth-secret)", file=sys.stderr)
        return 2
    if len(secret.encode()) < MIN_SECRET_BYTES:
        print(f"sparkwire token: error: the secret in {args.secret_env} is shorter than {MIN_SECRET_BYTES} "
              "bytes; the gateways refuse it", file=sys.stderr)
        return 2
    streams = split_list(args.streams)
    if not streams:
        print("sparkwire token: error: --streams is empty", file=sys.stderr)
        return 2
    print(issue_token(secret, streams, args.ttl, subject=args.subject, now=int(time.time())))
    return 0
