/* SPDX-License-Identifier: Apache-2.0 */
#include "base/arena.h"

#include <stdalign.h>
#include <stdint.h>
#include <string.h>

#include "base/mem.h"

struct sl_arena_chunk {
    struct sl_arena_chunk *next;
    /* Usable bytes after the header. */
    size_t size;
    /* Bytes handed out so far. */
    size_t used;
    alignas(max_align_t) unsigned char data[];
};

#define ARENA_ALIGN alignof(max_align_t)

void sl_arena_init(struct sl_arena *a, size_t chunk_bytes, size_t max_bytes)
{
    *a = (struct sl_arena){ NULL, chunk_bytes, 0, max_bytes };
}

static struct sl_arena_chunk *add_chunk(struct sl_arena *a, size_t at_least)
{
    size_t size = at_least > a->_chunk_bytes ? at_least : a->_chunk_bytes;
    size_t total = sizeof(struct sl_arena_chunk) + size;
    struct sl_arena_chunk *c;

    if (size > SIZE_MAX - sizeof(struct sl_arena_chunk) || total > a->_max_bytes
        || a->_held_bytes > a->_max_bytes - total) {
        return NULL;
    }
    c = sl_malloc(total);
    if (c == NULL) {
        return NULL;
    }
    c->next = a->_head;
    c->size = size;
    c->used = 0;
    a->_head = c;
    a->_held_bytes += total;
    return c;
}

void *sl_arena_alloc(struct sl_arena *a, size_t n)
{
    struct sl_arena_chunk *c = a->_head;
    size_t need;
    void *p;

    if (n > SIZE_MAX - ARENA_ALIGN) {
        return NULL;
    }
    need = (n + ARENA_ALIGN - 1) & ~(ARENA_ALIGN - 1);
    if (need == 0) {
        need = ARENA_ALIGN;
    }
    if (c == NULL || c->size - c->used < need) {
        c = add_chunk(a, need);
        if (c == NULL) {
            return NULL;
        }
    }
    p = c->data + c->used;
    c->used += need;
    return p;
}

char *sl_arena_strndup(struct sl_arena *a, const char *s, size_t n)
{
    char *d;

    if (n == SIZE_MAX) {
        return NULL;
    }
    d = sl_arena_alloc(a, n + 1);
    if (d == NULL) {
        return NULL;
    }
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

void sl_arena_reset(struct sl_arena *a)
{
    struct sl_arena_chunk *c = a->_head;

    if (c == NULL) {
        return;
    }
    while (c->next != NULL) {
        struct sl_arena_chunk *next = c->next;

        a->_held_bytes -= sizeof(*c) + c->size;
        sl_free(c);
        c = next;
    }
    c->used = 0;
    a->_head = c;
}

void sl_arena_finish(struct sl_arena *a)
{
    struct sl_arena_chunk *c = a->_head;

    while (c != NULL) {
        struct sl_arena_chunk *next = c->next;

        sl_free(c);
        c = next;
    }
    sl_arena_init(a, a->_chunk_bytes, a->_max_bytes);
}

size_t sl_arena_held_bytes(const struct sl_arena *a)
{
    return a->_held_bytes;
}
