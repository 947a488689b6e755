/* SPDX-License-Identifier: Apache-2.0 */
#include "proxy/audit.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"
#include "policy/placeholder.h"

/* Strings are cut to these many bytes in a line. Escaping can make a byte six, and the sum of
 * six times every cap plus the fixed text stays under SL_AUDIT_LINE_MAX, so a line is never
 * dropped for its size. */
#define PATH_MAX_BYTES 1024
#define HOST_MAX_BYTES 512
#define NAME_MAX_BYTES 256
/* A DNS line's type, rcode and transport names. */
#define DNS_MAX_BYTES 16
/* Longest duration written, in ms (about 31 years). */
#define AUDIT_MS_MAX 1e12
/* The writer gathers lines for at most this long, or until FLUSH_BYTES are pending, before one
 * write(2): under load a worker then wakes it about once per batch instead of once per line
 * (each wake-up was a futex call and a context switch on the request path). */
#define FLUSH_DELAY_NS (20 * 1000 * 1000L)
#define FLUSH_BYTES    (64u << 10)
/* After a failed write (a full disk), the writer tries again this often. */
#define RETRY_DELAY_NS (200 * 1000 * 1000L)

struct sl_audit {
    int fd;
    /* We opened fd (not stdout): it can be reopened, and truncated back after a short write. */
    bool own_fd;
    /* The file's path, for sl_audit_reopen(); "" for standard output. */
    char path[4096];
    pthread_t writer;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    /* Lines waiting for the writer; with `held`, at most `max_pending` bytes; guarded by `lock`. */
    struct sl_buf pending;
    size_t max_pending;
    /* Bytes the writer holds that a failed write left unwritten (they count against
     * `max_pending` too); guarded by `lock`. */
    size_t held;
    /* The writer is asked to finish; guarded by `lock`. */
    bool stopping;
    /* The writer is asked to reopen the file (SIGUSR1); guarded by `lock`. */
    bool reopen_asked;
    /* The writer sleeps until a first line arrives (workers then signal it); guarded by `lock`. */
    bool idle;
    /* Lines dropped because `pending` was full; guarded by `lock`. */
    uint64_t dropped;
    /* Failed write(2) calls, reopens done, and the errno of the last failure (0 while
     * healthy); guarded by `lock`. */
    uint64_t write_failures;
    uint64_t reopens;
    int last_errno;
    /* False from a failed write until everything held is written: read by workers on every
     * request (sl_audit_healthy()), so an atomic rather than under `lock`. */
    atomic_bool healthy;
    /* Pending and held bytes are within a line of `congested_at`: the log does not keep up. Lines
     * of anything but an allowed request are then dropped, the rest of the cap is kept for the
     * lines of requests already let out, and the proxy refuses new ones under --audit-failure deny
     * (sl_audit_congested()). Set by whoever changes those bytes, under `lock`; read by workers on
     * every request. */
    atomic_bool congested;
    size_t congested_at;
    /* Dropped count the writer last reported; writer thread only. */
    uint64_t dropped_reported;
};

/* A line being formatted into fixed storage: no allocation per line. */
struct line {
    char *p;
    size_t len;
    size_t cap;
};

static int put(struct line *l, const char *s, size_t n)
{
    if (n >= l->cap - l->len) {
        return SL_ETOOBIG;
    }
    memcpy(l->p + l->len, s, n);
    l->len += n;
    l->p[l->len] = '\0';
    return 0;
}

static int put_cstr(struct line *l, const char *s)
{
    return put(l, s, strlen(s));
}

/* Numbers without printf: a line is written for every request. */
static int put_u64(struct line *l, uint64_t v)
{
    char digits[20];
    size_t n;
    const char *p = sl_fmt_u64(digits + sizeof(digits), v, &n);

    return put(l, p, n);
}

static int put_i64(struct line *l, int64_t v)
{
    if (v < 0) {
        SL_TRY(put(l, "-", 1));
        return put_u64(l, (uint64_t)0 - (uint64_t)v);
    }
    return put_u64(l, (uint64_t)v);
}

/* Appends `s` as a JSON string (quoted, escaped, cut at `max` bytes). Bytes outside printable
 * ASCII are written as \u00XX, so a line is always valid JSON whatever the request carried. */
static int put_str(struct line *b, const char *s, size_t max)
{
    static const char hex[] = "0123456789abcdef";
    size_t n;

    if (s == NULL) {
        return put_cstr(b, "null");
    }
    n = strnlen(s, max + 1);
    SL_TRY(put(b, "\"", 1));
    for (size_t i = 0; i < n && i < max; i++) {
        unsigned char c = (unsigned char)s[i];
        size_t run = i;

        /* A run of bytes that need no escape goes in at once. */
        while (run < n && run < max && s[run] != '"' && s[run] != '\\'
               && (unsigned char)s[run] >= 0x20 && (unsigned char)s[run] < 0x7f) {
            run++;
        }
        if (run > i) {
            SL_TRY(put(b, s + i, run - i));
            i = run - 1;
            continue;
        }
        if (c == '"' || c == '\\') {
            char esc[2] = { '\\', (char)c };

            SL_TRY(put(b, esc, 2));
        } else {
            char esc[6] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15] };

            SL_TRY(put(b, esc, sizeof(esc)));
        }
    }
    if (n > max) {
        SL_TRY(put_cstr(b, "..."));
    }
    return put(b, "\"", 1);
}

static int put_addr_port(struct line *b, const char *addr, bool v6, uint16_t port)
{
    SL_TRY(put(b, v6 ? "\"[" : "\"", v6 ? 2 : 1));
    SL_TRY(put_cstr(b, addr));
    SL_TRY(put(b, v6 ? "]:" : ":", v6 ? 2 : 1));
    SL_TRY(put_u64(b, port));
    return put(b, "\"", 1);
}

static int put_src(struct line *b, const struct sockaddr *sa)
{
    char addr[INET6_ADDRSTRLEN];

    if (sa == NULL) {
        return put_cstr(b, "null");
    }
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;

        if (inet_ntop(AF_INET, &in->sin_addr, addr, sizeof(addr)) == NULL) {
            return put_cstr(b, "null");
        }
        return put_addr_port(b, addr, false, ntohs(in->sin_port));
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;

        if (inet_ntop(AF_INET6, &in6->sin6_addr, addr, sizeof(addr)) == NULL) {
            return put_cstr(b, "null");
        }
        return put_addr_port(b, addr, true, ntohs(in6->sin6_port));
    }
    return put_cstr(b, "null");
}

/* Appends a duration. JSON has no NaN or infinity (printf would write "nan", and the line would
 * no longer parse), so those are written as null; and a duration is capped at AUDIT_MS_MAX so
 * that its text stays short (a double can take 300 digits) and the line within its size. */
static int put_ms(struct line *b, double ms)
{
    if (!isfinite(ms)) {
        return put_cstr(b, "null");
    }
    if (ms > AUDIT_MS_MAX) {
        ms = AUDIT_MS_MAX;
    } else if (ms < -AUDIT_MS_MAX) {
        ms = -AUDIT_MS_MAX;
    }
    /* One decimal, rounded to the nearest tenth (|ms| <= 1e12, so 1e13 tenths fit). */
    double x = ms * 10.0;
    int64_t tenths = (int64_t)(x < 0 ? x - 0.5 : x + 0.5);
    uint64_t mag = tenths < 0 ? (uint64_t)0 - (uint64_t)tenths : (uint64_t)tenths;

    if (tenths < 0) {
        SL_TRY(put(b, "-", 1));
    }
    SL_TRY(put_u64(b, mag / 10));
    SL_TRY(put(b, ".", 1));
    return put_u64(b, mag % 10);
}

/* `s`, or, when it holds a placeholder's shape (policy/placeholder.h), a copy in `buf` (`cap`
 * bytes; cut, one byte over `max` kept so that put_str() marks the cut) with its random part
 * masked: no log line shows a placeholder. */
static const char *masked(const char *s, char *buf, size_t cap, size_t max)
{
    size_t n;

    if (s == NULL || !sl_placeholder_seen(s, strlen(s))) {
        return s;
    }
    n = strlen(s) < max + 1 ? strlen(s) : max + 1;
    n = n < cap - 1 ? n : cap - 1;
    memcpy(buf, s, n);
    buf[n] = '\0';
    sl_placeholder_mask(buf, n);
    return buf;
}

/* The last second formatted by this thread, and its text. */
static _Thread_local time_t ts_sec;
static _Thread_local char ts_text[32];
static _Thread_local size_t ts_len;

static int format_into(const struct sl_audit_record *r, struct line *b)
{
    char path[PATH_MAX_BYTES + 2];
    char host[HOST_MAX_BYTES + 2];
    char connect_host[HOST_MAX_BYTES + 2];
    struct timespec now;
    unsigned msec;
    char frac[6];

    clock_gettime(CLOCK_REALTIME, &now);
    /* The date and time to the second are formatted once a second per thread. */
    if (now.tv_sec != ts_sec || ts_len == 0) {
        struct tm tm;

        gmtime_r(&now.tv_sec, &tm);
        ts_len = strftime(ts_text, sizeof(ts_text), "%Y-%m-%dT%H:%M:%S", &tm);
        if (ts_len == 0) {
            return SL_EINVAL;
        }
        ts_sec = now.tv_sec;
    }
    msec = (unsigned)(now.tv_nsec / 1000000L);
    frac[0] = '.';
    frac[1] = (char)('0' + msec / 100);
    frac[2] = (char)('0' + msec / 10 % 10);
    frac[3] = (char)('0' + msec % 10);
    frac[4] = 'Z';
    frac[5] = '"';
    if (r->path != NULL) {
        size_t len = strcspn(r->path, "?#");

        /* One byte over the cap is kept so that put_str() marks the cut. */
        if (len > PATH_MAX_BYTES + 1) {
            len = PATH_MAX_BYTES + 1;
        }
        memcpy(path, r->path, len);
        path[len] = '\0';
        sl_placeholder_mask(path, len);
    }
    SL_TRY(put_cstr(b, "{\"ts\":\""));
    SL_TRY(put(b, ts_text, ts_len));
    SL_TRY(put(b, frac, sizeof(frac)));
    SL_TRY(put_cstr(b, ",\"client\":"));
    SL_TRY(put_str(b, r->client, NAME_MAX_BYTES));
    SL_TRY(put_cstr(b, ",\"environment\":"));
    SL_TRY(put_str(b, r->environment, NAME_MAX_BYTES));
    SL_TRY(put_cstr(b, ",\"src\":"));
    SL_TRY(put_src(b, r->src));
    SL_TRY(put_cstr(b, ",\"method\":"));
    SL_TRY(put_str(b, r->method, 64));
    SL_TRY(put_cstr(b, ",\"scheme\":"));
    SL_TRY(put_str(b, r->scheme, 16));
    SL_TRY(put_cstr(b, ",\"host\":"));
    SL_TRY(put_str(b, masked(r->host, host, sizeof(host), HOST_MAX_BYTES), HOST_MAX_BYTES));
    SL_TRY(put_cstr(b, ",\"port\":"));
    SL_TRY(put_u64(b, r->port));
    SL_TRY(put_cstr(b, ",\"path\":"));
    SL_TRY(put_str(b, r->path != NULL ? path : NULL, PATH_MAX_BYTES));
    if (r->connect_host_header != NULL && r->path == NULL) {
        SL_TRY(put_cstr(b, ",\"connect_host_header\":"));
        SL_TRY(put_str(
                b,
                masked(r->connect_host_header, connect_host, sizeof(connect_host), HOST_MAX_BYTES),
                HOST_MAX_BYTES));
    }
    if (r->dns) {
        SL_TRY(put_cstr(b, ",\"dns\":{\"type\":"));
        SL_TRY(put_str(b, r->dns_type, DNS_MAX_BYTES));
        SL_TRY(put_cstr(b, ",\"rcode\":"));
        SL_TRY(put_str(b, r->dns_rcode, DNS_MAX_BYTES));
        SL_TRY(put_cstr(b, ",\"transport\":"));
        SL_TRY(put_str(b, r->dns_transport, DNS_MAX_BYTES));
        SL_TRY(put(b, "}", 1));
    }
    SL_TRY(put_cstr(b, r->dns         ? ",\"decision\":\"dns\",\"reason\":"
                       : r->allow     ? ",\"decision\":\"allow\",\"reason\":"
                       : r->challenge ? ",\"decision\":\"challenge\",\"reason\":"
                       : r->error     ? ",\"decision\":\"error\",\"reason\":"
                                      : ",\"decision\":\"deny\",\"reason\":"));
    SL_TRY(put_str(b, r->reason == SL_REASON_NONE ? NULL : sl_reason_code(r->reason), 64));
    if (r->allow && r->observed) {
        SL_TRY(put_cstr(b, ",\"observed\":true,\"would_deny\":"));
        SL_TRY(put_str(b, sl_reason_code(r->would_deny), 64));
    }
    SL_TRY(put_cstr(b, ",\"rule\":"));
    SL_TRY(put_str(b, r->rule, HOST_MAX_BYTES));
    if (r->passthrough) {
        SL_TRY(put_cstr(b, ",\"tls\":\"passthrough\""));
    }
    if (r->transparent) {
        SL_TRY(put_cstr(b, ",\"mode\":\"transparent\""));
    }
    SL_TRY(put_cstr(b, r->credential ? ",\"credential\":true,\"status\":"
                                     : ",\"credential\":false,\"status\":"));
    SL_TRY(put_i64(b, r->status));
    SL_TRY(put_cstr(b, ",\"bytes_up\":"));
    SL_TRY(put_u64(b, r->bytes_up));
    SL_TRY(put_cstr(b, ",\"bytes_down\":"));
    SL_TRY(put_u64(b, r->bytes_down));
    if (r->aborted_cause != NULL) {
        SL_TRY(put_cstr(b, ",\"aborted\":{\"side\":"));
        SL_TRY(put_str(b, r->aborted_side, 16));
        SL_TRY(put_cstr(b, ",\"cause\":"));
        SL_TRY(put_str(b, r->aborted_cause, 32));
        SL_TRY(put(b, "}", 1));
    }
    SL_TRY(put_cstr(b, ",\"ms\":"));
    SL_TRY(put_ms(b, r->ms));
    SL_TRY(put_cstr(b, ",\"policy_version\":"));
    SL_TRY(put_i64(b, r->policy_version));
    return put(b, "}\n", 2);
}

int sl_audit_format(const struct sl_audit_record *r, char *buf, size_t cap)
{
    struct line l = { buf, 0, cap };
    int rc;

    if (cap == 0) {
        return SL_ETOOBIG;
    }
    buf[0] = '\0';
    rc = format_into(r, &l);
    if (rc < 0) {
        buf[0] = '\0';
        return rc;
    }
    return (int)l.len;
}

/*
 * Writing. The file only ever gets whole lines: a line is in it entire, or not at all.
 *
 * `out` holds whole lines, oldest first. write(2) may stop short of the end (a disk that fills
 * up in the middle of a batch) and leave part of a line in the file. Then the writer cuts that
 * part off again (ftruncate() to where the line started: the file is ours alone, opened with
 * O_APPEND, so the line's start is the end of the file less the part written) and keeps the
 * whole line for the next attempt. Should the cut fail too, the rest of the line is kept
 * instead, and written first when the disk has room again (the line then completes; until
 * then the file ends in a part of a line, which readers of the log skip as they skip any last
 * line without its newline); no reopen happens in between, so both parts land in one file.
 * Standard output (a pipe, a terminal) cannot be cut: there the rest is kept likewise.
 */

/* Writes what `out` holds; consumes what reached the file. Returns 0 when everything was
 * written, else the errno of the failure (what is left starts at a line, or continues the
 * line of which `*mid_line` says a part is in the file). */
static int write_lines(struct sl_audit *a, struct sl_buf *out, bool *mid_line)
{
    size_t off = 0;
    int err = 0;

    while (off < out->len) {
        ssize_t w = write(a->fd, out->p + off, out->len - off);

        if (w == -1 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            err = w == 0 ? EIO : errno;
            break;
        }
        off += (size_t)w;
    }
    if (err != 0 && off > 0) {
        const uint8_t *nl = NULL;
        size_t start = 0;

        for (size_t i = off; i > 0; i--) {
            if (out->p[i - 1] == '\n') {
                nl = out->p + i - 1;
                break;
            }
        }
        if (nl != NULL) {
            start = (size_t)(nl - out->p) + 1;
        }
        /* A part of the line at `start` is in the file; unless a part of it was there before
         * this call (`*mid_line`, start 0), cut it off again. */
        if (off > start && !(start == 0 && *mid_line) && a->own_fd) {
            off_t end = lseek(a->fd, 0, SEEK_CUR);

            if (end != (off_t)-1 && ftruncate(a->fd, end - (off_t)(off - start)) == 0) {
                off = start;
            }
        }
        *mid_line = off > start;
    } else if (off == out->len) {
        *mid_line = false;
    }
    sl_buf_consume(out, off);
    return err;
}

/* Closes the file and opens its path again (after a rotation moved it away: the new file is
 * created 0600). On failure the old descriptor stays and the next batch asks again. */
static bool reopen_file(struct sl_audit *a)
{
    int fd;

    if (!a->own_fd) {
        return true;
    }
    fd = open(a->path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd == -1) {
        sl_log(SL_LOG_ERROR, 0,
               "msg=\"cannot reopen the audit log; writing on to the old file\" file=%s err=\"%s\"",
               a->path, strerror(errno));
        return false;
    }
    (void)close(a->fd);
    a->fd = fd;
    sl_log(SL_LOG_INFO, 0, "msg=\"audit log reopened\" file=%s", a->path);
    return true;
}

static void deadline(struct timespec *due, long ns)
{
    (void)clock_gettime(CLOCK_MONOTONIC, due);
    due->tv_nsec += ns;
    if (due->tv_nsec >= 1000000000L) {
        due->tv_sec++;
        due->tv_nsec -= 1000000000L;
    }
}

/* The writer's condition variable, timed against CLOCK_MONOTONIC (a wall-clock step must not
 * hold a batch back). Returns 0 or an errno value. */
static int init_wake(pthread_cond_t *c)
{
    pthread_condattr_t attr;
    int rc = pthread_condattr_init(&attr);

    if (rc != 0) {
        return rc;
    }
    rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (rc == 0) {
        rc = pthread_cond_init(c, &attr);
    }
    pthread_condattr_destroy(&attr);
    return rc;
}

/* Waits, with `a->lock` held, until a batch is due: FLUSH_BYTES pending, FLUSH_DELAY_NS after
 * the first pending line, a reopen, or `stopping`. With lines held from a failed write
 * (`retrying`), until RETRY_DELAY_NS passed instead. */
static void wait_for_batch(struct sl_audit *a, bool retrying)
{
    struct timespec due;

    if (retrying) {
        deadline(&due, RETRY_DELAY_NS);
        while (!a->stopping && !a->reopen_asked) {
            if (pthread_cond_timedwait(&a->wake, &a->lock, &due) == ETIMEDOUT) {
                break;
            }
        }
        return;
    }
    a->idle = true;
    while (a->pending.len == 0 && !a->stopping && !a->reopen_asked) {
        pthread_cond_wait(&a->wake, &a->lock);
    }
    a->idle = false;
    if (a->stopping || a->pending.len == 0) {
        return;
    }
    deadline(&due, FLUSH_DELAY_NS);
    while (a->pending.len < FLUSH_BYTES && !a->stopping) {
        if (pthread_cond_timedwait(&a->wake, &a->lock, &due) == ETIMEDOUT) {
            break;
        }
    }
}

/* Takes the pending lines into `out`: a swap when `out` is empty, else they are appended
 * (both are within `max_pending` together, sl_audit_write() sees to it). `a->lock` held. */
static void take_pending(struct sl_audit *a, struct sl_buf *out)
{
    if (a->pending.len == 0) {
        return;
    }
    if (out->len == 0) {
        struct sl_buf tmp = a->pending;

        a->pending = *out;
        *out = tmp;
        return;
    }
    if (sl_buf_append(out, a->pending.p, a->pending.len) == 0) {
        sl_buf_reset(&a->pending);
    }
}

/* Congested: the next line of a refusal might not fit below `congested_at` any more. `a->lock`
 * held. */
static void note_congestion(struct sl_audit *a)
{
    atomic_store_explicit(&a->congested,
                          a->pending.len + a->held + SL_AUDIT_LINE_MAX > a->congested_at,
                          memory_order_relaxed);
}

/* One attempt at what `out` holds, and the health that follows from it. */
static void write_batch(struct sl_audit *a, struct sl_buf *out, bool *mid_line)
{
    bool was_healthy = atomic_load_explicit(&a->healthy, memory_order_relaxed);
    int err = out->len > 0 ? write_lines(a, out, mid_line) : 0;

    pthread_mutex_lock(&a->lock);
    a->held = out->len;
    note_congestion(a);
    if (err != 0) {
        a->write_failures++;
        a->last_errno = err;
    } else {
        a->last_errno = 0;
    }
    pthread_mutex_unlock(&a->lock);
    atomic_store_explicit(&a->healthy, err == 0, memory_order_relaxed);
    if (err != 0 && was_healthy) {
        sl_log(SL_LOG_ERROR, 0,
               "msg=\"audit log write failed; its lines are kept and retried\" file=%s err=\"%s\" "
               "held_bytes=%zu",
               a->own_fd ? a->path : "-", strerror(err), out->len);
    } else if (err == 0 && !was_healthy) {
        sl_log(SL_LOG_WARN, 0, "msg=\"audit log writable again; held lines written\" file=%s",
               a->own_fd ? a->path : "-");
    }
}

static void *writer_main(void *arg)
{
    struct sl_audit *a = arg;
    struct sl_buf out;
    bool stop = false;
    bool mid_line = false;
    bool reopen = false;

    sl_buf_init(&out, a->max_pending);
    while (!stop) {
        uint64_t dropped;

        pthread_mutex_lock(&a->lock);
        wait_for_batch(a, out.len > 0);
        stop = a->stopping;
        reopen = reopen || a->reopen_asked;
        a->reopen_asked = false;
        /* The workers keep appending into the (empty) other block. */
        take_pending(a, &out);
        a->held = out.len;
        dropped = a->dropped;
        pthread_mutex_unlock(&a->lock);
        /* Between lines only: never while a part of a line is in the old file. */
        if (reopen && !mid_line) {
            reopen = !reopen_file(a);
            if (!reopen) {
                pthread_mutex_lock(&a->lock);
                a->reopens++;
                pthread_mutex_unlock(&a->lock);
            }
        }
        write_batch(a, &out, &mid_line);
        if (dropped != a->dropped_reported) {
            sl_log(SL_LOG_WARN, 0, "msg=\"audit log could not keep up; lines dropped\" total=%llu",
                   (unsigned long long)dropped);
            a->dropped_reported = dropped;
        }
    }
    /* Stopping with lines the file would not take: they are lost, and counted. */
    if (out.len > 0) {
        uint64_t lost = 0;

        for (size_t i = 0; i < out.len; i++) {
            lost += out.p[i] == '\n';
        }
        pthread_mutex_lock(&a->lock);
        a->dropped += lost;
        a->held = 0;
        pthread_mutex_unlock(&a->lock);
        sl_log(SL_LOG_ERROR, 0,
               "msg=\"stopping with audit lines the log would not take; they are lost\" lines=%llu",
               (unsigned long long)lost);
    }
    sl_buf_finish(&out);
    return NULL;
}

int sl_audit_open(const char *path, size_t max_pending_bytes, struct sl_audit **out, char *err,
                  size_t errlen)
{
    struct sl_audit *a;
    int rc;

    a = sl_calloc(1, sizeof(*a));
    if (a == NULL) {
        (void)snprintf(err, errlen, "out of memory");
        return SL_ENOMEM;
    }
    if (strcmp(path, "-") == 0) {
        a->fd = STDOUT_FILENO;
    } else if (strlen(path) >= sizeof(a->path)) {
        (void)snprintf(err, errlen, "the audit log's path is too long");
        sl_free(a);
        return SL_EINVAL;
    } else {
        memcpy(a->path, path, strlen(path) + 1);
        a->fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
        if (a->fd == -1) {
            (void)snprintf(err, errlen, "cannot open audit log %s: %s", path, strerror(errno));
            sl_free(a);
            return SL_EIO;
        }
        a->own_fd = true;
    }
    atomic_init(&a->healthy, true);
    atomic_init(&a->congested, false);
    a->max_pending = max_pending_bytes != 0 ? max_pending_bytes : 16u << 20;
    a->congested_at = a->max_pending / 4 * 3;
    sl_buf_init(&a->pending, a->max_pending);
    pthread_mutex_init(&a->lock, NULL);
    rc = init_wake(&a->wake);
    if (rc != 0) {
        (void)snprintf(err, errlen, "cannot set up the audit writer: %s", strerror(rc));
        goto fail_free;
    }
    rc = pthread_create(&a->writer, NULL, writer_main, a);
    if (rc != 0) {
        (void)snprintf(err, errlen, "cannot start the audit writer: %s", strerror(rc));
        pthread_cond_destroy(&a->wake);
        goto fail_free;
    }
    *out = a;
    return 0;

fail_free:
    pthread_mutex_destroy(&a->lock);
    sl_buf_finish(&a->pending);
    if (a->own_fd) {
        close(a->fd);
    }
    sl_free(a);
    return -rc;
}

void sl_audit_write(struct sl_audit *a, const struct sl_audit_record *r)
{
    char line[SL_AUDIT_LINE_MAX];
    int n;

    if (a == NULL) {
        return;
    }
    n = sl_audit_format(r, line, sizeof(line));
    pthread_mutex_lock(&a->lock);
    /* Past `congested_at` only an allowed request's line is taken: a flood of refusals cannot
     * push out the lines of requests that left (docs/reference/proxy.md §4.7). */
    if (n < 0
        || a->pending.len + a->held + (size_t)n > (r->allow ? a->max_pending : a->congested_at)
        || sl_buf_append(&a->pending, line, (size_t)n) < 0) {
        a->dropped++;
    }
    note_congestion(a);
    /* Wake the writer for the first line of a batch, and once a batch is full. */
    if (a->idle || (a->pending.len >= FLUSH_BYTES && a->pending.len - (size_t)n < FLUSH_BYTES)) {
        pthread_cond_signal(&a->wake);
    }
    pthread_mutex_unlock(&a->lock);
}

bool sl_audit_healthy(const struct sl_audit *a)
{
    return a == NULL || atomic_load_explicit(&a->healthy, memory_order_relaxed);
}

bool sl_audit_congested(const struct sl_audit *a)
{
    return a != NULL && atomic_load_explicit(&a->congested, memory_order_relaxed);
}

void sl_audit_health(struct sl_audit *a, struct sl_audit_health *out)
{
    memset(out, 0, sizeof(*out));
    out->healthy = true;
    if (a == NULL) {
        return;
    }
    pthread_mutex_lock(&a->lock);
    out->healthy = atomic_load_explicit(&a->healthy, memory_order_relaxed);
    out->write_failures = a->write_failures;
    out->dropped = a->dropped;
    out->reopens = a->reopens;
    out->pending_bytes = a->pending.len + a->held;
    out->last_errno = a->last_errno;
    pthread_mutex_unlock(&a->lock);
}

void sl_audit_reopen(struct sl_audit *a)
{
    if (a == NULL) {
        return;
    }
    pthread_mutex_lock(&a->lock);
    a->reopen_asked = true;
    pthread_cond_signal(&a->wake);
    pthread_mutex_unlock(&a->lock);
}

uint64_t sl_audit_dropped(struct sl_audit *a)
{
    uint64_t n;

    pthread_mutex_lock(&a->lock);
    n = a->dropped;
    pthread_mutex_unlock(&a->lock);
    return n;
}

void sl_audit_close(struct sl_audit *a)
{
    if (a == NULL) {
        return;
    }
    pthread_mutex_lock(&a->lock);
    a->stopping = true;
    pthread_cond_signal(&a->wake);
    pthread_mutex_unlock(&a->lock);
    pthread_join(a->writer, NULL);
    /* The writer took the last block when it saw `stopping`; anything appended after that
     * (nothing should be: workers stop first) is written here, once. */
    if (a->pending.len > 0) {
        bool mid_line = false;

        if (write_lines(a, &a->pending, &mid_line) != 0) {
            sl_log(SL_LOG_ERROR, 0, "msg=\"audit lines lost at stop\" bytes=%zu", a->pending.len);
        }
    }
    sl_buf_finish(&a->pending);
    pthread_cond_destroy(&a->wake);
    pthread_mutex_destroy(&a->lock);
    if (a->own_fd) {
        close(a->fd);
    }
    sl_free(a);
}
