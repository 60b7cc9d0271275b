"""Frames and documents of the compact-host plugin ABI v1 (abi/README.md).

A frame is b"CHF" and the major version byte, the header length, a JSON
header, the blob count, then each blob as its length and raw bytes
(integers u32 little-endian). Large fields travel as blobs, referred to
from the header by their index.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from typing import Any

ABI_MAJOR = 1
ABI_MINOR = 0
MAGIC = b"CHF" + bytes([ABI_MAJOR])
MAX_FRAME = 1 << 30

# Error codes of abi/README.md, "Errors".
INVALID_REQUEST = "invalid_request"
UNSUPPORTED = "unsupported"
NO_MODEL = "no_model"
MODEL_ERROR = "model_error"
DEADLINE = "deadline"
TOO_LARGE = "too_large"
INTERNAL = "internal"


class PluginError(Exception):
    """An error carried in an error frame: raise it from a handler."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@dataclass
class Frame:
    body: dict | None
    error: dict | None
    blobs: list[bytes]

    def blob(self, obj: dict, key: str) -> bytes:
        ref = obj.get(key)
        if ref is None:
            return b""
        if not isinstance(ref, int) or isinstance(ref, bool) or not 0 <= ref < len(self.blobs):
            raise PluginError(INVALID_REQUEST, f"field {key} refers to blob {ref!r} of {len(self.blobs)}")
        return self.blobs[ref]

    def text(self, obj: dict, key: str) -> str:
        return self.blob(obj, key).decode("utf-8", errors="replace")


def decode_frame(b: bytes) -> Frame:
    """Checks a frame's layout; raises PluginError(invalid_request)."""
    n = len(b)
    if n > MAX_FRAME:
        raise PluginError(INVALID_REQUEST, f"{n} bytes is over the {MAX_FRAME} byte limit")
    if n < 12:
        raise PluginError(INVALID_REQUEST, f"{n} bytes is shorter than the smallest frame")
    if b[:3] != b"CHF":
        raise PluginError(INVALID_REQUEST, "not a frame: bad magic")
    if b[3] != ABI_MAJOR:
        raise PluginError(INVALID_REQUEST, f"frame is ABI v{b[3]}, the plugin speaks v{ABI_MAJOR}")
    (hlen,) = struct.unpack_from("<I", b, 4)
    if hlen > n - 12:
        raise PluginError(INVALID_REQUEST, f"header length {hlen} runs past the frame end")
    header = b[8 : 8 + hlen]
    pos = 8 + hlen
    (count,) = struct.unpack_from("<I", b, pos)
    pos += 4
    if count * 4 > n - pos:
        raise PluginError(INVALID_REQUEST, f"{count} blobs cannot fit in {n - pos} bytes")
    blobs = []
    mv = memoryview(b)
    for i in range(count):
        if n - pos < 4:
            raise PluginError(INVALID_REQUEST, f"blob {i} has no length")
        (blen,) = struct.unpack_from("<I", b, pos)
        pos += 4
        if blen > n - pos:
            raise PluginError(INVALID_REQUEST, f"blob {i} length {blen} runs past the frame end")
        blobs.append(bytes(mv[pos : pos + blen]))
        pos += blen
    if pos != n:
        raise PluginError(INVALID_REQUEST, f"{n - pos} trailing bytes after the last blob")
    try:
        doc = json.loads(header)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise PluginError(INVALID_REQUEST, f"the header is not JSON: {e}") from None
    if not isinstance(doc, dict) or (("body" in doc) == ("error" in doc)):
        raise PluginError(INVALID_REQUEST, "the header needs exactly one of body and error")
    return Frame(body=doc.get("body"), error=doc.get("error"), blobs=blobs)


class Blobs:
    """Collects the blobs of a frame being written."""

    def __init__(self) -> None:
        self.items: list[bytes] = []

    def ref(self, doc: dict, key: str, value: bytes | str) -> None:
        if isinstance(value, str):
            value = value.encode("utf-8")
        if value:
            doc[key] = len(self.items)
            self.items.append(value)


def encode_frame(header: dict, blobs: list[bytes]) -> bytes:
    h = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    parts = [MAGIC, struct.pack("<I", len(h)), h, struct.pack("<I", len(blobs))]
    for blob in blobs:
        parts.append(struct.pack("<I", len(blob)))
        parts.append(blob)
    return b"".join(parts)


def error_frame(code: str, message: str) -> bytes:
    return encode_frame({"error": {"code": code, "message": message}}, [])


# ---- documents ---------------------------------------------------------------


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


@dataclass
class Block:
    type: str
    text: str = ""  # text, thinking, tool_result
    id: str = ""
    name: str = ""
    input: Any = None  # tool_use arguments, a JSON value
    tool_use_id: str = ""
    is_error: bool = False
    media_type: str = ""
    data: bytes = b""  # image


@dataclass
class Message:
    role: str
    content: list[Block] = field(default_factory=list)
    id: str = ""
    pinned: bool = False
    summary: bool = False


@dataclass
class FileOps:
    read: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)


@dataclass
class SummarizeRequest:
    kind: str
    messages: list[Message]
    previous_summary: str
    file_ops: FileOps
    target_tokens: int
    focus: str
    model_available: bool


@dataclass
class SummarizeResponse:
    summary: str
    offline: bool = False


@dataclass
class TruncateRequest:
    category: str
    tool_name: str
    content: bytes
    max_tokens: int


@dataclass
class TruncateResponse:
    content: bytes | str
    truncated: bool = False
    omitted_bytes: int = 0
    omitted_lines: int = 0


@dataclass
class CompleteRequest:
    messages: list[Message]
    system: str = ""
    max_tokens: int = 0


@dataclass
class CompleteResponse:
    text: str
    usage: Usage
    model: str = ""


def _str(obj: dict, key: str) -> str:
    v = obj.get(key, "")
    return v if isinstance(v, str) else ""


def _int(obj: dict, key: str) -> int:
    v = obj.get(key, 0)
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0


def _obj(v: Any, what: str) -> dict:
    if not isinstance(v, dict):
        raise PluginError(INVALID_REQUEST, f"{what} is not an object")
    return v


def _list(obj: dict, key: str) -> list:
    v = obj.get(key) or []
    if not isinstance(v, list):
        raise PluginError(INVALID_REQUEST, f"{key} is not an array")
    return v


def _message(f: Frame, m: Any) -> Message:
    m = _obj(m, "a message")
    blocks = []
    for b in _list(m, "content"):
        b = _obj(b, "a block")
        blocks.append(
            Block(
                type=_str(b, "type"),
                text=f.text(b, "text"),
                id=_str(b, "id"),
                name=_str(b, "name"),
                input=b.get("input"),
                tool_use_id=_str(b, "tool_use_id"),
                is_error=b.get("is_error") is True,
                media_type=_str(b, "media_type"),
                data=f.blob(b, "data"),
            )
        )
    return Message(
        role=_str(m, "role"), content=blocks, id=_str(m, "id"), pinned=m.get("pinned") is True, summary=m.get("summary") is True
    )


def _request_body(frame: bytes) -> Frame:
    f = decode_frame(frame)
    if f.error is not None:
        raise PluginError(INVALID_REQUEST, "the request is an error frame")
    _obj(f.body, "the request body")
    return f


def decode_summarize(frame: bytes) -> SummarizeRequest:
    f = _request_body(frame)
    body = f.body
    ops = body.get("file_ops") or {}
    ops = _obj(ops, "file_ops")
    return SummarizeRequest(
        kind=_str(body, "kind"),
        messages=[_message(f, m) for m in _list(body, "messages")],
        previous_summary=f.text(body, "previous_summary"),
        file_ops=FileOps(read=[p for p in _list(ops, "read") if isinstance(p, str)], modified=[p for p in _list(ops, "modified") if isinstance(p, str)]),
        target_tokens=_int(body, "target_tokens"),
        focus=f.text(body, "focus"),
        model_available=body.get("model_available") is True,
    )


def decode_truncate(frame: bytes) -> TruncateRequest:
    f = _request_body(frame)
    body = f.body
    return TruncateRequest(
        category=_str(body, "category"), tool_name=_str(body, "tool_name"), content=f.blob(body, "content"), max_tokens=_int(body, "max_tokens")
    )


def encode_summarize_response(r: SummarizeResponse) -> bytes:
    blobs, body = Blobs(), {}
    blobs.ref(body, "summary", r.summary)
    if r.offline:
        body["offline"] = True
    return encode_frame({"body": body}, blobs.items)


def encode_truncate_response(r: TruncateResponse) -> bytes:
    blobs, body = Blobs(), {}
    blobs.ref(body, "content", r.content)
    body["truncated"] = bool(r.truncated)
    if r.omitted_bytes:
        body["omitted_bytes"] = int(r.omitted_bytes)
    if r.omitted_lines:
        body["omitted_lines"] = int(r.omitted_lines)
    return encode_frame({"body": body}, blobs.items)


def encode_complete_request(r: CompleteRequest) -> bytes:
    blobs, body = Blobs(), {}
    blobs.ref(body, "system", r.system)
    msgs = []
    for m in r.messages:
        content = []
        for b in m.content:
            d = {"type": b.type}
            blobs.ref(d, "text", b.text)
            for key in ("id", "name", "tool_use_id", "media_type"):
                if getattr(b, key):
                    d[key] = getattr(b, key)
            if b.input is not None:
                d["input"] = b.input
            if b.is_error:
                d["is_error"] = True
            blobs.ref(d, "data", b.data)
            content.append(d)
        msg = {"role": m.role, "content": content}
        if m.id:
            msg["id"] = m.id
        msgs.append(msg)
    body["messages"] = msgs
    if r.max_tokens > 0:
        body["max_tokens"] = r.max_tokens
    return encode_frame({"body": body}, blobs.items)


def host_answer(frame: bytes) -> Frame:
    """Decodes a host's answer; an error frame raises its PluginError."""
    try:
        f = decode_frame(frame)
    except PluginError as e:
        raise PluginError(INTERNAL, f"the host's answer is malformed: {e.message}") from None
    if f.error is not None:
        err = _obj(f.error, "the error")
        raise PluginError(_str(err, "code") or INTERNAL, _str(err, "message"))
    _obj(f.body, "the answer body")
    return f


def decode_complete_response(frame: bytes) -> CompleteResponse:
    f = host_answer(frame)
    u = f.body.get("usage") or {}
    usage = Usage(**{k: _int(u, k) for k in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")})
    return CompleteResponse(text=f.text(f.body, "text"), usage=usage, model=_str(f.body, "model"))


def encode_info(name: str, version: str, description: str, kinds: list[str], categories: list[str]) -> bytes:
    body: dict[str, Any] = {"abi_major": ABI_MAJOR, "abi_minor": ABI_MINOR, "name": name, "kinds": kinds}
    if version:
        body["version"] = version
    if description:
        body["description"] = description
    if categories:
        body["categories"] = categories
    return encode_frame({"body": body}, [])
