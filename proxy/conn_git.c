/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proxy/conn_git.c - a git push held at the door (docs/reference/proxy.md §4.11). A room of
 * proxy/conn_int.h.
 *
 * An allowed `POST .../git-receive-pack` under write access (the decision's `git_push`) goes
 * through FORWARDING like any request, but nothing of it leaves until its ref-update commands
 * are read: the upstream is dialled, then this room takes the rounds (HOLDING) and keeps the
 * body's first bytes (decoded) until proxy/gitpush.h has read the command list.
 *   - A command for the default or a protected branch: the upstream is closed unused, the
 *     client gets a receive-pack result that rejects every ref (DRAINING), the rest of its body
 *     is read and dropped, and the exchange ends with one audit line (git-protected-branch).
 *   - Otherwise (the probe "0000" included): the head goes upstream, then the held bytes
 *     (RELEASING, in one chunk for a chunked body), and forwarding goes on as usual with the
 *     rest of the body, streamed.
 *   - A malformed list, one over the bound, a body with a Content-Encoding: 400 git-bad-push,
 *     nothing sent upstream.
 * The held state is allocated for such a push only and freed with the exchange.
 */
#include <string.h>

#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"
#include "http/h1.h"
#include "policy/git.h"
#include "proxy/conn_int.h"
#include "proxy/gitpush.h"
#include "proxy/stream.h"
#include "proxy/upstream.h"

/* What is held: the command list's bound plus the body bytes of the one read that completed it
 * (a body event never spans more than one stream window). */
#define HELD_MAX (SL_GITPUSH_MAX_BYTES + SL_STREAM_RAW_BYTES + SL_STREAM_PLAIN_BYTES)
/* The refusal: a head, and a report of the refs of a 64 KiB list (at most 753). */
#define ANSWER_MAX ((size_t)1 << 20)

static const char continue_100[] = "HTTP/1.1 100 Continue\r\n\r\n";

enum hold_phase {
    /* Reading the command list; nothing has gone upstream. */
    HOLD_READING = 0,
    /* Allowed: after the head, the held bytes go upstream. */
    HOLD_RELEASING,
    /* Refused: the answer goes to the client while the rest of the body is dropped. */
    HOLD_DRAINING,
    /* Released: forwarding as usual. */
    HOLD_DONE,
};

struct sl__git_hold {
    enum hold_phase phase;
    /* The body bytes taken so far, decoded (at most HELD_MAX). */
    struct sl_buf held;
    struct sl_gitpush_reader reader;
    /* A command names the default or a protected branch. */
    bool protected_ref;
    /* The request body ended (its last byte was taken). */
    bool body_done;
    /* RELEASING: held bytes written upstream, and whether a chunked body's chunk header went.
     * DRAINING: answer bytes written to the client. */
    size_t sent;
    bool framed;
    /* DRAINING: the response, its body's length, and whether the connection goes on. */
    struct sl_buf answer;
    size_t answer_body;
    bool keep;
};

bool sl__conn_git_hold(struct sl__conn *c, const struct sl_h1_head *h)
{
    const struct sl_h1_header *ce = sl_h1_find(h, "content-encoding");
    struct sl__git_hold *g;

    if (sl_h1_count(h, "content-encoding") > 1
        || (ce != NULL && !sl_h1_name_is(ce->value, "identity"))) {
        sl__conn_refuse(c, SL_REASON_GIT_BAD_PUSH, 400,
                        "a push body with a Content-Encoding cannot be read", false);
        return false;
    }
    if (h->body == SL_H1_BODY_NONE) {
        sl__conn_refuse(c, SL_REASON_GIT_BAD_PUSH, 400, "a push without a body", true);
        return false;
    }
    g = sl_calloc(1, sizeof(*g));
    if (g == NULL) {
        sl__conn_refuse_reason(c, SL_REASON_OUT_OF_MEMORY,
                               "the proxy ran out of memory holding the push", false);
        return false;
    }
    sl_buf_init(&g->held, HELD_MAX);
    sl_buf_init(&g->answer, ANSWER_MAX);
    sl_gitpush_reader_init(&g->reader);
    c->git = g;
    /* Nothing is injected until the push is released. */
    c->r.credential = false;
    if (h->expect_continue && h->version_minor == 1) {
        /* The client waits for it before its body, which is what must be read first. When the
         * output is full, the client sends its body after its own wait instead (a failed
         * stream is noticed by the next round). */
        if (sl_stream_write_all(&c->client, continue_100, sizeof(continue_100) - 1) != 0) {
            sl_log(SL_LOG_DEBUG, c->id, "msg=\"100 Continue not sent\"");
        }
    }
    return true;
}

void sl__conn_git_finish(struct sl__conn *c)
{
    struct sl__git_hold *g = c->git;

    if (g == NULL) {
        return;
    }
    sl_buf_finish(&g->held);
    sl_buf_finish(&g->answer);
    sl_free(g);
    c->git = NULL;
}

bool sl__conn_git_holds(const struct sl__conn *c)
{
    return c->git->phase == HOLD_READING || c->git->phase == HOLD_DRAINING;
}

bool sl__conn_git_releasing(const struct sl__conn *c)
{
    return c->git->phase == HOLD_RELEASING;
}

/* The exchange cannot go on (the client failed or left): its line, then close. */
static int abort_hold(struct sl__conn *c)
{
    sl__conn_audit(c);
    sl__conn_close(c);
    return -1;
}

/* Reads the commands held so far; notes a protected ref. Returns the reader's state. */
static enum sl_gitpush_event judge(struct sl__conn *c)
{
    struct sl__git_hold *g = c->git;
    struct sl_gitpush_cmd cmd;
    enum sl_gitpush_event ev;

    while ((ev = sl_gitpush_next(&g->reader, g->held.p, g->held.len, &cmd)) == SL_GITPUSH_COMMAND) {
        if (sl_git_ref_is_protected(c->dec.git_push, cmd.ref)) {
            g->protected_ref = true;
        }
    }
    return ev;
}

/* Takes the client's body events into `held` (keep) or drops them, until the body ends, the
 * input runs dry, or (keeping) the command list is complete. Returns 1 on progress, 0 for none,
 * or -1 when the body is malformed (`*bad` is the parser's error) or does not fit. */
static int take_body(struct sl__conn *c, bool keep, int *bad)
{
    struct sl__git_hold *g = c->git;
    int progress = 0;

    while (!g->body_done && (!keep || g->reader.done == SL_GITPUSH_MORE)) {
        struct sl_slice in = sl_stream_peek(&c->client);
        struct sl_h1_event ev;
        int n = sl_h1_feed(&c->req, in.p, in.n, &ev);

        if (n < 0) {
            *bad = n;
            return -1;
        }
        if (ev.type == SL_H1_EV_BODY && keep && sl_buf_append(&g->held, ev.body.p, ev.body.n) < 0) {
            *bad = SL_ETOOBIG;
            return -1;
        }
        sl_stream_consume(&c->client, (size_t)n);
        if (n > 0 || ev.type != SL_H1_EV_NONE) {
            progress = 1;
        }
        if (ev.type == SL_H1_EV_END || ev.type == SL_H1_EV_UPGRADE) {
            g->body_done = true;
        } else if (ev.type == SL_H1_EV_BODY && keep) {
            (void)judge(c);
        } else if (ev.type == SL_H1_EV_NONE && (n == 0 || (size_t)n == in.n)) {
            break;
        }
    }
    return progress;
}

/* The push names a protected ref: the receive-pack result that rejects every ref, then the
 * rest of the body dropped (DRAINING). Nothing went upstream, and nothing will. */
static int start_drain(struct sl__conn *c)
{
    struct sl__git_hold *g = c->git;
    const struct sl_h1_head *h = sl_h1_head(&c->req);
    unsigned caps = g->reader.caps;
    struct sl_buf body;
    int rc;

    if ((caps & (SL_GITPUSH_CAP_REPORT_STATUS | SL_GITPUSH_CAP_REPORT_STATUS_V2)) == 0) {
        /* Without report-status git could not tell the refusal from a success. */
        sl__conn_refuse(c, SL_REASON_GIT_PROTECTED_BRANCH, 403, SL_GIT_PROTECTED_MESSAGE, false);
        return -1;
    }
    sl_upstream_close(c->up);
    c->up = NULL;
    g->keep = c->r.client_keep_alive && !c->close_after && !c->w->draining && h->version_minor == 1;
    sl_buf_init(&body, ANSWER_MAX);
    rc = sl_gitpush_refusal(&body, g->held.p, g->reader.pos, caps, SL_GIT_PROTECTED_MESSAGE);
    if (rc == 0) {
        rc = sl_buf_printf(&g->answer,
                           "HTTP/1.1 200 OK\r\nContent-Type: application/x-git-receive-pack-result"
                           "\r\nCache-Control: no-cache\r\nX-Sluice-Reason: %s\r\n"
                           "Content-Length: %zu\r\n%s\r\n",
                           sl_reason_code(SL_REASON_GIT_PROTECTED_BRANCH), body.len,
                           g->keep ? "" : "Connection: close\r\n");
    }
    if (rc == 0) {
        rc = sl_buf_append(&g->answer, body.p, body.len);
    }
    g->answer_body = body.len;
    sl_buf_finish(&body);
    c->r.allow = false;
    c->r.reason = SL_REASON_GIT_PROTECTED_BRANCH;
    c->r.status = 200;
    if (rc < 0) {
        c->r.status = 0;
        return abort_hold(c);
    }
    sl_log(SL_LOG_INFO, c->id, "msg=\"push refused\" repo=%s reason=%s",
           sl_git_repo(c->dec.git_push), sl_reason_code(SL_REASON_GIT_PROTECTED_BRANCH));
    /* The answer is the exchange's final response: a timeout from now on just ends it. */
    c->resp_stage = SL__MSG_BODY;
    g->phase = HOLD_DRAINING;
    sl__conn_rearm(c, SL__PHASE_IDLE);
    return 1;
}

/* HOLD_READING: the body's first bytes, until the command list is read and judged. */
static int read_round(struct sl__conn *c)
{
    struct sl__git_hold *g = c->git;
    int bad = 0;
    int progress = take_body(c, true, &bad);

    if (progress < 0) {
        if (bad == SL_ETOOBIG) {
            sl__conn_refuse(c, SL_REASON_GIT_BAD_PUSH, 400, "the push's commands do not fit",
                            false);
        } else if (bad == SL_ENOMEM) {
            sl__conn_refuse_reason(c, SL_REASON_OUT_OF_MEMORY,
                                   "the proxy is out of memory for the push", false);
        } else {
            sl__conn_refuse(c, SL_REASON_BAD_REQUEST, 400, sl_h1_error(&c->req), false);
        }
        return -1;
    }
    switch (judge(c)) {
    case SL_GITPUSH_BAD:
        sl__conn_refuse(c, SL_REASON_GIT_BAD_PUSH, 400, g->reader.why, false);
        return -1;
    case SL_GITPUSH_END:
        if (g->protected_ref) {
            return start_drain(c);
        }
        /* The head goes first (forward_request()), then sl__conn_git_release(). */
        g->phase = HOLD_RELEASING;
        c->r.credential = true;
        return 1;
    case SL_GITPUSH_MORE:
    case SL_GITPUSH_COMMAND:
        break;
    }
    if (g->body_done) {
        sl__conn_refuse(c, SL_REASON_GIT_BAD_PUSH, 400,
                        "the body ended inside the push's command list", false);
        return -1;
    }
    if (sl_stream_peek(&c->client).n == 0 && sl_stream_in_status(&c->client) != 0) {
        return abort_hold(c);
    }
    if (progress > 0) {
        /* A command list arriving slowly is progress, as an upload is. */
        sl__conn_rearm(c, SL__PHASE_UPSTREAM);
    }
    return progress;
}

/* HOLD_DRAINING: the answer out, the rest of the body in and dropped; then the exchange ends. */
static int drain_round(struct sl__conn *c)
{
    struct sl__git_hold *g = c->git;
    int progress = 0;
    int bad = 0;

    while (g->sent < g->answer.len) {
        int n = sl_stream_write(&c->client, g->answer.p + g->sent, g->answer.len - g->sent);

        if (n < 0) {
            return abort_hold(c);
        }
        if (n == 0) {
            break;
        }
        g->sent += (size_t)n;
        progress = 1;
    }
    if (g->sent == g->answer.len) {
        c->r.bytes_down = g->answer_body;
    }
    switch (take_body(c, false, &bad)) {
    case -1:
        /* Malformed after the answer went: the client learns it from the close. */
        return abort_hold(c);
    case 0:
        break;
    default:
        progress = 1;
        break;
    }
    if (g->sent == g->answer.len && g->body_done) {
        bool keep = g->keep && !c->close_after && !c->w->draining;

        sl__conn_audit(c);
        /* Both free the held state: nothing of it is touched after. */
        if (keep) {
            sl__conn_end_exchange(c);
        } else {
            sl__conn_end(c);
        }
        return 1;
    }
    if (g->sent == g->answer.len && !g->body_done && sl_stream_peek(&c->client).n == 0
        && sl_stream_in_status(&c->client) != 0) {
        /* The client stopped sending before its body ended (a half-close): the answer, all
         * handed to the stream, still leaves; then the connection ends. */
        sl__conn_audit(c);
        sl__conn_end(c);
        return 1;
    }
    if (progress > 0) {
        sl__conn_rearm(c, SL__PHASE_IDLE);
    }
    return progress;
}

int sl__conn_git_round(struct sl__conn *c)
{
    if (sl_stream_error(&c->client) != 0) {
        return abort_hold(c);
    }
    switch (c->git->phase) {
    case HOLD_READING:
        return read_round(c);
    case HOLD_DRAINING:
        return drain_round(c);
    case HOLD_RELEASING:
    case HOLD_DONE:
        break;
    }
    return 0;
}

int sl__conn_git_release(struct sl__conn *c, struct sl_stream *us)
{
    struct sl__git_hold *g = c->git;
    bool chunked = sl_h1_head(&c->req)->body == SL_H1_BODY_CHUNKED;
    int progress = 0;
    int rc;

    if (chunked && !g->framed) {
        char frame[SL_H1_CHUNK_HEADER_MAX];
        size_t n = sl_h1_chunk_header(frame, sizeof(frame), g->held.len);

        /* The header goes with at least one byte of the chunk, so that a stale pooled upstream
         * is retried (conn_forward.c) only while nothing of the body has gone. */
        if (!sl_stream_has_room(us, n + 1)) {
            return 0;
        }
        rc = sl_stream_write_all(us, frame, n);
        if (rc < 0) {
            return rc == SL_EAGAIN ? 0 : -1;
        }
        g->framed = true;
    }
    while (g->sent < g->held.len) {
        int n = sl_stream_write(us, g->held.p + g->sent, g->held.len - g->sent);

        if (n < 0) {
            return -1;
        }
        if (n == 0) {
            return progress;
        }
        g->sent += (size_t)n;
        c->r.bytes_up += (uint64_t)n;
        progress = 1;
    }
    if (chunked) {
        rc = sl_stream_write_all(us, SL_H1_CHUNK_END, SL_H1_CHUNK_END_LEN);
        if (rc < 0) {
            return rc == SL_EAGAIN ? progress : -1;
        }
    }
    g->phase = HOLD_DONE;
    if (g->body_done) {
        c->req_stage = SL__MSG_END_OWED;
    }
    sl__conn_rearm(c, SL__PHASE_UPSTREAM);
    return 1;
}

bool sl__conn_git_on_timer(struct sl__conn *c)
{
    if (c->git == NULL || c->git->phase != HOLD_READING) {
        return false;
    }
    sl__conn_refuse(c, SL_REASON_GIT_BAD_PUSH, 408, "the push's commands did not arrive in time",
                    false);
    return true;
}
