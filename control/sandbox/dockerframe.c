/* SPDX-License-Identifier: Apache-2.0 */
#include "control/sandbox/dockerframe.h"

#include <string.h>

void sl_dockerframe_init(struct sl_dockerframe *f)
{
    memset(f, 0, sizeof(*f));
}

/* Validates the collected header and enters its payload. */
static int enter_frame(struct sl_dockerframe *f)
{
    const uint8_t *h = f->_hdr;

    if (h[0] > SL_DOCKERFRAME_STDERR || h[1] != 0 || h[2] != 0 || h[3] != 0) {
        f->_bad = true;
        return SL_EINVAL;
    }
    f->_stream = h[0];
    f->_left = (uint32_t)h[4] << 24 | (uint32_t)h[5] << 16 | (uint32_t)h[6] << 8 | (uint32_t)h[7];
    f->_hn = 0;
    return 0;
}

int sl_dockerframe_feed(struct sl_dockerframe *f, const void *p, size_t n,
                        sl_dockerframe_emit_fn *emit, void *arg)
{
    const uint8_t *d = p;
    size_t i = 0;

    SL_ENSURE(!f->_bad, SL_EINVAL);
    while (i < n) {
        if (f->_left == 0) {
            size_t k = sizeof(f->_hdr) - f->_hn;

            if (k > n - i) {
                k = n - i;
            }
            memcpy(f->_hdr + f->_hn, d + i, k);
            f->_hn += k;
            i += k;
            if (f->_hn == sizeof(f->_hdr)) {
                SL_TRY(enter_frame(f));
            }
            continue;
        }
        size_t k = n - i < f->_left ? n - i : f->_left;

        emit(arg, f->_stream, d + i, k);
        i += k;
        f->_left -= (uint32_t)k;
    }
    return 0;
}

bool sl_dockerframe_is_at_boundary(const struct sl_dockerframe *f)
{
    return !f->_bad && f->_hn == 0 && f->_left == 0;
}

int sl_dockerframe_keep(struct sl_buf *b, size_t cap, const void *p, size_t n, bool *truncated)
{
    size_t room = b->len < cap ? cap - b->len : 0;

    if (n > room) {
        *truncated = true;
        n = room;
    }
    return n > 0 ? sl_buf_append(b, p, n) : 0;
}
