/* SPDX-License-Identifier: Apache-2.0 */
/*
 * policy/punycode.h - Punycode (RFC 3492) both ways, and the structural checks IDNA2008 makes of
 * an A-label (RFC 5890 §2.3.2.1, RFC 5891 §4.2.3 and §5.4) that need no Unicode tables: what a
 * rule's `xn--` label must pass before the policy accepts it (docs/reference/snapshot.md §3).
 *
 * Pure functions over caller buffers: bounded, allocation-free, safe on hostile input (every
 * sum and product is checked for overflow, RFC 3492 §6.4).
 */
#ifndef SL_POLICY_PUNYCODE_H
#define SL_POLICY_PUNYCODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

/* Code points a DNS label can carry at most once decoded (a label is at most 63 bytes, and every
 * code point takes at least one of them). */
#define SL_PUNYCODE_LABEL_MAX 63

/* Decodes the Punycode `in` (`n` ASCII bytes, without any "xn--") into at most `cap` code points
 * at `out`; `*out_n` is set to their number. Case-insensitive digits. Returns 0, SL_EINVAL for
 * input that is no Punycode (a non-basic byte before the last '-', a bad digit, a truncated
 * number, an overflow, a code point beyond U+10FFFF), or SL_ETOOBIG when `cap` is too small. */
SL_MUST_CHECK int sl_punycode_decode(const char *in, size_t n, uint32_t *out, size_t cap,
                                     size_t *out_n);

/* Encodes `n` code points at `in` as Punycode into `out` (at most `cap` bytes, not terminated;
 * lower-case digits); `*out_n` is set to its length. Returns 0, SL_EINVAL for a code point beyond
 * U+10FFFF, or SL_ETOOBIG when `cap` is too small or a delta overflows. */
SL_MUST_CHECK int sl_punycode_encode(const uint32_t *in, size_t n, char *out, size_t cap,
                                     size_t *out_n);

/* Is the label `s` (`n` bytes, lower case, starting with "xn--") an A-label IDNA2008 accepts
 * structurally: its Punycode decodes to a U-label that has at least one non-ASCII code point,
 * only Unicode scalar values that are neither controls (C0, C1) nor noncharacters, no '-' at
 * either end and none in both its third and fourth places, and that encodes back to the same
 * label? (What needs the Unicode tables - the code points IDNA2008 disallows, combining marks,
 * the contextual and bidi rules - is left to the resolver.) When not, `*why` (when not NULL) is a
 * static phrase naming the first problem ("an xn-- label that ..."). */
bool sl_punycode_alabel_ok(const char *s, size_t n, const char **why);

#endif
