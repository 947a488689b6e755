/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/web/audittail.c - reading the end of the audit log backwards, the filters of the API
 * on its lines, and its decisions per minute.
 */
#include "control/web/audittail.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/mem.h"
#include "base/time.h"

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
 * reached or the callback said stop. */
static bool emit(struct scan *s, const char *p, size_t n)
{
    if (s->drop_next) {
        s->drop_next = false;
    } else if (s->too_long) {
        s->too_long = false;
    } else if (n > 0 && n <= s->line_max) {
        switch (s->fn(s->arg, p, n)) {
        case SL_AUDITTAIL_SKIP:
            break;
        case SL_AUDITTAIL_COUNT:
            s->counted++;
            break;
        case SL_AUDITTAIL_STOP:
            return false;
        }
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
                      sl_audittail_line_fn *fn, void *arg, bool *cut)
{
    struct scan s;
    struct stat st;
    off_t end;
    size_t spent = 0;
    bool more = true;
    int fd;
    int rc = 0;

    if (cut != NULL) {
        *cut = false;
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
        more = scan_chunk(&s, want, end == 0);
        if (!more) {
            break;
        }
    }
    if (rc == SL_EIO) {
        rc = 0;
        more = false;
    }
    if (cut != NULL && rc == 0 && more && end > 0) {
        *cut = true;
    }
    sl_free(s.buf);
out_close:
    (void)close(fd);
    return rc;
}

/* ---- filters ------------------------------------------------------------------------------ */

const char *const sl_audittail_filter_params[] = {
    "client", "environment", "decision", "reason", "host", "since", "until", NULL,
};

static const char *const decisions[] = { "allow", "deny", "error", "challenge", "dns" };

int sl_audittail_time_parse(const char *s, int64_t *ms)
{
    struct sl_rfc3339 t;

    /* UTC only (`Z`), as the proxy writes "ts", and at most nanoseconds. */
    if (sl_time_parse_rfc3339(s, strlen(s), &t) != 0 || !t.utc || t.frac_digits > 9) {
        return SL_EINVAL;
    }
    *ms = t.ms + (t.finer ? 1 : 0);
    return 0;
}

/* A text value of 1 to SL_AUDITTAIL_FILTER_VALUE_MAX bytes without control characters, into
 * `out` (SL_AUDITTAIL_FILTER_VALUE_MAX + 1 bytes). */
static int set_text(char *out, const char *value, bool lower, const char **why)
{
    size_t n = strlen(value);

    *why = "at most 512 bytes without control characters";
    if (n > SL_AUDITTAIL_FILTER_VALUE_MAX) {
        return SL_EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)value[i];

        if (c < 0x20 || c == 0x7f) {
            return SL_EINVAL;
        }
        out[i] = lower && c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : (char)c;
    }
    out[n] = '\0';
    return 0;
}

int sl_audittail_filter_set(struct sl_audittail_filter *f, const char *param, const char *value,
                            const char **why)
{
    *why = "a known parameter";
    if (value[0] == '\0') {
        return 0;
    }
    if (strcmp(param, "client") == 0) {
        return set_text(f->client, value, false, why);
    }
    if (strcmp(param, "environment") == 0) {
        return set_text(f->environment, value, false, why);
    }
    if (strcmp(param, "host") == 0) {
        return set_text(f->host, value, true, why);
    }
    if (strcmp(param, "decision") == 0) {
        *why = "one of allow, deny, error, challenge, dns";
        for (size_t i = 0; i < SL_ARRAY_LEN(decisions); i++) {
            if (strcmp(value, decisions[i]) == 0) {
                (void)snprintf(f->decision, sizeof(f->decision), "%s", value);
                return 0;
            }
        }
        return SL_EINVAL;
    }
    if (strcmp(param, "reason") == 0) {
        size_t n = strlen(value);

        *why = "a reason code such as host-not-allowed";
        if (n > 64) {
            return SL_EINVAL;
        }
        for (size_t i = 0; i < n; i++) {
            if (!((value[i] >= 'a' && value[i] <= 'z') || (value[i] >= '0' && value[i] <= '9')
                  || value[i] == '-')) {
                return SL_EINVAL;
            }
        }
        (void)snprintf(f->reason, sizeof(f->reason), "%s", value);
        return 0;
    }
    if (strcmp(param, "since") == 0 || strcmp(param, "until") == 0) {
        bool since = param[0] == 's';

        *why = "an RFC 3339 UTC time such as 2026-11-30T02:00:00Z";
        SL_TRY(sl_audittail_time_parse(value, since ? &f->since_ms : &f->until_ms));
        if (since) {
            f->has_since = true;
        } else {
            f->has_until = true;
        }
        return 0;
    }
    return SL_EINVAL;
}

int sl_audittail_filter_check(const struct sl_audittail_filter *f, const char **param,
                              const char **why)
{
    if (f->has_since && f->has_until && f->until_ms <= f->since_ms) {
        *param = "until";
        *why = "a time after since";
        return SL_EINVAL;
    }
    return 0;
}

static const char *member(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

static bool same(const char *want, const char *have)
{
    return want[0] == '\0' || (have != NULL && strcmp(want, have) == 0);
}

/* Does `hay` hold `needle` (lower-case), in any case? */
static bool has_substring(const char *hay, const char *needle)
{
    size_t n = strlen(needle);

    for (; *hay != '\0'; hay++) {
        if (strncasecmp(hay, needle, n) == 0) {
            return true;
        }
    }
    return n == 0;
}

bool sl_audittail_filter_match(const struct sl_audittail_filter *f, const json_t *line,
                               const char *env_name)
{
    const char *env = member(line, "environment");
    const char *host = member(line, "host");
    const char *ts = member(line, "ts");
    int64_t at = 0;

    if (!same(f->client, member(line, "client")) || !same(f->decision, member(line, "decision"))
        || !same(f->reason, member(line, "reason"))) {
        return false;
    }
    if (f->environment[0] != '\0' && !same(f->environment, env)
        && !same(f->environment, env_name)) {
        return false;
    }
    if (f->host[0] != '\0' && (host == NULL || !has_substring(host, f->host))) {
        return false;
    }
    if (f->has_since || f->has_until) {
        if (ts == NULL || sl_audittail_time_parse(ts, &at) != 0) {
            return false;
        }
        if ((f->has_since && at < f->since_ms) || (f->has_until && at >= f->until_ms)) {
            return false;
        }
    }
    return true;
}

bool sl_audittail_filter_is_past(const struct sl_audittail_filter *f, const json_t *line)
{
    const char *ts = member(line, "ts");
    int64_t at;

    return f->has_since && ts != NULL && sl_audittail_time_parse(ts, &at) == 0
           && at < f->since_ms - SL_AUDITTAIL_SINCE_SLACK_MS;
}

/* ---- decisions per minute ---------------------------------------------------------------- */

struct per_minute {
    struct sl_audittail_minute *out;
    /* out[0]'s start and the end of the last minute (exclusive), in milliseconds. */
    int64_t first_ms;
    int64_t end_ms;
    sl_audittail_visible_fn *visible;
    void *arg;
    /* Out of memory parsing a line: the count stops and fails. */
    bool nomem;
};

/* Counts one line; stops at the first one older than the window and its slack. */
static enum sl_audittail_take on_minute_line(void *arg, const char *line, size_t n)
{
    struct per_minute *pm = arg;
    json_error_t jerr;
    json_t *entry = json_loadb(line, n, JSON_REJECT_DUPLICATES, &jerr);
    enum sl_audittail_take take = SL_AUDITTAIL_SKIP;
    const char *text;
    struct sl_audittail_minute *m;
    int64_t ts;

    if (entry == NULL && json_error_code(&jerr) == json_error_out_of_memory) {
        pm->nomem = true;
        return SL_AUDITTAIL_STOP;
    }
    text = member(entry, "ts");
    if (!json_is_object(entry) || text == NULL || sl_audittail_time_parse(text, &ts) < 0) {
        json_decref(entry);
        return SL_AUDITTAIL_SKIP;
    }
    if (ts < pm->first_ms - SL_AUDITTAIL_SINCE_SLACK_MS) {
        take = SL_AUDITTAIL_STOP;
    } else if (ts >= pm->first_ms && ts < pm->end_ms && pm->visible(pm->arg, entry)) {
        m = &pm->out[(ts - pm->first_ms) / 60000];
        text = member(entry, "decision");
        if (text == NULL) {
            /* Not one of the three. */
        } else if (strcmp(text, "allow") == 0) {
            m->allowed++;
        } else if (strcmp(text, "deny") == 0) {
            m->refused++;
        } else if (strcmp(text, "error") == 0) {
            m->errors++;
        }
    }
    json_decref(entry);
    return take;
}

int sl_audittail_per_minute(const char *path, int64_t now_s, struct sl_audittail_minute *out,
                            size_t n, size_t budget_bytes, sl_audittail_visible_fn *visible,
                            void *arg, bool *partial)
{
    struct per_minute pm = { out, 0, 0, visible, arg, false };
    /* The current minute's start (floor, also before 1970). */
    int64_t now_minute = now_s / 60 * 60 - (now_s % 60 < 0 ? 60 : 0);
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
    pm.first_ms = out[0].start_s * 1000;
    pm.end_ms = (now_minute + 60) * 1000;
    /* Every line is skipped or ends the read: the limit is never reached. */
    rc = sl_audittail_read(path, SIZE_MAX, SL_AUDITTAIL_LINE_MAX, budget_bytes, on_minute_line, &pm,
                           partial);
    if (rc == 0 && pm.nomem) {
        rc = SL_ENOMEM;
    }
    return rc;
}
