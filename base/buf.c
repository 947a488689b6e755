/* SPDX-License-Identifier: Apache-2.0 */
#include "base/buf.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/mem.h"

void sl_buf_init(struct sl_buf *b, size_t max)
{
    *b = (struct sl_buf){ NULL, 0, 0, max };
}

void sl_buf_finish(struct sl_buf *b)
{
    size_t max = b->_max;

    sl_free(b->p);
    sl_buf_init(b, max);
}

void sl_buf_adopt(struct sl_buf *b, uint8_t *p, size_t cap)
{
    SL_BUG_ON(b->p != NULL || p == NULL || cap == 0 || (b->_max < SIZE_MAX && cap > b->_max + 1));
    b->p = p;
    b->len = 0;
    b->_cap = cap;
    b->p[0] = '\0';
}

uint8_t *sl_buf_take(struct sl_buf *b, size_t *cap)
{
    uint8_t *p = b->p;

    *cap = b->_cap;
    sl_buf_init(b, b->_max);
    return p;
}

bool sl_buf_is_valid(const struct sl_buf *b)
{
    if (b->p == NULL) {
        return b->len == 0 && b->_cap == 0;
    }
    return b->len < b->_cap && b->len <= b->_max && b->p[b->len] == '\0';
}

/* Makes room for `n` more bytes plus the terminator, growing geometrically. */
static int reserve(struct sl_buf *b, size_t n)
{
    size_t want;
    size_t cap;
    uint8_t *p;

    if (n > b->_max || b->len > b->_max - n) {
        return SL_ETOOBIG;
    }
    want = b->len + n + 1;
    if (want <= b->_cap) {
        return 0;
    }
    cap = b->_cap < 64 ? 64 : b->_cap;
    while (cap < want) {
        cap = cap > SIZE_MAX / 2 ? want : cap * 2;
    }
    if (b->_max < SIZE_MAX && cap > b->_max + 1) {
        cap = b->_max + 1;
    }
    p = sl_realloc(b->p, cap);
    if (p == NULL) {
        return SL_ENOMEM;
    }
    b->p = p;
    b->_cap = cap;
    /* A first allocation has no terminator yet: the buffer stays a valid string while the room
     * reserved beyond it is unwritten. */
    b->p[b->len] = '\0';
    return 0;
}

int sl_buf_append(struct sl_buf *b, const void *p, size_t n)
{
    assert(sl_buf_is_valid(b));
    SL_TRY(reserve(b, n));
    if (n > 0) {
        memcpy(b->p + b->len, p, n);
    }
    b->len += n;
    b->p[b->len] = '\0';
    assert(sl_buf_is_valid(b));
    return 0;
}

uint8_t *sl_buf_reserve(struct sl_buf *b, size_t n)
{
    assert(sl_buf_is_valid(b));
    if (reserve(b, n) < 0) {
        return NULL;
    }
    return b->p + b->len;
}

void sl_buf_commit(struct sl_buf *b, size_t n)
{
    SL_BUG_ON(b->p == NULL || n > b->_cap - 1 - b->len);
    b->len += n;
    b->p[b->len] = '\0';
    assert(sl_buf_is_valid(b));
}

char *sl_fmt_u64(char *out_end, uint64_t v, size_t *n)
{
    char *p = out_end;

    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    *n = (size_t)(out_end - p);
    return p;
}

int sl_buf_append_u64(struct sl_buf *b, uint64_t v)
{
    char digits[20];
    size_t n;
    const char *p = sl_fmt_u64(digits + sizeof(digits), v, &n);

    return sl_buf_append(b, p, n);
}

int sl_buf_append_str(struct sl_buf *b, const char *s)
{
    return sl_buf_append(b, s, strlen(s));
}

int sl_buf_printf(struct sl_buf *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    assert(sl_buf_is_valid(b));
    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        return SL_EINVAL;
    }
    SL_TRY(reserve(b, (size_t)n));
    va_start(ap, fmt);
    n = vsnprintf((char *)b->p + b->len, b->_cap - b->len, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->p[b->len] = '\0';
        return SL_EINVAL;
    }
    b->len += (size_t)n;
    assert(sl_buf_is_valid(b));
    return 0;
}

void sl_buf_consume(struct sl_buf *b, size_t n)
{
    assert(sl_buf_is_valid(b));
    if (n >= b->len) {
        sl_buf_reset(b);
        return;
    }
    memmove(b->p, b->p + n, b->len - n);
    b->len -= n;
    b->p[b->len] = '\0';
}

void sl_buf_reset(struct sl_buf *b)
{
    sl_buf_truncate(b, 0);
}

void sl_buf_truncate(struct sl_buf *b, size_t len)
{
    SL_BUG_ON(len > b->len);
    b->len = len;
    if (b->p != NULL) {
        b->p[len] = '\0';
    }
}

const char *sl_buf_cstr(const struct sl_buf *b)
{
    return b->p == NULL ? "" : (const char *)b->p;
}
