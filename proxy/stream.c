/* SPDX-License-Identifier: Apache-2.0 */
#include "proxy/stream.h"

#include <string.h>

#include "base/mem.h"

/* Output blocks may exceed SL_STREAM_OUT_HIGH by one head or one TLS record's worth. */
#define OUT_MAX (2 * SL_STREAM_OUT_HIGH + 4096)
/* Free input blocks a thread keeps for its streams. */
#define POOL_KEEP 64u

_Static_assert(SL_STREAM_RAW_BYTES == SL_STREAM_PLAIN_BYTES, "one block size for both inputs");

/*
 * Input blocks. A stream holds its raw and plaintext input blocks only while they hold bytes:
 * an idle keep-alive connection holds none, so its memory is what its TLS state needs. The
 * blocks come from a free list per thread (each stream lives on one loop, so on one thread),
 * which keeps the busy path free of malloc and hands back warm memory.
 */
struct block {
    struct block *next;
};

static _Thread_local struct block *pool;
static _Thread_local unsigned pool_n;

static uint8_t *block_get(void)
{
    struct block *b = pool;

    if (b == NULL) {
        return sl_malloc(SL_STREAM_RAW_BYTES);
    }
    pool = b->next;
    pool_n--;
    return (uint8_t *)b;
}

static void block_put(uint8_t *p)
{
    struct block *b = (struct block *)(void *)p;

    if (b == NULL) {
        return;
    }
    if (pool_n >= POOL_KEEP) {
        sl_free(b);
        return;
    }
    b->next = pool;
    pool = b;
    pool_n++;
}

void sl_stream_pool_drain(void)
{
    while (pool != NULL) {
        struct block *b = pool;

        pool = b->next;
        sl_free(b);
    }
    pool_n = 0;
}

/*
 * Output storage comes from the same pool: a stream takes a block when it has something to
 * send and gives it back once everything went out, so an idle connection holds no output
 * memory either. A buffer that grew past a block (a bulk transfer) is freed instead.
 */
static int out_ready(struct sl_stream *s)
{
    uint8_t *p;

    if (s->_out.p != NULL) {
        return 0;
    }
    p = block_get();
    if (p == NULL) {
        return SL_ENOMEM;
    }
    sl_buf_adopt(&s->_out, p, SL_STREAM_RAW_BYTES);
    return 0;
}

static void give_back(struct sl_buf *b)
{
    size_t cap;
    uint8_t *p = sl_buf_take(b, &cap);

    if (cap == SL_STREAM_RAW_BYTES) {
        block_put(p);
    } else {
        sl_free(p);
    }
}

/* Gives the output storage back once nothing waits to go out. */
static void release_out(struct sl_stream *s)
{
    if (!s->_writing && s->_out.len == 0) {
        give_back(&s->_out);
        give_back(&s->_flight);
    }
}

/* Gives back an input block (`*block` holding [*off, *len)) once it holds nothing. */
static void release_block(uint8_t **block, size_t *off, size_t *len)
{
    if (*block != NULL && *off == *len) {
        block_put(*block);
        *block = NULL;
        *off = 0;
        *len = 0;
    }
}

/* Gives back the raw block once it holds nothing. */
static void release_raw(struct sl_stream *s)
{
    release_block(&s->_raw, &s->_raw_off, &s->_raw_len);
}

/* Gives back the plaintext block once it holds nothing. */
static void release_plain(struct sl_stream *s)
{
    release_block(&s->_plain, &s->_plain_off, &s->_plain_len);
}

static void update_reading(struct sl_stream *s);
static void flush(struct sl_stream *s);

static void notify(struct sl_stream *s)
{
    if (!s->_closing && s->_on_event != NULL) {
        s->_on_event(s, s->_arg);
    }
}

static void fail(struct sl_stream *s, int rc)
{
    if (s->_error == 0) {
        s->_error = rc;
    }
}

int sl_stream_init(uv_loop_t *loop, struct sl_stream *s, sl_stream_event_fn *on_event, void *arg)
{
    int rc;

    memset(s, 0, sizeof(*s));
    rc = uv_tcp_init(loop, &s->_tcp);
    if (rc < 0) {
        return rc;
    }
    s->_tcp.data = s;
    s->_on_event = on_event;
    s->_arg = arg;
    sl_buf_init(&s->_out, OUT_MAX);
    sl_buf_init(&s->_flight, OUT_MAX);
    return 0;
}

uv_tcp_t *sl_stream_tcp(struct sl_stream *s)
{
    return &s->_tcp;
}

int sl_stream_start(struct sl_stream *s)
{
    /* Heads and small responses go out at once; libuv already coalesces what we queue. */
    int rc = uv_tcp_nodelay(&s->_tcp, 1);

    if (rc < 0) {
        return rc;
    }
    update_reading(s);
    return s->_error;
}

int sl_stream_set_tls(struct sl_stream *s, struct sl_tls *tls)
{
    s->_tls = tls;
    s->_plain_off = 0;
    s->_plain_len = 0;
    return 0;
}

struct sl_tls *sl_stream_tls(struct sl_stream *s)
{
    return s->_tls;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct sl_stream *s = h->data;

    (void)suggested;
    if (s->_raw == NULL) {
        s->_raw = block_get();
        if (s->_raw == NULL) {
            /* libuv reports UV_ENOBUFS to on_read, which fails the stream. */
            *buf = uv_buf_init(NULL, 0);
            return;
        }
    }
    if (s->_raw_off > 0) {
        memmove(s->_raw, s->_raw + s->_raw_off, s->_raw_len - s->_raw_off);
        s->_raw_len -= s->_raw_off;
        s->_raw_off = 0;
    }
    buf->base = (char *)s->_raw + s->_raw_len;
    buf->len = SL_STREAM_RAW_BYTES - s->_raw_len;
}

static void on_read(uv_stream_t *h, ssize_t nread, const uv_buf_t *buf)
{
    struct sl_stream *s = h->data;

    (void)buf;
    if (nread > 0) {
        s->_raw_len += (size_t)nread;
        s->bytes_in += (uint64_t)nread;
    } else if (nread == UV_EOF) {
        s->_eof = true;
    } else if (nread == UV_ENOBUFS && s->_raw != NULL) {
        /* The buffer is full: reading pauses until the owner consumes. */
    } else if (nread < 0) {
        fail(s, nread == UV_ENOBUFS ? SL_ENOMEM : (int)nread);
    } else {
        release_raw(s);
        return;
    }
    release_raw(s);
    update_reading(s);
    notify(s);
}

static bool raw_has_room(const struct sl_stream *s)
{
    return s->_raw_len < SL_STREAM_RAW_BYTES || s->_raw_off > 0;
}

static void update_reading(struct sl_stream *s)
{
    bool should = s->_want_read && !s->_eof && s->_error == 0 && !s->_closing && raw_has_room(s);

    if (should && !s->_reading) {
        int rc = uv_read_start((uv_stream_t *)&s->_tcp, on_alloc, on_read);

        if (rc < 0) {
            fail(s, rc);
            return;
        }
        s->_reading = true;
    } else if (!should && s->_reading) {
        (void)uv_read_stop((uv_stream_t *)&s->_tcp);
        s->_reading = false;
    }
}

void sl_stream_want_read(struct sl_stream *s, bool want)
{
    s->_want_read = want;
    update_reading(s);
}

/* Moves the engine's pending ciphertext into the output block while it holds less than
 * `limit` bytes. */
static void move_tls_out_below(struct sl_stream *s, size_t limit)
{
    while (s->_out.len < limit) {
        size_t n = sl_tls_out_pending(s->_tls);
        uint8_t *tail;

        if (n == 0) {
            return;
        }
        if (out_ready(s) < 0) {
            fail(s, SL_ENOMEM);
            return;
        }
        tail = sl_buf_reserve(&s->_out, n);
        if (tail == NULL) {
            fail(s, SL_ENOMEM);
            return;
        }
        sl_buf_commit(&s->_out, sl_tls_out_copy(s->_tls, tail, n));
    }
}

/* Moves the engine's pending ciphertext into the output block, up to SL_STREAM_OUT_HIGH. */
static void move_tls_out(struct sl_stream *s)
{
    move_tls_out_below(s, SL_STREAM_OUT_HIGH);
}

/* Moves all of the engine's pending ciphertext into the output block, past SL_STREAM_OUT_HIGH if
 * need be (by at most one record: what push_stage() encrypts). */
static void move_tls_out_all(struct sl_stream *s)
{
    move_tls_out_below(s, SIZE_MAX);
}

/* Encrypts the staged plaintext (at most SL_STREAM_STAGE_BYTES, one record) into the output,
 * whatever it holds already. Returns 0, or the error that failed the stream. */
static int push_stage(struct sl_stream *s)
{
    size_t off = 0;

    while (off < s->_stage_len) {
        int rc;

        move_tls_out_all(s);
        if (s->_error != 0) {
            return s->_error;
        }
        rc = sl_tls_write(s->_tls, s->_stage + off, s->_stage_len - off);
        if (rc <= 0) {
            /* The engine was drained: it takes a record. */
            rc = rc < 0 ? rc : SL_ETOOBIG;
            fail(s, rc);
            return rc;
        }
        off += (size_t)rc;
    }
    s->_stage_len = 0;
    block_put(s->_stage);
    s->_stage = NULL;
    move_tls_out_all(s);
    return s->_error;
}

/* Stages `n` (< SL_STREAM_STAGE_BYTES) bytes at `p` for push_stage(), after pushing what was
 * staged when they do not fit beside it. Returns 0, or the error that failed the stream. */
static int stage(struct sl_stream *s, const void *p, size_t n)
{
    if (s->_stage_len + n > SL_STREAM_STAGE_BYTES && push_stage(s) < 0) {
        return s->_error;
    }
    if (s->_stage == NULL) {
        s->_stage = block_get();
        if (s->_stage == NULL) {
            fail(s, SL_ENOMEM);
            return SL_ENOMEM;
        }
    }
    memcpy(s->_stage + s->_stage_len, p, n);
    s->_stage_len += n;
    return 0;
}

/* Feeds the engine the ciphertext that arrived. */
static void feed_tls(struct sl_stream *s)
{
    while (s->_raw_off < s->_raw_len) {
        int n = sl_tls_feed(s->_tls, s->_raw + s->_raw_off, s->_raw_len - s->_raw_off);

        if (n < 0) {
            fail(s, n);
            return;
        }
        if (n == 0) {
            break;
        }
        s->_raw_off += (size_t)n;
    }
    if (s->_raw_off == s->_raw_len) {
        release_raw(s);
        if (s->_eof) {
            sl_tls_feed_eof(s->_tls);
        }
    }
}

int sl_stream_handshake(struct sl_stream *s)
{
    int rc = SL_TLS_HS_WANT_IO;

    if (s->_error != 0) {
        return s->_error;
    }
    /* The input ring may not take everything that arrived at once; feed, step, repeat while
     * feeding still gets somewhere (bounded: a ring's worth per round). */
    for (int round = 0; round < 16; round++) {
        size_t before = s->_raw_len - s->_raw_off;

        feed_tls(s);
        rc = sl_tls_handshake(s->_tls);
        move_tls_out(s);
        flush(s);
        if (rc != SL_TLS_HS_WANT_IO || s->_raw_off == s->_raw_len
            || s->_raw_len - s->_raw_off == before) {
            break;
        }
    }
    if (rc < 0) {
        /* The alert that says why goes out now, corked or not: the failure stops all output. */
        unsigned cork = s->_cork;

        s->_cork = 0;
        flush(s);
        s->_cork = cork;
        fail(s, rc);
    }
    update_reading(s);
    return rc;
}

struct sl_slice sl_stream_peek(struct sl_stream *s)
{
    if (s->_closing) {
        return sl_slice_of(NULL, 0);
    }
    if (s->_tls == NULL) {
        if (s->_raw == NULL) {
            return sl_slice_of(NULL, 0);
        }
        return sl_slice_of(s->_raw + s->_raw_off, s->_raw_len - s->_raw_off);
    }
    if (s->_plain_off < s->_plain_len) {
        return sl_slice_of(s->_plain + s->_plain_off, s->_plain_len - s->_plain_off);
    }
    if (!sl_tls_is_handshake_done(s->_tls)) {
        /* Until the handshake is done there is no plaintext (sl_stream_handshake()). */
        return sl_slice_of(NULL, 0);
    }
    if (s->_plain == NULL) {
        s->_plain = block_get();
        if (s->_plain == NULL) {
            fail(s, SL_ENOMEM);
            return sl_slice_of(NULL, 0);
        }
    }
    s->_plain_off = 0;
    s->_plain_len = 0;
    while (s->_in_status == 0 && s->_error == 0) {
        size_t unfed;
        int n;

        feed_tls(s);
        unfed = s->_raw_len - s->_raw_off;
        n = sl_tls_read(s->_tls, s->_plain, SL_STREAM_PLAIN_BYTES);
        if (n > 0) {
            s->_plain_len = (size_t)n;
            break;
        }
        if (n < 0) {
            s->_in_status = n;
            /* The end of the input (close_notify, or a FIN between two records) fails
             * nothing else: what we write still goes out (a half-close). */
            if (n != UV_EOF && (n != UV_ECONNRESET || sl_tls_is_failed(s->_tls))) {
                fail(s, n);
            }
            break;
        }
        /* Nothing decrypted: go on only if the ring took more ciphertext just now. */
        if (unfed == 0 || unfed == s->_raw_len - s->_raw_off) {
            break;
        }
    }
    /* Reading may have produced output (alerts, KeyUpdate replies). */
    move_tls_out(s);
    flush(s);
    update_reading(s);
    release_plain(s);
    if (s->_plain == NULL) {
        return sl_slice_of(NULL, 0);
    }
    return sl_slice_of(s->_plain + s->_plain_off, s->_plain_len - s->_plain_off);
}

void sl_stream_consume(struct sl_stream *s, size_t n)
{
    if (s->_tls != NULL) {
        s->_plain_off += n;
        SL_BUG_ON(s->_plain_off > s->_plain_len);
        release_plain(s);
    } else {
        s->_raw_off += n;
        SL_BUG_ON(s->_raw_off > s->_raw_len);
        release_raw(s);
    }
    update_reading(s);
}

int sl_stream_in_status(struct sl_stream *s)
{
    if (s->_tls == NULL) {
        if (s->_raw_off < s->_raw_len) {
            return 0;
        }
        if (s->_error != 0) {
            return s->_error;
        }
        return s->_eof ? UV_EOF : 0;
    }
    if (!sl_tls_is_handshake_done(s->_tls)) {
        if (s->_error != 0) {
            return s->_error;
        }
        return s->_eof && s->_raw_off == s->_raw_len ? UV_EOF : 0;
    }
    if (sl_stream_peek(s).n > 0) {
        return 0;
    }
    if (s->_in_status != 0) {
        return s->_in_status;
    }
    return s->_error;
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
    struct sl_stream *s = req->data;

    if (status < 0 && status != UV_ECANCELED) {
        fail(s, status);
    }
    notify(s);
}

static void maybe_shutdown(struct sl_stream *s)
{
    int rc;

    if (!s->_shut || s->_closing || !sl_stream_is_flushed(s) || s->_sreq.handle != NULL) {
        return;
    }
    s->_sreq.data = s;
    rc = uv_shutdown(&s->_sreq, (uv_stream_t *)&s->_tcp, on_shutdown);
    if (rc < 0) {
        fail(s, rc);
    }
}

static void on_write(uv_write_t *req, int status)
{
    struct sl_stream *s = req->data;

    s->_writing = false;
    if (status < 0) {
        if (status != UV_ECANCELED) {
            fail(s, status);
            notify(s);
        }
        return;
    }
    s->bytes_out += s->_flight.len;
    sl_buf_reset(&s->_flight);
    if (s->_tls != NULL) {
        move_tls_out(s);
    }
    flush(s);
    release_out(s);
    maybe_shutdown(s);
    notify(s);
}

static void flush(struct sl_stream *s)
{
    struct sl_buf tmp;
    uv_buf_t b;
    int rc;

    if (s->_writing || s->_out.len == 0 || s->_closing || s->_error != 0 || s->_cork > 0) {
        return;
    }
    tmp = s->_flight;
    s->_flight = s->_out;
    s->_out = tmp;
    b = uv_buf_init((char *)s->_flight.p, (unsigned int)s->_flight.len);
    s->_wreq.data = s;
    rc = uv_write(&s->_wreq, (uv_stream_t *)&s->_tcp, &b, 1, on_write);
    if (rc < 0) {
        fail(s, rc);
        return;
    }
    s->_writing = true;
}

void sl_stream_cork(struct sl_stream *s)
{
    s->_cork++;
}

bool sl_stream_uncork(struct sl_stream *s)
{
    uv_buf_t b;
    int n;

    /* A cork the stream no longer has (it was set up again meanwhile) is ignored. */
    if (s->_cork == 0 || --s->_cork > 0 || s->_closing) {
        return false;
    }
    if (s->_tls != NULL) {
        if (s->_stage_len > 0 && push_stage(s) < 0) {
            return true;
        }
        move_tls_out(s);
    }
    if (s->_writing || s->_out.len == 0 || s->_error != 0) {
        flush(s);
        return false;
    }
    /* Most of the time the socket takes the whole block at once: then no write request, no
     * completion callback, and no epoll change (libuv re-arms the watcher after every uv_write
     * completion). What it does not take goes out through uv_write as usual. */
    b = uv_buf_init((char *)s->_out.p, (unsigned int)s->_out.len);
    n = uv_try_write((uv_stream_t *)&s->_tcp, &b, 1);
    if (n == UV_EAGAIN || n == UV_ENOSYS) {
        flush(s);
        return false;
    }
    if (n < 0) {
        fail(s, n);
        return true;
    }
    s->bytes_out += (uint64_t)n;
    sl_buf_consume(&s->_out, (size_t)n);
    if (s->_tls != NULL) {
        move_tls_out(s);
    }
    if (s->_out.len > 0) {
        flush(s);
        return false;
    }
    release_out(s);
    maybe_shutdown(s);
    return true;
}

bool sl_stream_has_room(const struct sl_stream *s, size_t n)
{
    if (s->_error != 0 || s->_closing || s->_shut) {
        return false;
    }
    n += s->_stage_len;
    /* An empty block takes anything up to its maximum (a whole head at once). */
    if (s->_out.len == 0) {
        return n <= SL_STREAM_OUT_HIGH + 4096;
    }
    return s->_out.len + n <= SL_STREAM_OUT_HIGH;
}

/* Appends `n` bytes to the output of a stream in the clear and starts writing. Returns 0, or
 * the error that failed the stream. */
static int put_clear(struct sl_stream *s, const void *p, size_t n)
{
    int rc = out_ready(s);

    if (rc == 0) {
        rc = sl_buf_append(&s->_out, p, n);
    }
    if (rc < 0) {
        fail(s, rc);
        return rc;
    }
    flush(s);
    return 0;
}

int sl_stream_write(struct sl_stream *s, const void *p, size_t n)
{
    size_t take;
    int rc;

    if (s->_error != 0) {
        return s->_error;
    }
    if (s->_closing || s->_shut) {
        return SL_EINVAL;
    }
    if (n == 0 || s->_out.len >= SL_STREAM_OUT_HIGH) {
        return 0;
    }
    if (s->_tls == NULL) {
        take = SL_STREAM_OUT_HIGH - s->_out.len;
        if (take > n) {
            take = n;
        }
        rc = put_clear(s, p, take);
        return rc < 0 ? rc : (int)take;
    }
    if (s->_cork > 0 && n < SL_STREAM_STAGE_BYTES) {
        /* A small write while corked: gathered with the others into one record. */
        rc = stage(s, p, n);
        return rc < 0 ? rc : (int)n;
    }
    if (s->_stage_len > 0 && push_stage(s) < 0) {
        return s->_error;
    }
    rc = sl_tls_write(s->_tls, p, n > SL_TLS_WRITE_MAX ? SL_TLS_WRITE_MAX : n);
    if (rc < 0) {
        fail(s, rc);
        return rc;
    }
    move_tls_out(s);
    flush(s);
    return rc;
}

int sl_stream_write_all(struct sl_stream *s, const void *p, size_t n)
{
    const uint8_t *b = p;
    size_t done = 0;

    if (s->_error != 0) {
        return s->_error;
    }
    if (!sl_stream_has_room(s, n)) {
        return SL_EAGAIN;
    }
    if (s->_tls == NULL) {
        return put_clear(s, p, n);
    }
    if (s->_cork > 0 && n < SL_STREAM_STAGE_BYTES) {
        /* Small, while corked: staged whole, as sl_stream_write() does. */
        return stage(s, p, n);
    }
    /* What was staged goes first. */
    if (s->_stage_len > 0 && push_stage(s) < 0) {
        return s->_error;
    }
    while (done < n) {
        size_t chunk = n - done > SL_TLS_WRITE_MAX ? SL_TLS_WRITE_MAX : n - done;
        int rc = sl_tls_write(s->_tls, b + done, chunk);

        if (rc < 0) {
            fail(s, rc);
            return rc;
        }
        /* The output block has room (checked above), so the engine's is drained each round. */
        move_tls_out(s);
        if (rc == 0) {
            fail(s, SL_ETOOBIG);
            return SL_ETOOBIG;
        }
        done += (size_t)rc;
    }
    flush(s);
    return 0;
}

bool sl_stream_is_flushed(const struct sl_stream *s)
{
    return !s->_writing && s->_out.len == 0 && s->_stage_len == 0
           && (s->_tls == NULL || sl_tls_out_pending(s->_tls) == 0);
}

size_t sl_stream_unsent(const struct sl_stream *s)
{
    /* libuv counts down what a write in progress has left (uv__write() after each partial
     * write), and cancels it only in the close callback. */
    size_t n = s->_writing ? uv_stream_get_write_queue_size((const uv_stream_t *)&s->_tcp) : 0;

    n += s->_out.len + s->_stage_len;
    if (s->_tls != NULL) {
        n += sl_tls_out_pending(s->_tls);
    }
    return n;
}

void sl_stream_end(struct sl_stream *s)
{
    if (s->_shut || s->_closing) {
        return;
    }
    if (s->_tls != NULL && sl_tls_is_handshake_done(s->_tls) && s->_error == 0) {
        /* What was staged goes before close_notify. */
        if (s->_stage_len > 0 && push_stage(s) < 0) {
            s->_shut = true;
            return;
        }
        /* close_notify lets the peer tell a complete close-delimited body from a cut one. */
        if (sl_tls_shutdown(s->_tls) > 0) {
            move_tls_out(s);
            flush(s);
        }
    }
    s->_shut = true;
    maybe_shutdown(s);
}

bool sl_stream_peer_closed(const struct sl_stream *s)
{
    return s->_eof || s->_error != 0;
}

int sl_stream_error(const struct sl_stream *s)
{
    return s->_error;
}

static void on_close(uv_handle_t *h)
{
    struct sl_stream *s = h->data;

    block_put(s->_raw);
    block_put(s->_plain);
    block_put(s->_stage);
    s->_raw = NULL;
    s->_plain = NULL;
    s->_stage = NULL;
    s->_stage_len = 0;
    give_back(&s->_out);
    give_back(&s->_flight);
    sl_tls_destroy(s->_tls);
    s->_tls = NULL;
    if (s->_on_closed != NULL) {
        s->_on_closed(s, s->_arg);
    }
}

void sl_stream_close(struct sl_stream *s, sl_stream_closed_fn *on_closed)
{
    if (s->_closing) {
        return;
    }
    if (s->_cork > 0) {
        /* What a corked step wrote last (a refusal, a TLS alert) gets the one attempt it would
         * have had uncorked: uv_write() tries the socket at once, uv_close() drops the rest. */
        s->_cork = 0;
        if (s->_tls != NULL) {
            if (s->_stage_len > 0) {
                (void)push_stage(s);
            }
            move_tls_out(s);
        }
        flush(s);
    }
    s->_closing = true;
    s->_on_closed = on_closed;
    if (s->_reading) {
        (void)uv_read_stop((uv_stream_t *)&s->_tcp);
        s->_reading = false;
    }
    uv_close((uv_handle_t *)&s->_tcp, on_close);
}
