/*
 * logdedup: a compact-host truncator plugin written in C.
 *
 * It handles the "log" output category: runs of log lines that are the
 * same, or the same but for their numbers (timestamps, counters, ids),
 * collapse into their first and last line with a count between them; what
 * is still over the cap is cut at a line boundary. Every cut ends with a
 * notice saying how much was left out and how to see it.
 *
 * The ABI's side (exports, frames, the allocator contract) is the C SDK's,
 * sdk/c/compact_host.h: this file is only the truncator.
 *
 * Build: make examples (clang --target=wasm32-wasi -mexec-model=reactor
 * -I sdk/c ... sdk/c/compact_host.c).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compact_host.h"

#define BYTES_PER_TOKEN 4

/* ---- the truncator ----------------------------------------------------- */

typedef struct {
	uint8_t *buf;
	size_t len, cap;
} out_buf;

static void put(out_buf *o, const void *p, size_t n) {
	if (o->len + n > o->cap)
		n = o->cap - o->len;
	memcpy(o->buf + o->len, p, n);
	o->len += n;
}

/* same_but_numbers compares two lines ignoring runs of digits and CR. */
static int same_but_numbers(const uint8_t *a, size_t an, const uint8_t *b, size_t bn, int *exact) {
	*exact = an == bn && memcmp(a, b, an) == 0;
	if (*exact)
		return 1;
	size_t i = 0, k = 0;
	while (i < an && k < bn) {
		int da = a[i] >= '0' && a[i] <= '9', db = b[k] >= '0' && b[k] <= '9';
		if (da && db) {
			while (i < an && a[i] >= '0' && a[i] <= '9')
				i++;
			while (k < bn && b[k] >= '0' && b[k] <= '9')
				k++;
			continue;
		}
		if (a[i] != b[k])
			return 0;
		i++, k++;
	}
	return i == an && k == bn;
}

/* line_end returns the end of the line starting at p (past its '\n'). */
static size_t line_end(const uint8_t *c, size_t len, size_t p) {
	const uint8_t *nl = memchr(c + p, '\n', len - p);
	return nl ? (size_t)(nl - c) + 1 : len;
}

static size_t body_len(const uint8_t *c, size_t start, size_t end) {
	size_t n = end - start;
	if (n && c[end - 1] == '\n')
		n--;
	if (n && c[start + n - 1] == '\r')
		n--;
	return n;
}

static int logdedup(const ch_truncate_request *req, ch_truncate_response *resp, ch_error *err) {
	const uint8_t *content = req->content.data;
	size_t content_len = req->content.len;
	if (req->max_tokens <= 0)
		return ch_fail(err, CH_INVALID_REQUEST, "logdedup: max_tokens must be positive, got %lld", (long long)req->max_tokens);

	size_t budget = (size_t)req->max_tokens * BYTES_PER_TOKEN;
	if (req->max_tokens > (int64_t)(SIZE_MAX / BYTES_PER_TOKEN) || content_len <= budget) {
		ch_buf_put(&resp->content, content, content_len);
		return 0;
	}

	/* Pass 1: collapse runs of lines equal but for their numbers. */
	int crlf = 0;
	const uint8_t *first_nl = memchr(content, '\n', content_len);
	if (first_nl && first_nl > content && first_nl[-1] == '\r')
		crlf = 1;
	const char *eol = crlf ? "\r\n" : "\n";
	out_buf o = {malloc(content_len + 64), 0, content_len + 64};
	if (!o.buf)
		return ch_fail(err, CH_INTERNAL, "logdedup: out of memory for %zu bytes", content_len + 64);
	size_t omitted_lines = 0, total_lines = 0;
	for (size_t s = 0; s < content_len;) {
		size_t e = line_end(content, content_len, s), run_last = s, run = 1;
		int all_exact = 1;
		size_t n = body_len(content, s, e);
		for (size_t t = e; t < content_len;) {
			size_t te = line_end(content, content_len, t);
			int exact;
			if (!same_but_numbers(content + s, n, content + t, body_len(content, t, te), &exact))
				break;
			all_exact &= exact;
			run_last = t, run++, t = te;
		}
		total_lines += run;
		char note[128];
		int nn = 0;
		if (run >= 3 && all_exact)
			nn = snprintf(note, sizeof note, "[... the line above repeats %zu more times]%s", run - 1, eol);
		else if (run >= 4)
			nn = snprintf(note, sizeof note, "[... %zu similar lines, differing only in numbers]%s", run - 2, eol);
		size_t run_end = line_end(content, content_len, run_last);
		if (nn > 0 && (size_t)nn < run_end - e) {
			put(&o, content + s, e - s);
			if (e == content_len || content[e - 1] != '\n')
				put(&o, eol, strlen(eol));
			put(&o, note, nn);
			if (!all_exact)
				put(&o, content + run_last, run_end - run_last), omitted_lines += run - 2;
			else
				omitted_lines += run - 1;
		} else {
			put(&o, content + s, run_end - s);
		}
		s = run_end;
	}

	/* Pass 2: cut at a line boundary to fit, notice included. */
	char notice[256];
	size_t kept = o.len, cut_lines = 0;
	if (o.len > budget) {
		int reserve = snprintf(notice, sizeof notice,
		                       "[... %zu lines (%zu bytes) omitted. Re-run with a narrower command (grep, tail -n) to see them.]%s",
		                       total_lines, content_len, eol);
		size_t room = budget > (size_t)reserve + 2 ? budget - reserve - 2 : 0;
		kept = room;
		while (kept > 0 && o.buf[kept - 1] != '\n')
			kept--;
		if (kept == 0) /* one long line: cut on a UTF-8 boundary instead */
			for (kept = room; kept > 0 && kept < o.len && (o.buf[kept] & 0xC0) == 0x80;)
				kept--;
		for (size_t i = kept; i < o.len; i++)
			if (o.buf[i] == '\n')
				cut_lines++;
		if (o.len > 0 && o.buf[o.len - 1] != '\n')
			cut_lines++;
		omitted_lines += cut_lines;
	}
	size_t omitted_bytes = content_len - kept;
	if (o.len > budget) {
		int n = snprintf(notice, sizeof notice,
		                 "[... %zu lines (%zu bytes) omitted. Re-run with a narrower command (grep, tail -n) to see them.]%s",
		                 omitted_lines, omitted_bytes, eol);
		o.len = kept;
		if (kept > 0 && o.buf[kept - 1] != '\n')
			put(&o, eol, strlen(eol));
		if (o.len + n <= budget)
			put(&o, notice, n);
	}
	ch_buf_put(&resp->content, o.buf, o.len);
	resp->truncated = 1;
	resp->omitted_bytes = (int64_t)omitted_bytes;
	resp->omitted_lines = (int64_t)omitted_lines;
	free(o.buf);
	return 0;
}

static const char *const categories[] = {"log", NULL};

static const ch_plugin plugin = {
    .name = "logdedup",
    .version = "1.0.0",
    .description = "Collapses repeated log lines, then cuts at a line boundary (C example).",
    .truncate = logdedup,
    .categories = categories,
};

CH_PLUGIN(plugin);
