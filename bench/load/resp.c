/* SPDX-License-Identifier: Apache-2.0 */
#include "bench/load/resp.h"

#include <string.h>
#include <strings.h>

void sl_resp_reset(struct sl_resp *r, bool no_body, bool is_connect)
{
    r->st = SL_RESP_STATUS;
    r->status = 0;
    r->remaining = 0;
    r->has_len = false;
    r->chunked = false;
    r->close = false;
    r->no_body = no_body;
    r->is_connect = is_connect;
    r->head_bytes = 0;
    r->line_len = 0;
    r->line_long = false;
}

static bool name_is(const char *line, size_t n, const char *name)
{
    size_t k = strlen(name);
    size_t i;

    if (n < k + 1 || line[k] != ':') {
        return false;
    }
    for (i = 0; i < k; i++) {
        char c = line[i];

        if (c >= 'A' && c <= 'Z') {
            c = (char)(c - 'A' + 'a');
        }
        if (c != name[i]) {
            return false;
        }
    }
    return true;
}

/* True when the comma-separated list `v` (n bytes) holds `token`, case-insensitively. */
static bool has_token(const char *v, size_t n, const char *token)
{
    size_t k = strlen(token);
    size_t i = 0;

    while (i < n) {
        size_t j;
        size_t e;

        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ',')) {
            i++;
        }
        j = i;
        while (j < n && v[j] != ',') {
            j++;
        }
        e = j;
        while (e > i && (v[e - 1] == ' ' || v[e - 1] == '\t')) {
            e--;
        }
        if (e - i == k && strncasecmp(v + i, token, k) == 0) {
            return true;
        }
        i = j;
    }
    return false;
}

static int parse_status_line(struct sl_resp *r, const char *l, size_t n)
{
    int s = 0;
    size_t i;

    if (n < 12 || memcmp(l, "HTTP/1.", 7) != 0 || (l[7] != '0' && l[7] != '1') || l[8] != ' ') {
        return -1;
    }
    for (i = 9; i < 12; i++) {
        if (l[i] < '0' || l[i] > '9') {
            return -1;
        }
        s = s * 10 + (l[i] - '0');
    }
    if (n > 12 && l[12] != ' ') {
        return -1;
    }
    if (s < 100) {
        return -1;
    }
    r->status = s;
    /* HTTP/1.0 closes unless told otherwise; we never ask it to keep alive. */
    r->close = l[7] == '0';
    return 0;
}

static int parse_header_line(struct sl_resp *r, const char *l, size_t n)
{
    const char *v;
    size_t vn;
    bool known = name_is(l, n, "content-length") || name_is(l, n, "transfer-encoding")
                 || name_is(l, n, "connection");

    if (!known) {
        return 0;
    }
    if (r->line_long) {
        return -1;
    }
    v = (const char *)memchr(l, ':', n) + 1;
    vn = n - (size_t)(v - l);
    while (vn > 0 && (*v == ' ' || *v == '\t')) {
        v++;
        vn--;
    }
    while (vn > 0 && (v[vn - 1] == ' ' || v[vn - 1] == '\t')) {
        vn--;
    }
    if (name_is(l, n, "content-length")) {
        uint64_t len = 0;
        size_t i;

        if (vn == 0 || vn > 18 || r->has_len) {
            return -1;
        }
        for (i = 0; i < vn; i++) {
            if (v[i] < '0' || v[i] > '9') {
                return -1;
            }
            len = len * 10 + (uint64_t)(v[i] - '0');
        }
        r->has_len = true;
        r->remaining = len;
    } else if (name_is(l, n, "transfer-encoding")) {
        if (!has_token(v, vn, "chunked")) {
            return -1;
        }
        r->chunked = true;
    } else if (has_token(v, vn, "close")) {
        r->close = true;
    }
    return 0;
}

/* The head ended: choose how the body is framed (RFC 9112 §6.3). */
static void end_of_head(struct sl_resp *r)
{
    if (r->status < 200 && r->status != 101 && !r->is_connect) {
        /* An interim response: the real one follows. */
        bool no_body = r->no_body;

        sl_resp_reset(r, no_body, false);
        return;
    }
    if (r->is_connect || r->no_body || r->status == 204 || r->status == 304 || r->status < 200) {
        r->st = SL_RESP_DONE;
    } else if (r->chunked) {
        r->st = SL_RESP_CHUNK_SIZE;
    } else if (r->has_len) {
        r->st = r->remaining == 0 ? SL_RESP_DONE : SL_RESP_BODY_LEN;
    } else {
        r->st = SL_RESP_BODY_CLOSE;
        r->close = true;
    }
}

static int parse_chunk_size(struct sl_resp *r, const char *l, size_t n)
{
    uint64_t size = 0;
    size_t i;

    if (r->line_long && n >= SL_RESP_LINE_MAX - 1) {
        /* Only a long chunk extension can get here; the size itself is short. */
        n = SL_RESP_LINE_MAX - 1;
    }
    for (i = 0; i < n && l[i] != ';' && l[i] != ' ' && l[i] != '\t'; i++) {
        char c = l[i];
        unsigned d;

        if (c >= '0' && c <= '9') {
            d = (unsigned)(c - '0');
        } else if (c >= 'a' && c <= 'f') {
            d = (unsigned)(c - 'a' + 10);
        } else if (c >= 'A' && c <= 'F') {
            d = (unsigned)(c - 'A' + 10);
        } else {
            return -1;
        }
        if (i >= 15) {
            return -1;
        }
        size = size * 16 + d;
    }
    if (i == 0) {
        return -1;
    }
    r->remaining = size;
    r->st = size == 0 ? SL_RESP_TRAILER : SL_RESP_CHUNK_DATA;
    return 0;
}

/* One complete line (CR stripped) of a line-oriented state. */
static int on_line(struct sl_resp *r, const char *l, size_t n)
{
    switch (r->st) {
    case SL_RESP_STATUS:
        if (r->line_long) {
            return -1;
        }
        r->st = SL_RESP_HEADERS;
        return parse_status_line(r, l, n);
    case SL_RESP_HEADERS:
        if (n == 0 && !r->line_long) {
            end_of_head(r);
            return 0;
        }
        return parse_header_line(r, l, n);
    case SL_RESP_CHUNK_SIZE:
        return parse_chunk_size(r, l, n);
    case SL_RESP_CHUNK_END:
        if (n != 0 || r->line_long) {
            return -1;
        }
        r->st = SL_RESP_CHUNK_SIZE;
        return 0;
    case SL_RESP_TRAILER:
        if (n == 0 && !r->line_long) {
            r->st = SL_RESP_DONE;
        }
        return 0;
    case SL_RESP_BODY_LEN:
    case SL_RESP_BODY_CLOSE:
    case SL_RESP_CHUNK_DATA:
    case SL_RESP_DONE:
        break;
    }
    return -1;
}

int sl_resp_feed(struct sl_resp *r, const char *p, size_t n, size_t *used)
{
    size_t i = 0;

    while (i < n && r->st != SL_RESP_DONE) {
        switch (r->st) {
        case SL_RESP_BODY_LEN:
        case SL_RESP_CHUNK_DATA: {
            size_t k = n - i;

            if (k > r->remaining) {
                k = (size_t)r->remaining;
            }
            i += k;
            r->remaining -= k;
            if (r->remaining == 0) {
                r->st = r->st == SL_RESP_BODY_LEN ? SL_RESP_DONE : SL_RESP_CHUNK_END;
            }
            break;
        }
        case SL_RESP_BODY_CLOSE:
            i = n;
            break;
        case SL_RESP_STATUS:
        case SL_RESP_HEADERS:
        case SL_RESP_CHUNK_SIZE:
        case SL_RESP_CHUNK_END:
        case SL_RESP_TRAILER: {
            const char *nl = memchr(p + i, '\n', n - i);
            size_t k = nl != NULL ? (size_t)(nl - (p + i)) : n - i;
            size_t room = SL_RESP_LINE_MAX - 1 - r->line_len;

            if (k > room) {
                r->line_long = true;
            }
            memcpy(r->line + r->line_len, p + i, k < room ? k : room);
            r->line_len += k < room ? k : room;
            r->head_bytes += k + (nl != NULL);
            if (r->head_bytes > SL_RESP_HEAD_MAX) {
                return -1;
            }
            i += k;
            if (nl == NULL) {
                break;
            }
            i++;
            if (r->line_len > 0 && r->line[r->line_len - 1] == '\r') {
                r->line_len--;
            }
            if (on_line(r, r->line, r->line_len) < 0) {
                return -1;
            }
            r->line_len = 0;
            r->line_long = false;
            break;
        }
        case SL_RESP_DONE:
            break;
        }
    }
    *used = i;
    return r->st == SL_RESP_DONE ? 1 : 0;
}

bool sl_resp_ends_at_close(const struct sl_resp *r)
{
    return r->st == SL_RESP_BODY_CLOSE;
}
