// headtail: a truncator for compact-host in AssemblyScript. It keeps the
// first and last lines of a tool output that fit the cap and says how
// many lines and bytes it left out between them.
import { Plugin, TruncateRequest, TruncateResponse, Truncator, Host, INVALID_REQUEST, fail, serve } from "compact-host-sdk";
export * from "compact-host-sdk/exports";

const BYTES_PER_TOKEN: i64 = 4;

// lineStarts lists where each line of b begins.
function lineStarts(b: Uint8Array): i32[] {
  const starts: i32[] = [0];
  for (let i = 0; i < b.length; i++) if (b[i] == 0x0a && i + 1 < b.length) starts.push(i + 1);
  return starts;
}

// utf8Floor moves a cut back to the start of a UTF-8 sequence.
function utf8Floor(b: Uint8Array, i: i32): i32 {
  while (i > 0 && i < b.length && (b[i] & 0xc0) == 0x80) i--;
  return i;
}

class HeadTail extends Truncator {
  truncate(req: TruncateRequest, host: Host): TruncateResponse | null {
    if (req.maxTokens <= 0) return fail<TruncateResponse>(INVALID_REQUEST, "headtail: max_tokens must be positive");
    const c = req.content;
    const budget = req.maxTokens * BYTES_PER_TOKEN;
    const out = new TruncateResponse();
    if (<i64>c.length <= budget) {
      out.content = c;
      return out;
    }
    const starts = lineStarts(c);
    const reserve: i64 = 120; // room for the notice
    const room = budget > reserve ? budget - reserve : 0;
    // Head: whole lines while they fit half the room; tail: the same from the end.
    let head = 0;
    while (head < starts.length - 1 && <i64>starts[head + 1] <= room / 2) head++;
    let headEnd = head > 0 ? starts[head] : utf8Floor(c, <i32>(room / 2));
    let tail = starts.length;
    while (tail > head + 1 && <i64>(c.length - starts[tail - 1]) <= room - <i64>headEnd) tail--;
    let tailStart = tail < starts.length ? starts[tail] : c.length;
    if (tailStart < headEnd) tailStart = headEnd;
    const omittedLines = tail - head;
    const omittedBytes = tailStart - headEnd;
    const notice = String.UTF8.encode(
      (headEnd > 0 && c[headEnd - 1] != 0x0a ? "\n" : "") +
        "[... " + omittedLines.toString() + " lines (" + omittedBytes.toString() + " bytes) omitted by headtail; re-run with a narrower command to see them]\n",
    );
    const result = new Uint8Array(headEnd + notice.byteLength + (c.length - tailStart));
    result.set(c.subarray(0, headEnd), 0);
    result.set(Uint8Array.wrap(notice), headEnd);
    result.set(c.subarray(tailStart), headEnd + notice.byteLength);
    out.truncated = true;
    if (<i64>result.length > budget) {
      // A cap smaller than the notice: nothing fits, not even the notice.
      out.omittedBytes = c.length;
      out.omittedLines = starts.length;
      return out;
    }
    out.content = result;
    out.omittedBytes = omittedBytes;
    out.omittedLines = omittedLines;
    return out;
  }
}

const p = new Plugin();
p.name = "headtail";
p.version = "1.0.0";
p.description = "Keeps the first and last lines that fit (AssemblyScript example).";
p.truncator = new HeadTail();
p.categories = ["head-tail", "generic"];
serve(p);
