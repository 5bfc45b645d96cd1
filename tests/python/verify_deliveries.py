"""Verifies captured Hookline deliveries with the published `standardwebhooks`
library: the proof that any Standard Webhooks client accepts our signatures.

Input (argv[1]): a JSON list of {"secret", "headers": {...}, "body_b64"}.
Exits 0 if every delivery verifies, 1 otherwise (and a tampered copy of each
must fail, so the check can fail)."""

import base64
import json
import sys

from standardwebhooks.webhooks import Webhook, WebhookVerificationError


def main() -> int:
    items = json.load(open(sys.argv[1]))
    if not items:
        print("no deliveries given")
        return 1
    for i, item in enumerate(items):
        wh = Webhook(item["secret"])
        body = base64.b64decode(item["body_b64"])
        headers = item["headers"]
        wh.verify(body, headers)
        try:
            wh.verify(body + b" ", headers)
        except WebhookVerificationError:
            pass
        else:
            print(f"delivery {i}: a tampered body verified")
            return 1
    print(f"verified {len(items)} deliveries with standardwebhooks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
