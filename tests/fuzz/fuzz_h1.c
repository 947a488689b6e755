/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/fuzz/fuzz_h1.c - the HTTP/1.x message parser on hostile bytes. The first input byte
 * picks the direction and the piece size; the rest is the stream. Invariants: a call never
 * consumes more than it was given, body slices lie inside the input, a head is only reported
 * with its method/status set, and nothing more is accepted after an error or an upgrade.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/arena.h"
#include "base/err.h"
#include "http/h1.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sl_h1_limits lim = { 4096, 32 };
    struct sl_arena arena;
    struct sl_h1 p;
    enum sl_h1_kind kind;
    size_t step;
    size_t off = 0;
    int stopped = 0;

    if (size < 1) {
        return 0;
    }
    kind = (data[0] & 1) != 0 ? SL_H1_RESPONSE : SL_H1_REQUEST;
    step = (size_t)(data[0] >> 1) + 1;
    data++;
    size--;
    sl_arena_init(&arena, 1024, 1 << 20);
    sl_h1_init(&p, kind, &lim, &arena);
    if (kind == SL_H1_RESPONSE && (step & 0x40) != 0) {
        sl_h1_expect_no_body(&p);
    }
    while (!stopped) {
        size_t len = size - off < step ? size - off : step;
        struct sl_h1_event ev;
        int used = sl_h1_feed(&p, data + off, len, &ev);

        if (used < 0) {
            SL_BUG_ON(used != SL_EINVAL && used != SL_ETOOBIG && used != SL_ENOMEM);
            SL_BUG_ON(sl_h1_error(&p)[0] == '\0');
            SL_BUG_ON(sl_h1_feed(&p, data + off, len, &ev) >= 0);
            break;
        }
        SL_BUG_ON((size_t)used > len);
        off += (size_t)used;
        switch (ev.type) {
        case SL_H1_EV_NONE:
            if (off == size) {
                stopped = 1;
            }
            break;
        case SL_H1_EV_HEAD:
            SL_BUG_ON(kind == SL_H1_REQUEST && sl_h1_head(&p)->method[0] == '\0');
            SL_BUG_ON(kind == SL_H1_RESPONSE && sl_h1_head(&p)->status < 100);
            break;
        case SL_H1_EV_BODY:
            SL_BUG_ON(ev.body.p < data || ev.body.p + ev.body.n > data + size);
            break;
        case SL_H1_EV_END:
            sl_arena_reset(&arena);
            break;
        case SL_H1_EV_UPGRADE:
            SL_BUG_ON(sl_h1_feed(&p, data + off, size - off, &ev) >= 0);
            stopped = 1;
            break;
        }
    }
    sl_h1_finish(&p);
    sl_arena_finish(&arena);
    return 0;
}
