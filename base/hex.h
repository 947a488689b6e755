/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/hex.h - hexadecimal digits, for the parsers that read them (percent-escapes, chunk
 * sizes, pkt-line lengths, UUIDs), and fixed-width decimal fields (dates, CIDR prefixes). Pure
 * functions, no state.
 */
#ifndef SL_BASE_HEX_H
#define SL_BASE_HEX_H

#include <stddef.h>

/* The value 0-15 of the hexadecimal digit `c` (either case), or -1 for any other byte. */
int sl_hex_value(int c);

/* The value of the `n` (at most 9) decimal digits at `s`, or -1 when one of them is not a digit
 * (a sign included). */
int sl_dec_digits(const char *s, size_t n);

#endif
