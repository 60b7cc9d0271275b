"""The process transport: hashicorp/go-plugin's handshake and gRPC services,
served with grpcio (Debian: python3-grpcio) and no generated code.

Every compact.v1 message is a google.protobuf.BytesValue holding a frame
(abi/plugin.proto); it and go-plugin's ConnInfo are small enough to encode
by hand, so the SDK needs no protobuf package.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
from concurrent import futures
from dataclasses import dataclass, field
from typing import Callable, Iterator

import grpc

from . import frame as fr

COOKIE_KEY = "COMPACT_HOST_PLUGIN"
COOKIE_VALUE = "a3f1c0de-compact-host-plugin"
CORE_PROTOCOL = 1  # go-plugin's own protocol version
APP_PROTOCOL = fr.ABI_MAJOR
MAX_MESSAGE = 64 << 20 | 1 << 20  # sdk/grpcwire.MaxMessageSize
GRPC_OPTIONS = [("grpc.max_receive_message_length", MAX_MESSAGE), ("grpc.max_send_message_length", MAX_MESSAGE)]
META_CALL_ID = "compact-call-id"
META_BROKER_ID = "compact-broker-id"
# How long a Host call waits for the host to announce its broker address.
BROKER_WAIT = 5.0

DEBUG, INFO, WARN, ERROR = -4, 0, 4, 8


# ---- protobuf wire format, just enough -----------------------------------------


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _fields(data: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """Yields (field number, wire type, value) of a protobuf message."""
    pos, n = 0, len(data)

    def varint() -> int:
        nonlocal pos
        shift = result = 0
        while True:
            if pos >= n or shift > 63:
                raise ValueError("truncated varint")
            b = data[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7

    while pos < n:
        key = varint()
        num, wt = key >> 3, key & 7
        if wt == 0:
            yield num, wt, varint()
        elif wt == 2:
            ln = varint()
            if ln > n - pos:
                raise ValueError("truncated field")
            yield num, wt, data[pos : pos + ln]
            pos += ln
        elif wt == 1:
            pos += 8
        elif wt == 5:
            pos += 4
        else:
            raise ValueError(f"unsupported wire type {wt}")


def bytes_value_decode(data: bytes) -> bytes:
    value = b""
    for num, wt, v in _fields(data):
        if num == 1 and wt == 2:
            value = bytes(v)
    return value


def bytes_value_encode(value: bytes) -> bytes:
    return b"\x0a" + _varint(len(value)) + value if value else b""


@dataclass
class ConnInfo:
    service_id: int = 0
    network: str = ""
    address: str = ""


def conn_info_decode(data: bytes) -> ConnInfo:
    c = ConnInfo()
    for num, wt, v in _fields(data):
        if num == 1 and wt == 0:
            c.service_id = v
        elif num == 2 and wt == 2:
            c.network = bytes(v).decode()
        elif num == 3 and wt == 2:
            c.address = bytes(v).decode()
    return c


# grpc.health.v1.HealthCheckResponse{status: SERVING}
HEALTH_SERVING = b"\x08\x01"


# ---- the plugin's line to the host ------------------------------------------------


class _Broker:
    """Addresses the host announces on go-plugin's broker stream."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.addrs: dict[int, ConnInfo] = {}
        self.channels: dict[int, grpc.Channel] = {}

    def announce(self, c: ConnInfo) -> None:
        with self.cond:
            self.addrs[c.service_id] = c
            self.cond.notify_all()

    def channel(self, service_id: int, timeout: float) -> grpc.Channel:
        with self.cond:
            if service_id in self.channels:
                return self.channels[service_id]
            if not self.cond.wait_for(lambda: service_id in self.addrs, timeout):
                raise fr.PluginError(fr.INTERNAL, f"the host announced no address for broker id {service_id}")
            c = self.addrs[service_id]
            target = "unix:" + c.address if c.network == "unix" else c.address
            ch = grpc.insecure_channel(target, options=GRPC_OPTIONS)
            self.channels[service_id] = ch
            return ch


class Host:
    """The host's services during one plugin call."""

    def __init__(self, broker: _Broker, context: grpc.ServicerContext):
        self._broker = broker
        self._context = context
        md = dict(context.invocation_metadata())
        self._call_id = md.get(META_CALL_ID, "")
        self._broker_id = md.get(META_BROKER_ID, "")

    def deadline(self) -> int:
        """The call's deadline in Unix nanoseconds, 0 if none."""
        left = self._context.time_remaining()
        return 0 if left is None else time.time_ns() + int(left * 1e9)

    def _invoke(self, method: str, payload: bytes) -> bytes:
        if not self._broker_id.isdigit():
            raise fr.PluginError(fr.INTERNAL, "the host sent no broker id")
        left = self._context.time_remaining()
        ch = self._broker.channel(int(self._broker_id), min(BROKER_WAIT, left) if left is not None else BROKER_WAIT)
        call = ch.unary_unary("/compact.v1.Host/" + method, request_serializer=bytes_value_encode, response_deserializer=bytes_value_decode)
        try:
            return call(payload, timeout=self._context.time_remaining(), metadata=((META_CALL_ID, self._call_id),))
        except grpc.RpcError as e:
            code = fr.DEADLINE if e.code() == grpc.StatusCode.DEADLINE_EXCEEDED else fr.MODEL_ERROR
            raise fr.PluginError(code, f"host call {method}: {e.details()}") from None

    def complete(self, req: fr.CompleteRequest) -> fr.CompleteResponse:
        """Asks the host's model; raises PluginError(no_model) when it has none."""
        return fr.decode_complete_response(self._invoke("Complete", fr.encode_complete_request(req)))

    def count_tokens(self, text: str) -> int:
        blobs, body = fr.Blobs(), {}
        blobs.ref(body, "text", text)
        f = fr.host_answer(self._invoke("CountTokens", fr.encode_frame({"body": body}, blobs.items)))
        return int(f.body.get("tokens", 0))

    def log(self, level: int, msg: str) -> None:
        """Writes a line into the host's log; failures are dropped."""
        try:
            self._invoke("Log", json.dumps({"level": level, "msg": msg}).encode())
        except Exception:
            pass


# ---- registration -------------------------------------------------------------------


@dataclass
class Plugin:
    """What serve publishes. Set summarize for a strategy, truncate for a
    truncator (both take the request and a Host); raise PluginError to
    answer an error frame."""

    name: str
    version: str = ""
    description: str = ""
    summarize: Callable[[fr.SummarizeRequest, Host], fr.SummarizeResponse] | None = None
    truncate: Callable[[fr.TruncateRequest, Host], fr.TruncateResponse] | None = None
    categories: list[str] = field(default_factory=list)

    def info_frame(self) -> bytes:
        kinds = (["strategy"] if self.summarize else []) + (["truncator"] if self.truncate else [])
        return fr.encode_info(self.name, self.version, self.description, kinds, self.categories)

    def handle(self, method: str, frame: bytes, host: Host) -> bytes:
        """Answers one call; never raises."""
        try:
            if method == "Info":
                return self.info_frame()
            if method == "Summarize":
                if not self.summarize:
                    raise fr.PluginError(fr.UNSUPPORTED, f"plugin {self.name} is not a strategy")
                resp = self.summarize(fr.decode_summarize(frame), host)
                return fr.encode_summarize_response(resp)
            if method == "Truncate":
                if not self.truncate:
                    raise fr.PluginError(fr.UNSUPPORTED, f"plugin {self.name} is not a truncator")
                req = fr.decode_truncate(frame)
                if self.categories and req.category not in self.categories:
                    raise fr.PluginError(fr.UNSUPPORTED, f"plugin {self.name} does not truncate category {req.category!r}")
                return fr.encode_truncate_response(self.truncate(req, host))
            raise fr.PluginError(fr.UNSUPPORTED, f"unknown call {method!r}")
        except fr.PluginError as e:
            return fr.error_frame(e.code, e.message)
        except Exception as e:  # a bug in the plugin answers, it does not kill the process
            traceback.print_exc(file=sys.stderr)
            return fr.error_frame(fr.INTERNAL, f"plugin {self.name} raised {type(e).__name__}: {e}")


def serve(plugin: Plugin) -> None:
    """Serves plugin as a go-plugin gRPC process and never returns. Run by
    hand, without the host's handshake cookie, it says so and exits 1."""
    if os.environ.get(COOKIE_KEY) != COOKIE_VALUE:
        print(
            f"This is a compact-host plugin ({plugin.name}): the host starts it. "
            f"Check it with: compact-host plugins verify <its .plugin.json>",
            file=sys.stderr,
        )
        sys.exit(1)
    versions = os.environ.get("PLUGIN_PROTOCOL_VERSIONS", str(APP_PROTOCOL)).split(",")
    if str(APP_PROTOCOL) not in versions:
        print(f"the host speaks plugin protocol {versions}, this plugin {APP_PROTOCOL}", file=sys.stderr)
        sys.exit(1)
    if os.environ.get("PLUGIN_CLIENT_CERT"):
        print("the host asks for mTLS (AutoMTLS), which compact-host does not use and this SDK does not speak", file=sys.stderr)
        sys.exit(1)

    broker = _Broker()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=32), options=GRPC_OPTIONS)
    stopped = threading.Event()

    def unary(method: str):
        def call(request: bytes, context: grpc.ServicerContext) -> bytes:
            return plugin.handle(method, request, Host(broker, context))

        return grpc.unary_unary_rpc_method_handler(call, request_deserializer=bytes_value_decode, response_serializer=bytes_value_encode)

    def broker_stream(requests: Iterator[bytes], context: grpc.ServicerContext) -> Iterator[bytes]:
        for raw in requests:
            broker.announce(conn_info_decode(raw))
        return
        yield  # a generator: the plugin never announces addresses of its own

    def shutdown(request: bytes, context: grpc.ServicerContext) -> bytes:
        stopped.set()
        return b""

    def health(request: bytes, context: grpc.ServicerContext) -> bytes:
        return HEALTH_SERVING

    raw = {"request_deserializer": None, "response_serializer": None}
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler("compact.v1.Plugin", {m: unary(m) for m in ("Info", "Summarize", "Truncate")}),
            grpc.method_handlers_generic_handler("grpc.health.v1.Health", {"Check": grpc.unary_unary_rpc_method_handler(health, **raw)}),
            grpc.method_handlers_generic_handler("plugin.GRPCBroker", {"StartStream": grpc.stream_stream_rpc_method_handler(broker_stream, **raw)}),
            grpc.method_handlers_generic_handler("plugin.GRPCController", {"Shutdown": grpc.unary_unary_rpc_method_handler(shutdown, **raw)}),
        )
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    # stdout belongs to the handshake: this one line, then nothing.
    sys.stdout.write(f"{CORE_PROTOCOL}|{APP_PROTOCOL}|tcp|127.0.0.1:{port}|grpc\n")
    sys.stdout.flush()
    stopped.wait()
    server.stop(grace=1).wait(2)
    os._exit(0)
