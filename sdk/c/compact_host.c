/* SPDX-License-Identifier: Apache-2.0 */
/*
 * compact_host.c: the C SDK of the compact-host plugin ABI, version 1.
 * See compact_host.h for the API and abi/README.md for the contract.
 */
#include "compact_host.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT(name) __attribute__((export_name(name)))
#define IMPORT(name) __attribute__((import_module("compact_host_v1"), import_name(name)))

/* ---- host imports: only those a plugin's code reaches are linked ------- */

IMPORT("call") int64_t ch_host_call(int32_t op, const void *ptr, uint32_t len);
IMPORT("result") int32_t ch_host_result(void *ptr, uint32_t len);
IMPORT("log") void ch_host_log(int32_t level, const void *ptr, uint32_t len);
IMPORT("deadline") int64_t ch_host_deadline(void);

#define OP_COMPLETE 1
#define OP_COUNT_TOKENS 2

/* ---- buffers and errors ------------------------------------------------ */

static int grow(ch_buf *b, size_t need) {
	if (b->failed)
		return 0;
	if (need <= b->cap)
		return 1;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < need) {
		if (cap > SIZE_MAX / 2) {
			cap = need;
			break;
		}
		cap *= 2;
	}
	uint8_t *p = realloc(b->data, cap);
	if (!p) {
		b->failed = 1;
		return 0;
	}
	b->data = p, b->cap = cap;
	return 1;
}

void ch_buf_put(ch_buf *b, const void *p, size_t n) {
	if (n == 0 || n > SIZE_MAX - b->len || !grow(b, b->len + n))
		return;
	memcpy(b->data + b->len, p, n);
	b->len += n;
}

void ch_buf_puts(ch_buf *b, const char *s) { ch_buf_put(b, s, strlen(s)); }

static void buf_vprintf(ch_buf *b, const char *fmt, va_list ap) {
	va_list ap2;
	va_copy(ap2, ap);
	int n = vsnprintf(NULL, 0, fmt, ap2);
	va_end(ap2);
	if (n <= 0 || !grow(b, b->len + (size_t)n + 1))
		return;
	vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
	b->len += (size_t)n;
}

void ch_buf_printf(ch_buf *b, const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	buf_vprintf(b, fmt, ap);
	va_end(ap);
}

void ch_buf_free(ch_buf *b) {
	free(b->data);
	memset(b, 0, sizeof *b);
}

int ch_fail(ch_error *err, const char *code, const char *fmt, ...) {
	va_list ap;
	snprintf(err->code, sizeof err->code, "%s", code);
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof err->message, fmt, ap);
	va_end(ap);
	return -1;
}

/* ---- JSON reader -------------------------------------------------------- */

static const char *ws(const char *p, const char *end) {
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

/* skip_string returns the position after the string starting at p, or NULL. */
static const char *skip_string(const char *p, const char *end) {
	for (p++; p < end; p++) {
		if (*p == '\\')
			p++;
		else if (*p == '"')
			return p + 1;
	}
	return NULL;
}

/* skip_value returns the position after the value starting at p, or NULL. */
static const char *skip_value(const char *p, const char *end) {
	p = ws(p, end);
	if (p >= end)
		return NULL;
	if (*p == '"')
		return skip_string(p, end);
	if (*p == '{' || *p == '[') {
		long depth = 0;
		while (p < end) {
			char c = *p;
			if (c == '"') {
				if (!(p = skip_string(p, end)))
					return NULL;
				continue;
			}
			if (c == '{' || c == '[')
				depth++;
			else if (c == '}' || c == ']') {
				if (--depth == 0)
					return p + 1;
			}
			p++;
		}
		return NULL;
	}
	const char *start = p;
	while (p < end && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
		p++;
	return p > start ? p : NULL;
}

int ch_json_present(ch_json v) {
	if (!v.p)
		return 0;
	const char *p = ws(v.p, v.end);
	return p < v.end && !(v.end - p >= 4 && memcmp(p, "null", 4) == 0);
}

int ch_json_field(ch_json obj, const char *key, ch_json *value) {
	size_t klen = strlen(key);
	if (!obj.p)
		return 0;
	const char *p = ws(obj.p, obj.end), *end = obj.end;
	if (p >= end || *p != '{')
		return 0;
	p++;
	for (;;) {
		p = ws(p, end);
		if (p >= end || *p != '"')
			return 0;
		const char *kstart = p + 1, *kend = skip_string(p, end);
		if (!kend)
			return 0;
		p = ws(kend, end);
		if (p >= end || *p != ':')
			return 0;
		const char *vstart = ws(p + 1, end), *vend = skip_value(vstart, end);
		if (!vend)
			return 0;
		if ((size_t)(kend - 1 - kstart) == klen && memcmp(kstart, key, klen) == 0) {
			value->p = vstart, value->end = vend;
			return 1;
		}
		p = ws(vend, end);
		if (p < end && *p == ',')
			p++;
		else
			return 0;
	}
}

int ch_json_next(ch_json *it, ch_json *elem) {
	if (!it->p)
		return 0;
	const char *p = ws(it->p, it->end);
	if (p < it->end && *p == '[') {
		p = ws(p + 1, it->end);
		if (p < it->end && *p == ']') {
			it->p = NULL;
			return 0;
		}
	} else if (p < it->end && *p == ',') {
		p++;
	} else {
		it->p = NULL;
		return 0;
	}
	const char *start = ws(p, it->end), *vend = skip_value(start, it->end);
	if (!vend) {
		it->p = NULL;
		return -1;
	}
	elem->p = start, elem->end = vend;
	it->p = vend;
	return 1;
}

static int hexval(char c) {
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static long hex4(const char *p, const char *end) {
	if (end - p < 4)
		return -1;
	long v = 0;
	for (int i = 0; i < 4; i++) {
		int h = hexval(p[i]);
		if (h < 0)
			return -1;
		v = v << 4 | h;
	}
	return v;
}

long ch_json_string(ch_json v, char *buf, size_t cap) {
	if (!v.p)
		return -1;
	const char *p = ws(v.p, v.end), *end = v.end;
	if (p >= end || *p != '"')
		return -1;
	long n = 0;
#define EMIT(ch)                                                                                                       \
	do {                                                                                                               \
		if (buf && (size_t)n + 1 < cap)                                                                                \
			buf[n] = (char)(ch);                                                                                       \
		n++;                                                                                                           \
	} while (0)
	for (p++; p < end && *p != '"'; p++) {
		if (*p != '\\') {
			EMIT(*p);
			continue;
		}
		if (++p >= end)
			return -1;
		switch (*p) {
		case 'b': EMIT('\b'); break;
		case 'f': EMIT('\f'); break;
		case 'n': EMIT('\n'); break;
		case 'r': EMIT('\r'); break;
		case 't': EMIT('\t'); break;
		case 'u': {
			long cp = hex4(p + 1, end);
			if (cp < 0)
				return -1;
			p += 4;
			if (cp >= 0xD800 && cp < 0xDC00 && end - p > 6 && p[1] == '\\' && p[2] == 'u') {
				long lo = hex4(p + 3, end);
				if (lo >= 0xDC00 && lo < 0xE000) {
					cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
					p += 6;
				}
			}
			if (cp >= 0xD800 && cp < 0xE000)
				cp = 0xFFFD;
			if (cp < 0x80) {
				EMIT(cp);
			} else if (cp < 0x800) {
				EMIT(0xC0 | cp >> 6);
				EMIT(0x80 | (cp & 0x3F));
			} else if (cp < 0x10000) {
				EMIT(0xE0 | cp >> 12);
				EMIT(0x80 | (cp >> 6 & 0x3F));
				EMIT(0x80 | (cp & 0x3F));
			} else {
				EMIT(0xF0 | cp >> 18);
				EMIT(0x80 | (cp >> 12 & 0x3F));
				EMIT(0x80 | (cp >> 6 & 0x3F));
				EMIT(0x80 | (cp & 0x3F));
			}
			break;
		}
		default: EMIT(*p); break; /* \" \\ \/ */
		}
	}
#undef EMIT
	if (p >= end)
		return -1;
	if (buf && cap)
		buf[(size_t)n < cap ? (size_t)n : cap - 1] = 0;
	return n;
}

int ch_json_str_eq(ch_json v, const char *s) {
	char buf[256];
	long n = ch_json_string(v, buf, sizeof buf);
	return n >= 0 && (size_t)n < sizeof buf && strcmp(buf, s) == 0;
}

int64_t ch_json_int(ch_json v, int64_t fallback) {
	if (!v.p)
		return fallback;
	const char *p = ws(v.p, v.end);
	int neg = 0, digits = 0;
	int64_t n = 0;
	if (p < v.end && *p == '-')
		neg = 1, p++;
	for (; p < v.end && *p >= '0' && *p <= '9'; p++, digits++)
		if (n < INT64_MAX / 10 - 10)
			n = n * 10 + (*p - '0');
	return digits ? (neg ? -n : n) : fallback;
}

int ch_json_bool(ch_json v) {
	if (!v.p)
		return 0;
	const char *p = ws(v.p, v.end);
	return v.end - p >= 4 && memcmp(p, "true", 4) == 0;
}

/* ---- frames ------------------------------------------------------------- */

static uint32_t get_u32(const uint8_t *p) {
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_u32(uint8_t *p, uint32_t v) {
	p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8), p[2] = (uint8_t)(v >> 16), p[3] = (uint8_t)(v >> 24);
}

int ch_frame_parse(const uint8_t *buf, uint32_t len, ch_frame *f, ch_error *err) {
	memset(f, 0, sizeof *f);
	if (!buf || len < 12)
		return ch_fail(err, CH_INVALID_REQUEST, "%u bytes is shorter than the smallest frame", (unsigned)len);
	if (memcmp(buf, "CHF", 3) != 0)
		return ch_fail(err, CH_INVALID_REQUEST, "not a frame: bad magic");
	if (buf[3] != CH_ABI_MAJOR)
		return ch_fail(err, CH_INVALID_REQUEST, "frame is ABI v%u, the plugin speaks v%d", buf[3], CH_ABI_MAJOR);
	uint32_t hlen = get_u32(buf + 4);
	if (hlen > len - 12)
		return ch_fail(err, CH_INVALID_REQUEST, "header length %u runs past the frame end", (unsigned)hlen);
	const uint8_t *p = buf + 8 + hlen;
	uint32_t n = get_u32(p), rest = len - 12 - hlen;
	p += 4;
	if (n > rest / 4)
		return ch_fail(err, CH_INVALID_REQUEST, "%u blobs cannot fit in %u bytes", (unsigned)n, (unsigned)rest);
	f->blobs = p, f->nblobs = n, f->blobs_len = rest;
	for (uint32_t i = 0; i < n; i++) {
		if (rest < 4 || get_u32(p) > rest - 4)
			return ch_fail(err, CH_INVALID_REQUEST, "blob %u runs past the frame end", (unsigned)i);
		uint32_t l = get_u32(p);
		p += 4 + l, rest -= 4 + l;
	}
	if (rest != 0)
		return ch_fail(err, CH_INVALID_REQUEST, "%u trailing bytes after the last blob", (unsigned)rest);
	f->header.p = (const char *)buf + 8, f->header.end = (const char *)buf + 8 + hlen;
	int has_body = ch_json_field(f->header, "body", &f->body);
	int has_error = ch_json_field(f->header, "error", &f->error);
	if (has_body == has_error)
		return ch_fail(err, CH_INVALID_REQUEST, "the header needs exactly one of body and error");
	return 0;
}

int ch_frame_blob(const ch_frame *f, ch_json v, ch_bytes *out) {
	out->data = NULL, out->len = 0;
	if (!ch_json_present(v))
		return 0;
	int64_t ref = ch_json_int(v, -1);
	if (ref < 0 || ref >= f->nblobs)
		return -1;
	/* The cache is not part of the frame's value, so a const frame may
	 * update it. */
	ch_frame *m = (ch_frame *)f;
	uint32_t i = 0;
	const uint8_t *p = f->blobs;
	if (m->seen_at && m->seen_index <= ref)
		i = m->seen_index, p = m->seen_at;
	for (; i < ref; i++)
		p += 4 + get_u32(p);
	m->seen_index = i, m->seen_at = p;
	out->data = p + 4, out->len = get_u32(p);
	return 0;
}

/* ---- frame writer ------------------------------------------------------- */

static void put_escaped(ch_buf *b, const char *s, size_t n) {
	static const char hex[] = "0123456789abcdef";
	ch_buf_put(b, "\"", 1);
	size_t run = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		ch_buf_put(b, s + run, i - run);
		run = i + 1;
		char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
		if (c == '"' || c == '\\')
			e[1] = (char)c, ch_buf_put(b, e, 2);
		else if (c == '\n')
			ch_buf_put(b, "\\n", 2);
		else
			ch_buf_put(b, e, 6);
	}
	ch_buf_put(b, s + run, n - run);
	ch_buf_put(b, "\"", 1);
}

void ch_w_init(ch_writer *w) {
	memset(w, 0, sizeof *w);
	ch_buf_puts(&w->header, "{\"body\":{");
	w->depth = 1;
}

void ch_w_key(ch_writer *w, const char *key) {
	if (w->need_comma[w->depth])
		ch_buf_put(&w->header, ",", 1);
	w->need_comma[w->depth] = 1;
	if (key) {
		put_escaped(&w->header, key, strlen(key));
		ch_buf_put(&w->header, ":", 1);
	}
}

void ch_w_strn(ch_writer *w, const char *key, const char *s, size_t n) {
	ch_w_key(w, key);
	put_escaped(&w->header, s, n);
}

void ch_w_str(ch_writer *w, const char *key, const char *s) { ch_w_strn(w, key, s, strlen(s)); }

void ch_w_int(ch_writer *w, const char *key, int64_t v) {
	ch_w_key(w, key);
	ch_buf_printf(&w->header, "%lld", (long long)v);
}

void ch_w_bool(ch_writer *w, const char *key, int v) {
	ch_w_key(w, key);
	ch_buf_puts(&w->header, v ? "true" : "false");
}

void ch_w_blob(ch_writer *w, const char *key, const void *p, size_t n) {
	uint8_t l[4];
	if (n == 0)
		return;
	if (n > UINT32_MAX) {
		w->blobs.failed = 1;
		return;
	}
	ch_w_int(w, key, w->nblobs++);
	put_u32(l, (uint32_t)n);
	ch_buf_put(&w->blobs, l, 4);
	ch_buf_put(&w->blobs, p, n);
}

void ch_w_open(ch_writer *w, const char *key, char kind) {
	ch_w_key(w, key);
	ch_buf_put(&w->header, &kind, 1);
	if (w->depth < 32)
		w->need_comma[++w->depth] = 0;
	else
		w->header.failed = 1;
}

void ch_w_close(ch_writer *w, char kind) {
	char c = kind == '[' ? ']' : '}';
	ch_buf_put(&w->header, &c, 1);
	if (w->depth > 1)
		w->depth--;
}

void ch_w_raw(ch_writer *w, const char *key, const char *json, size_t n) {
	ch_w_key(w, key);
	ch_buf_put(&w->header, json, n);
}

void ch_w_free(ch_writer *w) {
	ch_buf_free(&w->header);
	ch_buf_free(&w->blobs);
}

static uint8_t *layout(ch_buf *header, ch_buf *blobs, uint32_t nblobs, uint32_t *len) {
	uint8_t *out = NULL;
	if (header->failed || blobs->failed || header->len > UINT32_MAX - 12 ||
	    blobs->len > UINT32_MAX - 12 - header->len)
		return NULL;
	size_t n = 12 + header->len + blobs->len;
	if (!(out = malloc(n)))
		return NULL;
	memcpy(out, "CHF\x01", 4);
	put_u32(out + 4, (uint32_t)header->len);
	if (header->len)
		memcpy(out + 8, header->data, header->len);
	put_u32(out + 8 + header->len, nblobs);
	if (blobs->len)
		memcpy(out + 12 + header->len, blobs->data, blobs->len);
	*len = (uint32_t)n;
	return out;
}

uint8_t *ch_w_finish(ch_writer *w, uint32_t *len) {
	ch_buf_puts(&w->header, "}}");
	uint8_t *out = layout(&w->header, &w->blobs, w->nblobs, len);
	ch_w_free(w);
	return out;
}

static uint8_t *error_frame(const char *code, const char *message, uint32_t *len) {
	ch_buf h = {0}, none = {0};
	ch_buf_puts(&h, "{\"error\":{\"code\":");
	put_escaped(&h, code, strlen(code));
	ch_buf_puts(&h, ",\"message\":");
	put_escaped(&h, message, strlen(message));
	ch_buf_puts(&h, "}}");
	uint8_t *out = layout(&h, &none, 0, len);
	ch_buf_free(&h);
	return out;
}

/* ---- documents ---------------------------------------------------------- */

static void str_field(ch_json obj, const char *key, char *buf, size_t cap) {
	ch_json v;
	buf[0] = 0;
	if (ch_json_field(obj, key, &v))
		ch_json_string(v, buf, cap);
}

static int bool_field(ch_json obj, const char *key) {
	ch_json v;
	return ch_json_field(obj, key, &v) && ch_json_bool(v);
}

static int blob_field(const ch_frame *f, ch_json obj, const char *key, ch_bytes *out) {
	ch_json v = {0};
	ch_json_field(obj, key, &v);
	return ch_frame_blob(f, v, out);
}

int ch_next_message(const ch_summarize_request *req, ch_json *it, ch_message *m) {
	ch_json e;
	int r = ch_json_next(it, &e);
	if (r <= 0)
		return r;
	memset(m, 0, sizeof *m);
	str_field(e, "id", m->id, sizeof m->id);
	str_field(e, "role", m->role, sizeof m->role);
	m->pinned = bool_field(e, "pinned");
	m->summary = bool_field(e, "summary");
	ch_json_field(e, "content", &m->content);
	(void)req;
	return 1;
}

int ch_next_block(const ch_summarize_request *req, ch_json *it, ch_block *b) {
	ch_json e;
	int r = ch_json_next(it, &e);
	if (r <= 0)
		return r;
	memset(b, 0, sizeof *b);
	str_field(e, "type", b->type, sizeof b->type);
	str_field(e, "id", b->id, sizeof b->id);
	str_field(e, "name", b->name, sizeof b->name);
	str_field(e, "tool_use_id", b->tool_use_id, sizeof b->tool_use_id);
	str_field(e, "media_type", b->media_type, sizeof b->media_type);
	ch_json_field(e, "input", &b->input);
	b->is_error = bool_field(e, "is_error");
	if (blob_field(req->frame, e, "text", &b->text) < 0 || blob_field(req->frame, e, "data", &b->data) < 0)
		return -1;
	return 1;
}

/* ---- host functions ------------------------------------------------------ */

void ch_log(int level, const char *fmt, ...) {
	char line[2048];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	ch_host_log(level, line, (size_t)n < sizeof line ? (uint32_t)n : sizeof line - 1);
}

int64_t ch_deadline(void) { return ch_host_deadline(); }

/* round_trip sends a request frame for op and decodes the host's answer
 * into f, whose bytes live in *answer (freed by the caller). */
static int round_trip(int32_t op, ch_writer *w, ch_frame *f, uint8_t **answer, ch_error *err) {
	uint32_t len;
	uint8_t *req = ch_w_finish(w, &len);
	*answer = NULL;
	if (!req)
		return ch_fail(err, CH_INTERNAL, "out of memory building a host request");
	int64_t n = ch_host_call(op, req, len);
	free(req);
	if (n < 0)
		return ch_fail(err, CH_INTERNAL, "the host refused the request (%lld)", (long long)n);
	if (!(*answer = malloc(n ? (size_t)n : 1)))
		return ch_fail(err, CH_INTERNAL, "out of memory for a %lld byte host answer", (long long)n);
	int32_t got = ch_host_result(*answer, (uint32_t)n);
	if (ch_frame_parse(*answer, (uint32_t)got, f, err) < 0)
		return ch_fail(err, CH_INTERNAL, "the host's answer is malformed: %s", err->message);
	if (ch_json_present(f->error)) {
		char code[sizeof err->code], msg[sizeof err->message];
		str_field(f->error, "code", code, sizeof code);
		str_field(f->error, "message", msg, sizeof msg);
		return ch_fail(err, code[0] ? code : CH_INTERNAL, "%s", msg);
	}
	return 0;
}

int64_t ch_count_tokens(const void *text, size_t len, ch_error *err) {
	ch_writer w;
	ch_frame f;
	uint8_t *answer;
	ch_json v;
	ch_w_init(&w);
	ch_w_blob(&w, "text", text, len);
	int64_t tokens = -1;
	if (round_trip(OP_COUNT_TOKENS, &w, &f, &answer, err) == 0)
		tokens = ch_json_field(f.body, "tokens", &v) ? ch_json_int(v, 0) : 0;
	free(answer);
	return tokens;
}

int ch_complete(const ch_complete_request *req, ch_complete_response *resp, ch_error *err) {
	ch_writer w;
	ch_frame f;
	uint8_t *answer;
	ch_json v, usage;
	memset(resp, 0, sizeof *resp);
	ch_w_init(&w);
	if (req->system)
		ch_w_blob(&w, "system", req->system, strlen(req->system));
	ch_w_open(&w, "messages", '[');
	for (size_t i = 0; i < req->nmessages; i++) {
		ch_w_open(&w, NULL, '{');
		ch_w_str(&w, "role", req->messages[i].role);
		ch_w_open(&w, "content", '[');
		ch_w_open(&w, NULL, '{');
		ch_w_str(&w, "type", "text");
		ch_w_blob(&w, "text", req->messages[i].text, req->messages[i].len);
		ch_w_close(&w, '{');
		ch_w_close(&w, '[');
		ch_w_close(&w, '{');
	}
	ch_w_close(&w, '[');
	if (req->max_tokens > 0)
		ch_w_int(&w, "max_tokens", req->max_tokens);
	int r = round_trip(OP_COMPLETE, &w, &f, &answer, err);
	if (r == 0) {
		ch_bytes text;
		if (blob_field(&f, f.body, "text", &text) < 0) {
			r = ch_fail(err, CH_INTERNAL, "the host's answer refers to a missing blob");
		} else {
			ch_buf_put(&resp->text, text.data, text.len);
			str_field(f.body, "model", resp->model, sizeof resp->model);
			if (ch_json_field(f.body, "usage", &usage)) {
				resp->input_tokens = ch_json_field(usage, "input_tokens", &v) ? ch_json_int(v, 0) : 0;
				resp->output_tokens = ch_json_field(usage, "output_tokens", &v) ? ch_json_int(v, 0) : 0;
			}
		}
	}
	free(answer);
	return r;
}

/* ---- exports -------------------------------------------------------------- */

EXPORT("compact_plugin_abi_v1") void ch_export_marker(void) {}

EXPORT("compact_v1_alloc") void *ch_export_alloc(uint32_t size) { return malloc(size ? size : 1); }

EXPORT("compact_v1_free") void ch_export_free(void *ptr) { free(ptr); }

/* last_answer is the previous call's answer frame, freed at the next call. */
static uint8_t *last_answer;

/* out_of_memory is the answer when not even an error frame can be built. */
static uint8_t out_of_memory[96];

static uint64_t answer(uint8_t *frame, uint32_t len) {
	if (!frame) {
		static const char h[] = "{\"error\":{\"code\":\"internal\",\"message\":\"plugin out of memory\"}}";
		uint32_t hl = sizeof h - 1;
		memcpy(out_of_memory, "CHF\x01", 4);
		put_u32(out_of_memory + 4, hl);
		memcpy(out_of_memory + 8, h, hl);
		put_u32(out_of_memory + 8 + hl, 0);
		return (uint64_t)(uintptr_t)out_of_memory << 32 | (12 + hl);
	}
	last_answer = frame;
	return (uint64_t)(uintptr_t)frame << 32 | len;
}

static uint64_t fail_answer(const ch_error *err) {
	uint32_t len = 0;
	uint8_t *f = error_frame(err->code[0] ? err->code : CH_INTERNAL, err->message, &len);
	return answer(f, len);
}

static void begin_call(void) {
	free(last_answer);
	last_answer = NULL;
}

EXPORT("compact_v1_info") uint64_t ch_export_info(void) {
	const ch_plugin *p = ch_the_plugin;
	ch_writer w;
	uint32_t len = 0;
	begin_call();
	ch_w_init(&w);
	ch_w_int(&w, "abi_major", CH_ABI_MAJOR);
	ch_w_int(&w, "abi_minor", CH_ABI_MINOR);
	ch_w_str(&w, "name", p->name);
	if (p->version)
		ch_w_str(&w, "version", p->version);
	if (p->description)
		ch_w_str(&w, "description", p->description);
	ch_w_open(&w, "kinds", '[');
	if (p->summarize)
		ch_w_str(&w, NULL, "strategy");
	if (p->truncate)
		ch_w_str(&w, NULL, "truncator");
	ch_w_close(&w, '[');
	if (p->categories) {
		ch_w_open(&w, "categories", '[');
		for (const char *const *c = p->categories; *c; c++)
			ch_w_str(&w, NULL, *c);
		ch_w_close(&w, '[');
	}
	uint8_t *f = ch_w_finish(&w, &len);
	return answer(f, len);
}

/* request_body parses a request frame and returns its body. */
static int request_body(const uint8_t *ptr, uint32_t len, ch_frame *f, ch_error *err) {
	if (ch_frame_parse(ptr, len, f, err) < 0)
		return -1;
	if (ch_json_present(f->error))
		return ch_fail(err, CH_INVALID_REQUEST, "the request is an error frame");
	const char *p = ws(f->body.p, f->body.end);
	if (p >= f->body.end || *p != '{')
		return ch_fail(err, CH_INVALID_REQUEST, "the request body is not an object");
	return 0;
}

EXPORT("compact_v1_summarize") uint64_t ch_export_summarize(const uint8_t *ptr, uint32_t len) {
	const ch_plugin *p = ch_the_plugin;
	ch_error err = {{0}, {0}};
	ch_frame f;
	ch_summarize_request req;
	ch_summarize_response resp;
	ch_json v, ops;
	begin_call();
	if (!p->summarize) {
		ch_fail(&err, CH_UNSUPPORTED, "plugin %s is not a strategy", p->name);
		return fail_answer(&err);
	}
	if (request_body(ptr, len, &f, &err) < 0)
		return fail_answer(&err);
	memset(&req, 0, sizeof req);
	memset(&resp, 0, sizeof resp);
	req.frame = &f;
	str_field(f.body, "kind", req.kind, sizeof req.kind);
	ch_json_field(f.body, "messages", &req.messages);
	if (ch_json_field(f.body, "file_ops", &ops)) {
		ch_json_field(ops, "read", &req.files_read);
		ch_json_field(ops, "modified", &req.files_modified);
	}
	req.target_tokens = ch_json_field(f.body, "target_tokens", &v) ? ch_json_int(v, 0) : 0;
	req.model_available = bool_field(f.body, "model_available");
	if (blob_field(&f, f.body, "previous_summary", &req.previous_summary) < 0 ||
	    blob_field(&f, f.body, "focus", &req.focus) < 0) {
		ch_fail(&err, CH_INVALID_REQUEST, "a blob reference is outside the frame");
		return fail_answer(&err);
	}
	if (p->summarize(&req, &resp, &err) != 0) {
		ch_buf_free(&resp.summary);
		return fail_answer(&err);
	}
	if (resp.summary.failed) {
		ch_buf_free(&resp.summary);
		ch_fail(&err, CH_INTERNAL, "plugin %s ran out of memory", p->name);
		return fail_answer(&err);
	}
	ch_writer w;
	uint32_t out_len = 0;
	ch_w_init(&w);
	ch_w_blob(&w, "summary", resp.summary.data, resp.summary.len);
	if (resp.offline)
		ch_w_bool(&w, "offline", 1);
	ch_buf_free(&resp.summary);
	uint8_t *out = ch_w_finish(&w, &out_len);
	return answer(out, out_len);
}

static int declares(const ch_plugin *p, const char *category) {
	if (!p->categories)
		return 1;
	for (const char *const *c = p->categories; *c; c++)
		if (strcmp(*c, category) == 0)
			return 1;
	return 0;
}

EXPORT("compact_v1_truncate") uint64_t ch_export_truncate(const uint8_t *ptr, uint32_t len) {
	const ch_plugin *p = ch_the_plugin;
	ch_error err = {{0}, {0}};
	ch_frame f;
	ch_truncate_request req;
	ch_truncate_response resp;
	ch_json v;
	begin_call();
	if (!p->truncate) {
		ch_fail(&err, CH_UNSUPPORTED, "plugin %s is not a truncator", p->name);
		return fail_answer(&err);
	}
	if (request_body(ptr, len, &f, &err) < 0)
		return fail_answer(&err);
	memset(&req, 0, sizeof req);
	memset(&resp, 0, sizeof resp);
	long clen = ch_json_field(f.body, "category", &v) ? ch_json_string(v, req.category, sizeof req.category) : 0;
	if (clen < 0 || (size_t)clen >= sizeof req.category || !declares(p, req.category)) {
		ch_fail(&err, CH_UNSUPPORTED, "plugin %s does not truncate category \"%s\"", p->name, req.category);
		return fail_answer(&err);
	}
	str_field(f.body, "tool_name", req.tool_name, sizeof req.tool_name);
	req.max_tokens = ch_json_field(f.body, "max_tokens", &v) ? ch_json_int(v, 0) : 0;
	if (blob_field(&f, f.body, "content", &req.content) < 0) {
		ch_fail(&err, CH_INVALID_REQUEST, "content refers to a blob outside the frame");
		return fail_answer(&err);
	}
	if (p->truncate(&req, &resp, &err) != 0) {
		ch_buf_free(&resp.content);
		return fail_answer(&err);
	}
	if (resp.content.failed) {
		ch_buf_free(&resp.content);
		ch_fail(&err, CH_INTERNAL, "plugin %s ran out of memory", p->name);
		return fail_answer(&err);
	}
	ch_writer w;
	uint32_t out_len = 0;
	ch_w_init(&w);
	ch_w_blob(&w, "content", resp.content.data, resp.content.len);
	ch_w_bool(&w, "truncated", resp.truncated);
	if (resp.omitted_bytes)
		ch_w_int(&w, "omitted_bytes", resp.omitted_bytes);
	if (resp.omitted_lines)
		ch_w_int(&w, "omitted_lines", resp.omitted_lines);
	ch_buf_free(&resp.content);
	uint8_t *out = ch_w_finish(&w, &out_len);
	return answer(out, out_len);
}
