/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/mem.h - every heap allocation of sluice's own code goes through here.
 *
 * The wrappers behave like their libc namesakes (sl_free(NULL) is a no-op). Tests can make the
 * Nth allocation from now fail with sl_mem_fail_after(), to prove that every failure path
 * unwinds without a leak or a crash (the allocation-failure sweep of docs/style.md §9).
 */
#ifndef SL_BASE_MEM_H
#define SL_BASE_MEM_H

#include <stddef.h>

#include "base/err.h"

SL_MUST_CHECK void *sl_malloc(size_t n);
SL_MUST_CHECK void *sl_calloc(size_t count, size_t size);
SL_MUST_CHECK void *sl_realloc(void *p, size_t n);
void sl_free(void *p);

/* Returns a new NUL-terminated copy of `s` (or of its first `n` bytes), or NULL on OOM. */
SL_MUST_CHECK char *sl_strdup(const char *s);
SL_MUST_CHECK char *sl_strndup(const char *s, size_t n);

/* Test hook: the `n`th allocation from now (1 = the next one) and every one after it fails,
 * until sl_mem_fail_after(0) turns failures off again. Process-wide. */
void sl_mem_fail_after(long n);

/* Test hook: how many allocations have failed on purpose since the last sl_mem_fail_after(). */
long sl_mem_failures(void);

/* Test hooks for a countdown that only some code may spend (a harness's own allocations
 * between runs of the code under test): sl_mem_fail_suspend() turns failures off and returns
 * what was left of the countdown (0: none was set), sl_mem_fail_resume() sets it again
 * (sl_mem_fail_resume(0) leaves failures off). Neither resets sl_mem_failures(). */
long sl_mem_fail_suspend(void);
void sl_mem_fail_resume(long left);

#endif
