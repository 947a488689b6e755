/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/jdepth.h - the nesting depth of a JSON text, measured by a byte scan before a recursive
 * parser sees it. jansson recurses once per nesting level (up to 2048 levels); refusing a
 * document that nests deeper than its schema could ever need bounds that stack use.
 *
 * The scan knows strings (a bracket inside one does not count, backslash escapes included) and
 * nothing else: it never judges whether the text is valid JSON, which the parser does after.
 */
#ifndef SL_BASE_JDEPTH_H
#define SL_BASE_JDEPTH_H

#include <stdbool.h>
#include <stddef.h>

/* True when the `n` bytes at `json` (borrowed) open more than `max` arrays or objects inside
 * each other at some point. A closing bracket without an opening one is ignored. */
bool sl_jdepth_is_over(const void *json, size_t n, size_t max);

#endif
