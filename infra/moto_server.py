"""The tests' AWS emulator: moto server, with isolated transactions.

DynamoDB runs a TransactWriteItems in isolation. Moto's threaded server does
not:
- it deep-copies the tables a transaction writes before applying it, and a
  single-item write to one of them at that moment fails the copy
  ("dictionary changed size during iteration": a 500) or, during the
  apply, cancels the transaction;
- a cancelled transaction restores those copies, undoing whatever a
  single-item write did to the tables meanwhile;
- the stream record of a transaction's first action is readable before
  the transaction ends, and stays readable through the iterators taken on
  the stream before a cancellation restored the table; the restored stream
  then gives the record's sequence number to the next record appended.
  A poller that read the cancelled record passes the one that took its
  number: an event stored and never routed (seen 2026-11-29 in the cost
  meter's ordered scenario, 1 run in 3).

So each table has a lock here: a transaction holds it exclusively for the
tables it writes (taken in name order, transactions in the order they
arrive), while single-table requests (GetItem, PutItem, UpdateItem,
DeleteItem, Query, Scan, BatchGetItem, BatchWriteItem) and stream reads
share it, concurrently with each other. A transaction waiting holds back
new shared holders, so none starves. A stream read also reads the table's
current stream, so an iterator taken before a restore reads what the
table now holds. Everything else stays as moto serves it: the other
services, and tables no transaction writes. Serializing every write was
tried and dropped: a long transaction then held up the single-item writes
behind it, and a latency-bound scenario (a hung subscription beside a
healthy one) stalled past its bound under load; a shared lock waits only
for the transactions on its own table.

Started by infra/emulator.sh with moto_server's own arguments.
"""
import collections
import io
import json
import threading

from moto import server
from moto.dynamodbstreams.models import ShardIterator
from moto.moto_server.werkzeug_app import DomainDispatcherApplication

_PREFIX = "DynamoDB_20120810."


class _TableLock:
    """Shared by single-table requests and stream reads, exclusive for a
    transaction. Transactions take it in the order they ask (Python's own
    lock lets one thread take it again and again while others starve), and
    one waiting holds back new shared holders."""

    def __init__(self):
        self._cond = threading.Condition()
        self._shared = 0
        self._exclusive = False
        self._waiting = collections.deque()

    def acquire(self):
        me = object()
        with self._cond:
            self._waiting.append(me)
            while self._exclusive or self._shared or self._waiting[0] is not me:
                self._cond.wait()
            self._waiting.popleft()
            self._exclusive = True

    def release(self):
        with self._cond:
            self._exclusive = False
            self._cond.notify_all()

    def acquire_shared(self):
        with self._cond:
            while self._exclusive or self._waiting:
                self._cond.wait()
            self._shared += 1

    def release_shared(self):
        with self._cond:
            self._shared -= 1
            if not self._shared:
                self._cond.notify_all()


_LOCKS = {}
_LOCKS_GUARD = threading.Lock()


def _lock(table):
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(table, _TableLock())


_ISOLATED = {"TransactWriteItems"}
_SHARED = {"GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan", "BatchGetItem", "BatchWriteItem"}


def _tables(op, body):
    """The tables a request names: the ones a transaction writes, or a
    single-table request's (a batch's several)."""
    if op in _ISOLATED:
        return {
            action["TableName"]
            for item in body.get("TransactItems", [])
            for action in item.values()
            if isinstance(action, dict) and "TableName" in action
        }
    if op in ("BatchGetItem", "BatchWriteItem"):
        return set(body.get("RequestItems", {}))
    return {body["TableName"]} if isinstance(body.get("TableName"), str) else set()


_dispatch = DomainDispatcherApplication.__call__


def _isolated(self, environ, start_response):
    target = environ.get("HTTP_X_AMZ_TARGET", "")
    op = target[len(_PREFIX):] if target.startswith(_PREFIX) else ""
    if op not in _ISOLATED and op not in _SHARED:
        return _dispatch(self, environ, start_response)
    length = int(environ.get("CONTENT_LENGTH") or 0)
    raw = environ["wsgi.input"].read(length) if length else b""
    environ["wsgi.input"] = io.BytesIO(raw)
    try:
        tables = sorted(_tables(op, json.loads(raw or b"{}")))
    except (ValueError, TypeError, AttributeError):
        tables = []  # moto answers the malformed request itself
    locks = [_lock(t) for t in tables]
    exclusive = op in _ISOLATED
    for lock in locks:
        lock.acquire() if exclusive else lock.acquire_shared()
    try:
        return _dispatch(self, environ, start_response)
    finally:
        for lock in reversed(locks):
            lock.release() if exclusive else lock.release_shared()


_read_stream = ShardIterator.get


def _read_committed(self, limit=1000):
    """A stream read: between transactions on its table, from the stream
    the table has now (a cancelled transaction's restore replaces it)."""
    name = self.stream_shard.table.name
    lock = _lock(name)
    lock.acquire_shared()
    try:
        current = self.streams_backend.dynamodb.tables.get(name)
        if current is not None and current.stream_shard is not None:
            self.stream_shard = current.stream_shard
        return _read_stream(self, limit)
    finally:
        lock.release_shared()


ShardIterator.get = _read_committed
DomainDispatcherApplication.__call__ = _isolated

if __name__ == "__main__":
    server.main()
