/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/text.h - checks of UTF-8 text that names are held to (environment, schedule and token
 * names, descriptions, registry credentials): control characters, length in characters. Pure
 * functions, no state; the text is taken as valid UTF-8 (jansson's strings are).
 */
#ifndef SL_BASE_TEXT_H
#define SL_BASE_TEXT_H

#include <stdbool.h>
#include <stddef.h>

/* Whether the `n` bytes at `s` hold a C0 control other than those in `allowed` (a
 * NUL-terminated list, "" for none; a NUL byte is always a control), DEL, or a C1 control
 * (U+0080-U+009F, 0xc2 0x80-0x9f in UTF-8). */
bool sl_text_has_control(const char *s, size_t n, const char *allowed);

/* The characters (code points) of the `n` bytes of UTF-8 at `s`. */
size_t sl_text_chars(const char *s, size_t n);

#endif
