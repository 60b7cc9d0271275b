"""Tests of the compact_host_client package as pip installs it, against a
live `compact-host serve` (and a live `compact-host proxy` for the admin
side), started here on free loopback ports. The binary is
$COMPACT_HOST_BIN, or built with `go build` from the repository into a
temporary directory.

    cd clients/python && python3 -m unittest -v test_compact_host_client.py

setUpModule installs the package into a new virtual environment the way
README.md says for a machine without a package index:

    python3 -m venv --system-site-packages VENV
    VENV/bin/pip install --no-build-isolation ./clients/python

with the first Python that has setuptools (>= 61) and wheel to build it
(this one, else Debian's /usr/bin/python3 with python3-setuptools and
python3-wheel), then imports compact_host_client by name from there,
never from src/.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import os
import queue
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
TOKEN = "t0ken-for-the-tests"
# Hang guards, not speed requirements: a cold start compiles the built-in
# plugins, and CI machines are shared.
BUILD_TIMEOUT = 900
START_TIMEOUT = 180
STOP_TIMEOUT = 30
INSTALL_TIMEOUT = 600

# What builds the package with no index: setuptools 61 reads pyproject.toml;
# before 70.1 its bdist_wheel comes from the wheel package.
_CAN_BUILD = (
    "import setuptools, sys\n"
    "v = tuple(int(x) for x in setuptools.__version__.split('.')[:2])\n"
    "if v < (70, 1):\n"
    "    import wheel\n"
    "sys.exit(0 if v >= (61, 0) else 1)\n"
)


def _builder() -> str:
    """The first Python that can build the package without an index."""
    tried = []
    for python in dict.fromkeys([sys.executable, "/usr/bin/python3"]):
        if not os.path.exists(python):
            continue
        r = subprocess.run([python, "-c", _CAN_BUILD], capture_output=True, text=True, timeout=60)
        if r.returncode == 0:
            return python
        tried.append(f"{python}: {(r.stderr.strip().splitlines() or ['setuptools older than 61'])[-1]}")
    why = (
        "no Python here can build the package without a package index (it needs setuptools >= 61 and wheel): "
        "apt-get install -y python3-venv python3-setuptools python3-wheel; tried " + "; ".join(tried)
    )
    # As the project's other tests of a program the machine may lack:
    # a skip that says what to install, and a failure under CI, which
    # installs it.
    if os.environ.get("CI") == "true":
        raise RuntimeError(why)
    raise unittest.SkipTest(why)


def install(work: str):
    """Installs the package into a new venv under work as README.md says,
    and returns it imported by name from there."""
    # A copy of the package as git has it: pip builds in the source tree,
    # and setuptools would leave build/ and *.egg-info in the checkout.
    source = os.path.join(work, "clients", "python")
    shutil.copytree(HERE, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "test_*.py"))
    venv = os.path.join(work, "venv")
    subprocess.run([_builder(), "-m", "venv", "--system-site-packages", venv], check=True, timeout=INSTALL_TIMEOUT)
    python = os.path.join(venv, "bin", "python")
    r = subprocess.run(
        [python, "-m", "pip", "install", "--no-build-isolation", "--no-input", source],
        capture_output=True, text=True, timeout=INSTALL_TIMEOUT,
    )
    if r.returncode != 0:
        raise RuntimeError(f"pip install --no-build-isolation {source} failed:\n{r.stdout}\n{r.stderr}")
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True, capture_output=True, text=True, timeout=60,
    ).stdout.strip()
    sys.path.insert(0, purelib)
    importlib.invalidate_caches()
    module = importlib.import_module("compact_host_client")
    return module, purelib


class Daemon:
    """A compact-host process that prints its address on stderr."""

    def __init__(self, args, env, pattern):
        self.proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.lines: "queue.Queue[str]" = queue.Queue()
        self.log: list = []
        threading.Thread(target=self._pump, daemon=True).start()
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.stop()
                raise RuntimeError(f"{args[1]} did not start within {START_TIMEOUT}s:\n" + "".join(self.log))
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                raise RuntimeError(f"{args[1]} exited with {self.proc.wait()}:\n" + "".join(self.log))
            m = re.search(pattern, line)
            if m:
                self.url = "http://" + m.group(1)
                return

    def _pump(self):
        for line in self.proc.stderr:
            self.log.append(line)
            self.lines.put(line)
        self.lines.put(None)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=STOP_TIMEOUT)


def setUpModule():
    global WORK
    WORK = tempfile.mkdtemp(prefix="compact-host-python-")
    try:
        _start()
    except BaseException:
        # tearDownModule does not run after a failed setUpModule.
        tearDownModule()
        raise


def _start():
    global SERVE, PROXY, SITE, chc, Client, CompactHostError, CompactOptions, EngineOptions, ProxyAdmin, parse_metrics, SMALL
    chc, SITE = install(WORK)
    Client, CompactHostError, ProxyAdmin, parse_metrics = chc.Client, chc.CompactHostError, chc.ProxyAdmin, chc.parse_metrics
    CompactOptions, EngineOptions = chc.CompactOptions, chc.EngineOptions
    # The window the sessions below overflow: about 11,000 tokens of results.
    SMALL = CompactOptions(context_window=14000, keep_recent_tokens=2000)
    binary = os.environ.get("COMPACT_HOST_BIN")
    if not binary:
        binary = os.path.join(WORK, "compact-host")
        subprocess.run(
            ["go", "build", "-o", binary, "./cmd/compact-host"], cwd=REPO, check=True, timeout=BUILD_TIMEOUT
        )
    # A home of its own: no user config, no API key (so summaries are
    # written offline), a compilation cache that starts empty.
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": WORK,
        "XDG_CONFIG_HOME": os.path.join(WORK, "config"),
        "XDG_CACHE_HOME": os.path.join(WORK, "cache"),
        "COMPACT_HOST_TEST_TOKEN": TOKEN,
    }
    SERVE = Daemon(
        [binary, "serve", "--addr", "127.0.0.1:0", "--token-env", "COMPACT_HOST_TEST_TOKEN"],
        env,
        r"serving on http://(\S+)",
    )
    PROXY = Daemon(
        [binary, "proxy", "--listen", "127.0.0.1:0", "--upstream", "http://127.0.0.1:9", "--offline",
         "--store", "memory"],
        env,
        r"proxying http://(\S+) to",
    )


def tearDownModule():
    for d in ("PROXY", "SERVE"):
        if d in globals():
            globals()[d].stop()
    shutil.rmtree(WORK, ignore_errors=True)


def filler(tag: str, tokens: int) -> str:
    out = []
    n = 0
    while n < tokens * 4:
        line = f"{tag} line {n} of output\n"
        out.append(line)
        n += len(line)
    return "".join(out)


def coding_session(seed: int, turns: int = 8, result_tokens: int = 600) -> list:
    """A coding agent's session in canonical form: a pinned system prompt,
    then turns of a request, tool calls and their results."""
    msgs = [{"role": "system", "pinned": True,
             "content": [{"type": "text", "text": "You are a careful coding agent. Run the tests before you say you are done."}]}]
    for turn in range(turns):
        msgs.append({"role": "user", "content": [
            {"type": "text", "text": f"session {seed} turn {turn}: fix the failing test in pkg{turn}/handler_test.go"}]})
        for step in range(2):
            a, b = f"s{seed}_t{turn}_{step}_read", f"s{seed}_t{turn}_{step}_edit"
            msgs.append({"role": "assistant", "content": [
                {"type": "text", "text": "Let me look at the code first."},
                {"type": "tool_use", "id": a, "name": "Read", "input": {"file_path": f"pkg{turn}/file{step}.go"}},
                {"type": "tool_use", "id": b, "name": "Edit",
                 "input": {"file_path": f"pkg{turn}/edit{step}.go", "old_string": "x", "new_string": "y"}},
            ]})
            msgs.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": a, "text": filler(f"s{seed}-read-{turn}-{step}", result_tokens)},
                {"type": "tool_result", "tool_use_id": b, "text": "The file was edited."},
            ]})
        msgs.append({"role": "assistant", "content": [
            {"type": "text", "text": f"Turn {turn} is done: the test passes now because the handler checks the nil case."}]})
    return msgs



class PackageTest(unittest.TestCase):
    def test_imported_from_the_install(self):
        self.assertEqual(os.path.dirname(chc.__file__), os.path.join(SITE, "compact_host_client"))
        self.assertFalse(chc.__file__.startswith(HERE + os.sep), "imported from the source tree")

    def test_metadata(self):
        dist = importlib.metadata.distribution("compact-host-client")
        self.assertEqual(os.path.realpath(str(dist.locate_file(""))), os.path.realpath(SITE))
        self.assertEqual(dist.metadata["License"], "Apache-2.0")
        self.assertEqual(dist.requires, None, "standard library only")
        files = {str(f) for f in dist.files if not str(f).startswith(("compact_host_client-", "../", "__pycache__"))}
        files = {f for f in files if "__pycache__" not in f}
        self.assertEqual(files, {"compact_host_client/__init__.py", "compact_host_client/py.typed"})

    def test_readme_documents_every_call_and_error_code(self):
        # The README the package carries (its long description), against
        # the live server's own list of error codes.
        readme = importlib.metadata.distribution("compact-host-client").metadata.get_payload()
        self.assertIn("# compact-host-client (Python)", readme)
        for cls in (chc.Client, chc.ProxyAdmin):
            for name in (n for n in dir(cls) if not n.startswith("_")):
                self.assertTrue(f"`{name}(" in readme, f"README.md does not document {cls.__name__}.{name}")
        self.assertTrue("`parse_metrics(" in readme, "README.md does not document parse_metrics")
        codes = Client(SERVE.url).openapi()["components"]["schemas"]["ErrorCode"]["enum"]
        for code in codes + ["unreachable", "bad_response"]:
            self.assertTrue(f"| `{code}` |" in readme, f"README.md's error table lacks {code}")

    def test_public_names(self):
        for name in chc.__all__:
            self.assertTrue(hasattr(chc, name), name)
        self.assertIn("parse_metrics", chc.__all__)


class ServiceTest(unittest.TestCase):
    def setUp(self):
        self.client = Client(SERVE.url, token=TOKEN, timeout=120)

    def test_health_needs_no_token(self):
        h = Client(SERVE.url).health()
        self.assertEqual(h["status"], "ok")
        self.assertRegex(h["abi"], r"^v\d+\.\d+$")
        self.assertGreater(h["plugins"], 0)

    def test_wrong_token_is_unauthorized(self):
        for token in (None, "wrong"):
            with self.assertRaises(CompactHostError) as cm:
                Client(SERVE.url, token=token).plugins()
            self.assertEqual(cm.exception.code, "unauthorized")
            self.assertEqual(cm.exception.status, 401)
            self.assertFalse(cm.exception.retryable)

    def test_plugins(self):
        p = self.client.plugins()
        names = {x["name"]: x for x in p["plugins"]}
        self.assertIn("structured", names)
        self.assertTrue(names["structured"]["loaded"])
        self.assertIn("strategy", names["structured"]["kinds"])

    def test_openapi_documents_what_the_client_calls(self):
        doc = self.client.openapi()
        self.assertTrue(doc["openapi"].startswith("3.1."))
        for path, method in [("/healthz", "get"), ("/openapi.json", "get"), ("/v1/plugins", "get"),
                             ("/v1/compact", "post"), ("/v1/check", "post"), ("/v1/truncate", "post"),
                             ("/_compact-host/metrics", "get"), ("/_compact-host/healthz", "get")]:
            self.assertIn(method, doc["paths"].get(path, {}), f"{method.upper()} {path}")
        codes = set(doc["components"]["schemas"]["ErrorCode"]["enum"])
        self.assertTrue({"busy", "timeout"} <= codes, "the retryable codes are the API's")

    def test_compact_returns_canonical_messages_to_send(self):
        session = coding_session(1)
        got = self.client.compact(session, options=SMALL)
        rep = got["report"]
        self.assertEqual(rep["action"], "compacted")
        self.assertEqual(rep["output_format"], "canonical")
        self.assertLess(rep["tokens_after"], rep["tokens_before"])
        self.assertTrue(rep["offline"], "no model configured")
        msgs = got["messages"]
        self.assertIsInstance(msgs, list)
        self.assertEqual(len(msgs), rep["messages_kept"])
        self.assertLess(len(msgs), len(session))
        self.assertEqual(msgs[0]["role"], "system", "the pinned system prompt is kept")
        self.assertTrue(any(m.get("summary") for m in msgs), "a summary stands for the folded history")
        self.assertIn("Turn 7 is done", json.dumps(msgs), "the newest reply is kept verbatim")
        self.assertIsInstance(got["session"], str, "the session log is still returned")
        self.assertNotIn("system", got)

        # The messages are a session the server takes back as they are.
        again = self.client.check(msgs, options=EngineOptions(context_window=14000))
        self.assertEqual(again["messages"], len(msgs))
        self.assertTrue(again["fits"])
        plan = self.client.compact(session, options=CompactOptions(context_window=14000, dry_run=True))
        self.assertEqual(plan["report"]["action"], "plan")
        self.assertNotIn("messages", plan, "a dry run returns no messages")

    def test_compact_to_anthropic_splits_the_system_prompt(self):
        got = self.client.compact(coding_session(2), output_format="anthropic", options=SMALL)
        self.assertEqual(got["report"]["output_format"], "anthropic")
        self.assertIn("careful coding agent", json.dumps(got["system"]))
        self.assertEqual(got["messages"], got["session"]["messages"])
        self.assertEqual({m["role"] for m in got["messages"]}, {"user", "assistant"})
        self.assertEqual(got["messages"][0]["role"], "user")

    def test_compact_to_openai(self):
        got = self.client.compact(coding_session(3), output_format="openai", options=SMALL)
        msgs = got["messages"]
        self.assertEqual(msgs[0]["role"], "system")
        self.assertIn("tool", {m["role"] for m in msgs}, "tool results are messages of role tool")
        self.assertNotIn("system", got)

    def test_compact_under_the_threshold_does_nothing(self):
        session = coding_session(4, turns=2, result_tokens=50)
        got = self.client.compact(session, options=CompactOptions(context_window=14000, threshold=0.9))
        self.assertEqual(got["report"]["action"], "none")
        self.assertEqual(len(got["messages"]), len(session))

    def test_check_measures_then_applies(self):
        session = coding_session(5)
        measured = self.client.check(session, options=EngineOptions(context_window=14000), tool_schema_tokens=300)
        self.assertEqual(measured["overhead"], 300)
        self.assertEqual(measured["total"], measured["tokens"] + 300)
        self.assertIn(measured["action"], ("prune", "compact", "emergency"))
        self.assertNotIn("context", measured)

        applied = self.client.check(session, output_format="openai", options=EngineOptions(context_window=14000),
                                    tool_schema_tokens=300, apply=True)
        self.assertIn(applied["decision"]["action"], ("pruned", "compacted", "emergency"))
        self.assertTrue(applied["fits"])
        self.assertEqual(applied["context"]["messages"], applied["session"]["messages"])

    def test_truncate(self):
        content = filler("build", 4000)
        got = self.client.truncate(content, tool="Bash", max_tokens=300)
        self.assertTrue(got["truncated"])
        self.assertLessEqual(got["tokens_after"], 300)
        self.assertEqual(got["bytes_before"], len(content.encode()))
        self.assertLess(len(got["content"]), len(content))

    def test_api_errors_carry_code_and_line(self):
        with self.assertRaises(CompactHostError) as cm:
            self.client.compact('{"role":"user","content":[]}\nnot json\n', format="canonical")
        e = cm.exception
        self.assertEqual((e.status, e.code), (400, "bad_session"))
        self.assertEqual(e.line, 2)
        self.assertFalse(e.retryable)

        with self.assertRaises(CompactHostError) as cm:
            self.client.compact(coding_session(6), options=CompactOptions(strategy="no-such-strategy"))
        self.assertEqual(cm.exception.code, "unknown_strategy")
        self.assertIn("no-such-strategy", cm.exception.message)

        with self.assertRaises(CompactHostError) as cm:
            self.client.check(coding_session(6), format="word")
        self.assertEqual(cm.exception.code, "unknown_format")


class SessionTest(unittest.TestCase):
    def setUp(self):
        self.client = Client(SERVE.url, token=TOKEN, timeout=120)

    def test_kept_session_compacts_as_it_grows(self):
        msgs = coding_session(7)
        created = self.client.put_session("py-chat-1", msgs[:4], options=CompactOptions(context_window=14000))
        self.assertTrue(created["created"])
        self.assertEqual(created["action"], "none")
        revision = created["revision"]
        # The agent sends each turn's new messages only.
        actions = []
        reports = 0
        at = 4
        while at < len(msgs):
            end = at + 1
            while end < len(msgs) and msgs[end]["role"] != "assistant":
                end += 1
            # The client reports each call's usage on its reply.
            batch = [dict(m) for m in msgs[at:end]]
            for m in batch:
                if m["role"] == "assistant":
                    m["usage"] = {"input_tokens": 5, "cache_write_tokens": 400, "output_tokens": 50}
                    reports += 1
            up = self.client.append_messages("py-chat-1", batch, if_revision=revision)
            self.assertEqual(up["appended"], end - at)
            self.assertGreater(up["revision"], revision)
            revision = up["revision"]
            actions.append(up["action"])
            if up["action"] == "compacted":
                self.assertLess(up["report"]["tokens_after"], up["report"]["tokens_before"])
            at = end
        self.assertIn("compacted", actions, "the session crossed its threshold")

        view = self.client.get_session("py-chat-1")
        self.assertEqual(view["revision"], revision)
        self.assertEqual(view["output_format"], "canonical")
        self.assertGreaterEqual(view["compactions"], 1)
        self.assertTrue(view["summary"])
        self.assertEqual(view["messages"][0]["role"], "system")
        self.assertIn("Turn 7 is done", json.dumps(view["messages"]))
        self.assertLess(len(view["messages"]), len(msgs))
        cache = view["cache"]
        self.assertEqual(cache["requests"], reports)
        self.assertEqual(cache["misses"]["cold_start"], 1)
        self.assertEqual(cache["cache_ttl"], "5m")
        self.assertEqual(cache["cost"]["bill"]["cache_write_5m_tokens"], 400 * reports)
        self.assertEqual(len(cache["cost"]["compactions"]), view["compactions"])
        samples = self.client.metrics()
        self.assertGreaterEqual(samples['compact_host_proxy_cache_misses_total{reason="cold_start"}'], 1)

        anthropic = self.client.get_session("py-chat-1", output_format="anthropic")
        self.assertIn("careful coding agent", json.dumps(anthropic["system"]))
        self.assertEqual(anthropic["messages"][0]["role"], "user")

        with self.assertRaises(CompactHostError) as cm:
            self.client.put_session("py-chat-1", msgs[:4], if_revision=revision - 1)
        self.assertEqual((cm.exception.status, cm.exception.code), (409, "revision_conflict"))
        self.assertFalse(cm.exception.retryable, "a conflict wants a fresh read, not the same call")

        self.assertEqual(self.client.delete_session("py-chat-1"), {"id": "py-chat-1", "deleted": True})
        with self.assertRaises(CompactHostError) as cm:
            self.client.get_session("py-chat-1")
        self.assertEqual((cm.exception.status, cm.exception.code), (404, "session_not_found"))

    def test_append_to_no_session(self):
        with self.assertRaises(CompactHostError) as cm:
            self.client.append_messages("py-nobody", coding_session(8, turns=1)[1:2])
        self.assertEqual(cm.exception.code, "session_not_found")

    def test_bad_session_id(self):
        with self.assertRaises(CompactHostError) as cm:
            self.client.get_session("../etc")
        self.assertEqual(cm.exception.status, 400)


class TransportTest(unittest.TestCase):
    def test_deadline_covers_a_server_that_never_answers(self):
        # A listener that accepts and never answers: the edge the test
        # needs, since a real server answers.
        ln = socket.socket()
        ln.bind(("127.0.0.1", 0))
        ln.listen(4)
        self.addCleanup(ln.close)
        url = "http://127.0.0.1:%d" % ln.getsockname()[1]
        began = time.monotonic()
        with self.assertRaises(CompactHostError) as cm:
            Client(url, timeout=0.3).health()
        self.assertEqual(cm.exception.code, "timeout")
        self.assertTrue(cm.exception.retryable)
        self.assertLess(time.monotonic() - began, 30, "the deadline held")

    def test_unreachable(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        with self.assertRaises(CompactHostError) as cm:
            Client("http://127.0.0.1:%d" % port, timeout=10).health()
        self.assertEqual(cm.exception.code, "unreachable")
        self.assertTrue(cm.exception.retryable)

    def test_answer_over_the_size_limit(self):
        with self.assertRaises(CompactHostError) as cm:
            Client(SERVE.url, token=TOKEN, max_response_bytes=64).plugins()
        self.assertEqual(cm.exception.code, "bad_response")
        self.assertIn("max_response_bytes", cm.exception.message)

    def test_bad_arguments(self):
        for kwargs in ({"base_url": "127.0.0.1:8377"}, {"timeout": 0}, {"max_response_bytes": 0}):
            with self.assertRaises(ValueError):
                Client(**kwargs)
        with self.assertRaises(ValueError):
            Client(SERVE.url).get_session("")


class ProxyAdminTest(unittest.TestCase):
    def test_health_and_metrics(self):
        admin = ProxyAdmin(PROXY.url)
        self.assertTrue(admin.health())
        text = admin.metrics_text()
        self.assertIn("# TYPE compact_host_proxy_store_errors_total counter", text)
        m = admin.metrics()
        self.assertEqual(m["compact_host_proxy_store_errors_total"], 0)
        self.assertTrue(all(k.startswith("compact_host_proxy_") for k in m))

    def test_parse_metrics_labels(self):
        text = ('# HELP x y\ncompact_host_proxy_requests_total{action="spliced",kind="a b"} 3\n'
                "go_goroutines 7\ncompact_host_proxy_store_errors_total 0\n")
        self.assertEqual(parse_metrics(text, "compact_host_proxy_"), {
            'compact_host_proxy_requests_total{action="spliced",kind="a b"}': 3.0,
            "compact_host_proxy_store_errors_total": 0.0,
        })


if __name__ == "__main__":
    unittest.main()
