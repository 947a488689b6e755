/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proxy/conn_forward.c - an allowed request on its way: dialling (through the worker's pool),
 * the request head and body to the upstream, the response head and body to the client
 * (re-framed where the client needs it), interim responses, a stale pooled connection retried
 * once, the response's timers (waiting for the upstream, waiting for the client), the end of
 * the exchange once its response has left, and a transfer cut short. A room of
 * proxy/conn_int.h.
 */
#include <stdio.h>

#include "base/buf.h"
#include "base/log.h"
#include "http/h1.h"
#include "proxy/conn_int.h"
#include "proxy/head.h"
#include "proxy/stream.h"
#include "proxy/tls.h"
#include "proxy/upstream.h"

/* Interim (1xx) responses relayed for one request; more is a refusal (502). */
#define INTERIMS_MAX      32
#define INTERIMS_MAX_TEXT "32"

/* The chunked framing of the request body, as it goes upstream too. */
static bool req_chunked(const struct sl__conn *c)
{
    return sl_h1_head(&c->req)->body == SL_H1_BODY_CHUNKED;
}

/*
 * Dialling.
 */

/* Writes the head sent upstream for the current request into c->head (again, for a retry).
 * Returns 0, or SL_ENOMEM or SL_ETOOBIG (sl_head_build_refusal() says how to answer it). */
static int build_request_head(struct sl__conn *c, const struct sl_h1_head *h)
{
    struct sl_head_target t = { .scheme = c->r.scheme,
                                .has_host = c->r.has_host,
                                .host = c->r.host,
                                .port = c->r.port,
                                .target = c->r.target,
                                .websocket = c->r.websocket };
    unsigned swapped = 0;
    int rc = sl_head_build_swap(&c->head, h, &t, c->dec.credential_header, c->dec.credential_value,
                                c->dec.placeholder, &swapped);

    /* A placeholder replaced is a credential put in (the audit line's "credential"). */
    c->r.credential |= swapped > 0;
    return rc;
}

static void on_upstream_event(struct sl_upstream *u, void *arg)
{
    struct sl__conn *c = arg;

    (void)u;
    sl__conn_step(c);
}

/* Dials for the current request: a pooled connection if there is one, but never for a request
 * sent again (retry_stale()): a pooled connection that closed unanswered may have idled beside
 * others the upstream closed at the same time, and the retry is on a new one (proxy.md §4.4). */
static void start_dialing(struct sl__conn *c)
{
    bool tls = sl__conn_is_intercepted(c);
    int rc = c->retried ? sl_upstream_open_new(c->w, &c->r.host, c->r.port, tls, c->dec.client,
                                               on_upstream_event, c, &c->up)
                        : sl_upstream_open(c->w, &c->r.host, c->r.port, tls, c->dec.client,
                                           on_upstream_event, c, &c->up);

    if (rc < 0) {
        c->up = NULL;
        sl__conn_refuse_reason(c, sl__failure_reason(rc, SL_REASON_UPSTREAM_UNREACHABLE),
                               sl_strerror(rc), false);
        return;
    }
    /* No more request bytes are parsed until the upstream is there. */
    sl__conn_set_state(c, SL__CONN_DIALING);
}

/* The request is allowed: its upstream head, then the dial. */
void sl__conn_start_request(struct sl__conn *c, const struct sl_h1_head *h)
{
    int rc;

    if (!sl__conn_placeholders_ok(c, h)) {
        return;
    }
    rc = build_request_head(c, h);
    if (rc < 0) {
        struct sl_head_refusal why;

        sl_head_build_refusal(rc, &why);
        sl__conn_refuse_reason(c, why.reason, why.detail, false);
        return;
    }
    if (c->dec.git_push != NULL && !sl__conn_git_hold(c, h)) {
        return;
    }
    start_dialing(c);
}

/* Dials the CONNECT host for a passthrough tunnel, on a new connection: a pooled one has
 * carried plain HTTP, and a TLS session must start on a clean stream. The address rules are
 * those of every dial (proxy/upstream.h). */
void sl__conn_start_passthrough_dial(struct sl__conn *c)
{
    int rc = sl_upstream_open_new(c->w, &c->thost, c->tport, false, c->dec.client,
                                  on_upstream_event, c, &c->up);

    if (rc < 0) {
        c->up = NULL;
        sl__conn_drop(c, sl__failure_reason(rc, SL_REASON_UPSTREAM_UNREACHABLE));
        return;
    }
    sl__conn_set_state(c, SL__CONN_DIALING);
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
    sl__conn_set_state(c, SL__CONN_FORWARDING);
}

/* DIALING: the upstream connected (FORWARDING, or RELAY for a passthrough tunnel), or failed
 * (a refusal, or the tunnel dropped). */
int sl__conn_step_dialing(struct sl__conn *c)
{
    const char *detail = NULL;
    enum sl_reason reason;

    switch (sl_upstream_state(c->up)) {
    case SL_UPSTREAM_DIALING:
        return 0;
    case SL_UPSTREAM_READY:
        if (c->passthrough) {
            return sl__conn_enter_relay(c) ? 1 : -1;
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
        sl__conn_drop(c, reason);
        return -1;
    }
    sl__conn_refuse_reason(c, reason, detail, sl_h1_head(&c->req)->body == SL_H1_BODY_NONE);
    return -1;
}

/*
 * Forwarding: heads and bodies both ways.
 */

/* Writes `n` bytes of protocol text (a head, chunk framing) to `dst` whole. Returns 1 once
 * written, 0 when `dst` has no room for them yet, -1 when `dst` failed. */
static int write_whole(struct sl_stream *dst, const void *p, size_t n)
{
    int rc = sl_stream_write_all(dst, p, n);

    if (rc == 0) {
        return 1;
    }
    return rc == SL_EAGAIN ? 0 : -1;
}

/* Writes the end of a body to `dst`: the last chunk when `chunked`, nothing otherwise. Returns
 * as write_whole() does. */
static int write_body_end(struct sl_stream *dst, bool chunked)
{
    return chunked ? write_whole(dst, SL_H1_CHUNK_LAST, SL_H1_CHUNK_LAST_LEN) : 1;
}

/* Writes the pending body event of `src` into `dst`, framing it as a chunk when `chunked`.
 * Returns 1 when it is all written (and consumed from `src`), 0 when `dst` is full, -1 when
 * `dst` failed. */
static int write_pending(struct sl_stream *src, struct sl_stream *dst, struct sl__pending *p,
                         bool chunked, uint64_t *count)
{
    struct sl_slice in = sl_stream_peek(src);

    while (p->len > 0) {
        int n;

        if (chunked && !p->framed) {
            char frame[SL_H1_CHUNK_HEADER_MAX];
            int rc = write_whole(dst, frame, sl_h1_chunk_header(frame, sizeof(frame), p->len));

            if (rc <= 0) {
                return rc;
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
        int rc = write_whole(dst, SL_H1_CHUNK_END, SL_H1_CHUNK_END_LEN);

        if (rc <= 0) {
            return rc;
        }
        p->framed = false;
    }
    sl_stream_consume(src, p->used);
    p->active = false;
    return 1;
}

/* Runs `p`'s parser over `src` until an event worth acting on. Returns the event type, or
 * SL_H1_EV_NONE when more input is needed, or a negative parse error. Body events are left
 * pending (not consumed); other bytes are consumed.
 *
 * SL_H1_EV_NONE means that `src` shows nothing more: under TLS, consuming what sl_stream_peek()
 * showed can make the next peek decrypt another record from ciphertext that has already arrived,
 * and no socket event will come for it. Stopping at the end of a slice instead left a long head
 * whose last records had arrived undecrypted waiting for the upstream timeout. */
static int pull(struct sl_h1 *parser, struct sl_stream *src, struct sl__pending *p)
{
    for (bool first = true;; first = false) {
        struct sl_slice in = sl_stream_peek(src);
        struct sl_h1_event ev;
        int n;

        if (in.n == 0 && !first) {
            return SL_H1_EV_NONE;
        }
        /* The first call runs even without input: an event may be owed (sl_h1_feed()). */
        n = sl_h1_feed(parser, in.p, in.n, &ev);

        if (n < 0) {
            return n;
        }
        if (ev.type == SL_H1_EV_BODY) {
            *p = (struct sl__pending){ true, (size_t)(ev.body.p - in.p), ev.body.n, (size_t)n,
                                       false };
            return SL_H1_EV_BODY;
        }
        sl_stream_consume(src, (size_t)n);
        if (ev.type != SL_H1_EV_NONE) {
            return (int)ev.type;
        }
        if (n == 0) {
            return SL_H1_EV_NONE;
        }
    }
}

/* Writes the pending head (request or response) to `dst` whole. Returns 1 once written, 0
 * when `dst` has no room yet, -1 when `dst` failed. */
static int write_head(struct sl__conn *c, struct sl_stream *dst)
{
    int rc = write_whole(dst, c->head.p, c->head.len);

    if (rc <= 0) {
        return rc;
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
    if (c->git != NULL && sl__conn_git_releasing(c)) {
        return sl__conn_git_release(c, us);
    }
    if (c->req_stage == SL__MSG_DONE) {
        return 0;
    }
    if (c->req_stage == SL__MSG_END_OWED) {
        int rc = write_body_end(us, req_chunked(c));

        if (rc > 0) {
            c->req_stage = SL__MSG_DONE;
        }
        return rc;
    }
    if (c->req_pend.active) {
        int rc = write_pending(&c->client, us, &c->req_pend, req_chunked(c), &c->r.bytes_up);

        if (rc > 0 && !sl__conn_resp_head_sent(c)) {
            /* A long upload is progress: the upstream answers after it. */
            sl__conn_rearm(c, SL__PHASE_UPSTREAM);
        }
        if (rc < 0) {
            sl__conn_abort(c, SL__SIDE_UPSTREAM, SL__ABORT_RESET);
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
            sl__conn_abort(c, SL__SIDE_CLIENT,
                           sl_stream_error(&c->client) != 0 ? SL__ABORT_RESET : SL__ABORT_CLOSED);
            return -1;
        }
        return 0;
    case SL_H1_EV_HEAD:
        sl__conn_abort(c, SL__SIDE_CLIENT, SL__ABORT_MALFORMED);
        return -1;
    default:
        break;
    }
    /* The body could not be parsed: malformed (a bad chunk size, chunk data without its CRLF:
     * docs/reference/proxy.md §4.6 says 400 and close), over a limit (§4.10), or no memory to
     * parse it. The head already went upstream, so that connection goes too (sl__conn_refuse()
     * closes it): its request never completes and nothing after it is read from it. Once the
     * response has begun, the transfer is cut instead. */
    if (sl__conn_resp_head_sent(c)) {
        sl__conn_abort(c, SL__SIDE_CLIENT,
                       ev == SL_ENOMEM ? SL__ABORT_OUT_OF_MEMORY : SL__ABORT_MALFORMED);
    } else if (ev == SL_ENOMEM) {
        sl__conn_refuse_reason(c, SL_REASON_OUT_OF_MEMORY,
                               "the proxy is out of memory for the request body", false);
    } else {
        sl__conn_refuse(c, ev == SL_ETOOBIG ? SL_REASON_TOO_LARGE : SL_REASON_BAD_REQUEST, 400,
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
    int rc;

    /* An upstream that keeps sending interim responses instead of its answer is refused
     * before the one over the limit goes to the client: each costs a head. */
    if (h->status < 200 && h->status != 101 && c->interims >= INTERIMS_MAX) {
        sl__conn_refuse(c, SL_REASON_BAD_REQUEST, 502,
                        "the upstream sent more than " INTERIMS_MAX_TEXT " interim (1xx) responses",
                        false);
        return -1;
    }
    rc = sl_head_build_response(&c->head, h, &ctx, &plan);

    switch (plan.verdict) {
    case SL_HEAD_RESP_REFUSE:
        sl__conn_refuse(c, SL_REASON_BAD_REQUEST, 502, "the upstream switched protocols unasked",
                        false);
        return -1;
    case SL_HEAD_RESP_SKIP:
        c->close_after = plan.close_after;
        return 1;
    case SL_HEAD_RESP_RELAY:
        break;
    }
    c->close_after = plan.close_after;
    if (rc == SL_ENOMEM) {
        sl__conn_refuse_reason(c, SL_REASON_OUT_OF_MEMORY,
                               "the proxy is out of memory for the response head", false);
        return -1;
    }
    if (rc < 0) {
        sl__conn_refuse(c, SL_REASON_TOO_LARGE, 502, "the upstream's response head is too large",
                        false);
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

/* The response's timer once its head went to the client: SEND while bytes wait for the client
 * (`waiting`: its stream takes no more, or the exchange waits for the response's tail to leave),
 * started when the wait begins and again whenever the client takes some; IDLE while the response
 * waits for its upstream, started again by each piece of the body (`progress`). */
static void time_response(struct sl__conn *c, bool waiting, bool progress)
{
    enum sl__conn_phase now = sl__conn_phase(c);

    if (waiting) {
        if (now != SL__PHASE_SEND || c->client.bytes_out != c->flush_out) {
            c->flush_out = c->client.bytes_out;
            sl__conn_rearm(c, SL__PHASE_SEND);
        }
    } else if (progress || now != SL__PHASE_IDLE) {
        sl__conn_rearm(c, SL__PHASE_IDLE);
    }
}

/* The upstream ended its connection (`st`: UV_EOF when it closed cleanly) before any byte of a
 * final response: before any byte at all, or after only interim (1xx) responses, which
 * retry_stale() takes for an answer (the upstream had read the request). The request was not
 * sent again: 502 upstream-closed, saying why (docs/reference/proxy.md §4.4, Pooling). Not a
 * malformed response: nothing of one came. */
static void refuse_unanswered(struct sl__conn *c, struct sl_stream *us, int st)
{
    const struct sl_tls *t = sl_stream_tls(us);
    /* The method that is not idempotent, an override's included: "GET with X-HTTP-Method:
     * POST". */
    char method[96];
    /* How it ended, when not by a clean close: " (connection reset by peer)". */
    char how[160] = "";
    char detail[512];

    if (st != UV_EOF) {
        (void)snprintf(how, sizeof(how), " (%s)",
                       t != NULL && sl_tls_error_text(t)[0] != '\0' ? sl_tls_error_text(t)
                                                                    : sl_strerror(st));
    }
    if (c->interims > 0) {
        char count[48] = "an interim (1xx) response";

        if (c->interims > 1) {
            (void)snprintf(count, sizeof(count), "%u interim (1xx) responses", c->interims);
        }
        (void)snprintf(detail, sizeof(detail),
                       "the upstream closed the %sconnection after %s, before its final "
                       "response%s; the request was not sent again (the upstream had it)",
                       sl_upstream_is_reused(c->up) ? "kept-alive " : "", count, how);
    } else if (c->retried) {
        (void)snprintf(detail, sizeof(detail),
                       "the upstream closed the connection before answering%s, after the request "
                       "had been sent again once (the kept-alive connection it first went on had "
                       "closed unanswered too)",
                       how);
    } else if (!sl_upstream_is_reused(c->up)) {
        (void)snprintf(detail, sizeof(detail),
                       "the upstream closed the connection before answering%s (a new connection: "
                       "the request was not sent again)",
                       how);
    } else if (sl__conn_not_idempotent(sl_h1_head(&c->req), method, sizeof(method))) {
        (void)snprintf(detail, sizeof(detail),
                       "the upstream closed the kept-alive connection before answering%s; the "
                       "request was not sent again because %s is not idempotent (the upstream may "
                       "have acted on it): the client may retry",
                       how, method);
    } else {
        (void)snprintf(detail, sizeof(detail),
                       "the upstream closed the kept-alive connection before answering%s; the "
                       "request was not sent again because its body had already gone up: the "
                       "client may retry",
                       how);
    }
    sl_log(SL_LOG_INFO, c->id, "msg=\"upstream refused\" host=%s reason=%s detail=\"%s\"",
           c->r.host.name, sl_reason_code(SL_REASON_UPSTREAM_CLOSED), detail);
    sl__conn_refuse_reason(c, SL_REASON_UPSTREAM_CLOSED, detail, false);
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
            time_response(c, false, true);
        } else if (rc < 0) {
            sl__conn_abort(c, SL__SIDE_CLIENT, SL__ABORT_RESET);
        }
        return rc;
    }
    if (c->head_to != SL__HEAD_NONE || c->resp_stage == SL__MSG_DONE) {
        return 0;
    }
    if (c->resp_stage == SL__MSG_END_OWED) {
        int rc = write_body_end(&c->client, chunked);

        if (rc > 0) {
            c->resp_stage = SL__MSG_DONE;
        } else if (rc == 0) {
            time_response(c, true, false);
        } else {
            sl__conn_abort(c, SL__SIDE_CLIENT, SL__ABORT_RESET);
        }
        return rc;
    }
    if (c->resp_pend.active) {
        uint64_t before = c->r.bytes_down;
        int rc = write_pending(us, &c->client, &c->resp_pend, chunked, &c->r.bytes_down);

        if (rc < 0) {
            sl__conn_abort(c, SL__SIDE_CLIENT, SL__ABORT_RESET);
        } else {
            /* All written: waiting for the upstream again; else for the client. */
            time_response(c, rc == 0, c->r.bytes_down != before);
        }
        return rc;
    }
    ev = pull(&c->resp, us, &c->resp_pend);
    if (ev == SL_H1_EV_NONE && sl_stream_in_status(us) != 0) {
        int st = sl_stream_in_status(us);
        struct sl_h1_event end;

        if (!sl__conn_resp_head_sent(c) && !sl_h1_in_message(&c->resp)
            && !(st == SL_ECRYPTO && sl_stream_tls(us) != NULL)) {
            /* Not a byte of a final response, only interim ones if any (a TLS failure is
             * upstream-tls, below). */
            refuse_unanswered(c, us, st);
            return -1;
        }

        /* The upstream closed: the end of a close-delimited body, or a cut response. Only a
         * clean end ends a body: a FIN in the clear, close_notify under TLS (tls.h: a TLS
         * stream cut without it is never to be taken for a complete one). */
        if (sl_stream_in_status(us) != UV_EOF) {
            ev = SL_EINVAL;
        } else if (sl_h1_eof(&c->resp, &end) < 0 || end.type != SL_H1_EV_END) {
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
        if (!sl__conn_resp_head_sent(c)) {
            /* An interim response ended; the final one follows on the same parser
             * (on_response_head() counts them against INTERIMS_MAX). */
            c->interims++;
            return 1;
        }
        c->resp_stage = SL__MSG_END_OWED;
        return 1;
    case SL_H1_EV_UPGRADE:
        c->resp_stage = SL__MSG_DONE;
        return sl__conn_enter_relay(c) ? 1 : -1;
    default:
        break;
    }
    if (!sl__conn_resp_head_sent(c) && c->r.bytes_down == 0) {
        const char *why = ev == SL_EINVAL || ev == SL_ETOOBIG ? sl_h1_error(&c->resp) : "";
        char detail[160];

        if (ev == SL_EINVAL && sl_stream_in_status(us) == SL_ECRYPTO && sl_stream_tls(us) != NULL) {
            /* Not a malformed response but the upstream's TLS failing after the handshake: a
             * TLS 1.3 server that wants a client certificate sends its alert only once it has
             * read the request (proxy.md §4.4, upstream-tls). */
            (void)snprintf(detail, sizeof(detail), "the upstream's TLS failed: %s",
                           sl_tls_error_text(sl_stream_tls(us)));
            sl_log(SL_LOG_INFO, c->id, "msg=\"upstream refused\" host=%s reason=%s detail=\"%s\"",
                   c->r.host.name, sl_reason_code(SL_REASON_UPSTREAM_TLS), detail);
            sl__conn_refuse(c, SL_REASON_UPSTREAM_TLS, 502, detail, false);
            return -1;
        }
        if (ev == SL_EINVAL && sl_stream_in_status(us) != 0 && sl_stream_in_status(us) != UV_EOF) {
            why = "the connection failed or was cut short";
        }
        if (ev == SL_ENOMEM) {
            sl__conn_refuse_reason(c, SL_REASON_OUT_OF_MEMORY,
                                   "the proxy is out of memory for the response head", false);
            return -1;
        }
        (void)snprintf(detail, sizeof(detail), "%s: %s",
                       ev == SL_ETOOBIG ? "the upstream's response is over the proxy's limits"
                                        : "the upstream's response was malformed",
                       why);
        sl__conn_refuse(c, ev == SL_ETOOBIG ? SL_REASON_TOO_LARGE : SL_REASON_BAD_REQUEST, 502,
                        detail, false);
        return -1;
    }
    /* Mid-body: the client can only learn it from the connection closing. */
    sl_log(SL_LOG_WARN, c->id,
           "msg=\"upstream response malformed or cut after its head was relayed; connection "
           "aborted\" host=%s err=\"%s\"",
           c->r.host.name, sl_h1_error(&c->resp));
    c->r.status = c->r.status != 0 ? c->r.status : 502;
    if (ev == SL_ENOMEM) {
        sl__conn_abort(c, SL__SIDE_UPSTREAM, SL__ABORT_OUT_OF_MEMORY);
    } else if (sl_stream_error(us) != 0) {
        sl__conn_abort(c, SL__SIDE_UPSTREAM, SL__ABORT_RESET);
    } else if (sl_stream_in_status(us) != 0) {
        sl__conn_abort(c, SL__SIDE_UPSTREAM, SL__ABORT_CLOSED);
    } else {
        sl__conn_abort(c, SL__SIDE_UPSTREAM, SL__ABORT_MALFORMED);
    }
    return -1;
}

/* Both sides of an exchange are complete and the response has left: log, pool the upstream,
 * go on or close. */
static void finish_exchange(struct sl__conn *c)
{
    const struct sl_h1_head *h = sl_h1_head(&c->resp);
    bool reusable = h->keep_alive && h->body != SL_H1_BODY_CLOSE && c->req_stage == SL__MSG_DONE;

    sl__conn_audit(c);
    sl_upstream_release(c->up, reusable);
    c->up = NULL;
    if (c->close_after || !c->r.client_keep_alive || c->resp_framing == SL__FRAMING_CLOSE
        || sl_stream_peer_closed(&c->client)) {
        sl__conn_end(c);
        return;
    }
    sl__conn_end_exchange(c);
}

/* Before any response byte, a pooled connection that the upstream had closed meanwhile gets
 * an idempotent request again on a fresh connection (once). Its head went out: the upstream may
 * have acted on it before it closed (a stale connection and a server that took the request and
 * then failed look the same), so a POST, a PATCH or any other method that is not idempotent is
 * never sent twice (RFC 9112 §9.3.1.1): it gets the 502. An upstream that sent anything of a
 * response (part of a head, an interim response) answered: the connection was not stale, and the
 * request is not sent again either. */
static bool retry_stale(struct sl__conn *c)
{
    struct sl_stream *us = sl_upstream_stream(c->up);
    int rc;

    if (c->retried || !sl_upstream_is_reused(c->up) || sl__conn_resp_head_sent(c) || c->interims > 0
        || sl_h1_in_message(&c->resp) || c->r.bytes_up > 0 || c->req_pend.active
        || (sl_stream_in_status(us) == 0 && sl_stream_error(us) == 0) || sl_stream_peek(us).n > 0
        || !sl__conn_idempotent(sl_h1_head(&c->req))) {
        return false;
    }
    c->retried = true;
    sl_upstream_close(c->up);
    c->up = NULL;
    sl_h1_finish(&c->resp);
    rc = build_request_head(c, sl_h1_head(&c->req));
    if (rc < 0) {
        /* It was built once already: only memory can be short now (out-of-memory, 503). The
         * upstream is gone, so the exchange ends here, as a first build's failure does
         * (sl__conn_start_request()). */
        struct sl_head_refusal why;

        sl_head_build_refusal(rc, &why);
        sl__conn_refuse_reason(c, why.reason, why.detail, false);
        return true;
    }
    start_dialing(c);
    return true;
}

/* One round of FORWARDING: both sides as far as they go, then the end of the exchange once the
 * response is complete and has left for the client. */
static int forward_round(struct sl__conn *c)
{
    int a;
    int b;

    if (c->git != NULL && sl__conn_git_holds(c)) {
        return sl__conn_git_round(c);
    }
    if (retry_stale(c)) {
        return 1;
    }
    /* A client whose connection failed gets no more of its response, and the upstream is not
     * left streaming into a buffer nobody reads. A clean end of its input after a complete
     * request (FIN in the clear; close_notify, or a FIN between two records, under TLS) is a
     * half-close: the response still goes out, then the connection closes (finish_exchange).
     * A client that went away entirely fails the next write with a reset and ends here. */
    if (sl_stream_error(&c->client) != 0) {
        sl__conn_abort(c, SL__SIDE_CLIENT, SL__ABORT_RESET);
        return -1;
    }
    a = forward_request(c);
    b = a < 0 ? -1 : forward_response(c);
    if (a < 0 || b < 0) {
        if (c->state == SL__CONN_FORWARDING) {
            /* Not said where it happened: a side failed. */
            sl__conn_abort(c, SL__SIDE_UPSTREAM, SL__ABORT_RESET);
        }
        return -1;
    }
    if (c->state != SL__CONN_FORWARDING) {
        return 1;
    }
    if (c->resp_stage == SL__MSG_DONE && c->head_to == SL__HEAD_NONE) {
        if (!sl_stream_is_flushed(&c->client)) {
            /* The exchange ends once its response has left (its audit line counts what reached
             * the client): the step's end writes it out, or the client takes it in its time. */
            time_response(c, true, false);
            return a > 0 || b > 0;
        }
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

int sl__conn_step_forwarding(struct sl__conn *c, int max_rounds, int *rounds)
{
    int rc;

    *rounds = 0;
    do {
        rc = forward_round(c);
        ++*rounds;
    } while (rc > 0 && c->state == SL__CONN_FORWARDING && *rounds < max_rounds);
    return rc;
}
