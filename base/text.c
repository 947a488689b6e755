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

size_t sl_text_chars(const char *s, size_t n)
{
    size_t chars = 0;

    for (size_t i = 0; i < n; i++) {
        chars += ((uint8_t)s[i] & 0xc0) != 0x80;
    }
    return chars;
}
