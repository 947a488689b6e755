/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/list.h - an intrusive doubly linked list: each element embeds a struct sl_list, the
 * owner keeps one struct sl_list as the head, and SL_CONTAINER_OF() (base/err.h) leads from a
 * link back to its element. The list is circular through the head, so linking and unlinking
 * have no end cases; an empty list is a head that is its own neighbour both ways.
 *
 * Lifecycle: sl_list_init() on the head before any use -> sl_list_push_front(),
 * sl_list_push_back() and sl_list_remove() of elements (an element is in at most one list at a
 * time) -> nothing to free: the list owns no memory. Not thread-safe: the owner's lock (if any)
 * guards it.
 */
#ifndef SL_BASE_LIST_H
#define SL_BASE_LIST_H

#include <stdbool.h>

struct sl_list {
    /* In a head: the last and the first element (the head itself when empty). In an element:
     * its neighbours (the head at either end). */
    struct sl_list *prev;
    struct sl_list *next;
};

static inline void sl_list_init(struct sl_list *head)
{
    head->prev = head;
    head->next = head;
}

static inline bool sl_list_empty(const struct sl_list *head)
{
    return head->next == head;
}

/* Links `link` (in no list) as the first element of `head`. */
static inline void sl_list_push_front(struct sl_list *head, struct sl_list *link)
{
    link->prev = head;
    link->next = head->next;
    head->next->prev = link;
    head->next = link;
}

/* Links `link` (in no list) as the last element of `head`. */
static inline void sl_list_push_back(struct sl_list *head, struct sl_list *link)
{
    link->next = head;
    link->prev = head->prev;
    head->prev->next = link;
    head->prev = link;
}

/* Unlinks `link` from the list it is in; it is then in none (its own neighbour). */
static inline void sl_list_remove(struct sl_list *link)
{
    link->prev->next = link->next;
    link->next->prev = link->prev;
    link->prev = link;
    link->next = link;
}

#endif
