/*
 * logdedup: a compact-host truncator plugin written in C.
 *
 * It handles the "log" output category: runs of log lines that are the
 * same, or the same but for their numbers (timestamps, counters, ids),
 * collapse into their first and last line with a count between them; what
 * is still over the cap is cut at a line boundary. Every cut ends with a
 * notice saying how much was left out and how to see it.
 *
 * It implements the wasm side of ABI v1 (abi/version.go, abi/frame.go):
 *   compact_plugin_abi_v1()            marker, no-op
 *   compact_v1_alloc(size) -> ptr      the host writes request frames there
 *   compact_v1_free(ptr)               the host gives such a buffer back
 *   compact_v1_info() -> ptr<<32|len   an Info frame
 *   compact_v1_truncate(ptr, len) -> ptr<<32|len
 * A frame is "CHF\x01", u32 LE header length, a JSON header
 * {"body":{...}} or {"error":{...}}, u32 LE blob count, then each blob as
 * u32 LE length and bytes. Large fields (the content) are blob indexes.
 * The request buffer stays the host's (it reuses it across calls); an
 * answer stays this plugin's and must stay readable until the next call,
 * which frees it.
 *
 * Build: make examples (clang --target=wasm32-wasi -mexec-model=reactor).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT(name) __attribute__((export_name(name)))

#define NAME "logdedup"
#define CATEGORY "log"
#define BYTES_PER_TOKEN 4

EXPORT("compact_plugin_abi_v1") void marker(void) {}

EXPORT("compact_v1_alloc") uint32_t plugin_alloc(uint32_t size) {
	return (uint32_t)(uintptr_t)malloc(size ? size : 1);
}

EXPORT("compact_v1_free") void plugin_free(uint32_t ptr) { free((void *)(uintptr_t)ptr); }

/* ---- frames ---------------------------------------------------------- */

static void put_u32(uint8_t *p, uint32_t v) {
	p[0] = v, p[1] = v >> 8, p[2] = v >> 16, p[3] = v >> 24;
}

static uint32_t get_u32(const uint8_t *p) {
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* last_answer is the previous call's answer, freed at the next call. */
static uint8_t *last_answer;

static void forget_answer(void) {
	free(last_answer);
	last_answer = NULL;
}

/* frame lays out a header and at most one blob; returns ptr<<32|len. */
static uint64_t frame(const char *header, const uint8_t *blob, size_t blob_len, int has_blob) {
	size_t hlen = strlen(header);
	size_t n = 4 + 4 + hlen + 4 + (has_blob ? 4 + blob_len : 0);
	uint8_t *out = malloc(n), *p = out;
	if (!out)
		return 0;
	memcpy(p, "CHF\x01", 4), p += 4;
	put_u32(p, hlen), p += 4;
	memcpy(p, header, hlen), p += hlen;
	put_u32(p, has_blob ? 1 : 0), p += 4;
	if (has_blob) {
		put_u32(p, blob_len), p += 4;
		memcpy(p, blob, blob_len);
	}
	last_answer = out;
	return (uint64_t)(uintptr_t)out << 32 | n;
}

static uint64_t error_frame(const char *code, const char *message) {
	char header[512];
	snprintf(header, sizeof header, "{\"error\":{\"code\":\"%s\",\"message\":\"%s: %s\"}}", code, NAME, message);
	return frame(header, NULL, 0, 0);
}

EXPORT("compact_v1_info") uint64_t plugin_info(void) {
	forget_answer();
	return frame("{\"body\":{\"abi_major\":1,\"abi_minor\":0,\"name\":\"" NAME "\",\"version\":\"1.0.0\","
	             "\"description\":\"Collapses repeated log lines, then cuts at a line boundary (C example).\","
	             "\"kinds\":[\"truncator\"],\"categories\":[\"" CATEGORY "\"]}}",
	             NULL, 0, 0);
}

/* ---- a just-enough JSON reader for the request header ----------------- */

typedef struct {
	const char *p, *end;
} json;

static void ws(json *j) {
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
		j->p++;
}

/* str reads a string into buf (escapes kept as written) or skips it. */
static int str(json *j, char *buf, size_t cap) {
	size_t n = 0;
	ws(j);
	if (j->p >= j->end || *j->p != '"')
		return 0;
	for (j->p++; j->p < j->end && *j->p != '"'; j->p++) {
		if (*j->p == '\\' && j->p + 1 < j->end) {
			if (buf && n + 1 < cap)
				buf[n++] = *j->p;
			j->p++;
		}
		if (buf && n + 1 < cap)
			buf[n++] = *j->p;
	}
	if (buf)
		buf[n] = 0;
	if (j->p >= j->end)
		return 0;
	j->p++;
	return 1;
}

/* skip passes over one value of any kind. */
static int skip(json *j) {
	int depth = 0;
	ws(j);
	do {
		if (j->p >= j->end)
			return 0;
		char c = *j->p;
		if (c == '"') {
			if (!str(j, NULL, 0))
				return 0;
			continue;
		}
		if (c == '{' || c == '[')
			depth++;
		else if (c == '}' || c == ']')
			depth--;
		else if (depth == 0 && (c == ',' || c == ' ' || c == '\n' || c == '\r' || c == '\t'))
			return 1;
		j->p++;
	} while (depth > 0 || (j->p < j->end && *j->p != ',' && *j->p != '}' && *j->p != ']'));
	return 1;
}

/* field positions j at the value of key in the object j points to. */
static int field(json j, const char *key, json *value) {
	char name[64];
	ws(&j);
	if (j.p >= j.end || *j.p != '{')
		return 0;
	j.p++;
	for (;;) {
		ws(&j);
		if (j.p < j.end && *j.p == '}')
			return 0;
		if (!str(&j, name, sizeof name))
			return 0;
		ws(&j);
		if (j.p >= j.end || *j.p != ':')
			return 0;
		j.p++;
		ws(&j);
		if (strcmp(name, key) == 0) {
			*value = j;
			return 1;
		}
		if (!skip(&j))
			return 0;
		ws(&j);
		if (j.p < j.end && *j.p == ',')
			j.p++;
	}
}

static long long number(json j, long long fallback) {
	long long v = 0;
	int neg = 0, digits = 0;
	ws(&j);
	if (j.p < j.end && *j.p == '-')
		neg = 1, j.p++;
	for (; j.p < j.end && *j.p >= '0' && *j.p <= '9'; j.p++, digits++)
		v = v * 10 + (*j.p - '0');
	return digits ? (neg ? -v : v) : fallback;
}

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

EXPORT("compact_v1_truncate") uint64_t plugin_truncate(uint32_t ptr, uint32_t len) {
	uint8_t *in = (uint8_t *)(uintptr_t)ptr;
	uint64_t result;
	char category[64], header[256];
	const uint8_t *content = NULL;
	size_t content_len = 0;
	long long max_tokens, content_ref = -1;

	forget_answer();
	if (len < 12 || memcmp(in, "CHF", 3) != 0) {
		result = error_frame("invalid_request", "request is not a frame");
		goto done;
	}
	if (in[3] != 1) {
		result = error_frame("invalid_request", "request frame is not ABI v1");
		goto done;
	}
	uint32_t hlen = get_u32(in + 4);
	if (hlen > len - 12) {
		result = error_frame("invalid_request", "header runs past the frame");
		goto done;
	}
	json h = {(const char *)in + 8, (const char *)in + 8 + hlen}, body, v;
	if (!field(h, "body", &body)) {
		result = error_frame("invalid_request", "header has no body");
		goto done;
	}
	category[0] = 0;
	if (field(body, "category", &v))
		str(&v, category, sizeof category);
	if (strcmp(category, CATEGORY) != 0) {
		result = error_frame("unsupported", "only the log category is handled");
		goto done;
	}
	max_tokens = field(body, "max_tokens", &v) ? number(v, 0) : 0;
	if (max_tokens <= 0) {
		result = error_frame("invalid_request", "max_tokens must be positive");
		goto done;
	}
	if (field(body, "content", &v))
		content_ref = number(v, -1);

	/* Walk the blobs to the content. */
	const uint8_t *p = in + 8 + hlen, *end = in + len;
	uint32_t nblobs = get_u32(p);
	p += 4;
	for (uint32_t i = 0; i < nblobs; i++) {
		if (end - p < 4 || get_u32(p) > (uint32_t)(end - p - 4)) {
			result = error_frame("invalid_request", "blob runs past the frame");
			goto done;
		}
		uint32_t n = get_u32(p);
		if ((long long)i == content_ref)
			content = p + 4, content_len = n;
		p += 4 + n;
	}
	if (content_ref >= 0 && !content) {
		result = error_frame("invalid_request", "content refers to a missing blob");
		goto done;
	}

	size_t budget = (size_t)max_tokens * BYTES_PER_TOKEN;
	if (content_len <= budget) {
		result = frame(content_len ? "{\"body\":{\"content\":0,\"truncated\":false}}" : "{\"body\":{\"truncated\":false}}",
		               content, content_len, content_len > 0);
		goto done;
	}

	/* Pass 1: collapse runs of lines equal but for their numbers. */
	int crlf = 0;
	const uint8_t *first_nl = memchr(content, '\n', content_len);
	if (first_nl && first_nl > content && first_nl[-1] == '\r')
		crlf = 1;
	const char *eol = crlf ? "\r\n" : "\n";
	out_buf o = {malloc(content_len + 64), 0, content_len + 64};
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
	snprintf(header, sizeof header, "{\"body\":{\"content\":0,\"truncated\":true,\"omitted_bytes\":%zu,\"omitted_lines\":%zu}}",
	         omitted_bytes, omitted_lines);
	result = frame(header, o.buf, o.len, 1);
	free(o.buf);
done:
	return result;
}
