/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/sandbox/docker_http.c - the transport of the Docker backend: the Engine API over the
 * daemon's unix socket, or over TCP with TLS client certificates (docker.h
 * sl_docker_launcher_create_tls, and each node's engine of control/sandbox/swarm), with libcurl's
 * multi interface, driven by the loop (one uv_poll_t per
 * socket curl opens, one uv_timer_t for its timeouts), and the reading of its answers. See
 * docker_int.h.
 */
#include <curl/curl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>
#include <sodium.h>
#include <uv.h>

#include "base/buf.h"
#include "base/mem.h"
#include "control/sandbox/docker.h"
#include "control/sandbox/docker_int.h"
#include "control/sandbox/dockerframe.h"

/* The Engine API version every request names (Docker 20.10 speaks 1.41 at most). */
#define API_PATH "/v1.41"

static void check_transfers(struct sl_docker *d);

void sl__docker_maybe_freed(struct sl_docker *d)
{
    if (--d->pending_closes > 0) {
        return;
    }
    if (d->closed != NULL) {
        d->closed(d->closed_arg);
    }
    sl_free(d->origin);
    sl_free(d->ca_file);
    sl_free(d->cert_file);
    sl_free(d->key_file);
    sl_free(d->wall_image);
    sl_free(d->swarm_proxies);
    sl_free(d);
    curl_global_cleanup();
}

static void on_handle_closed(uv_handle_t *h)
{
    sl__docker_maybe_freed(h->data);
}

static void on_sock_closed(uv_handle_t *h)
{
    struct sl__docker_sock *s = SL_CONTAINER_OF((uv_poll_t *)h, struct sl__docker_sock, poll);
    struct sl_docker *d = s->d;

    sl_free(s);
    sl__docker_maybe_freed(d);
}

static void sock_close(struct sl__docker_sock *s)
{
    struct sl_docker *d = s->d;

    sl_list_remove(&s->link);
    (void)uv_poll_stop(&s->poll);
    d->pending_closes++;
    uv_close((uv_handle_t *)&s->poll, on_sock_closed);
}

static void on_poll(uv_poll_t *h, int status, int events)
{
    struct sl__docker_sock *s = SL_CONTAINER_OF(h, struct sl__docker_sock, poll);
    struct sl_docker *d = s->d;
    int flags = 0;
    int running = 0;

    if (status < 0) {
        flags = CURL_CSELECT_ERR;
    } else {
        flags |= (events & UV_READABLE) != 0 ? CURL_CSELECT_IN : 0;
        flags |= (events & UV_WRITABLE) != 0 ? CURL_CSELECT_OUT : 0;
    }
    (void)curl_multi_socket_action(d->multi, s->fd, flags, &running);
    check_transfers(d);
}

/*
 * The socket callback must not fail: a -1 kills the whole multi handle (every later transfer).
 * When watching a socket is impossible, the transfer that wanted it is failed from the loop.
 */
static void fail_transfer_soon(CURL *easy)
{
    char *priv = NULL;
    struct sl__docker_op *o;

    (void)curl_easy_getinfo(easy, CURLINFO_PRIVATE, &priv);
    o = (struct sl__docker_op *)(void *)priv;
    if (o == NULL || o->failing) {
        return;
    }
    o->failing = true;
    sl__docker_set_err(o, SL_ENOMEM, "docker: cannot watch a socket (out of memory)");
    sl__docker_op_finish_soon(o);
}

static int on_curl_socket(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
    struct sl_docker *d = userp;
    struct sl__docker_sock *s = socketp;
    int events = 0;

    if (what == CURL_POLL_REMOVE) {
        if (s != NULL) {
            (void)curl_multi_assign(d->multi, fd, NULL);
            sock_close(s);
        }
        return 0;
    }
    if (s == NULL) {
        /* sl__docker_start_request() keeps one spare, so this allocation is the rare second socket.
         */
        s = d->spare != NULL ? d->spare : sl_calloc(1, sizeof(*s));
        d->spare = NULL;
        if (s == NULL || uv_poll_init_socket(d->loop, &s->poll, fd) < 0) {
            d->spare = s;
            fail_transfer_soon(easy);
            return 0;
        }
        s->fd = fd;
        s->d = d;
        sl_list_push_front(&d->socks, &s->link);
        (void)curl_multi_assign(d->multi, fd, s);
    }
    events |= (what == CURL_POLL_IN || what == CURL_POLL_INOUT) ? UV_READABLE : 0;
    events |= (what == CURL_POLL_OUT || what == CURL_POLL_INOUT) ? UV_WRITABLE : 0;
    if (uv_poll_start(&s->poll, events, on_poll) < 0) {
        fail_transfer_soon(easy);
    }
    return 0;
}

static void on_curl_timer(uv_timer_t *t)
{
    struct sl_docker *d = t->data;
    int running = 0;

    (void)curl_multi_socket_action(d->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    check_transfers(d);
}

static int on_curl_timer_change(CURLM *multi, long timeout_ms, void *userp)
{
    struct sl_docker *d = userp;

    (void)multi;
    if (timeout_ms < 0) {
        (void)uv_timer_stop(&d->timer);
        return 0;
    }
    /* 0 means "now": run it from the loop, never from inside a curl call. */
    return uv_timer_start(&d->timer, on_curl_timer, (uint64_t)timeout_ms, 0) < 0 ? -1 : 0;
}

/* Frees a request's header list, each line wiped first (one may carry a credential). */
static void free_headers(struct curl_slist *h)
{
    for (struct curl_slist *p = h; p != NULL; p = p->next) {
        sodium_memzero(p->data, strlen(p->data));
    }
    curl_slist_free_all(h);
}

/* Ends the transfer in flight (if any) without looking at its result. */
void sl__docker_drop_transfer(struct sl__docker_op *o)
{
    if (o->easy != NULL) {
        (void)curl_multi_remove_handle(o->d->multi, o->easy);
        curl_easy_cleanup(o->easy);
        o->easy = NULL;
    }
    free_headers(o->hdrs);
    o->hdrs = NULL;
    o->stream = false;
}

static void check_transfers(struct sl_docker *d)
{
    CURLMsg *m;
    int left = 0;

    while ((m = curl_multi_info_read(d->multi, &left)) != NULL) {
        struct sl__docker_op *o;
        char *priv = NULL;

        if (m->msg != CURLMSG_DONE) {
            continue;
        }
        (void)curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &priv);
        o = (struct sl__docker_op *)(void *)priv;
        o->cc = m->data.result;
        (void)curl_easy_getinfo(o->easy, CURLINFO_RESPONSE_CODE, &o->status);
        (void)curl_easy_getinfo(o->easy, CURLINFO_OS_ERRNO, &o->os_errno);
        sl__docker_drop_transfer(o);
        if (o->failing) {
            sl__docker_op_finish(o);
            continue;
        }
        o->on_response(o);
    }
}

static size_t on_curl_header(char *p, size_t size, size_t n, void *arg)
{
    static const char name[] = "X-Docker-Container-Path-Stat:";
    struct sl__docker_op *o = arg;
    size_t len = size * n;
    size_t k = sizeof(name) - 1;

    if (len > k && strncasecmp(p, name, k) == 0) {
        const char *v = p + k;
        size_t vn = len - k;

        while (vn > 0 && (*v == ' ' || *v == '\t')) {
            v++;
            vn--;
        }
        while (vn > 0 && (v[vn - 1] == '\r' || v[vn - 1] == '\n' || v[vn - 1] == ' ')) {
            vn--;
        }
        o->stat_seen = true;
        o->stat_over = vn >= sizeof(o->stat_hdr);
        if (!o->stat_over) {
            memcpy(o->stat_hdr, v, vn);
            o->stat_hdr[vn] = '\0';
        }
    }
    return len;
}

/* Keeps what fits under each stream's cap and counts the rest as truncated. */
static void on_frame(void *arg, int stream, const uint8_t *p, size_t n)
{
    struct sl__docker_op *o = arg;
    int rc = 0;

    if (stream == SL_DOCKERFRAME_STDOUT) {
        rc = sl_dockerframe_keep(&o->out, o->max_out, p, n, &o->out_truncated);
    } else if (stream == SL_DOCKERFRAME_STDERR) {
        rc = sl_dockerframe_keep(&o->errout, o->max_err, p, n, &o->err_truncated);
    }
    if (rc < 0) {
        o->oom = true;
    }
}

static size_t on_curl_write(char *p, size_t size, size_t n, void *arg)
{
    struct sl__docker_op *o = arg;
    size_t len = size * n;
    long status = 0;
    int rc;

    if (o->stream) {
        (void)curl_easy_getinfo(o->easy, CURLINFO_RESPONSE_CODE, &status);
        if (status == 200) {
            if (sl_dockerframe_feed(&o->frames, p, len, on_frame, o) < 0) {
                o->stream_bad = true;
                return 0;
            }
            return o->oom ? 0 : len;
        }
    }
    if (o->pull != NULL) {
        (void)curl_easy_getinfo(o->easy, CURLINFO_RESPONSE_CODE, &status);
        if (status == 200) {
            return sl__docker_pull_feed(o, p, len) ? len : 0;
        }
    }
    rc = sl_buf_append(&o->resp, p, len);
    if (rc < 0) {
        o->resp_over = rc == SL_ETOOBIG;
        o->oom = rc == SL_ENOMEM;
        return 0;
    }
    return len;
}

/*
 * Starts one HTTP call for `o`: `method` on the engine's API (o->host's, or the launcher's) +
 * `path` (already escaped), with `body`
 * (borrowed until the transfer ends; NULL for none) of type `ctype`. `resp_max` caps the body
 * kept. `done` runs from the loop when it ends. Returns 0 or < 0 with o->rc/err set.
 */
int sl__docker_start_request(struct sl__docker_op *o, const char *method, const char *path,
                             const void *body, size_t body_len, const char *ctype, size_t resp_max,
                             void (*done)(struct sl__docker_op *o))
{
    struct sl_docker *d = o->d;
    struct sl_buf url;
    CURL *e = NULL;
    uint64_t now = uv_now(d->loop);
    uint64_t timeout = SL__DOCKER_DEADLINE_MS;
    char line[160];
    bool ok = true;
    int rc;

    sl_buf_init(&url, SL__DOCKER_URL_MAX);
    if (d->shut) {
        sl__docker_set_err(o, SL_ECANCELED, "docker: the launcher is closing");
        return o->rc;
    }
    sl_buf_finish(&o->resp);
    sl_buf_init(&o->resp, resp_max);
    o->resp_max = resp_max;
    o->resp_over = false;
    o->oom = false;
    o->stream_bad = false;
    o->status = 0;
    o->cc = CURLE_OK;
    o->os_errno = 0;
    o->stat_seen = false;
    o->stat_over = false;
    o->curl_err[0] = '\0';
    o->timeout_is_deadline = false;
    if (o->deadline_ms != 0) {
        uint64_t left = o->deadline_ms > now ? o->deadline_ms - now : 1;

        if (o->stream || o->pull != NULL || left <= timeout) {
            timeout = left;
            o->timeout_is_deadline = true;
        }
    } else if (o->stream) {
        timeout = 0;
    }
    if (o->host != NULL) {
        rc = sl_buf_printf(&url, "https://%s:%u", o->host, d->port);
    } else {
        rc = sl_buf_append_str(&url, d->origin != NULL ? d->origin : "http://localhost");
    }
    rc = rc < 0 ? rc : sl_buf_append_str(&url, API_PATH);
    rc = rc < 0 ? rc : sl_buf_append_str(&url, path);
    if (rc < 0) {
        sl__docker_set_err(o, rc, "%s",
                           rc == SL_ETOOBIG ? "docker: request URL too long"
                                            : "docker: out of memory");
        goto fail;
    }
    if (d->spare == NULL) {
        d->spare = sl_calloc(1, sizeof(*d->spare));
    }
    e = d->spare != NULL ? curl_easy_init() : NULL;
    if (e == NULL) {
        sl__docker_set_err(o, SL_ENOMEM, "docker: cannot start a request (out of memory)");
        goto fail;
    }
    if (d->ca_file == NULL) {
        ok = ok && curl_easy_setopt(e, CURLOPT_UNIX_SOCKET_PATH, d->socket_path) == CURLE_OK;
        ok = ok && curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http") == CURLE_OK;
    } else {
        /* The engine's certificate must chain to our CA and name the address asked for; ours
         * is what the engine (--tlsverify) requires. */
        ok = ok && curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "https") == CURLE_OK;
        ok = ok && curl_easy_setopt(e, CURLOPT_CAINFO, d->ca_file) == CURLE_OK;
        ok = ok && curl_easy_setopt(e, CURLOPT_SSLCERT, d->cert_file) == CURLE_OK;
        ok = ok && curl_easy_setopt(e, CURLOPT_SSLKEY, d->key_file) == CURLE_OK;
        ok = ok && curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L) == CURLE_OK;
        ok = ok && curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L) == CURLE_OK;
    }
    ok = ok && curl_easy_setopt(e, CURLOPT_URL, sl_buf_cstr(&url)) == CURLE_OK;
    ok = ok && curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L) == CURLE_OK;
    ok = ok && curl_easy_setopt(e, CURLOPT_PRIVATE, (char *)o) == CURLE_OK;
    ok = ok && curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_curl_write) == CURLE_OK;
    ok = ok && curl_easy_setopt(e, CURLOPT_WRITEDATA, o) == CURLE_OK;
    ok = ok && curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_curl_header) == CURLE_OK;
    ok = ok && curl_easy_setopt(e, CURLOPT_HEADERDATA, o) == CURLE_OK;
    ok = ok && curl_easy_setopt(e, CURLOPT_ERRORBUFFER, o->curl_err) == CURLE_OK;
    ok = ok && curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)timeout) == CURLE_OK;
    if (strcmp(method, "HEAD") == 0) {
        ok = ok && curl_easy_setopt(e, CURLOPT_NOBODY, 1L) == CURLE_OK;
    } else if (strcmp(method, "GET") != 0) {
        ok = ok && curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method) == CURLE_OK;
    }
    if (body != NULL) {
        ok = ok && curl_easy_setopt(e, CURLOPT_POST, 1L) == CURLE_OK;
        ok = ok && curl_easy_setopt(e, CURLOPT_POSTFIELDS, body) == CURLE_OK;
        ok = ok
             && curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len) == CURLE_OK;
        /* No 100-continue round trip for large bodies. */
        o->hdrs = curl_slist_append(o->hdrs, "Expect:");
        ok = ok && o->hdrs != NULL;
        if (ok && ctype != NULL) {
            struct curl_slist *h;

            (void)snprintf(line, sizeof(line), "Content-Type: %s", ctype);
            h = curl_slist_append(o->hdrs, line);
            ok = h != NULL;
            o->hdrs = h != NULL ? h : o->hdrs;
        }
    }
    if (o->extra_hdr != NULL) {
        struct curl_slist *h = curl_slist_append(o->hdrs, o->extra_hdr);

        ok = ok && h != NULL;
        o->hdrs = h != NULL ? h : o->hdrs;
    }
    if (o->hdrs != NULL) {
        ok = ok && curl_easy_setopt(e, CURLOPT_HTTPHEADER, o->hdrs) == CURLE_OK;
    }
    if (!ok) {
        sl__docker_set_err(o, SL_ENOMEM, "docker: cannot set up a request");
        goto fail;
    }
    o->easy = e;
    o->on_response = done;
    if (curl_multi_add_handle(d->multi, e) != CURLM_OK) {
        o->easy = NULL;
        sl__docker_set_err(o, SL_ENOMEM, "docker: cannot start a request");
        goto fail;
    }
    sl_buf_finish(&url);
    return 0;
fail:
    curl_easy_cleanup(e);
    free_headers(o->hdrs);
    o->hdrs = NULL;
    sl_buf_finish(&url);
    return o->rc;
}

int sl__docker_start_requestf(struct sl__docker_op *o, const char *method, const void *body,
                              size_t body_len, const char *ctype, size_t resp_max,
                              void (*done)(struct sl__docker_op *o), const char *fmt, ...)
{
    char path[1024];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(path, sizeof(path), fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof(path)) {
        sl__docker_set_err(o, SL_ETOOBIG, "docker: request path too long");
        return o->rc;
    }
    return sl__docker_start_request(o, method, path, body, body_len, ctype, resp_max, done);
}

/*
 * Looks at the transfer that just ended. Returns 0 when it completed with status `ok1` or
 * `ok2`; otherwise sets o->rc/err ("docker: <daemon message>" when the daemon sent one) and
 * returns o->rc. `what` names the call for messages without a daemon text.
 */
int sl__docker_check_response(struct sl__docker_op *o, const char *what, long ok1, long ok2)
{
    json_t *j;
    const char *msg;
    int rc;

    if (o->cc != CURLE_OK) {
        char where[SL__DOCKER_SOCKET_PATH_MAX + 64];

        if (o->host != NULL) {
            (void)snprintf(where, sizeof(where), "%s:%u", o->host, o->d->port);
        } else {
            (void)snprintf(where, sizeof(where), "%s",
                           o->d->origin != NULL ? o->d->origin : o->d->socket_path);
        }
        if (o->oom) {
            sl__docker_set_err(o, SL_ENOMEM, "docker: %s: out of memory", what);
        } else if (o->resp_over) {
            sl__docker_set_err(o, SL_ETOOBIG, "docker: %s: the answer is over %zu bytes", what,
                               o->resp_max);
        } else if (o->cc == CURLE_OPERATION_TIMEDOUT) {
            sl__docker_set_err(o, SL_EUNAVAILABLE, "docker: %s: no answer in time from %s", what,
                               where);
        } else if (o->cc == CURLE_COULDNT_CONNECT && o->os_errno != 0) {
            /* curl's own text names "localhost port 80", which a unix socket is not. */
            sl__docker_set_err(o, SL_EUNAVAILABLE, "docker: %s: cannot connect to %s: %s", what,
                               where, strerror((int)o->os_errno));
        } else {
            sl__docker_set_err(o, SL_EUNAVAILABLE, "docker: %s: %s (%s)", what,
                               o->curl_err[0] != '\0' ? o->curl_err : curl_easy_strerror(o->cc),
                               where);
        }
        return o->rc;
    }
    if (o->status == ok1 || o->status == ok2) {
        return 0;
    }
    rc = o->status == 404 ? SL_ENOTFOUND : o->status >= 400 && o->status < 500 ? SL_EINVAL : SL_EIO;
    j = json_loadb((const char *)o->resp.p, o->resp.len, 0, NULL);
    msg = json_string_value(json_object_get(j, "message"));
    if (msg != NULL && msg[0] != '\0') {
        sl__docker_set_err(o, rc, "docker: %.400s", msg);
    } else {
        sl__docker_set_err(o, rc, "docker: %s: HTTP %ld", what, o->status);
    }
    json_decref(j);
    return rc;
}

/* Parses the response body as a JSON object (a new reference), or sets o->rc/err. */
json_t *sl__docker_response_object(struct sl__docker_op *o, const char *what)
{
    json_t *j = json_loadb((const char *)o->resp.p, o->resp.len, 0, NULL);

    if (!json_is_object(j)) {
        json_decref(j);
        sl__docker_set_err(o, SL_EIO, "docker: %s: the answer is not a JSON object", what);
        return NULL;
    }
    return j;
}

/* Appends `s` percent-encoded (RFC 3986 unreserved characters kept) to `b`. */
int sl__docker_append_escaped(struct sl_buf *b, const char *s)
{
    char *e = curl_easy_escape(NULL, s, (int)strlen(s));
    int rc;

    if (e == NULL) {
        return SL_ENOMEM;
    }
    rc = sl_buf_append_str(b, e);
    curl_free(e);
    return rc;
}

int sl__docker_http_init(struct sl_docker *d)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        return SL_EIO;
    }
    d->multi = curl_multi_init();
    if (d->multi == NULL
        || curl_multi_setopt(d->multi, CURLMOPT_SOCKETFUNCTION, on_curl_socket) != CURLM_OK
        || curl_multi_setopt(d->multi, CURLMOPT_SOCKETDATA, d) != CURLM_OK
        || curl_multi_setopt(d->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer_change) != CURLM_OK
        || curl_multi_setopt(d->multi, CURLMOPT_TIMERDATA, d) != CURLM_OK) {
        (void)curl_multi_cleanup(d->multi);
        d->multi = NULL;
        curl_global_cleanup();
        return SL_EIO;
    }
    /* A timer init on a live loop cannot fail. */
    (void)uv_timer_init(d->loop, &d->timer);
    d->timer.data = d;
    return 0;
}

void sl__docker_http_shutdown(struct sl_docker *d)
{
    /* May call on_curl_socket(CURL_POLL_REMOVE) for pooled connections. */
    (void)curl_multi_cleanup(d->multi);
    d->multi = NULL;
    while (!sl_list_empty(&d->socks)) {
        sock_close(SL_CONTAINER_OF(d->socks.next, struct sl__docker_sock, link));
    }
    sl_free(d->spare);
    d->spare = NULL;
    (void)uv_timer_stop(&d->timer);
    d->pending_closes++;
    uv_close((uv_handle_t *)&d->timer, on_handle_closed);
}
