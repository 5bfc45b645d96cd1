"""The README walk-through, through a client generated from docs/openapi.json.

tests/contract/run.sh generates the client (openapi-python-client) into a
temporary directory and runs this against a running `hookline serve --dev`
with two receivers (`hookline listen`: one answering 200, one 500). Each
step calls the generated operation by its operationId (the names
docs/openapi.json gives, kept stable by api/src/openapi.rs), builds its body
through the generated model (`Model.from_dict`) and reads the answer through
the generated model of the documented response (`parsed`): a response the
document does not describe, or a body its model cannot read, fails here.

Steps: create a subscription; post an event in each format (native, change
feed, domain event, contract v1); list the deliveries of each; make a dead
letter (a subscription to the failing receiver that dead-letters on 500),
requeue it; requeue the next one with a bulk job and follow the job.
"""

import argparse
import enum
import importlib
import pkgutil
import sys
import time
import typing
import uuid
from http import HTTPStatus

import hookline_client.api
from hookline_client import AuthenticatedClient
from hookline_client.types import UNSET

DEADLINE_S = 60


def operation(operation_id):
    """The generated module of an operation (api/<tag>/<operation_id>.py)."""
    for info in pkgutil.walk_packages(hookline_client.api.__path__, "hookline_client.api."):
        if info.name.rsplit(".", 1)[-1] == operation_id:
            return importlib.import_module(info.name)
    raise SystemExit(f"the generated client has no operation {operation_id}")


def classes(annotation):
    """The classes an annotation names (through Union/Optional)."""
    args = typing.get_args(annotation)
    if args:
        return [c for a in args for c in classes(a)]
    return [annotation] if isinstance(annotation, type) else []


def coerce(annotation, value):
    """A plain value as the generated type a parameter or body takes: a model
    built with from_dict, an enum member by its wire value, else as it is."""
    if value is None or value is UNSET:
        return value
    models = []
    for cls in classes(annotation):
        if hasattr(cls, "from_dict") and isinstance(value, dict):
            # A body that is one of several models (the envelope formats):
            # the model that reads it and writes back the same fields (times
            # may be written in another RFC 3339 spelling).
            try:
                model = cls.from_dict(value)
            except (KeyError, TypeError, ValueError):
                continue
            if set(model.to_dict()) == set(value):
                return model
            models.append(model)
        elif issubclass(cls, enum.Enum) and isinstance(value, str):
            for member in cls:
                if member.value in (value, value.replace("_", "-"), value.replace("-", "_")):
                    return member
    if models:
        raise SystemExit(f"no generated model reads {value} back with its fields (tried {[type(m).__name__ for m in models]})")
    return value


def plain(parsed):
    """A parsed model as plain JSON values."""
    if hasattr(parsed, "to_dict"):
        return parsed.to_dict()
    if isinstance(parsed, list):
        return [plain(p) for p in parsed]
    return parsed


class Api:
    """Calls operations of the generated client by operationId."""

    def __init__(self, url, key):
        self.client = AuthenticatedClient(base_url=url, token=key, raise_on_unexpected_status=True)
        self.calls = 0

    def call(self, operation_id, expect, body=None, **params):
        module = operation(operation_id)
        hints = typing.get_type_hints(module.sync_detailed)
        kwargs = {}
        for name, value in params.items():
            # The generator renames parameters that shadow Python names (format → format_).
            name = next((n for n in (name, name + "_", name.rstrip("_")) if n in hints), name)
            kwargs[name] = coerce(hints.get(name), value)
        if body is not None:
            kwargs["body"] = coerce(hints.get("body"), body)
        response = module.sync_detailed(client=self.client, **kwargs)
        self.calls += 1
        status = int(response.status_code)
        if status != expect:
            raise SystemExit(
                f"{operation_id}({params}): {status}, expected {expect}: {response.content[:500]!r}"
            )
        if response.parsed is None:
            raise SystemExit(f"{operation_id}: the generated client read no documented body from {status}")
        return plain(response.parsed)


def until(what, probe):
    """Polls probe() until it returns a truthy value (at most DEADLINE_S)."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.3)


def delivered(api, event_id):
    """The event's deliveries, once one of them is delivered."""
    page = api.call("list_deliveries", HTTPStatus.OK, event=event_id)
    items = page.get("items", page.get("deliveries", []))
    return items if any(d.get("status") in ("delivered", "succeeded", "completed") for d in items) else None


FORMATS = {
    "native": {"id": "evt_walkthrough_1", "type": "task.created", "data": {"taskId": "t1"}},
    "change_feed": {
        "id": "de305d54-75b4-431b-adb2-eb6b9e546014",
        "entity_type": "UserProfile",
        "entity_id": "9b9a67cf",
        "change_type": "updated",
        "published_at": "2025-10-19T01:23:46Z",
        "payload": {
            "actor": "user:ops-001",
            "before": {"status": "active"},
            "after": {"status": "active"},
            "diff": {},
            "recorded_at": "2025-10-19T01:23:45Z",
        },
    },
    "domain_event": {
        "eventId": "0b6f3c1e",
        "schemaVersion": 1,
        "eventType": "RecordUpdated",
        "occurredAt": "2026-01-10T12:34:56.789Z",
        "tenantId": "acme",
        "producer": {"service": "core-platform", "instanceId": "pod-xyz"},
        "correlationId": "c-1",
        "sequence": {"partitionKey": "Opportunity:acme:r1", "recordVersion": "2026-01-10T12:34:56.789Z"},
        "payload": {},
    },
    "contract": {
        "eventId": "evt_task_failed_001",
        "eventType": "task.failed",
        "version": 1,
        "occurredAt": "2026-02-19T10:10:00Z",
        "traceId": "req_abcd",
        "producer": "worker-orchestrator",
        "idempotencyKey": "task:tsk_3001:attempt:2:failed",
        "riskFlags": [],
        "payload": {"taskId": "tsk_3001"},
    },
}


def fresh_ids(formats):
    """The envelopes with ids of this run: the same serve may have taken the
    documented examples (schemathesis posts them), and a second post of an
    id is a duplicate."""
    out = {k: dict(v) for k, v in formats.items()}
    out["native"]["id"] = f"evt_walkthrough_{uuid.uuid4().hex}"
    out["change_feed"]["id"] = str(uuid.uuid4())
    out["domain_event"]["eventId"] = str(uuid.uuid4())
    out["contract"]["eventId"] = f"evt_task_failed_{uuid.uuid4().hex}"
    out["contract"]["idempotencyKey"] = f"task:tsk_3001:attempt:2:failed:{uuid.uuid4().hex}"
    return out


# This run's own event types, so state left by an earlier step (the fuzzer registers catalog
# entries, such as the spec's example `order.created`) cannot change what this one expects.
RUN = f"walkthrough{uuid.uuid4().hex[:8]}"


def main():
    args = argparse.ArgumentParser()
    args.add_argument("--url", required=True)
    args.add_argument("--key", required=True)
    args.add_argument("--receiver", required=True)
    args.add_argument("--failing", required=True)
    a = args.parse_args()
    api = Api(a.url, a.key)
    started = time.monotonic()

    sub = api.call(
        "create_subscription", HTTPStatus.CREATED, body={"callback_url": a.receiver, "event_types": ["*"]}
    )
    assert sub["secret"].startswith("whsec_"), "the new subscription's secret is shown once"
    until("the subscription's verification", lambda: api.call("get_subscription", 200, subscription=sub["id"])["verified"])
    listed = api.call("list_subscriptions", HTTPStatus.OK)
    assert any(s["id"] == sub["id"] for s in listed["items"]), "the subscription is listed"
    print(f"walkthrough: subscription {sub['id']} verified")

    for fmt, envelope in fresh_ids(FORMATS).items():
        accepted = api.call("post_event", HTTPStatus.ACCEPTED, body=envelope, format_=fmt)
        event_id = accepted["event_id"]
        assert accepted["duplicate"] is False, f"{fmt}: a first post is not a duplicate: {accepted}"
        again = api.call("post_event", HTTPStatus.ACCEPTED, body=envelope, format_=fmt)
        assert again["duplicate"] is True and again["event_id"] == event_id, f"{fmt}: posting again is a duplicate"
        api.call("get_event", HTTPStatus.OK, event=event_id)
        until(f"the {fmt} event's delivery", lambda: delivered(api, event_id))
        print(f"walkthrough: {fmt} event {event_id} delivered")

    failing = api.call(
        "create_subscription",
        HTTPStatus.CREATED,
        body={
            "callback_url": a.failing,
            "event_types": [f"{RUN}.*"],
            "retry_policy": {"schedule_ms": [100]},
            "dead_letter_on": [500],
        },
    )

    def open_dead_letter():
        page = api.call("list_dead_letters", HTTPStatus.OK, subscription_id=failing["id"], state="open")
        return page["items"][0] if page["items"] else None

    # The failing receiver (`hookline listen --status 500`) answers the handshake, then 500 to every
    # delivery. Verification runs after the create answers, and an event routed before it is done
    # skips the unverified subscription: wait for it (a loaded CI machine took longer than the post).
    until(
        "the failing subscription's verification",
        lambda: api.call("get_subscription", 200, subscription=failing["id"])["verified"],
    )
    api.call("post_event", HTTPStatus.ACCEPTED, body={"type": f"{RUN}.created", "data": {"n": 1}}, format_="native")
    dead = until("a dead letter", open_dead_letter)
    api.call("get_dead_letter", HTTPStatus.OK, dead_letter=dead["id"])
    api.call("requeue_dead_letter", HTTPStatus.ACCEPTED, body={"reason": "walk-through: requeue one"}, dead_letter=dead["id"])
    print(f"walkthrough: dead letter {dead['id']} requeued")

    # The requeued delivery fails again: a new dead letter, requeued by a bulk job.
    again = until("the requeued delivery's dead letter", lambda: (d := open_dead_letter()) and d["id"] != dead["id"] and d)
    job = api.call(
        "requeue_dead_letters",
        HTTPStatus.ACCEPTED,
        body={"filter": {"subscription_id": failing["id"]}, "reason": "walk-through: bulk requeue"},
    )
    final = until(
        "the bulk job to finish",
        lambda: (j := api.call("get_job", HTTPStatus.OK, job=job["job_id"]))["state"] in ("completed", "failed")
        and j,
    )
    assert final["done"] >= 1, f"the job requeued the dead letter {again['id']}: {final}"
    print(f"walkthrough: bulk job {job['job_id']} {final['state']}: {final['done']} done")

    # The event catalog: a registered type's events are checked against its schema, and a new
    # registration of the same version may only add optional properties.
    entry = {"name": f"{RUN}.paid", "version": 1, "description": "walk-through",
             "schema": {"type": "object", "required": ["amount"], "properties": {"amount": {"type": "number"}}},
             "example": {"amount": 1}}
    api.call("register_event_type", HTTPStatus.CREATED, body=entry)
    api.call("post_event", HTTPStatus.ACCEPTED, body={"type": f"{RUN}.paid", "data": {"amount": 3}}, format_="native")
    refused = api.call("post_event", 422, body={"type": f"{RUN}.paid", "data": {"amount": "3"}}, format_="native")
    assert refused["error"]["field"] == "data.amount", f"the invalid event names its path: {refused}"
    breaking = dict(entry, schema={"type": "object", "required": ["amount", "currency"],
                                   "properties": {"amount": {"type": "number"}, "currency": {"type": "string"}}})
    api.call("register_event_type", 422, body=breaking)
    print(f"walkthrough: event type {RUN}.paid registered; an invalid event and a breaking change refused")
    print(f"walkthrough: passed ({api.calls} calls through the generated client, {time.monotonic() - started:.1f} s)")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        sys.exit(f"walkthrough: {e}")
