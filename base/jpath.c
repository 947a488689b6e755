/* SPDX-License-Identifier: Apache-2.0 */
#include "base/jpath.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

void sl_jpath_quote(char *dst, size_t cap, const char *s, size_t n)
{
    size_t len = 0;

    if (cap < 8) {
        if (cap > 0) {
            dst[0] = '\0';
        }
        return;
    }
    dst[len++] = '"';
    for (size_t i = 0; i < n && i < SL_JPATH_QUOTE_MAX && len + 8 < cap; i++) {
        uint8_t c = (uint8_t)s[i];

        if (c == '"' || c == '\\') {
            dst[len++] = '\\';
            dst[len++] = (char)c;
        } else if (c >= 0x20 && c < 0x7f) {
            dst[len++] = (char)c;
        } else {
            int w = snprintf(dst + len, cap - len, "\\x%02x", c);

            len += w > 0 ? (size_t)w : 0;
        }
    }
    if (n > SL_JPATH_QUOTE_MAX && len + 5 < cap) {
        memcpy(dst + len, "...", 3);
        len += 3;
    }
    dst[len++] = '"';
    dst[len] = '\0';
}

/* Appends `s` to the path as far as it fits. */
static void append(char *path, size_t cap, size_t *len, const char *s, size_t n)
{
    size_t room = cap - 1 - *len;

    if (n > room) {
        n = room;
    }
    memcpy(path + *len, s, n);
    *len += n;
    path[*len] = '\0';
}

size_t sl_jpath_key(char *path, size_t cap, size_t *len, const char *key)
{
    size_t mark = *len;
    size_t n = strlen(key);
    bool plain = n > 0 && n <= SL_JPATH_QUOTE_MAX;
    char quoted[SL_JPATH_QUOTED_CAP];

    for (size_t i = 0; i < n && plain; i++) {
        uint8_t c = (uint8_t)key[i];

        plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
                || c == '_' || c == '-';
    }
    if (plain) {
        if (*len > 0) {
            append(path, cap, len, ".", 1);
        }
        append(path, cap, len, key, n);
        return mark;
    }
    sl_jpath_quote(quoted, sizeof(quoted), key, n);
    append(path, cap, len, "[", 1);
    append(path, cap, len, quoted, strlen(quoted));
    append(path, cap, len, "]", 1);
    return mark;
}

size_t sl_jpath_index(char *path, size_t cap, size_t *len, size_t i)
{
    size_t mark = *len;
    char text[32];
    int n = snprintf(text, sizeof(text), "[%zu]", i);

    append(path, cap, len, text, n > 0 ? (size_t)n : 0);
    return mark;
}

void sl_jpath_pop(char *path, size_t *len, size_t mark)
{
    *len = mark;
    path[mark] = '\0';
}

void sl_jpath_join(char *dst, size_t cap, const char *const *names, size_t n)
{
    size_t len = 0;

    dst[0] = '\0';
    for (size_t i = 0; i < n && len < cap; i++) {
        int w = snprintf(dst + len, cap - len, "%s%s", i > 0 ? ", " : "", names[i]);

        len += w > 0 ? (size_t)w : 0;
    }
}
