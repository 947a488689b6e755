/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http/h1.h - an HTTP/1.x message parser for hostile input, shared by the proxy (both
 * directions of every intercepted connection) and the HTTP servers of both daemons.
 *
 * It wraps llhttp 9.2 in strict mode (no lenient flag is ever set) and adds what a proxy needs
 * on top: a capped head (SL_ETOOBIG -> 431), a capped header count, capped chunk extensions, the
 * framing rules of
 * docs/reference/proxy.md §4.6 that llhttp leaves to the application (Transfer-Encoding other than
 * exactly `chunked`, Transfer-Encoding on HTTP/1.0, more than one Host, a CONNECT request with a
 * body, a 101 response without an upgrade), and a pull-style interface that hands out one event per
 * call so the caller can stop between any two events (to run policy after the head, or to wait for
 * a slow peer to drain before taking more body bytes).
 *
 * Lifecycle: sl_h1_init() on caller storage -> sl_h1_feed() repeatedly -> sl_h1_eof() when
 * the peer closes -> sl_h1_finish() frees the parser's own memory.
 * Messages follow each other on one parser (keep-alive, pipelining); after SL_H1_EV_END the
 * next sl_h1_feed() starts the next message. The head of the current message lives in the
 * arena given at init until the caller resets that arena (after SL_H1_EV_END at the latest).
 */
#ifndef SL_HTTP_H1_H
#define SL_HTTP_H1_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <llhttp.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/slice.h"

enum sl_h1_kind {
    SL_H1_REQUEST = 0,
    SL_H1_RESPONSE,
};

/* How the body of a message is delimited, as decided from its head. */
enum sl_h1_body {
    /* No body (GET without length, 204, 304, a response to HEAD, ...). */
    SL_H1_BODY_NONE = 0,
    /* Exactly `content_length` bytes. */
    SL_H1_BODY_LENGTH,
    /* Transfer-Encoding: chunked; body events carry the decoded data. */
    SL_H1_BODY_CHUNKED,
    /* A response whose body runs until the connection closes. */
    SL_H1_BODY_CLOSE,
};

struct sl_h1_header {
    /* Name and value as received (value without surrounding whitespace); arena-owned,
     * NUL-terminated. */
    struct sl_slice name;
    struct sl_slice value;
};

struct sl_h1_head {
    /* Requests: method name (e.g. "GET"), request target as sent. Arena-owned. */
    const char *method;
    const char *target;
    /* Responses: status code and reason phrase (reason may be ""). */
    int status;
    const char *reason;
    /* HTTP version, 1.0 or 1.1. */
    uint8_t version_major;
    uint8_t version_minor;
    /* Headers in arrival order; `n_headers` entries. Arena-owned. */
    struct sl_h1_header *headers;
    size_t n_headers;
    /* Framing decided from the head. `content_length` is valid for SL_H1_BODY_LENGTH. */
    enum sl_h1_body body;
    uint64_t content_length;
    /* True when the connection may carry another message after this one. */
    bool keep_alive;
    /* True for CONNECT requests and for messages that ask for (or grant, with 101) an upgrade. */
    bool upgrade;
    /* Requests: true when `Expect: 100-continue` was sent. */
    bool expect_continue;
};

enum sl_h1_event_type {
    /* Everything given was consumed; feed more bytes. */
    SL_H1_EV_NONE = 0,
    /* The head is complete: sl_h1_head() describes it. No body byte has been consumed yet. */
    SL_H1_EV_HEAD,
    /* `body` holds body bytes (decoded from chunked framing where used). */
    SL_H1_EV_BODY,
    /* The message is complete. */
    SL_H1_EV_END,
    /* The message completed and the connection switches protocol (CONNECT, 101): every byte
     * after the consumed ones belongs to the new protocol, and the parser is done. */
    SL_H1_EV_UPGRADE,
};

struct sl_h1_event {
    enum sl_h1_event_type type;
    /* SL_H1_EV_BODY: borrowed from the input given to sl_h1_feed(). */
    struct sl_slice body;
};

struct sl_h1_limits {
    /* Most bytes of a head (request/status line + headers + trailers). */
    size_t head_max_bytes;
    /* Most header lines in a head. */
    size_t headers_max;
};

/* The defaults of docs/reference/proxy.md §4.10: 64 KiB, 256 headers. */
extern const struct sl_h1_limits sl_h1_default_limits;

/* Chunk extensions (`5;name=value`, RFC 9112 §7.1.1) are parsed and dropped, never forwarded, but
 * each byte costs the parser: their bytes (names and values) are capped per chunk-size line and
 * per message; beyond either, SL_ETOOBIG (docs/reference/proxy.md §4.10). */
#define SL_H1_CHUNK_EXT_LINE_MAX ((size_t)4 * 1024)
#define SL_H1_CHUNK_EXT_MSG_MAX  ((size_t)64 * 1024)

struct sl_h1 {
    llhttp_t _llhttp;
    enum sl_h1_kind _kind;
    struct sl_h1_limits _limits;
    /* Borrowed; the head's strings and header array are carved from it. */
    struct sl_arena *_arena;
    struct sl_h1_head _head;
    /* Header array capacity (entries allocated in the arena). */
    size_t _headers_cap;
    /* Head bytes seen for the current message. */
    size_t _head_bytes;
    /* Trailer fields of the message so far: they count against headers_max with its headers. */
    size_t _trailer_fields;
    /* Chunk extension bytes of the current chunk-size line, and of the current message. */
    size_t _ext_line;
    size_t _ext_msg;
    /* The span being received (method, target, reason, header name or value), capped at
     * the head limit; owned. */
    struct sl_buf _span;
    /* The completed name of the header whose value is being received; arena-owned. */
    struct sl_slice _name;
    /* The parser is inside a body (trailers are counted but not kept). */
    bool _in_body;
    /* The next response has no body whatever its head says (response to HEAD or CONNECT). */
    bool _no_body;
    /* An event recorded by a callback for the current sl_h1_feed() call. */
    enum sl_h1_event_type _ev;
    struct sl_slice _ev_body;
    /* An SL_H1_EV_END or SL_H1_EV_UPGRADE owed after an SL_H1_EV_HEAD for a message without
     * a body; `_pending` says which. */
    bool _end_pending;
    enum sl_h1_event_type _pending;
    /* An error was reported; the parser accepts nothing more. */
    bool _failed;
    /* The parser met an upgrade and is done. */
    bool _upgraded;
    /* Where this sl_h1_feed() call's data starts and how many head bytes of the message came
     * before it, so that a span callback's pointer gives its offset in the head. */
    const uint8_t *_feed_data;
    size_t _feed_off;
    /* The offset in the head just past the request line's last element so far (the method,
     * the target, the version): the next one must follow one space. */
    size_t _line_end;
    /* The request line's element being received: 0 none yet, then 'm'ethod, 't'arget,
     * 'v'ersion (a span may come in pieces, some of them empty). */
    char _line_part;
    /* The request line failed at a method llhttp does not know that is a token (not bytes that
     * are no method at all). */
    bool _unknown_method;
    /* Our own error, or NULL to use llhttp's reason. Static string. */
    const char *_error;
    /* What sl_h1_feed() returns once failed: SL_EINVAL, SL_ETOOBIG or SL_ENOMEM. */
    int _rc;
};

/* Prepares `p` to parse messages of `kind`, carving heads from `arena` (borrowed; it must
 * outlive the parser). `limits` is copied; NULL means sl_h1_default_limits. */
void sl_h1_init(struct sl_h1 *p, enum sl_h1_kind kind, const struct sl_h1_limits *limits,
                struct sl_arena *arena);

/* Consumes a prefix of `data` and reports at most one event in `*ev`. Returns the number of
 * bytes consumed (possibly 0 when an event was owed from the previous call), or:
 *   SL_ETOOBIG  the head exceeds the limits (answer 431 to a client, 502 for an upstream), or
 *               the trailers or the chunk extensions of a body do (400 / 502);
 *   SL_EINVAL   malformed or ambiguous framing (400 / 502); sl_h1_error() says what.
 * After an error or SL_H1_EV_UPGRADE the parser accepts nothing more. */
SL_MUST_CHECK int sl_h1_feed(struct sl_h1 *p, const uint8_t *data, size_t n,
                             struct sl_h1_event *ev);

/* Tells the parser that the peer closed. Sets `*ev` to SL_H1_EV_END when that completes a
 * close-delimited response, SL_H1_EV_NONE when the parser was between messages. Returns 0,
 * or SL_EINVAL when the close truncates a message. */
SL_MUST_CHECK int sl_h1_eof(struct sl_h1 *p, struct sl_h1_event *ev);

/* Frees the parser's own memory (not the arena). A zeroed or finished parser is fine. */
void sl_h1_finish(struct sl_h1 *p);

/* True from the first byte of a message taken by sl_h1_feed() until its SL_H1_EV_END (or
 * SL_H1_EV_UPGRADE) was reported; false between messages: a peer that closes then had sent
 * nothing of a next message (the proxy tells an upstream that closed before answering from a
 * response cut short by it). */
bool sl_h1_in_message(const struct sl_h1 *p);

/* Response parsers only: the next response answers a HEAD request (or is the answer to a
 * CONNECT) and carries no body whatever its headers say. Call before its first byte. Interim
 * (1xx) responses before the final one do not use it up. */
void sl_h1_expect_no_body(struct sl_h1 *p);

/* The head of the current message; valid from SL_H1_EV_HEAD until the arena is reset. */
const struct sl_h1_head *sl_h1_head(const struct sl_h1 *p);

/* A static, human-readable reason for the last error. Never NULL. */
const char *sl_h1_error(const struct sl_h1 *p);

/* True when the last error was in the request target (the URL grammar refused a byte). */
bool sl_h1_error_in_target(const struct sl_h1 *p);

/* True when the last error was SL_ETOOBIG met in a request target: the request line alone is over
 * the head limit (answered 414, RFC 9112 §3), not its headers (431). */
bool sl_h1_error_target_too_long(const struct sl_h1 *p);

/* True when the last error was the method of a request line: a token (RFC 9110 §5.6.2), but not
 * a method llhttp knows (those of RFC 9110 and of its registry, in upper case). Bytes that are
 * no token (binary, a TLS handshake) are not a method and make it false. */
bool sl_h1_error_in_method(const struct sl_h1 *p);

/* The first header named `name` (case-insensitive), or NULL. */
const struct sl_h1_header *sl_h1_find(const struct sl_h1_head *h, const char *name);

/* How many headers are named `name` (case-insensitive). */
size_t sl_h1_count(const struct sl_h1_head *h, const char *name);

/* True when the comma-separated token list `value` contains `token` (case-insensitive). */
bool sl_h1_list_has(struct sl_slice value, const char *token);

/* Case-insensitive comparison of a slice with a NUL-terminated ASCII string. */
bool sl_h1_name_is(struct sl_slice name, const char *s);

/*
 * Chunked framing, as the proxy writes it when it re-encodes a body it decoded: each piece of
 * data goes out as one chunk (sl_h1_chunk_header(), the data, SL_H1_CHUNK_END), and the body
 * ends with SL_H1_CHUNK_LAST (the last chunk, no trailers). No extensions, no trailers.
 */

/* Bytes of the longest chunk header: 16 hex digits and CRLF. */
#define SL_H1_CHUNK_HEADER_MAX 18
/* What follows a chunk's data. */
#define SL_H1_CHUNK_END     "\r\n"
#define SL_H1_CHUNK_END_LEN 2
/* The last chunk and the empty trailer section: the end of a chunked body. */
#define SL_H1_CHUNK_LAST     "0\r\n\r\n"
#define SL_H1_CHUNK_LAST_LEN 5

/* Writes the header of a chunk of `len` data bytes (`len` in lower-case hex without leading
 * zeros, then CRLF) into `buf` (not NUL-terminated). Returns the bytes written, or 0 when `len`
 * is 0 (an empty chunk would end the body: use SL_H1_CHUNK_LAST) or `cap` is too small
 * (SL_H1_CHUNK_HEADER_MAX always suffices). */
size_t sl_h1_chunk_header(char *buf, size_t cap, uint64_t len);

#endif
