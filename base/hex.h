/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/hex.h - hexadecimal digits, for the parsers that read them (percent-escapes, chunk
 * sizes, pkt-line lengths, UUIDs). Pure functions, no state.
 */
#ifndef SL_BASE_HEX_H
#define SL_BASE_HEX_H

/* The value 0-15 of the hexadecimal digit `c` (either case), or -1 for any other byte. */
int sl_hex_value(int c);

#endif
