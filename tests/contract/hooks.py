"""Schemathesis hooks of tests/contract/run.sh (loaded through
SCHEMATHESIS_HOOKS): a generated subscription's callback URL is, most of the
time, one of the run's loopback receivers (CONTRACT_RECEIVERS), so creates
succeed and the stateful phase can follow the document's links from what
they made; the rest keep the generated URL (refused: not an allowed
public HTTPS URL), and only string values are replaced, so every wrong type
stays wrong."""

import os
import zlib

import schemathesis

RECEIVERS = os.environ.get("CONTRACT_RECEIVERS", "").split()


@schemathesis.hook
def map_body(context, body):
    operation = getattr(context, "operation", None)
    path = getattr(operation, "path", "")
    if (
        RECEIVERS
        and path.startswith("/v1/subscriptions")
        and isinstance(body, dict)
        and isinstance(body.get("callback_url"), str)
    ):
        # Chosen by the generated URL (Hypothesis wants no randomness of
        # its own in a hook): one in five is kept.
        n = zlib.crc32(body["callback_url"].encode())
        if n % 5:
            body = dict(body, callback_url=RECEIVERS[n % len(RECEIVERS)])
    return body
