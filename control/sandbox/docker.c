/* SPDX-License-Identifier: Apache-2.0 */
#include "control/sandbox/docker.h"

#include <archive.h>
#include <archive_entry.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <jansson.h>
#include <sodium.h>
#include <uv.h>

#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"
#include "control/sandbox/dockerframe.h"

#define API_BASE            "http://localhost/v1.41"
#define SOCKET_PATH_MAX     107u
#define CONTROL_BODY_MAX    (8u * 1024u * 1024u)
#define CONTROL_DEADLINE_MS 30000u
/* A tar carrying the files of one create or one write_file. */
#define TAR_MAX       (1024u * 1024u * 1024u)
#define URL_MAX       (16u * 1024u)
#define ERR_MAX       512u
#define STAT_HDR_MAX  4096u
#define NAME_MAX_LEN  128u
#define PATH_MAX_LEN  4096u
#define LABEL_MAX_LEN 1024u
#define EXEC_POLLS    10
#define EXEC_POLL_MS  50u
/* Slack for tar headers and padding around a file read through GET archive. */
#define TAR_SLACK (1024u * 1024u)
/* Launches that failed to allocate their operation, reported from a timer. */
#define OOM_NOTES 32u

/* Go's os.FileMode type bits, as in the stat header's `mode`. */
#define GO_MODE_DIR     (1u << 31)
#define GO_MODE_SYMLINK (1u << 27)
#define GO_MODE_TYPE \
    ((1u << 31) | (1u << 27) | (1u << 26) | (1u << 25) | (1u << 24) | (1u << 21) | (1u << 19))

enum op_kind {
    OP_PING = 0,
    OP_NETWORK,
    OP_IMAGE,
    OP_CREATE,
    OP_EXEC,
    OP_STAT,
    OP_READ,
    OP_WRITE,
    OP_REMOVE,
    OP_LIST,
};

union op_cb {
    sl_launcher_done_fn *done;
    sl_launcher_started_fn *started;
    sl_launcher_exec_fn *exec;
    sl_launcher_stat_fn *stat;
    sl_launcher_read_fn *read;
    sl_launcher_list_fn *list;
};

/* One socket libcurl asked the loop to watch. */
struct sock {
    uv_poll_t poll;
    curl_socket_t fd;
    struct sl_docker *d;
    struct sock *prev;
    struct sock *next;
};

/* One launcher operation: a short sequence of HTTP calls, one at a time. Loop thread only. */
struct op {
    struct sl_docker *d;
    struct op *prev;
    struct op *next;
    enum op_kind kind;
    union op_cb cb;
    void *arg;
    /* Loop time (uv_now, ms) at which the operation gives up; 0 for none (an exec without
     * deadline_ms). */
    uint64_t deadline_ms;
    /* Deferred completion, the exec's 50 ms exit-code polls. Freed op after its close. */
    uv_timer_t timer;
    bool finished;
    /* Set when the transfer in flight cannot go on (a socket could not be watched); the
     * operation completes from its timer with the error already recorded. */
    bool failing;

    /* The transfer in flight (NULL between transfers) and what it collected. */
    CURL *easy;
    struct curl_slist *hdrs;
    struct sl_buf resp;
    size_t resp_max;
    bool resp_over;
    bool oom;
    long status;
    CURLcode cc;
    /* The errno of a failed connect (CURLINFO_OS_ERRNO), 0 otherwise. */
    long os_errno;
    /* This transfer's timeout is the operation's deadline, not the 30 s control cap. */
    bool timeout_is_deadline;
    /* The exec attach stream: a 200 body goes to the frame demultiplexer. */
    bool stream;
    bool stream_bad;
    char stat_hdr[STAT_HDR_MAX];
    bool stat_seen;
    bool stat_over;
    char curl_err[CURL_ERROR_SIZE];
    void (*on_response)(struct op *o);

    /* The outcome. */
    int rc;
    char err[ERR_MAX];

    /* Arguments (owned copies) and state of the kinds that need them. */
    char *id;
    char *path;
    char *dir;
    char *name;
    /* A request body (owned) kept until its transfer ends. */
    char *body;
    size_t body_len;
    char *tar;
    size_t tar_len;
    size_t max;
    /* ensure_network */
    char *bridge;
    char *subnet;
    char *gateway;
    bool retried;
    /* create_and_start */
    char *network;
    char ip[64];
    int saved_rc;
    char saved_err[ERR_MAX];
    /* exec */
    char *exec_id;
    struct sl_dockerframe frames;
    struct sl_buf out;
    struct sl_buf errout;
    /* Bytes kept of each stream (the exec's max_stdout/max_stderr). */
    size_t max_out;
    size_t max_err;
    bool out_truncated;
    bool err_truncated;
    bool deadline_passed;
    int exit_code;
    int polls;
    /* stat / read_file; a symbolic link's target as the daemon resolved it (absolute, in the
     * container), and how many links were followed. */
    bool is_dir;
    uint64_t size;
    uint32_t mode;
    char *link_target;
    int hops;
    uint8_t *data;
    size_t data_len;
    /* list: ids still to inspect, and what was found. */
    json_t *ids;
    size_t next_id;
    json_t *found;
};

struct oom_note {
    enum op_kind kind;
    union op_cb cb;
    void *arg;
};

struct sl_docker {
    /* First: the launcher interface. */
    struct sl_launcher base;
    uv_loop_t *loop;
    char socket_path[SOCKET_PATH_MAX + 1];
    CURLM *multi;
    /* libcurl's timeout. */
    uv_timer_t timer;
    /* Reports launches whose operation could not be allocated. */
    uv_timer_t oom_timer;
    struct oom_note oom[OOM_NOTES];
    size_t n_oom;
    struct op *ops;
    struct sock *socks;
    /* One socket record allocated ahead, so that curl's socket callback need not allocate. */
    struct sock *spare;
    bool closing;
    bool shut;
    int pending_closes;
    void (*closed)(void *arg);
    void *closed_arg;
};

static void op_finish(struct op *o);
static void on_op_deferred(uv_timer_t *t);
static void check_transfers(struct sl_docker *d);
static void shutdown_launcher(struct sl_docker *d);

/* ---------------------------------------------------------------------------------------- */
/* Small helpers. */

static void set_err(struct op *o, int rc, const char *fmt, ...) SL_PRINTF(3, 4);

static void set_err(struct op *o, int rc, const char *fmt, ...)
{
    va_list ap;

    o->rc = rc;
    va_start(ap, fmt);
    (void)vsnprintf(o->err, sizeof(o->err), fmt, ap);
    va_end(ap);
    /* One line: the daemon's text may carry anything. */
    for (char *p = o->err; *p != '\0'; p++) {
        if ((unsigned char)*p < 0x20 || *p == 0x7f) {
            *p = ' ';
        }
    }
}

/* Docker names and ids: [A-Za-z0-9][A-Za-z0-9_.-]*, bounded. */
static bool is_name(const char *s)
{
    size_t n;

    if (s == NULL) {
        return false;
    }
    n = strlen(s);
    if (n == 0 || n > NAME_MAX_LEN || strchr("_.-", s[0]) != NULL) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        char c = s[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'
              || c == '.' || c == '-')) {
            return false;
        }
    }
    return true;
}

/* An absolute path without empty, `.` or `..` components (a trailing '/' is refused too). */
static bool is_abs_path(const char *s)
{
    const char *p;

    if (s == NULL || s[0] != '/' || strlen(s) > PATH_MAX_LEN) {
        return false;
    }
    if (s[1] == '\0') {
        return true;
    }
    p = s + 1;
    for (;;) {
        const char *e = strchr(p, '/');
        size_t n = e != NULL ? (size_t)(e - p) : strlen(p);

        if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.')) {
            return false;
        }
        if (e == NULL) {
            return true;
        }
        p = e + 1;
    }
}

/* NAME=value with a non-empty name. */
static bool is_env(const char *s)
{
    return s != NULL && s[0] != '=' && strchr(s, '=') != NULL;
}

/* Returns a new copy of `j` compact-serialised in sl_malloc memory, or NULL. */
static char *dump_json(const json_t *j, size_t *len)
{
    size_t n = json_dumpb(j, NULL, 0, JSON_COMPACT);
    char *s;

    if (n == 0) {
        return NULL;
    }
    s = sl_malloc(n + 1);
    if (s == NULL) {
        return NULL;
    }
    if (json_dumpb(j, s, n, JSON_COMPACT) != n) {
        sl_free(s);
        return NULL;
    }
    s[n] = '\0';
    *len = n;
    return s;
}

/* Appends `s` percent-encoded (RFC 3986 unreserved characters kept) to `b`. */
static int append_escaped(struct sl_buf *b, const char *s)
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

static const char *json_str(const json_t *obj, const char *key)
{
    return json_string_value(json_object_get(obj, key));
}

/* ---------------------------------------------------------------------------------------- */
/* libcurl on the loop. */

static void maybe_freed(struct sl_docker *d)
{
    if (--d->pending_closes > 0) {
        return;
    }
    if (d->closed != NULL) {
        d->closed(d->closed_arg);
    }
    sl_free(d);
    curl_global_cleanup();
}

static void on_handle_closed(uv_handle_t *h)
{
    maybe_freed(h->data);
}

static void on_sock_closed(uv_handle_t *h)
{
    struct sock *s = SL_CONTAINER_OF((uv_poll_t *)h, struct sock, poll);
    struct sl_docker *d = s->d;

    sl_free(s);
    maybe_freed(d);
}

static void sock_close(struct sock *s)
{
    struct sl_docker *d = s->d;

    if (s->prev != NULL) {
        s->prev->next = s->next;
    } else {
        d->socks = s->next;
    }
    if (s->next != NULL) {
        s->next->prev = s->prev;
    }
    (void)uv_poll_stop(&s->poll);
    d->pending_closes++;
    uv_close((uv_handle_t *)&s->poll, on_sock_closed);
}

static void on_poll(uv_poll_t *h, int status, int events)
{
    struct sock *s = SL_CONTAINER_OF(h, struct sock, poll);
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
    struct op *o;

    (void)curl_easy_getinfo(easy, CURLINFO_PRIVATE, &priv);
    o = (struct op *)(void *)priv;
    if (o == NULL || o->failing) {
        return;
    }
    o->failing = true;
    set_err(o, SL_ENOMEM, "docker: cannot watch a socket (out of memory)");
    (void)uv_timer_start(&o->timer, on_op_deferred, 0, 0);
}

static int on_curl_socket(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
    struct sl_docker *d = userp;
    struct sock *s = socketp;
    int events = 0;

    if (what == CURL_POLL_REMOVE) {
        if (s != NULL) {
            (void)curl_multi_assign(d->multi, fd, NULL);
            sock_close(s);
        }
        return 0;
    }
    if (s == NULL) {
        /* start_request() keeps one spare, so this allocation is the rare second socket. */
        s = d->spare != NULL ? d->spare : sl_calloc(1, sizeof(*s));
        d->spare = NULL;
        if (s == NULL || uv_poll_init_socket(d->loop, &s->poll, fd) < 0) {
            d->spare = s;
            fail_transfer_soon(easy);
            return 0;
        }
        s->fd = fd;
        s->d = d;
        s->prev = NULL;
        s->next = d->socks;
        if (d->socks != NULL) {
            d->socks->prev = s;
        }
        d->socks = s;
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

/* Ends the transfer in flight (if any) without looking at its result. */
static void drop_transfer(struct op *o)
{
    if (o->easy != NULL) {
        (void)curl_multi_remove_handle(o->d->multi, o->easy);
        curl_easy_cleanup(o->easy);
        o->easy = NULL;
    }
    curl_slist_free_all(o->hdrs);
    o->hdrs = NULL;
    o->stream = false;
}

static void check_transfers(struct sl_docker *d)
{
    CURLMsg *m;
    int left = 0;

    while ((m = curl_multi_info_read(d->multi, &left)) != NULL) {
        struct op *o;
        char *priv = NULL;

        if (m->msg != CURLMSG_DONE) {
            continue;
        }
        (void)curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &priv);
        o = (struct op *)(void *)priv;
        o->cc = m->data.result;
        (void)curl_easy_getinfo(o->easy, CURLINFO_RESPONSE_CODE, &o->status);
        (void)curl_easy_getinfo(o->easy, CURLINFO_OS_ERRNO, &o->os_errno);
        drop_transfer(o);
        if (o->failing) {
            op_finish(o);
            continue;
        }
        o->on_response(o);
    }
}

static size_t on_curl_header(char *p, size_t size, size_t n, void *arg)
{
    static const char name[] = "X-Docker-Container-Path-Stat:";
    struct op *o = arg;
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
    struct op *o = arg;
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
    struct op *o = arg;
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
    rc = sl_buf_append(&o->resp, p, len);
    if (rc < 0) {
        o->resp_over = rc == SL_ETOOBIG;
        o->oom = rc == SL_ENOMEM;
        return 0;
    }
    return len;
}

/*
 * Starts one HTTP call for `o`: `method` on API_BASE + `path` (already escaped), with `body`
 * (borrowed until the transfer ends; NULL for none) of type `ctype`. `resp_max` caps the body
 * kept. `done` runs from the loop when it ends. Returns 0 or < 0 with o->rc/err set.
 */
static int start_request(struct op *o, const char *method, const char *path, const void *body,
                         size_t body_len, const char *ctype, size_t resp_max,
                         void (*done)(struct op *o))
{
    struct sl_docker *d = o->d;
    struct sl_buf url;
    CURL *e = NULL;
    uint64_t now = uv_now(d->loop);
    uint64_t timeout = CONTROL_DEADLINE_MS;
    char line[160];
    bool ok = true;
    int rc;

    sl_buf_init(&url, URL_MAX);
    if (d->shut) {
        set_err(o, SL_ECANCELED, "docker: the launcher is closing");
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

        if (o->stream || left <= timeout) {
            timeout = left;
            o->timeout_is_deadline = true;
        }
    } else if (o->stream) {
        timeout = 0;
    }
    rc = sl_buf_append_str(&url, API_BASE);
    rc = rc < 0 ? rc : sl_buf_append_str(&url, path);
    if (rc < 0) {
        set_err(o, rc, "%s",
                rc == SL_ETOOBIG ? "docker: request URL too long" : "docker: out of memory");
        goto fail;
    }
    if (d->spare == NULL) {
        d->spare = sl_calloc(1, sizeof(*d->spare));
    }
    e = d->spare != NULL ? curl_easy_init() : NULL;
    if (e == NULL) {
        set_err(o, SL_ENOMEM, "docker: cannot start a request (out of memory)");
        goto fail;
    }
    ok = ok && curl_easy_setopt(e, CURLOPT_UNIX_SOCKET_PATH, d->socket_path) == CURLE_OK;
    ok = ok && curl_easy_setopt(e, CURLOPT_URL, sl_buf_cstr(&url)) == CURLE_OK;
    ok = ok && curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http") == CURLE_OK;
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
        ok = ok && curl_easy_setopt(e, CURLOPT_HTTPHEADER, o->hdrs) == CURLE_OK;
    }
    if (!ok) {
        set_err(o, SL_ENOMEM, "docker: cannot set up a request");
        goto fail;
    }
    o->easy = e;
    o->on_response = done;
    if (curl_multi_add_handle(d->multi, e) != CURLM_OK) {
        o->easy = NULL;
        set_err(o, SL_ENOMEM, "docker: cannot start a request");
        goto fail;
    }
    sl_buf_finish(&url);
    return 0;
fail:
    curl_easy_cleanup(e);
    curl_slist_free_all(o->hdrs);
    o->hdrs = NULL;
    sl_buf_finish(&url);
    return o->rc;
}

/* Like start_request(), with the path built printf-style. */
static int start_requestf(struct op *o, const char *method, const void *body, size_t body_len,
                          const char *ctype, size_t resp_max, void (*done)(struct op *o),
                          const char *fmt, ...) SL_PRINTF(8, 9);

static int start_requestf(struct op *o, const char *method, const void *body, size_t body_len,
                          const char *ctype, size_t resp_max, void (*done)(struct op *o),
                          const char *fmt, ...)
{
    char path[1024];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(path, sizeof(path), fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof(path)) {
        set_err(o, SL_ETOOBIG, "docker: request path too long");
        return o->rc;
    }
    return start_request(o, method, path, body, body_len, ctype, resp_max, done);
}

/*
 * Looks at the transfer that just ended. Returns 0 when it completed with status `ok1` or
 * `ok2`; otherwise sets o->rc/err ("docker: <daemon message>" when the daemon sent one) and
 * returns o->rc. `what` names the call for messages without a daemon text.
 */
static int check_response(struct op *o, const char *what, long ok1, long ok2)
{
    json_t *j;
    const char *msg;
    int rc;

    if (o->cc != CURLE_OK) {
        if (o->oom) {
            set_err(o, SL_ENOMEM, "docker: %s: out of memory", what);
        } else if (o->resp_over) {
            set_err(o, SL_ETOOBIG, "docker: %s: the answer is over %zu bytes", what, o->resp_max);
        } else if (o->cc == CURLE_OPERATION_TIMEDOUT) {
            set_err(o, SL_EUNAVAILABLE, "docker: %s: no answer in time from %s", what,
                    o->d->socket_path);
        } else if (o->cc == CURLE_COULDNT_CONNECT && o->os_errno != 0) {
            /* curl's own text names "localhost port 80", which a unix socket is not. */
            set_err(o, SL_EUNAVAILABLE, "docker: %s: cannot connect to %s: %s", what,
                    o->d->socket_path, strerror((int)o->os_errno));
        } else {
            set_err(o, SL_EUNAVAILABLE, "docker: %s: %s (%s)", what,
                    o->curl_err[0] != '\0' ? o->curl_err : curl_easy_strerror(o->cc),
                    o->d->socket_path);
        }
        return o->rc;
    }
    if (o->status == ok1 || o->status == ok2) {
        return 0;
    }
    rc = o->status == 404 ? SL_ENOTFOUND : o->status >= 400 && o->status < 500 ? SL_EINVAL : SL_EIO;
    j = json_loadb((const char *)o->resp.p, o->resp.len, 0, NULL);
    msg = json_str(j, "message");
    if (msg != NULL && msg[0] != '\0') {
        set_err(o, rc, "docker: %.400s", msg);
    } else {
        set_err(o, rc, "docker: %s: HTTP %ld", what, o->status);
    }
    json_decref(j);
    return rc;
}

/* Parses the response body as a JSON object (a new reference), or sets o->rc/err. */
static json_t *response_object(struct op *o, const char *what)
{
    json_t *j = json_loadb((const char *)o->resp.p, o->resp.len, 0, NULL);

    if (!json_is_object(j)) {
        json_decref(j);
        set_err(o, SL_EIO, "docker: %s: the answer is not a JSON object", what);
        return NULL;
    }
    return j;
}

/* ---------------------------------------------------------------------------------------- */
/* Operations: allocation, completion, release. */

static void on_op_closed(uv_handle_t *h)
{
    struct op *o = SL_CONTAINER_OF((uv_timer_t *)h, struct op, timer);
    struct sl_docker *d = o->d;

    sl_buf_finish(&o->resp);
    sl_buf_finish(&o->out);
    sl_buf_finish(&o->errout);
    sl_free(o->id);
    sl_free(o->path);
    sl_free(o->link_target);
    sl_free(o->dir);
    sl_free(o->name);
    sl_free(o->body);
    sl_free(o->tar);
    sl_free(o->bridge);
    sl_free(o->subnet);
    sl_free(o->gateway);
    sl_free(o->network);
    sl_free(o->exec_id);
    sl_free(o->data);
    json_decref(o->ids);
    json_decref(o->found);
    sl_free(o);
    maybe_freed(d);
}

static void deliver_list(struct op *o);

static void deliver(struct op *o)
{
    const char *err = o->rc < 0 ? o->err : NULL;
    struct sl_launcher_exec_result r;

    switch (o->kind) {
    case OP_PING:
    case OP_NETWORK:
    case OP_IMAGE:
    case OP_WRITE:
    case OP_REMOVE:
        o->cb.done(o->arg, o->rc, err);
        break;
    case OP_CREATE:
        o->cb.started(o->arg, o->rc, err, o->rc == 0 ? o->id : NULL, o->rc == 0 ? o->ip : NULL);
        break;
    case OP_EXEC:
        r = (struct sl_launcher_exec_result){
            .rc = o->rc,
            .err = err,
            .exit_code = o->rc == 0 ? o->exit_code : -1,
            .out = sl_buf_cstr(&o->out),
            .out_len = o->out.len,
            .errout = sl_buf_cstr(&o->errout),
            .errout_len = o->errout.len,
            .out_truncated = o->out_truncated,
            .err_truncated = o->err_truncated,
            .deadline_passed = o->deadline_passed,
        };
        o->cb.exec(o->arg, &r);
        break;
    case OP_STAT:
        o->cb.stat(o->arg, o->rc, err, o->is_dir, o->size);
        break;
    case OP_READ:
        if (o->rc == SL_ETOOBIG) {
            o->cb.read(o->arg, o->rc, err, NULL, (size_t)o->size);
        } else {
            o->cb.read(o->arg, o->rc, err, o->rc == 0 ? (const void *)o->data : NULL,
                       o->rc == 0 ? o->data_len : 0);
        }
        break;
    case OP_LIST:
        deliver_list(o);
        break;
    }
}

/* Reports the outcome once and releases the operation (freed after its timer closes). */
static void op_finish(struct op *o)
{
    struct sl_docker *d = o->d;

    if (o->finished) {
        return;
    }
    o->finished = true;
    drop_transfer(o);
    if (o->prev != NULL) {
        o->prev->next = o->next;
    } else {
        d->ops = o->next;
    }
    if (o->next != NULL) {
        o->next->prev = o->prev;
    }
    o->prev = o->next = NULL;
    deliver(o);
    uv_close((uv_handle_t *)&o->timer, on_op_closed);
}

static void on_op_deferred(uv_timer_t *t)
{
    op_finish(SL_CONTAINER_OF(t, struct op, timer));
}

/* Completes `o` with its recorded error from the loop, never from the caller's stack. */
static void fail_soon(struct op *o)
{
    drop_transfer(o);
    (void)uv_timer_start(&o->timer, on_op_deferred, 0, 0);
}

static void on_oom_timer(uv_timer_t *t)
{
    struct sl_docker *d = t->data;
    static const char msg[] = "docker: out of memory";

    while (d->n_oom > 0) {
        struct oom_note n = d->oom[--d->n_oom];

        switch (n.kind) {
        case OP_PING:
        case OP_NETWORK:
        case OP_IMAGE:
        case OP_WRITE:
        case OP_REMOVE:
            n.cb.done(n.arg, SL_ENOMEM, msg);
            break;
        case OP_CREATE:
            n.cb.started(n.arg, SL_ENOMEM, msg, NULL, NULL);
            break;
        case OP_EXEC: {
            struct sl_launcher_exec_result r = {
                .rc = SL_ENOMEM, .err = msg, .exit_code = -1, .out = "", .errout = ""
            };

            n.cb.exec(n.arg, &r);
            break;
        }
        case OP_STAT:
            n.cb.stat(n.arg, SL_ENOMEM, msg, false, 0);
            break;
        case OP_READ:
            n.cb.read(n.arg, SL_ENOMEM, msg, NULL, 0);
            break;
        case OP_LIST:
            n.cb.list(n.arg, SL_ENOMEM, msg, NULL, 0);
            break;
        }
    }
}

/*
 * Allocates an operation of `kind` with a control deadline, linked into the launcher. On OOM
 * the callback is still reported from the loop (SL_ENOMEM) and NULL is returned. A launcher
 * that is closing gets an operation that completes with SL_ECANCELED; the caller sees
 * o->rc < 0 and must not start anything.
 */
static struct op *op_new(struct sl_docker *d, enum op_kind kind, union op_cb cb, void *arg)
{
    struct op *o = sl_calloc(1, sizeof(*o));

    if (o == NULL) {
        SL_BUG_ON(d->n_oom == OOM_NOTES);
        d->oom[d->n_oom++] = (struct oom_note){ kind, cb, arg };
        (void)uv_timer_start(&d->oom_timer, on_oom_timer, 0, 0);
        return NULL;
    }
    o->d = d;
    o->kind = kind;
    o->cb = cb;
    o->arg = arg;
    o->exit_code = -1;
    o->deadline_ms = uv_now(d->loop) + CONTROL_DEADLINE_MS;
    sl_buf_init(&o->resp, CONTROL_BODY_MAX);
    sl_buf_init(&o->out, 0);
    sl_buf_init(&o->errout, 0);
    sl_dockerframe_init(&o->frames);
    /* A timer init on a live loop cannot fail. */
    (void)uv_timer_init(d->loop, &o->timer);
    o->next = d->ops;
    if (d->ops != NULL) {
        d->ops->prev = o;
    }
    d->ops = o;
    /* Released in on_op_closed(): the launcher outlives its operations' timers. */
    d->pending_closes++;
    if (d->closing) {
        set_err(o, SL_ECANCELED, "docker: the launcher is closing");
        fail_soon(o);
    }
    return o;
}

/* Fails `o` from the loop with a validation error. */
static void reject(struct op *o, const char *fmt, ...) SL_PRINTF(2, 3);

static void reject(struct op *o, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    (void)vsnprintf(o->err, sizeof(o->err), fmt, ap);
    va_end(ap);
    o->rc = SL_EINVAL;
    fail_soon(o);
}

/* Starts a request or, when that failed, completes `o` with its error from the loop. */
static void go(struct op *o, int rc)
{
    if (rc < 0) {
        fail_soon(o);
    }
}

/* ---------------------------------------------------------------------------------------- */
/* ping, has_image, remove. */

static void on_ping(struct op *o)
{
    (void)check_response(o, "ping", 200, 200);
    op_finish(o);
}

static void docker_ping(struct sl_launcher *l, sl_launcher_done_fn *cb, void *arg)
{
    struct op *o = op_new((struct sl_docker *)l, OP_PING, (union op_cb){ .done = cb }, arg);

    if (o == NULL || o->rc < 0) {
        return;
    }
    go(o, start_request(o, "GET", "/_ping", NULL, 0, NULL, 4096, on_ping));
}

static void on_image(struct op *o)
{
    (void)check_response(o, "inspect image", 200, 200);
    op_finish(o);
}

static void docker_has_image(struct sl_launcher *l, const char *image, sl_launcher_done_fn *cb,
                             void *arg)
{
    struct op *o = op_new((struct sl_docker *)l, OP_IMAGE, (union op_cb){ .done = cb }, arg);
    struct sl_buf path;
    int rc;

    if (o == NULL || o->rc < 0) {
        return;
    }
    if (image == NULL || image[0] == '\0' || strlen(image) > 512) {
        reject(o, "docker: an image name must be 1-512 characters");
        return;
    }
    sl_buf_init(&path, URL_MAX);
    rc = sl_buf_append_str(&path, "/images/");
    rc = rc < 0 ? rc : append_escaped(&path, image);
    rc = rc < 0 ? rc : sl_buf_append_str(&path, "/json");
    if (rc < 0) {
        set_err(o, rc, "docker: cannot build the request: %s", sl_strerror(rc));
        fail_soon(o);
    } else {
        go(o,
           start_request(o, "GET", sl_buf_cstr(&path), NULL, 0, NULL, CONTROL_BODY_MAX, on_image));
    }
    sl_buf_finish(&path);
}

static void on_removed(struct op *o)
{
    (void)check_response(o, "remove container", 204, 404);
    op_finish(o);
}

static void docker_remove(struct sl_launcher *l, const char *id, sl_launcher_done_fn *cb, void *arg)
{
    struct op *o = op_new((struct sl_docker *)l, OP_REMOVE, (union op_cb){ .done = cb }, arg);

    if (o == NULL || o->rc < 0) {
        return;
    }
    if (!is_name(id)) {
        reject(o, "docker: invalid container id");
        return;
    }
    go(o, start_requestf(o, "DELETE", NULL, 0, NULL, CONTROL_BODY_MAX, on_removed,
                         "/containers/%s?force=true&v=true", id));
}

/* ---------------------------------------------------------------------------------------- */
/* ensure_network. */

static void on_network_created(struct op *o);

/* Compares an existing network with the one asked for; sets the error naming a difference. */
static int verify_network(struct op *o, const json_t *n)
{
    const json_t *opts = json_object_get(n, "Options");
    const char *icc = json_str(opts, "com.docker.network.bridge.enable_icc");
    const char *bridge = json_str(opts, "com.docker.network.bridge.name");
    const char *driver = json_str(n, "Driver");
    const json_t *cfgs = json_object_get(json_object_get(n, "IPAM"), "Config");
    const json_t *cfg;
    size_t i;
    bool subnet_ok = false;
    bool gateway_ok = false;

    if (driver == NULL || strcmp(driver, "bridge") != 0) {
        set_err(o, SL_EEXIST, "docker: network %s exists with driver %.64s, not bridge", o->name,
                driver != NULL ? driver : "(none)");
        return o->rc;
    }
    if (!json_is_true(json_object_get(n, "Internal"))) {
        set_err(o, SL_EEXIST, "docker: network %s exists but is not internal", o->name);
        return o->rc;
    }
    if (icc == NULL || strcmp(icc, "false") != 0) {
        set_err(o, SL_EEXIST,
                "docker: network %s exists with inter-container communication on "
                "(com.docker.network.bridge.enable_icc is not false)",
                o->name);
        return o->rc;
    }
    if (bridge == NULL || strcmp(bridge, o->bridge) != 0) {
        set_err(o, SL_EEXIST, "docker: network %s exists with bridge %.64s, not %s", o->name,
                bridge != NULL ? bridge : "(unnamed)", o->bridge);
        return o->rc;
    }
    json_array_foreach(cfgs, i, cfg)
    {
        const char *s = json_str(cfg, "Subnet");
        const char *g = json_str(cfg, "Gateway");

        if (s != NULL && strcmp(s, o->subnet) == 0) {
            subnet_ok = true;
            gateway_ok = g == NULL || g[0] == '\0' || strcmp(g, o->gateway) == 0;
        }
    }
    if (!subnet_ok) {
        cfg = json_array_get(cfgs, 0);
        set_err(o, SL_EEXIST, "docker: network %s exists with subnet %.64s, not %s", o->name,
                json_str(cfg, "Subnet") != NULL ? json_str(cfg, "Subnet") : "(none)", o->subnet);
        return o->rc;
    }
    if (!gateway_ok) {
        set_err(o, SL_EEXIST, "docker: network %s exists with another gateway than %s", o->name,
                o->gateway);
        return o->rc;
    }
    return 0;
}

static int create_network(struct op *o)
{
    json_t *j = json_pack(
            "{s:s, s:b, s:s, s:b, s:b, s:b, s:{s:s, s:[{s:s, s:s}]}, "
            "s:{s:s, s:s}, s:{s:s}}",
            "Name", o->name, "CheckDuplicate", 1, "Driver", "bridge", "Internal", 1, "Attachable",
            0, "EnableIPv6", 0, "IPAM", "Driver", "default", "Config", "Subnet", o->subnet,
            "Gateway", o->gateway, "Options", "com.docker.network.bridge.name", o->bridge,
            "com.docker.network.bridge.enable_icc", "false", "Labels", "sluice.managed", "1");

    sl_free(o->body);
    o->body = j != NULL ? dump_json(j, &o->body_len) : NULL;
    json_decref(j);
    if (o->body == NULL) {
        set_err(o, SL_ENOMEM, "docker: cannot build the network request");
        return o->rc;
    }
    return start_request(o, "POST", "/networks/create", o->body, o->body_len, "application/json",
                         CONTROL_BODY_MAX, on_network_created);
}

static void on_network(struct op *o)
{
    json_t *n;
    const char *name;

    if (check_response(o, "inspect network", 200, 200) == SL_ENOTFOUND) {
        o->rc = 0;
        o->err[0] = '\0';
        go(o, create_network(o));
        return;
    }
    if (o->rc < 0) {
        op_finish(o);
        return;
    }
    n = response_object(o, "inspect network");
    name = json_str(n, "Name");
    if (n != NULL && (name == NULL || strcmp(name, o->name) != 0)) {
        /* The daemon matched the name as an id prefix of another network. */
        json_decref(n);
        go(o, create_network(o));
        return;
    }
    if (n != NULL) {
        (void)verify_network(o, n);
    }
    json_decref(n);
    op_finish(o);
}

static void on_network_created(struct op *o)
{
    if (check_response(o, "create network", 201, 201) < 0 && o->status == 409 && !o->retried) {
        /* Created by someone else meanwhile: check that one. */
        o->rc = 0;
        o->retried = true;
        go(o, start_requestf(o, "GET", NULL, 0, NULL, CONTROL_BODY_MAX, on_network, "/networks/%s",
                             o->name));
        return;
    }
    op_finish(o);
}

static bool is_ip_text(const char *s, size_t max)
{
    size_t n = s != NULL ? strlen(s) : 0;

    if (n == 0 || n > max) {
        return false;
    }
    return strspn(s, "0123456789abcdefABCDEF.:/") == n;
}

static void docker_ensure_network(struct sl_launcher *l, const struct sl_launcher_network *net,
                                  sl_launcher_done_fn *cb, void *arg)
{
    struct op *o = op_new((struct sl_docker *)l, OP_NETWORK, (union op_cb){ .done = cb }, arg);

    if (o == NULL || o->rc < 0) {
        return;
    }
    if (net == NULL || !is_name(net->name)) {
        reject(o, "docker: invalid network name");
        return;
    }
    if (!is_name(net->bridge) || strlen(net->bridge) > 15) {
        reject(o, "docker: invalid bridge name (1-15 characters of [A-Za-z0-9_.-])");
        return;
    }
    if (!is_ip_text(net->subnet, 64) || strchr(net->subnet, '/') == NULL
        || !is_ip_text(net->gateway, 64) || strchr(net->gateway, '/') != NULL) {
        reject(o, "docker: invalid subnet or gateway");
        return;
    }
    o->name = sl_strdup(net->name);
    o->bridge = sl_strdup(net->bridge);
    o->subnet = sl_strdup(net->subnet);
    o->gateway = sl_strdup(net->gateway);
    if (o->name == NULL || o->bridge == NULL || o->subnet == NULL || o->gateway == NULL) {
        set_err(o, SL_ENOMEM, "docker: out of memory");
        fail_soon(o);
        return;
    }
    go(o, start_requestf(o, "GET", NULL, 0, NULL, CONTROL_BODY_MAX, on_network, "/networks/%s",
                         o->name));
}

/* ---------------------------------------------------------------------------------------- */
/* Tar archives (libarchive), built and read in memory. */

static la_ssize_t on_tar_write(struct archive *a, void *arg, const void *p, size_t n)
{
    if (sl_buf_append(arg, p, n) < 0) {
        archive_set_error(a, ENOMEM, "tar over its cap or out of memory");
        return -1;
    }
    return (la_ssize_t)n;
}

/* Adds one entry: a directory (data NULL) or a regular file, owner root, relative name. */
static int tar_add(struct archive *a, const char *name, unsigned mode, const void *data, size_t len)
{
    struct archive_entry *e = archive_entry_new();
    const uint8_t *p = data;
    int rc = 0;

    if (e == NULL) {
        return SL_ENOMEM;
    }
    archive_entry_set_pathname(e, name);
    archive_entry_set_filetype(e, data != NULL ? AE_IFREG : AE_IFDIR);
    archive_entry_set_perm(e, (mode_t)(mode & 07777));
    archive_entry_set_uid(e, 0);
    archive_entry_set_gid(e, 0);
    archive_entry_set_size(e, data != NULL ? (la_int64_t)len : 0);
    archive_entry_set_mtime(e, time(NULL), 0);
    if (archive_write_header(a, e) != ARCHIVE_OK) {
        rc = SL_EIO;
    }
    while (rc == 0 && data != NULL && len > 0) {
        la_ssize_t k = archive_write_data(a, p, len);

        if (k <= 0) {
            rc = SL_EIO;
            break;
        }
        p += k;
        len -= (size_t)k;
    }
    archive_entry_free(e);
    return rc;
}

/* An entry of a tar to build: a directory when data is NULL. */
struct tar_item {
    const char *name;
    unsigned mode;
    const void *data;
    size_t len;
};

/* Builds a tar of `items` into a new sl_malloc'd buffer (*out, *len). */
static int tar_build(const struct tar_item *items, size_t n, char **out, size_t *len)
{
    struct archive *a = archive_write_new();
    struct sl_buf b;
    int rc = 0;
    bool full;

    sl_buf_init(&b, TAR_MAX);
    if (a == NULL) {
        return SL_ENOMEM;
    }
    if (archive_write_set_format_pax_restricted(a) != ARCHIVE_OK
        || archive_write_set_bytes_in_last_block(a, 1) != ARCHIVE_OK
        || archive_write_open(a, &b, NULL, on_tar_write, NULL) != ARCHIVE_OK) {
        rc = SL_EIO;
    }
    for (size_t i = 0; rc == 0 && i < n; i++) {
        rc = tar_add(a, items[i].name, items[i].mode, items[i].data, items[i].len);
    }
    if (archive_write_close(a) != ARCHIVE_OK && rc == 0) {
        rc = SL_EIO;
    }
    (void)archive_write_free(a);
    if (rc < 0) {
        full = b.len + 64u * 1024u > TAR_MAX;
        sl_buf_finish(&b);
        return full ? SL_ETOOBIG : rc;
    }
    *len = b.len;
    *out = (char *)b.p;
    return 0;
}

/*
 * Takes the single regular file out of the tar in o->resp into o->data. A tar holding anything
 * else is an error: the daemon is trusted only as far as its bytes check out.
 */
static int tar_extract_one(struct op *o)
{
    struct archive *a = archive_read_new();
    struct archive_entry *e = NULL;
    int64_t size;
    size_t got = 0;

    if (a == NULL) {
        set_err(o, SL_ENOMEM, "docker: out of memory");
        return o->rc;
    }
    if (archive_read_support_format_tar(a) != ARCHIVE_OK
        || archive_read_open_memory(a, o->resp.p, o->resp.len) != ARCHIVE_OK
        || archive_read_next_header(a, &e) != ARCHIVE_OK) {
        set_err(o, SL_EIO, "docker: read %s: the archive is not a readable tar", o->path);
        goto out;
    }
    if (archive_entry_filetype(e) != AE_IFREG) {
        set_err(o, SL_ENOTFILE, "docker: read %s: not a regular file", o->path);
        goto out;
    }
    size = archive_entry_size(e);
    if (size < 0 || (uint64_t)size > o->max) {
        o->size = size < 0 ? 0 : (uint64_t)size;
        set_err(o, SL_ETOOBIG, "docker: read %s: %lld bytes, over the cap of %zu", o->path,
                (long long)size, o->max);
        goto out;
    }
    o->data = sl_malloc((size_t)size + 1);
    if (o->data == NULL) {
        set_err(o, SL_ENOMEM, "docker: read %s: out of memory", o->path);
        goto out;
    }
    while (got < (size_t)size) {
        la_ssize_t k = archive_read_data(a, o->data + got, (size_t)size - got);

        if (k <= 0) {
            break;
        }
        got += (size_t)k;
    }
    if (got != (size_t)size || archive_read_next_header(a, &e) != ARCHIVE_EOF) {
        set_err(o, SL_EIO, "docker: read %s: the archive is not one complete file", o->path);
        goto out;
    }
    o->data[got] = 0;
    o->data_len = got;
out:
    (void)archive_read_free(a);
    return o->rc;
}

/* ---------------------------------------------------------------------------------------- */
/* stat, read_file, write_file. */

/* Decodes the stat header of the HEAD that just ended into o->is_dir/size/mode. */
static int decode_stat(struct op *o)
{
    uint8_t raw[STAT_HDR_MAX];
    size_t n = 0;
    json_t *j;
    json_int_t size;
    json_int_t mode;

    if (!o->stat_seen || o->stat_over
        || sodium_base642bin(raw, sizeof(raw) - 1, o->stat_hdr, strlen(o->stat_hdr), NULL, &n, NULL,
                             sodium_base64_VARIANT_ORIGINAL)
                   != 0) {
        set_err(o, SL_EIO, "docker: stat %s: missing or malformed path stat header", o->path);
        return o->rc;
    }
    j = json_loadb((const char *)raw, n, 0, NULL);
    size = json_integer_value(json_object_get(j, "size"));
    mode = json_integer_value(json_object_get(j, "mode"));
    if (!json_is_integer(json_object_get(j, "size")) || !json_is_integer(json_object_get(j, "mode"))
        || size < 0 || mode < 0 || mode > (json_int_t)UINT32_MAX) {
        json_decref(j);
        set_err(o, SL_EIO, "docker: stat %s: malformed path stat", o->path);
        return o->rc;
    }
    sl_free(o->link_target);
    o->link_target = NULL;
    if (json_is_string(json_object_get(j, "linkTarget"))
        && json_string_length(json_object_get(j, "linkTarget")) > 0) {
        o->link_target = sl_strdup(json_string_value(json_object_get(j, "linkTarget")));
        if (o->link_target == NULL) {
            json_decref(j);
            set_err(o, SL_ENOMEM, "docker: out of memory");
            return o->rc;
        }
    }
    json_decref(j);
    o->mode = (uint32_t)mode;
    o->size = (uint64_t)size;
    o->is_dir = (o->mode & GO_MODE_DIR) != 0;
    return 0;
}

/* When the path just stat'ed is a symbolic link with a target, stats the target instead (the
 * daemon resolves the whole chain inside the container, so one hop normally suffices; at most
 * 8). Returns true when a new HEAD is under way (`done` runs again), false to go on with the
 * result as it is (not a link, a dangling one, too many hops, or the restart failed: o->rc). */
static int start_stat(struct op *o, void (*done)(struct op *o));

static bool follow_link(struct op *o, void (*done)(struct op *o))
{
    if (o->rc < 0 || (o->mode & GO_MODE_SYMLINK) == 0 || o->link_target == NULL || o->hops >= 8
        || !is_abs_path(o->link_target)) {
        return false;
    }
    o->hops++;
    sl_free(o->path);
    o->path = o->link_target;
    o->link_target = NULL;
    return start_stat(o, done) == 0;
}

/* Runs the HEAD; `done` gets the result. */
static int start_stat(struct op *o, void (*done)(struct op *o))
{
    struct sl_buf path;
    int rc;

    sl_buf_init(&path, URL_MAX);
    rc = sl_buf_printf(&path, "/containers/%s/archive?path=", o->id);
    rc = rc < 0 ? rc : append_escaped(&path, o->path);
    if (rc < 0) {
        set_err(o, rc, "docker: cannot build the request: %s", sl_strerror(rc));
    } else {
        rc = start_request(o, "HEAD", sl_buf_cstr(&path), NULL, 0, NULL, 4096, done);
    }
    sl_buf_finish(&path);
    return rc;
}

/* The HEAD ended: 0 with the metadata decoded, or < 0 with o->rc/err. */
static int stat_result(struct op *o)
{
    if (check_response(o, "stat", 200, 200) < 0) {
        if (o->rc == SL_ENOTFOUND) {
            set_err(o, SL_ENOTFOUND, "docker: no such path: %s", o->path);
        }
        return o->rc;
    }
    return decode_stat(o);
}

static void on_stat(struct op *o)
{
    if (stat_result(o) == 0 && follow_link(o, on_stat)) {
        return;
    }
    op_finish(o);
}

/* Common start of stat, read_file and write_file: validates and copies id and path. */
static bool take_id_path(struct op *o, const char *id, const char *path)
{
    if (!is_name(id)) {
        reject(o, "docker: invalid container id");
        return false;
    }
    if (!is_abs_path(path)) {
        reject(o, "docker: the path must be absolute, without . or .. components");
        return false;
    }
    o->id = sl_strdup(id);
    o->path = sl_strdup(path);
    if (o->id == NULL || o->path == NULL) {
        set_err(o, SL_ENOMEM, "docker: out of memory");
        fail_soon(o);
        return false;
    }
    return true;
}

static void docker_stat(struct sl_launcher *l, const char *id, const char *path,
                        sl_launcher_stat_fn *cb, void *arg)
{
    struct op *o = op_new((struct sl_docker *)l, OP_STAT, (union op_cb){ .stat = cb }, arg);

    if (o == NULL || o->rc < 0 || !take_id_path(o, id, path)) {
        return;
    }
    go(o, start_stat(o, on_stat));
}

static void on_read_data(struct op *o)
{
    if (check_response(o, "read", 200, 200) == 0) {
        (void)tar_extract_one(o);
    } else if (o->rc == SL_ETOOBIG) {
        set_err(o, SL_ETOOBIG, "docker: read %s: it grew over the cap of %zu", o->path, o->max);
    }
    op_finish(o);
}

static void on_read_stat(struct op *o)
{
    struct sl_buf path;
    int rc;

    if (stat_result(o) < 0) {
        op_finish(o);
        return;
    }
    if (follow_link(o, on_read_stat)) {
        return;
    }
    if (o->rc < 0) {
        op_finish(o);
        return;
    }
    if (o->is_dir) {
        set_err(o, SL_EISDIR, "docker: %s is a directory", o->path);
    } else if ((o->mode & GO_MODE_SYMLINK) != 0) {
        set_err(o, SL_ENOTFOUND, "docker: %s is a symbolic link to nothing", o->path);
    } else if ((o->mode & GO_MODE_TYPE) != 0) {
        set_err(o, SL_ENOTFILE, "docker: %s is not a regular file", o->path);
    } else if (o->size > o->max || o->size > SIZE_MAX - TAR_SLACK) {
        set_err(o, SL_ETOOBIG, "docker: %s is %llu bytes, over the cap of %zu", o->path,
                (unsigned long long)o->size, o->max);
    }
    if (o->rc < 0) {
        op_finish(o);
        return;
    }
    sl_buf_init(&path, URL_MAX);
    rc = sl_buf_printf(&path, "/containers/%s/archive?path=", o->id);
    rc = rc < 0 ? rc : append_escaped(&path, o->path);
    if (rc < 0) {
        set_err(o, rc, "docker: cannot build the request: %s", sl_strerror(rc));
        op_finish(o);
    } else if (start_request(o, "GET", sl_buf_cstr(&path), NULL, 0, NULL,
                             (size_t)o->size + TAR_SLACK, on_read_data)
               < 0) {
        op_finish(o);
    }
    sl_buf_finish(&path);
}

static void docker_read_file(struct sl_launcher *l, const char *id, const char *path, size_t max,
                             sl_launcher_read_fn *cb, void *arg)
{
    struct op *o = op_new((struct sl_docker *)l, OP_READ, (union op_cb){ .read = cb }, arg);

    if (o == NULL || o->rc < 0 || !take_id_path(o, id, path)) {
        return;
    }
    o->max = max;
    go(o, start_stat(o, on_read_stat));
}

static void on_written(struct op *o)
{
    if (check_response(o, "write", 200, 200) == SL_ENOTFOUND) {
        set_err(o, SL_ENOTFOUND, "docker: no such directory: %s", o->dir);
    }
    op_finish(o);
}

static void on_write_stat(struct op *o)
{
    struct sl_buf path;
    int rc;

    if (stat_result(o) < 0 && o->rc != SL_ENOTFOUND) {
        op_finish(o);
        return;
    }
    if (o->rc == 0 && o->is_dir) {
        set_err(o, SL_EISDIR, "docker: %s is a directory", o->path);
        op_finish(o);
        return;
    }
    o->rc = 0;
    o->err[0] = '\0';
    sl_buf_init(&path, URL_MAX);
    rc = sl_buf_printf(&path, "/containers/%s/archive?path=", o->id);
    rc = rc < 0 ? rc : append_escaped(&path, o->dir);
    if (rc < 0) {
        set_err(o, rc, "docker: cannot build the request: %s", sl_strerror(rc));
        op_finish(o);
    } else if (start_request(o, "PUT", sl_buf_cstr(&path), o->tar, o->tar_len, "application/x-tar",
                             CONTROL_BODY_MAX, on_written)
               < 0) {
        op_finish(o);
    }
    sl_buf_finish(&path);
}

static void docker_write_file(struct sl_launcher *l, const char *id, const char *path,
                              const void *data, size_t len, unsigned mode, sl_launcher_done_fn *cb,
                              void *arg)
{
    struct op *o = op_new((struct sl_docker *)l, OP_WRITE, (union op_cb){ .done = cb }, arg);
    const char *slash;
    struct tar_item item;
    int rc;

    if (o == NULL || o->rc < 0 || !take_id_path(o, id, path)) {
        return;
    }
    if (strcmp(path, "/") == 0) {
        set_err(o, SL_EISDIR, "docker: / is a directory");
        fail_soon(o);
        return;
    }
    if (mode > 07777 || (data == NULL && len > 0)) {
        reject(o, "docker: invalid mode or data");
        return;
    }
    slash = strrchr(path, '/');
    o->dir = slash == path ? sl_strdup("/") : sl_strndup(path, (size_t)(slash - path));
    item = (struct tar_item){ slash + 1, mode, data != NULL ? data : "", len };
    rc = o->dir == NULL ? SL_ENOMEM : tar_build(&item, 1, &o->tar, &o->tar_len);
    if (rc < 0) {
        set_err(o, rc, "docker: write %s: cannot build the archive: %s", path, sl_strerror(rc));
        fail_soon(o);
        return;
    }
    go(o, start_stat(o, on_write_stat));
}

/* ---------------------------------------------------------------------------------------- */
/* create_and_start. */

static void on_cleaned_up(struct op *o)
{
    /* Whatever the DELETE said, the first error is the one to report. */
    o->rc = o->saved_rc;
    memcpy(o->err, o->saved_err, sizeof(o->err));
    op_finish(o);
}

/* A step after the create failed: remove the container, then report the error. */
static void create_failed(struct op *o)
{
    o->saved_rc = o->rc;
    memcpy(o->saved_err, o->err, sizeof(o->err));
    o->deadline_ms = uv_now(o->d->loop) + CONTROL_DEADLINE_MS;
    if (start_requestf(o, "DELETE", NULL, 0, NULL, CONTROL_BODY_MAX, on_cleaned_up,
                       "/containers/%s?force=true&v=true", o->id)
        < 0) {
        sl_log(SL_LOG_WARN, 0, "msg=\"cannot remove a failed container\" id=%s", o->id);
        on_cleaned_up(o);
    }
}

static void on_inspected(struct op *o)
{
    json_t *j;
    const char *ip;

    if (check_response(o, "inspect container", 200, 200) < 0) {
        create_failed(o);
        return;
    }
    j = response_object(o, "inspect container");
    if (j == NULL) {
        create_failed(o);
        return;
    }
    ip = json_str(
            json_object_get(json_object_get(json_object_get(j, "NetworkSettings"), "Networks"),
                            o->network),
            "IPAddress");
    if (!is_ip_text(ip, sizeof(o->ip) - 1)) {
        set_err(o, SL_EIO, "docker: the container has no address on network %s", o->network);
        json_decref(j);
        create_failed(o);
        return;
    }
    memcpy(o->ip, ip, strlen(ip) + 1);
    json_decref(j);
    op_finish(o);
}

static void on_started(struct op *o)
{
    if (check_response(o, "start container", 204, 304) < 0
        || start_requestf(o, "GET", NULL, 0, NULL, CONTROL_BODY_MAX, on_inspected,
                          "/containers/%s/json", o->id)
                   < 0) {
        create_failed(o);
    }
}

static void start_container(struct op *o)
{
    if (start_requestf(o, "POST", "", 0, NULL, CONTROL_BODY_MAX, on_started, "/containers/%s/start",
                       o->id)
        < 0) {
        create_failed(o);
    }
}

static void on_copied(struct op *o)
{
    if (check_response(o, "copy files", 200, 200) < 0) {
        create_failed(o);
        return;
    }
    start_container(o);
}

static void on_created(struct op *o)
{
    json_t *j;
    const char *id;

    if (check_response(o, "create container", 201, 201) < 0) {
        op_finish(o);
        return;
    }
    j = response_object(o, "create container");
    id = json_str(j, "Id");
    if (j == NULL || !is_name(id)) {
        if (j != NULL) {
            set_err(o, SL_EIO, "docker: create container: no valid Id in the answer");
        }
        json_decref(j);
        /* Nothing to remove by id; the name is the handle left. */
        o->id = o->name;
        o->name = NULL;
        create_failed(o);
        return;
    }
    o->id = sl_strdup(id);
    json_decref(j);
    if (o->id == NULL) {
        set_err(o, SL_ENOMEM, "docker: out of memory");
        o->id = o->name;
        o->name = NULL;
        create_failed(o);
        return;
    }
    if (o->tar == NULL) {
        start_container(o);
        return;
    }
    if (start_requestf(o, "PUT", o->tar, o->tar_len, "application/x-tar", CONTROL_BODY_MAX,
                       on_copied, "/containers/%s/archive?path=%%2F", o->id)
        < 0) {
        create_failed(o);
    }
}

/* Builds the create body (a new reference) from `spec`, or NULL with o->err set. */
static json_t *create_body(struct op *o, const struct sl_launcher_container *spec)
{
    json_t *env = json_array();
    json_t *labels = json_object();
    json_t *mounts = json_array();
    json_t *host = NULL;
    json_t *j = NULL;
    bool ok = env != NULL && labels != NULL && mounts != NULL;

    for (size_t i = 0; ok && i < spec->n_env; i++) {
        ok = json_array_append_new(env, json_string(spec->env[i])) == 0;
        if (!ok) {
            set_err(o, SL_EINVAL, "docker: env[%zu] is not valid UTF-8", i);
        }
    }
    for (size_t i = 0; ok && i < spec->n_labels; i++) {
        ok = json_object_set_new(labels, spec->labels[i].key, json_string(spec->labels[i].value))
             == 0;
        if (!ok) {
            set_err(o, SL_EINVAL, "docker: label %zu is not valid UTF-8", i);
        }
    }
    if (ok && spec->resolv_conf != NULL) {
        ok = json_array_append_new(mounts, json_pack("{s:s, s:s, s:s, s:b}", "Type", "bind",
                                                     "Source", spec->resolv_conf, "Target",
                                                     "/etc/resolv.conf", "ReadOnly", 1))
             == 0;
    }
    if (ok) {
        host = json_pack("{s:s, s:b, s:[s], s:[s], s:i, s:{s:s}, s:{s:s, s:{s:s}}, s:O}",
                         "NetworkMode", spec->network, "Init", 1, "CapDrop", "NET_RAW",
                         "SecurityOpt", "no-new-privileges:true", "PidsLimit", 1024,
                         "RestartPolicy", "Name", "no", "LogConfig", "Type", "json-file", "Config",
                         "max-size", "1m", "Mounts", mounts);
        ok = host != NULL;
    }
    if (ok && spec->cpus_centi > 0) {
        ok = json_object_set_new(host, "NanoCpus", json_integer(spec->cpus_centi * 10000000)) == 0;
    }
    if (ok && spec->memory_bytes > 0) {
        ok = json_object_set_new(host, "Memory", json_integer(spec->memory_bytes)) == 0
             && json_object_set_new(host, "MemorySwap", json_integer(spec->memory_bytes)) == 0;
    }
    if (ok) {
        j = json_pack("{s:s, s:[s,s], s:O, s:O, s:s, s:s, s:b, s:b, s:b, s:b, s:b, s:O}", "Image",
                      spec->image, "Cmd", "sleep", "infinity", "Env", env, "Labels", labels,
                      "Hostname", "sandbox", "WorkingDir", "/workspace/repo", "AttachStdin", 0,
                      "AttachStdout", 0, "AttachStderr", 0, "Tty", 0, "OpenStdin", 0, "HostConfig",
                      host);
    }
    if (j == NULL && o->rc == 0) {
        set_err(o, SL_EINVAL, "docker: cannot build the create request (invalid text?)");
    }
    json_decref(env);
    json_decref(labels);
    json_decref(mounts);
    json_decref(host);
    return j;
}

/* Checks what create_body() does not: names, paths, modes, limits. */
static bool create_spec_ok(struct op *o, const struct sl_launcher_container *s)
{
    if (!is_name(s->name)) {
        reject(o, "docker: invalid container name");
    } else if (s->image == NULL || s->image[0] == '\0' || strlen(s->image) > 512) {
        reject(o, "docker: an image name must be 1-512 characters");
    } else if (!is_name(s->network)) {
        reject(o, "docker: invalid network name");
    } else if (s->cpus_centi < 0 || s->cpus_centi > 100000 || s->memory_bytes < 0) {
        reject(o, "docker: invalid CPU or memory limit");
    } else if (s->resolv_conf != NULL && !is_abs_path(s->resolv_conf)) {
        reject(o, "docker: resolv_conf must be an absolute host path");
    } else {
        for (size_t i = 0; i < s->n_env; i++) {
            if (!is_env(s->env[i])) {
                reject(o, "docker: env[%zu] is not NAME=value", i);
                return false;
            }
        }
        for (size_t i = 0; i < s->n_labels; i++) {
            if (s->labels[i].key == NULL || s->labels[i].key[0] == '\0'
                || strlen(s->labels[i].key) > LABEL_MAX_LEN || s->labels[i].value == NULL) {
                reject(o, "docker: label %zu has no key or value", i);
                return false;
            }
        }
        for (size_t i = 0; i < s->n_dirs; i++) {
            if (!is_abs_path(s->dirs[i]) || strcmp(s->dirs[i], "/") == 0) {
                reject(o, "docker: dirs[%zu] is not an absolute path below /", i);
                return false;
            }
        }
        for (size_t i = 0; i < s->n_files; i++) {
            const struct sl_launcher_file *f = &s->files[i];

            if (!is_abs_path(f->path) || strcmp(f->path, "/") == 0 || f->mode > 07777
                || (f->data == NULL && f->len > 0)) {
                reject(o, "docker: files[%zu] needs an absolute path below /, data and a mode", i);
                return false;
            }
        }
        return true;
    }
    return false;
}

/* The tar of the spec's directories (first) and files, names relative to /. */
static int create_tar(struct op *o, const struct sl_launcher_container *s)
{
    size_t n = s->n_dirs + s->n_files;
    struct tar_item *items;
    int rc;

    if (n == 0) {
        return 0;
    }
    items = sl_calloc(n, sizeof(*items));
    if (items == NULL) {
        return SL_ENOMEM;
    }
    for (size_t i = 0; i < s->n_dirs; i++) {
        items[i] = (struct tar_item){ s->dirs[i] + 1, 0755, NULL, 0 };
    }
    for (size_t i = 0; i < s->n_files; i++) {
        const struct sl_launcher_file *f = &s->files[i];

        items[s->n_dirs + i] =
                (struct tar_item){ f->path + 1, f->mode, f->data != NULL ? f->data : "", f->len };
    }
    rc = tar_build(items, n, &o->tar, &o->tar_len);
    sl_free(items);
    return rc;
}

static void docker_create_and_start(struct sl_launcher *l, const struct sl_launcher_container *spec,
                                    sl_launcher_started_fn *cb, void *arg)
{
    struct op *o = op_new((struct sl_docker *)l, OP_CREATE, (union op_cb){ .started = cb }, arg);
    json_t *j;
    int rc;

    if (o == NULL || o->rc < 0) {
        return;
    }
    if (spec == NULL) {
        reject(o, "docker: no container spec");
        return;
    }
    if (!create_spec_ok(o, spec)) {
        return;
    }
    j = create_body(o, spec);
    if (j == NULL) {
        fail_soon(o);
        return;
    }
    o->body = dump_json(j, &o->body_len);
    json_decref(j);
    o->name = sl_strdup(spec->name);
    o->network = sl_strdup(spec->network);
    rc = o->body == NULL || o->name == NULL || o->network == NULL ? SL_ENOMEM : create_tar(o, spec);
    if (rc < 0) {
        set_err(o, rc, "docker: cannot prepare the container: %s", sl_strerror(rc));
        fail_soon(o);
        return;
    }
    go(o, start_requestf(o, "POST", o->body, o->body_len, "application/json", CONTROL_BODY_MAX,
                         on_created, "/containers/create?name=%s", o->name));
}

/* ---------------------------------------------------------------------------------------- */
/* exec. */

static void on_exec_inspected(struct op *o);

/* The transfer ended by the exec's own deadline, or the deadline is already behind us. */
static bool exec_deadline_hit(struct op *o)
{
    if (o->deadline_ms == 0) {
        return false;
    }
    return (o->cc == CURLE_OPERATION_TIMEDOUT && o->timeout_is_deadline)
           || uv_now(o->d->loop) >= o->deadline_ms;
}

static void exec_deadline_passed(struct op *o)
{
    o->deadline_passed = true;
    o->exit_code = -1;
    o->rc = 0;
    o->err[0] = '\0';
    op_finish(o);
}

static int inspect_exec(struct op *o)
{
    return start_requestf(o, "GET", NULL, 0, NULL, CONTROL_BODY_MAX, on_exec_inspected,
                          "/exec/%s/json", o->exec_id);
}

static void on_exec_poll(uv_timer_t *t)
{
    struct op *o = SL_CONTAINER_OF(t, struct op, timer);

    if (o->deadline_ms != 0 && uv_now(o->d->loop) >= o->deadline_ms) {
        exec_deadline_passed(o);
        return;
    }
    if (inspect_exec(o) < 0) {
        op_finish(o);
    }
}

static void on_exec_inspected(struct op *o)
{
    json_t *j;
    json_t *code;

    if (check_response(o, "inspect exec", 200, 200) < 0) {
        if (exec_deadline_hit(o)) {
            exec_deadline_passed(o);
            return;
        }
        op_finish(o);
        return;
    }
    j = response_object(o, "inspect exec");
    if (j == NULL) {
        op_finish(o);
        return;
    }
    code = json_object_get(j, "ExitCode");
    if (json_is_true(json_object_get(j, "Running")) && ++o->polls < EXEC_POLLS) {
        json_decref(j);
        (void)uv_timer_start(&o->timer, on_exec_poll, EXEC_POLL_MS, 0);
        return;
    }
    /* Still running after the polls, or no code: unknown (-1). */
    o->exit_code = -1;
    if (!json_is_true(json_object_get(j, "Running")) && json_is_integer(code)
        && json_integer_value(code) >= 0 && json_integer_value(code) <= 255) {
        o->exit_code = (int)json_integer_value(code);
    }
    json_decref(j);
    op_finish(o);
}

static void on_exec_stream_end(struct op *o)
{
    if (o->cc != CURLE_OK && exec_deadline_hit(o)) {
        exec_deadline_passed(o);
        return;
    }
    if (o->stream_bad) {
        set_err(o, SL_EIO, "docker: exec: malformed output stream");
        op_finish(o);
        return;
    }
    if (o->oom) {
        set_err(o, SL_ENOMEM, "docker: exec: out of memory keeping the output");
        op_finish(o);
        return;
    }
    if (check_response(o, "start exec", 200, 200) < 0 || inspect_exec(o) < 0) {
        op_finish(o);
    }
}

static char start_body[] = "{\"Detach\":false,\"Tty\":false}";

static void on_exec_created(struct op *o)
{
    json_t *j;
    const char *id;

    if (check_response(o, "create exec", 201, 201) < 0) {
        if (exec_deadline_hit(o)) {
            exec_deadline_passed(o);
            return;
        }
        op_finish(o);
        return;
    }
    j = response_object(o, "create exec");
    id = json_str(j, "Id");
    if (j != NULL && !is_name(id)) {
        set_err(o, SL_EIO, "docker: create exec: no valid Id in the answer");
    } else if (j != NULL) {
        o->exec_id = sl_strdup(id);
        if (o->exec_id == NULL) {
            set_err(o, SL_ENOMEM, "docker: out of memory");
        }
    }
    json_decref(j);
    if (o->rc < 0) {
        op_finish(o);
        return;
    }
    o->stream = true;
    if (start_requestf(o, "POST", start_body, sizeof(start_body) - 1, "application/json",
                       CONTROL_BODY_MAX, on_exec_stream_end, "/exec/%s/start", o->exec_id)
        < 0) {
        op_finish(o);
    }
}

static json_t *exec_body(struct op *o, const struct sl_launcher_exec *e)
{
    json_t *cmd = json_array();
    json_t *env = json_array();
    json_t *j = NULL;
    bool ok = cmd != NULL && env != NULL;

    for (size_t i = 0; ok && i < e->argc; i++) {
        ok = json_array_append_new(cmd, json_string(e->argv[i])) == 0;
    }
    for (size_t i = 0; ok && i < e->n_env; i++) {
        ok = json_array_append_new(env, json_string(e->env[i])) == 0;
    }
    if (ok) {
        j = json_pack("{s:b, s:b, s:b, s:b, s:O, s:O}", "AttachStdin", 0, "AttachStdout", 1,
                      "AttachStderr", 1, "Tty", 0, "Cmd", cmd, "Env", env);
    }
    if (j != NULL && e->cwd != NULL
        && json_object_set_new(j, "WorkingDir", json_string(e->cwd)) != 0) {
        json_decref(j);
        j = NULL;
    }
    if (j == NULL) {
        set_err(o, SL_EINVAL, "docker: exec: arguments or environment are not valid UTF-8");
    }
    json_decref(cmd);
    json_decref(env);
    return j;
}

static void docker_exec(struct sl_launcher *l, const char *id, const struct sl_launcher_exec *e,
                        sl_launcher_exec_fn *cb, void *arg)
{
    struct op *o = op_new((struct sl_docker *)l, OP_EXEC, (union op_cb){ .exec = cb }, arg);
    json_t *j;

    if (o == NULL || o->rc < 0) {
        return;
    }
    if (!is_name(id)) {
        reject(o, "docker: invalid container id");
        return;
    }
    if (e == NULL || e->argc == 0 || e->argv == NULL || e->argv[0] == NULL
        || e->argv[0][0] == '\0') {
        reject(o, "docker: exec needs a command");
        return;
    }
    for (size_t i = 0; i < e->argc; i++) {
        if (e->argv[i] == NULL) {
            reject(o, "docker: exec argv[%zu] is NULL", i);
            return;
        }
    }
    for (size_t i = 0; i < e->n_env; i++) {
        if (!is_env(e->env[i])) {
            reject(o, "docker: exec env[%zu] is not NAME=value", i);
            return;
        }
    }
    if (e->cwd != NULL && !is_abs_path(e->cwd)) {
        reject(o, "docker: exec cwd must be an absolute path");
        return;
    }
    o->deadline_ms = e->deadline_ms != 0 ? uv_now(o->d->loop) + e->deadline_ms : 0;
    o->max_out = e->max_stdout;
    o->max_err = e->max_stderr;
    sl_buf_init(&o->out, e->max_stdout);
    sl_buf_init(&o->errout, e->max_stderr);
    j = exec_body(o, e);
    o->body = j != NULL ? dump_json(j, &o->body_len) : NULL;
    json_decref(j);
    o->id = sl_strdup(id);
    if (o->body == NULL || o->id == NULL) {
        if (o->rc == 0) {
            set_err(o, SL_ENOMEM, "docker: out of memory");
        }
        fail_soon(o);
        return;
    }
    go(o, start_requestf(o, "POST", o->body, o->body_len, "application/json", CONTROL_BODY_MAX,
                         on_exec_created, "/containers/%s/exec", o->id));
}

/* ---------------------------------------------------------------------------------------- */
/* list. */

static void inspect_next(struct op *o);

/* Keeps what an entry needs from one container's inspect answer. */
static int keep_found(struct op *o, const json_t *c)
{
    const json_t *cfg = json_object_get(c, "Config");
    json_t *nets = json_object_get(json_object_get(c, "NetworkSettings"), "Networks");
    json_t *labels = json_object_get(cfg, "Labels");
    json_t *env = json_object_get(cfg, "Env");
    const char *ip = "";
    const char *key;
    json_t *net;
    const char *name = json_str(c, "Name");
    json_t *e;

    labels = json_is_object(labels) ? json_incref(labels) : json_object();
    env = json_is_array(env) ? json_incref(env) : json_array();
    json_object_foreach(nets, key, net)
    {
        const char *a = json_str(net, "IPAddress");

        if (a != NULL && a[0] != '\0') {
            ip = a;
            break;
        }
    }
    if (name != NULL && name[0] == '/') {
        name++;
    }
    /* "o" steals the two references, on failure too. */
    e = json_pack("{s:s, s:s, s:b, s:s, s:o, s:o}", "id", json_str(c, "Id"), "name",
                  name != NULL ? name : "", "running",
                  json_is_true(json_object_get(json_object_get(c, "State"), "Running")), "ip", ip,
                  "labels", labels, "env", env);
    if (e == NULL || json_array_append_new(o->found, e) != 0) {
        set_err(o, SL_EIO, "docker: list: an inspect answer is incomplete");
        return o->rc;
    }
    return 0;
}

static void on_list_inspected(struct op *o)
{
    json_t *j;

    if (check_response(o, "inspect container", 200, 200) < 0) {
        if (o->rc != SL_ENOTFOUND) {
            op_finish(o);
            return;
        }
        /* Removed since the listing: not there any more. */
        o->rc = 0;
        o->err[0] = '\0';
        inspect_next(o);
        return;
    }
    j = response_object(o, "inspect container");
    if (j == NULL || keep_found(o, j) < 0) {
        json_decref(j);
        op_finish(o);
        return;
    }
    json_decref(j);
    inspect_next(o);
}

static void inspect_next(struct op *o)
{
    const char *id;

    if (o->next_id == json_array_size(o->ids)) {
        op_finish(o);
        return;
    }
    id = json_string_value(json_array_get(o->ids, o->next_id++));
    if (start_requestf(o, "GET", NULL, 0, NULL, CONTROL_BODY_MAX, on_list_inspected,
                       "/containers/%s/json", id)
        < 0) {
        op_finish(o);
    }
}

static void on_listed(struct op *o)
{
    json_t *j;
    json_t *c;
    size_t i;

    if (check_response(o, "list containers", 200, 200) < 0) {
        op_finish(o);
        return;
    }
    j = json_loadb((const char *)o->resp.p, o->resp.len, 0, NULL);
    o->ids = json_array();
    o->found = json_array();
    if (!json_is_array(j) || o->ids == NULL || o->found == NULL) {
        set_err(o, SL_EIO, "docker: list containers: the answer is not a JSON array");
        json_decref(j);
        op_finish(o);
        return;
    }
    json_array_foreach(j, i, c)
    {
        const char *id = json_str(c, "Id");

        if (!is_name(id) || json_array_append_new(o->ids, json_string(id)) != 0) {
            set_err(o, SL_EIO, "docker: list containers: an entry has no valid Id");
            json_decref(j);
            op_finish(o);
            return;
        }
    }
    json_decref(j);
    inspect_next(o);
}

static void deliver_list(struct op *o)
{
    size_t n = o->rc == 0 ? json_array_size(o->found) : 0;
    struct sl_launcher_entry *entries = n > 0 ? sl_calloc(n, sizeof(*entries)) : NULL;
    size_t total_labels = 0;
    size_t total_env = 0;
    struct sl_launcher_label *labels = NULL;
    const char **env = NULL;
    size_t li = 0;
    size_t ei = 0;

    for (size_t i = 0; i < n; i++) {
        json_t *f = json_array_get(o->found, i);

        total_labels += json_object_size(json_object_get(f, "labels"));
        total_env += json_array_size(json_object_get(f, "env"));
    }
    labels = total_labels > 0 ? sl_calloc(total_labels, sizeof(*labels)) : NULL;
    env = total_env > 0 ? sl_calloc(total_env, sizeof(*env)) : NULL;
    if ((n > 0 && entries == NULL) || (total_labels > 0 && labels == NULL)
        || (total_env > 0 && env == NULL)) {
        o->cb.list(o->arg, SL_ENOMEM, "docker: out of memory", NULL, 0);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *f = json_array_get(o->found, i);
        struct sl_launcher_entry *e = &entries[i];
        const char *key;
        json_t *v;
        size_t k;

        e->id = json_str(f, "id");
        e->name = json_str(f, "name");
        e->running = json_is_true(json_object_get(f, "running"));
        e->ip = json_str(f, "ip");
        e->labels = labels != NULL ? labels + li : NULL;
        json_object_foreach(json_object_get(f, "labels"), key, v)
        {
            if (json_is_string(v)) {
                labels[li++] = (struct sl_launcher_label){ key, json_string_value(v) };
                e->n_labels++;
            }
        }
        e->env = env != NULL ? env + ei : NULL;
        json_array_foreach(json_object_get(f, "env"), k, v)
        {
            if (json_is_string(v)) {
                env[ei++] = json_string_value(v);
                e->n_env++;
            }
        }
    }
    o->cb.list(o->arg, o->rc, o->rc < 0 ? o->err : NULL, entries, n);
out:
    sl_free(entries);
    sl_free(labels);
    sl_free((void *)env);
}

static void docker_list(struct sl_launcher *l, const char *label_key, sl_launcher_list_fn *cb,
                        void *arg)
{
    struct op *o = op_new((struct sl_docker *)l, OP_LIST, (union op_cb){ .list = cb }, arg);
    json_t *filters;
    struct sl_buf path;
    char *text = NULL;
    size_t n = 0;
    int rc;

    if (o == NULL || o->rc < 0) {
        return;
    }
    if (label_key == NULL || label_key[0] == '\0' || strlen(label_key) > LABEL_MAX_LEN) {
        reject(o, "docker: a label key must be 1-%u characters", LABEL_MAX_LEN);
        return;
    }
    filters = json_pack("{s:[s]}", "label", label_key);
    if (filters == NULL) {
        reject(o, "docker: the label key is not valid UTF-8");
        return;
    }
    text = dump_json(filters, &n);
    json_decref(filters);
    if (text == NULL) {
        set_err(o, SL_ENOMEM, "docker: out of memory");
        fail_soon(o);
        return;
    }
    sl_buf_init(&path, URL_MAX);
    rc = sl_buf_append_str(&path, "/containers/json?all=1&filters=");
    rc = rc < 0 ? rc : append_escaped(&path, text);
    sl_free(text);
    if (rc < 0) {
        set_err(o, rc, "docker: cannot build the request: %s", sl_strerror(rc));
        fail_soon(o);
    } else {
        go(o,
           start_request(o, "GET", sl_buf_cstr(&path), NULL, 0, NULL, CONTROL_BODY_MAX, on_listed));
    }
    sl_buf_finish(&path);
}

/* ---------------------------------------------------------------------------------------- */
/* close and create. */

/* Cleans up libcurl and closes the launcher's handles; the memory goes with the last close. */
static void shutdown_launcher(struct sl_docker *d)
{
    if (d->shut) {
        return;
    }
    d->shut = true;
    /* Launches that could not allocate are reported now: their timer is about to close. */
    if (d->n_oom > 0) {
        on_oom_timer(&d->oom_timer);
    }
    /* May call on_curl_socket(CURL_POLL_REMOVE) for pooled connections. */
    (void)curl_multi_cleanup(d->multi);
    d->multi = NULL;
    while (d->socks != NULL) {
        sock_close(d->socks);
    }
    sl_free(d->spare);
    d->spare = NULL;
    (void)uv_timer_stop(&d->timer);
    d->pending_closes += 2;
    uv_close((uv_handle_t *)&d->timer, on_handle_closed);
    uv_close((uv_handle_t *)&d->oom_timer, on_handle_closed);
    /* The count started at 1 for the launcher itself. */
    maybe_freed(d);
}

static void docker_close(struct sl_launcher *l, void (*closed)(void *arg), void *arg)
{
    struct sl_docker *d = (struct sl_docker *)l;

    if (d->closing) {
        return;
    }
    d->closing = true;
    d->closed = closed;
    d->closed_arg = arg;
    for (struct op *o = d->ops; o != NULL; o = o->next) {
        (void)uv_timer_stop(&o->timer);
        set_err(o, SL_ECANCELED, "docker: the launcher is closing");
        fail_soon(o);
    }
    /* Every transfer is gone; the operations report from their timers, and `closed` runs
     * after the last of them (maybe_freed). */
    shutdown_launcher(d);
}

static const struct sl_launcher_ops docker_ops = {
    .ping = docker_ping,
    .ensure_network = docker_ensure_network,
    .has_image = docker_has_image,
    .create_and_start = docker_create_and_start,
    .exec = docker_exec,
    .stat = docker_stat,
    .read_file = docker_read_file,
    .write_file = docker_write_file,
    .remove = docker_remove,
    .list = docker_list,
    .close = docker_close,
};

int sl_docker_launcher_create(uv_loop_t *loop, const char *socket_path, struct sl_launcher **out)
{
    struct sl_docker *d;
    size_t n = socket_path != NULL ? strlen(socket_path) : 0;

    SL_ENSURE(loop != NULL && out != NULL, SL_EINVAL);
    SL_ENSURE(n > 0 && n <= SOCKET_PATH_MAX, SL_EINVAL);
    SL_ENSURE(sodium_init() >= 0, SL_ECRYPTO);
    d = sl_calloc(1, sizeof(*d));
    if (d == NULL) {
        return SL_ENOMEM;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        sl_free(d);
        return SL_EIO;
    }
    d->multi = curl_multi_init();
    if (d->multi == NULL
        || curl_multi_setopt(d->multi, CURLMOPT_SOCKETFUNCTION, on_curl_socket) != CURLM_OK
        || curl_multi_setopt(d->multi, CURLMOPT_SOCKETDATA, d) != CURLM_OK
        || curl_multi_setopt(d->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer_change) != CURLM_OK
        || curl_multi_setopt(d->multi, CURLMOPT_TIMERDATA, d) != CURLM_OK) {
        (void)curl_multi_cleanup(d->multi);
        curl_global_cleanup();
        sl_free(d);
        return SL_EIO;
    }
    d->base.ops = &docker_ops;
    d->loop = loop;
    memcpy(d->socket_path, socket_path, n + 1);
    /* Timer inits on a live loop cannot fail. */
    (void)uv_timer_init(loop, &d->timer);
    (void)uv_timer_init(loop, &d->oom_timer);
    d->timer.data = d;
    d->oom_timer.data = d;
    d->pending_closes = 1;
    *out = &d->base;
    return 0;
}
