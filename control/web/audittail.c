/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/web/audittail.c - reading the end of the audit log backwards, and the suggested rule of a
 * policy refusal.
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

int sl_audittail_read(const char *path, size_t limit, size_t line_max, size_t budget_bytes,
                      sl_audittail_line_fn *fn, void *arg)
{
    struct scan s;
    struct stat st;
    off_t end;
    size_t spent = 0;
    int fd;
    int rc = 0;

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
            break;
        }
    }
    if (rc == SL_EIO) {
        rc = 0;
    }
    sl_free(s.buf);
out_close:
    (void)close(fd);
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
