"""Fixtures of the browser tests: a real `hookline serve --dev` (the
failpoints debug binary `make test` builds) on a free port in a temporary
directory, a real receiver (a small HTTP server that answers the
verification challenge and then 200 or 500, as the test sets it), and the
system's Chromium driven by Playwright for Python (never a browser of
Playwright's own: `executable_path`), with a new empty profile per test.

Environment: HOOKLINE_BIN (default: the debug build in CARGO_TARGET_DIR or
target/), CHROMIUM (default /usr/bin/chromium), HOOKLINE_SCREENSHOTS=1 to
write the screenshots to docs/screenshots/ (else to the test's temporary
directory: they are taken either way).
"""

import json
import os
import socket
import stat
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
LAUNCH_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
ADMIN_KEY = "hlk_browser_admin_" + os.urandom(12).hex()
READER_KEY = "hlk_browser_reader_" + os.urandom(12).hex()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answer(handler, status, content_type, body):
    """Writes one HTTP answer from a test server's request handler."""
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


class Receiver:
    """A webhook receiver: answers the verification challenge, then each
    delivery with `status` (200 or 500); records what it received."""

    def __init__(self):
        self.status = 200
        self.received = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    doc = json.loads(body)
                except ValueError:
                    doc = None
                if isinstance(doc, dict) and doc.get("type") == "hookline.verification":
                    out, status = json.dumps({"challenge": doc["challenge"]}).encode(), 200
                else:
                    receiver.received.append((self.path, doc))
                    status = receiver.status
                    out = b'{"ok":true}' if status < 300 else b'{"error":"receiver is down for the test"}'
                answer(self, status, "application/json", out)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"


class FakeSqs:
    """Where `hookline serve` sends SQS messages in these tests
    (AWS_ENDPOINT_URL_SQS): answers every SendMessage with 200 and keeps
    the request bodies, so a test reads the verification message a queue
    would have received (the AWS suites use the emulator's real SQS)."""

    def __init__(self):
        self.sent = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                assert self.headers.get("X-Amz-Target") == "AmazonSQS.SendMessage"
                assert self.headers.get("Authorization", "").startswith("AWS4-HMAC-SHA256 ")
                fake.sent.append(json.loads(body))
                answer(self, 200, "application/x-amz-json-1.0", json.dumps({"MessageId": f"m{len(fake.sent)}"}).encode())

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


class Hookline:
    """A running `hookline serve --dev` and a small client of its API."""

    def __init__(self, work, sqs=None):
        binary = os.environ.get("HOOKLINE_BIN") or str(
            Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "debug" / "hookline")
        if not os.access(binary, os.X_OK):
            pytest.exit(f"browser tests: no hookline binary at {binary} (make build)", returncode=2)
        keys = work / "keys.json"
        keys.write_text(json.dumps([{"name": "reader", "role": "reader", "secret": READER_KEY}]))
        keys.chmod(stat.S_IRUSR | stat.S_IWUSR)
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = open(work / "serve.log", "wb")
        env = {**os.environ, "HOOKLINE_API_KEY": ADMIN_KEY}
        if sqs is not None:
            # Queue destinations go to the fake SQS, signed with test keys.
            env.update({"AWS_ENDPOINT_URL_SQS": sqs.url, "AWS_ACCESS_KEY_ID": "AKIDBROWSERTEST",
                        "AWS_SECRET_ACCESS_KEY": "browser-test-secret"})
        self.proc = subprocess.Popen(
            [binary, "serve", "--dev", "--listen", f"127.0.0.1:{self.port}", "--db", str(work / "hookline.db"),
             "--api-keys-file", str(keys)],
            stdout=self.log, stderr=subprocess.STDOUT, env=env)
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                urllib.request.urlopen(self.base + "/healthz", timeout=1)
                return
            except OSError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.1)
        self.stop()
        pytest.exit("browser tests: hookline serve did not start:\n" + (work / "serve.log").read_text(), returncode=2)

    def call(self, method, path, body=None, key=ADMIN_KEY):
        """One API request; returns (status, JSON body)."""
        req = urllib.request.Request(self.base + path, method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def ok(self, method, path, body=None):
        status, doc = self.call(method, path, body)
        assert 200 <= status < 300, f"{method} {path} → {status} {doc}"
        return doc

    def wait(self, what, check, timeout=20):
        """Polls `check()` until it returns something truthy."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            got = check()
            if got:
                return got
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what}")

    def subscription(self, receiver, path, **extra):
        """A verified subscription to `receiver` at `path`."""
        sub = self.ok("POST", "/v1/subscriptions", {"callback_url": receiver.url(path), **extra})
        self.wait("verification", lambda: self.ok("GET", f"/v1/subscriptions/{sub['id']}")["verified"])
        return sub

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()


@pytest.fixture(scope="session")
def work():
    with tempfile.TemporaryDirectory(prefix="hookline-browser-") as d:
        yield Path(d)


@pytest.fixture(scope="session")
def sqs():
    f = FakeSqs()
    yield f
    f.server.shutdown()


@pytest.fixture(scope="session")
def hookline(work, sqs):
    h = Hookline(work, sqs)
    yield h
    h.stop()
    log = (work / "serve.log").read_text(errors="replace")
    assert "panicked" not in log, log[-4000:]


@pytest.fixture(scope="session")
def receiver():
    r = Receiver()
    yield r
    r.server.shutdown()


@pytest.fixture(scope="session")
def playwright():
    with sync_playwright() as p:
        yield p


@pytest.fixture
def page(playwright, work, request):
    """A page of a new Chromium with an empty profile, 1280×800; fails the
    test on any uncaught script error of the page."""
    profile = tempfile.mkdtemp(prefix="profile-", dir=work)
    ctx = playwright.chromium.launch_persistent_context(
        profile, executable_path=CHROMIUM, args=LAUNCH_ARGS, headless=True,
        viewport={"width": 1280, "height": 800}, timezone_id="Europe/Berlin", locale="en-GB")
    ctx.set_default_timeout(15000)
    p = ctx.pages[0] if ctx.pages else ctx.new_page()
    errors = []
    p.on("pageerror", lambda e: errors.append(str(e)))
    yield p
    ctx.close()
    assert not errors, f"script errors on the page: {errors}"


def shot(page, name):
    """A screenshot of the page: docs/screenshots/<name>.png with
    HOOKLINE_SCREENSHOTS=1, else into the temporary directory."""
    if os.environ.get("HOOKLINE_SCREENSHOTS") == "1":
        out = ROOT / "docs" / "screenshots"
    else:
        out = Path(tempfile.gettempdir()) / "hookline-browser-screenshots"
    out.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(out / f"{name}.png"), full_page=False)


def sign_in(page, hookline, key=ADMIN_KEY):
    """Opens the console and signs in with `key`."""
    page.goto(hookline.base + "/ui/")
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Subscriptions").wait_for()


def menu(page, name):
    """Follows the main menu's link `name` and waits for its page (whose
    heading is the link's text)."""
    page.get_by_role("navigation", name="Main").get_by_role("link", name=name, exact=True).click()
    page.locator("main h1").filter(has_text=name).wait_for()
