/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proxy/conn.h - one client connection of the proxy: the state machine of docs/reference/proxy.md
 * §4.
 *
 *   REQUEST_HEAD --CONNECT allowed--> TUNNEL_SNIFF --ClientHello--> TLS_HANDSHAKE (MINTING)
 *        ^   |                             |plain HTTP, port 80            |
 *        |   |absolute-form allowed        v                               v
 *        |   +-------------------------> DIALING --upstream ready--> FORWARDING --101--> RELAY
 *        +------------------------------------------- response complete ---+
 *   A transparent listener's connection (docs/reference/proxy.md §4.12) starts in TUNNEL_SNIFF:
 *   a ClientHello's SNI opens the tunnel a CONNECT would, plain HTTP goes to REQUEST_HEAD.
 *   Any refusal or error -> a response with X-Sluice-Reason when one can still be sent ->
 *   FLUSHING (the last response leaves) -> LINGERING (FIN, input discarded a while) -> CLOSED
 *   (the handles close; the memory goes with the last callback).
 *
 * Every request is decided against the worker's newest snapshot when its head has arrived,
 * before any byte of it leaves; the connection keeps that snapshot until the request's audit
 * line is written. The connection's memory is bounded: two streams (proxy/stream.h), two
 * parsers with capped heads, one arena per request, nothing that grows with a body.
 *
 * A connection is created by its worker's listener and frees itself when it closes; nothing
 * outside the connection holds a pointer to it but the worker's list of open connections. Its
 * files (conn.c and the rooms around proxy/conn_int.h) are private to it; these functions are
 * what the worker (proxy/worker.c) calls, all on the worker's loop thread, none reentrant from
 * a connection's own callbacks.
 */
#ifndef SL_PROXY_CONN_H
#define SL_PROXY_CONN_H

#include <uv.h>

struct sl__listener;
struct sl__worker;

/* Accepts one pending connection on `listener` (one of w's listeners, borrowed) and starts it:
 * it then runs itself on w's loop and frees itself after it closes. A transparent listener's
 * connection (docs/reference/proxy.md §4.12) is identified by its source address first: an
 * unknown one is closed with its audit line. Beyond cfg->max_connections over all workers it
 * is answered 503 overloaded and ended (a transparent one closed, audited overloaded); likewise
 * beyond its address's cfg->max_connections_per_client (client-overloaded). A refused
 * connection holds no slot of cfg->max_connections; beyond SL__REFUSING_MAX being answered at
 * once it is closed at once, audited all the same. Out of
 * memory, or a failed accept, leaves nothing behind (the pending connection may stay in the
 * backlog). */
void sl__conn_accept(struct sl__worker *w, struct sl__listener *listener);

/* Draining (w->draining is set): a connection waiting for a request with no byte of it yet is
 * closed; every other one finishes its current exchange (or relay) and then ends. Does not
 * free anything synchronously. */
void sl__conn_drain_all(struct sl__worker *w);

/* Closes every connection of `w` now (requests in flight are cut, with no audit line); their
 * memory goes once their handles have closed, on a later turn of the loop. */
void sl__conn_close_all(struct sl__worker *w);

/* `w->snapshot` was replaced: every long-lived relay (websocket, passthrough tunnel) is
 * decided again and closed, with its audit line, when it is no longer allowed; a relay that
 * still holds has its timer set for the client's expiry again. */
void sl__conn_policy_changed(struct sl__worker *w);

#endif
