/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/load/main.c - sluice-load, the load generator of the proxy benchmarks: CONNECT through a
 * proxy, TLS with full verification, HTTP/1.1, on epoll threads (bench/load/engine.h). This file
 * is the command line, the measurement of other processes (bench/load/proc.h) and the report.
 */
#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>

#include "base/log.h"
#include "base/mem.h"
#include "bench/load/engine.h"
#include "bench/load/proc.h"
#include "bench/load/stats.h"

#define MAX_CAFILES  16
#define MAX_HEADERS  32
#define MAX_PIDS     16
#define REQUEST_MAX  16384
#define HOST_MAX     256
#define PATH_MAX_LEN 4096

static const char usage_text[] =
        "usage: sluice-load --url https://HOST:PORT/PATH (or http://)\n"
        "         [--proxy ADDR:PORT] [--connect-to ADDR:PORT] [--cafile FILE]...\n"
        "         [--mode keepalive|newconn|rate|download|idle] [--connections N] [--threads T]\n"
        "         [--duration S] [--warmup S] [--rate R] [--resume] [--header 'Name: value']...\n"
        "         [--method M] [--expect-status CODE] [--hold S] [--measure-pid PID]...\n"
        "         [--json FILE] [--max-requests N] [--connect-cpu CPU]\n";

struct opts {
    const char *url;
    const char *proxy;
    const char *connect_to;
    const char *cafiles[MAX_CAFILES];
    size_t ncafiles;
    const char *mode;
    const char *headers[MAX_HEADERS];
    size_t nheaders;
    const char *method;
    const char *json;
    int pids[MAX_PIDS];
    size_t npids;
    struct sl_load_config cfg;
};

/* What the URL names. */
struct target {
    bool tls;
    char host[HOST_MAX];
    unsigned port;
    char path[PATH_MAX_LEN];
};

struct measure {
    const int *pids;
    size_t npids;
    bool have_start;
    bool have_end;
    struct sl_proc_sample start;
    struct sl_proc_sample end;
};

static int usage(const char *why, const char *arg)
{
    if (why != NULL) {
        sl_eprintf("load: %s%s%s", why, arg != NULL ? ": " : "", arg != NULL ? arg : "");
    }
    (void)fputs(usage_text, stdout);
    return 2;
}

static bool parse_double(const char *s, double min, double max, double *out)
{
    char *end;
    double v;

    errno = 0;
    v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !isfinite(v) || v < min || v > max) {
        return false;
    }
    *out = v;
    return true;
}

static bool parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    char *end;
    unsigned long long v;

    if (*s < '0' || *s > '9') {
        return false;
    }
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < min || v > max) {
        return false;
    }
    *out = v;
    return true;
}

/* No byte that could end a line or a field of a request we build. */
static bool is_clean(const char *s, bool allow_space)
{
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;

        if (c < 0x20 || c == 0x7f || (!allow_space && c == ' ')) {
            return false;
        }
    }
    return true;
}

/* Splits "HOST:PORT" or "[V6]:PORT" into host (brackets removed) and port. */
static bool split_hostport(const char *s, size_t n, char *host, size_t hostcap, unsigned *port)
{
    const char *colon;
    const char *h = s;
    size_t hn;
    uint64_t p;
    char pbuf[8];

    if (n > 0 && s[0] == '[') {
        const char *rb = memchr(s, ']', n);

        if (rb == NULL || rb + 1 >= s + n || rb[1] != ':') {
            return false;
        }
        h = s + 1;
        hn = (size_t)(rb - h);
        colon = rb + 1;
    } else {
        colon = NULL;
        for (size_t i = 0; i < n; i++) {
            if (s[i] == ':') {
                colon = s + i;
            }
        }
        if (colon == NULL) {
            return false;
        }
        hn = (size_t)(colon - s);
    }
    if (hn == 0 || hn >= hostcap || (size_t)(s + n - colon - 1) >= sizeof(pbuf)) {
        return false;
    }
    memcpy(host, h, hn);
    host[hn] = '\0';
    memcpy(pbuf, colon + 1, (size_t)(s + n - colon - 1));
    pbuf[s + n - colon - 1] = '\0';
    if (!parse_u64(pbuf, 1, 65535, &p)) {
        return false;
    }
    *port = (unsigned)p;
    return is_clean(host, false);
}

static bool parse_url(const char *url, struct target *t)
{
    const char *rest;
    const char *slash;
    size_t an;

    if (strncmp(url, "https://", 8) == 0) {
        t->tls = true;
        rest = url + 8;
    } else if (strncmp(url, "http://", 7) == 0) {
        t->tls = false;
        rest = url + 7;
    } else {
        return false;
    }
    slash = strchr(rest, '/');
    an = slash != NULL ? (size_t)(slash - rest) : strlen(rest);
    if (memchr(rest, '@', an) != NULL) {
        return false;
    }
    if (!split_hostport(rest, an, t->host, sizeof(t->host), &t->port)) {
        /* No port: the scheme's. */
        if (an == 0 || an >= sizeof(t->host) || memchr(rest, ':', an) != NULL) {
            return false;
        }
        memcpy(t->host, rest, an);
        t->host[an] = '\0';
        t->port = t->tls ? 443 : 80;
    }
    if (slash == NULL) {
        memcpy(t->path, "/", 2);
    } else if (strlen(slash) >= sizeof(t->path) || !is_clean(slash, false)) {
        return false;
    } else {
        memcpy(t->path, slash, strlen(slash) + 1);
    }
    return is_clean(t->host, false);
}

/* Resolves host:port (a name or an address) to its first TCP address. */
static bool resolve(const char *host, unsigned port, struct sockaddr_storage *ss, socklen_t *len)
{
    struct addrinfo hints;
    struct addrinfo *res = NULL;
    char pbuf[8];

    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    (void)snprintf(pbuf, sizeof(pbuf), "%u", port);
    if (getaddrinfo(host, pbuf, &hints, &res) != 0 || res == NULL) {
        return false;
    }
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    freeaddrinfo(res);
    return true;
}

static bool resolve_hostport(const char *s, struct sockaddr_storage *ss, socklen_t *len)
{
    char host[HOST_MAX];
    unsigned port;

    return split_hostport(s, strlen(s), host, sizeof(host), &port) && resolve(host, port, ss, len);
}

static bool parse_mode(const char *s, enum sl_load_mode *out)
{
    static const struct {
        const char *name;
        enum sl_load_mode mode;
    } modes[] = {
        { "keepalive", SL_LOAD_KEEPALIVE }, { "newconn", SL_LOAD_NEWCONN },
        { "rate", SL_LOAD_RATE },           { "download", SL_LOAD_DOWNLOAD },
        { "idle", SL_LOAD_IDLE },
    };

    for (size_t i = 0; i < SL_ARRAY_LEN(modes); i++) {
        if (strcmp(s, modes[i].name) == 0) {
            *out = modes[i].mode;
            return true;
        }
    }
    return false;
}

static const char *mode_name(enum sl_load_mode m)
{
    switch (m) {
    case SL_LOAD_KEEPALIVE:
        return "keepalive";
    case SL_LOAD_NEWCONN:
        return "newconn";
    case SL_LOAD_RATE:
        return "rate";
    case SL_LOAD_DOWNLOAD:
        return "download";
    case SL_LOAD_IDLE:
        return "idle";
    }
    return "?";
}

/* One flag that takes a value; returns 2 (usage) when the value is bad, 0 when consumed. */
static int take_value(struct opts *o, const char *flag, const char *v)
{
    struct sl_load_config *cfg = &o->cfg;

    /* The flags that take seconds or a rate, and their usage lines. */
    const struct {
        const char *flag;
        const char *bad;
        double min;
        double max;
        double *out;
    } reals[] = {
        { "--duration", "bad --duration", 0.001, 86400.0, &cfg->duration_s },
        { "--warmup", "bad --warmup", 0.0, 86400.0, &cfg->warmup_s },
        { "--rate", "bad --rate", 0.001, 1e8, &cfg->rate },
        { "--hold", "bad --hold", 0.0, 86400.0, &cfg->hold_s },
    };

    uint64_t u;

    for (size_t i = 0; i < SL_ARRAY_LEN(reals); i++) {
        if (strcmp(flag, reals[i].flag) == 0) {
            return parse_double(v, reals[i].min, reals[i].max, reals[i].out)
                           ? 0
                           : usage(reals[i].bad, v);
        }
    }
    if (strcmp(flag, "--url") == 0) {
        o->url = v;
    } else if (strcmp(flag, "--proxy") == 0) {
        o->proxy = v;
    } else if (strcmp(flag, "--connect-to") == 0) {
        o->connect_to = v;
    } else if (strcmp(flag, "--cafile") == 0) {
        if (o->ncafiles == MAX_CAFILES) {
            return usage("too many --cafile", NULL);
        }
        o->cafiles[o->ncafiles++] = v;
    } else if (strcmp(flag, "--mode") == 0) {
        if (!parse_mode(v, &cfg->mode)) {
            return usage("bad --mode", v);
        }
    } else if (strcmp(flag, "--connections") == 0) {
        if (!parse_u64(v, 1, 1000000, &u)) {
            return usage("bad --connections", v);
        }
        cfg->connections = (unsigned)u;
    } else if (strcmp(flag, "--threads") == 0) {
        if (!parse_u64(v, 1, 256, &u)) {
            return usage("bad --threads", v);
        }
        cfg->threads = (unsigned)u;
    } else if (strcmp(flag, "--header") == 0) {
        if (o->nheaders == MAX_HEADERS || strchr(v, ':') == NULL || v[0] == ':'
            || !is_clean(v, true)) {
            return usage("bad --header", v);
        }
        o->headers[o->nheaders++] = v;
    } else if (strcmp(flag, "--method") == 0) {
        if (v[0] == '\0' || strlen(v) > 32 || !is_clean(v, false)) {
            return usage("bad --method", v);
        }
        o->method = v;
    } else if (strcmp(flag, "--expect-status") == 0) {
        if (!parse_u64(v, 100, 999, &u)) {
            return usage("bad --expect-status", v);
        }
        cfg->expect_status = (int)u;
    } else if (strcmp(flag, "--measure-pid") == 0) {
        if (o->npids == MAX_PIDS || !parse_u64(v, 1, INT32_MAX, &u)) {
            return usage("bad --measure-pid", v);
        }
        o->pids[o->npids++] = (int)u;
    } else if (strcmp(flag, "--json") == 0) {
        o->json = v;
    } else if (strcmp(flag, "--connect-cpu") == 0) {
        if (!parse_u64(v, 0, SL_LOAD_CPU_MAX, &u)) {
            return usage("bad --connect-cpu", v);
        }
        cfg->connect_cpu = (int)u;
    } else if (strcmp(flag, "--max-requests") == 0) {
        if (!parse_u64(v, 1, UINT64_MAX, &cfg->max_requests)) {
            return usage("bad --max-requests", v);
        }
    } else {
        return usage("unknown option", flag);
    }
    return 0;
}

static int parse_args(int argc, char **argv, struct opts *o)
{
    memset(o, 0, sizeof(*o));
    o->cfg.mode = SL_LOAD_KEEPALIVE;
    o->cfg.connections = 16;
    o->cfg.threads = 1;
    o->cfg.duration_s = 10.0;
    o->cfg.warmup_s = 1.0;
    o->cfg.expect_status = 200;
    o->cfg.connect_cpu = -1;
    o->method = "GET";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];

        if (strcmp(a, "--resume") == 0) {
            o->cfg.resume = true;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            (void)usage(NULL, NULL);
            exit(0);
        } else if (i + 1 < argc) {
            int rc = take_value(o, a, argv[++i]);

            if (rc != 0) {
                return rc;
            }
        } else {
            return usage("missing value or unknown option", a);
        }
    }
    if (o->url == NULL) {
        return usage("--url is required", NULL);
    }
    if (o->proxy != NULL && o->connect_to != NULL) {
        return usage("--proxy and --connect-to exclude each other", NULL);
    }
    if (o->cfg.mode == SL_LOAD_RATE && o->cfg.rate <= 0.0) {
        return usage("--mode rate needs --rate", NULL);
    }
    return 0;
}

/* Appends to a bounded buffer; false when it would not fit. */
static bool append(char *buf, size_t cap, size_t *len, const char *s)
{
    size_t n = strlen(s);

    if (*len + n >= cap) {
        return false;
    }
    memcpy(buf + *len, s, n + 1);
    *len += n;
    return true;
}

static bool has_header(const struct opts *o, const char *name)
{
    size_t n = strlen(name);

    for (size_t i = 0; i < o->nheaders; i++) {
        if (strncasecmp(o->headers[i], name, n) == 0 && o->headers[i][n] == ':') {
            return true;
        }
    }
    return false;
}

/* A header for the proxy rather than the origin (Proxy-Authorization): with TLS through a proxy
 * it goes on the CONNECT, which is all the proxy reads in the clear. */
static bool is_for_proxy(const struct opts *o, const struct target *t, const char *header)
{
    return o->proxy != NULL && t->tls && strncasecmp(header, "Proxy-", 6) == 0;
}

static bool build_connect(const struct opts *o, const struct target *t, const char *authority,
                          char *conn_req, size_t cap)
{
    size_t n = 0;

    conn_req[0] = '\0';
    if (!append(conn_req, cap, &n, "CONNECT ") || !append(conn_req, cap, &n, authority)
        || !append(conn_req, cap, &n, " HTTP/1.1\r\nHost: ")
        || !append(conn_req, cap, &n, authority) || !append(conn_req, cap, &n, "\r\n")) {
        return false;
    }
    for (size_t i = 0; i < o->nheaders; i++) {
        if (is_for_proxy(o, t, o->headers[i])
            && (!append(conn_req, cap, &n, o->headers[i]) || !append(conn_req, cap, &n, "\r\n"))) {
            return false;
        }
    }
    return append(conn_req, cap, &n, "\r\n");
}

/* Builds the request (and the CONNECT) once; every request of the run sends these bytes. */
static bool build_requests(const struct opts *o, const struct target *t, char *req, char *conn_req,
                           size_t cap)
{
    char authority[HOST_MAX + 16];
    char host_hdr[HOST_MAX + 16];
    bool v6 = strchr(t->host, ':') != NULL;
    bool default_port = t->port == (t->tls ? 443u : 80u);
    size_t n = 0;

    (void)snprintf(authority, sizeof(authority), v6 ? "[%s]:%u" : "%s:%u", t->host, t->port);
    if (default_port) {
        (void)snprintf(host_hdr, sizeof(host_hdr), v6 ? "[%s]" : "%s", t->host);
    } else {
        memcpy(host_hdr, authority, strlen(authority) + 1);
    }
    req[0] = '\0';
    if (!append(req, cap, &n, o->method) || !append(req, cap, &n, " ")) {
        return false;
    }
    /* A plain request to a proxy names the whole URL (RFC 9112 §3.2.2). */
    if (o->proxy != NULL && !t->tls
        && (!append(req, cap, &n, "http://") || !append(req, cap, &n, host_hdr))) {
        return false;
    }
    if (!append(req, cap, &n, t->path) || !append(req, cap, &n, " HTTP/1.1\r\nHost: ")
        || !append(req, cap, &n, host_hdr) || !append(req, cap, &n, "\r\n")) {
        return false;
    }
    if (!has_header(o, "User-Agent") && !append(req, cap, &n, "User-Agent: sluice-load\r\n")) {
        return false;
    }
    for (size_t i = 0; i < o->nheaders; i++) {
        if (!is_for_proxy(o, t, o->headers[i])
            && (!append(req, cap, &n, o->headers[i]) || !append(req, cap, &n, "\r\n"))) {
            return false;
        }
    }
    return append(req, cap, &n, "\r\n") && build_connect(o, t, authority, conn_req, cap);
}

static void on_window_start(void *arg)
{
    struct measure *m = arg;

    if (m->npids > 0) {
        m->have_start = sl_proc_sample_trees(m->pids, m->npids, &m->start) == 0;
        if (m->have_start && m->start.nprocs == 0) {
            sl_eprintf("load: warning: no process to measure (--measure-pid names none alive)");
        }
    }
}

static void on_window_end(void *arg)
{
    struct measure *m = arg;

    if (m->npids > 0) {
        m->have_end = sl_proc_sample_trees(m->pids, m->npids, &m->end) == 0;
    }
}

static void on_ready(uint64_t established, void *arg)
{
    (void)arg;
    (void)printf("ready %llu\n", (unsigned long long)established);
    (void)fflush(stdout);
}

/* Writes `s` as a JSON string. */
static void json_str(FILE *f, const char *s)
{
    (void)fputc('"', f);
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;

        if (c == '"' || c == '\\') {
            (void)fprintf(f, "\\%c", c);
        } else if (c < 0x20 || c == 0x7f) {
            (void)fprintf(f, "\\u%04x", c);
        } else {
            (void)fputc(c, f);
        }
    }
    (void)fputc('"', f);
}

static double per_s(uint64_t n, double secs)
{
    return secs > 0.0 ? (double)n / secs : 0.0;
}

static void write_json(FILE *f, const struct opts *o, const struct sl_load_result *r,
                       const struct measure *m)
{
    const struct sl_hist *h = &r->latency;
    const struct sl_load_errors *e = &r->errors;

    (void)fprintf(f, "{\"mode\":\"%s\",\"url\":", mode_name(o->cfg.mode));
    json_str(f, o->url);
    (void)fputs(",\"proxy\":", f);
    if (o->proxy != NULL) {
        json_str(f, o->proxy);
    } else {
        (void)fputs("null", f);
    }
    (void)fprintf(f, ",\"connections\":%u,\"threads\":%u,\"seconds\":%.6f", o->cfg.connections,
                  o->cfg.threads, r->seconds);
    (void)fprintf(f, ",\"requests\":%llu,\"rps\":%.3f", (unsigned long long)r->requests,
                  per_s(r->requests, r->seconds));
    (void)fprintf(f, ",\"bytes\":%llu,\"bytes_per_s\":%.3f", (unsigned long long)r->bytes,
                  per_s(r->bytes, r->seconds));
    (void)fprintf(f, ",\"connects\":%llu,\"connects_per_s\":%.3f,\"resumed\":%llu",
                  (unsigned long long)r->connects, per_s(r->connects, r->seconds),
                  (unsigned long long)r->resumed);
    (void)fprintf(f,
                  ",\"errors\":{\"connect\":%llu,\"proxy\":%llu,\"tls\":%llu,\"http\":%llu,"
                  "\"status\":%llu,\"timeout\":%llu,\"closed\":%llu}",
                  (unsigned long long)e->connect, (unsigned long long)e->proxy,
                  (unsigned long long)e->tls, (unsigned long long)e->http,
                  (unsigned long long)e->status, (unsigned long long)e->timeout,
                  (unsigned long long)e->closed);
    (void)fprintf(f,
                  ",\"latency_us\":{\"count\":%llu,\"mean\":%.3f,\"p50\":%llu,\"p90\":%llu,"
                  "\"p99\":%llu,\"p999\":%llu,\"max\":%llu}",
                  (unsigned long long)h->count, sl_hist_mean(h),
                  (unsigned long long)sl_hist_percentile(h, 50.0),
                  (unsigned long long)sl_hist_percentile(h, 90.0),
                  (unsigned long long)sl_hist_percentile(h, 99.0),
                  (unsigned long long)sl_hist_percentile(h, 99.9),
                  (unsigned long long)(h->count > 0 ? h->max : 0));
    (void)fputs(",\"measured\":", f);
    if (m->npids == 0) {
        (void)fputs("null", f);
    } else {
        (void)fputs("{\"pids\":[", f);
        for (size_t i = 0; i < m->npids; i++) {
            (void)fprintf(f, "%s%d", i > 0 ? "," : "", m->pids[i]);
        }
        if (m->have_start && m->have_end) {
            uint64_t cpu = m->end.cpu_us >= m->start.cpu_us ? m->end.cpu_us - m->start.cpu_us : 0;

            (void)fprintf(f,
                          "],\"cpu_us\":%llu,\"rss_kib_start\":%llu,\"rss_kib_end\":%llu,"
                          "\"hwm_kib\":%llu}",
                          (unsigned long long)cpu, (unsigned long long)m->start.rss_kib,
                          (unsigned long long)m->end.rss_kib, (unsigned long long)m->end.hwm_kib);
        } else {
            (void)fputs("],\"cpu_us\":null,\"rss_kib_start\":null,\"rss_kib_end\":null,"
                        "\"hwm_kib\":null}",
                        f);
        }
    }
    if (o->cfg.mode == SL_LOAD_IDLE) {
        (void)fprintf(f, ",\"established\":%llu", (unsigned long long)r->established);
    } else {
        (void)fputs(",\"established\":null", f);
    }
    (void)fputs("}\n", f);
}

static void print_summary(const struct opts *o, const struct sl_load_result *r,
                          const struct measure *m)
{
    const struct sl_hist *h = &r->latency;
    const struct sl_load_errors *e = &r->errors;

    (void)printf("sluice-load %s %s%s%s: %u connections, %u threads, %.3f s\n",
                 mode_name(o->cfg.mode), o->url, o->proxy != NULL ? " via " : "",
                 o->proxy != NULL ? o->proxy : "", o->cfg.connections, o->cfg.threads, r->seconds);
    (void)printf("  requests %llu (%.1f/s), bytes %llu (%.2f MB/s)\n",
                 (unsigned long long)r->requests, per_s(r->requests, r->seconds),
                 (unsigned long long)r->bytes, per_s(r->bytes, r->seconds) / 1e6);
    if (o->cfg.mode == SL_LOAD_NEWCONN) {
        (void)printf("  connects %llu (%.1f/s), resumed %llu\n", (unsigned long long)r->connects,
                     per_s(r->connects, r->seconds), (unsigned long long)r->resumed);
    }
    if (o->cfg.mode == SL_LOAD_IDLE) {
        (void)printf("  established %llu\n", (unsigned long long)r->established);
    }
    (void)printf("  latency us: mean %.1f p50 %llu p90 %llu p99 %llu p99.9 %llu max %llu\n",
                 sl_hist_mean(h), (unsigned long long)sl_hist_percentile(h, 50.0),
                 (unsigned long long)sl_hist_percentile(h, 90.0),
                 (unsigned long long)sl_hist_percentile(h, 99.0),
                 (unsigned long long)sl_hist_percentile(h, 99.9),
                 (unsigned long long)(h->count > 0 ? h->max : 0));
    (void)printf("  errors: connect %llu proxy %llu tls %llu http %llu status %llu timeout %llu "
                 "closed %llu\n",
                 (unsigned long long)e->connect, (unsigned long long)e->proxy,
                 (unsigned long long)e->tls, (unsigned long long)e->http,
                 (unsigned long long)e->status, (unsigned long long)e->timeout,
                 (unsigned long long)e->closed);
    if (m->npids > 0 && m->have_start && m->have_end) {
        uint64_t cpu = m->end.cpu_us >= m->start.cpu_us ? m->end.cpu_us - m->start.cpu_us : 0;

        (void)printf(
                "  measured: cpu %llu us (%.1f us/request), rss %llu -> %llu KiB, hwm %llu KiB\n",
                (unsigned long long)cpu, r->requests > 0 ? (double)cpu / (double)r->requests : 0.0,
                (unsigned long long)m->start.rss_kib, (unsigned long long)m->end.rss_kib,
                (unsigned long long)m->end.hwm_kib);
    }
}

/* A write to a socket the peer has reset must be an error, not SIGPIPE (OpenSSL's socket BIO
 * writes with write(2), which has no MSG_NOSIGNAL); and idle mode may hold more connections than
 * the default soft limit of open files allows. */
static void prepare_process(void)
{
    struct sigaction sa;
    struct rlimit rl;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_IGN;
    (void)sigaction(SIGPIPE, &sa, NULL);
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
}

int main(int argc, char **argv)
{
    static char request[REQUEST_MAX];
    static char connect_req[REQUEST_MAX];
    static struct opts o;
    static struct target t;
    static struct sl_load_result r;
    struct measure m;
    struct sl_load_hooks hooks = { on_window_start, on_window_end, on_ready, &m };
    char err[512];
    int rc = parse_args(argc, argv, &o);

    if (rc != 0) {
        return rc;
    }
    if (!parse_url(o.url, &t)) {
        return usage("bad --url", o.url);
    }
    o.cfg.tls = t.tls;
    o.cfg.host = t.host;
    o.cfg.cafiles = o.cafiles;
    o.cfg.ncafiles = o.ncafiles;
    o.cfg.head_request = strcmp(o.method, "HEAD") == 0;
    o.cfg.via_proxy = o.proxy != NULL;
    /* A thread without a connection would do nothing: the report names the threads used. */
    if (o.cfg.threads > o.cfg.connections) {
        o.cfg.threads = o.cfg.connections;
    }
    if (o.proxy != NULL        ? !resolve_hostport(o.proxy, &o.cfg.dial, &o.cfg.dial_len)
        : o.connect_to != NULL ? !resolve_hostport(o.connect_to, &o.cfg.dial, &o.cfg.dial_len)
                               : !resolve(t.host, t.port, &o.cfg.dial, &o.cfg.dial_len)) {
        return usage("cannot resolve the address to dial", o.proxy != NULL        ? o.proxy
                                                           : o.connect_to != NULL ? o.connect_to
                                                                                  : t.host);
    }
    if (!build_requests(&o, &t, request, connect_req, sizeof(request))) {
        return usage("the request is too long", NULL);
    }
    prepare_process();
    o.cfg.request = request;
    o.cfg.request_len = strlen(request);
    o.cfg.connect_req = connect_req;
    o.cfg.connect_len = strlen(connect_req);
    memset(&m, 0, sizeof(m));
    m.pids = o.pids;
    m.npids = o.npids;
    rc = sl_load_run(&o.cfg, &hooks, &r, err, sizeof(err));
    if (rc < 0) {
        sl_eprintf("load: %s", err);
        return 1;
    }
    print_summary(&o, &r, &m);
    if (o.json != NULL) {
        FILE *f = fopen(o.json, "w");

        if (f == NULL) {
            sl_eprintf("load: cannot write %s: %s", o.json, strerror(errno));
            return 1;
        }
        write_json(f, &o, &r, &m);
        if (fclose(f) != 0) {
            sl_eprintf("load: cannot write %s", o.json);
            return 1;
        }
    }
    return 0;
}
