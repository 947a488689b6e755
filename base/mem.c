/* SPDX-License-Identifier: Apache-2.0 */
#include "base/mem.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* 0 = off; otherwise the number of allocations still allowed plus one. */
static atomic_long fail_countdown;
static atomic_long fail_count;

static int should_fail(void)
{
    long left = atomic_load_explicit(&fail_countdown, memory_order_relaxed);

    if (left == 0) {
        return 0;
    }
    if (left == 1) {
        atomic_fetch_add(&fail_count, 1);
        return 1;
    }
    atomic_fetch_sub(&fail_countdown, 1);
    return 0;
}

void sl_mem_fail_after(long n)
{
    atomic_store(&fail_countdown, n < 0 ? 0 : n);
    atomic_store(&fail_count, 0);
}

long sl_mem_failures(void)
{
    return atomic_load(&fail_count);
}

long sl_mem_fail_suspend(void)
{
    return atomic_exchange(&fail_countdown, 0);
}

void sl_mem_fail_resume(long left)
{
    atomic_store(&fail_countdown, left < 0 ? 0 : left);
}

void *sl_malloc(size_t n)
{
    if (should_fail()) {
        return NULL;
    }
    return malloc(n == 0 ? 1 : n);
}

void *sl_calloc(size_t count, size_t size)
{
    if (should_fail()) {
        return NULL;
    }
    return calloc(count == 0 ? 1 : count, size == 0 ? 1 : size);
}

void *sl_realloc(void *p, size_t n)
{
    if (should_fail()) {
        return NULL;
    }
    return realloc(p, n == 0 ? 1 : n);
}

void sl_free(void *p)
{
    free(p);
}

char *sl_strndup(const char *s, size_t n)
{
    char *d = sl_malloc(n + 1);

    if (d == NULL) {
        return NULL;
    }
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

char *sl_strdup(const char *s)
{
    return sl_strndup(s, strlen(s));
}
