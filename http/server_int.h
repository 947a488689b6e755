/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http/server_int.h - what the two files of http/server share: the server's body, its
 * listeners, and the calls between the connections (server.c) and the server and its
 * listeners (server_listen.c). Everything runs on the server's loop thread.
 */
#ifndef SL_HTTP_SERVER_INT_H
#define SL_HTTP_SERVER_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "base/list.h"
#include "http/server.h"
#include "http/tls.h"

/* The chunk size of the request arenas (the parser's and each exchange's). */
#define SL__HTTP_ARENA_CHUNK_BYTES ((size_t)4096)

struct sl__http_conn;

union sl__http_sock {
    uv_handle_t handle;
    uv_stream_t stream;
    uv_tcp_t tcp;
    uv_pipe_t pipe;
};

enum sl__http_listener_state {
    SL__HTTP_LISTENER_FREE = 0,
    SL__HTTP_LISTENER_OPEN,
    SL__HTTP_LISTENER_CLOSING,
};

/* One listening socket; embedded in the server. */
struct sl__http_listener {
    /* The owner; set when the slot is first used. */
    struct sl_http_server *srv;
    enum sl__http_listener_state state;
    bool is_unix;
    /* Borrowed (sl_http_server_listen_tls()); NULL for a listener in the clear. */
    struct sl_http_tls *tls;
    /* The listening handle; initialised while state != SL__HTTP_LISTENER_FREE. */
    union sl__http_sock sock;
    /* A handle to accept a connection into only to refuse it (over the connection limit, or
     * out of memory). Busy from the accept until its close callback; while it is busy,
     * another connection to refuse leaves the listener stalled (libuv stops polling it until
     * the pending connection is accepted), and the close callback accepts it. */
    union sl__http_sock spare;
    bool spare_busy;
    bool stalled;
};

struct sl_http_server {
    /* Borrowed; outlives the server. */
    uv_loop_t *loop;
    sl_http_handler_fn *handler;
    void *arg;
    /* Configuration with every default applied; `error_key` points at `error_key_buf`. */
    struct sl_http_server_config cfg;
    char error_key_buf[SL_HTTP_ERROR_KEY_MAX + 1];
    /* Cap on each request arena (the parser's and each exchange's), from the head limits. */
    size_t arena_max_bytes;
    /* The canned response for refused connections (libuv needs a non-const buffer). */
    char overload[512];
    size_t overload_len;
    struct sl__http_listener listeners[SL_HTTP_SERVER_LISTENERS_MAX];
    /* An idle handle that makes the end of sl_http_server_close() always asynchronous, even
     * for a server that never listened. Never started. */
    uv_timer_t anchor;
    /* Server-owned handles (anchor, listeners, busy spares) whose close callback is owed. */
    unsigned pending_closes;
    /* Open connections (each owns itself; unlinked in its last close callback). */
    struct sl_list conns;
    size_t n_conns;
    /* Request body bytes held now (see sl_http_server_config.bodies_max_bytes). */
    size_t body_bytes;
    /* Last connection id handed out. */
    uint64_t next_id;
    /* Local port of the most recent TCP listener, or -1. */
    int tcp_port;
    bool closing;
    /* sl_http_server_drain(): answers in flight are still being written; the anchor timer runs
     * as the grace period. */
    bool draining;
    sl_http_closed_fn *closed;
    void *closed_arg;
};

/* Accepts the pending connection of `l` into a new connection (server.c). Returns 0 when the
 * pending connection was taken (served, or closed at once), or a negative code when it was not
 * touched and the caller must refuse it. */
int sl__http_conn_create(struct sl__http_listener *l);

/* Closes every connection of `srv` (server.c); none is freed synchronously. */
void sl__http_conns_close(struct sl_http_server *srv);

/* For sl_http_server_drain() (server.c): closes every connection with no request at the
 * handler and no answer being written; the others close once their answer is written. Returns
 * how many were kept. */
size_t sl__http_conns_drain(struct sl_http_server *srv);

/* Frees the server once it is closing and nothing it owns is open, then tells the owner
 * (server_listen.c); called whenever a connection or a handle of the server has gone. */
void sl__http_server_maybe_finish(struct sl_http_server *srv);

#endif
