/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/buf.h - a growable byte buffer with a hard cap.
 *
 * Every growable buffer in sluice is capped: appending past `max` bytes returns SL_ETOOBIG and
 * leaves the buffer as it was. The contents are always NUL-terminated (the terminator is not
 * counted in `len`), so a buffer of text can be used as a C string.
 *
 * Lifecycle: sl_buf_init() on caller storage -> appends -> sl_buf_finish() (frees, re-inits).
 */
#ifndef SL_BASE_BUF_H
#define SL_BASE_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

struct sl_buf {
    /* The bytes, owned by the buffer; NULL until the first append. */
    uint8_t *p;
    /* Bytes in use. Invariant: len < _cap when p != NULL (room for the terminator). */
    size_t len;
    /* Bytes allocated. */
    size_t _cap;
    /* Most bytes `len` may ever reach. */
    size_t _max;
};

/* Prepares an empty buffer that may hold at most `max` bytes. Allocates nothing. */
void sl_buf_init(struct sl_buf *b, size_t max);

/* Frees the bytes and leaves an empty buffer with the same cap. A zeroed buffer is fine. */
void sl_buf_finish(struct sl_buf *b);

/* Gives an empty buffer that holds no memory the storage `p` of `cap` bytes (from sl_malloc;
 * 0 < cap <= max + 1), so a caller can recycle storage of one size. */
void sl_buf_adopt(struct sl_buf *b, uint8_t *p, size_t cap);

/* Takes the buffer's storage out of it, whatever it holds: returns it (NULL when there is none)
 * with its size in *cap; the buffer is left empty, holding no memory, with the same maximum. */
uint8_t *sl_buf_take(struct sl_buf *b, size_t *cap);

/* Appends `n` bytes. Returns 0, SL_ETOOBIG past the cap, or SL_ENOMEM; on error nothing changed. */
SL_MUST_CHECK int sl_buf_append(struct sl_buf *b, const void *p, size_t n);

/* Room for `n` more bytes at the end, for a producer that writes in place (then
 * sl_buf_commit()). Returns the first free byte, or NULL when `n` more would pass the maximum
 * or memory ran out (the buffer is unchanged). The pointer is valid until the next call that
 * changes the buffer. */
uint8_t *sl_buf_reserve(struct sl_buf *b, size_t n);

/* Adds `n` bytes written in place after sl_buf_reserve() (at most what it reserved). */
void sl_buf_commit(struct sl_buf *b, size_t n);

/* Appends a NUL-terminated string (without its terminator). */
SL_MUST_CHECK int sl_buf_append_str(struct sl_buf *b, const char *s);

/* Appends `v` in decimal (no printf: heads and log lines are built on every request). */
SL_MUST_CHECK int sl_buf_append_u64(struct sl_buf *b, uint64_t v);

/* Writes `v` in decimal at the end of `out` (at least 20 bytes) and returns where it starts;
 * `*n` gets its length. No terminator. */
char *sl_fmt_u64(char *out_end, uint64_t v, size_t *n);

/* Appends printf-style text. Same results as sl_buf_append(). */
SL_MUST_CHECK int sl_buf_printf(struct sl_buf *b, const char *fmt, ...) SL_PRINTF(2, 3);

/* Drops the first `n` bytes (all of them when n >= len). */
void sl_buf_consume(struct sl_buf *b, size_t n);

/* Empties the buffer but keeps its memory. */
void sl_buf_reset(struct sl_buf *b);

/* Cuts the contents back to their first `len` bytes (len <= b->len), keeping the memory: what a
 * builder that failed half-way uses to leave the buffer as it found it. */
void sl_buf_truncate(struct sl_buf *b, size_t len);

/* The contents as a C string; "" for a buffer that never grew. Borrowed. */
const char *sl_buf_cstr(const struct sl_buf *b);

/* Checks the invariants; used in assertions. */
bool sl_buf_is_valid(const struct sl_buf *b);

#endif
