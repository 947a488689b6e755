/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/errlist.h - the list of errors a validation collects: each one {path, message}, in the
 * order found, capped, with a flag that says more were found than kept.
 *
 * Validators never stop at the first problem (a person fixing a document wants every error at
 * once), so they append one error per problem. The list lives in the caller's struct as three
 * members (`items`, `count`, `truncated`: the policy's struct sl_policy_errors, the
 * environments' struct sl_env_errors); the items are heap memory (sl_realloc) that the owner of
 * the struct frees with sl_free().
 */
#ifndef SL_BASE_ERRLIST_H
#define SL_BASE_ERRLIST_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"

/* Sizes of an error's path and message, terminators included; longer texts are cut. */
#define SL_ERRLIST_PATH_MAX    512
#define SL_ERRLIST_MESSAGE_MAX 320

/* One error: where (`$.environments.ci.rules[3].host`, `egress.rules[2].host`) and what. */
struct sl_errlist_item {
    char path[SL_ERRLIST_PATH_MAX];
    char message[SL_ERRLIST_MESSAGE_MAX];
};

/*
 * Appends the error {path, message printf'd from `fmt` and `ap`} to the `*count` items at
 * `*items`, unless `max` are there already: then it sets `*truncated` and appends nothing.
 * `path` is borrowed (copied, cut to fit). Returns 0, or SL_ENOMEM with the list unchanged.
 */
SL_MUST_CHECK int sl_errlist_vadd(struct sl_errlist_item **items, size_t *count, bool *truncated,
                                  size_t max, const char *path, const char *fmt, va_list ap)
        SL_PRINTF(6, 0);

#endif
