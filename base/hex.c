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
