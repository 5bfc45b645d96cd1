"""The tests' AWS emulator: moto server, with isolated transactions.

DynamoDB runs a TransactWriteItems in isolation. Moto's threaded server does
not: a transaction that is cancelled restores a copy of its tables taken
when it began, undoing whatever another transaction wrote to them
meanwhile. So the transactions on one table are served one at a time here,
in the order they arrive (a first-come lock per table, a transaction taking
its tables' locks in name order). Everything else stays as moto serves it,
concurrent: single-item writes, reads, stream reads, the other services,
and transactions on other tables (every test has its own). Serializing
every write as well was tried and dropped: a long transaction then held up
the single-item writes behind it, and a latency-bound scenario (a hung
subscription beside a healthy one) stalled past its bound under load.

Started by infra/emulator.sh with moto_server's own arguments.
"""

import collections
import io
import json
import threading

from moto import server
from moto.moto_server.werkzeug_app import DomainDispatcherApplication

_PREFIX = "DynamoDB_20120810."
_ISOLATED = {"TransactWriteItems"}


class _FirstCome:
    """A lock taken in the order it was asked for (Python's own lets one
    thread take it again and again while others starve)."""

    def __init__(self):
        self._cond = threading.Condition()
        self._queue = collections.deque()
        self._held = False

    def acquire(self):
        me = object()
        with self._cond:
            self._queue.append(me)
            while self._held or self._queue[0] is not me:
                self._cond.wait()
            self._queue.popleft()
            self._held = True

    def release(self):
        with self._cond:
            self._held = False
            self._cond.notify_all()


_LOCKS = {}
_LOCKS_GUARD = threading.Lock()


def _lock(table):
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(table, _FirstCome())


def _tables(body):
    """The tables a transaction writes to."""
    return {
        action["TableName"]
        for item in body.get("TransactItems", [])
        for action in item.values()
        if isinstance(action, dict) and "TableName" in action
    }


_dispatch = DomainDispatcherApplication.__call__


def _isolated(self, environ, start_response):
    target = environ.get("HTTP_X_AMZ_TARGET", "")
    op = target[len(_PREFIX):] if target.startswith(_PREFIX) else ""
    if op not in _ISOLATED:
        return _dispatch(self, environ, start_response)
    length = int(environ.get("CONTENT_LENGTH") or 0)
    raw = environ["wsgi.input"].read(length) if length else b""
    environ["wsgi.input"] = io.BytesIO(raw)
    try:
        tables = sorted(_tables(json.loads(raw or b"{}")))
    except (ValueError, TypeError, AttributeError):
        tables = []  # moto answers the malformed request itself
    locks = [_lock(t) for t in tables]
    for lock in locks:
        lock.acquire()
    try:
        return _dispatch(self, environ, start_response)
    finally:
        for lock in reversed(locks):
            lock.release()


DomainDispatcherApplication.__call__ = _isolated

if __name__ == "__main__":
    server.main()
