/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/arena.h - a capped bump allocator for data that dies all at once.
 *
 * Request-scoped data (a parsed head, header copies) and immutable compiled objects (a policy
 * snapshot's strings and tables) are carved from an arena and released together. Allocations
 * are aligned for any scalar type. The total of all chunks never exceeds the arena's cap.
 *
 * Lifecycle: sl_arena_init() on caller storage -> sl_arena_alloc()... -> sl_arena_reset()
 * (keeps the first chunk for reuse) or sl_arena_finish() (frees everything).
 */
#ifndef SL_BASE_ARENA_H
#define SL_BASE_ARENA_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"

struct sl_arena_chunk;

struct sl_arena {
    /* Newest chunk first; owned. NULL until the first allocation. */
    struct sl_arena_chunk *_head;
    /* Usable size of an ordinary chunk, in bytes. */
    size_t _chunk_bytes;
    /* Bytes of all chunks currently held, headers included. */
    size_t _held_bytes;
    /* Cap on _held_bytes. */
    size_t _max_bytes;
};

/* Prepares an empty arena that grows in chunks of `chunk_bytes` up to `max_bytes` in all. */
void sl_arena_init(struct sl_arena *a, size_t chunk_bytes, size_t max_bytes);

/* Returns `n` bytes of aligned, uninitialised memory owned by the arena, or NULL when the cap
 * would be exceeded or memory is short. */
SL_MUST_CHECK void *sl_arena_alloc(struct sl_arena *a, size_t n);

/* Copies `n` bytes of `s` into the arena and NUL-terminates them. NULL on failure. */
SL_MUST_CHECK char *sl_arena_strndup(struct sl_arena *a, const char *s, size_t n);

/* Releases every allocation but keeps the oldest chunk for reuse. */
void sl_arena_reset(struct sl_arena *a);

/* Frees everything. A zeroed or finished arena is fine. */
void sl_arena_finish(struct sl_arena *a);

/* Bytes currently held from the heap (for metrics and memory bounds). */
size_t sl_arena_held_bytes(const struct sl_arena *a);

#endif
