/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/err.h - error codes, result conventions and the few macros every module uses.
 *
 * Fallible functions return int: 0 on success, a negative value on error. libuv's UV_E* codes
 * (negative errno values) pass through untouched; sluice's own codes live in the band
 * -5000 ... -5099 so that the two never collide. sl_strerror() names both.
 */
#ifndef SL_BASE_ERR_H
#define SL_BASE_ERR_H

#include <stddef.h>

/* Marks a function whose result must be looked at; with -Werror an ignored result fails the build.
 */
#define SL_MUST_CHECK __attribute__((warn_unused_result))
/* printf-style format checking: `fmt` is argument `f`, the variadic part starts at `a`. */
#define SL_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define SL_NORETURN     __attribute__((noreturn))
/* An explicit fallthrough in a switch; clang ignores comments, so it must be an attribute. */
#define SL_FALLTHROUGH __attribute__((fallthrough))

#define SL_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* From a pointer to `member` back to the struct `type` that embeds it. */
#define SL_CONTAINER_OF(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

enum sl_err {
    SL_OK = 0,
    /* Input is incomplete: call again with more bytes. Not a failure. */
    SL_EAGAIN = -5000,
    /* An allocation failed. */
    SL_ENOMEM = -5001,
    /* A capped buffer or a documented limit would be exceeded. */
    SL_ETOOBIG = -5002,
    /* An argument or an input is malformed. */
    SL_EINVAL = -5003,
    /* A file could not be read or written (errno is logged where it happened). */
    SL_EIO = -5004,
    /* The thing asked for does not exist. */
    SL_ENOTFOUND = -5005,
    /* The thing to be created exists already. */
    SL_EEXIST = -5006,
    /* A cryptographic operation (OpenSSL, libsodium) failed. */
    SL_ECRYPTO = -5007,
    /* A configuration or policy document failed validation. */
    SL_EPOLICY = -5008,
    /* A path names a directory where a file was expected. */
    SL_EISDIR = -5009,
    /* The operation was abandoned because its owner is closing. */
    SL_ECANCELED = -5010,
    /* A peer (a daemon, a runtime) could not be reached or did not answer in time. */
    SL_EUNAVAILABLE = -5011,
    /* A path names something other than a regular file (a device, a FIFO, a socket). */
    SL_ENOTFILE = -5012,
};

/* Names `rc`: one of enum sl_err, a libuv UV_E* code, or "success" for 0. Never NULL. */
const char *sl_strerror(int rc);

/* Writes a printf-style message into the caller's buffer `err` of `cap` bytes, cut to fit and
 * always terminated; does nothing when `err` is NULL or `cap` is 0. The one way synchronous code
 * that reports through a caller buffer (`char *err, size_t errlen`, docs/style.md §4) fills it. */
void sl_errf(char *err, size_t cap, const char *fmt, ...) SL_PRINTF(3, 4);

/* Evaluates `expr` once; returns its value from the calling function when it is negative. */
#define SL_TRY(expr)             \
    do {                         \
        int sl_try_rc_ = (expr); \
        if (sl_try_rc_ < 0) {    \
            return sl_try_rc_;   \
        }                        \
    } while (0)

/* Returns `err` from the calling function unless `cond` holds. */
#define SL_ENSURE(cond, err) \
    do {                     \
        if (!(cond)) {       \
            return (err);    \
        }                    \
    } while (0)

/* Always-on abort for states where continuing would corrupt memory. Never for input checks. */
#define SL_BUG_ON(cond)                        \
    do {                                       \
        if (cond) {                            \
            sl_bug(__FILE__, __LINE__, #cond); \
        }                                      \
    } while (0)

/* Logs the failed condition and aborts. Used by SL_BUG_ON only. */
SL_NORETURN void sl_bug(const char *file, int line, const char *cond);

#endif
