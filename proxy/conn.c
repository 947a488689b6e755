/* SPDX-License-Identifier: Apache-2.0 */
#include "proxy/conn.h"

#include <assert.h>
#include <ctype.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"
#include "http/h1.h"
#include "policy/auth.h"
#include "policy/decision.h"
#include "policy/host.h"
#include "policy/validate.h"
#include "proxy/head.h"
#include "proxy/stream.h"
#include "proxy/tls.h"
#include "proxy/upstream.h"

/* After the last response, how long an ending connection (LINGERING) still reads (and discards)
 * what the client sends, so that its unread bytes do not turn our FIN into a RST that destroys the
 * response in flight. */
#define LINGER_MS 2000u
/* A head we write: the largest head we accept plus our own additions. */
#define HEAD_OUT_MAX (SL_STREAM_OUT_HIGH + 4096u)
#define ARENA_CHUNK  4096u
#define ARENA_MAX    ((size_t)256 * 1024)
/* Passes of conn_step() before the rest of the work waits for the loop's next turn. */
#define STEP_PASSES_MAX 16
/* Interim (1xx) responses relayed for one request; more is a refusal (502). */
#define INTERIMS_MAX      32
#define INTERIMS_MAX_TEXT "32"
/* Ciphertext a client engine may hold before writes wait: one record. The stream moves it
 * into its own output block at once, so a larger engine ring only costs memory (its ring is
 * allocated at this size plus a record, per connection). */
#define TLS_OUT_CAP ((size_t)SL_TLS_OUT_CAP_DEFAULT)
/* Longest request target quoted back in a refusal. */
#define QUOTE_MAX 200
/* A relay's expiry timer fires this long after the second of `expires_at` has begun, so that
 * the decision it triggers sees the client expired (time() has ticked over). */
#define EXPIRY_SLACK_MS 20

/*
 * The states. Only set_state() assigns `state`; its entry action starts the phase timer the
 * state table gives (state_table[] below).
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
     * until either side closes, for as long as the decision holds (relay_holds()). */
    SL__CONN_RELAY,
    /* No more requests (end_connection()): the last response is leaving, input is discarded;
     * once it has left, our FIN follows and the connection lingers. */
    SL__CONN_FLUSHING,
    /* The last response has left and our FIN with it: input is still read and discarded for
     * LINGER_MS, so that unread bytes do not turn the FIN into a RST that destroys the response
     * in flight; then the connection closes. */
    SL__CONN_LINGERING,
    /* conn_close(): the handles are closing; the memory goes with the last callback owed. */
    SL__CONN_CLOSED,
};

/*
 * What the connection's one timer is timing. A state's entry starts the phase of its row in
 * state_table[] (SL__PHASE_KEEP: the deadline running goes on); inside a state, only the
 * state's `inner` phase, or its entry phase again, may be started (rearm()).
 */
enum sl__conn_phase {
    /* Entry only: the timer runs on untouched. */
    SL__PHASE_KEEP = 0,
    /* No timer. */
    SL__PHASE_NONE,
    /* A request head arriving: header_timeout_s. */
    SL__PHASE_HEADER,
    /* A connection with nothing to do but wait for its peer, or a transfer that must make
     * progress: idle_timeout_s. */
    SL__PHASE_IDLE,
    /* A tunnel's first bytes and the whole TLS handshake: tls_handshake_timeout_s. */
    SL__PHASE_HANDSHAKE,
    /* Dialling: upstream_timeout_s plus a second, so that the upstream's own dial timer fires
     * first with the precise failure (proxy/upstream.h). */
    SL__PHASE_DIAL,
    /* The upstream's answer: upstream_timeout_s. */
    SL__PHASE_UPSTREAM,
    /* A relay's deadline: its idle deadline or the client's expiry, whichever comes first
     * (relay_deadline_ms()). */
    SL__PHASE_RELAY,
    /* The linger after the last response: LINGER_MS. */
    SL__PHASE_LINGER,
};

/* The state table: each state's name (for trace and debug lines), the phase its entry starts,
 * the one other phase its own events may start (SL__PHASE_NONE: none), and whether the client
 * is read: not while the upstream is dialled (pipelined requests wait in the kernel) or a leaf
 * is minted. In FORWARDING the client is read even after its request is complete: a hang-up must
 * be noticed; pipelined bytes just wait in the (bounded) buffer. */
static const struct {
    const char *name;
    enum sl__conn_phase entry;
    enum sl__conn_phase inner;
    bool reads;
} state_table[] = {
    [SL__CONN_NEW] = { "new", SL__PHASE_NONE, SL__PHASE_NONE, false },
    /* Entered at the accept, or from TUNNEL_SNIFF (a tunnel carrying plain HTTP), a head is due
     * at once: HEADER, so that a client cannot hold its slot longer by sending its first byte
     * late (set_state()). Otherwise (after an exchange, or a TLS handshake) the connection
     * idles, and a head's first byte starts HEADER (step_request_head()). */
    [SL__CONN_REQUEST_HEAD] = { "request-head", SL__PHASE_IDLE, SL__PHASE_HEADER, true },
    /* One deadline for the first bytes and the whole handshake, minting included. */
    [SL__CONN_TUNNEL_SNIFF] = { "tunnel-sniff", SL__PHASE_HANDSHAKE, SL__PHASE_NONE, true },
    [SL__CONN_TLS_HANDSHAKE] = { "tls-handshake", SL__PHASE_KEEP, SL__PHASE_NONE, true },
    [SL__CONN_MINTING] = { "minting", SL__PHASE_KEEP, SL__PHASE_NONE, false },
    [SL__CONN_DIALING] = { "dialing", SL__PHASE_DIAL, SL__PHASE_NONE, false },
    /* UPSTREAM, started again by each piece of the request body before the final response
     * head; IDLE once a response head went to the client, started again by each piece of the
     * response body (forward_request(), forward_response()). */
    [SL__CONN_FORWARDING] = { "forwarding", SL__PHASE_UPSTREAM, SL__PHASE_IDLE, true },
    /* Computed again when it fires and when the policy changes (the expiry may move). */
    [SL__CONN_RELAY] = { "relay", SL__PHASE_RELAY, SL__PHASE_RELAY, true },
    /* Started again while the client takes the tail of its response (step_ending()). */
    [SL__CONN_FLUSHING] = { "flushing", SL__PHASE_IDLE, SL__PHASE_NONE, true },
    [SL__CONN_LINGERING] = { "lingering", SL__PHASE_LINGER, SL__PHASE_NONE, true },
    [SL__CONN_CLOSED] = { "closed", SL__PHASE_NONE, SL__PHASE_NONE, false },
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
struct pending {
    bool active;
    size_t off;
    size_t len;
    size_t used;
    /* Chunked re-framing: the chunk header was written. */
    bool framed;
};

/* The current request: what its head said, and what its audit line and a refusal say about it.
 * Reset by begin_request(). */
struct req_info {
    const char *method;
    const char *scheme;
    struct sl_host host;
    bool has_host;
    uint16_t port;
    /* Origin-form target (path and query), arena-owned; NULL for CONNECT. */
    const char *target;
    /* From its head: HTTP/1.0, keep-alive, a HEAD request, a websocket upgrade request. */
    bool client_http10;
    bool client_keep_alive;
    bool is_head;
    bool websocket;
    uint64_t start_ns;
    uint64_t bytes_up;
    uint64_t bytes_down;
    /* The status of the audit line: 0 until the final response head (or a refusal) is taken. */
    int status;
    bool allow;
    enum sl_reason reason;
    bool credential;
    /* The method a method-override header named when the policy refused it (refusal text and
     * hint); arena-owned, NULL otherwise. */
    const char *override_method;
};

struct sl__conn {
    /* --- The connection and its lifecycle --- */
    /* The owning worker (borrowed; outlives the connection); its conns list links us. */
    struct sl__worker *w;
    struct sl__conn *next;
    struct sl__conn *prev;
    /* Process-unique, from 1; names the connection in log lines. */
    uint64_t id;
    /* Written by set_state() only. */
    enum sl__conn_state state;
    /* Callbacks still owed before the memory may go: the close callbacks of the two handles
     * (from conn_close() on), and the minting job while it is on the thread pool. The last one
     * frees the connection. */
    unsigned pending;
    /* The timer of the state's phase (state_table[]). */
    uv_timer_t timer;
    /* The stepper: conn_step() is running, and the upstream stream it corked (NULL: none). */
    bool stepping;
    struct sl_stream *corked_up;
    /* Queued on the worker's resume list (conn_step() stopped at its pass bound). */
    bool resume_queued;
    struct sl__conn *resume_next;
    /* The connection ends after the current exchange (draining, or a response or a request
     * that said so). */
    bool close_after;
    /* A byte of the current request head has arrived: its timeout is answered with 408, not a
     * silent close. Cleared when an exchange ends (reset_exchange()); a CONNECT's stays set in
     * the tunnel that follows until its first exchange ends. */
    bool head_started;
    /* Entering REQUEST_HEAD started the header timer for the head to come (at the accept, or a
     * tunnel to port 80 carrying plain HTTP): that head's first byte does not start it again,
     * and clears this. */
    bool header_armed;
    /* FLUSHING: the client's bytes_out when the idle timer last started (progress restarts
     * it). */
    uint64_t flush_out;

    /* --- The client --- */
    struct sl_stream client;
    struct sockaddr_storage peer;
    /* Credentials from Proxy-Authorization (of the CONNECT, for a tunnel); the token is wiped
     * before the memory is freed. */
    bool has_auth;
    char auth_id[SL_AUTH_ID_MAX + 1];
    char auth_token[SL_AUTH_TOKEN_MAX + 1];

    /* --- The tunnel, once a CONNECT was allowed (in_tunnel(): tport != 0) --- */
    struct sl_host thost;
    uint16_t tport;
    /* The tunnel won a `"tls": "passthrough"` rule: relayed uninspected, no request parsed.
     * `snap` and `dec` then stay those of the CONNECT until the tunnel's one audit line. */
    bool passthrough;
    /* The ClientHello's SNI named another host than the CONNECT. */
    bool sni_mismatch;
    /* Minting a leaf on the thread pool (MINTING): the job, its leaf (a reference) and its
     * result. */
    uv_work_t work;
    struct sl_leaf *leaf;
    int mint_rc;

    /* --- The current request and its decision --- */
    /* The snapshot deciding it (a reference, NULL between requests) and its decision. */
    struct sl_snapshot *snap;
    struct sl_decision dec;
    struct req_info r;

    /* --- The exchange: parsers, heads, bodies --- */
    /* The request parser (client side) and its arena; the response parser (upstream side) and
     * its arena, initialised by start_forwarding(). */
    struct sl_arena arena;
    struct sl_h1 req;
    struct sl_arena resp_arena;
    struct sl_h1 resp;
    /* A head to write whole, and where it goes (SL__HEAD_NONE: nothing pending). */
    struct sl_buf head;
    enum sl__head_to head_to;
    /* The upstream (NULL when none), released or closed when the exchange ends. */
    struct sl_upstream *up;
    enum sl__msg_stage req_stage;
    struct pending req_pend;
    enum sl__msg_stage resp_stage;
    struct pending resp_pend;
    enum sl__framing resp_framing;
    /* Interim (1xx) responses relayed for this request; the final one is still to come. */
    unsigned interims;
    /* The request went again to a fresh upstream connection (retry_stale(), once). */
    bool retried;

    /* --- The relay (RELAY) --- */
    /* Loop time (ms) at which the relay is idle for too long; pushed back by every byte moved.
     * The timer fires at this or at the expiry, whichever comes first. */
    uint64_t relay_idle_at;
    /* The client's expires_at (seconds since the epoch), or INT64_MAX when it has none. */
    int64_t relay_expires_at_s;
    /* Each direction's end (client to upstream, upstream to client) was passed on. */
    bool relay_up_eof;
    bool relay_down_eof;
};

static void conn_step(struct sl__conn *c);
static void conn_close(struct sl__conn *c);

static uint64_t next_conn_id(void)
{
    static atomic_uint_fast64_t ids;

    return atomic_fetch_add(&ids, 1) + 1;
}

static const struct sl__shared *shared(const struct sl__conn *c)
{
    return c->w->shared;
}

static const struct sl_proxy_config *cfg(const struct sl__conn *c)
{
    return c->w->shared->cfg;
}

static uint64_t secs_ms(unsigned s)
{
    return (uint64_t)s * 1000u;
}

/* Inside a tunnel: a CONNECT was allowed on this connection. */
static bool in_tunnel(const struct sl__conn *c)
{
    return c->tport != 0;
}

/* Intercepting: the client speaks TLS to us inside its tunnel. */
static bool is_intercepted(struct sl__conn *c)
{
    return sl_stream_tls(&c->client) != NULL;
}

/* The final response head was taken: relayed, or on its way to the client. */
static bool resp_head_sent(const struct sl__conn *c)
{
    return c->resp_stage != SL__MSG_HEAD;
}

/* The chunked framing of the request body, as it goes upstream too. */
static bool req_chunked(const struct sl__conn *c)
{
    return sl_h1_head(&c->req)->body == SL_H1_BODY_CHUNKED;
}

/*
 * The phase timer.
 */

static uint64_t relay_deadline_ms(struct sl__conn *c);
static void on_timer(uv_timer_t *t);

/* Starts the timer for `phase` (stops it for SL__PHASE_NONE, leaves it for SL__PHASE_KEEP). The
 * one place that starts the timer. */
static void start_phase(struct sl__conn *c, enum sl__conn_phase phase)
{
    const struct sl_proxy_config *k = cfg(c);
    uint64_t ms = 0;

    switch (phase) {
    case SL__PHASE_KEEP:
        return;
    case SL__PHASE_NONE:
        (void)uv_timer_stop(&c->timer);
        return;
    case SL__PHASE_HEADER:
        ms = secs_ms(k->header_timeout_s);
        break;
    case SL__PHASE_IDLE:
        ms = secs_ms(k->idle_timeout_s);
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
        ms = relay_deadline_ms(c);
        break;
    case SL__PHASE_LINGER:
        ms = LINGER_MS;
        break;
    }
    (void)uv_timer_start(&c->timer, on_timer, ms, 0);
}

/* The one writer of `state`. Its entry action starts the state's phase (state_table[]). */
static void set_state(struct sl__conn *c, enum sl__conn_state s)
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
    start_phase(c, phase);
}

/* Inside the current state: starts `phase` now, one the state table allows the state (its
 * entry phase again, or its inner one). */
static void rearm(struct sl__conn *c, enum sl__conn_phase phase)
{
    assert(phase == state_table[c->state].entry || phase == state_table[c->state].inner);
    start_phase(c, phase);
}

/*
 * Requests: bookkeeping, audit, refusals.
 */

static void note_identity(struct sl__conn *c);

static void begin_request(struct sl__conn *c, const char *method)
{
    c->r = (struct req_info){ .method = method,
                              .scheme = is_intercepted(c) ? "https" : "http",
                              .start_ns = uv_hrtime(),
                              .allow = true,
                              .reason = SL_REASON_NONE };
    c->dec = (struct sl_decision){ .allow = false };
    sl_snapshot_unref(c->snap);
    c->snap = c->w->snapshot != NULL ? sl_snapshot_ref(c->w->snapshot) : NULL;
    if (in_tunnel(c)) {
        note_identity(c);
    }
}

const uint64_t sl__latency_bounds_us[SL__LATENCY_BUCKETS - 1] = {
    1000, 5000, 10000, 25000, 50000, 100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000,
};

/* Counts one request of `elapsed_us` in the latency histogram (SPEC.md §4.9). */
static void count_latency(struct sl__counters *k, uint64_t elapsed_us)
{
    size_t i = 0;

    while (i < SL__LATENCY_BUCKETS - 1 && elapsed_us > sl__latency_bounds_us[i]) {
        i++;
    }
    sl__count(&k->latency[i], 1);
    sl__count(&k->latency_sum_us, elapsed_us);
}

static void audit(struct sl__conn *c)
{
    const struct sl__shared *sh = shared(c);
    const uint64_t elapsed_ns = uv_hrtime() - c->r.start_ns;
    /* The CONNECT line of an opened tunnel: its requests are timed one by one instead. */
    const bool opens_tunnel =
            c->r.allow && c->r.method != NULL && strcmp(c->r.method, "CONNECT") == 0;
    struct sl_audit_record a = {
        .client = c->dec.client,
        .environment = c->dec.environment,
        .src = (const struct sockaddr *)&c->peer,
        .method = c->r.method,
        .scheme = c->r.scheme,
        .host = c->r.has_host ? c->r.host.name : NULL,
        .port = c->r.port,
        .path = c->r.target,
        .allow = c->r.allow,
        .reason = c->r.reason,
        .rule = c->dec.rule,
        .credential = c->r.credential,
        .passthrough = c->passthrough,
        .status = c->r.status,
        .bytes_up = c->r.bytes_up,
        .bytes_down = c->r.bytes_down,
        .ms = (double)elapsed_ns / 1e6,
        .policy_version = c->snap != NULL ? sl_snapshot_version(c->snap) : 0,
    };

    if (c->r.allow) {
        sl__count(&c->w->counters.requests_allowed, 1);
    } else {
        sl__count(&c->w->counters.requests_denied, 1);
        sl__count(&c->w->counters.denied_by_reason[c->r.reason], 1);
    }
    sl__count(&c->w->counters.bytes_up, c->r.bytes_up);
    sl__count(&c->w->counters.bytes_down, c->r.bytes_down);
    if (!opens_tunnel) {
        count_latency(&c->w->counters, elapsed_ns / 1000u);
    }
    sl_audit_write(sh->audit, &a);
    if (sl_log_enabled(SL_LOG_DEBUG)) {
        sl_log(SL_LOG_DEBUG, c->id,
               "msg=request method=%s host=%s port=%u decision=%s reason=%s "
               "status=%d",
               c->r.method != NULL ? c->r.method : "-", a.host != NULL ? a.host : "-",
               (unsigned)c->r.port, c->r.allow ? "allow" : "deny", sl_reason_code(c->r.reason),
               c->r.status);
    }
}

/* Appends `s` for a human: printable ASCII only, at most `max` bytes, cut at a '?' (a query
 * may carry secrets) when `cut_query`. */
static int put_quoted(struct sl_buf *b, const char *s, size_t max, bool cut_query)
{
    for (size_t i = 0; s[i] != '\0' && !(cut_query && s[i] == '?') && i < max; i++) {
        char ch = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';

        SL_TRY(sl_buf_append(b, &ch, 1));
    }
    return 0;
}

/* "https://host[:port]/path" or "host:port" (CONNECT) for messages. */
static int put_request_url(struct sl__conn *c, struct sl_buf *b)
{
    const struct req_info *r = &c->r;

    if (!r->has_host) {
        return sl_buf_append_str(b, "(unparsed target)");
    }
    if (r->target == NULL) {
        return sl_buf_printf(b, "%s:%u", r->host.name, (unsigned)r->port);
    }
    SL_TRY(sl_buf_printf(b, "%s://%s", r->scheme, r->host.name));
    if (r->port != (strcmp(r->scheme, "https") == 0 ? 443 : 80)) {
        SL_TRY(sl_buf_printf(b, ":%u", (unsigned)r->port));
    }
    return put_quoted(b, r->target, QUOTE_MAX, true);
}

static bool is_policy_reason(enum sl_reason reason)
{
    switch (reason) {
    case SL_REASON_HOST_NOT_ALLOWED:
    case SL_REASON_PORT_NOT_ALLOWED:
    case SL_REASON_METHOD_NOT_ALLOWED:
    case SL_REASON_CREDENTIAL_NEEDS_TLS:
    case SL_REASON_EXPIRED:
    case SL_REASON_NO_IDENTITY:
    case SL_REASON_NO_POLICY:
    case SL_REASON_PRIVATE_ADDRESS:
        return true;
    case SL_REASON_NONE:
    case SL_REASON_BAD_REQUEST:
    case SL_REASON_BAD_HOST:
    case SL_REASON_HOST_MISMATCH:
    case SL_REASON_NOT_TLS:
    case SL_REASON_DNS:
    case SL_REASON_UPSTREAM_UNREACHABLE:
    case SL_REASON_UPSTREAM_TLS:
    case SL_REASON_UPSTREAM_TIMEOUT:
    case SL_REASON_TOO_LARGE:
    case SL_REASON_OVERLOADED:
        return false;
    }
    return false;
}

static const char *status_text(int status)
{
    switch (status) {
    case 400:
        return "Bad Request";
    case 403:
        return "Forbidden";
    case 407:
        return "Proxy Authentication Required";
    case 408:
        return "Request Timeout";
    case 421:
        return "Misdirected Request";
    case 431:
        return "Request Header Fields Too Large";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    default:
        return "Error";
    }
}

static void end_connection(struct sl__conn *c);
static void end_exchange(struct sl__conn *c);

/* The one-line body of a refusal (SPEC.md §4.5): what was refused and why, the detail, and for
 * a policy refusal what would allow it. */
static int refusal_body(struct sl__conn *c, enum sl_reason reason, const char *detail,
                        struct sl_buf *b)
{
    const char *method = c->r.method != NULL ? c->r.method : "request";
    const char *hint_method = c->r.override_method != NULL ? c->r.override_method : c->r.method;
    char hint[SL_POLICY_HINT_MAX];

    SL_TRY(sl_buf_printf(b, "sluice: %s ", method));
    SL_TRY(put_request_url(c, b));
    SL_TRY(sl_buf_printf(b, " %s: %s", is_policy_reason(reason) ? "denied" : "failed",
                         sl_reason_code(reason)));
    if (c->dec.client != NULL) {
        SL_TRY(sl_buf_printf(b, " (client %s, environment %s)", c->dec.client,
                             c->dec.environment_label != NULL ? c->dec.environment_label
                                                              : c->dec.environment));
    }
    if (detail != NULL && detail[0] != '\0') {
        SL_TRY(sl_buf_append_str(b, ": "));
        SL_TRY(put_quoted(b, detail, 400, false));
    }
    if (c->r.has_host && c->dec.environment != NULL) {
        struct sl_request_view v = { &c->r.host, c->r.port,
                                     c->r.target != NULL ? hint_method : NULL, is_intercepted(c) };

        if (sl_policy_hint(&c->dec, &v, hint, sizeof(hint)) > 0) {
            SL_TRY(sl_buf_printf(b, "; %s", hint));
        }
    }
    return sl_buf_append_str(b, "\n");
}

/* Answers the current request with a refusal of the proxy's own and ends it. `keep` allows
 * the connection to go on (the request had no body left unread). */
static void refuse(struct sl__conn *c, enum sl_reason reason, int status, const char *detail,
                   bool keep)
{
    struct sl_buf body;
    bool go_on = keep && c->r.client_keep_alive && !c->close_after && !c->w->draining;
    int rc;

    c->r.allow = false;
    c->r.reason = reason;
    c->r.status = status;
    sl_buf_init(&body, 4096);
    sl_buf_reset(&c->head);
    rc = refusal_body(c, reason, detail, &body);
    if (rc == 0) {
        rc = sl_buf_printf(&c->head,
                           "HTTP/1.1 %d %s\r\nX-Sluice-Reason: %s\r\nContent-Type: text/plain; "
                           "charset=utf-8\r\nContent-Length: %zu\r\n%s%s\r\n",
                           status, status_text(status), sl_reason_code(reason), body.len,
                           status == 407 ? "Proxy-Authenticate: Basic realm=\"sluice\"\r\n" : "",
                           go_on ? "" : "Connection: close\r\n");
    }
    if (rc == 0 && !c->r.is_head) {
        rc = sl_buf_append(&c->head, body.p, body.len);
    }
    sl_buf_finish(&body);
    if (rc == 0) {
        rc = sl_stream_write_all(&c->client, c->head.p, c->head.len);
    }
    if (rc < 0) {
        c->r.status = 0;
    }
    audit(c);
    if (c->up != NULL) {
        sl_upstream_close(c->up);
        c->up = NULL;
    }
    if (rc < 0 || !go_on) {
        end_connection(c);
        return;
    }
    end_exchange(c);
}

/* Refuses with the status SPEC.md §4.5 gives the reason. */
static void refuse_reason(struct sl__conn *c, enum sl_reason reason, const char *detail, bool keep)
{
    refuse(c, reason, sl_reason_status(reason), detail, keep);
}

/* A refusal that cannot be answered (TLS failed, not TLS, the client left): audit and close. */
static void drop(struct sl__conn *c, enum sl_reason reason)
{
    c->r.allow = false;
    c->r.reason = reason;
    c->r.status = 0;
    audit(c);
    conn_close(c);
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
    atomic_fetch_sub(&w->shared->connections, 1);
    sl__count(&w->counters.connections_open, (uint64_t)-1);
    sl_h1_finish(&c->req);
    sl_h1_finish(&c->resp);
    sl_arena_finish(&c->arena);
    sl_arena_finish(&c->resp_arena);
    sl_buf_finish(&c->head);
    sl_snapshot_unref(c->snap);
    sl_leaf_unref(c->leaf);
    /* The client's own token: not ours to keep in freed memory. */
    memset(c->auth_token, 0, sizeof(c->auth_token));
    sl_free(c);
}

/* One callback owed (`pending`) has come. */
static void on_owed_done(struct sl__conn *c)
{
    if (--c->pending == 0) {
        free_conn(c);
    }
}

static void on_client_closed(struct sl_stream *s, void *arg)
{
    (void)s;
    on_owed_done(arg);
}

static void on_timer_closed(uv_handle_t *h)
{
    on_owed_done(h->data);
}

/* Closes the connection now (CLOSED): the upstream, the timer and the client's stream; the
 * memory goes with the last callback owed. Idempotent. */
static void conn_close(struct sl__conn *c)
{
    if (c->state == SL__CONN_CLOSED) {
        return;
    }
    if (c->up != NULL) {
        sl_upstream_close(c->up);
        c->up = NULL;
    }
    set_state(c, SL__CONN_CLOSED);
    c->pending += 2;
    uv_close((uv_handle_t *)&c->timer, on_timer_closed);
    sl_stream_close(&c->client, on_client_closed);
}

/* Ends the connection after its last response: no more requests, the response flushes
 * (FLUSHING), our FIN follows and the connection lingers (LINGERING), then closes. The linger
 * starts once the last response has left our buffers: a slow reader still taking its tail
 * gets the idle timeout (started again as it drains, step_ending()), not a cut after
 * LINGER_MS. */
static void end_connection(struct sl__conn *c)
{
    if (c->up != NULL) {
        sl_upstream_close(c->up);
        c->up = NULL;
    }
    sl_stream_end(&c->client);
    sl_stream_want_read(&c->client, true);
    c->flush_out = c->client.bytes_out;
    set_state(c, sl_stream_is_flushed(&c->client) ? SL__CONN_LINGERING : SL__CONN_FLUSHING);
}

/*
 * Exchange lifecycle.
 */

static void reset_exchange(struct sl__conn *c)
{
    c->head_started = false;
    c->req_stage = SL__MSG_HEAD;
    c->req_pend = (struct pending){ false, 0, 0, 0, false };
    c->resp_stage = SL__MSG_HEAD;
    c->resp_pend = (struct pending){ false, 0, 0, 0, false };
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
static void end_exchange(struct sl__conn *c)
{
    sl_snapshot_unref(c->snap);
    c->snap = NULL;
    reset_exchange(c);
    sl_buf_finish(&c->head);
    sl_arena_finish(&c->arena);
    sl_arena_finish(&c->resp_arena);
    if (c->w->draining) {
        end_connection(c);
        return;
    }
    set_state(c, SL__CONN_REQUEST_HEAD);
    sl_stream_want_read(&c->client, true);
}

/*
 * Identity.
 */

/* Reads the Proxy-Authorization of `h` into the connection. Returns false when it is
 * present but malformed. */
static bool take_credentials(struct sl__conn *c, const struct sl_h1_head *h)
{
    const struct sl_h1_header *f = sl_h1_find(h, "proxy-authorization");

    c->has_auth = false;
    if (f == NULL) {
        return true;
    }
    if (sl_auth_parse_basic(f->value, c->auth_id, sizeof(c->auth_id), c->auth_token,
                            sizeof(c->auth_token))
        < 0) {
        return false;
    }
    c->has_auth = true;
    return true;
}

/* The client of `snap` (NULL: none) that the connection's credentials and address name, or
 * NULL. */
static const struct sl_client *identify(const struct sl__conn *c, const struct sl_snapshot *snap)
{
    if (snap == NULL) {
        return NULL;
    }
    return sl_policy_identify(snap, c->has_auth ? c->auth_id : NULL,
                              c->has_auth ? c->auth_token : NULL,
                              (const struct sockaddr *)&c->peer);
}

/* Names the client and environment in the lines of refusals that come before the decision
 * (a malformed request inside a tunnel still belongs to someone, SPEC §4.7). */
static void note_identity(struct sl__conn *c)
{
    const struct sl_client *client = identify(c, c->snap);

    if (client != NULL) {
        c->dec.client = sl_client_id(client);
        c->dec.environment = sl_env_name(sl_client_env(client));
        c->dec.environment_label = sl_env_label(sl_client_env(client));
    }
}

/* Decides the current request (`method` NULL: a CONNECT, host and port only). Returns true
 * when allowed; otherwise answers the refusal. */
static bool decide(struct sl__conn *c, const char *method, bool tls, bool keep)
{
    struct sl_request_view v = { &c->r.host, c->r.port, method, tls };
    const struct sl_client *client = identify(c, c->snap);

    sl_policy_decide(c->snap, client, &v, (int64_t)time(NULL), &c->dec);
    if (!c->dec.allow) {
        refuse_reason(c, c->dec.reason, NULL, keep);
        return false;
    }
    c->r.credential = c->dec.credential_header != NULL;
    return true;
}

/* The headers through which many servers (Google's, Microsoft's, frameworks' middleware) take
 * a request's method from its head instead of its request line. */
static const char *const override_headers[] = { "X-HTTP-Method-Override", "X-HTTP-Method",
                                                "X-Method-Override" };

/*
 * A request that names another method in a method-override header is decided for that method
 * too: a rule that allows POST only must not let a "POST" with `X-HTTP-Method-Override: DELETE`
 * through to a server that honours it. The value must be a method token (compared in upper
 * case, as servers read it); anything else is a bad request. Returns true when every method
 * named is allowed; otherwise answers the refusal, naming the header and its method.
 */
static bool overrides_allowed(struct sl__conn *c, const struct sl_h1_head *h, bool tls, bool keep)
{
    const struct sl_client *client = NULL;
    bool identified = false;

    for (size_t i = 0; i < h->n_headers; i++) {
        const struct sl_h1_header *f = &h->headers[i];
        const char *name = NULL;
        enum sl_policy_method_fault fault;
        char method[SL_POLICY_METHOD_LEN_MAX + 1];
        char detail[160];
        struct sl_request_view v;
        struct sl_decision d;

        for (size_t k = 0; k < SL_ARRAY_LEN(override_headers) && name == NULL; k++) {
            if (sl_h1_name_is(f->name, override_headers[k])) {
                name = override_headers[k];
            }
        }
        if (name == NULL) {
            continue;
        }
        fault = sl_policy_method_check((const char *)f->value.p, f->value.n);
        if (fault != SL_POLICY_METHOD_OK && fault != SL_POLICY_METHOD_LOWERCASE) {
            (void)snprintf(detail, sizeof(detail), "%s is not a method", name);
            refuse_reason(c, SL_REASON_BAD_REQUEST, detail, false);
            return false;
        }
        for (size_t k = 0; k < f->value.n; k++) {
            method[k] = (char)toupper((unsigned char)f->value.p[k]);
        }
        method[f->value.n] = '\0';
        if (!identified) {
            client = identify(c, c->snap);
            identified = true;
        }
        v = (struct sl_request_view){ &c->r.host, c->r.port, method, tls };
        sl_policy_decide(c->snap, client, &v, (int64_t)time(NULL), &d);
        if (!d.allow) {
            c->dec = d;
            c->r.override_method = sl_arena_strndup(&c->arena, method, f->value.n);
            (void)snprintf(detail, sizeof(detail), "%s names %s", name, method);
            refuse_reason(c, d.reason, detail, keep);
            return false;
        }
    }
    return true;
}

/*
 * Long-lived relays (a websocket after its 101, a passthrough tunnel) and their decision.
 */

/* Wall-clock milliseconds since the epoch, the clock of `expires_at`. */
static int64_t wall_ms(void)
{
    struct timespec ts;

    if (clock_gettime(CLOCK_REALTIME, &ts) == -1) {
        return (int64_t)time(NULL) * 1000;
    }
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The relay's deadline from now (SL__PHASE_RELAY), in ms: its idle deadline or the client's
 * expiry, whichever comes first. */
static uint64_t relay_deadline_ms(struct sl__conn *c)
{
    uint64_t now = uv_now(&c->w->loop);
    uint64_t ms = c->relay_idle_at > now ? c->relay_idle_at - now : 0;

    if (c->relay_expires_at_s != INT64_MAX) {
        int64_t left = c->relay_expires_at_s * 1000 - wall_ms() + EXPIRY_SLACK_MS;

        if (left < 0) {
            left = 0;
        }
        if ((uint64_t)left < ms) {
            ms = (uint64_t)left;
        }
    }
    return ms;
}

/* Decides a long-lived relay again, with the worker's newest snapshot at this second: its
 * client (removed, token changed), the client's expiry, and the rule. A websocket is its
 * upgrade request again; a passthrough tunnel is its CONNECT, which must still win a
 * passthrough rule: a tunnel now to be intercepted cannot stay uninspected, and is refused as
 * host-not-allowed (it may reconnect and be intercepted). When the decision no longer holds,
 * writes the relay's audit line with the refusal, the rule and the snapshot that refused it,
 * and closes the connection. Returns whether it holds; then notes the client's expiry. */
static bool relay_holds(struct sl__conn *c)
{
    struct sl_snapshot *snap = c->w->snapshot;
    const struct sl_client *client = identify(c, snap);
    struct sl_request_view v = { &c->r.host, c->r.port, c->passthrough ? NULL : c->r.method,
                                 c->passthrough || is_intercepted(c) };
    struct sl_decision d;
    enum sl_reason reason;

    sl_policy_decide(snap, client, &v, (int64_t)time(NULL), &d);
    reason = d.reason;
    if (d.allow && c->passthrough && !d.passthrough) {
        reason = SL_REASON_HOST_NOT_ALLOWED;
    }
    if (reason == SL_REASON_NONE) {
        if (!sl_client_expiry(client, &c->relay_expires_at_s)) {
            c->relay_expires_at_s = INT64_MAX;
        }
        return true;
    }
    sl_log(SL_LOG_INFO, c->id,
           "msg=\"relay closed: its decision no longer holds\" host=%s reason=%s "
           "policy_version=%lld",
           c->r.host.name, sl_reason_code(reason),
           (long long)(snap != NULL ? sl_snapshot_version(snap) : 0));
    if (snap != c->snap) {
        sl_snapshot_unref(c->snap);
        c->snap = snap != NULL ? sl_snapshot_ref(snap) : NULL;
    }
    c->dec = d;
    c->r.allow = false;
    c->r.reason = reason;
    audit(c);
    conn_close(c);
    return false;
}

/* Enters RELAY. The decision is taken again first (the snapshot may have changed, or the
 * client expired, since the request or the CONNECT). Returns false when it no longer holds: the
 * connection is then closed. */
static bool enter_relay(struct sl__conn *c)
{
    if (!relay_holds(c)) {
        return false;
    }
    c->relay_idle_at = uv_now(&c->w->loop) + secs_ms(cfg(c)->idle_timeout_s);
    set_state(c, SL__CONN_RELAY);
    sl_stream_want_read(&c->client, true);
    sl_stream_want_read(sl_upstream_stream(c->up), true);
    return true;
}

/* The relay's timer: the client's expiry, or the idle deadline (perhaps pushed back since). */
static void on_relay_timer(struct sl__conn *c)
{
    if (!relay_holds(c)) {
        return;
    }
    if (uv_now(&c->w->loop) >= c->relay_idle_at) {
        sl_log(SL_LOG_DEBUG, c->id, "msg=\"relay idle: closed\" host=%s", c->r.host.name);
        audit(c);
        conn_close(c);
        return;
    }
    rearm(c, SL__PHASE_RELAY);
}

void sl__conn_policy_changed(struct sl__worker *w)
{
    for (struct sl__conn *c = w->conns; c != NULL; c = c->next) {
        if (c->state == SL__CONN_CLOSED) {
            continue;
        }
        if (c->state == SL__CONN_RELAY) {
            if (relay_holds(c)) {
                /* The expiry may have moved. */
                rearm(c, SL__PHASE_RELAY);
            }
        } else if (c->passthrough
                   && (c->state == SL__CONN_TUNNEL_SNIFF || c->state == SL__CONN_DIALING)) {
            /* Not relaying yet: its own timeout runs; the decision is checked again when the
             * relay starts, and now. */
            (void)relay_holds(c);
        }
    }
}

/*
 * TLS interception.
 */

/* The name a leaf for the tunnel's host carries: the DNS name, or the bare IP. */
static void cert_name(const struct sl__conn *c, char *out)
{
    if (c->thost.kind == SL_HOST_IPV6) {
        memcpy(out, c->thost.name + 1, c->thost.len - 2);
        out[c->thost.len - 2] = '\0';
    } else {
        memcpy(out, c->thost.name, c->thost.len + 1);
    }
}

/* SPEC §4.3: the SNI, when present, must name the CONNECT host. */
static bool sni_names_tunnel(const struct sl__conn *c, const char *sni)
{
    struct sl_host h;

    return sl_host_normalize(sl_slice_str(sni), 0, &h, NULL) == 0 && h.len == c->thost.len
           && memcmp(h.name, c->thost.name, h.len) == 0;
}

static enum sl_tls_sni_verdict on_sni(struct sl_tls *t, const char *sni, void *arg)
{
    struct sl__conn *c = arg;
    char name[SL_HOST_NAME_MAX + 1];
    struct sl_leaf *leaf;

    if (sni != NULL && !sni_names_tunnel(c, sni)) {
        c->sni_mismatch = true;
        return SL_TLS_SNI_REFUSE;
    }
    cert_name(c, name);
    leaf = sl_leaf_cache_lookup(shared(c)->leaves, name);
    if (leaf == NULL) {
        return SL_TLS_SNI_RETRY;
    }
    if (sl_tls_set_certificate(t, sl_leaf_cert(leaf), sl_leaf_key(leaf)) < 0) {
        sl_leaf_unref(leaf);
        return SL_TLS_SNI_REFUSE;
    }
    sl_leaf_unref(leaf);
    return SL_TLS_SNI_OK;
}

static void mint_work(uv_work_t *req)
{
    struct sl__conn *c = req->data;
    char name[SL_HOST_NAME_MAX + 1];
    char err[256];

    cert_name(c, name);
    c->mint_rc = sl_leaf_cache_get(shared(c)->leaves, name, &c->leaf, err, sizeof(err));
    if (c->mint_rc < 0) {
        sl_log(SL_LOG_ERROR, c->id, "msg=\"cannot mint a certificate\" host=%s err=\"%s\"", name,
               err);
    }
}

static void mint_done(uv_work_t *req, int status)
{
    struct sl__conn *c = req->data;

    if (c->state == SL__CONN_CLOSED) {
        on_owed_done(c);
        return;
    }
    c->pending--;
    if (status < 0 || c->mint_rc < 0
        || sl_tls_set_certificate(sl_stream_tls(&c->client), sl_leaf_cert(c->leaf),
                                  sl_leaf_key(c->leaf))
                   < 0) {
        drop(c, SL_REASON_BAD_REQUEST);
        return;
    }
    sl_leaf_unref(c->leaf);
    c->leaf = NULL;
    set_state(c, SL__CONN_TLS_HANDSHAKE);
    conn_step(c);
}

/*
 * Heads we write.
 */

/* Writes the head sent upstream for the current request into c->head (again, for a retry). */
static int build_request_head(struct sl__conn *c, const struct sl_h1_head *h)
{
    struct sl_head_target t = { .scheme = c->r.scheme,
                                .has_host = c->r.has_host,
                                .host = c->r.host,
                                .port = c->r.port,
                                .target = c->r.target,
                                .websocket = c->r.websocket };

    return sl_head_build(&c->head, h, &t, c->dec.credential_header, c->dec.credential_value);
}

/*
 * The request head: CONNECT, absolute-form, or origin-form inside a tunnel.
 */

static void start_dialing(struct sl__conn *c);

static void on_connect_head(struct sl__conn *c, const struct sl_h1_head *h)
{
    static const char established[] = "HTTP/1.1 200 Connection established\r\n\r\n";
    const char *why = NULL;
    struct sl_head_refusal mismatch;
    struct sl_h1_event ev;

    c->r.target = NULL;
    c->r.scheme = "https";
    if (!take_credentials(c, h)) {
        refuse_reason(c, SL_REASON_NO_IDENTITY, "malformed Proxy-Authorization", false);
        return;
    }
    note_identity(c);
    if (sl_host_parse_authority(sl_slice_str(h->target), 0, &c->r.host, &c->r.port, &why) < 0
        || c->r.port == 0) {
        refuse_reason(c, SL_REASON_BAD_HOST, why != NULL ? why : "CONNECT needs host:port", false);
        return;
    }
    c->r.has_host = true;
    if (sl_head_connect_host(h, &c->r.host, c->r.port, &mismatch) < 0) {
        refuse_reason(c, mismatch.reason, mismatch.detail, false);
        return;
    }
    if (!decide(c, NULL, true, false)) {
        return;
    }
    /* The CONNECT head ends the proxy protocol: what follows belongs to the tunnel. */
    if (sl_h1_feed(&c->req, NULL, 0, &ev) < 0 || ev.type != SL_H1_EV_UPGRADE) {
        refuse_reason(c, SL_REASON_BAD_REQUEST, "a CONNECT request has no body", false);
        return;
    }
    if (sl_stream_write_all(&c->client, established, sizeof(established) - 1) < 0) {
        drop(c, SL_REASON_BAD_REQUEST);
        return;
    }
    c->r.status = 200;
    c->thost = c->r.host;
    c->tport = c->r.port;
    if (c->dec.passthrough) {
        /* The tunnel's one audit line is written when it ends or is refused, with its byte
         * counts; the CONNECT's snapshot and decision are kept for it. The method outlives
         * the arena that held the head. */
        c->passthrough = true;
        c->r.method = "CONNECT";
    } else {
        audit(c);
        sl_snapshot_unref(c->snap);
        c->snap = NULL;
    }
    sl_h1_finish(&c->req);
    sl_arena_reset(&c->arena);
    sl_h1_init(&c->req, SL_H1_REQUEST, NULL, &c->arena);
    set_state(c, SL__CONN_TUNNEL_SNIFF);
}

static void on_request_head(struct sl__conn *c)
{
    const struct sl_h1_head *h = sl_h1_head(&c->req);
    bool has_body = h->body != SL_H1_BODY_NONE;
    struct sl_head_ctx ctx = { in_tunnel(c), is_intercepted(c), &c->thost, c->tport };
    struct sl_head_target t;
    struct sl_head_refusal why;
    int rc;

    begin_request(c, h->method);
    c->r.client_http10 = h->version_minor == 0;
    c->r.client_keep_alive = h->keep_alive;
    c->r.is_head = strcmp(h->method, "HEAD") == 0;
    c->req_stage = SL__MSG_BODY;
    if (!in_tunnel(c) && strcmp(h->method, "CONNECT") == 0) {
        on_connect_head(c, h);
        return;
    }
    if (!in_tunnel(c)) {
        if (!take_credentials(c, h)) {
            refuse_reason(c, SL_REASON_NO_IDENTITY, "malformed Proxy-Authorization", false);
            return;
        }
        note_identity(c);
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
    if (rc < 0) {
        refuse_reason(c, why.reason, why.detail, false);
        return;
    }
    /* A refused request leaves the connection open when nothing of it is left unread, unless
     * it asked for an upgrade: the parser takes nothing after an upgrade request. */
    if (!decide(c, h->method, is_intercepted(c), !has_body && !h->upgrade)
        || !overrides_allowed(c, h, is_intercepted(c), !has_body && !h->upgrade)) {
        return;
    }
    if (build_request_head(c, h) < 0) {
        refuse_reason(c, SL_REASON_TOO_LARGE, "the request head is too large", false);
        return;
    }
    start_dialing(c);
}

/*
 * Upstream.
 */

static void on_upstream_event(struct sl_upstream *u, void *arg)
{
    struct sl__conn *c = arg;

    (void)u;
    conn_step(c);
}

static void start_dialing(struct sl__conn *c)
{
    bool tls = is_intercepted(c);
    int rc = sl_upstream_open(c->w, &c->r.host, c->r.port, tls, on_upstream_event, c, &c->up);

    if (rc < 0) {
        c->up = NULL;
        refuse_reason(c, SL_REASON_UPSTREAM_UNREACHABLE, sl_strerror(rc), false);
        return;
    }
    /* No more request bytes are parsed until the upstream is there. */
    set_state(c, SL__CONN_DIALING);
}

static void start_forwarding(struct sl__conn *c)
{
    struct sl_stream *us = sl_upstream_stream(c->up);

    sl_arena_reset(&c->resp_arena);
    sl_h1_init(&c->resp, SL_H1_RESPONSE, NULL, &c->resp_arena);
    if (c->r.is_head) {
        sl_h1_expect_no_body(&c->resp);
    }
    c->head_to = SL__HEAD_TO_UPSTREAM;
    if (c->stepping && c->corked_up == NULL) {
        /* An upstream taken during this step: its request head leaves with the step's end. */
        sl_stream_cork(us);
        c->corked_up = us;
    }
    sl_stream_want_read(us, true);
    set_state(c, SL__CONN_FORWARDING);
}

/*
 * Moving body bytes.
 */

/* Writes the pending body event of `src` into `dst`, framing it as a chunk when `chunked`.
 * Returns 1 when it is all written (and consumed from `src`), 0 when `dst` is full, -1 when
 * `dst` failed. */
static int write_pending(struct sl_stream *src, struct sl_stream *dst, struct pending *p,
                         bool chunked, uint64_t *count)
{
    struct sl_slice in = sl_stream_peek(src);

    while (p->len > 0) {
        int n;

        if (chunked && !p->framed) {
            char frame[SL_H1_CHUNK_HEADER_MAX];
            size_t fn = sl_h1_chunk_header(frame, sizeof(frame), p->len);
            int rc = sl_stream_write_all(dst, frame, fn);

            if (rc != 0) {
                return rc == SL_EAGAIN ? 0 : -1;
            }
            p->framed = true;
        }
        n = sl_stream_write(dst, in.p + p->off, p->len);
        if (n <= 0) {
            return n == 0 ? 0 : -1;
        }
        p->off += (size_t)n;
        p->len -= (size_t)n;
        *count += (uint64_t)n;
    }
    if (chunked && p->framed) {
        int rc = sl_stream_write_all(dst, SL_H1_CHUNK_END, SL_H1_CHUNK_END_LEN);

        if (rc != 0) {
            return rc == SL_EAGAIN ? 0 : -1;
        }
        p->framed = false;
    }
    sl_stream_consume(src, p->used);
    p->active = false;
    return 1;
}

/* Runs `p`'s parser over `src` until an event worth acting on. Returns the event type, or
 * SL_H1_EV_NONE when more input is needed, or a negative parse error. Body events are left
 * pending (not consumed); other bytes are consumed. */
static int pull(struct sl_h1 *parser, struct sl_stream *src, struct pending *p)
{
    for (;;) {
        struct sl_slice in = sl_stream_peek(src);
        struct sl_h1_event ev;
        int n = sl_h1_feed(parser, in.p, in.n, &ev);

        if (n < 0) {
            return n;
        }
        if (ev.type == SL_H1_EV_BODY) {
            *p = (struct pending){ true, (size_t)(ev.body.p - in.p), ev.body.n, (size_t)n, false };
            return SL_H1_EV_BODY;
        }
        sl_stream_consume(src, (size_t)n);
        if (ev.type != SL_H1_EV_NONE) {
            return (int)ev.type;
        }
        if (n == 0 || (size_t)n == in.n) {
            return SL_H1_EV_NONE;
        }
    }
}

/* Writes the pending head (request or response) to `dst` whole. Returns 1 once written, 0
 * when `dst` has no room yet, -1 when `dst` failed. */
static int write_head(struct sl__conn *c, struct sl_stream *dst)
{
    int rc = sl_stream_write_all(dst, c->head.p, c->head.len);

    if (rc == SL_EAGAIN) {
        return 0;
    }
    if (rc < 0) {
        return -1;
    }
    c->head_to = SL__HEAD_NONE;
    sl_buf_reset(&c->head);
    return 1;
}

/* Request side of FORWARDING. Returns 1 on progress, 0 when waiting, -1 once the exchange has
 * ended (refused, or the connection closed). */
static int forward_request(struct sl__conn *c)
{
    struct sl_stream *us = sl_upstream_stream(c->up);
    int ev;

    if (c->head_to == SL__HEAD_TO_UPSTREAM) {
        return write_head(c, us);
    }
    if (c->req_stage == SL__MSG_DONE) {
        return 0;
    }
    if (c->req_stage == SL__MSG_END_OWED) {
        int rc = req_chunked(c) ? sl_stream_write_all(us, SL_H1_CHUNK_LAST, SL_H1_CHUNK_LAST_LEN)
                                : 0;

        if (rc != 0) {
            return rc == SL_EAGAIN ? 0 : -1;
        }
        c->req_stage = SL__MSG_DONE;
        return 1;
    }
    if (c->req_pend.active) {
        int rc = write_pending(&c->client, us, &c->req_pend, req_chunked(c), &c->r.bytes_up);

        if (rc > 0 && !resp_head_sent(c)) {
            /* A long upload is progress: the upstream answers after it. */
            rearm(c, SL__PHASE_UPSTREAM);
        }
        return rc;
    }
    ev = pull(&c->req, &c->client, &c->req_pend);
    switch (ev) {
    case SL_H1_EV_BODY:
        return 1;
    case SL_H1_EV_END:
    case SL_H1_EV_UPGRADE:
        c->req_stage = SL__MSG_END_OWED;
        return 1;
    case SL_H1_EV_NONE:
        if (sl_stream_in_status(&c->client) != 0) {
            /* The client left in the middle of its request. */
            return -1;
        }
        return 0;
    case SL_H1_EV_HEAD:
        return -1;
    default:
        break;
    }
    /* A malformed body (bad chunk size, chunk data without its CRLF): SPEC §4.6 says 400 and
     * close. The head already went upstream, so that connection goes too (refuse() closes
     * it): its request never completes and nothing after it is read from it. */
    if (!resp_head_sent(c)) {
        refuse(c, ev == SL_ETOOBIG ? SL_REASON_TOO_LARGE : SL_REASON_BAD_REQUEST, 400,
               sl_h1_error(&c->req), false);
    }
    return -1;
}

/* The response head arrived: relay it (interim ones too), or refuse a malformed situation.
 * Returns 1 on progress, 0 when the client has no room yet, -1 once the exchange has ended. */
static int on_response_head(struct sl__conn *c)
{
    const struct sl_h1_head *h = sl_h1_head(&c->resp);
    struct sl_head_resp_ctx ctx = { .is_head = c->r.is_head,
                                    .websocket = c->r.websocket,
                                    .client_http10 = c->r.client_http10,
                                    .client_keep_alive = c->r.client_keep_alive,
                                    /* A final answer before the whole request went up
                                     * ends the connection (finish_exchange()): say so. */
                                    .close_after =
                                            c->close_after || c->w->draining
                                            || (h->status >= 200 && c->req_stage != SL__MSG_DONE) };
    struct sl_head_resp_plan plan;
    int rc = sl_head_build_response(&c->head, h, &ctx, &plan);

    switch (plan.verdict) {
    case SL_HEAD_RESP_REFUSE:
        refuse(c, SL_REASON_BAD_REQUEST, 502, "the upstream switched protocols unasked", false);
        return -1;
    case SL_HEAD_RESP_SKIP:
        c->close_after = plan.close_after;
        return 1;
    case SL_HEAD_RESP_RELAY:
        break;
    }
    c->close_after = plan.close_after;
    if (rc < 0) {
        refuse(c, SL_REASON_TOO_LARGE, 502, "the upstream's response head is too large", false);
        return -1;
    }
    c->resp_framing = plan.chunked           ? SL__FRAMING_CHUNKED
                      : plan.close_delimited ? SL__FRAMING_CLOSE
                                             : SL__FRAMING_AS_IS;
    c->head_to = SL__HEAD_TO_CLIENT;
    if (plan.final) {
        c->r.status = h->status;
        c->resp_stage = SL__MSG_BODY;
    }
    return 1;
}

/* Response side of FORWARDING. Returns 1 on progress, 0 when waiting, -1 once the exchange has
 * ended. */
static int forward_response(struct sl__conn *c)
{
    struct sl_stream *us = sl_upstream_stream(c->up);
    bool chunked = c->resp_framing == SL__FRAMING_CHUNKED;
    int ev;

    if (c->head_to == SL__HEAD_TO_CLIENT) {
        int rc = write_head(c, &c->client);

        if (rc > 0) {
            /* The next timeout is for a stalled body, not for the head. */
            rearm(c, SL__PHASE_IDLE);
        }
        return rc;
    }
    if (c->head_to != SL__HEAD_NONE || c->resp_stage == SL__MSG_DONE) {
        return 0;
    }
    if (c->resp_stage == SL__MSG_END_OWED) {
        int rc = chunked ? sl_stream_write_all(&c->client, SL_H1_CHUNK_LAST, SL_H1_CHUNK_LAST_LEN)
                         : 0;

        if (rc != 0) {
            return rc == SL_EAGAIN ? 0 : -1;
        }
        c->resp_stage = SL__MSG_DONE;
        return 1;
    }
    if (c->resp_pend.active) {
        int rc = write_pending(us, &c->client, &c->resp_pend, chunked, &c->r.bytes_down);

        if (rc > 0) {
            rearm(c, SL__PHASE_IDLE);
        }
        return rc;
    }
    ev = pull(&c->resp, us, &c->resp_pend);
    if (ev == SL_H1_EV_NONE && sl_stream_in_status(us) != 0) {
        struct sl_h1_event end;

        /* The upstream closed: the end of a close-delimited body, or a cut response. */
        if (sl_h1_eof(&c->resp, &end) < 0 || end.type != SL_H1_EV_END) {
            ev = SL_EINVAL;
        } else {
            ev = SL_H1_EV_END;
        }
    }
    switch (ev) {
    case SL_H1_EV_NONE:
        return 0;
    case SL_H1_EV_HEAD:
        return on_response_head(c);
    case SL_H1_EV_BODY:
        return 1;
    case SL_H1_EV_END:
        if (!resp_head_sent(c)) {
            /* An interim response ended; the final one follows on the same parser. An
             * upstream that keeps sending them instead is refused: each costs a head. */
            if (++c->interims > INTERIMS_MAX) {
                refuse(c, SL_REASON_BAD_REQUEST, 502,
                       "the upstream sent more than " INTERIMS_MAX_TEXT " interim (1xx) responses",
                       false);
                return -1;
            }
            return 1;
        }
        c->resp_stage = SL__MSG_END_OWED;
        return 1;
    case SL_H1_EV_UPGRADE:
        c->resp_stage = SL__MSG_DONE;
        return enter_relay(c) ? 1 : -1;
    default:
        break;
    }
    if (!resp_head_sent(c) && c->r.bytes_down == 0) {
        const char *why = ev == SL_EINVAL ? sl_h1_error(&c->resp) : "";
        char detail[160];

        (void)snprintf(detail, sizeof(detail), "the upstream's response was malformed: %s", why);
        refuse(c, ev == SL_ETOOBIG ? SL_REASON_TOO_LARGE : SL_REASON_BAD_REQUEST, 502, detail,
               false);
        return -1;
    }
    /* Mid-body: the client can only learn it from the connection closing. */
    sl_log(SL_LOG_WARN, c->id,
           "msg=\"upstream response malformed after its head was relayed; connection aborted\" "
           "host=%s err=\"%s\"",
           c->r.host.name, sl_h1_error(&c->resp));
    c->r.status = c->r.status != 0 ? c->r.status : 502;
    audit(c);
    conn_close(c);
    return -1;
}

/* Both sides of an exchange are complete: log, pool the upstream, go on or close. */
static void finish_exchange(struct sl__conn *c)
{
    const struct sl_h1_head *h = sl_h1_head(&c->resp);
    bool reusable = h->keep_alive && h->body != SL_H1_BODY_CLOSE && c->req_stage == SL__MSG_DONE;

    audit(c);
    sl_upstream_release(c->up, reusable);
    c->up = NULL;
    if (c->close_after || !c->r.client_keep_alive || c->resp_framing == SL__FRAMING_CLOSE
        || sl_stream_peer_closed(&c->client)) {
        end_connection(c);
        return;
    }
    end_exchange(c);
}

/* Before any response byte, a pooled connection that the upstream had closed meanwhile gets
 * the request again on a fresh connection (once). */
static bool retry_stale(struct sl__conn *c)
{
    struct sl_stream *us = sl_upstream_stream(c->up);

    if (c->retried || !sl_upstream_is_reused(c->up) || resp_head_sent(c) || c->r.bytes_up > 0
        || c->req_pend.active || (sl_stream_in_status(us) == 0 && sl_stream_error(us) == 0)
        || sl_stream_peek(us).n > 0) {
        return false;
    }
    c->retried = true;
    sl_upstream_close(c->up);
    c->up = NULL;
    sl_h1_finish(&c->resp);
    if (build_request_head(c, sl_h1_head(&c->req)) < 0) {
        return false;
    }
    start_dialing(c);
    return true;
}

/* The exchange cannot go on (a side failed, the client left): log what happened, close. */
static void abort_exchange(struct sl__conn *c)
{
    if (c->state == SL__CONN_FORWARDING) {
        audit(c);
        conn_close(c);
    }
}

static int step_forwarding(struct sl__conn *c)
{
    int a;
    int b;

    if (retry_stale(c)) {
        return 1;
    }
    /* A client whose connection failed gets no more of its response, and the upstream is not
     * left streaming into a buffer nobody reads. A clean end of its input after a complete
     * request (FIN in the clear, close_notify under TLS) is a half-close: the response still
     * goes out, then the connection closes (finish_exchange). A client that went away entirely
     * fails the next write with a reset and ends here. */
    if (sl_stream_error(&c->client) != 0) {
        abort_exchange(c);
        return -1;
    }
    a = forward_request(c);
    b = a < 0 ? -1 : forward_response(c);
    if (a < 0 || b < 0) {
        abort_exchange(c);
        return -1;
    }
    if (c->state != SL__CONN_FORWARDING) {
        return 1;
    }
    if (c->resp_stage == SL__MSG_DONE && c->head_to == SL__HEAD_NONE) {
        if (c->req_stage != SL__MSG_DONE) {
            /* The response came before the whole request: the rest of the request can
             * neither be skipped safely nor reused; finish this exchange and close. */
            c->close_after = true;
        }
        finish_exchange(c);
        return 1;
    }
    return a > 0 || b > 0;
}

/* After a 101: bytes both ways, unparsed. */
static int step_relay(struct sl__conn *c)
{
    struct sl_stream *us = sl_upstream_stream(c->up);
    struct sl_stream *ends[2][2] = { { &c->client, us }, { us, &c->client } };
    bool *eofs[2] = { &c->relay_up_eof, &c->relay_down_eof };
    uint64_t *counts[2] = { &c->r.bytes_up, &c->r.bytes_down };
    int progress = 0;

    for (int i = 0; i < 2; i++) {
        struct sl_stream *from = ends[i][0];
        struct sl_stream *to = ends[i][1];
        struct sl_slice in = sl_stream_peek(from);

        if (in.n > 0) {
            int n = sl_stream_write(to, in.p, in.n);

            if (n < 0) {
                audit(c);
                conn_close(c);
                return -1;
            }
            if (n > 0) {
                sl_stream_consume(from, (size_t)n);
                *counts[i] += (uint64_t)n;
                progress = 1;
            }
        } else if (!*eofs[i] && sl_stream_in_status(from) != 0) {
            *eofs[i] = true;
            sl_stream_end(to);
            progress = 1;
        }
    }
    if ((c->relay_up_eof && c->relay_down_eof) || sl_stream_error(&c->client) != 0
        || sl_stream_error(us) != 0) {
        audit(c);
        conn_close(c);
        return -1;
    }
    if (progress) {
        /* The timer is not re-armed per byte: it finds the later deadline when it fires. */
        c->relay_idle_at = uv_now(&c->w->loop) + secs_ms(cfg(c)->idle_timeout_s);
    }
    return progress;
}

/*
 * The stepper.
 */

static int step_request_head(struct sl__conn *c)
{
    struct sl_slice in = sl_stream_peek(&c->client);
    struct sl_h1_event ev;
    int n;

    if (in.n == 0) {
        if (sl_stream_in_status(&c->client) != 0) {
            /* The client went away between requests, or mid-head. */
            conn_close(c);
            return -1;
        }
        return 0;
    }
    if (!c->head_started) {
        c->head_started = true;
        /* Between requests the idle timer ran; a head due since the state's entry has its
         * header timer running already (state_table[]). */
        if (!c->header_armed) {
            rearm(c, SL__PHASE_HEADER);
        }
        c->header_armed = false;
    }
    n = sl_h1_feed(&c->req, in.p, in.n, &ev);
    if (n < 0) {
        begin_request(c, NULL);
        if (n == SL_ETOOBIG) {
            refuse(c, SL_REASON_TOO_LARGE, 431, sl_h1_error(&c->req), false);
        } else if (sl_h1_error_in_target(&c->req)) {
            /* Bytes the URL grammar refuses (non-ASCII, controls) are a host problem for a
             * proxy request: its target is where the host is (SPEC §4.3). */
            refuse_reason(c, SL_REASON_BAD_HOST, sl_h1_error(&c->req), false);
        } else {
            refuse_reason(c, SL_REASON_BAD_REQUEST, sl_h1_error(&c->req), false);
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
 * Passthrough tunnels.
 */

/* What peek_hello()'s SNI callback saw. */
struct hello_peek {
    struct sl__conn *c;
    /* The ClientHello reached the callback. */
    bool seen;
};

/* The SNI callback of peek_hello(): records the verdict and stops the handshake there. */
static enum sl_tls_sni_verdict on_passthrough_sni(struct sl_tls *t, const char *sni, void *arg)
{
    struct hello_peek *peek = arg;

    (void)t;
    peek->seen = true;
    peek->c->sni_mismatch = sni != NULL && !sni_names_tunnel(peek->c, sni);
    return SL_TLS_SNI_RETRY;
}

/* Reads the ClientHello at the start of `in` (borrowed, not consumed) with a throwaway server
 * engine: OpenSSL parses the hostile bytes, not a parser of ours, and the SNI callback stops
 * the handshake before any answer is made; the engine is destroyed without sending anything.
 * Returns 1 when the hello was complete (c->sni_mismatch then says whether its SNI names
 * another host than the CONNECT), 0 when more bytes are needed, or a negative code when the
 * bytes are no ClientHello OpenSSL accepts, or memory ran out. */
static int peek_hello(struct sl__conn *c, struct sl_slice in)
{
    struct hello_peek peek = { c, false };
    struct sl_tls *t = NULL;
    int rc;

    SL_TRY(sl_tls_create_server(shared(c)->server_ctx, 0, &t));
    sl_tls_set_sni_fn(t, on_passthrough_sni, &peek);
    /* The stream's buffer (SL_STREAM_RAW_BYTES) is smaller than the engine's input ring. */
    rc = sl_tls_feed(t, in.p, in.n);
    if (rc >= 0 && (size_t)rc != in.n) {
        rc = SL_ETOOBIG;
    }
    if (rc >= 0) {
        rc = sl_tls_handshake(t);
    }
    sl_tls_destroy(t);
    if (peek.seen) {
        return 1;
    }
    if (rc == SL_TLS_HS_WANT_IO) {
        return 0;
    }
    return rc < 0 ? rc : SL_EINVAL;
}

/* Dials the CONNECT host for a passthrough tunnel, on a fresh connection: a pooled one has
 * carried plain HTTP, and a TLS session must start on a clean stream. Taking from the pool
 * empties it, so the loop ends. The address rules are those of every dial (proxy/upstream.h). */
static void start_passthrough_dial(struct sl__conn *c)
{
    int rc;

    for (;;) {
        rc = sl_upstream_open(c->w, &c->thost, c->tport, false, on_upstream_event, c, &c->up);
        if (rc < 0 || !sl_upstream_is_reused(c->up)) {
            break;
        }
        sl_upstream_close(c->up);
        c->up = NULL;
    }
    if (rc < 0) {
        c->up = NULL;
        drop(c, SL_REASON_UPSTREAM_UNREACHABLE);
        return;
    }
    set_state(c, SL__CONN_DIALING);
}

/* A passthrough tunnel's first bytes: a ClientHello whose SNI, when present, names the CONNECT
 * host (an absent SNI is allowed: the CONNECT host is what was decided, and what is dialled).
 * Nothing is consumed: the hello goes upstream byte for byte. A refusal cannot be answered in
 * HTTP any more (the client speaks TLS): it is audited and the tunnel closed. */
static int step_passthrough_sniff(struct sl__conn *c)
{
    struct sl_slice in = sl_stream_peek(&c->client);
    int rc = 0;

    if (in.n == 0) {
        if (sl_stream_in_status(&c->client) != 0) {
            /* The client left without a byte: the tunnel's line, then close. */
            audit(c);
            conn_close(c);
            return -1;
        }
        return 0;
    }
    switch (sl_tls_sniff(in.p, in.n)) {
    case SL_TLS_SNIFF_NEED_MORE:
        rc = 0;
        break;
    case SL_TLS_SNIFF_TLS:
        rc = peek_hello(c, in);
        break;
    case SL_TLS_SNIFF_HTTP:
    case SL_TLS_SNIFF_OTHER:
        /* Plain HTTP included, on any port: passthrough is for TLS. */
        drop(c, SL_REASON_NOT_TLS);
        return -1;
    }
    if (rc == 0) {
        if (in.n >= SL_STREAM_RAW_BYTES) {
            drop(c, SL_REASON_TOO_LARGE);
            return -1;
        }
        if (sl_stream_peer_closed(&c->client)) {
            drop(c, SL_REASON_NOT_TLS);
            return -1;
        }
        return 0;
    }
    if (rc < 0) {
        sl_log(SL_LOG_DEBUG, c->id, "msg=\"passthrough: not a ClientHello\" err=%s",
               sl_strerror(rc));
        drop(c, rc == SL_ENOMEM ? SL_REASON_BAD_REQUEST : SL_REASON_NOT_TLS);
        return -1;
    }
    if (c->sni_mismatch) {
        drop(c, SL_REASON_HOST_MISMATCH);
        return -1;
    }
    start_passthrough_dial(c);
    return c->state == SL__CONN_CLOSED ? -1 : 1;
}

static int step_tunnel_sniff(struct sl__conn *c)
{
    struct sl_slice in = sl_stream_peek(&c->client);
    struct sl_tls *t = NULL;

    if (c->passthrough) {
        return step_passthrough_sniff(c);
    }
    if (in.n == 0) {
        if (sl_stream_in_status(&c->client) != 0) {
            conn_close(c);
            return -1;
        }
        return 0;
    }
    begin_request(c, "CONNECT");
    c->r.scheme = c->tport == 80 ? "http" : "https";
    c->r.host = c->thost;
    c->r.port = c->tport;
    c->r.has_host = true;
    switch (sl_tls_sniff(in.p, in.n)) {
    case SL_TLS_SNIFF_NEED_MORE:
        return 0;
    case SL_TLS_SNIFF_TLS:
        if (sl_tls_create_server(shared(c)->server_ctx, TLS_OUT_CAP, &t) < 0) {
            drop(c, SL_REASON_BAD_REQUEST);
            return -1;
        }
        sl_tls_set_sni_fn(t, on_sni, c);
        if (sl_stream_set_tls(&c->client, t) < 0) {
            drop(c, SL_REASON_BAD_REQUEST);
            return -1;
        }
        set_state(c, SL__CONN_TLS_HANDSHAKE);
        return 1;
    case SL_TLS_SNIFF_HTTP:
        if (c->tport == 80) {
            sl_snapshot_unref(c->snap);
            c->snap = NULL;
            set_state(c, SL__CONN_REQUEST_HEAD);
            return 1;
        }
        break;
    case SL_TLS_SNIFF_OTHER:
        break;
    }
    drop(c, SL_REASON_NOT_TLS);
    return -1;
}

static int step_tls_handshake(struct sl__conn *c)
{
    int rc = sl_stream_handshake(&c->client);

    switch (rc) {
    case SL_TLS_HS_DONE:
        sl__count(&c->w->counters.tls_handshakes, 1);
        sl_snapshot_unref(c->snap);
        c->snap = NULL;
        set_state(c, SL__CONN_REQUEST_HEAD);
        return 1;
    case SL_TLS_HS_WANT_IO:
        if (sl_stream_in_status(&c->client) != 0 || sl_stream_error(&c->client) != 0) {
            break;
        }
        return 0;
    case SL_TLS_HS_WANT_CERT:
        c->work.data = c;
        if (uv_queue_work(&c->w->loop, &c->work, mint_work, mint_done) < 0) {
            break;
        }
        c->pending++;
        set_state(c, SL__CONN_MINTING);
        return 0;
    default:
        break;
    }
    sl__count(&c->w->counters.tls_handshake_failures, 1);
    if (c->sni_mismatch) {
        drop(c, SL_REASON_HOST_MISMATCH);
    } else {
        /* Not a policy decision: a client that gave up, or spoke TLS we refuse (h2 only). */
        sl_log(SL_LOG_DEBUG, c->id, "msg=\"client TLS handshake failed\" err=\"%s\"",
               sl_stream_tls(&c->client) != NULL ? sl_tls_error_text(sl_stream_tls(&c->client))
                                                 : "");
        sl_snapshot_unref(c->snap);
        c->snap = NULL;
        conn_close(c);
    }
    return -1;
}

static int step_dialing(struct sl__conn *c)
{
    const char *detail = NULL;
    enum sl_reason reason;

    switch (sl_upstream_state(c->up)) {
    case SL_UPSTREAM_DIALING:
        return 0;
    case SL_UPSTREAM_READY:
        if (c->passthrough) {
            return enter_relay(c) ? 1 : -1;
        }
        start_forwarding(c);
        return 1;
    case SL_UPSTREAM_FAILED:
        break;
    }
    reason = sl_upstream_failure(c->up, &detail);
    if (reason == SL_REASON_UPSTREAM_TLS || reason == SL_REASON_PRIVATE_ADDRESS || c->passthrough) {
        sl_log(SL_LOG_INFO, c->id, "msg=\"upstream refused\" host=%s reason=%s detail=\"%s\"",
               c->r.host.name, sl_reason_code(reason), detail);
    }
    if (c->passthrough) {
        /* The client is in its TLS handshake: no HTTP answer is possible. */
        drop(c, reason);
        return -1;
    }
    refuse_reason(c, reason, detail, sl_h1_head(&c->req)->body == SL_H1_BODY_NONE);
    return -1;
}

/* FLUSHING and LINGERING: input is discarded; the connection closes when the client is gone
 * and everything has left, or on the timer. */
static int step_ending(struct sl__conn *c)
{
    struct sl_slice in = sl_stream_peek(&c->client);

    if (c->state == SL__CONN_FLUSHING) {
        if (sl_stream_is_flushed(&c->client)) {
            set_state(c, SL__CONN_LINGERING);
        } else if (c->client.bytes_out != c->flush_out) {
            /* The client takes the tail of its response: progress (bytes it sends do not
             * count). */
            c->flush_out = c->client.bytes_out;
            rearm(c, SL__PHASE_IDLE);
        }
    }

    if (in.n > 0) {
        sl_stream_consume(&c->client, in.n);
        return 1;
    }
    if (sl_stream_error(&c->client) != 0
        || (sl_stream_in_status(&c->client) != 0 && sl_stream_is_flushed(&c->client))) {
        conn_close(c);
        return -1;
    }
    return 0;
}

static void run_states(struct sl__conn *c)
{
    for (int rounds = 0; rounds < 64 && c->state != SL__CONN_CLOSED; rounds++) {
        int rc = 0;

        switch (c->state) {
        case SL__CONN_NEW:
        case SL__CONN_CLOSED:
            rc = 0;
            break;
        case SL__CONN_REQUEST_HEAD:
            rc = step_request_head(c);
            break;
        case SL__CONN_TUNNEL_SNIFF:
            rc = step_tunnel_sniff(c);
            break;
        case SL__CONN_TLS_HANDSHAKE:
            rc = step_tls_handshake(c);
            break;
        case SL__CONN_MINTING:
            rc = 0;
            break;
        case SL__CONN_DIALING:
            rc = step_dialing(c);
            break;
        case SL__CONN_FORWARDING:
            rc = step_forwarding(c);
            break;
        case SL__CONN_RELAY:
            rc = step_relay(c);
            break;
        case SL__CONN_FLUSHING:
        case SL__CONN_LINGERING:
            rc = step_ending(c);
            break;
        }
        if (rc <= 0) {
            break;
        }
    }
    /* Reading follows the state (state_table[].reads). */
    if (c->state != SL__CONN_CLOSED) {
        sl_stream_want_read(&c->client, state_table[c->state].reads);
        if (c->up != NULL && c->state == SL__CONN_FORWARDING) {
            sl_stream_want_read(sl_upstream_stream(c->up),
                                !c->resp_pend.active && c->resp_stage != SL__MSG_DONE);
        }
    }
}

static void on_resume(uv_idle_t *h);

/* Runs the state machine with both streams corked, so that everything one step writes to a
 * peer (a head and its body, several TLS records) leaves in one write; when the sockets took
 * it all at once, the step runs again, as it would on the output-drained event that then never
 * comes. At most STEP_PASSES_MAX passes; work left after them resumes on the loop's next turn
 * (on_resume()), after the worker's other connections. */
static void conn_step(struct sl__conn *c)
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
            conn_step(c);
        }
    }
    if (w->resume_list == NULL) {
        (void)uv_idle_stop(&w->resume);
    }
}

/* Counts the timeout that fired, by what the connection was waiting for (sluice_timeouts_total).
 * An ending connection's timer (FLUSHING, LINGERING) counts as no timeout. */
static void count_timeout(struct sl__conn *c)
{
    enum sl__timeout phase = SL__TIMEOUT_IDLE;

    switch (c->state) {
    case SL__CONN_REQUEST_HEAD:
        /* Waiting for a first request, or a head that started: the header timeout; between
         * requests (after one, or after a tunnel's handshake): the idle timeout. */
        if (c->head_started || (!in_tunnel(c) && c->r.method == NULL)) {
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
        if (!resp_head_sent(c)) {
            phase = SL__TIMEOUT_UPSTREAM;
        }
        break;
    case SL__CONN_RELAY:
        break;
    case SL__CONN_NEW:
    case SL__CONN_FLUSHING:
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
        if (c->head_started) {
            begin_request(c, NULL);
            refuse(c, SL_REASON_BAD_REQUEST, 408, "the request head did not arrive in time", false);
            return;
        }
        conn_close(c);
        return;
    case SL__CONN_DIALING:
    case SL__CONN_FORWARDING:
        if (c->passthrough) {
            drop(c, SL_REASON_UPSTREAM_TIMEOUT);
            return;
        }
        if (!resp_head_sent(c)) {
            refuse_reason(c, SL_REASON_UPSTREAM_TIMEOUT, "the upstream did not answer in time",
                          false);
            return;
        }
        audit(c);
        conn_close(c);
        return;
    case SL__CONN_RELAY:
        on_relay_timer(c);
        return;
    case SL__CONN_TUNNEL_SNIFF:
        if (c->passthrough) {
            /* No complete ClientHello in time: the tunnel's line, then close. */
            drop(c, SL_REASON_NOT_TLS);
            return;
        }
        conn_close(c);
        return;
    case SL__CONN_TLS_HANDSHAKE:
    case SL__CONN_MINTING:
    case SL__CONN_FLUSHING:
    case SL__CONN_LINGERING:
        conn_close(c);
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
    conn_step(arg);
}

/*
 * Accepting.
 */

static void refuse_overloaded(struct sl__conn *c)
{
    begin_request(c, NULL);
    refuse_reason(c, SL_REASON_OVERLOADED, "the proxy has too many connections", false);
}

void sl__conn_accept(struct sl__worker *w, uv_stream_t *listener)
{
    struct sl__shared *sh = w->shared;
    struct sl__conn *c = sl_calloc(1, sizeof(*c));
    int namelen = (int)sizeof(c->peer);
    unsigned open;
    int rc;

    if (c == NULL) {
        return;
    }
    c->w = w;
    c->id = next_conn_id();
    if (sl_stream_init(&w->loop, &c->client, on_client_event, c) < 0) {
        sl_free(c);
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
    open = atomic_fetch_add(&sh->connections, 1) + 1;
    sl__count(&w->counters.connections_accepted, 1);
    sl__count(&w->counters.connections_open, 1);
    rc = uv_accept(listener, (uv_stream_t *)sl_stream_tcp(&c->client));
    if (rc == 0) {
        rc = uv_tcp_getpeername(sl_stream_tcp(&c->client), (struct sockaddr *)&c->peer, &namelen);
    }
    if (rc == 0) {
        rc = sl_stream_start(&c->client);
    }
    if (rc < 0) {
        conn_close(c);
        return;
    }
    if (open > sh->cfg->max_connections) {
        sl__count(&w->counters.connections_refused, 1);
        refuse_overloaded(c);
        return;
    }
    /* From NEW: the header timer starts now (state_table[]). */
    set_state(c, SL__CONN_REQUEST_HEAD);
    sl_stream_want_read(&c->client, true);
}

void sl__conn_drain_all(struct sl__worker *w)
{
    for (struct sl__conn *c = w->conns; c != NULL; c = c->next) {
        if (c->state == SL__CONN_REQUEST_HEAD && !c->head_started) {
            conn_close(c);
        } else {
            c->close_after = true;
        }
    }
}

void sl__conn_close_all(struct sl__worker *w)
{
    for (struct sl__conn *c = w->conns; c != NULL; c = c->next) {
        conn_close(c);
    }
}
