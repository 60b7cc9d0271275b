#!/usr/bin/python3
"""loglines: a truncator for compact-host in Python, for build and test logs.

It keeps the first lines, every line that mentions an error, a failure or
a warning, and the last lines, in their order, as far as they fit; a notice
says how many lines it left out.
"""
import os
import re
import sys

# The example runs from the repository (and writes no bytecode into it);
# an installed SDK needs no path.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "..", "sdk", "python"))

from compact_host import INVALID_REQUEST, Plugin, PluginError, TruncateResponse, serve  # noqa: E402

IMPORTANT = re.compile(rb"error|fail|panic|warn|exception|traceback", re.IGNORECASE)
BYTES_PER_TOKEN = 4


def truncate(req, host):
    if req.max_tokens <= 0:
        raise PluginError(INVALID_REQUEST, "loglines: max_tokens must be positive")
    budget = req.max_tokens * BYTES_PER_TOKEN
    if len(req.content) <= budget:
        return TruncateResponse(req.content)
    lines = req.content.splitlines(keepends=True)
    room = max(budget - 120, 0)  # the notice
    # Rank: important lines first, then alternately from the head and the tail.
    order = [i for i, l in enumerate(lines) if IMPORTANT.search(l)]
    head, tail = 0, len(lines) - 1
    while head <= tail:
        order.append(head)
        order.append(tail)
        head, tail = head + 1, tail - 1
    keep, used = set(), 0
    for i in order:
        if i in keep or used + len(lines[i]) > room:
            continue
        keep.add(i)
        used += len(lines[i])
    out, skipped = [], 0
    for i, line in enumerate(lines):
        if i in keep:
            if skipped:
                out.append(b"[... %d lines omitted]\n" % skipped)
                skipped = 0
            out.append(line)
        else:
            skipped += 1
    if skipped:
        out.append(b"[... %d lines omitted]\n" % skipped)
    omitted = len(lines) - len(keep)
    kept = b"".join(lines[i] for i in sorted(keep))
    body = b"".join(out)
    notice = b"[loglines kept %d of %d lines; re-run with grep or tail -n to see the rest]\n" % (len(keep), len(lines))
    if len(body) + len(notice) > budget:  # the per-gap notes did not fit: drop them
        body = kept
    if len(body) + len(notice) > budget:  # a cap smaller than the notice: nothing fits
        return TruncateResponse(b"", truncated=True, omitted_bytes=len(req.content), omitted_lines=len(lines))
    return TruncateResponse(body + notice, truncated=True, omitted_bytes=len(req.content) - len(kept), omitted_lines=omitted)


if __name__ == "__main__":
    serve(
        Plugin(
            name="loglines",
            version="1.0.0",
            description="Keeps the head, the tail and the error lines of a log (Python example).",
            truncate=truncate,
            categories=["build-log", "generic"],
        )
    )
