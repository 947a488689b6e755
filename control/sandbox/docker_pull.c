/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/sandbox/docker_pull.c - pull_image of the Docker backend (see docker_int.h):
 * `POST /images/create?fromImage=NAME&tag=TAG` with the registry's credentials in X-Registry-Auth,
 * its progress stream read as it arrives (control/sandbox/dockerpull) and reported to the
 * caller, and its failure named for a person: the daemon answers most failures with a 500 and
 * its text, or with an error line inside a 200 stream.
 *
 * The X-Registry-Auth line is the only copy of the password the backend holds: built once,
 * wiped when the operation is released, and each request's copy of it wiped with the request's
 * header list (docker_http.c).
 */
#include <stdio.h>
#include <string.h>

#include <jansson.h>
#include <sodium.h>

#include "base/buf.h"
#include "base/mem.h"
#include "control/sandbox/docker_int.h"
#include "control/sandbox/dockerpull.h"

struct sl__docker_pull {
    struct sl_dockerpull stream;
    struct sl_dockerpull_ref ref;
    /* The reference as the caller named it. */
    char image[256];
    sl_launcher_progress_fn *progress;
    struct sl_launcher_pull_progress last;
};

void sl__docker_pull_release(struct sl__docker_op *o)
{
    if (o->extra_hdr != NULL) {
        sodium_memzero(o->extra_hdr, strlen(o->extra_hdr));
        sl_free(o->extra_hdr);
        o->extra_hdr = NULL;
    }
    if (o->pull != NULL) {
        sl_dockerpull_finish(&o->pull->stream);
        sl_free(o->pull);
        o->pull = NULL;
    }
}

bool sl__docker_pull_feed(struct sl__docker_op *o, const char *p, size_t n)
{
    struct sl__docker_pull *pl = o->pull;
    struct sl_launcher_pull_progress now;
    struct sl_dockerpull_progress dp;

    if (sl_dockerpull_feed(&pl->stream, p, n) < 0) {
        o->oom = true;
        return false;
    }
    sl_dockerpull_progress(&pl->stream, &dp);
    now = (struct sl_launcher_pull_progress){
        .layers = dp.layers,
        .layers_done = dp.layers_done,
        .bytes_done = dp.bytes_done,
        .bytes_total = dp.bytes_total,
    };
    if (pl->progress != NULL && memcmp(&now, &pl->last, sizeof(now)) != 0) {
        pl->last = now;
        pl->progress(o->arg, &now);
    }
    return true;
}

/* Records a failure of the pull named by `f`. */
static void fail_as(struct sl__docker_op *o, enum sl_dockerpull_failure f, const char *message)
{
    static const enum sl_launcher_pull_failure why[] = {
        [SL_DOCKERPULL_NOT_FOUND] = SL_LAUNCHER_PULL_NOT_FOUND,
        [SL_DOCKERPULL_AUTH] = SL_LAUNCHER_PULL_AUTH,
        [SL_DOCKERPULL_UNREACHABLE] = SL_LAUNCHER_PULL_UNREACHABLE,
        [SL_DOCKERPULL_OTHER] = SL_LAUNCHER_PULL_FAILED,
    };

    static const int codes[] = {
        [SL_DOCKERPULL_NOT_FOUND] = SL_ENOTFOUND,
        [SL_DOCKERPULL_AUTH] = SL_EPOLICY,
        [SL_DOCKERPULL_UNREACHABLE] = SL_EUNAVAILABLE,
        [SL_DOCKERPULL_OTHER] = SL_EIO,
    };
    char text[SL__DOCKER_ERR_MAX];

    sl_dockerpull_describe(f, o->pull->image, &o->pull->ref, message, text, sizeof(text));
    o->pull_why = why[f];
    sl__docker_set_err(o, codes[f], "%s", text);
}

static void on_pulled(struct sl__docker_op *o)
{
    struct sl__docker_pull *pl = o->pull;
    json_t *j;

    if (o->cc == CURLE_OPERATION_TIMEDOUT && o->timeout_is_deadline) {
        o->pull_why = SL_LAUNCHER_PULL_DEADLINE;
        sl__docker_set_err(o, SL_EUNAVAILABLE, "pulling %s did not finish in time", pl->image);
        sl__docker_op_finish(o);
        return;
    }
    if (o->cc != CURLE_OK || o->status == 0) {
        (void)sl__docker_check_response(o, "pull image", 200, 200);
        o->pull_why = SL_LAUNCHER_PULL_RUNTIME;
        sl__docker_op_finish(o);
        return;
    }
    if (o->status == 200) {
        sl_dockerpull_end(&pl->stream);
        if (pl->stream.failed) {
            fail_as(o, sl_dockerpull_classify(0, pl->stream.error), pl->stream.error);
        }
        sl__docker_op_finish(o);
        return;
    }
    j = json_loadb((const char *)o->resp.p, o->resp.len, 0, NULL);
    {
        const char *msg = json_string_value(json_object_get(j, "message"));
        char status[32];

        if (msg == NULL) {
            (void)snprintf(status, sizeof(status), "HTTP %ld", o->status);
            msg = status;
        }
        fail_as(o, sl_dockerpull_classify(o->status, msg), msg);
    }
    json_decref(j);
    sl__docker_op_finish(o);
}

void sl__docker_pull_image(struct sl_launcher *l, const struct sl_launcher_pull *p,
                           sl_launcher_progress_fn *progress, sl_launcher_pulled_fn *cb, void *arg)
{
    struct sl__docker_op *o = sl__docker_op_new((struct sl_docker *)l, SL__DOCKER_OP_PULL,
                                                (union sl__docker_op_cb){ .pulled = cb }, arg);
    struct sl__docker_pull *pl;
    struct sl_buf path;
    struct sl_buf hdr;
    int rc;

    if (o == NULL || o->rc < 0) {
        return;
    }
    pl = sl_calloc(1, sizeof(*pl));
    if (pl == NULL) {
        sl__docker_set_err(o, SL_ENOMEM, "docker: out of memory");
        sl__docker_fail_soon(o);
        return;
    }
    o->pull = pl;
    sl_dockerpull_init(&pl->stream);
    pl->progress = progress;
    if (p == NULL || p->image == NULL || strlen(p->image) >= sizeof(pl->image)
        || sl_dockerpull_split(p->image, &pl->ref) < 0) {
        sl__docker_reject(o, "docker: an image name must be 1-255 characters");
        return;
    }
    (void)snprintf(pl->image, sizeof(pl->image), "%s", p->image);
    if (p->deadline_ms != 0) {
        o->deadline_ms = uv_now(o->d->loop) + p->deadline_ms;
    }
    if (p->username != NULL) {
        /* All the room at once: no growth leaves a copy of the credentials behind. */
        sl_buf_init(&hdr, 64 * 1024);
        rc = sl_buf_reserve(&hdr, 64 * 1024 - 1) != NULL ? 0 : SL_ENOMEM;
        rc = rc < 0 ? rc : sl_buf_append_str(&hdr, "X-Registry-Auth: ");
        rc = rc < 0 ? rc : sl_dockerpull_auth(p->username, p->password, pl->ref.server, &hdr);
        if (rc == 0) {
            o->extra_hdr = sl_strdup(sl_buf_cstr(&hdr));
            rc = o->extra_hdr != NULL ? 0 : SL_ENOMEM;
        }
        if (hdr.p != NULL) {
            sodium_memzero(hdr.p, hdr.len);
        }
        sl_buf_finish(&hdr);
        if (rc < 0) {
            sl__docker_set_err(o, rc, "docker: cannot build the registry credentials: %s",
                               sl_strerror(rc));
            sl__docker_fail_soon(o);
            return;
        }
    }
    sl_buf_init(&path, SL__DOCKER_URL_MAX);
    rc = sl_buf_append_str(&path, "/images/create?fromImage=");
    rc = rc < 0 ? rc : sl__docker_append_escaped(&path, pl->ref.name);
    rc = rc < 0 ? rc : sl_buf_append_str(&path, "&tag=");
    rc = rc < 0 ? rc : sl__docker_append_escaped(&path, pl->ref.tag);
    if (rc < 0) {
        sl__docker_set_err(o, rc, "docker: cannot build the request: %s", sl_strerror(rc));
        sl__docker_fail_soon(o);
    } else {
        sl__docker_go(o, sl__docker_start_request(o, "POST", sl_buf_cstr(&path), NULL, 0, NULL,
                                                  SL__DOCKER_BODY_MAX, on_pulled));
    }
    sl_buf_finish(&path);
}
