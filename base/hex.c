/* SPDX-License-Identifier: Apache-2.0 */
#include "base/hex.h"

#include <string.h>

int sl_hex_value(int c)
{
    static const char digits[] = "0123456789abcdef";
    const char *at;

    /* strchr() would find the terminating NUL and bytes that wrap around to a digit. */
    if (c <= 0 || c > 0x7f) {
        return -1;
    }
    at = strchr(digits, c >= 'A' && c <= 'F' ? c - 'A' + 'a' : c);
    return at != NULL ? (int)(at - digits) : -1;
}

int sl_dec_digits(const char *s, size_t n)
{
    int v = 0;

    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return -1;
        }
        v = v * 10 + (s[i] - '0');
    }
    return v;
}
