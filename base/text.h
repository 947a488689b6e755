/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/text.h - checks of UTF-8 text that names are held to (environment, schedule and token
 * names, descriptions, registry credentials): control characters, invisible and reordering
 * characters, length in characters. Pure
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

/* Whether the `n` bytes of UTF-8 at `s` hold a character that is invisible or reorders the
 * text around it, so that two names that differ would read the same: the soft hyphen (U+00AD),
 * the Arabic letter mark (U+061C), the Mongolian vowel separator (U+180E), the zero-width
 * characters and marks U+200B-U+200F, the bidirectional embeddings and overrides U+202A-U+202E,
 * U+2060-U+2064 and the isolates and other format characters U+2066-U+206F, the byte order mark
 * (U+FEFF) and the interlinear annotation characters (U+FFF9-U+FFFB). */
bool sl_text_has_invisible(const char *s, size_t n);

/* The characters (code points) of the `n` bytes of UTF-8 at `s`. */
size_t sl_text_chars(const char *s, size_t n);

#endif
