/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/fuzz/fuzz_dockerframe.c - the attach-stream demultiplexer (control/sandbox/dockerframe) on
 * arbitrary bytes, fed in two pieces split at a point taken from the input's first byte.
 *
 * Invariants, not just "no crash": the pieces emitted equal, byte for byte and stream by
 * stream, what a straightforward reference decoder of the whole input yields; the result (ok or
 * malformed) is the same; nothing is emitted for a frame after a malformed header; and the
 * total emitted never exceeds the input. ASan catches any read past the input.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "base/err.h"
#include "control/sandbox/dockerframe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct tally {
    /* Running position in each stream's reference output. */
    size_t pos[3];
    const uint8_t *ref[3];
    size_t ref_len[3];
    size_t total;
};

static uint8_t ref_buf[3][1u << 16];

static void on_piece(void *arg, int stream, const uint8_t *p, size_t n)
{
    struct tally *t = arg;

    if (stream < 0 || stream > 2 || n == 0) {
        __builtin_trap();
    }
    if (t->pos[stream] + n > t->ref_len[stream]
        || memcmp(t->ref[stream] + t->pos[stream], p, n) != 0) {
        __builtin_trap();
    }
    t->pos[stream] += n;
    t->total += n;
}

/* The reference: walk the frames of the whole input. Returns false on a malformed header. */
static bool reference(const uint8_t *d, size_t n, size_t len[3])
{
    size_t i = 0;

    len[0] = len[1] = len[2] = 0;
    while (n - i >= 8) {
        const uint8_t *h = d + i;
        size_t size = (size_t)h[4] << 24 | (size_t)h[5] << 16 | (size_t)h[6] << 8 | h[7];
        size_t k;

        if (h[0] > 2 || h[1] != 0 || h[2] != 0 || h[3] != 0) {
            return false;
        }
        i += 8;
        k = n - i < size ? n - i : size;
        memcpy(ref_buf[h[0]] + len[h[0]], d + i, k);
        len[h[0]] += k;
        i += k;
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sl_dockerframe f;
    struct tally t;
    size_t cut;
    bool ok;
    int rc;

    if (size == 0 || size > sizeof(ref_buf[0])) {
        return 0;
    }
    cut = data[0] % size;
    data++;
    size--;
    cut = cut > size ? size : cut;
    memset(&t, 0, sizeof(t));
    ok = reference(data, size, t.ref_len);
    for (int s = 0; s < 3; s++) {
        t.ref[s] = ref_buf[s];
    }
    sl_dockerframe_init(&f);
    rc = sl_dockerframe_feed(&f, data, cut, on_piece, &t);
    if (rc == 0) {
        rc = sl_dockerframe_feed(&f, data + cut, size - cut, on_piece, &t);
    } else if (sl_dockerframe_feed(&f, data + cut, size - cut, on_piece, &t) != SL_EINVAL) {
        /* A malformed stream stays refused. */
        __builtin_trap();
    }
    if ((rc == 0) != ok || t.total > size) {
        __builtin_trap();
    }
    for (int s = 0; s < 3; s++) {
        if (t.pos[s] != t.ref_len[s]) {
            __builtin_trap();
        }
    }
    if (ok && sl_dockerframe_is_at_boundary(&f)) {
        /* At a boundary, everything the input declared was delivered. */
        size_t declared = 0;

        for (size_t i = 0; i + 8 <= size;) {
            size_t n = (size_t)data[i + 4] << 24 | (size_t)data[i + 5] << 16
                       | (size_t)data[i + 6] << 8 | data[i + 7];

            declared += n;
            i += 8 + n;
        }
        if (declared != t.total) {
            __builtin_trap();
        }
    }
    return 0;
}
