/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/web/audittail.c - reading the end of the audit log backwards, counting its decisions per
 * minute, and the suggested rule of a policy refusal.
 */
#include "control/web/audittail.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/mem.h"
#include "policy/validate.h"

/* Bytes read per pread(). */
#define CHUNK ((size_t)64 << 10)

/* The state of a backwards scan. The buffer holds CHUNK bytes for the chunk being read followed
 * by up to `line_max` bytes of the line whose start is not read yet (the carry): a chunk is
 * read right in front of the carry, so a line that spans chunks is contiguous. */
struct scan {
    char *buf;
    size_t line_max;
    size_t carry;
    /* The segment after the file's last '\n' (partial, or empty) has not been dropped yet. */
    bool drop_next;
    /* The line being carried grew past line_max: its bytes were let go, skip it. */
    bool too_long;
    size_t limit;
    size_t counted;
    sl_audittail_line_fn *fn;
    void *arg;
};

/* One segment between two newlines (or the file's start). Returns false when the limit was
 * reached. */
static bool emit(struct scan *s, const char *p, size_t n)
{
    if (s->drop_next) {
        s->drop_next = false;
    } else if (s->too_long) {
        s->too_long = false;
    } else if (n > 0 && n <= s->line_max && s->fn(s->arg, p, n)) {
        s->counted++;
    }
    return s->counted < s->limit;
}

static int read_at(int fd, char *p, size_t n, off_t off)
{
    while (n > 0) {
        ssize_t r = pread(fd, p, n, off);

        if (r == -1) {
            if (errno == EINTR) {
                continue;
            }
            return -errno;
        }
        if (r == 0) {
            /* The file shrank (rotated or truncated) under us: stop at what we have. */
            return SL_EIO;
        }
        p += r;
        n -= (size_t)r;
        off += r;
    }
    return 0;
}

/* Scans the chunk at buf[CHUNK - want, CHUNK) followed by the carry; `at_start` when the
 * chunk begins the file. Returns false when the limit was reached. */
static bool scan_chunk(struct scan *s, size_t want, bool at_start)
{
    char *first = s->buf + CHUNK - want;
    size_t end = CHUNK + s->carry;
    size_t rest;

    for (size_t i = CHUNK; i-- > CHUNK - want;) {
        if (s->buf[i] != '\n') {
            continue;
        }
        if (!emit(s, s->buf + i + 1, end - i - 1)) {
            return false;
        }
        end = i;
    }
    rest = (size_t)(s->buf + end - first);
    if (at_start) {
        s->carry = 0;
        return emit(s, first, rest);
    }
    if (rest > s->line_max || s->too_long) {
        s->too_long = true;
        s->carry = 0;
    } else {
        memmove(s->buf + CHUNK, first, rest);
        s->carry = rest;
    }
    return true;
}

/* sl_audittail_read(), and `*whole` (when not NULL) set when the scan ended at the limit or at
 * the file's start rather than at the budget or a file that shrank. */
static int tail_read(const char *path, size_t limit, size_t line_max, size_t budget_bytes,
                     sl_audittail_line_fn *fn, void *arg, bool *whole)
{
    struct scan s;
    struct stat st;
    off_t end;
    size_t spent = 0;
    bool done = false;
    int fd;
    int rc = 0;

    if (whole != NULL) {
        *whole = true;
    }
    if (limit == 0) {
        return 0;
    }
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd == -1) {
        return errno == ENOENT ? 0 : -errno;
    }
    if (fstat(fd, &st) == -1) {
        rc = -errno;
        goto out_close;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = SL_ENOTFILE;
        goto out_close;
    }
    memset(&s, 0, sizeof(s));
    s.buf = sl_malloc(CHUNK + line_max + 1);
    if (s.buf == NULL) {
        rc = SL_ENOMEM;
        goto out_close;
    }
    s.line_max = line_max;
    s.drop_next = true;
    s.limit = limit;
    s.fn = fn;
    s.arg = arg;
    end = st.st_size;
    while (end > 0 && spent < budget_bytes) {
        size_t want = CHUNK;

        if ((off_t)want > end) {
            want = (size_t)end;
        }
        if (want > budget_bytes - spent) {
            want = budget_bytes - spent;
        }
        rc = read_at(fd, s.buf + CHUNK - want, want, end - (off_t)want);
        if (rc < 0) {
            break;
        }
        end -= (off_t)want;
        spent += want;
        if (!scan_chunk(&s, want, end == 0)) {
            done = true;
            break;
        }
    }
    if (whole != NULL) {
        *whole = done || (end == 0 && rc == 0);
    }
    if (rc == SL_EIO) {
        rc = 0;
    }
    sl_free(s.buf);
out_close:
    (void)close(fd);
    return rc;
}

int sl_audittail_read(const char *path, size_t limit, size_t line_max, size_t budget_bytes,
                      sl_audittail_line_fn *fn, void *arg)
{
    return tail_read(path, limit, line_max, budget_bytes, fn, arg, NULL);
}

/* ---- decisions per minute ---------------------------------------------------------------- */

/* The `n` digits at `p`, or -1. */
static int digits(const char *p, size_t n)
{
    int v = 0;

    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') {
            return -1;
        }
        v = v * 10 + (p[i] - '0');
    }
    return v;
}

/* Days from 1970-01-01 to the date y-m-d of the proleptic Gregorian calendar: whole 400-year
 * eras of 146097 days, the year counted from March so that February's leap day ends it. */
static int64_t days_since_epoch(int64_t y, int m, int d)
{
    int64_t era;
    int64_t yoe;
    int64_t doy;

    y -= m <= 2;
    era = (y >= 0 ? y : y - 399) / 400;
    yoe = y - era * 400;
    doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    return era * 146097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719468;
}

/* Parses the proxy's "ts", YYYY-MM-DDTHH:MM:SS[.fraction]Z, into seconds since the epoch (the
 * fraction dropped). Returns false for any other text. */
static bool parse_ts(const char *s, int64_t *out)
{
    size_t n = s != NULL ? strlen(s) : 0;
    int y;
    int mo;
    int d;
    int h;
    int mi;
    int sec;
    size_t i = 19;

    if (n < 20 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':') {
        return false;
    }
    y = digits(s, 4);
    mo = digits(s + 5, 2);
    d = digits(s + 8, 2);
    h = digits(s + 11, 2);
    mi = digits(s + 14, 2);
    sec = digits(s + 17, 2);
    if (y < 0 || mo < 1 || mo > 12 || d < 1 || d > 31 || h < 0 || h > 23 || mi < 0 || mi > 59
        || sec < 0 || sec > 60) {
        return false;
    }
    if (s[i] == '.') {
        i++;
        while (i < n && s[i] >= '0' && s[i] <= '9') {
            i++;
        }
    }
    if (i + 1 != n || s[i] != 'Z') {
        return false;
    }
    *out = (days_since_epoch(y, mo, d) * 24 + h) * 3600 + mi * 60 + sec;
    return true;
}

struct per_minute {
    struct sl_audittail_minute *out;
    size_t n;
    /* out[0]'s start and the end of out[n - 1] (exclusive). */
    int64_t first_s;
    int64_t end_s;
    sl_audittail_visible_fn *visible;
    void *arg;
    /* Out of memory parsing a line: the count is stopped and fails. */
    bool nomem;
};

/* Counts one line; true (the one line the scan's limit allows) for the first line older than
 * the window and its slack, which ends the scan. */
static bool on_minute_line(void *arg, const char *line, size_t n)
{
    struct per_minute *pm = arg;
    json_error_t jerr;
    json_t *entry = json_loadb(line, n, JSON_REJECT_DUPLICATES, &jerr);
    const char *decision;
    int64_t ts;
    size_t i;
    bool stop = false;

    if (entry == NULL && json_error_code(&jerr) == json_error_out_of_memory) {
        pm->nomem = true;
        return true;
    }
    if (!json_is_object(entry) || !parse_ts(json_string_value(json_object_get(entry, "ts")), &ts)) {
        json_decref(entry);
        return false;
    }
    if (ts < pm->first_s) {
        stop = ts < pm->first_s - SL_AUDITTAIL_SLACK_S;
    } else if (ts < pm->end_s && pm->visible(pm->arg, entry)) {
        i = (size_t)((ts - pm->first_s) / 60);
        decision = json_string_value(json_object_get(entry, "decision"));
        if (decision == NULL) {
            /* Not one of the three. */
        } else if (strcmp(decision, "allow") == 0) {
            pm->out[i].allowed++;
        } else if (strcmp(decision, "deny") == 0) {
            pm->out[i].refused++;
        } else if (strcmp(decision, "error") == 0) {
            pm->out[i].errors++;
        }
    }
    json_decref(entry);
    return stop;
}

int sl_audittail_per_minute(const char *path, int64_t now_s, struct sl_audittail_minute *out,
                            size_t n, size_t budget_bytes, sl_audittail_visible_fn *visible,
                            void *arg, bool *partial)
{
    struct per_minute pm = { out, n, 0, 0, visible, arg, false };
    /* The current minute's start (floor, also before 1970). */
    int64_t now_minute = now_s / 60 * 60 - (now_s % 60 < 0 ? 60 : 0);
    bool whole = true;
    int rc;

    *partial = false;
    if (n == 0) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        out[i].start_s = now_minute - (int64_t)(n - 1 - i) * 60;
        out[i].allowed = 0;
        out[i].refused = 0;
        out[i].errors = 0;
    }
    if (path == NULL) {
        return 0;
    }
    pm.first_s = out[0].start_s;
    pm.end_s = now_minute + 60;
    rc = tail_read(path, 1, SL_AUDITTAIL_LINE_MAX, budget_bytes, on_minute_line, &pm, &whole);
    if (rc == 0 && pm.nomem) {
        rc = SL_ENOMEM;
    }
    *partial = !whole;
    return rc;
}

/* ---- suggestions ------------------------------------------------------------------------- */

/* A method a suggested rule can name (docs/reference/snapshot.md §3: an upper-case token). */
static bool is_method(const char *s)
{
    return sl_policy_method_check(s, strlen(s)) == SL_POLICY_METHOD_OK;
}

/* A host name, an IPv4 address or a bracketed IPv6 address, as the proxy writes them. */
static bool is_host(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > 255) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        char c = s[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.'
              || c == '-' || c == '_' || c == '*' || c == ':' || c == '[' || c == ']')) {
            return false;
        }
    }
    return true;
}

static bool is_env_name(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > 512) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];

        if (c < 0x20 || c == 0x7f || c == '"' || c == '\\') {
            return false;
        }
    }
    return true;
}

static const char *str_member(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

/* Appends the NULL-terminated list of strings to out (cap bytes, *len used). Returns false when
 * they do not fit. */
static bool append(char *out, size_t cap, size_t *len, const char *const *parts)
{
    for (; *parts != NULL; parts++) {
        size_t n = strlen(*parts);

        if (n >= cap - *len) {
            return false;
        }
        memcpy(out + *len, *parts, n);
        *len += n;
        out[*len] = '\0';
    }
    return true;
}

int sl_audittail_suggest(const json_t *entry, const char *env_name, char *out, size_t cap)
{
    const char *decision = str_member(entry, "decision");
    const char *reason = str_member(entry, "reason");
    const char *env = env_name != NULL ? env_name : str_member(entry, "environment");
    const char *host = str_member(entry, "host");
    const char *method = str_member(entry, "method");
    const char *rule = str_member(entry, "rule");
    const json_t *port_v = json_object_get(entry, "port");
    json_int_t port = json_is_integer(port_v) ? json_integer_value(port_v) : 0;
    char hostport[300];
    char portbuf[16] = "";
    bool tunnel;
    bool ok;
    size_t len = 0;

    if (cap == 0) {
        return SL_ETOOBIG;
    }
    out[0] = '\0';
    /* Refusals only: an allow needs nothing, and a "challenge" (the 407 that asks a client for
     * its proxy credentials, docs/reference/proxy.md §4.7) is answered by the client, not by a
     * rule. */
    if (decision == NULL || strcmp(decision, "deny") != 0 || reason == NULL || env == NULL
        || host == NULL || !is_env_name(env) || !is_host(host) || port < 0 || port > 65535
        || (method != NULL && !is_method(method))) {
        return 0;
    }
    tunnel = method == NULL || strcmp(method, "CONNECT") == 0;
    if (port != 0 && port != 80 && port != 443) {
        (void)snprintf(portbuf, sizeof(portbuf), ":%d", (int)port);
    }
    (void)snprintf(hostport, sizeof(hostport), "%s%s", host, portbuf);
    if (strcmp(reason, "method-not-allowed") == 0) {
        if (tunnel) {
            return 0;
        }
        /* A rule for exactly this host refused the method: a second rule for the same host
         * would tie with it and lose on order, so extend the one there is. */
        if (rule != NULL && is_host(rule) && strcmp(rule, hostport) == 0) {
            const char *const parts[] = { "to allow it, add \"",
                                          method,
                                          "\" to the methods of {\"host\":\"",
                                          rule,
                                          "\"} in environment ",
                                          env,
                                          NULL };

            ok = append(out, cap, &len, parts);
            if (!ok) {
                out[0] = '\0';
                return SL_ETOOBIG;
            }
            return (int)len;
        }
    } else if (strcmp(reason, "host-not-allowed") != 0 && strcmp(reason, "port-not-allowed") != 0) {
        return 0;
    }
    {
        const char *const head[] = { "to allow it, add {\"host\":\"", hostport, "\"", NULL };
        const char *const methods[] = { ",\"methods\":[\"", method, "\"]", NULL };
        const char *const tail[] = { "} to environment ", env, NULL };

        ok = append(out, cap, &len, head) && (tunnel || append(out, cap, &len, methods))
             && append(out, cap, &len, tail);
    }
    if (!ok) {
        out[0] = '\0';
        return SL_ETOOBIG;
    }
    return (int)len;
}
