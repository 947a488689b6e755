/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proxy/worker.h - the worker threads: one libuv loop each, one SO_REUSEPORT listener per
 * --listen address (and three per --transparent address) each, so the kernel spreads
 * connections and no connection ever moves between threads.
 *
 * The main thread creates the listening sockets (so that a bad address fails the start with
 * a clear message), then starts the workers. Afterwards it talks to them only through their
 * mailboxes: a newer snapshot, "drain" (stop accepting, finish the requests in flight) and
 * "stop" (close everything, end the thread). Two things it does without them: it reads their
 * threads' CPU time and their counters, and it may take the steering program off worker 0's
 * listening sockets and put it back (sl__worker_unsteer(), sl__worker_steer()), setsockopts
 * the kernel orders with accepts.
 */
#ifndef SL_PROXY_WORKER_H
#define SL_PROXY_WORKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "proxy/proxy_int.h"

/* Parses "ADDR:PORT" ("127.0.0.1:3128", "[::1]:3128") into `out`. Writes a message naming
 * the problem into `err` on failure. */
SL_MUST_CHECK int sl__listen_addr_parse(const char *s, struct sockaddr_storage *out, char *err,
                                        size_t errlen);

/* Prepares worker `index` (its loop and one listener per entry of `listens`, at most
 * SL__LISTENERS_MAX, each taking what its kind says) without starting its thread. On failure
 * writes a message into `err`; nothing is left open. */
SL_MUST_CHECK int sl__worker_init(struct sl__worker *w, unsigned index, struct sl__shared *sh,
                                  const struct sl__listen *listens, size_t n_listens, char *err,
                                  size_t errlen);

/* Starts the thread. */
SL_MUST_CHECK int sl__worker_start(struct sl__worker *w);

/* Hands `s` (a new reference, taken over) to the worker; it uses it for the next request. */
void sl__worker_post_snapshot(struct sl__worker *w, struct sl_snapshot *s);

/* Takes the worker's snapshot away: from the next request on it has none (503 no-policy), and
 * its relays and tunnels are checked again (they close). A later post_snapshot undoes it. */
void sl__worker_post_withdraw(struct sl__worker *w);

/* Asks the worker to drain, or to stop. */
void sl__worker_post_drain(struct sl__worker *w);
void sl__worker_post_stop(struct sl__worker *w);

/* Joins the thread (after stop) and frees what the worker held. */
void sl__worker_join(struct sl__worker *w);

/* Connections open on the worker now (any thread). */
uint64_t sl__worker_open_connections(struct sl__worker *w);

/* The CPU time the worker's thread has used, in ns (a started worker, any thread); 0 when the
 * kernel cannot say. */
uint64_t sl__worker_cpu_ns(const struct sl__worker *w);

/* Whether any of the worker's listening groups is steered by CPU (sl__worker_init(), worker 0). */
bool sl__worker_steered(const struct sl__worker *w);

/* Takes the steering program off worker 0's listening groups: from then on the kernel spreads
 * new connections by their addresses. The main thread calls it on a running worker 0, which
 * must not be draining (its listeners are then closing); the listening sockets are only read,
 * and the kernel serialises the change with accepts. A group it cannot change is logged and
 * stays steered (sl__worker_steered()). */
void sl__worker_unsteer(struct sl__worker *w);

/* Puts the steering program back on worker 0's listening groups that took it at the start and
 * had it taken off (sl__worker_unsteer()), under the same rules. True when at least one group
 * took it; a group that refuses it is logged and keeps the spread by address. */
bool sl__worker_steer(struct sl__worker *w);

/* While the steering is off (the shared `steer_watch`), on the worker's thread: counts a new
 * connection, accepted as `fd`, by the CPU it arrived on (SO_INCOMING_CPU), as the steering
 * program would have sent it, in the worker's `arrived_on`. */
void sl__worker_note_arrival(struct sl__worker *w, int fd);

#endif
