/* SPDX-License-Identifier: Apache-2.0 */
#include "base/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include <uv.h>

#include "base/log.h"

const char *sl_strerror(int rc)
{
    switch (rc) {
    case SL_OK:
        return "success";
    case SL_EAGAIN:
        return "incomplete input";
    case SL_ENOMEM:
        return "out of memory";
    case SL_ETOOBIG:
        return "limit exceeded";
    case SL_EINVAL:
        return "invalid input";
    case SL_EIO:
        return "input/output error";
    case SL_ENOTFOUND:
        return "not found";
    case SL_EEXIST:
        return "already exists";
    case SL_ECRYPTO:
        return "cryptographic operation failed";
    case SL_EPOLICY:
        return "policy is invalid";
    case SL_EISDIR:
        return "is a directory";
    case SL_ECANCELED:
        return "canceled";
    case SL_EUNAVAILABLE:
        return "unavailable";
    case SL_ENOTFILE:
        return "not a regular file";
    default:
        break;
    }
    if (rc < 0 && rc > -4096) {
        return uv_strerror(rc);
    }
    return "unknown error";
}

void sl_errf(char *err, size_t cap, const char *fmt, ...)
{
    va_list ap;

    if (err == NULL || cap == 0) {
        return;
    }
    va_start(ap, fmt);
    (void)vsnprintf(err, cap, fmt, ap);
    va_end(ap);
}

void sl_bug(const char *file, int line, const char *cond)
{
    sl_log(SL_LOG_ERROR, 0, "BUG at %s:%d: %s", file, line, cond);
    abort();
}
