/* SPDX-License-Identifier: Apache-2.0 */
#include "base/errlist.h"

#include <stdio.h>

#include "base/mem.h"

int sl_errlist_vadd(struct sl_errlist_item **items, size_t *count, bool *truncated, size_t max,
                    const char *path, const char *fmt, va_list ap)
{
    struct sl_errlist_item *v;
    struct sl_errlist_item *e;

    if (*count >= max) {
        *truncated = true;
        return 0;
    }
    v = sl_realloc(*items, (*count + 1) * sizeof(*v));
    if (v == NULL) {
        return SL_ENOMEM;
    }
    *items = v;
    e = &v[*count];
    (void)snprintf(e->path, sizeof(e->path), "%s", path);
    if (vsnprintf(e->message, sizeof(e->message), fmt, ap) < 0) {
        e->message[0] = '\0';
    }
    (*count)++;
    return 0;
}
