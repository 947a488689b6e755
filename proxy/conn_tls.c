/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proxy/conn_tls.c - a tunnel's first bytes: TLS interception (the SNI checked against the
 * CONNECT, a leaf from the cache or minted on the thread pool, the client's handshake), plain
 * HTTP in a tunnel to port 80, and a passthrough tunnel's ClientHello read without answering
 * it; and a transparent connection's first bytes, whose ClientHello's SNI opens the tunnel a
 * CONNECT would. A room of proxy/conn_int.h.
 */
#include <netinet/in.h>
#include <string.h>

#include <openssl/ssl.h>

#include "base/log.h"
#include "base/mem.h"
#include "certs/cache.h"
#include "policy/host.h"
#include "policy/snapshot.h"
#include "proxy/conn_int.h"
#include "proxy/stream.h"
#include "proxy/tls.h"

/* Ciphertext a client engine may hold before writes wait: one record. The stream moves it
 * into its own output block at once, so a larger engine ring only costs memory (its ring is
 * allocated at this size plus a record, per connection). */
#define TLS_OUT_CAP ((size_t)SL_TLS_OUT_CAP_DEFAULT)
/* At most one info line per worker in this time about clients refusing the proxy's
 * certificate (certificate_refused()). */
#define CERT_REFUSED_LOG_MS 10000u

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

/* docs/reference/proxy.md §4.3: the SNI, when present, must name the CONNECT host. */
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
    leaf = sl_leaf_cache_lookup(c->w->shared->leaves, name);
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
    c->mint_rc = sl_leaf_cache_get(c->w->shared->leaves, name, &c->leaf, err, sizeof(err));
    if (c->mint_rc < 0) {
        sl_log(SL_LOG_ERROR, c->id, "msg=\"cannot mint a certificate\" host=%s err=\"%s\"", name,
               err);
    }
}

static void mint_done(uv_work_t *req, int status)
{
    struct sl__conn *c = req->data;
    int rc;

    if (c->state == SL__CONN_CLOSED) {
        sl__conn_owed_done(c);
        return;
    }
    c->pending--;
    rc = status < 0 ? status : c->mint_rc;
    if (rc == 0) {
        rc = sl_tls_set_certificate(sl_stream_tls(&c->client), sl_leaf_cert(c->leaf),
                                    sl_leaf_key(c->leaf));
    }
    if (rc < 0) {
        sl__conn_drop(c, sl__failure_reason(rc, SL_REASON_BAD_REQUEST));
        return;
    }
    sl_leaf_unref(c->leaf);
    c->leaf = NULL;
    sl__conn_set_state(c, SL__CONN_TLS_HANDSHAKE);
    sl__conn_step(c);
}

/*
 * Reading a ClientHello without answering it: passthrough tunnels and transparent connections.
 */

/* What peek_hello()'s SNI callback saw. */
struct hello_peek {
    /* The ClientHello reached the callback. */
    bool seen;
    /* It had an SNI: `sni` (NUL-terminated), unless it was longer than any host (`too_long`). */
    bool has_sni;
    bool too_long;
    char sni[SL_HOST_NAME_MAX + 1];
    /* The engine refused the hello for its SNI before the callback (one holding a byte outside
     * printable ASCII: no host has it). */
    bool sni_refused;
};

/* The SNI callback of peek_hello(): records the SNI and stops the handshake there. */
static enum sl_tls_sni_verdict on_peek_sni(struct sl_tls *t, const char *sni, void *arg)
{
    struct hello_peek *peek = arg;

    (void)t;
    peek->seen = true;
    if (sni != NULL) {
        size_t n = strlen(sni);

        peek->has_sni = true;
        peek->too_long = n > SL_HOST_NAME_MAX;
        if (!peek->too_long) {
            memcpy(peek->sni, sni, n + 1);
        }
    }
    return SL_TLS_SNI_RETRY;
}

/* Reads the ClientHello at the start of `in` (borrowed, not consumed) with a throwaway server
 * engine: OpenSSL parses the hostile bytes, not a parser of ours, and the SNI callback stops
 * the handshake before any answer is made; the engine is destroyed without sending anything.
 * Returns 1 when the hello was complete (`peek` then says what SNI it had), 0 when more bytes
 * are needed, or a negative code when the bytes are no ClientHello OpenSSL accepts, or memory
 * ran out. */
static int peek_hello(struct sl__conn *c, struct sl_slice in, struct hello_peek *peek)
{
    struct sl_tls *t = NULL;
    int rc;

    memset(peek, 0, sizeof(*peek));
    SL_TRY(sl_tls_create_server(c->w->shared->server_ctx, 0, &t));
    sl_tls_set_sni_fn(t, on_peek_sni, peek);
    /* The stream's buffer (SL_STREAM_RAW_BYTES) is smaller than the engine's input ring. */
    rc = sl_tls_feed(t, in.p, in.n);
    if (rc >= 0 && (size_t)rc != in.n) {
        rc = SL_ETOOBIG;
    }
    if (rc >= 0) {
        rc = sl_tls_handshake(t);
    }
    peek->sni_refused = sl_tls_sni_refused(t);
    sl_tls_destroy(t);
    if (peek->seen) {
        return 1;
    }
    if (rc == SL_TLS_HS_WANT_IO) {
        return 0;
    }
    return rc < 0 ? rc : SL_EINVAL;
}

/*
 * A passthrough tunnel's second ClientHello (RFC 8446 §4.1.2, §4.1.4).
 *
 * A server that answers the first ClientHello with a HelloRetryRequest reads a second one, which
 * must repeat the first but for its key share, cookie, early data, padding and PSK: a relay that
 * did not look would let a changed server_name reach the upstream unchecked (domain fronting on
 * the CONNECT host's address). So the relay guards the hellos: the first ClientHello's records
 * pass, what the client sends after them waits until the server's first handshake message is
 * seen (sl_tls_watch_server()); a ServerHello ends the guard, a HelloRetryRequest makes the
 * client's next records pass one by one (a ChangeCipherSpec, early data sent before the client
 * saw the retry, an alert) until its next ClientHello, which is read whole (within the stream's
 * input, as the first) by the same engine as the first and must carry the first one's SNI,
 * byte for byte (none when it had none). Then the guard is freed: the relay's fast path.
 */

enum pt_state {
    /* The first ClientHello passes; what follows it waits for the server's first message. */
    PT_WATCH = 0,
    /* The server asked for another ClientHello: the client's records up to it pass. */
    PT_SECOND,
};

struct sl__pt_guard {
    enum pt_state state;
    /* Client bytes that may go before the guard looks again: the rest of the first
     * ClientHello's records, or of a record before the second. */
    size_t pass;
    struct sl_tls_server_watch watch;
    /* The first ClientHello's SNI, as sent (NUL-terminated), when it had one. */
    bool has_sni;
    char sni[SL_HOST_NAME_MAX + 1];
};

/* Guards the hellos of a passthrough tunnel whose first ClientHello, at the start of `in`, was
 * read as `peek`. Returns 0, SL_EINVAL when that hello does not end where a record ends (or is
 * carried by records no ClientHello has), or SL_ENOMEM. */
static int start_guard(struct sl__conn *c, struct sl_slice in, const struct hello_peek *peek)
{
    struct sl__pt_guard *g;
    size_t span = 0;
    int rc = sl_tls_hello_span(in.p, in.n, &span);

    if (rc <= 0) {
        sl_log(SL_LOG_DEBUG, c->id,
               "msg=\"passthrough: a ClientHello whose records carry something else\"");
        return SL_EINVAL;
    }
    g = sl_calloc(1, sizeof(*g));
    if (g == NULL) {
        return SL_ENOMEM;
    }
    g->state = PT_WATCH;
    g->pass = span;
    g->has_sni = peek->has_sni;
    memcpy(g->sni, peek->sni, sizeof(g->sni));
    c->pt_guard = g;
    return 0;
}

static void end_guard(struct sl__conn *c)
{
    sl_free(c->pt_guard);
    c->pt_guard = NULL;
}

/* The second ClientHello names another server than the first: a fatal illegal_parameter alert
 * (RFC 8446 §4.1.2; in the clear, no keys exist yet) to the client, the upstream closed, the
 * tunnel's line with host-mismatch, as a first ClientHello naming another host has. */
static void refuse_second_hello(struct sl__conn *c)
{
    static const uint8_t alert[] = { 0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x2f };

    sl_log(SL_LOG_DEBUG, c->id,
           "msg=\"passthrough: the ClientHello after a HelloRetryRequest names another server\"");
    end_guard(c);
    c->sni_mismatch = true;
    c->r.allow = false;
    c->r.reason = SL_REASON_HOST_MISMATCH;
    c->r.status = 0;
    sl__conn_audit(c);
    if (sl_stream_write_all(&c->client, alert, sizeof(alert)) != 0) {
        /* No room for 7 bytes: the client stopped reading the server's. It gets the close. */
        sl_log(SL_LOG_DEBUG, c->id, "msg=\"passthrough: no room for the alert\"");
    }
    sl__conn_end(c);
}

/* Refuses the tunnel for bytes that are no second ClientHello as expected (`reason`). */
static int refuse_guarded(struct sl__conn *c, enum sl_reason reason)
{
    end_guard(c);
    sl__conn_drop(c, reason);
    return -1;
}

/* PT_SECOND, nothing left to pass: the client's next record. */
static int guard_next_record(struct sl__conn *c, struct sl_slice in, size_t *allow)
{
    struct sl__pt_guard *g = c->pt_guard;
    struct hello_peek peek;
    uint8_t type = 0;
    size_t len = 0;
    size_t span = 0;
    int rc = sl_tls_record_head(in.p, in.n, &type, &len);

    if (rc > 0 && type != SL_TLS_CT_HANDSHAKE) {
        /* A ChangeCipherSpec (middlebox compatibility), an alert, application data (early
         * data, which the server skips after a retry) pass. Anything else would end the
         * handshake at the server anyway: refused here. */
        if (type != SL_TLS_CT_CHANGE_CIPHER_SPEC && type != SL_TLS_CT_ALERT
            && type != SL_TLS_CT_APPLICATION_DATA) {
            return refuse_guarded(c, SL_REASON_NOT_TLS);
        }
        g->pass = 5 + len;
        *allow = in.n < g->pass ? in.n : g->pass;
        return 0;
    }
    if (rc > 0) {
        rc = sl_tls_hello_span(in.p, in.n, &span);
    }
    if (rc < 0) {
        return refuse_guarded(c, SL_REASON_NOT_TLS);
    }
    if (rc == 0) {
        /* As for the first: within the stream's input, while the client may still send. */
        if (in.n >= SL_STREAM_RAW_BYTES) {
            return refuse_guarded(c, SL_REASON_TOO_LARGE);
        }
        if (sl_stream_peer_closed(&c->client)) {
            return refuse_guarded(c, SL_REASON_NOT_TLS);
        }
        return 0;
    }
    rc = peek_hello(c, sl_slice_of(in.p, span), &peek);
    if (rc <= 0) {
        if (peek.sni_refused) {
            refuse_second_hello(c);
            return -1;
        }
        sl_log(SL_LOG_DEBUG, c->id,
               "msg=\"passthrough: not a ClientHello after a HelloRetryRequest\" err=%s",
               sl_strerror(rc));
        return refuse_guarded(c, sl__failure_reason(rc, SL_REASON_NOT_TLS));
    }
    if (peek.has_sni != g->has_sni
        || (g->has_sni && (peek.too_long || strcmp(peek.sni, g->sni) != 0))) {
        refuse_second_hello(c);
        return -1;
    }
    end_guard(c);
    *allow = in.n;
    return 0;
}

int sl__conn_pt_client(struct sl__conn *c, struct sl_slice in, size_t *allow)
{
    struct sl__pt_guard *g = c->pt_guard;

    *allow = 0;
    if (g->pass > 0) {
        *allow = in.n < g->pass ? in.n : g->pass;
        return 0;
    }
    if (g->state == PT_WATCH) {
        /* Anything sent after the first ClientHello waits for the server's answer: a second
         * ClientHello sent ahead of it would otherwise pass unread. */
        return 0;
    }
    return guard_next_record(c, in, allow);
}

void sl__conn_pt_client_passed(struct sl__conn *c, size_t n)
{
    if (c->pt_guard != NULL) {
        c->pt_guard->pass -= n;
    }
}

void sl__conn_pt_server(struct sl__conn *c, const uint8_t *p, size_t n)
{
    struct sl__pt_guard *g = c->pt_guard;

    if (g->state != PT_WATCH) {
        return;
    }
    switch (sl_tls_watch_server(&g->watch, p, n)) {
    case SL_TLS_WATCH_MORE:
        break;
    case SL_TLS_WATCH_HRR:
        sl_log(SL_LOG_DEBUG, c->id, "msg=\"passthrough: a HelloRetryRequest\"");
        g->state = PT_SECOND;
        break;
    case SL_TLS_WATCH_OTHER:
        end_guard(c);
        break;
    }
}

void sl__conn_pt_server_ended(struct sl__conn *c)
{
    /* The server sent no HelloRetryRequest and will send nothing more: it asks for no second
     * ClientHello. */
    if (c->pt_guard->state == PT_WATCH) {
        end_guard(c);
    }
}

/*
 * A passthrough tunnel's first bytes.
 */

/* A passthrough tunnel's first bytes: a ClientHello whose SNI, when present, names the CONNECT
 * host (an absent SNI is allowed: the CONNECT host is what was decided, and what is dialled).
 * Nothing is consumed: the hello goes upstream byte for byte. A refusal cannot be answered in
 * HTTP any more (the client speaks TLS): it is audited and the tunnel closed. */
static int step_passthrough_sniff(struct sl__conn *c)
{
    struct sl_slice in = sl_stream_peek(&c->client);
    struct hello_peek peek;
    int rc = 0;

    if (in.n == 0) {
        if (sl_stream_in_status(&c->client) != 0) {
            /* The client left without a byte: the tunnel's line, then close. */
            sl__conn_audit(c);
            sl__conn_close(c);
            return -1;
        }
        return 0;
    }
    switch (sl_tls_sniff(in.p, in.n)) {
    case SL_TLS_SNIFF_NEED_MORE:
        rc = 0;
        break;
    case SL_TLS_SNIFF_TLS:
        rc = peek_hello(c, in, &peek);
        if (rc > 0) {
            c->sni_mismatch = peek.has_sni && (peek.too_long || !sni_names_tunnel(c, peek.sni));
        }
        break;
    case SL_TLS_SNIFF_HTTP:
    case SL_TLS_SNIFF_OTHER:
        /* Plain HTTP included, on any port: passthrough is for TLS. */
        sl__conn_drop(c, SL_REASON_NOT_TLS);
        return -1;
    }
    if (rc == 0) {
        if (in.n >= SL_STREAM_RAW_BYTES) {
            sl__conn_drop(c, SL_REASON_TOO_LARGE);
            return -1;
        }
        if (sl_stream_peer_closed(&c->client)) {
            sl__conn_drop(c, SL_REASON_NOT_TLS);
            return -1;
        }
        return 0;
    }
    if (rc < 0) {
        sl_log(SL_LOG_DEBUG, c->id, "msg=\"passthrough: not a ClientHello\" err=%s",
               sl_strerror(rc));
        sl__conn_drop(c, sl__failure_reason(rc, SL_REASON_NOT_TLS));
        return -1;
    }
    if (c->sni_mismatch) {
        sl__conn_drop(c, SL_REASON_HOST_MISMATCH);
        return -1;
    }
    rc = start_guard(c, in, &peek);
    if (rc < 0) {
        sl__conn_drop(c, sl__failure_reason(rc, SL_REASON_NOT_TLS));
        return -1;
    }
    sl__conn_start_passthrough_dial(c);
    return c->state == SL__CONN_CLOSED ? -1 : 1;
}

/*
 * A transparent connection's first bytes (docs/reference/proxy.md §4.12).
 */

/* The ClientHello of a transparent connection names the host by its SNI: a host to decide as a
 * CONNECT to SNI:PORT would be (the same decision, a refusal held for the first request on
 * ports 443 and 80), then the tunnel opens and the ClientHello, still unread, starts it. No SNI
 * (or one that is no host) cannot be decided: bad-host. */
static int open_transparent_tunnel(struct sl__conn *c, const struct hello_peek *peek)
{
    sl__conn_begin_request(c, "CONNECT");
    c->r.scheme = "https";
    c->r.port = c->orig_port;
    sl__conn_note_identity(c);
    if (!peek->has_sni || peek->too_long
        || sl_host_normalize(sl_slice_str(peek->sni), 0, &c->r.host, NULL) < 0) {
        sl_log(SL_LOG_DEBUG, c->id, "msg=\"transparent: a ClientHello naming no host\" sni=%s",
               peek->has_sni ? "invalid" : "none");
        sl__conn_drop(c, SL_REASON_BAD_HOST);
        return -1;
    }
    c->r.has_host = true;
    if (!sl__conn_decide_connect(c)) {
        return -1;
    }
    sl__conn_open_tunnel(c);
    return 1;
}

/* Before any tunnel: a ClientHello (its SNI opens one), plain HTTP (requests to REQUEST_HEAD,
 * each naming its host), or anything else: not-tls. */
static int step_transparent_sniff(struct sl__conn *c)
{
    struct sl_slice in = sl_stream_peek(&c->client);
    struct hello_peek peek;
    int rc;

    if (in.n == 0) {
        if (sl_stream_in_status(&c->client) != 0) {
            /* Gone without a byte: nothing was asked. */
            sl__conn_close(c);
            return -1;
        }
        return 0;
    }
    switch (sl_tls_sniff(in.p, in.n)) {
    case SL_TLS_SNIFF_NEED_MORE:
        return 0;
    case SL_TLS_SNIFF_HTTP:
        sl__conn_set_state(c, SL__CONN_REQUEST_HEAD);
        return 1;
    case SL_TLS_SNIFF_OTHER:
        sl__conn_begin_request(c, NULL);
        c->r.port = c->orig_port;
        sl__conn_note_identity(c);
        sl__conn_drop(c, SL_REASON_NOT_TLS);
        return -1;
    case SL_TLS_SNIFF_TLS:
        break;
    }
    rc = peek_hello(c, in, &peek);
    if (rc > 0) {
        return open_transparent_tunnel(c, &peek);
    }
    if (rc == 0 && in.n < SL_STREAM_RAW_BYTES && !sl_stream_peer_closed(&c->client)) {
        return 0;
    }
    sl__conn_begin_request(c, NULL);
    c->r.port = c->orig_port;
    sl__conn_note_identity(c);
    sl__conn_drop(c, rc == 0 && in.n >= SL_STREAM_RAW_BYTES
                             ? SL_REASON_TOO_LARGE
                             : sl__failure_reason(rc, SL_REASON_NOT_TLS));
    return -1;
}

/*
 * The tunnel's first bytes and the client's handshake.
 */

/* TUNNEL_SNIFF: TLS (intercepted, or a passthrough tunnel's ClientHello), or plain HTTP in a
 * tunnel to port 80; anything else is refused as not-tls. A transparent connection's first
 * bytes come here before any tunnel. */
int sl__conn_step_tunnel_sniff(struct sl__conn *c)
{
    struct sl_slice in = sl_stream_peek(&c->client);
    struct sl_tls *t = NULL;
    int rc;

    if (c->passthrough) {
        return step_passthrough_sniff(c);
    }
    if (!sl__conn_in_tunnel(c)) {
        return step_transparent_sniff(c);
    }
    if (in.n == 0) {
        if (sl_stream_in_status(&c->client) != 0) {
            sl__conn_close(c);
            return -1;
        }
        return 0;
    }
    sl__conn_begin_request(c, "CONNECT");
    c->r.scheme = c->tport == 80 ? "http" : "https";
    c->r.host = c->thost;
    c->r.port = c->tport;
    c->r.has_host = true;
    switch (sl_tls_sniff(in.p, in.n)) {
    case SL_TLS_SNIFF_NEED_MORE:
        return 0;
    case SL_TLS_SNIFF_TLS:
        rc = sl_tls_create_server(c->w->shared->server_ctx, TLS_OUT_CAP, &t);
        if (rc < 0) {
            sl__conn_drop(c, sl__failure_reason(rc, SL_REASON_BAD_REQUEST));
            return -1;
        }
        sl_tls_set_sni_fn(t, on_sni, c);
        if (sl_stream_set_tls(&c->client, t) < 0) {
            sl__conn_drop(c, SL_REASON_BAD_REQUEST);
            return -1;
        }
        sl__conn_set_state(c, SL__CONN_TLS_HANDSHAKE);
        return 1;
    case SL_TLS_SNIFF_HTTP:
        if (c->tport == 80) {
            sl_snapshot_unref(c->snap);
            c->snap = NULL;
            sl__conn_set_state(c, SL__CONN_REQUEST_HEAD);
            return 1;
        }
        /* Plain HTTP where TLS was due (curl -p http://host:8080/, a ws:// client through a
         * CONNECT agent): the client reads HTTP, so it gets the reason in HTTP rather than an
         * empty reply (in a tunnel opened for a held refusal, that refusal). Nothing of its
         * request is read or sent on. */
        if (c->held != NULL) {
            sl__conn_refuse_held(c);
        } else {
            sl__conn_refuse(c, SL_REASON_NOT_TLS, 400,
                            "plain HTTP in a tunnel to a port other than 80: only TLS is taken "
                            "there",
                            false);
        }
        return -1;
    case SL_TLS_SNIFF_OTHER:
        break;
    }
    sl__conn_drop(c, SL_REASON_NOT_TLS);
    return -1;
}

/*
 * A client that does not trust the proxy's CA ends the handshake with an alert about the
 * certificate: OpenSSL's clients (curl, git, Python) send unknown_ca, others bad_certificate or
 * certificate_unknown; an expired leaf (a sandbox whose clock is wrong) gets
 * certificate_expired. That is the first thing to go wrong in a new setup, and the client's
 * own message rarely names the proxy, so the proxy says it at the info level
 * (docs/reference/proxy.md §4.1): one line per worker per CERT_REFUSED_LOG_MS at most, naming
 * the refusals it left out since the last, and each counted in
 * sluice_tls_certificate_refusals_total.
 */
static void certificate_refused(struct sl__conn *c, int alert)
{
    struct sl__worker *w = c->w;
    char host[SL_HOST_NAME_MAX + 1];
    char addr[INET6_ADDRSTRLEN];
    uint64_t now;

    if (alert != SSL_AD_BAD_CERTIFICATE && alert != SSL_AD_UNSUPPORTED_CERTIFICATE
        && alert != SSL_AD_CERTIFICATE_EXPIRED && alert != SSL_AD_CERTIFICATE_UNKNOWN
        && alert != SSL_AD_UNKNOWN_CA) {
        return;
    }
    sl__count(&w->counters.tls_certificate_refusals, 1);
    now = uv_now(&w->loop);
    if (w->cert_refused_logged_ms != 0 && now - w->cert_refused_logged_ms < CERT_REFUSED_LOG_MS) {
        w->cert_refused_unlogged++;
        return;
    }
    cert_name(c, host);
    sl__conn_peer_address(c, addr, sizeof(addr));
    sl_log(SL_LOG_INFO, c->id,
           "msg=\"a client refused the proxy's certificate: it must trust the proxy's CA "
           "(sluice ca show)\" alert=\"%s\" host=%s client_address=%s not_logged=%llu",
           SSL_alert_desc_string_long(alert), host, addr,
           (unsigned long long)w->cert_refused_unlogged);
    w->cert_refused_logged_ms = now != 0 ? now : 1;
    w->cert_refused_unlogged = 0;
}

/* TLS_HANDSHAKE: the client's handshake, pausing in MINTING while a leaf is minted. */
int sl__conn_step_tls_handshake(struct sl__conn *c)
{
    int rc = sl_stream_handshake(&c->client);

    switch (rc) {
    case SL_TLS_HS_DONE:
        sl__count(&c->w->counters.tls_handshakes, 1);
        sl_snapshot_unref(c->snap);
        c->snap = NULL;
        sl__conn_set_state(c, SL__CONN_REQUEST_HEAD);
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
        sl__conn_set_state(c, SL__CONN_MINTING);
        return 0;
    default:
        break;
    }
    sl__count(&c->w->counters.tls_handshake_failures, 1);
    /* An SNI no host can have (a NUL, raw UTF-8), or one changed in the ClientHello after a
     * HelloRetryRequest, names another host than the CONNECT's as much as one the callback
     * compared: refused the same, with the same line. */
    if (c->sni_mismatch
        || (sl_stream_tls(&c->client) != NULL && sl_tls_sni_refused(sl_stream_tls(&c->client)))) {
        sl__conn_drop(c, SL_REASON_HOST_MISMATCH);
    } else {
        /* Not a policy decision: a client that gave up, or spoke TLS we refuse (h2 only), or
         * one that does not trust the proxy's CA. */
        sl_log(SL_LOG_DEBUG, c->id, "msg=\"client TLS handshake failed\" err=\"%s\"",
               sl_stream_tls(&c->client) != NULL ? sl_tls_error_text(sl_stream_tls(&c->client))
                                                 : "");
        if (sl_stream_tls(&c->client) != NULL) {
            certificate_refused(c, sl_tls_peer_alert(sl_stream_tls(&c->client)));
        }
        sl_snapshot_unref(c->snap);
        c->snap = NULL;
        sl__conn_close(c);
    }
    return -1;
}
