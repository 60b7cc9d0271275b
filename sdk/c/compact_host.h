/* SPDX-License-Identifier: Apache-2.0 */
/*
 * compact_host.h: the C SDK of the compact-host plugin ABI, version 1.
 *
 * A plugin is one C file plus compact_host.c, built with Debian's clang and
 * wasi-libc (apt-get install -y clang lld wasi-libc libclang-rt-14-dev-wasm32):
 *
 *   clang --target=wasm32-wasi --sysroot=/usr -O2 -mexec-model=reactor \
 *         -Wl,--strip-all -I sdk/c -o mine.wasm mine.c sdk/c/compact_host.c
 *
 * The plugin fills a ch_plugin and names it with CH_PLUGIN(...); this
 * library defines every export the host looks for (compact_plugin_abi_v1,
 * compact_v1_alloc/free/info/summarize/truncate), decodes the request frame
 * into the typed request below, calls the plugin's function, and encodes
 * its answer or error as a frame. abi/README.md is the contract; this file
 * only follows it.
 *
 * Allocator contract (abi/README.md, "Memory ownership"): the host's
 * request buffers come from malloc through compact_v1_alloc and go back
 * through compact_v1_free; an answer frame is malloc'd here and freed at
 * the instance's next export call, so it stays readable while the host
 * copies it out. Everything a request points to (strings, blobs) lives in
 * the host's request buffer and is valid only during the call.
 *
 * No third-party code; the JSON reader reads just the documents of the ABI.
 */
#ifndef COMPACT_HOST_H
#define COMPACT_HOST_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CH_ABI_MAJOR 1
#define CH_ABI_MINOR 0

/* ---- bytes, buffers, errors ------------------------------------------- */

/* ch_bytes is a view of bytes owned by someone else. */
typedef struct {
	const uint8_t *data;
	uint32_t len;
} ch_bytes;

/* ch_buf is a growing byte buffer owned by the SDK or the plugin. */
typedef struct {
	uint8_t *data;
	size_t len, cap;
	int failed; /* an allocation failed; the content is incomplete */
} ch_buf;

void ch_buf_put(ch_buf *b, const void *p, size_t n);
void ch_buf_puts(ch_buf *b, const char *s);
void ch_buf_printf(ch_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ch_buf_free(ch_buf *b);

/* Error codes of abi/README.md, "Errors". */
#define CH_INVALID_REQUEST "invalid_request"
#define CH_UNSUPPORTED "unsupported"
#define CH_NO_MODEL "no_model"
#define CH_MODEL_ERROR "model_error"
#define CH_DEADLINE "deadline"
#define CH_TOO_LARGE "too_large"
#define CH_INTERNAL "internal"

typedef struct {
	char code[32];
	char message[480];
} ch_error;

/* ch_fail fills err and returns -1, so a handler can `return ch_fail(...)`. */
int ch_fail(ch_error *err, const char *code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- a JSON value inside a frame header ------------------------------- */

/* ch_json is a view of one JSON value (or of nothing: p == NULL). */
typedef struct {
	const char *p, *end;
} ch_json;

int ch_json_present(ch_json v);
/* ch_json_field finds key in object obj; 0 when absent. */
int ch_json_field(ch_json obj, const char *key, ch_json *value);
/* ch_json_next steps an array iterator: start with it = the array. */
int ch_json_next(ch_json *it, ch_json *elem);
/* ch_json_string decodes a string into buf (NUL-terminated, cut to cap,
 * escapes decoded to UTF-8); returns its full decoded length, -1 if v is
 * not a string. */
long ch_json_string(ch_json v, char *buf, size_t cap);
int ch_json_str_eq(ch_json v, const char *s);
int64_t ch_json_int(ch_json v, int64_t fallback);
int ch_json_bool(ch_json v);

/* ---- frames ------------------------------------------------------------ */

typedef struct {
	ch_json header;  /* the whole header object */
	ch_json body;    /* its "body", if any */
	ch_json error;   /* its "error", if any */
	const uint8_t *blobs; /* the blob section, after nblobs */
	uint32_t nblobs;
	uint32_t blobs_len;
	/* where the last blob lookup ended: blobs are mostly read in order, so
	 * the next lookup walks on from there instead of from blob 0 */
	uint32_t seen_index;
	const uint8_t *seen_at;
} ch_frame;

/* ch_frame_parse checks the layout of a frame (magic, lengths, nothing
 * trailing); 0 on success, else -1 with err set to invalid_request. */
int ch_frame_parse(const uint8_t *buf, uint32_t len, ch_frame *f, ch_error *err);
/* ch_frame_blob resolves the blob reference held by v (absent: empty);
 * -1 when it points past the frame's blobs. */
int ch_frame_blob(const ch_frame *f, ch_json v, ch_bytes *out);

/* ch_writer writes a frame: a JSON header and the blobs it refers to.
 * Keys and values go in order; containers nest up to 32 deep. */
typedef struct {
	ch_buf header;
	ch_buf blobs;
	uint32_t nblobs;
	int depth;
	uint8_t need_comma[33];
} ch_writer;

void ch_w_init(ch_writer *w);    /* starts {"body":{ */
void ch_w_key(ch_writer *w, const char *key);
void ch_w_str(ch_writer *w, const char *key, const char *s);
void ch_w_strn(ch_writer *w, const char *key, const char *s, size_t n);
void ch_w_int(ch_writer *w, const char *key, int64_t v);
void ch_w_bool(ch_writer *w, const char *key, int v);
/* ch_w_blob writes a blob reference; empty content writes nothing. */
void ch_w_blob(ch_writer *w, const char *key, const void *p, size_t n);
/* ch_w_open/close start and end an object '{' or array '['; key may be
 * NULL inside an array. */
void ch_w_open(ch_writer *w, const char *key, char kind);
void ch_w_close(ch_writer *w, char kind);
/* ch_w_raw writes a JSON value as it is (a tool_use input). */
void ch_w_raw(ch_writer *w, const char *key, const char *json, size_t n);
/* ch_w_finish ends the document and lays the frame out in a fresh malloc'd
 * buffer; NULL when out of memory. The writer is freed either way. */
uint8_t *ch_w_finish(ch_writer *w, uint32_t *len);
void ch_w_free(ch_writer *w);

/* ---- documents --------------------------------------------------------- */

typedef struct {
	char type[16]; /* text, thinking, tool_use, tool_result, image */
	ch_bytes text; /* text, thinking, tool_result */
	char id[128], name[128], tool_use_id[128];
	ch_json input; /* tool_use arguments, raw JSON */
	int is_error;
	char media_type[64];
	ch_bytes data; /* image */
} ch_block;

typedef struct {
	char id[128];
	char role[16];
	int pinned, summary;
	ch_json content; /* iterate with ch_next_block */
} ch_message;

typedef struct {
	char kind[16]; /* "history" or "turn_prefix" */
	ch_json messages;
	ch_bytes previous_summary, focus;
	ch_json files_read, files_modified; /* arrays of strings */
	int64_t target_tokens;
	int model_available;
	const ch_frame *frame;
} ch_summarize_request;

typedef struct {
	ch_buf summary;
	int offline;
} ch_summarize_response;

typedef struct {
	char category[64];
	char tool_name[128];
	ch_bytes content;
	int64_t max_tokens;
} ch_truncate_request;

typedef struct {
	ch_buf content;
	int truncated;
	int64_t omitted_bytes, omitted_lines;
} ch_truncate_response;

/* ch_next_message / ch_next_block step through req->messages and
 * msg->content; start with it = the array, stop at 0. -1 on a bad
 * document or a blob reference outside the frame. */
int ch_next_message(const ch_summarize_request *req, ch_json *it, ch_message *m);
int ch_next_block(const ch_summarize_request *req, ch_json *it, ch_block *b);

/* ---- host functions (module compact_host_v1) -------------------------- */

/* Levels of log/slog. */
#define CH_DEBUG (-4)
#define CH_INFO 0
#define CH_WARN 4
#define CH_ERROR 8

void ch_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* ch_deadline is the call's deadline in Unix nanoseconds, 0 if none. */
int64_t ch_deadline(void);
/* ch_count_tokens counts with the host's tokenizer; -1 with err set. */
int64_t ch_count_tokens(const void *text, size_t len, ch_error *err);

typedef struct {
	const char *role; /* "user" or "assistant" */
	const char *text;
	size_t len;
} ch_text_message;

typedef struct {
	const char *system; /* NUL-terminated, may be NULL */
	const ch_text_message *messages;
	size_t nmessages;
	int64_t max_tokens;
} ch_complete_request;

typedef struct {
	ch_buf text; /* the plugin frees it with ch_buf_free */
	char model[128];
	int64_t input_tokens, output_tokens;
} ch_complete_response;

/* ch_complete asks the host's model; 0 on success, else -1 with err set
 * (code no_model when the host has none: run an offline mode). */
int ch_complete(const ch_complete_request *req, ch_complete_response *resp, ch_error *err);

/* ---- registration ------------------------------------------------------ */

/* A handler returns 0 and fills its response, or returns ch_fail(err, ...). */
typedef int (*ch_summarize_fn)(const ch_summarize_request *req, ch_summarize_response *resp, ch_error *err);
typedef int (*ch_truncate_fn)(const ch_truncate_request *req, ch_truncate_response *resp, ch_error *err);

typedef struct {
	const char *name;        /* required */
	const char *version;     /* optional */
	const char *description; /* optional */
	ch_summarize_fn summarize;  /* set: a strategy */
	ch_truncate_fn truncate;    /* set: a truncator */
	const char *const *categories; /* NULL-terminated; a truncator's categories */
} ch_plugin;

/* CH_PLUGIN(p) publishes the plugin p, as sdk.Serve does in Go. Use it
 * once per module. */
#define CH_PLUGIN(p) const ch_plugin *const ch_the_plugin = &(p)
extern const ch_plugin *const ch_the_plugin;

#ifdef __cplusplus
}
#endif
#endif
