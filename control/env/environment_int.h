/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/env/environment_int.h - what the files of the environments module share, and nobody
 * else: the state of one validation (its error list and field path), the sealer calls and the
 * reading of a stored egress_json.
 *
 *   environment.c         the request document: errors, field paths, text checks, fields;
 *   environment_seal.c    the stored form: stored JSON, sealing, keep-on-resave;
 *   environment_render.c  the API form of a stored row.
 */
#ifndef SL_CONTROL_ENV_ENVIRONMENT_INT_H
#define SL_CONTROL_ENV_ENVIRONMENT_INT_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/jpath.h"
#include "control/env/environment.h"

#define SL__ENV_MIB ((int64_t)1 << 20)
#define SL__ENV_GIB ((int64_t)1 << 30)

/* The state of one validation: the path of the field being looked at and the errors so far. */
struct sl__env_parse {
    struct sl_env_errors *errs;
    char path[SL_ENV_FIELD_MAX];
    size_t path_len;
    /* SL_ENOMEM once memory ran out (validation carries on but the result is failure). */
    int rc;
    /* Errors found, including those past SL_ENV_ERRORS_MAX. */
    size_t n_errors;
    /* How many of them are 409 (a kept value that does not open) rather than 422. */
    size_t n_conflicts;
    /* Where warnings go (the spec being parsed), or NULL. */
    struct sl_env_spec *warn_to;
};

/* ---- environment.c ---- */

/* Refuses the request: the HTTP status and the one-line message of `e`. */
void sl__env_refuse(struct sl_env_errors *e, int status, const char *message);

/* Records an error at the current path (counted past the cap; SL_ENOMEM goes to p->rc). */
void sl__env_add_error(struct sl__env_parse *p, const char *fmt, ...) SL_PRINTF(2, 3);

/* An error on member `key` of the current path. */
void sl__env_key_error(struct sl__env_parse *p, const char *key, const char *message);

/* Records a warning at the current path in p->warn_to (nothing when NULL). */
void sl__env_add_warning(struct sl__env_parse *p, const char *fmt, ...) SL_PRINTF(2, 3);

/* Zeroes memory that held a secret; the volatile store is not optimised away. */
void sl__env_wipe(void *ptr, size_t n);

/* Enters member `key`: `.key`, or `["key"]` for a key that is not a plain identifier (it came
 * from the request). Returns the mark for sl__env_path_pop(). */
static inline size_t sl__env_path_key(struct sl__env_parse *p, const char *key)
{
    return sl_jpath_key(p->path, sizeof(p->path), &p->path_len, key);
}

/* Enters element `i`: `[i]`. Returns the mark. */
static inline size_t sl__env_path_index(struct sl__env_parse *p, size_t i)
{
    return sl_jpath_index(p->path, sizeof(p->path), &p->path_len, i);
}

/* Leaves what was entered since `mark`. */
static inline void sl__env_path_pop(struct sl__env_parse *p, size_t mark)
{
    sl_jpath_pop(p->path, &p->path_len, mark);
}

/* ---- environment_seal.c ---- */

/* Parses a stored egress_json and checks its shape. Returns 0 with `*out` a new reference,
 * SL_EIO (damaged) or SL_ENOMEM. */
SL_MUST_CHECK int sl__env_load_egress(const char *egress_json, json_t **out);

/* Opens `sealed` into `plain` (initialised here; finish it with sl__env_finish_plain()).
 * Returns 0 when it opens, 1 when it does not, SL_ENOMEM. */
SL_MUST_CHECK int sl__env_open_value(const struct sl_env_sealer *s, const char *sealed,
                                     struct sl_buf *plain);

/* Wipes and frees what sl__env_open_value() opened. */
void sl__env_finish_plain(struct sl_buf *plain);

/* 1 when the sealed text still opens, 0 when not, or SL_ENOMEM. */
SL_MUST_CHECK int sl__env_still_opens(const struct sl_env_sealer *s, const char *sealed);

#endif
