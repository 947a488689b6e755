/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/slice.h - a borrowed view of bytes.
 *
 * A slice never owns its bytes and never outlives the callback or object that produced them
 * unless the bytes are copied (llhttp data pointers, OpenSSL buffers, parsed JSON strings).
 */
#ifndef SL_BASE_SLICE_H
#define SL_BASE_SLICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct sl_slice {
    /* First byte; may be NULL when n == 0. Borrowed. */
    const uint8_t *p;
    /* Length in bytes. */
    size_t n;
};

static inline struct sl_slice sl_slice_of(const void *p, size_t n)
{
    return (struct sl_slice){ (const uint8_t *)p, n };
}

static inline struct sl_slice sl_slice_str(const char *s)
{
    return (struct sl_slice){ (const uint8_t *)s, strlen(s) };
}

static inline bool sl_slice_eq(struct sl_slice a, struct sl_slice b)
{
    return a.n == b.n && (a.n == 0 || memcmp(a.p, b.p, a.n) == 0);
}

#endif
