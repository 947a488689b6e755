/* SPDX-License-Identifier: Apache-2.0 */
#include "base/jdepth.h"

#include <stdint.h>

bool sl_jdepth_is_over(const void *json, size_t n, size_t max)
{
    const uint8_t *p = json;
    size_t depth = 0;
    bool in_string = false;

    for (size_t i = 0; i < n; i++) {
        uint8_t c = p[i];

        if (in_string) {
            if (c == '\\') {
                i++;
            } else if (c == '"') {
                in_string = false;
            }
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > max) {
                return true;
            }
        } else if ((c == ']' || c == '}') && depth > 0) {
            depth--;
        }
    }
    return false;
}
