/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/support/h1trace.h - the oracles of the HTTP/1.x fuzz targets. The trace oracle
 * (fuzz_response, fuzz_server): a stream of messages fed to http/h1 whole, one byte at a time and
 * in seed-derived pieces must give the same trace of events (each head as the target sums it up,
 * body byte counts and contents, ends, the error code or the close outcome). Along the way the
 * driver checks what holds for every stream: an error is SL_EINVAL or SL_ETOOBIG, a feed that
 * reports no event used its whole piece, body events come only inside a message with a body,
 * Content-Length framing gets exactly that many bytes, a close-delimited body ends only at the
 * close, nothing parses after an upgrade. The head checks that several targets share (framing,
 * hop-by-hop headers) come with it.
 *
 * Lifecycle: the target fills a struct sl_test_h1_driver (parser kind, limits, arena bounds,
 * its head check) and calls sl_test_h1_check_splits() once per input; a failed invariant is an
 * SL_BUG_ON abort, which is what a fuzz target reports. Nothing here allocates but the parser's
 * arena, freed before each call returns. Not thread-safe (the traces are static).
 */
#ifndef SL_TESTS_SUPPORT_H1TRACE_H
#define SL_TESTS_SUPPORT_H1TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/slice.h"
#include "http/h1.h"

/* What an entry of a trace records. */
enum sl_test_trace_type {
    SL_TEST_TRACE_HEAD = 1,
    SL_TEST_TRACE_BODY,
    SL_TEST_TRACE_END,
    SL_TEST_TRACE_UPGRADE,
    /* sl_h1_feed() failed; `status` is the code. */
    SL_TEST_TRACE_ERROR,
    /* At the close: the close ended a close-delimited body; nothing was open; sl_h1_eof()
     * failed (`status` is the code). */
    SL_TEST_TRACE_EOF_END,
    SL_TEST_TRACE_EOF_NONE,
    SL_TEST_TRACE_EOF_ERROR,
};

struct sl_test_trace_entry {
    enum sl_test_trace_type type;
    /* HEAD: what the target's head check puts there (a status, a hash of the method and the
     * target); ERROR, EOF_ERROR: the code. */
    int status;
    /* HEAD: the framing (enum sl_h1_body) and its length, and the head's flags. */
    int body_kind;
    uint64_t content_length;
    bool keep_alive;
    bool upgrade;
    bool expect_continue;
    /* BODY: bytes and FNV-1a of the bytes, summed over consecutive body events (the pieces
     * differ from one split to the next, their sum does not). */
    uint64_t n;
    uint64_t hash;
};

/* A trace stops growing at this many entries (the rest of the stream is not compared). */
#define SL_TEST_TRACE_MAX 64

struct sl_test_trace {
    struct sl_test_trace_entry e[SL_TEST_TRACE_MAX];
    size_t n;
};

/* How the stream is cut into sl_h1_feed() calls. */
enum sl_test_split {
    SL_TEST_SPLIT_WHOLE = 0,
    SL_TEST_SPLIT_BYTES,
    /* Pseudo-random pieces of 1..max bytes, from a seed. */
    SL_TEST_SPLIT_SEEDED,
};

struct sl_test_splitter {
    enum sl_test_split mode;
    uint32_t state;
    size_t max;
};

/* The size of the next piece when `left` bytes are left (0 only when `left` is). */
size_t sl_test_split_next(struct sl_test_splitter *s, size_t left);

struct sl_test_h1_driver {
    enum sl_h1_kind kind;
    /* NULL: sl_h1_init()'s defaults. */
    const struct sl_h1_limits *limits;
    /* sl_arena_init()'s chunk size and cap for the parser's arena. */
    size_t arena_chunk_bytes;
    size_t arena_cap_bytes;
    /* Checks the head of the target's kind and returns its trace entry (type HEAD). */
    struct sl_test_trace_entry (*check_head)(void *arg, const struct sl_h1_head *h);
    /* Called before the first message (`done` NULL) and after each message that ended (the
     * arena was reset), before the next is fed: where a response target calls
     * sl_h1_expect_no_body() for the next exchange. May be NULL. */
    void (*next)(void *arg, struct sl_h1 *p, const struct sl_test_trace_entry *done);
    void *arg;
    /* The stream must be between messages when it closes (a request is never
     * close-delimited). */
    bool eof_between_messages;
    /* A last entry that is SL_EINVAL in one trace and SL_ETOOBIG in the other counts as the
     * same: a grammar error past a limit is seen first when llhttp gets the whole span at once,
     * the limit first when the span arrives in pieces, and both refuse the message. */
    bool refusals_alike;
};

/* Feeds `m` to a fresh parser in the pieces `sp` gives, up to the close, and writes the trace
 * to `t`. */
void sl_test_h1_trace(const struct sl_test_h1_driver *d, const uint8_t *m, size_t n,
                      struct sl_test_splitter *sp, struct sl_test_trace *t);

/* True when the traces agree entry for entry (see `refusals_alike`). */
bool sl_test_trace_same(const struct sl_test_trace *a, const struct sl_test_trace *b,
                        bool refusals_alike);

/* The oracle: traces `m` whole, a byte at a time and in pieces of 1..97 bytes from `seed`,
 * and aborts (SL_BUG_ON) unless the three traces agree. */
void sl_test_h1_check_splits(const struct sl_test_h1_driver *d, const uint8_t *m, size_t n,
                             uint8_t seed);

/* Aborts unless the head is HTTP/1.0 or 1.1 with at most one Content-Length and at most one
 * Transfer-Encoding, never both, and Transfer-Encoding only as exactly `chunked` and never on
 * HTTP/1.0; a body framed by length has that Content-Length, a chunked one that
 * Transfer-Encoding: what the parser guarantees to both directions. */
void sl_test_h1_check_framing(const struct sl_h1_head *h);

/* Aborts if the head carries a header the proxy never forwards (docs/reference/proxy.md §4.6):
 * Proxy-Authorization, Proxy-Authenticate, Proxy-Connection, Keep-Alive, TE, Trailer. */
void sl_test_h1_check_no_hop_headers(const struct sl_h1_head *h);

/* How many headers of `h` are named `name` (the oracle's own count, not sl_h1_count()). */
size_t sl_test_h1_count(const struct sl_h1_head *h, const char *name);

/* The value of a header made of decimal digits only (aborts on anything else). */
uint64_t sl_test_decimal(struct sl_slice s);

#endif
