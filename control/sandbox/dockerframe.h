/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/sandbox/dockerframe.h - the demultiplexer of Docker's non-TTY attach stream (exec start
 * with "Tty":false, container logs): a sequence of frames, each an 8-byte header [stream, 0, 0, 0,
 * size as 32-bit big-endian] followed by `size` payload bytes. Stream 0 is stdin, 1 stdout, 2
 * standard error. Frames of different streams interleave in any order, and a read may end anywhere,
 * inside a header or a payload.
 *
 * Pure and sans-I/O: feed bytes as they arrive, get (stream, bytes) pieces back through a
 * callback that runs synchronously from sl_dockerframe_feed(). A payload may be delivered in
 * several pieces; zero-length frames deliver nothing. The bytes come from the daemon and are
 * treated as hostile: a header with a stream other than 0-2 or non-zero padding bytes is
 * malformed, and the demultiplexer then refuses everything after it.
 *
 * Lifecycle: sl_dockerframe_init() on caller storage -> sl_dockerframe_feed() any number of
 * times -> nothing to release.
 */
#ifndef SL_CONTROL_SANDBOX_DOCKERFRAME_H
#define SL_CONTROL_SANDBOX_DOCKERFRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"

#define SL_DOCKERFRAME_STDIN  0
#define SL_DOCKERFRAME_STDOUT 1
#define SL_DOCKERFRAME_STDERR 2

/* A value type so that owners can embed it; only the module touches the fields. */
struct sl_dockerframe {
    /* Header bytes collected so far (0-7 while collecting, 0 while in a payload). */
    uint8_t _hdr[8];
    size_t _hn;
    /* Payload bytes of the current frame still to come. */
    uint32_t _left;
    /* Stream of the current frame. */
    int _stream;
    /* Set once a malformed header was seen; sticky. */
    bool _bad;
};

/* One piece of a payload: `n` > 0 bytes at `p` (borrowed for the call) of `stream`. */
typedef void sl_dockerframe_emit_fn(void *arg, int stream, const uint8_t *p, size_t n);

/* Prepares an empty demultiplexer at a frame boundary. */
void sl_dockerframe_init(struct sl_dockerframe *f);

/*
 * Consumes `n` bytes at `p` (borrowed), calling `emit` for each payload piece in order.
 * Returns 0, or SL_EINVAL when a malformed header was found (pieces before it were emitted;
 * every later call returns SL_EINVAL at once).
 */
SL_MUST_CHECK int sl_dockerframe_feed(struct sl_dockerframe *f, const void *p, size_t n,
                                      sl_dockerframe_emit_fn *emit, void *arg);

/*
 * The capped sink an owner typically emits into: appends to `b` as much of the `n` bytes at
 * `p` as fits under `cap` bytes in total, drops the rest and then sets `*truncated`. Returns 0
 * or SL_ENOMEM (nothing appended). `b`'s own cap must be at least `cap`.
 */
SL_MUST_CHECK int sl_dockerframe_keep(struct sl_buf *b, size_t cap, const void *p, size_t n,
                                      bool *truncated);

/* True at a frame boundary: the stream may end here without losing part of a frame. */
bool sl_dockerframe_is_at_boundary(const struct sl_dockerframe *f);

#endif
