/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proxy/stream.h - one TCP connection of the proxy (to a client or to an upstream), in the
 * clear or under a TLS engine (proxy/tls.h), with bounded buffers in both directions.
 *
 * A stream turns libuv's callbacks into one event: "something changed" (input arrived, output
 * drained, the peer closed, an error happened). Its owner reacts by looking at the stream's
 * state and moving bytes, so every decision lives in the owner's stepper (docs/style.md §6).
 *
 *   input    sl_stream_peek() shows the plaintext that has arrived (decrypting on demand),
 *            sl_stream_consume() drops what the owner used. The stream reads from the socket
 *            only while the owner wants input and its buffer has room: a peer that sends
 *            faster than the owner can pass bytes on is not read from (back-pressure).
 *   output   sl_stream_write() copies plaintext into the stream (encrypting under TLS) and
 *            returns how much it took: nothing once SL_STREAM_OUT_HIGH bytes wait for the
 *            socket. One write is in flight at a time; its completion raises the event.
 *
 * Memory per stream is therefore bounded whatever either peer does: SL_STREAM_RAW_BYTES of
 * input, SL_STREAM_PLAIN_BYTES of decrypted input, two output blocks of at most
 * SL_STREAM_OUT_HIGH (plus one TLS record), SL_STREAM_STAGE_BYTES of small writes staged while
 * corked (under TLS: one record for many tiny pieces), and the TLS engine's fixed rings.
 *
 * Lifecycle: sl_stream_init() (embedded in its owner) -> accept into or connect
 * sl_stream_tcp() -> optionally sl_stream_set_tls() -> I/O -> sl_stream_close(), whose callback
 * runs once, after which the storage may be freed. The event callback is never called
 * synchronously from a sl_stream_* call, only from libuv callbacks, and never after
 * sl_stream_close().
 */
#ifndef SL_PROXY_STREAM_H
#define SL_PROXY_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/slice.h"
#include "proxy/tls.h"

#define SL_STREAM_RAW_BYTES   ((size_t)32 * 1024)
#define SL_STREAM_PLAIN_BYTES ((size_t)32 * 1024)
#define SL_STREAM_OUT_HIGH    ((size_t)64 * 1024)
/* Under TLS, writes of fewer bytes made while corked are gathered into one record of up to this
 * many: a body relayed as many tiny chunks (each a chunk header, its data and a CRLF) was sent as
 * three records per chunk, twelve times the bytes on the wire. */
#define SL_STREAM_STAGE_BYTES ((size_t)1024)

struct sl_stream;

/* Something changed on `s`; look at it. */
typedef void sl_stream_event_fn(struct sl_stream *s, void *arg);

/* The stream is closed; its storage may be freed now. */
typedef void sl_stream_closed_fn(struct sl_stream *s, void *arg);

struct sl_stream {
    uv_tcp_t _tcp;
    /* Owned; NULL while the stream is in the clear. */
    struct sl_tls *_tls;
    sl_stream_event_fn *_on_event;
    sl_stream_closed_fn *_on_closed;
    void *_arg;
    /* Bytes read from the socket, not yet consumed (clear) or fed to TLS: [_raw_off, _raw_len)
     * of _raw (SL_STREAM_RAW_BYTES, owned). */
    uint8_t *_raw;
    size_t _raw_off;
    size_t _raw_len;
    /* Decrypted bytes not yet consumed: [_plain_off, _plain_len) of _plain (owned, allocated
     * with the TLS engine). */
    uint8_t *_plain;
    size_t _plain_off;
    size_t _plain_len;
    /* Bytes waiting for the socket, and the block being written now. */
    struct sl_buf _out;
    struct sl_buf _flight;
    uv_write_t _wreq;
    bool _writing;
    uv_shutdown_t _sreq;
    bool _shut;
    /* The owner wants input. */
    bool _want_read;
    /* sl_stream_cork() depth: while above 0, output collects and is not written. */
    unsigned _cork;
    /* Under TLS, small writes made while corked: encrypted together as one record when the
     * cork comes off (or before anything else is written), instead of one record each. A
     * block of the per-thread pool, held only while it holds bytes (NULL otherwise): an idle
     * connection holds none. */
    uint8_t *_stage;
    size_t _stage_len;
    /* uv_read_start() is active. */
    bool _reading;
    /* The socket delivered its last byte (FIN). */
    bool _eof;
    /* Input is over: 0 while open; UV_EOF for a clean end (FIN in the clear, close_notify
     * under TLS) once every byte was consumed; or the error that ended it. */
    int _in_status;
    /* The first error of the transport or of TLS (0 if none). */
    int _error;
    bool _closing;
    /* Bytes on the wire, both directions (ciphertext under TLS). */
    uint64_t bytes_in;
    uint64_t bytes_out;
};

/* Initialises `s` on `loop`. `on_event` and `arg` are borrowed. Returns 0 or a negative code;
 * on failure nothing needs closing. */
SL_MUST_CHECK int sl_stream_init(uv_loop_t *loop, struct sl_stream *s, sl_stream_event_fn *on_event,
                                 void *arg);

/* The TCP handle, to accept into or connect with. Borrowed. */
uv_tcp_t *sl_stream_tcp(struct sl_stream *s);

/* Starts the I/O machinery once the socket is connected (accepted or connect completed). */
SL_MUST_CHECK int sl_stream_start(struct sl_stream *s);

/* Puts the stream under `tls` (takes ownership). Bytes already read and not consumed become
 * the first ciphertext fed to it. Returns 0 or SL_ENOMEM (then `tls` is destroyed). */
SL_MUST_CHECK int sl_stream_set_tls(struct sl_stream *s, struct sl_tls *tls);

/* The engine, or NULL. Borrowed. */
struct sl_tls *sl_stream_tls(struct sl_stream *s);

/* Drives the TLS handshake: feeds what arrived, steps the engine, queues its output. Returns
 * SL_TLS_HS_DONE, SL_TLS_HS_WANT_IO, SL_TLS_HS_WANT_CERT, or a negative code. */
SL_MUST_CHECK int sl_stream_handshake(struct sl_stream *s);

/* Declares whether the owner wants input now. */
void sl_stream_want_read(struct sl_stream *s, bool want);

/* The plaintext that has arrived and was not consumed yet; {NULL, 0} when none. Valid until
 * the next sl_stream_consume() or return to the loop. */
struct sl_slice sl_stream_peek(struct sl_stream *s);

/* Drops the first `n` bytes of what sl_stream_peek() showed. */
void sl_stream_consume(struct sl_stream *s, size_t n);

/* 0 while input may still come; UV_EOF when it ended cleanly and everything was consumed;
 * a negative error code when it ended otherwise (reset, TLS failure, truncation). */
int sl_stream_in_status(struct sl_stream *s);

/* Frees the calling thread's free input blocks (streams keep their input in blocks from a
 * per-thread list, and hold them only while they hold bytes). A thread that ran streams calls
 * it before it ends. */
void sl_stream_pool_drain(void);

/* Corking: between sl_stream_cork() and the matching sl_stream_uncork() nothing is written to
 * the socket; what the owner writes meanwhile (several heads, bodies, TLS records) leaves in
 * one write when the last cork is removed. Corks nest. sl_stream_uncork() tries the write at
 * once and returns true when that changed the stream's state without a later event: the
 * output was all taken by the socket (the stream is flushed, a pending sl_stream_end()
 * proceeds) or the write failed. The owner must then look at the stream again, as it would
 * after an event. It returns false when nothing was written, or the rest waits for the socket
 * (an event follows). */
void sl_stream_cork(struct sl_stream *s);
bool sl_stream_uncork(struct sl_stream *s);

/* Copies up to `n` bytes of plaintext for the peer. Returns the number taken (0 when the
 * output is full: wait for the event), or a negative code once the stream failed. */
SL_MUST_CHECK int sl_stream_write(struct sl_stream *s, const void *p, size_t n);

/* Copies all `n` bytes or none: for protocol text (heads, chunk framing) that must not be
 * split. Returns 0, SL_EAGAIN when there is no room for all of it, or a negative code. */
SL_MUST_CHECK int sl_stream_write_all(struct sl_stream *s, const void *p, size_t n);

/* True when sl_stream_write() would take at least `n` bytes now. */
bool sl_stream_has_room(const struct sl_stream *s, size_t n);

/* True when every byte written has been handed to the kernel. */
bool sl_stream_is_flushed(const struct sl_stream *s);

/* Bytes written to the stream and not (yet) handed to the kernel: what waits in its buffers and
 * in a write in progress, as ciphertext under TLS (then at least the plaintext it carries, but
 * for a record partly handed over). Still meaningful after sl_stream_close() until its callback,
 * when it counts what the close dropped. */
size_t sl_stream_unsent(const struct sl_stream *s);

/* Ends the output: under TLS queues close_notify; once flushed, shuts the socket's write side
 * down (FIN). Input may still be read. Idempotent. */
void sl_stream_end(struct sl_stream *s);

/* True once the peer closed its side (FIN) or the connection failed, whether or not every
 * byte it sent was consumed. */
bool sl_stream_peer_closed(const struct sl_stream *s);

/* The first error of the stream, or 0. */
int sl_stream_error(const struct sl_stream *s);

/* Closes the socket (pending output is dropped) and frees the stream's buffers and engine;
 * `on_closed` runs once afterwards. Idempotent (later calls do nothing). */
void sl_stream_close(struct sl_stream *s, sl_stream_closed_fn *on_closed);

#endif
