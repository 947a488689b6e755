/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/load/resp.h - the response reader of sluice-load: just enough HTTP/1.1 (RFC 9112) to
 * find where each response ends, and nothing else.
 *
 * It reads the status line, Content-Length, Transfer-Encoding: chunked and Connection: close;
 * every other header is skipped unread. A struct sl_resp is a value type embedded in its
 * connection and reset (sl_resp_reset()) before each response; feeding it never allocates. Heads,
 * chunk-size lines and trailers are bounded by SL_RESP_HEAD_MAX bytes.
 */
#ifndef SL_BENCH_LOAD_RESP_H
#define SL_BENCH_LOAD_RESP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The longest response head (or chunk-size line, or trailer) accepted. */
#define SL_RESP_HEAD_MAX ((size_t)64 * 1024)
/* Header lines are looked at through this many bytes; longer ones matter only when they are one
 * of the three headers we read, and those are refused as malformed. */
#define SL_RESP_LINE_MAX ((size_t)256)

enum sl_resp_state {
    SL_RESP_STATUS = 0,
    SL_RESP_HEADERS,
    SL_RESP_BODY_LEN,
    SL_RESP_BODY_CLOSE,
    SL_RESP_CHUNK_SIZE,
    SL_RESP_CHUNK_DATA,
    SL_RESP_CHUNK_END,
    SL_RESP_TRAILER,
    SL_RESP_DONE,
};

struct sl_resp {
    enum sl_resp_state st;
    /* The status code of the final (non-1xx) response. */
    int status;
    /* Body bytes still expected (SL_RESP_BODY_LEN, SL_RESP_CHUNK_DATA). */
    uint64_t remaining;
    bool has_len;
    bool chunked;
    /* The server will close after this response (Connection: close, or no framing). */
    bool close;
    /* No body whatever the headers say (HEAD, 204, 304, a CONNECT answer). */
    bool no_body;
    bool is_connect;
    /* Head (or trailer) bytes so far, against SL_RESP_HEAD_MAX. */
    size_t head_bytes;
    /* The current line, truncated to SL_RESP_LINE_MAX - 1 (line_long says so). */
    size_t line_len;
    bool line_long;
    char line[SL_RESP_LINE_MAX];
};

/* Prepares `r` for the next response. `no_body`: the request was HEAD (the response has no body
 * whatever its headers say); `is_connect`: the response answers a CONNECT (it ends with its head,
 * RFC 9110 §9.3.6). */
void sl_resp_reset(struct sl_resp *r, bool no_body, bool is_connect);

/* Feeds the next `n` bytes of the response (borrowed). Returns 1 when the response is complete
 * (its last byte is p[*used - 1]; bytes after it belong to no response of ours), 0 when more is
 * needed (*used == n), -1 when it is malformed or over a limit. */
int sl_resp_feed(struct sl_resp *r, const char *p, size_t n, size_t *used);

/* The peer closed the connection: true when that ends the response (its body runs to the
 * close), false when the response is cut short. */
bool sl_resp_ends_at_close(const struct sl_resp *r);

#endif
