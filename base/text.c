/* SPDX-License-Identifier: Apache-2.0 */
#include "base/text.h"

#include <stdint.h>
#include <string.h>

bool sl_text_has_control(const char *s, size_t n, const char *allowed)
{
    for (size_t i = 0; i < n; i++) {
        uint8_t c = (uint8_t)s[i];

        if ((c < 0x20 && (c == 0 || strchr(allowed, c) == NULL)) || c == 0x7f) {
            return true;
        }
        if (c == 0xc2 && i + 1 < n && (uint8_t)s[i + 1] >= 0x80 && (uint8_t)s[i + 1] <= 0x9f) {
            return true;
        }
    }
    return false;
}

bool sl_text_has_invisible(const char *s, size_t n)
{
    const uint8_t *u = (const uint8_t *)s;

    for (size_t i = 0; i + 1 < n; i++) {
        uint8_t b1 = u[i + 1];
        uint8_t b2 = i + 2 < n ? u[i + 2] : 0;

        if ((u[i] == 0xc2 && b1 == 0xad) || (u[i] == 0xd8 && b1 == 0x9c)
            || (u[i] == 0xe1 && b1 == 0xa0 && b2 == 0x8e)
            || (u[i] == 0xe2 && b1 == 0x80
                && ((b2 >= 0x8b && b2 <= 0x8f) || (b2 >= 0xaa && b2 <= 0xae)))
            || (u[i] == 0xe2 && b1 == 0x81
                && ((b2 >= 0xa0 && b2 <= 0xa4) || (b2 >= 0xa6 && b2 <= 0xaf)))
            || (u[i] == 0xef && b1 == 0xbb && b2 == 0xbf)
            || (u[i] == 0xef && b1 == 0xbf && b2 >= 0xb9 && b2 <= 0xbb)) {
            return true;
        }
    }
    return false;
}

size_t sl_text_chars(const char *s, size_t n)
{
    size_t chars = 0;

    for (size_t i = 0; i < n; i++) {
        chars += ((uint8_t)s[i] & 0xc0) != 0x80;
    }
    return chars;
}
