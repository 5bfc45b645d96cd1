"""Prints the figures of a schemathesis run from its NDJSON report
(tests/contract/run.sh): requests sent, checks run, failed checks, and each
distinct failure (operation, check, one request that shows it)."""

import base64
import glob
import json
import os
import sys


def main(report_dir):
    files = sorted(glob.glob(os.path.join(report_dir, "*.ndjson")))
    if not files:
        sys.exit(f"figures: no NDJSON report in {report_dir}")
    requests = checks = failed = 0
    operations = set()
    failures = {}
    for line in open(files[-1]):
        event = json.loads(line)
        finished = event.get("ScenarioFinished")
        if not finished:
            continue
        recorder = finished["recorder"]
        operations.add(recorder["label"])
        interactions = recorder.get("interactions", {})
        requests += len(interactions)
        for case_id, results in recorder.get("checks", {}).items():
            for check in results:
                checks += 1
                if check["status"] != "failure":
                    continue
                failed += 1
                key = (recorder["label"], check["name"])
                if key in failures:
                    continue
                shown = interactions.get(case_id, {})
                request = shown.get("request", {})
                response = shown.get("response") or {}
                content = response.get("content") or {}
                body = content.get("$base64")
                body = base64.b64decode(body).decode("utf-8", "replace") if body else content.get("string", "")
                sent = request.get("body") or {}
                sent = base64.b64decode(sent["$base64"]).decode("utf-8", "replace") if "$base64" in sent else sent.get("string", "")
                failures[key] = (
                    f"{request.get('method')} {request.get('uri')} body={sent[:300]!r}"
                    f" -> {response.get('status_code')} {body[:300]!r}"
                )
    print(
        f"schemathesis figures: {len(operations)} operations, {requests} requests, {checks} checks, "
        f"{failed} failed checks, {len(failures)} distinct failures"
    )
    for (label, check), example in sorted(failures.items()):
        print(f"  FAILURE {label}: {check}: {example}")


if __name__ == "__main__":
    main(sys.argv[1])
