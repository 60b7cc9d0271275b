"""compact_host: write compact-host plugins in Python as go-plugin processes.

    from compact_host import Plugin, SummarizeResponse, serve

    def summarize(req, host):
        return SummarizeResponse(summary="...", offline=True)

    serve(Plugin(name="mine", summarize=summarize))

The contract is abi/README.md and abi/plugin.proto; the SDK needs grpcio
(Debian: python3-grpcio) and nothing else.
"""

from .frame import (
    ABI_MAJOR,
    ABI_MINOR,
    DEADLINE,
    INTERNAL,
    INVALID_REQUEST,
    MODEL_ERROR,
    NO_MODEL,
    TOO_LARGE,
    UNSUPPORTED,
    Block,
    CompleteRequest,
    CompleteResponse,
    FileOps,
    Message,
    PluginError,
    SummarizeRequest,
    SummarizeResponse,
    TruncateRequest,
    TruncateResponse,
    Usage,
    decode_frame,
    encode_frame,
)
from .serve import DEBUG, ERROR, INFO, WARN, Host, Plugin, serve

__all__ = [name for name in dir() if not name.startswith("_")]
