/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proxy/conn.c - the connection's state table, phase timer and stepper: accepting (a
 * transparent listener's connections identified by source address at once), the request head
 * (CONNECT, absolute-form, origin-form inside a tunnel or to a transparent listener), opening a
 * tunnel, timeouts, and the end of a connection (flush, linger, close). The other rooms are
 * listed in proxy/conn_int.h.
 */
#include "proxy/conn.h"

#include <assert.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"
#include "http/h1.h"
#include "policy/host.h"
#include "policy/snapshot.h"
#include "proxy/conn_int.h"
#include "proxy/head.h"
#include "proxy/peers.h"
#include "proxy/stream.h"
#include "proxy/upstream.h"
#include "proxy/worker.h"

/* getsockopt(IPPROTO_IP, SO_ORIGINAL_DST): where netfilter's NAT found a connection going
 * (<linux/netfilter_ipv4.h>, which does not mix with the C library's headers). */
#ifndef SO_ORIGINAL_DST
#define SO_ORIGINAL_DST 80
#endif

/* After the last response, how long an ending connection (LINGERING) still reads (and discards)
 * what the client sends, so that its unread bytes do not turn our FIN into a RST that destroys the
 * response in flight. */
#define LINGER_MS 2000u
/* A head we write: the largest head we accept plus our own additions. */
#define HEAD_OUT_MAX (SL_STREAM_OUT_HIGH + 4096u)
#define ARENA_CHUNK  4096u
/* Room a refusal needs in the client's output: its head, and a body of the URL (200 bytes), the
 * detail (400) and the hint (SL_POLICY_HINT_MAX) with their words. */
#define REFUSAL_ROOM 4096u
/* Bytes of a CONNECT's differing Host header kept for its audit line (which cuts hosts at 512). */
#define CONNECT_HOST_MAX 512u
#define ARENA_MAX        ((size_t)256 * 1024)
/* Passes of sl__conn_step() before the rest of the work waits for the loop's next turn. */
#define STEP_PASSES_MAX 16
/* Rounds of one pass: each runs the current state's step once. */
#define ROUNDS_MAX 64

/* A set of phases, for the state table. */
#define PHASE(p) (1u << (p))

/* The state table: each state's name (for trace and debug lines), the phase its entry starts,
 * the other phases its own events may start (a set of PHASE() bits; 0: none), and whether the
 * client is read: not while the upstream is dialled (pipelined requests wait in the kernel) or a
 * leaf is minted. In FORWARDING the client is read even after its request is complete: a hang-up
 * must be noticed; pipelined bytes just wait in the (bounded) buffer. */
static const struct {
    const char *name;
    enum sl__conn_phase entry;
    unsigned inner;
    bool reads;
} state_table[] = {
    [SL__CONN_NEW] = { "new", SL__PHASE_NONE, 0, false },
    /* Entered at the accept, or from TUNNEL_SNIFF (a tunnel carrying plain HTTP), a head is due
     * at once: HEADER, so that a client cannot hold its slot longer by sending its first byte
     * late (sl__conn_set_state()). Otherwise (after an exchange, or a TLS handshake) the connection
     * idles, and a head's first byte starts HEADER (step_request_head()). */
    [SL__CONN_REQUEST_HEAD] = { "request-head", SL__PHASE_IDLE, PHASE(SL__PHASE_HEADER), true },
    /* One deadline for the first bytes and the whole handshake, minting included. */
    [SL__CONN_TUNNEL_SNIFF] = { "tunnel-sniff", SL__PHASE_HANDSHAKE, 0, true },
    [SL__CONN_TLS_HANDSHAKE] = { "tls-handshake", SL__PHASE_KEEP, 0, true },
    [SL__CONN_MINTING] = { "minting", SL__PHASE_KEEP, 0, false },
    [SL__CONN_DIALING] = { "dialing", SL__PHASE_DIAL, 0, false },
    /* UPSTREAM, started again by each piece of the request body before the final response
     * head; once a response head went to the client, IDLE while the response waits for the
     * upstream (started again by each piece of its body) and SEND while bytes wait for the
     * client (started again by every byte it takes), up to the response's last byte leaving
     * (conn_forward.c). */
    [SL__CONN_FORWARDING] = { "forwarding", SL__PHASE_UPSTREAM,
                              PHASE(SL__PHASE_IDLE) | PHASE(SL__PHASE_SEND), true },
    /* Computed again when it fires and when the policy changes (the expiry may move). */
    [SL__CONN_RELAY] = { "relay", SL__PHASE_RELAY, PHASE(SL__PHASE_RELAY), true },
    /* Started again while the client takes the tail (step_ending()). */
    [SL__CONN_FLUSHING] = { "flushing", SL__PHASE_SEND, 0, true },
    [SL__CONN_LINGERING] = { "lingering", SL__PHASE_LINGER, 0, true },
    [SL__CONN_CLOSED] = { "closed", SL__PHASE_NONE, 0, false },
};

static uint64_t next_conn_id(void)
{
    static atomic_uint_fast64_t ids;

    return atomic_fetch_add(&ids, 1) + 1;
}

static uint64_t secs_ms(unsigned s)
{
    return (uint64_t)s * 1000u;
}

/*
 * The phase timer.
 */

static void on_timer(uv_timer_t *t);

/* Starts the timer for `phase` (stops it for SL__PHASE_NONE, leaves it for SL__PHASE_KEEP). The
 * one place that starts the timer. */
static void start_phase(struct sl__conn *c, enum sl__conn_phase phase)
{
    const struct sl_proxy_config *k = sl__conn_cfg(c);
    uint64_t ms = 0;

    switch (phase) {
    case SL__PHASE_KEEP:
        return;
    case SL__PHASE_NONE:
        c->phase = SL__PHASE_NONE;
        (void)uv_timer_stop(&c->timer);
        return;
    case SL__PHASE_HEADER:
        ms = secs_ms(k->header_timeout_s);
        break;
    case SL__PHASE_IDLE:
        ms = secs_ms(k->idle_timeout_s);
        break;
    case SL__PHASE_SEND:
        ms = secs_ms(k->send_timeout_s);
        break;
    case SL__PHASE_HANDSHAKE:
        ms = secs_ms(k->tls_handshake_timeout_s);
        break;
    case SL__PHASE_DIAL:
        ms = secs_ms(k->upstream_timeout_s) + 1000u;
        break;
    case SL__PHASE_UPSTREAM:
        ms = secs_ms(k->upstream_timeout_s);
        break;
    case SL__PHASE_RELAY:
        ms = sl__conn_relay_deadline_ms(c);
        break;
    case SL__PHASE_LINGER:
        ms = LINGER_MS;
        break;
    }
    c->phase = phase;
    (void)uv_timer_start(&c->timer, on_timer, ms, 0);
}

/* The one writer of `state`. Its entry action starts the state's phase (state_table[]). */
void sl__conn_set_state(struct sl__conn *c, enum sl__conn_state s)
{
    enum sl__conn_phase phase = state_table[s].entry;

    sl_trace(c->id, "state=%s next=%s", state_table[c->state].name, state_table[s].name);
    if (s == SL__CONN_REQUEST_HEAD
        && (c->state == SL__CONN_NEW || c->state == SL__CONN_TUNNEL_SNIFF)) {
        /* A head due at once (state_table[]): its header timer runs from here. */
        phase = SL__PHASE_HEADER;
        c->header_armed = true;
    }
    c->state = s;
    c->phase_later = SL__PHASE_KEEP;
    start_phase(c, phase);
}

/* Inside the current state: starts `phase` now, one the state table allows the state (its
 * entry phase again, or one of its inner ones). */
void sl__conn_rearm(struct sl__conn *c, enum sl__conn_phase phase)
{
    assert(phase == state_table[c->state].entry || (state_table[c->state].inner & PHASE(phase)));
    if (c->stepping) {
        c->phase_later = phase;
        return;
    }
    start_phase(c, phase);
}

/*
 * Ending and closing.
 */

/* Removes `c` from the singly linked resume list at `*head`, if it is there. */
static void resume_unlink(struct sl__conn **head, struct sl__conn *c)
{
    for (struct sl__conn **pp = head; *pp != NULL; pp = &(*pp)->resume_next) {
        if (*pp == c) {
            *pp = c->resume_next;
            c->resume_next = NULL;
            return;
        }
    }
}

static void free_conn(struct sl__conn *c)
{
    struct sl__worker *w = c->w;

    if (c->resume_queued) {
        resume_unlink(&w->resume_list, c);
        resume_unlink(&w->resuming, c);
        c->resume_queued = false;
    }

    if (c->prev != NULL) {
        c->prev->next = c->next;
    } else {
        w->conns = c->next;
    }
    if (c->next != NULL) {
        c->next->prev = c->prev;
    }
    w->n_conns--;
    /* The address's slot before the global count: an address never holds a slot that the
     * count of connections no longer covers (proxy/peers.h sizes its table on that). */
    if (c->peer_slot) {
        sl_peers_release(w->shared->peers, (const struct sockaddr *)&c->peer);
        c->peer_slot = false;
    }
    if (c->counted) {
        atomic_fetch_sub(&w->shared->connections, 1);
    }
    if (c->refusing) {
        atomic_fetch_sub(&w->shared->refusing, 1);
    }
    sl__count(&w->counters.connections_open, (uint64_t)-1);
    sl_h1_finish(&c->req);
    sl_h1_finish(&c->resp);
    sl_arena_finish(&c->arena);
    sl_arena_finish(&c->resp_arena);
    sl_buf_finish(&c->head);
    sl__conn_git_finish(c);
    sl_snapshot_unref(c->snap);
    sl_leaf_unref(c->leaf);
    sl_free(c->connect_host);
    sl_free(c->pt_guard);
    if (c->held != NULL) {
        sl_snapshot_unref(c->held->snap);
        sl_free(c->held);
    }
    /* The client's own token: not ours to keep in freed memory. */
    memset(c->auth_token, 0, sizeof(c->auth_token));
    sl_free(c);
}

/* One callback owed (`pending`) has come. */
void sl__conn_owed_done(struct sl__conn *c)
{
    if (--c->pending == 0) {
        free_conn(c);
    }
}

static void on_client_closed(struct sl_stream *s, void *arg)
{
    (void)s;
    sl__conn_owed_done(arg);
}

static void on_timer_closed(uv_handle_t *h)
{
    sl__conn_owed_done(h->data);
}

/* Closes the connection now (CLOSED): the upstream, the timer and the client's stream; the
 * memory goes with the last callback owed. Idempotent. */
void sl__conn_close(struct sl__conn *c)
{
    if (c->state == SL__CONN_CLOSED) {
        return;
    }
    /* A tunnel that ends before its held refusal was answered: its one line. */
    sl__conn_audit_held(c);
    if (c->up != NULL) {
        sl_upstream_close(c->up);
        c->up = NULL;
    }
    sl__conn_set_state(c, SL__CONN_CLOSED);
    c->pending += 2;
    uv_close((uv_handle_t *)&c->timer, on_timer_closed);
    sl_stream_close(&c->client, on_client_closed);
}

/* Ends the connection after its last response: no more requests, the response flushes
 * (FLUSHING), our FIN follows and the connection lingers (LINGERING), then closes. The linger
 * starts once the last response has left our buffers: a slow reader still taking its tail
 * gets the send timeout (started again as it drains, step_ending()), not a cut after
 * LINGER_MS. */
void sl__conn_end(struct sl__conn *c)
{
    if (c->up != NULL) {
        sl_upstream_close(c->up);
        c->up = NULL;
    }
    sl_stream_end(&c->client);
    sl_stream_want_read(&c->client, true);
    c->flush_out = c->client.bytes_out;
    sl__conn_set_state(c,
                       sl_stream_is_flushed(&c->client) ? SL__CONN_LINGERING : SL__CONN_FLUSHING);
}

/* FLUSHING and LINGERING: input is discarded; the connection closes when the client is gone
 * and everything has left, or on the timer. */
static int step_ending(struct sl__conn *c)
{
    struct sl_slice in = sl_stream_peek(&c->client);

    if (c->state == SL__CONN_FLUSHING) {
        if (sl_stream_is_flushed(&c->client)) {
            sl__conn_set_state(c, SL__CONN_LINGERING);
        } else if (c->client.bytes_out != c->flush_out) {
            /* The client takes the tail of its response: progress (bytes it sends do not
             * count). */
            c->flush_out = c->client.bytes_out;
            sl__conn_rearm(c, SL__PHASE_SEND);
        }
    }

    if (in.n > 0) {
        sl_stream_consume(&c->client, in.n);
        return 1;
    }
    if (sl_stream_error(&c->client) != 0
        || (sl_stream_in_status(&c->client) != 0 && sl_stream_is_flushed(&c->client))) {
        sl__conn_close(c);
        return -1;
    }
    return 0;
}

/*
 * Exchange lifecycle.
 */

static void reset_exchange(struct sl__conn *c)
{
    c->head_started = false;
    c->req_stage = SL__MSG_HEAD;
    c->req_pend = (struct sl__pending){ false, 0, 0, 0, false };
    c->resp_stage = SL__MSG_HEAD;
    c->resp_pend = (struct sl__pending){ false, 0, 0, 0, false };
    c->resp_framing = SL__FRAMING_AS_IS;
    c->retried = false;
    c->interims = 0;
    c->head_to = SL__HEAD_NONE;
    sl_buf_reset(&c->head);
    sl_h1_finish(&c->resp);
    sl_arena_reset(&c->resp_arena);
}

/* The exchange is over and the connection goes on: wait for the next request. What only an
 * exchange needs is freed, so that a keep-alive connection between requests holds its TLS state
 * and little else (a few mallocs per request buy ~8 KiB per idle connection). */
void sl__conn_end_exchange(struct sl__conn *c)
{
    sl_snapshot_unref(c->snap);
    c->snap = NULL;
    sl__conn_git_finish(c);
    reset_exchange(c);
    sl_buf_finish(&c->head);
    sl_arena_finish(&c->arena);
    sl_arena_finish(&c->resp_arena);
    if (c->w->draining) {
        sl__conn_end(c);
        return;
    }
    sl__conn_set_state(c, SL__CONN_REQUEST_HEAD);
    sl_stream_want_read(&c->client, true);
}

/*
 * The request head: CONNECT, absolute-form, or origin-form inside a tunnel.
 */

static void on_connect_head(struct sl__conn *c, const struct sl_h1_head *h)
{
    static const char established[] = "HTTP/1.1 200 Connection established\r\n\r\n";
    const char *why = NULL;
    struct sl_head_refusal mismatch;
    struct sl_slice other;
    struct sl_h1_event ev;
    int rc;

    c->r.target = NULL;
    c->r.scheme = "https";
    if (!sl__conn_take_credentials(c, h)) {
        sl__conn_refuse_reason(c, SL_REASON_NO_IDENTITY, "malformed Proxy-Authorization", false);
        return;
    }
    sl__conn_note_identity(c);
    if (sl_host_parse_authority(sl_slice_str(h->target), 0, &c->r.host, &c->r.port, &why) < 0
        || c->r.port == 0) {
        sl__conn_refuse_reason(c, SL_REASON_BAD_HOST, why != NULL ? why : "CONNECT needs host:port",
                               false);
        return;
    }
    c->r.has_host = true;
    if (sl_head_connect_host(h, &c->r.host, c->r.port, &other, &mismatch) < 0) {
        sl__conn_refuse_reason(c, mismatch.reason, mismatch.detail, false);
        return;
    }
    if (other.n > 0) {
        /* The tunnel goes to the CONNECT's host whatever its Host header says, and every
         * request inside is checked against that host: noted, not refused. One CONNECT per
         * connection, so this happens at most once. A copy that cannot be made is no
         * reason to refuse either; the line then says nothing. */
        size_t n = other.n < CONNECT_HOST_MAX ? other.n : CONNECT_HOST_MAX;

        c->connect_host = sl_malloc(n + 1);
        if (c->connect_host != NULL) {
            memcpy(c->connect_host, other.p, n);
            c->connect_host[n] = '\0';
        }
    }
    if (!sl__conn_decide_connect(c)) {
        return;
    }
    /* The CONNECT head ends the proxy protocol: what follows belongs to the tunnel. */
    if (sl_h1_feed(&c->req, NULL, 0, &ev) < 0 || ev.type != SL_H1_EV_UPGRADE) {
        sl__conn_refuse_reason(c, SL_REASON_BAD_REQUEST, "a CONNECT request has no body", false);
        return;
    }
    rc = sl_stream_write_all(&c->client, established, sizeof(established) - 1);
    if (rc < 0) {
        sl__conn_drop(c, sl__failure_reason(rc, SL_REASON_BAD_REQUEST));
        return;
    }
    sl__conn_open_tunnel(c);
}

void sl__conn_open_tunnel(struct sl__conn *c)
{
    /* A transparent tunnel has no 200 to send: its line says 200 all the same, the tunnel
     * opened (docs/reference/proxy.md §4.12). */
    c->r.status = 200;
    c->thost = c->r.host;
    c->tport = c->r.port;
    /* The CONNECT's head is over: what the tunnel carries is timed on its own (a TLS
     * handshake, then an idle wait or a head of its own; plain HTTP to port 80: a head due at
     * once, sl__conn_set_state()). */
    c->head_started = false;
    c->header_armed = false;
    if (c->held != NULL) {
        /* Opened to answer its refusal inside: the line is written then (one line). */
        sl_snapshot_unref(c->snap);
        c->snap = NULL;
    } else if (c->dec.passthrough) {
        /* The tunnel's one audit line is written when it ends or is refused, with its byte
         * counts; the CONNECT's snapshot and decision are kept for it. The method outlives
         * the arena that held the head. */
        c->passthrough = true;
        c->r.method = "CONNECT";
    } else {
        sl__conn_audit(c);
        sl_snapshot_unref(c->snap);
        c->snap = NULL;
    }
    sl_h1_finish(&c->req);
    sl_arena_reset(&c->arena);
    sl_h1_init(&c->req, SL_H1_REQUEST, NULL, &c->arena);
    /* A transparent connection is in TUNNEL_SNIFF already, its ClientHello read: the one
     * handshake deadline, from the accept, goes on. */
    if (c->state != SL__CONN_TUNNEL_SNIFF) {
        sl__conn_set_state(c, SL__CONN_TUNNEL_SNIFF);
    }
}

static void on_request_head(struct sl__conn *c)
{
    const struct sl_h1_head *h = sl_h1_head(&c->req);
    bool has_body = h->body != SL_H1_BODY_NONE;
    struct sl_head_ctx ctx = { sl__conn_in_tunnel(c), sl__conn_is_intercepted(c), &c->thost,
                               c->tport, false };
    struct sl_head_target t;
    struct sl_head_refusal why;
    int rc;

    sl__conn_begin_request(c, h->method);
    c->r.client_http10 = h->version_minor == 0;
    c->r.client_keep_alive = h->keep_alive;
    c->r.is_head = strcmp(h->method, "HEAD") == 0;
    c->req_stage = SL__MSG_BODY;
    if (c->held != NULL) {
        /* The tunnel was opened to say that its CONNECT was refused: this request gets the
         * answer, whatever it asks. */
        c->r.target = h->target[0] == '/' ? h->target : NULL;
        sl__conn_refuse_held(c);
        return;
    }
    if (!sl__conn_in_tunnel(c)) {
        if (c->transparent) {
            /* Plain HTTP to a transparent listener: each request names its host in its Host
             * header, the port is the connection's; no credentials (docs/reference/proxy.md
             * §4.12). A CONNECT is refused as any server would (sl_head_resolve()). */
            ctx.transparent = true;
            ctx.port = c->orig_port;
        } else if (strcmp(h->method, "CONNECT") == 0) {
            on_connect_head(c, h);
            return;
        } else if (!sl__conn_take_credentials(c, h)) {
            sl__conn_refuse_reason(c, SL_REASON_NO_IDENTITY, "malformed Proxy-Authorization",
                                   false);
            return;
        }
        sl__conn_note_identity(c);
    }
    rc = sl_head_resolve(h, &ctx, &c->arena, &t, &why);
    c->r.scheme = t.scheme;
    c->r.has_host = t.has_host;
    if (t.has_host) {
        c->r.host = t.host;
        c->r.port = t.port;
    }
    c->r.target = t.target;
    c->r.websocket = t.websocket;
    if (t.upgrade_ignored) {
        /* The parser takes nothing after an upgrade request: the connection ends after it. */
        c->close_after = true;
    }
    if (rc < 0) {
        if (t.target == NULL && strcmp(h->method, "CONNECT") != 0) {
            c->r.sent_target = h->target;
        }
        sl__conn_refuse_reason(c, why.reason, why.detail, false);
        return;
    }
    /* A refused request leaves the connection open when nothing of it is left unread, unless
     * it asked for an upgrade: the parser takes nothing after an upgrade request. */
    if (!sl__conn_decide(c, h->method, sl__conn_is_intercepted(c), !has_body && !h->upgrade)
        || !sl__conn_overrides_allowed(c, h, sl__conn_is_intercepted(c),
                                       !has_body && !h->upgrade)) {
        return;
    }
    sl__conn_start_request(c, h);
}

static int step_request_head(struct sl__conn *c)
{
    struct sl_slice in = sl_stream_peek(&c->client);
    struct sl_h1_event ev;
    int n;

    /* The client's stream failed (no answer could reach it: waiting for room in its output
     * would wait forever), or it went away between requests or mid-head. */
    if (sl_stream_error(&c->client) != 0 || (in.n == 0 && sl_stream_in_status(&c->client) != 0)) {
        sl__conn_close(c);
        return -1;
    }
    if (in.n == 0) {
        return 0;
    }
    /* The answers to pipelined requests queue in the client's output, and a refusal is written
     * whole: while the client does not read them, the next requests wait in the input (the
     * write's completion steps the connection again) instead of overflowing the output. */
    if (!sl_stream_has_room(&c->client, REFUSAL_ROOM)) {
        return 0;
    }
    if (!c->head_started) {
        c->head_started = true;
        /* Between requests the idle timer ran; a head due since the state's entry has its
         * header timer running already (state_table[]). */
        if (!c->header_armed) {
            sl__conn_rearm(c, SL__PHASE_HEADER);
        }
        c->header_armed = false;
    }
    n = sl_h1_feed(&c->req, in.p, in.n, &ev);
    if (n < 0) {
        sl__conn_begin_request(c, NULL);
        if (c->held != NULL) {
            /* In a tunnel opened for a held refusal, a malformed head gets that refusal. */
            sl__conn_refuse_held(c);
        } else if (n == SL_ETOOBIG) {
            sl__conn_refuse(c, SL_REASON_TOO_LARGE,
                            sl_h1_error_target_too_long(&c->req) ? 414 : 431, sl_h1_error(&c->req),
                            false);
        } else if (n == SL_ENOMEM) {
            sl__conn_refuse_reason(c, SL_REASON_OUT_OF_MEMORY,
                                   "the proxy is out of memory for the request head", false);
        } else if (sl_h1_error_in_target(&c->req)) {
            /* Bytes the URL grammar refuses (non-ASCII, controls) are a host problem for a
             * proxy request: its target is where the host is (docs/reference/proxy.md §4.3). */
            sl__conn_refuse_reason(c, SL_REASON_BAD_HOST, sl_h1_error(&c->req), false);
        } else {
            sl__conn_refuse_reason(c, SL_REASON_BAD_REQUEST, sl_h1_error(&c->req), false);
        }
        return -1;
    }
    sl_stream_consume(&c->client, (size_t)n);
    if (ev.type == SL_H1_EV_HEAD) {
        on_request_head(c);
        return 1;
    }
    if (ev.type == SL_H1_EV_END) {
        /* The end the parser owed after the head of a body-less request that was refused with
         * the connection kept: nothing to do, the next request's head follows. */
        return 1;
    }
    return n > 0;
}

/*
 * The stepper.
 */

/* One pass: the current state's step, round after round, while it makes progress (the state may
 * change on the way), for at most ROUNDS_MAX rounds. */
static void run_states(struct sl__conn *c)
{
    int rounds = 0;

    while (rounds < ROUNDS_MAX && c->state != SL__CONN_CLOSED) {
        int ran = 1;
        int rc = 0;

        switch (c->state) {
        case SL__CONN_NEW:
        case SL__CONN_MINTING:
        case SL__CONN_CLOSED:
            /* Nothing to step: being set up, waiting for the thread pool, or closed. */
            rc = 0;
            break;
        case SL__CONN_REQUEST_HEAD:
            rc = step_request_head(c);
            break;
        case SL__CONN_TUNNEL_SNIFF:
            rc = sl__conn_step_tunnel_sniff(c);
            break;
        case SL__CONN_TLS_HANDSHAKE:
            rc = sl__conn_step_tls_handshake(c);
            break;
        case SL__CONN_DIALING:
            rc = sl__conn_step_dialing(c);
            break;
        case SL__CONN_FORWARDING:
            rc = sl__conn_step_forwarding(c, ROUNDS_MAX - rounds, &ran);
            break;
        case SL__CONN_RELAY:
            rc = sl__conn_step_relay(c);
            break;
        case SL__CONN_FLUSHING:
        case SL__CONN_LINGERING:
            rc = step_ending(c);
            break;
        }
        rounds += ran;
        if (rc <= 0) {
            break;
        }
    }
    /* Reading follows the state (state_table[].reads). */
    if (c->state != SL__CONN_CLOSED) {
        sl_stream_want_read(&c->client, state_table[c->state].reads);
        /* Once both messages are complete the upstream goes back to the pool, where it reads
         * again (to see it closed): it keeps reading until then, as stopping and starting a
         * libuv watcher costs an epoll_ctl that fails (EEXIST) and another. What it might read
         * meanwhile is not taken: it only keeps the connection out of the pool. */
        if (c->up != NULL && c->state == SL__CONN_FORWARDING) {
            sl_stream_want_read(
                    sl_upstream_stream(c->up),
                    !c->resp_pend.active
                            && (c->resp_stage != SL__MSG_DONE || c->req_stage == SL__MSG_DONE));
        }
    }
}

static void on_resume(uv_idle_t *h);

/* Runs the state machine with both streams corked, so that everything one step writes to a
 * peer (a head and its body, several TLS records) leaves in one write; when the sockets took
 * it all at once, the step runs again, as it would on the output-drained event that then never
 * comes. At most STEP_PASSES_MAX passes; work left after them resumes on the loop's next turn
 * (on_resume()), after the worker's other connections. */
void sl__conn_step(struct sl__conn *c)
{
    if (c->stepping) {
        /* Called back from inside a step: the outer step holds the corks and removes them. */
        run_states(c);
        return;
    }
    bool again = false;

    for (int pass = 0; pass < STEP_PASSES_MAX && c->state != SL__CONN_CLOSED; pass++) {
        c->corked_up = c->up != NULL ? sl_upstream_stream(c->up) : NULL;
        sl_stream_cork(&c->client);
        if (c->corked_up != NULL) {
            sl_stream_cork(c->corked_up);
        }
        c->stepping = true;
        run_states(c);
        c->stepping = false;
        if (c->phase_later != SL__PHASE_KEEP) {
            /* The step's last rearm (sl__conn_rearm()); the state is the one it was made in. */
            start_phase(c, c->phase_later);
            c->phase_later = SL__PHASE_KEEP;
        }
        again = sl_stream_uncork(&c->client);
        if (c->corked_up != NULL && sl_stream_uncork(c->corked_up)) {
            again = true;
        }
        c->corked_up = NULL;
        if (!again) {
            return;
        }
    }
    if (again && c->state != SL__CONN_CLOSED && !c->resume_queued) {
        /* Work is left, and no output-drained event will come for it (the sockets took
         * everything): the loop's next turn resumes it, after the other connections had
         * theirs. */
        struct sl__worker *w = c->w;

        c->resume_queued = true;
        c->resume_next = w->resume_list;
        w->resume_list = c;
        (void)uv_idle_start(&w->resume, on_resume);
    }
}

/* The worker's `resume` idle callback: steps the connections queued on its list. */
static void on_resume(uv_idle_t *h)
{
    struct sl__worker *w = h->data;

    w->resuming = w->resume_list;
    w->resume_list = NULL;
    while (w->resuming != NULL) {
        struct sl__conn *c = w->resuming;

        w->resuming = c->resume_next;
        c->resume_next = NULL;
        c->resume_queued = false;
        if (c->state != SL__CONN_CLOSED) {
            sl__conn_step(c);
        }
    }
    if (w->resume_list == NULL) {
        (void)uv_idle_stop(&w->resume);
    }
}

/* Counts the timeout that fired, by what the connection was waiting for (sluice_timeouts_total).
 * A lingering connection's timer counts as no timeout. */
static void count_timeout(struct sl__conn *c)
{
    enum sl__timeout phase = SL__TIMEOUT_IDLE;

    switch (c->state) {
    case SL__CONN_REQUEST_HEAD:
        /* A head due at once (a first request, plain HTTP in a tunnel to port 80), or a head
         * that started: the header timeout; between requests (after one, or after a tunnel's
         * handshake): the idle timeout. */
        if (c->head_started || c->header_armed) {
            phase = SL__TIMEOUT_HEADER;
        }
        break;
    case SL__CONN_TUNNEL_SNIFF:
    case SL__CONN_TLS_HANDSHAKE:
    case SL__CONN_MINTING:
        phase = SL__TIMEOUT_HANDSHAKE;
        break;
    case SL__CONN_DIALING:
    case SL__CONN_FORWARDING:
        if (!sl__conn_resp_head_sent(c)) {
            phase = SL__TIMEOUT_UPSTREAM;
        } else if (c->phase == SL__PHASE_SEND) {
            phase = SL__TIMEOUT_SEND;
        }
        break;
    case SL__CONN_RELAY:
        break;
    case SL__CONN_FLUSHING:
        phase = SL__TIMEOUT_SEND;
        break;
    case SL__CONN_NEW:
    case SL__CONN_LINGERING:
    case SL__CONN_CLOSED:
        return;
    }
    sl__count(&c->w->counters.timeouts[phase], 1);
}

static void on_timer(uv_timer_t *t)
{
    struct sl__conn *c = t->data;

    sl_log(SL_LOG_DEBUG, c->id, "msg=timeout state=%s", state_table[c->state].name);
    count_timeout(c);
    switch (c->state) {
    case SL__CONN_REQUEST_HEAD:
        if (c->head_started && c->held == NULL) {
            sl__conn_begin_request(c, NULL);
            sl__conn_refuse(c, SL_REASON_BAD_REQUEST, 408,
                            "the request head did not arrive in time", false);
            return;
        }
        sl__conn_close(c);
        return;
    case SL__CONN_DIALING:
    case SL__CONN_FORWARDING:
        if (c->passthrough) {
            sl__conn_drop(c, SL_REASON_UPSTREAM_TIMEOUT);
            return;
        }
        if (sl__conn_git_on_timer(c)) {
            return;
        }
        if (!sl__conn_resp_head_sent(c)) {
            sl__conn_refuse_reason(c, SL_REASON_UPSTREAM_TIMEOUT,
                                   "the upstream did not answer in time", false);
            return;
        }
        if (c->phase == SL__PHASE_SEND) {
            /* The client stopped taking its response. */
            sl__conn_abort(c, SL__SIDE_CLIENT, SL__ABORT_SEND_TIMEOUT);
        } else {
            /* The response waited for its upstream (or, after a final answer that came early,
             * the request's body for its client). */
            sl__conn_abort(c,
                           c->req_stage == SL__MSG_DONE || c->req_pend.active ? SL__SIDE_UPSTREAM
                                                                              : SL__SIDE_CLIENT,
                           SL__ABORT_IDLE_TIMEOUT);
        }
        return;
    case SL__CONN_RELAY:
        sl__conn_on_relay_timer(c);
        return;
    case SL__CONN_TUNNEL_SNIFF:
        if (c->passthrough) {
            /* No complete ClientHello in time: the tunnel's line, then close. */
            sl__conn_drop(c, SL_REASON_NOT_TLS);
            return;
        }
        sl__conn_close(c);
        return;
    case SL__CONN_TLS_HANDSHAKE:
    case SL__CONN_MINTING:
    case SL__CONN_FLUSHING:
    case SL__CONN_LINGERING:
        sl__conn_close(c);
        return;
    case SL__CONN_NEW:
    case SL__CONN_CLOSED:
        /* No timer runs. */
        return;
    }
}

static void on_client_event(struct sl_stream *s, void *arg)
{
    (void)s;
    sl__conn_step(arg);
}

/*
 * Accepting.
 */

/* Takes one of `limit` slots counted in `n`: false, and nothing taken, when all are taken. Never
 * counts past `limit`, so a connection refused for want of a slot never held one, not even for
 * an instant that another worker's accept could see. */
static bool take_slot(atomic_uint *n, unsigned limit)
{
    unsigned cur = atomic_load(n);

    do {
        if (cur >= limit) {
            return false;
        }
    } while (!atomic_compare_exchange_weak(n, &cur, cur + 1));
    return true;
}

/* A connection refused at its accept (overloaded, client-overloaded), holding no slot of
 * --max-connections: answered 503, then closed (its linger included), while fewer than
 * SL__REFUSING_MAX are being answered; beyond that, and on a transparent listener, closed at once
 * with its audit line. */
static void refuse_at_accept(struct sl__conn *c, enum sl_reason reason, const char *detail)
{
    sl__conn_begin_request(c, NULL);
    if (c->transparent) {
        /* Its client may be speaking TLS already: no HTTP answer. */
        sl__conn_drop(c, reason);
        return;
    }
    if (!take_slot(&c->w->shared->refusing, SL__REFUSING_MAX)) {
        /* A flood of them: one more answer would cost one more descriptor and connection's
         * memory for up to LINGER_MS. */
        sl__count(&c->w->counters.connections_refused_unanswered, 1);
        sl__conn_drop(c, reason);
        return;
    }
    c->refusing = true;
    sl__conn_refuse_reason(c, reason, detail, false);
}

/* The port a transparent connection was made to: its listener's (443, 80), or for one the
 * host's table redirected, its original destination's (SO_ORIGINAL_DST of netfilter's NAT,
 * IPv4). A connection to the redirect port that was not redirected there (its original
 * destination is the listener itself, or it has none) has no port to go to: SL_EINVAL. */
static int original_port(struct sl__conn *c, const struct sl__listener *l, uint16_t *port)
{
    struct sockaddr_in local;
    struct sockaddr_in orig;
    socklen_t len = sizeof(orig);
    int namelen = (int)sizeof(local);
    uv_os_fd_t fd;

    if (l->kind == SL__LISTEN_TRANSPARENT) {
        *port = l->port;
        return 0;
    }
    memset(&orig, 0, sizeof(orig));
    if (uv_fileno((const uv_handle_t *)sl_stream_tcp(&c->client), &fd) < 0
        || uv_tcp_getsockname(sl_stream_tcp(&c->client), (struct sockaddr *)&local, &namelen) < 0
        || getsockopt(fd, IPPROTO_IP, SO_ORIGINAL_DST, &orig, &len) == -1
        || orig.sin_family != AF_INET || orig.sin_port == 0
        || (orig.sin_port == local.sin_port && orig.sin_addr.s_addr == local.sin_addr.s_addr)) {
        return SL_EINVAL;
    }
    *port = ntohs(orig.sin_port);
    return 0;
}

/* A transparent connection (docs/reference/proxy.md §4.12): its port, then its client, by
 * source address alone in the worker's newest snapshot; without either it is closed with its
 * audit line. Then its first bytes are awaited (TUNNEL_SNIFF, the handshake timeout). */
static void start_transparent(struct sl__conn *c, const struct sl__listener *l)
{
    sl__conn_begin_request(c, NULL);
    if (original_port(c, l, &c->orig_port) < 0) {
        sl_log(SL_LOG_DEBUG, c->id, "msg=\"transparent: no original destination\" port=%u",
               (unsigned)l->port);
        c->r.port = l->port;
        sl__conn_drop(c, SL_REASON_BAD_REQUEST);
        return;
    }
    c->r.port = c->orig_port;
    if (c->snap == NULL || sl__conn_identify(c, c->snap) == NULL) {
        sl__conn_drop(c, c->snap == NULL ? SL_REASON_NO_POLICY : SL_REASON_NO_IDENTITY);
        return;
    }
    sl_snapshot_unref(c->snap);
    c->snap = NULL;
    sl__conn_set_state(c, SL__CONN_TUNNEL_SNIFF);
    sl_stream_want_read(&c->client, true);
}

static void shed_connection(struct sl__worker *w, struct sl__listener *l);

/* The spare of listener `l` is free again: a connection that waited for it is taken now. */
static void on_spare_closed(uv_handle_t *h)
{
    struct sl__listener *l = SL_CONTAINER_OF((uv_tcp_t *)h, struct sl__listener, spare);
    struct sl__worker *w = l->tcp.data;

    l->spare_busy = false;
    if (l->waiting && !uv_is_closing((uv_handle_t *)&l->tcp)) {
        l->waiting = false;
        sl__conn_accept(w, l);
    }
}

/* A new connection on `l` the worker has no memory for: taken by the listener's spare handle
 * and closed at once (no answer: that would need memory too; counted and logged), so that the
 * listener goes on accepting (docs/reference/proxy.md §4.10). While the spare is still closing,
 * the connection waits in libuv for it. */
static void shed_connection(struct sl__worker *w, struct sl__listener *l)
{
    int rc;

    if (l->spare_busy) {
        l->waiting = true;
        return;
    }
    /* Allocates nothing and makes no socket (AF_UNSPEC): it cannot fail. */
    rc = uv_tcp_init(&w->loop, &l->spare);
    SL_BUG_ON(rc != 0);
    l->spare_busy = true;
    if (uv_accept((uv_stream_t *)&l->tcp, (uv_stream_t *)&l->spare) == 0) {
        sl__count(&w->counters.connections_refused_memory, 1);
        sl_log(SL_LOG_WARN, 0, "msg=\"out of memory for a new connection: closed\"");
    }
    uv_close((uv_handle_t *)&l->spare, on_spare_closed);
}

void sl__conn_accept(struct sl__worker *w, struct sl__listener *l)
{
    struct sl__shared *sh = w->shared;
    struct sl__conn *c = sl_calloc(1, sizeof(*c));
    int namelen = (int)sizeof(c->peer);
    int rc;

    if (c == NULL) {
        shed_connection(w, l);
        return;
    }
    c->w = w;
    c->id = next_conn_id();
    if (sl_stream_init(&w->loop, &c->client, on_client_event, c) < 0) {
        sl_free(c);
        shed_connection(w, l);
        return;
    }
    rc = uv_timer_init(&w->loop, &c->timer);
    SL_BUG_ON(rc != 0);
    c->timer.data = c;
    sl_arena_init(&c->arena, ARENA_CHUNK, ARENA_MAX);
    sl_arena_init(&c->resp_arena, ARENA_CHUNK, ARENA_MAX);
    sl_buf_init(&c->head, HEAD_OUT_MAX);
    sl_h1_init(&c->req, SL_H1_REQUEST, NULL, &c->arena);
    c->next = w->conns;
    if (w->conns != NULL) {
        w->conns->prev = c;
    }
    w->conns = c;
    w->n_conns++;
    c->transparent = l->kind != SL__LISTEN_PROXY;
    sl__count(&w->counters.connections_accepted, 1);
    sl__count(&w->counters.connections_open, 1);
    rc = uv_accept((uv_stream_t *)&l->tcp, (uv_stream_t *)sl_stream_tcp(&c->client));
    if (rc == 0) {
        rc = uv_tcp_getpeername(sl_stream_tcp(&c->client), (struct sockaddr *)&c->peer, &namelen);
    }
    if (rc == 0) {
        rc = sl_stream_start(&c->client);
    }
    if (rc < 0) {
        sl__conn_close(c);
        return;
    }
    if (atomic_load_explicit(&sh->steer_watch, memory_order_relaxed)) {
        uv_os_fd_t fd;

        if (uv_fileno((const uv_handle_t *)sl_stream_tcp(&c->client), &fd) == 0) {
            sl__worker_note_arrival(w, fd);
        }
    }
    if (!take_slot(&sh->connections, sh->cfg->max_connections)) {
        sl__count(&w->counters.connections_refused, 1);
        refuse_at_accept(c, SL_REASON_OVERLOADED, "the proxy has too many connections");
        return;
    }
    c->counted = true;
    /* Within --max-connections: one of its address's slots (one sandbox cannot take them all). */
    if (!sl_peers_take(sh->peers, (const struct sockaddr *)&c->peer)) {
        /* Refused: its slot of --max-connections goes back at once, not when it closes. */
        atomic_fetch_sub(&sh->connections, 1);
        c->counted = false;
        sl__count(&w->counters.connections_refused_client, 1);
        refuse_at_accept(c, SL_REASON_CLIENT_OVERLOADED,
                         "this client address has too many connections open");
        return;
    }
    c->peer_slot = true;
    if (c->transparent) {
        start_transparent(c, l);
        return;
    }
    /* From NEW: the header timer starts now (state_table[]). */
    sl__conn_set_state(c, SL__CONN_REQUEST_HEAD);
    sl_stream_want_read(&c->client, true);
}

void sl__conn_drain_all(struct sl__worker *w)
{
    for (struct sl__conn *c = w->conns; c != NULL; c = c->next) {
        if (c->state == SL__CONN_REQUEST_HEAD && !c->head_started) {
            sl__conn_close(c);
        } else {
            c->close_after = true;
        }
    }
}

void sl__conn_close_all(struct sl__worker *w)
{
    for (struct sl__conn *c = w->conns; c != NULL; c = c->next) {
        sl__conn_close(c);
    }
}
