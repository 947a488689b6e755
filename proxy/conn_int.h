/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proxy/conn_int.h - what the rooms of one client connection share: its states and timer
 * phases, `struct sl__conn`, and the functions one room calls in another.
 *
 * The rooms (every one on the worker's loop thread, every one owning the fields it writes):
 *   conn.c          the state table and the phase timer (sl__conn_set_state(), the one writer
 *                   of `state`), the stepper, the request head, timeouts, accepting, ending
 *                   and closing;
 *   conn_refuse.c   the request's bookkeeping, identity and policy decision, refusals and
 *                   audit lines;
 *   conn_tls.c      the tunnel's first bytes (and a transparent connection's), TLS
 *                   interception (SNI, minting, the handshake) and passthrough tunnels'
 *                   ClientHello;
 *   conn_forward.c  dialling, and the request and the response on their way (heads, bodies,
 *                   the end of an exchange);
 *   conn_relay.c    long-lived relays (a websocket after its 101, a passthrough tunnel) and
 *                   their decision taken again;
 *   conn_git.c      a git push held until its ref-update commands are read, then released
 *                   upstream or refused (FORWARDING's rounds while it holds).
 * Only conn.c assigns `state`; a room that moves the connection on calls
 * sl__conn_set_state(), whose entry action starts the state's phase timer.
 */
#ifndef SL_PROXY_CONN_INT_H
#define SL_PROXY_CONN_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <uv.h>

#include "base/arena.h"
#include "base/buf.h"
#include "http/h1.h"
#include "policy/auth.h"
#include "policy/decision.h"
#include "policy/host.h"
#include "proxy/conn.h"
#include "proxy/proxy_int.h"
#include "proxy/stream.h"

struct sl_client;
struct sl__git_hold;
struct sl_leaf;
struct sl_snapshot;
struct sl_upstream;

/*
 * The states. Only sl__conn_set_state() assigns `state`; its entry action starts the phase
 * timer of the state table (conn.c).
 */
enum sl__conn_state {
    /* Accepted; sl__conn_accept() is setting the connection up (or refusing it). */
    SL__CONN_NEW = 0,
    /* Waiting for a request head: a proxy request (CONNECT or absolute-form) outside a
     * tunnel, an origin-form request inside one. */
    SL__CONN_REQUEST_HEAD,
    /* CONNECT answered 200; waiting for the tunnel's first bytes. */
    SL__CONN_TUNNEL_SNIFF,
    /* Intercepting: the client's TLS handshake. */
    SL__CONN_TLS_HANDSHAKE,
    /* The handshake waits for a leaf minted on the thread pool. */
    SL__CONN_MINTING,
    /* The request is allowed; the upstream is being dialled. */
    SL__CONN_DIALING,
    /* Request body and response in flight. */
    SL__CONN_FORWARDING,
    /* After a 101, or a passthrough tunnel's upstream connected: bytes relayed both ways
     * until either side closes, for as long as the decision holds (conn_relay.c). */
    SL__CONN_RELAY,
    /* No more requests (sl__conn_end()): the last response is leaving, input is discarded;
     * once it has left, our FIN follows and the connection lingers. */
    SL__CONN_FLUSHING,
    /* The last response has left and our FIN with it: input is still read and discarded for
     * a while, so that unread bytes do not turn the FIN into a RST that destroys the response
     * in flight; then the connection closes. */
    SL__CONN_LINGERING,
    /* sl__conn_close(): the handles are closing; the memory goes with the last callback owed. */
    SL__CONN_CLOSED,
};

/*
 * What the connection's one timer is timing. A state's entry starts the phase of its row in
 * the state table (SL__PHASE_KEEP: the deadline running goes on); inside a state, only the
 * state's inner phase, or its entry phase again, may be started (sl__conn_rearm()).
 */
enum sl__conn_phase {
    /* Entry only: the timer runs on untouched. */
    SL__PHASE_KEEP = 0,
    /* No timer. */
    SL__PHASE_NONE,
    /* A request head arriving: header_timeout_s. */
    SL__PHASE_HEADER,
    /* A connection with nothing to do but wait for its peer (kept alive between requests), or
     * a response body waiting for the upstream's next bytes: idle_timeout_s. */
    SL__PHASE_IDLE,
    /* Bytes wait for the client to take them (a slow or paused reader): send_timeout_s, from
     * the last byte it took. */
    SL__PHASE_SEND,
    /* A tunnel's first bytes and the whole TLS handshake: tls_handshake_timeout_s. */
    SL__PHASE_HANDSHAKE,
    /* Dialling: upstream_timeout_s plus a second, so that the upstream's own dial timer fires
     * first with the precise failure (proxy/upstream.h). */
    SL__PHASE_DIAL,
    /* The upstream's answer: upstream_timeout_s. */
    SL__PHASE_UPSTREAM,
    /* A relay's deadline: its idle deadline or the client's expiry, whichever comes first
     * (sl__conn_relay_deadline_ms()). */
    SL__PHASE_RELAY,
    /* The linger after the last response. */
    SL__PHASE_LINGER,
};

/* How far one side of an exchange has come. */
enum sl__msg_stage {
    /* Waiting for the head (of a response: the final one; interim ones pass). */
    SL__MSG_HEAD = 0,
    /* The head was taken; body bytes may follow. */
    SL__MSG_BODY,
    /* The body ended; a chunked body's last chunk is still to be written. */
    SL__MSG_END_OWED,
    /* Complete. */
    SL__MSG_DONE,
};

/* How the response body goes to the client. */
enum sl__framing {
    /* As the upstream framed it: its Content-Length, or nothing. */
    SL__FRAMING_AS_IS = 0,
    /* Re-framed as chunked (a chunked or close-delimited upstream body, an HTTP/1.1 client). */
    SL__FRAMING_CHUNKED,
    /* Ended by our closing the connection (the same, for an HTTP/1.0 client). */
    SL__FRAMING_CLOSE,
};

/* Where the head in c->head goes. */
enum sl__head_to {
    SL__HEAD_NONE = 0,
    /* The request head, to the upstream. */
    SL__HEAD_TO_UPSTREAM,
    /* A response head (interim or final), to the client. */
    SL__HEAD_TO_CLIENT,
};

/* A body event not yet passed on: `len` bytes at `off` from the start of the source stream's
 * window, which stays put until `used` bytes are consumed at the end. */
struct sl__pending {
    bool active;
    size_t off;
    size_t len;
    size_t used;
    /* Chunked re-framing: the chunk header was written. */
    bool framed;
};

/* A CONNECT refused for its host or port, answered inside the tunnel instead (conn_refuse.c,
 * sl__conn_decide_connect()): the snapshot that refused it (a reference) and its decision. */
struct sl__held {
    struct sl_snapshot *snap;
    struct sl_decision dec;
};

/* The current request: what its head said, and what its audit line and a refusal say about it.
 * Reset by sl__conn_begin_request(); the head's facts are filled by conn.c, the status and the
 * byte counts by conn_forward.c and conn_relay.c, the outcome by conn_refuse.c. */
struct sl__req_info {
    const char *method;
    const char *scheme;
    struct sl_host host;
    bool has_host;
    uint16_t port;
    /* Origin-form target (path and query), arena-owned; NULL for CONNECT. */
    const char *target;
    /* The request-target as the client sent it, when it could not be resolved into `target`
     * (a request refused for naming another host than its tunnel's): shown in the refusal's
     * body instead of HOST:PORT. Borrowed from the parser's head; NULL otherwise. */
    const char *sent_target;
    /* From its head: HTTP/1.0, keep-alive, a HEAD request, a websocket upgrade request. */
    bool client_http10;
    bool client_keep_alive;
    bool is_head;
    bool websocket;
    /* uv_hrtime() when it began, in ns. */
    uint64_t start_ns;
    /* Body bytes (plaintext) passed on each way: bytes_down as written to the client's
     * stream; its audit line takes off what never left the stream (sl__conn_audit()). */
    uint64_t bytes_up;
    uint64_t bytes_down;
    /* Why and by whom the transfer was cut short (SL__ABORT_NONE: it was not). */
    enum sl__abort_cause abort_cause;
    enum sl__abort_side abort_side;
    /* The status of the audit line: 0 until the final response head (or a refusal) is taken. */
    int status;
    bool allow;
    enum sl_reason reason;
    /* A 407 no-identity for a proxy request that carried no Proxy-Authorization at all: the
     * challenge a client answers with its credentials, audited as "challenge". */
    bool challenge;
    bool credential;
    /* The method a method-override header named when the policy refused it (refusal text and
     * hint); arena-owned, NULL otherwise. */
    const char *override_method;
};

/* One client connection. Each group names the room that writes it. */
struct sl__conn {
    /* --- The connection and its lifecycle (conn.c) --- */
    /* The owning worker (borrowed; outlives the connection); w->conns links us. */
    struct sl__worker *w;
    struct sl__conn *next;
    struct sl__conn *prev;
    /* Process-unique, from 1; names the connection in log lines. */
    uint64_t id;
    /* Written by sl__conn_set_state() only. */
    enum sl__conn_state state;
    /* Callbacks still owed before the memory may go: the close callbacks of the two handles
     * (from sl__conn_close() on), and the minting job while it is on the thread pool
     * (conn_tls.c counts it). The last one frees the connection. */
    unsigned pending;
    /* The timer of the state's phase, and the phase it is timing (start_phase()). */
    uv_timer_t timer;
    enum sl__conn_phase phase;
    /* A phase started during the step, to start when the step ends (SL__PHASE_KEEP: none):
     * sl__conn_rearm(). */
    enum sl__conn_phase phase_later;
    /* The stepper: sl__conn_step() is running, and the upstream stream it corked (NULL: none;
     * conn_forward.c corks an upstream taken during the step). */
    bool stepping;
    struct sl_stream *corked_up;
    /* Queued on the worker's resume list (sl__conn_step() stopped at its pass bound). */
    bool resume_queued;
    struct sl__conn *resume_next;
    /* The connection ends after the current exchange: draining, or a response or a request
     * that said so (conn_forward.c sets it too). */
    bool close_after;
    /* A byte of the current request head has arrived: its timeout is answered with 408, not a
     * silent close. Cleared when an exchange ends, and when a CONNECT opens its tunnel (what
     * follows is timed on its own). */
    bool head_started;
    /* Entering REQUEST_HEAD started the header timer for the head to come (at the accept, or a
     * tunnel to port 80 carrying plain HTTP): the next head whose first byte sets head_started
     * does not start it again, and clears this. */
    bool header_armed;
    /* The client's bytes_out when the send timer last started: while bytes wait for the client
     * (FORWARDING, FLUSHING), what it takes restarts it. */
    uint64_t flush_out;

    /* --- The client (conn.c; its credentials: conn_refuse.c) --- */
    struct sl_stream client;
    struct sockaddr_storage peer;
    /* `peer` holds one of its --max-connections-per-client slots for this connection
     * (proxy/peers.h): given back when the connection is freed, exactly once. */
    bool peer_slot;
    /* The connection holds one of --max-connections' slots (shared->connections), or, refused
     * at its accept, one of SL__REFUSING_MAX's (shared->refusing) while its 503 goes out: given
     * back when the connection is freed. */
    bool counted;
    bool refusing;
    /* Taken by a transparent listener (docs/reference/proxy.md §4.12): no proxy protocol and no
     * credentials; the client is its source address alone (sl__conn_identify()), the host its
     * SNI (then a tunnel as a CONNECT would open, sl__conn_open_tunnel()) or each request's
     * Host header, the port `orig_port`. */
    bool transparent;
    /* A transparent connection's port: the listener's own (443, 80), or the original
     * destination's of a connection the host's table redirected (SO_ORIGINAL_DST). */
    uint16_t orig_port;
    /* Credentials from Proxy-Authorization (of the CONNECT, for a tunnel); the token is wiped
     * before the memory is freed. */
    bool has_auth;
    char auth_id[SL_AUTH_ID_MAX + 1];
    char auth_token[SL_AUTH_TOKEN_MAX + 1];

    /* --- The tunnel, once a CONNECT (or a transparent connection's SNI) opened it (conn.c,
     * sl__conn_open_tunnel(); sl__conn_in_tunnel(): tport != 0) --- */
    struct sl_host thost;
    uint16_t tport;
    /* The tunnel won a `"tls": "passthrough"` rule: relayed uninspected, no request parsed.
     * `snap` and `dec` then stay those of the CONNECT until the tunnel's one audit line. */
    bool passthrough;
    /* A refusal held for the tunnel's first request (owned; NULL: none): the CONNECT was
     * refused for its host or port, and the tunnel was opened to say so in an answer the
     * client shows. Its one audit line is written when it is answered, or when the tunnel
     * ends first (sl__conn_audit_held()). */
    struct sl__held *held;
    /* The CONNECT's Host header when it named another host or port than the CONNECT (the
     * proxy's own address, as Node sends it): not refused, noted on the CONNECT's audit lines.
     * Owned (at most CONNECT_HOST_MAX bytes, NUL-terminated), or NULL. */
    char *connect_host;

    /* --- TLS (conn_tls.c) --- */
    /* The ClientHello's SNI named another host than the CONNECT. */
    bool sni_mismatch;
    /* A passthrough tunnel's hellos, guarded while they pass (conn_tls.c): owned, from its
     * first ClientHello until the server's first handshake message shows no HelloRetryRequest,
     * or the second ClientHello passed the check; NULL otherwise (the relay's fast path). */
    struct sl__pt_guard *pt_guard;
    /* Minting a leaf on the thread pool (MINTING): the job, its leaf (a reference, held until
     * the engine has it) and its result. */
    uv_work_t work;
    struct sl_leaf *leaf;
    int mint_rc;

    /* --- The current request and its decision (conn_refuse.c; conn_relay.c decides again) --- */
    /* The snapshot deciding it (a reference; NULL between requests) and its decision. */
    struct sl_snapshot *snap;
    struct sl_decision dec;
    struct sl__req_info r;

    /* --- The exchange (conn_forward.c; the request parser: conn.c) --- */
    /* The request parser (client side) and its arena; the response parser (upstream side) and
     * its arena, initialised for each upstream the request goes to. */
    struct sl_arena arena;
    struct sl_h1 req;
    struct sl_arena resp_arena;
    struct sl_h1 resp;
    /* A head to write whole (refusals are written into it too), and where it goes
     * (SL__HEAD_NONE: nothing pending). */
    struct sl_buf head;
    enum sl__head_to head_to;
    /* The upstream, or NULL; released to the pool or closed when the exchange ends. */
    struct sl_upstream *up;
    /* Each side's progress, and its body event not yet passed on. */
    enum sl__msg_stage req_stage;
    struct sl__pending req_pend;
    enum sl__msg_stage resp_stage;
    struct sl__pending resp_pend;
    enum sl__framing resp_framing;
    /* Interim (1xx) responses relayed for this request; the final one is still to come. */
    unsigned interims;
    /* The request went again to a fresh upstream connection (once per request). */
    bool retried;
    /* A git push held until its commands are read (conn_git.c); NULL for every other request.
     * Owned; freed when the exchange ends. */
    struct sl__git_hold *git;

    /* --- The relay (conn_relay.c) --- */
    /* Loop time (ms) at which the relay is idle for too long; pushed back by every byte moved.
     * The timer fires at this or at the expiry, whichever comes first. */
    uint64_t relay_idle_at;
    /* The client's expires_at (seconds since the epoch), or INT64_MAX when it has none. */
    int64_t relay_expires_at_s;
    /* Each direction's end (client to upstream, upstream to client) was passed on. */
    bool relay_up_eof;
    bool relay_down_eof;
};

static inline const struct sl_proxy_config *sl__conn_cfg(const struct sl__conn *c)
{
    return c->w->shared->cfg;
}

/* Inside a tunnel: a CONNECT was allowed on this connection. */
static inline bool sl__conn_in_tunnel(const struct sl__conn *c)
{
    return c->tport != 0;
}

/* Intercepting: the client speaks TLS to us inside its tunnel. */
static inline bool sl__conn_is_intercepted(struct sl__conn *c)
{
    return sl_stream_tls(&c->client) != NULL;
}

/* The final response head was taken: relayed, or on its way to the client. */
static inline bool sl__conn_resp_head_sent(const struct sl__conn *c)
{
    return c->resp_stage != SL__MSG_HEAD;
}

/*
 * conn.c: states, the stepper, ending and closing.
 */

/* Moves `c` to `s` and starts the phase the state table gives its entry. */
void sl__conn_set_state(struct sl__conn *c, enum sl__conn_state s);
/* Inside the current state: starts `phase` again from now; it must be the state's entry phase
 * or one of its inner ones (asserted). During a step the timer starts when the step ends (the
 * loop's clock does not move within it, so that is the same deadline), the last call winning, and
 * a state change drops it: a request's rearms cost one timer start, or none. */
void sl__conn_rearm(struct sl__conn *c, enum sl__conn_phase phase);

/* The phase the timer is timing, or will time once the step ends. */
static inline enum sl__conn_phase sl__conn_phase(const struct sl__conn *c)
{
    return c->phase_later != SL__PHASE_KEEP ? c->phase_later : c->phase;
}

/* Runs the state machine as far as the data allows. Safe to call from inside a step. */
void sl__conn_step(struct sl__conn *c);
/* A tunnel's decision (sl__conn_decide_connect()) let it open, for c->r.host and c->r.port:
 * they become the tunnel's, its CONNECT line is written (or kept for a passthrough tunnel's end,
 * or the held refusal's answer), and the connection waits for the tunnel's first bytes
 * (TUNNEL_SNIFF). After an explicit CONNECT's 200, or a transparent connection's SNI. */
void sl__conn_open_tunnel(struct sl__conn *c);
/* Closes now (CLOSED): the upstream, the timer and the client's stream; idempotent. The memory
 * goes with the last callback owed, never during this call. */
void sl__conn_close(struct sl__conn *c);
/* No more requests: closes the upstream, flushes the last response, FIN, linger, close. */
void sl__conn_end(struct sl__conn *c);
/* The exchange is over and the connection goes on to the next request (or ends when the
 * worker drains). */
void sl__conn_end_exchange(struct sl__conn *c);
/* One callback owed (`pending`) has come: frees the connection when it was the last. */
void sl__conn_owed_done(struct sl__conn *c);

/*
 * conn_refuse.c: the request, its identity and decision, refusals and audit lines.
 */

/* Starts the bookkeeping of a request (`method` borrowed; NULL before a head was parsed) with
 * the worker's newest snapshot. */
void sl__conn_begin_request(struct sl__conn *c, const char *method);
/* Writes the current request's audit line and counts it. */
void sl__conn_audit(struct sl__conn *c);
/* Cuts the current transfer short: records the side and the cause, closes the connection,
 * then writes the audit line (bytes_down then counts what left for the client's socket, the
 * close's last attempt included). */
void sl__conn_abort(struct sl__conn *c, enum sl__abort_side side, enum sl__abort_cause cause);
/* Answers the current request with a refusal of the proxy's own, audits it and ends the
 * exchange; `keep` lets the connection go on (nothing of the request is left unread). */
void sl__conn_refuse(struct sl__conn *c, enum sl_reason reason, int status, const char *detail,
                     bool keep);
/* sl__conn_refuse() with the status the reason has (sl_reason_status()). */
void sl__conn_refuse_reason(struct sl__conn *c, enum sl_reason reason, const char *detail,
                            bool keep);
/* A refusal that cannot be answered (TLS failed, not TLS, the client left): audit, close. */
void sl__conn_drop(struct sl__conn *c, enum sl_reason reason);

/* Reads the Proxy-Authorization of `h` into the connection. Returns false when it is present
 * but malformed. */
bool sl__conn_take_credentials(struct sl__conn *c, const struct sl_h1_head *h);
/* The client of `snap` (NULL: none) that the connection's credentials and address name, or
 * NULL. */
const struct sl_client *sl__conn_identify(const struct sl__conn *c, const struct sl_snapshot *snap);
/* Names the client and environment in the lines of refusals that come before the decision. */
void sl__conn_note_identity(struct sl__conn *c);
/* Writes the client's address (no port) to `out`; "an unknown address" when it has none. */
void sl__conn_peer_address(const struct sl__conn *c, char *out, size_t len);
/* Decides the current request (`method` NULL: a CONNECT). Returns true when allowed; otherwise
 * the refusal is answered. */
bool sl__conn_decide(struct sl__conn *c, const char *method, bool tls, bool keep);
/* Decides a CONNECT (or a transparent connection's TLS, for its SNI). Returns true when the
 * tunnel is to open: allowed, or refused for its host or port with the refusal held for the
 * first request inside (`held`, docs/reference/proxy.md §4.5); otherwise the refusal is
 * answered (a transparent connection, which has no CONNECT to answer, is closed with its audit
 * line) and false returned. */
bool sl__conn_decide_connect(struct sl__conn *c);
/* Answers the current request (begun, its target noted) with the held refusal, which it
 * consumes; the exchange ends with the connection. */
void sl__conn_refuse_held(struct sl__conn *c);
/* Writes the held refusal's line (the CONNECT's, status 0: the tunnel ended before a request
 * could be answered) and consumes it; nothing when none is held. */
void sl__conn_audit_held(struct sl__conn *c);
/* The allowed request (head `h`) carries none of the client's placeholders but its own one in
 * its rule's header (policy/placeholder.h). Returns true when so; otherwise the
 * placeholder-misuse refusal is answered. */
bool sl__conn_placeholders_ok(struct sl__conn *c, const struct sl_h1_head *h);
/* Decides the methods named by method-override headers of `h` too. Returns true when all are
 * allowed; otherwise the refusal is answered. */
bool sl__conn_overrides_allowed(struct sl__conn *c, const struct sl_h1_head *h, bool tls,
                                bool keep);
/* True when the request of head `h` is idempotent (RFC 9110 §9.2.2: GET, HEAD, OPTIONS, TRACE,
 * PUT, DELETE), and so is every method its method-override headers name: only such a request
 * may be sent again after its head went out (RFC 9112 §9.3.1.1). */
bool sl__conn_idempotent(const struct sl_h1_head *h);
/* The opposite of sl__conn_idempotent(), saying which method is not idempotent into `why`
 * (`cap` bytes, 0 for none): "POST", or "GET with X-HTTP-Method-Override: POST". */
bool sl__conn_not_idempotent(const struct sl_h1_head *h, char *why, size_t cap);

/*
 * conn_tls.c: the tunnel's first bytes and the client's TLS.
 */

/* TUNNEL_SNIFF and TLS_HANDSHAKE steps: >0 progress, 0 waiting, <0 the connection moved on
 * (closed, or ended with a refusal). TUNNEL_SNIFF also reads a transparent connection's first
 * bytes before any tunnel: a ClientHello's SNI opens one (sl__conn_open_tunnel()), plain HTTP
 * goes on to REQUEST_HEAD. */
int sl__conn_step_tunnel_sniff(struct sl__conn *c);
int sl__conn_step_tls_handshake(struct sl__conn *c);

/*
 * conn_forward.c: dialling and forwarding.
 */

/* The current request (head `h`) is allowed: builds the head it goes upstream with and dials
 * (DIALING), or refuses it. */
void sl__conn_start_request(struct sl__conn *c, const struct sl_h1_head *h);
/* Dials the CONNECT host of a passthrough tunnel (DIALING), or drops the tunnel. */
void sl__conn_start_passthrough_dial(struct sl__conn *c);

/* A passthrough tunnel's relay while its hellos are guarded (c->pt_guard not NULL; conn_tls.c).
 * sl__conn_pt_client() tells how many of the client's bytes `in` may go upstream now (`*allow`,
 * perhaps 0: they wait) and returns 0, or -1 when the tunnel was refused (its line written, the
 * connection ended or closed); sl__conn_pt_client_passed() says `n` of them went.
 * sl__conn_pt_server() watches `n` bytes that went from the upstream to the client, and
 * sl__conn_pt_server_ended() says that the upstream's input ended. Any may end the guard
 * (c->pt_guard becomes NULL). */
SL_MUST_CHECK int sl__conn_pt_client(struct sl__conn *c, struct sl_slice in, size_t *allow);
void sl__conn_pt_client_passed(struct sl__conn *c, size_t n);
void sl__conn_pt_server(struct sl__conn *c, const uint8_t *p, size_t n);
void sl__conn_pt_server_ended(struct sl__conn *c);
/* The DIALING step, returning as the steps above do. */
int sl__conn_step_dialing(struct sl__conn *c);
/* FORWARDING, the hot one: runs the stepper's rounds itself, so that a request's rounds stay
 * inside this file (one call instead of one per round): up to `max_rounds` (at least one), while
 * each makes progress and the connection stays in FORWARDING. Returns the last round's result,
 * as the steps above do, and sets `*rounds` to the rounds it ran. */
int sl__conn_step_forwarding(struct sl__conn *c, int max_rounds, int *rounds);

/*
 * conn_git.c: a git push held until its ref-update commands are read.
 */

/* The allowed request (head `h`) is a push under write access (c->dec.git_push): sets up
 * holding its body (and answers an `Expect: 100-continue`). Returns false when the push is
 * refused instead (answered). */
bool sl__conn_git_hold(struct sl__conn *c, const struct sl_h1_head *h);
/* c->git is set. The push is being read, or its refusal drains: sl__conn_git_round() runs
 * FORWARDING's rounds. */
bool sl__conn_git_holds(const struct sl__conn *c);
/* A FORWARDING round while the push is held, returning as sl__conn_step_forwarding() does. */
int sl__conn_git_round(struct sl__conn *c);
/* c->git is set. The push was allowed and its head went upstream: the held bytes follow, by
 * sl__conn_git_release() (1 once all went, 0 when `us` is full, -1 when it failed). */
bool sl__conn_git_releasing(const struct sl__conn *c);
int sl__conn_git_release(struct sl__conn *c, struct sl_stream *us);
/* The timer fired in FORWARDING: a push still waiting for its commands is refused. Returns
 * whether it was handled. */
bool sl__conn_git_on_timer(struct sl__conn *c);
/* Frees the held push, if any. */
void sl__conn_git_finish(struct sl__conn *c);

/*
 * conn_relay.c: long-lived relays.
 */

/* Enters RELAY once the decision, taken again, holds. Returns false when it no longer does:
 * the connection is then closed with its audit line. */
bool sl__conn_enter_relay(struct sl__conn *c);
/* The RELAY step, returning as the steps above do. */
int sl__conn_step_relay(struct sl__conn *c);
/* The relay's timer fired. */
void sl__conn_on_relay_timer(struct sl__conn *c);
/* Milliseconds from now until the relay's deadline (SL__PHASE_RELAY). */
uint64_t sl__conn_relay_deadline_ms(struct sl__conn *c);

#endif
