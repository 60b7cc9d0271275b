"""A client for the HTTP API of ``compact-host serve`` and the admin side of
``compact-host proxy``, on the Python standard library alone.

    from compact_host_client import Client, CompactOptions

    client = Client("http://127.0.0.1:8377", token=os.environ.get("COMPACT_HOST_TOKEN"))
    answer = client.compact(messages, output_format="anthropic",
                            options=CompactOptions(context_window=200_000))
    reply = anthropic.messages.create(model=..., system=answer.get("system"),
                                      messages=answer["messages"], ...)

Every call has a deadline (the client's ``timeout``, or the call's own) that
covers the whole exchange, connecting and reading included. Every error is
a :class:`CompactHostError` carrying the API's error ``code`` and whether a
retry can help (``retryable``). The API is described by ``GET
/openapi.json``; the answers are returned as the JSON objects the server
sends, typed with TypedDicts, so fields added by a newer server pass
through.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, TypedDict, Union

__all__ = [
    "Client",
    "ProxyAdmin",
    "CompactHostError",
    "EngineOptions",
    "CompactOptions",
    "Thresholds",
    "RETRYABLE_CODES",
    "DEFAULT_URL",
    "DEFAULT_PROXY_URL",
    "parse_metrics",
    "SessionCache",
    "SessionCost",
]

DEFAULT_URL = "http://127.0.0.1:8377"
DEFAULT_PROXY_URL = "http://127.0.0.1:8378"
DEFAULT_TIMEOUT = 300.0  # the server's own default request timeout
# The server takes bodies up to 64 MiB and answers with the session and
# its messages, so an answer may be about twice that.
DEFAULT_MAX_RESPONSE_BYTES = 256 << 20

# Codes of the API that a retry can cure: no worker was free (or a kept
# session stayed locked), the session store did not answer, or the work or
# the body outlasted its deadline. The client adds its own: "timeout" (its
# deadline passed) and "unreachable" (no connection). After
# "revision_conflict", read the session again before retrying.
RETRYABLE_CODES = frozenset({"busy", "store_unavailable", "timeout", "unreachable"})


class CompactHostError(Exception):
    """An error answer of the API, or a failure to get one.

    ``code`` is the API's error code (``bad_session``, ``busy``, ...) or
    one of the client's: ``timeout`` (the call's deadline passed),
    ``unreachable`` (no connection), ``bad_response`` (the answer is not
    the API's: not JSON, or too large). ``status`` is the HTTP status, 0
    when there was none. ``line`` and ``offset`` place a problem in the
    session when the server knows where. ``retry_after`` is the server's
    Retry-After in seconds, when it sent one.
    """

    def __init__(
        self,
        code: str,
        message: str,
        status: int = 0,
        line: Optional[int] = None,
        offset: Optional[int] = None,
        retry_after: Optional[float] = None,
    ) -> None:
        super().__init__(f"{code}: {message}" if not status else f"{status} {code}: {message}")
        self.code = code
        self.message = message
        self.status = status
        self.line = line
        self.offset = offset
        self.retry_after = retry_after

    @property
    def retryable(self) -> bool:
        """True when the same call may succeed later."""
        return self.code in RETRYABLE_CODES


# Options. None leaves a field out, so the server's setting holds.


def _drop_none(d: Dict[str, Any]) -> Dict[str, Any]:
    return {k: (_drop_none(v) if isinstance(v, dict) else v) for k, v in d.items() if v is not None}


@dataclass
class Thresholds:
    """The gate's shares of the input budget, 0 to 1."""

    prune: Optional[float] = None
    compact: Optional[float] = None
    overhead_reserve: Optional[float] = None
    emergency: Optional[float] = None
    # The share of the request a compaction must be able to free.
    min_savings: Optional[float] = None


@dataclass
class EngineOptions:
    """Overrides of the server's engine configuration for one call."""

    model: Optional[str] = None
    context_window: Optional[int] = None
    strategy: Optional[str] = None
    keep_recent_tokens: Optional[int] = None
    thresholds: Optional[Thresholds] = None
    # When a session is compacted: "threshold" or "cache-aware".
    policy: Optional[str] = None
    # The cache-aware policy's share of the budget for an expired cache.
    cold_share: Optional[float] = None
    # The prompt cache's lifetime: "5m" or "1h".
    cache_ttl: Optional[str] = None

    def to_json(self) -> Dict[str, Any]:
        return _drop_none(asdict(self))


@dataclass
class CompactOptions(EngineOptions):
    """The options of a compaction."""

    focus: Optional[str] = None
    threshold: Optional[float] = None
    dry_run: Optional[bool] = None


# Answers. total=False: the server leaves out empty fields, and a newer
# one may add some.


class Usage(TypedDict, total=False):
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int


class Health(TypedDict, total=False):
    status: str
    version: str
    abi: str
    plugins: int
    broken: int


class PluginInfo(TypedDict, total=False):
    name: str
    source: str
    path: str
    loaded: bool
    kinds: List[str]
    categories: List[str]
    version: str
    abi: str
    description: str
    overridden: bool
    error: str


class Plugins(TypedDict, total=False):
    dir: str
    plugins: List[PluginInfo]


class Plan(TypedDict, total=False):
    first_kept: int
    first_kept_id: str
    folded: int
    kept: int
    turn_prefix: bool
    tokens_before: int
    tokens_kept: int
    summary_tokens: int
    files_read: List[str]
    files_modified: List[str]


class CompactReport(TypedDict, total=False):
    action: str
    format: str
    output_format: str
    messages: int
    model: str
    context_window: int
    budget: int
    tokenizer: str
    threshold: float
    tokens_before: int
    tokens_after: int
    fits: bool
    requested_strategy: str
    strategy: str
    offline: bool
    messages_folded: int
    messages_kept: int
    fallbacks: List[str]
    plan: Plan
    model_calls: int
    model_calls_failed: int
    model_usage: Usage
    cost_usd: float
    skipped_records: Dict[str, int]
    repaired: Dict[str, int]
    warnings: List[str]
    duration_ms: float


Message = Dict[str, Any]


class CompactResult(TypedDict, total=False):
    """The answer of compact: ``messages`` (and for anthropic ``system``)
    is the context to send; ``session`` the whole compacted session."""

    session: Union[str, Dict[str, Any]]
    messages: List[Message]
    system: Union[str, List[Dict[str, Any]]]
    report: CompactReport


class Budget(TypedDict, total=False):
    context_window: int
    max_output_tokens: int
    input: int
    prune_at: float
    compact_at: float
    emergency_at: float


class Decision(TypedDict, total=False):
    action: str
    tokens_before: int
    tokens_after: int
    budget: int
    usage: float
    fits: bool


class Context(TypedDict, total=False):
    messages: List[Message]
    system: Union[str, List[Dict[str, Any]]]


class CheckResult(TypedDict, total=False):
    format: str
    messages: int
    tokenizer: str
    budget: Budget
    tokens: int
    overhead: int
    total: int
    usage: float
    action: str
    fits: bool
    decision: Decision
    output_format: str
    session: Union[str, Dict[str, Any]]
    context: Context
    fallbacks: List[str]
    warnings: List[str]
    model_calls: int
    model_calls_failed: int
    model_usage: Usage
    cost_usd: float


class TruncateResult(TypedDict, total=False):
    content: str
    category: str
    truncated: bool
    bytes_before: int
    bytes_after: int
    tokens_before: int
    tokens_after: int


class SessionUpdate(TypedDict, total=False):
    """The answer of put_session and append_messages."""

    id: str
    revision: int
    created: bool
    appended: int
    action: str
    tokens: int
    compactions: int
    updated_at: str
    report: CompactReport
    warnings: List[str]


class Growth(TypedDict, total=False):
    """The pauses between reported calls, those longer than the TTL, and
    what the prompt grew across them."""

    gaps: int
    expired: int
    tokens: int


class Bill(TypedDict, total=False):
    """Reported usage by kind of token, priced."""

    requests: int
    input_tokens: int
    cache_read_tokens: int
    cache_write_5m_tokens: int
    cache_write_1h_tokens: int
    output_tokens: int
    usd: float


class CompactionCost(TypedDict, total=False):
    """One compaction priced from the cache's state when it was made."""

    time: str
    tokens_before: int
    tokens_after: int
    warm: bool
    summary_usd: float
    rewrite_usd: float
    uncompacted_usd: float
    saved_per_request_usd: float
    break_even_requests: int


class SessionCost(TypedDict, total=False):
    """The session's calls billed, beside the same calls without its
    compactions (``uncompacted_usd``)."""

    priced: bool
    bill: Bill
    uncompacted_usd: float
    summary_usd: float
    compactions_usd: float
    saved_usd: float
    compactions: List[CompactionCost]


class SessionCache(TypedDict, total=False):
    """A session's prompt cache, from the usage of the assistant messages
    appended to it, and its cost report. ``misses`` counts the calls that
    found nothing cached by reason: cold_start, ttl_expired, compaction,
    prefix_changed."""

    last_request: str
    cache_ttl: str
    cold: bool
    cached_tokens: int
    prompt_tokens: int
    requests: int
    misses: Dict[str, int]
    growth: Growth
    cost: SessionCost


class SessionView(TypedDict, total=False):
    """A kept session's compacted context: ``messages`` (with ``system``
    for anthropic) is what to send to the model; ``cache`` its prompt
    cache and cost."""

    id: str
    revision: int
    output_format: str
    messages: List[Message]
    system: Union[str, List[Dict[str, Any]]]
    tokens: int
    compactions: int
    summary: str
    updated_at: str
    cache: SessionCache


class SessionDeleted(TypedDict, total=False):
    id: str
    deleted: bool


Session = Union[str, Sequence[Message], Mapping[str, Any]]


class _Deadline:
    def __init__(self, seconds: float) -> None:
        if not seconds > 0:
            raise ValueError(f"timeout {seconds!r}: want a positive number of seconds")
        self.seconds = seconds
        self.at = time.monotonic() + seconds

    def left(self) -> float:
        left = self.at - time.monotonic()
        if left <= 0:
            raise CompactHostError("timeout", f"no answer within the client's timeout of {self.seconds:g}s")
        return left


class _HTTP:
    """What both clients share: one exchange with a deadline and a size
    limit, and errors mapped to CompactHostError."""

    def __init__(self, base_url: str, token: Optional[str], timeout: float, max_response_bytes: int) -> None:
        u = urllib.parse.urlsplit(base_url)
        if u.scheme not in ("http", "https") or not u.netloc:
            raise ValueError(f"base_url {base_url!r}: want an absolute http(s) URL such as {DEFAULT_URL}")
        _Deadline(timeout)  # checks it
        if max_response_bytes <= 0:
            raise ValueError(f"max_response_bytes {max_response_bytes!r}: want a positive byte count")
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.max_response_bytes = max_response_bytes
        # Proxies from the environment would take loopback calls elsewhere.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def _exchange(
        self, method: str, path: str, body: Any = None, timeout: Optional[float] = None, accept: str = "application/json"
    ) -> "tuple[int, Dict[str, str], bytes]":
        deadline = _Deadline(self.timeout if timeout is None else timeout)
        data = None
        headers = {"Accept": accept, "User-Agent": "compact-host-python"}
        if body is not None:
            data = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        req = urllib.request.Request(self.base_url + path, data=data, method=method, headers=headers)
        try:
            resp = self._opener.open(req, timeout=deadline.left())
        except urllib.error.HTTPError as e:
            resp = e
        except (socket.timeout, TimeoutError) as e:
            raise CompactHostError("timeout", f"{method} {path}: no answer within {deadline.seconds:g}s") from e
        except urllib.error.URLError as e:
            if isinstance(e.reason, (socket.timeout, TimeoutError)):
                raise CompactHostError("timeout", f"{method} {path}: no answer within {deadline.seconds:g}s") from e
            raise CompactHostError("unreachable", f"{method} {self.base_url}{path}: {e.reason}") from e
        except OSError as e:
            raise CompactHostError("unreachable", f"{method} {self.base_url}{path}: {e}") from e
        try:
            status = resp.status if hasattr(resp, "status") else resp.code
            hdrs = {k.lower(): v for k, v in resp.headers.items()}
            payload = self._read(resp, deadline, method, path)
        finally:
            resp.close()
        if status >= 400:
            raise self._error(status, hdrs, payload, method, path)
        return status, hdrs, payload

    def _read(self, resp: Any, deadline: _Deadline, method: str, path: str) -> bytes:
        chunks: List[bytes] = []
        size = 0
        while True:
            # The socket's timeout (set from the deadline at the start)
            # bounds each read; the deadline is checked between reads.
            deadline.left()
            try:
                chunk = resp.read(min(64 << 10, self.max_response_bytes + 1 - size))
            except (socket.timeout, TimeoutError) as e:
                raise CompactHostError("timeout", f"{method} {path}: the answer did not arrive within {deadline.seconds:g}s") from e
            except OSError as e:
                raise CompactHostError("unreachable", f"{method} {path}: reading the answer: {e}") from e
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            size += len(chunk)
            if size > self.max_response_bytes:
                raise CompactHostError(
                    "bad_response",
                    f"{method} {path}: the answer is over max_response_bytes ({self.max_response_bytes}); raise it on the client",
                )

    @staticmethod
    def _error(status: int, hdrs: Mapping[str, str], payload: bytes, method: str, path: str) -> CompactHostError:
        retry_after = None
        if "retry-after" in hdrs:
            try:
                retry_after = float(hdrs["retry-after"])
            except ValueError:
                pass
        try:
            err = json.loads(payload)["error"]
            return CompactHostError(
                str(err["code"]), str(err["message"]), status, err.get("line"), err.get("offset"), retry_after
            )
        except (ValueError, KeyError, TypeError):
            text = payload[:200].decode("utf-8", "replace")
            code = "busy" if status == 503 else "timeout" if status in (408, 504) else "bad_response"
            return CompactHostError(code, f"{method} {path}: status {status} without an API error body: {text!r}", status, retry_after=retry_after)

    def _json(self, method: str, path: str, body: Any = None, timeout: Optional[float] = None) -> Any:
        _, _, payload = self._exchange(method, path, body, timeout)
        if not payload:
            return None
        try:
            return json.loads(payload)
        except ValueError as e:
            raise CompactHostError("bad_response", f"{method} {path}: the answer is not JSON: {e}") from e


class Client(_HTTP):
    """The API of ``compact-host serve``.

    ``token`` is sent as a bearer token (``serve --token-env``).
    ``timeout`` is each call's deadline in seconds, unless the call names
    its own; it should exceed the server's --request-timeout for calls
    that compact with a model.
    """

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        token: Optional[str] = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        super().__init__(base_url, token, timeout, max_response_bytes)

    def health(self, timeout: Optional[float] = None) -> Health:
        """GET /healthz: status, version, plugin counts. Needs no token."""
        return self._json("GET", "/healthz", timeout=timeout)

    def openapi(self, timeout: Optional[float] = None) -> Dict[str, Any]:
        """GET /openapi.json: the OpenAPI 3.1 document of the API."""
        return self._json("GET", "/openapi.json", timeout=timeout)

    def metrics_text(self, timeout: Optional[float] = None) -> str:
        """GET /metrics: serve's Prometheus text exposition (the sessions'
        cache misses by reason)."""
        _, _, payload = self._exchange("GET", "/metrics", timeout=timeout, accept="text/plain")
        return payload.decode("utf-8")

    def metrics(self, prefix: str = "compact_host_", timeout: Optional[float] = None) -> Dict[str, float]:
        """The samples of GET /metrics whose names start with prefix, by
        series ('compact_host_proxy_cache_misses_total{reason="ttl_expired"}')."""
        return parse_metrics(self.metrics_text(timeout), prefix)

    def plugins(self, timeout: Optional[float] = None) -> Plugins:
        """GET /v1/plugins: the strategy and truncator plugins."""
        return self._json("GET", "/v1/plugins", timeout=timeout)

    def compact(
        self,
        session: Session,
        format: Optional[str] = None,
        output_format: Optional[str] = None,
        options: Optional[CompactOptions] = None,
        timeout: Optional[float] = None,
    ) -> CompactResult:
        """POST /v1/compact. ``session`` is a list of canonical messages, a
        provider's request object (Anthropic, OpenAI) or a JSONL string.
        The answer's ``messages`` (with ``system`` for anthropic) is the
        compacted context to send to the model."""
        return self._json("POST", "/v1/compact", _session_body(session, format, output_format, options), timeout)

    def check(
        self,
        session: Session,
        format: Optional[str] = None,
        output_format: Optional[str] = None,
        options: Optional[EngineOptions] = None,
        tool_schema_tokens: int = 0,
        dynamic_tokens: int = 0,
        apply: bool = False,
        timeout: Optional[float] = None,
    ) -> CheckResult:
        """POST /v1/check: the gate before a model call. With ``apply`` the
        server prunes or compacts as needed and the answer's ``context``
        holds the messages to send."""
        body = _session_body(session, format, output_format, options)
        request = _drop_none({"tool_schema_tokens": tool_schema_tokens or None, "dynamic_tokens": dynamic_tokens or None})
        if request:
            body["request"] = request
        if apply:
            body["apply"] = True
        return self._json("POST", "/v1/check", body, timeout)

    def truncate(
        self,
        content: str,
        tool: Optional[str] = None,
        category: Optional[str] = None,
        max_tokens: int = 0,
        timeout: Optional[float] = None,
    ) -> TruncateResult:
        """POST /v1/truncate: cap one tool output."""
        body = _drop_none({"content": content, "tool": tool, "category": category, "max_tokens": max_tokens or None})
        return self._json("POST", "/v1/truncate", body, timeout)

    # Sessions the server keeps, so an agent sends only what is new.

    def put_session(
        self,
        id: str,
        session: Session,
        format: Optional[str] = None,
        options: Optional[CompactOptions] = None,
        if_revision: Optional[int] = None,
        timeout: Optional[float] = None,
    ) -> SessionUpdate:
        """PUT /v1/sessions/{id}: create or replace a kept session, with the
        options every later append is compacted with. ``if_revision``
        replaces only at that revision (0: only create); otherwise the
        call fails with ``revision_conflict``."""
        body = _session_body(session, format, None, options)
        if if_revision is not None:
            body["if_revision"] = if_revision
        return self._json("PUT", _session_path(id), body, timeout)

    def append_messages(
        self,
        id: str,
        messages: Sequence[Message],
        format: Optional[str] = None,
        if_revision: Optional[int] = None,
        timeout: Optional[float] = None,
    ) -> SessionUpdate:
        """POST /v1/sessions/{id}/messages: add the new messages (canonical,
        or ``format`` anthropic or openai) to a kept session; the server
        compacts it when it crosses its threshold, and ``report`` says
        how. An unknown ID is ``session_not_found``."""
        body: Dict[str, Any] = {"messages": list(messages)}
        if format:
            body["format"] = format
        if if_revision is not None:
            body["if_revision"] = if_revision
        return self._json("POST", _session_path(id) + "/messages", body, timeout)

    def get_session(self, id: str, output_format: Optional[str] = None, timeout: Optional[float] = None) -> SessionView:
        """GET /v1/sessions/{id}: the kept session's compacted context as
        ``messages`` in output_format (canonical by default), with
        ``system`` for anthropic, ready to send."""
        path = _session_path(id)
        if output_format:
            path += "?" + urllib.parse.urlencode({"output_format": output_format})
        return self._json("GET", path, timeout=timeout)

    def delete_session(self, id: str, timeout: Optional[float] = None) -> SessionDeleted:
        """DELETE /v1/sessions/{id}."""
        return self._json("DELETE", _session_path(id), timeout=timeout)


class ProxyAdmin(_HTTP):
    """The admin side of ``compact-host proxy``: its endpoints under
    /_compact-host/ on the proxy's listen address."""

    def __init__(
        self, base_url: str = DEFAULT_PROXY_URL, timeout: float = 10.0, max_response_bytes: int = 16 << 20
    ) -> None:
        super().__init__(base_url, None, timeout, max_response_bytes)

    def health(self, timeout: Optional[float] = None) -> bool:
        """GET /_compact-host/healthz: True when the proxy answers "ok"."""
        _, _, payload = self._exchange("GET", "/_compact-host/healthz", timeout=timeout, accept="text/plain")
        return payload.strip() == b"ok"

    def metrics_text(self, timeout: Optional[float] = None) -> str:
        """GET /_compact-host/metrics: the Prometheus text exposition."""
        _, _, payload = self._exchange("GET", "/_compact-host/metrics", timeout=timeout, accept="text/plain")
        return payload.decode("utf-8")

    def metrics(self, prefix: str = "compact_host_proxy_", timeout: Optional[float] = None) -> Dict[str, float]:
        """The samples whose names start with prefix, keyed by the series as
        written ('compact_host_proxy_requests_total{action="spliced",kind="anthropic"}')."""
        return parse_metrics(self.metrics_text(timeout), prefix)


def parse_metrics(text: str, prefix: str = "") -> Dict[str, float]:
    """The samples of a Prometheus text exposition, by series."""
    out: Dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith(prefix) or line.startswith("#"):
            continue
        # Label values may hold spaces: the value follows the labels.
        close = line.rfind("}")
        if close >= 0:
            series, rest = line[: close + 1], line[close + 1 :]
        else:
            series, _, rest = line.partition(" ")
        fields = rest.split()
        if not fields:
            continue
        try:
            out[series] = float(fields[0])
        except ValueError:
            continue
    return out


def _session_path(id: str) -> str:
    if not id:
        raise ValueError("session id: want a non-empty string")
    return "/v1/sessions/" + urllib.parse.quote(id, safe="")


def _session_body(
    session: Session, format: Optional[str], output_format: Optional[str], options: Optional[EngineOptions]
) -> Dict[str, Any]:
    if isinstance(session, (bytes, bytearray)):
        session = session.decode("utf-8")
    if not isinstance(session, (str, Mapping)):
        session = list(session)
    body: Dict[str, Any] = {"session": session}
    if format:
        body["format"] = format
    if output_format:
        body["output_format"] = output_format
    if options is not None:
        opts = options.to_json()
        if opts:
            body["options"] = opts
    return body
