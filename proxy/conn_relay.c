/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proxy/conn_relay.c - long-lived relays: a websocket after its 101 and a passthrough tunnel,
 * bytes moved both ways unparsed, for as long as their decision holds (taken again when the
 * policy changes, when the client expires, and on entering RELAY), until either side ends or
 * the relay idles too long. A room of proxy/conn_int.h.
 */
#include <stdint.h>
#include <time.h>

#include "base/log.h"
#include "policy/decision.h"
#include "policy/snapshot.h"
#include "proxy/conn_int.h"
#include "proxy/stream.h"
#include "proxy/upstream.h"

/* A relay's expiry timer fires this long after the second of `expires_at` has begun, so that
 * the decision it triggers sees the client expired (time() has ticked over). */
#define EXPIRY_SLACK_MS 20

/* Wall-clock milliseconds since the epoch, the clock of `expires_at`. */
static int64_t wall_ms(void)
{
    struct timespec ts;

    if (clock_gettime(CLOCK_REALTIME, &ts) == -1) {
        return (int64_t)time(NULL) * 1000;
    }
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Pushes the relay's idle deadline (relay_idle_at) to idle_timeout_s from now. */
static void push_idle_deadline(struct sl__conn *c)
{
    c->relay_idle_at = uv_now(&c->w->loop) + (uint64_t)sl__conn_cfg(c)->idle_timeout_s * 1000u;
}

/* The relay's deadline from now (SL__PHASE_RELAY), in ms: its idle deadline or the client's
 * expiry, whichever comes first. */
uint64_t sl__conn_relay_deadline_ms(struct sl__conn *c)
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
    const struct sl_client *client = sl__conn_identify(c, snap);
    struct sl_request_view v = { &c->r.host, c->r.port, c->passthrough ? NULL : c->r.method,
                                 c->passthrough || sl__conn_is_intercepted(c), c->r.target };
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
    sl__conn_audit(c);
    sl__conn_close(c);
    return false;
}

/* Enters RELAY. The decision is taken again first (the snapshot may have changed, or the
 * client expired, since the request or the CONNECT). Returns false when it no longer holds: the
 * connection is then closed. */
bool sl__conn_enter_relay(struct sl__conn *c)
{
    if (!relay_holds(c)) {
        return false;
    }
    push_idle_deadline(c);
    sl__conn_set_state(c, SL__CONN_RELAY);
    sl_stream_want_read(&c->client, true);
    sl_stream_want_read(sl_upstream_stream(c->up), true);
    return true;
}

/* The relay's timer: the client's expiry, or the idle deadline (perhaps pushed back since). */
void sl__conn_on_relay_timer(struct sl__conn *c)
{
    if (!relay_holds(c)) {
        return;
    }
    if (uv_now(&c->w->loop) >= c->relay_idle_at) {
        sl_log(SL_LOG_DEBUG, c->id, "msg=\"relay idle: closed\" host=%s", c->r.host.name);
        sl__conn_abort(c, SL__SIDE_BOTH, SL__ABORT_IDLE_TIMEOUT);
        return;
    }
    sl__conn_rearm(c, SL__PHASE_RELAY);
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
                sl__conn_rearm(c, SL__PHASE_RELAY);
            }
        } else if (c->passthrough
                   && (c->state == SL__CONN_TUNNEL_SNIFF || c->state == SL__CONN_DIALING)) {
            /* Not relaying yet: its own timeout runs; the decision is checked again when the
             * relay starts, and now. */
            (void)relay_holds(c);
        }
    }
}

/* RELAY: bytes both ways, unparsed, until both ends have passed or a side failed. */
int sl__conn_step_relay(struct sl__conn *c)
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
        size_t allow = in.n;

        if (c->pt_guard != NULL && i == 0 && in.n > 0 && sl__conn_pt_client(c, in, &allow) < 0) {
            return -1;
        }
        if (allow > 0) {
            int n = sl_stream_write(to, in.p, allow);

            if (n < 0) {
                sl__conn_abort(c, to == &c->client ? SL__SIDE_CLIENT : SL__SIDE_UPSTREAM,
                               SL__ABORT_RESET);
                return -1;
            }
            if (n > 0) {
                if (c->pt_guard != NULL) {
                    if (i == 0) {
                        sl__conn_pt_client_passed(c, (size_t)n);
                    } else {
                        sl__conn_pt_server(c, in.p, (size_t)n);
                    }
                }
                sl_stream_consume(from, (size_t)n);
                *counts[i] += (uint64_t)n;
                progress = 1;
            }
        } else if (in.n == 0 && !*eofs[i] && sl_stream_in_status(from) != 0) {
            if (c->pt_guard != NULL && i == 1) {
                sl__conn_pt_server_ended(c);
            }
            *eofs[i] = true;
            sl_stream_end(to);
            progress = 1;
        }
    }
    if (sl_stream_error(&c->client) != 0 || sl_stream_error(us) != 0) {
        sl__conn_abort(c, sl_stream_error(&c->client) != 0 ? SL__SIDE_CLIENT : SL__SIDE_UPSTREAM,
                       SL__ABORT_RESET);
        return -1;
    }
    if (c->relay_up_eof && c->relay_down_eof) {
        /* Both ends passed on: the close's last attempt hands over what waits, then the line
         * counts it. */
        sl__conn_close(c);
        sl__conn_audit(c);
        return -1;
    }
    if (progress) {
        /* The timer is not re-armed per byte: it finds the later deadline when it fires. */
        push_idle_deadline(c);
    }
    return progress;
}
