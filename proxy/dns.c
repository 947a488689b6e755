/* SPDX-License-Identifier: Apache-2.0 */
#include "proxy/dns.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "base/hash.h"
#include "base/list.h"
#include "base/mem.h"
#include "base/slice.h"
#include "policy/host.h"

#define BUCKETS 1024

/* One cached (or in-flight) name. */
struct entry {
    /* Next in the hash chain. */
    struct entry *chain;
    /* Link in the age list (oldest first); only completed entries are on it. */
    struct sl_list age;
    uint64_t hash;
    char host[SL_HOST_NAME_MAX + 1];
    size_t host_len;
    /* The getaddrinfo() request while in flight; `owner` leads back from it. */
    uv_getaddrinfo_t gai;
    struct sl_dns *owner;
    bool pending;
    /* Outcome: 0 and `addrs` (ports zero), or a negative code. */
    int status;
    struct sl_addrs addrs;
    /* uv_now() after which the entry is stale. */
    uint64_t expires_ms;
    /* Callers waiting for the in-flight lookup. */
    struct sl_dns_req *waiters;
};

struct sl_dns_req {
    struct sl_dns_req *next;
    struct sl_dns_req **prevp;
    struct entry *entry;
    uint16_t port;
    sl_dns_answer_fn *cb;
    void *arg;
};

struct sl_dns {
    uv_loop_t *loop;
    struct sl_dns_config cfg;
    uint8_t key[SL_HASH_KEY_BYTES];
    struct entry *buckets[BUCKETS];
    /* Completed entries (struct entry.age), oldest first, and their number. */
    struct sl_list aged;
    size_t n_done;
    /* Lookups in flight (each holds its entry until its callback). */
    size_t n_pending;
    bool closing;
    struct sl_dns_stats stats;
};

static void set_port(struct sockaddr_storage *ss, uint16_t port)
{
    if (ss->ss_family == AF_INET) {
        ((struct sockaddr_in *)(void *)ss)->sin_port = htons(port);
    } else if (ss->ss_family == AF_INET6) {
        ((struct sockaddr_in6 *)(void *)ss)->sin6_port = htons(port);
    }
}

static int parse_ip(const char *s, size_t n, struct sockaddr_storage *out)
{
    char text[INET6_ADDRSTRLEN + 2];

    memset(out, 0, sizeof(*out));
    if (n >= 2 && s[0] == '[' && s[n - 1] == ']') {
        s++;
        n -= 2;
    }
    if (n == 0 || n >= sizeof(text)) {
        return SL_EINVAL;
    }
    memcpy(text, s, n);
    text[n] = '\0';
    if (inet_pton(AF_INET, text, &((struct sockaddr_in *)(void *)out)->sin_addr) == 1) {
        out->ss_family = AF_INET;
        return 0;
    }
    if (inet_pton(AF_INET6, text, &((struct sockaddr_in6 *)(void *)out)->sin6_addr) == 1) {
        out->ss_family = AF_INET6;
        return 0;
    }
    return SL_EINVAL;
}

int sl_dns_pin_parse(const char *arg, struct sl_dns_pin *out, char *err, size_t errlen)
{
    const char *c1 = strchr(arg, ':');
    const char *c2;
    struct sl_host host;
    const char *why = NULL;

    memset(out, 0, sizeof(*out));
    c2 = c1 != NULL ? strchr(c1 + 1, ':') : NULL;
    if (c1 == NULL || c2 == NULL) {
        (void)snprintf(err, errlen, "--resolve %s: expected HOST:PORT:ADDR", arg);
        return SL_EINVAL;
    }
    if (sl_host_normalize(sl_slice_of(arg, (size_t)(c1 - arg)), 0, &host, &why) < 0
        || host.kind != SL_HOST_DNS) {
        (void)snprintf(err, errlen, "--resolve %s: bad host name%s%s", arg, why ? ": " : "",
                       why ? why : "");
        return SL_EINVAL;
    }
    if (sl_host_parse_port(sl_slice_of(c1 + 1, (size_t)(c2 - c1 - 1)), &out->port, &why) < 0) {
        (void)snprintf(err, errlen, "--resolve %s: bad port: %s", arg, why ? why : "invalid");
        return SL_EINVAL;
    }
    if (parse_ip(c2 + 1, strlen(c2 + 1), &out->addr) < 0) {
        (void)snprintf(err, errlen, "--resolve %s: ADDR must be an IPv4 or IPv6 address", arg);
        return SL_EINVAL;
    }
    memcpy(out->host, host.name, host.len + 1);
    set_port(&out->addr, out->port);
    return 0;
}

int sl_dns_create(uv_loop_t *loop, const struct sl_dns_config *cfg, struct sl_dns **out)
{
    struct sl_dns *r = sl_calloc(1, sizeof(*r));
    int rc;

    if (r == NULL) {
        return SL_ENOMEM;
    }
    rc = sl_hash_key_random(r->key);
    if (rc < 0) {
        sl_free(r);
        return rc;
    }
    r->loop = loop;
    sl_list_init(&r->aged);
    if (cfg != NULL) {
        r->cfg = *cfg;
    }
    if (r->cfg.ttl_ms == 0) {
        r->cfg.ttl_ms = 30000;
    }
    if (r->cfg.negative_ttl_ms == 0) {
        r->cfg.negative_ttl_ms = 5000;
    }
    if (r->cfg.max_entries == 0) {
        r->cfg.max_entries = 4096;
    }
    *out = r;
    return 0;
}

static struct entry **bucket(struct sl_dns *r, uint64_t hash)
{
    return &r->buckets[hash & (BUCKETS - 1)];
}

static void unchain(struct sl_dns *r, struct entry *e)
{
    struct entry **p = bucket(r, e->hash);

    while (*p != e) {
        p = &(*p)->chain;
    }
    *p = e->chain;
}

static void age_remove(struct sl_dns *r, struct entry *e)
{
    sl_list_remove(&e->age);
    r->n_done--;
}

static void age_append(struct sl_dns *r, struct entry *e)
{
    sl_list_push_back(&r->aged, &e->age);
    r->n_done++;
}

/* The oldest completed entry; the age list must not be empty. */
static struct entry *oldest(struct sl_dns *r)
{
    return SL_CONTAINER_OF(r->aged.next, struct entry, age);
}

static void drop_entry(struct sl_dns *r, struct entry *e)
{
    unchain(r, e);
    age_remove(r, e);
    sl_free(e);
}

static void free_all(struct sl_dns *r)
{
    while (!sl_list_empty(&r->aged)) {
        drop_entry(r, oldest(r));
    }
    sl_free(r);
}

void sl_dns_close(struct sl_dns *r)
{
    if (r == NULL || r->closing) {
        return;
    }
    r->closing = true;
    if (r->n_pending == 0) {
        free_all(r);
    }
}

static void answer(struct sl_dns_req *q, const struct entry *e)
{
    struct sl_addrs addrs;

    if (e->status < 0) {
        q->cb(q->arg, e->status, NULL);
        return;
    }
    addrs = e->addrs;
    for (size_t i = 0; i < addrs.n; i++) {
        set_port(&addrs.a[i], q->port);
    }
    q->cb(q->arg, 0, &addrs);
}

static void on_resolved(uv_getaddrinfo_t *gai, int status, struct addrinfo *res)
{
    struct entry *e = SL_CONTAINER_OF(gai, struct entry, gai);
    struct sl_dns *r = e->owner;

    e->pending = false;
    r->n_pending--;
    e->status = status;
    e->addrs.n = 0;
    for (struct addrinfo *ai = res; ai != NULL && e->addrs.n < SL_ADDRS_MAX; ai = ai->ai_next) {
        if ((ai->ai_family == AF_INET || ai->ai_family == AF_INET6)
            && ai->ai_addrlen <= sizeof(struct sockaddr_storage)) {
            memset(&e->addrs.a[e->addrs.n], 0, sizeof(e->addrs.a[0]));
            memcpy(&e->addrs.a[e->addrs.n], ai->ai_addr, ai->ai_addrlen);
            e->addrs.n++;
        }
    }
    uv_freeaddrinfo(res);
    if (status == 0 && e->addrs.n == 0) {
        e->status = SL_ENOTFOUND;
    }
    if (e->status < 0) {
        r->stats.failures++;
    }
    if (r->closing) {
        while (e->waiters != NULL) {
            struct sl_dns_req *q = e->waiters;

            e->waiters = q->next;
            sl_free(q);
        }
        unchain(r, e);
        sl_free(e);
        if (r->n_pending == 0) {
            free_all(r);
        }
        return;
    }
    e->expires_ms = uv_now(r->loop) + (e->status == 0 ? r->cfg.ttl_ms : r->cfg.negative_ttl_ms);
    age_append(r, e);
    /* Callbacks may start new lookups (even of this name): detach the waiters first. */
    while (e->waiters != NULL) {
        struct sl_dns_req *q = e->waiters;

        e->waiters = q->next;
        if (e->waiters != NULL) {
            e->waiters->prevp = &e->waiters;
        }
        answer(q, e);
        sl_free(q);
    }
    while (r->n_done > r->cfg.max_entries) {
        drop_entry(r, oldest(r));
    }
}

static struct entry *find(struct sl_dns *r, const char *host, size_t n, uint64_t hash)
{
    for (struct entry *e = *bucket(r, hash); e != NULL; e = e->chain) {
        if (e->hash == hash && e->host_len == n && memcmp(e->host, host, n) == 0) {
            return e;
        }
    }
    return NULL;
}

static int start(struct sl_dns *r, const char *host, size_t n, uint64_t hash, struct entry **out)
{
    static const struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
    struct entry *e = sl_calloc(1, sizeof(*e));
    int rc;

    if (e == NULL) {
        return SL_ENOMEM;
    }
    memcpy(e->host, host, n);
    e->host[n] = '\0';
    e->host_len = n;
    e->hash = hash;
    e->owner = r;
    e->pending = true;
    rc = uv_getaddrinfo(r->loop, &e->gai, on_resolved, e->host, NULL, &hints);
    if (rc < 0) {
        sl_free(e);
        return rc;
    }
    e->chain = *bucket(r, hash);
    *bucket(r, hash) = e;
    r->n_pending++;
    *out = e;
    return 0;
}

int sl_dns_lookup(struct sl_dns *r, const char *host, uint16_t port, struct sl_addrs *addrs,
                  sl_dns_answer_fn *cb, void *arg, struct sl_dns_req **req)
{
    size_t n = strnlen(host, SL_HOST_NAME_MAX + 1);
    struct sl_dns_req *q;
    struct entry *e;
    uint64_t hash;

    if (n == 0 || n > SL_HOST_NAME_MAX) {
        return SL_EINVAL;
    }
    for (size_t i = 0; i < r->cfg.n_pins; i++) {
        const struct sl_dns_pin *pin = &r->cfg.pins[i];

        if (pin->port == port && strcmp(pin->host, host) == 0) {
            addrs->n = 1;
            addrs->a[0] = pin->addr;
            return 1;
        }
    }
    hash = sl_siphash24(r->key, host, n);
    e = find(r, host, n, hash);
    if (e != NULL && !e->pending && uv_now(r->loop) >= e->expires_ms) {
        drop_entry(r, e);
        e = NULL;
    }
    if (e != NULL && !e->pending) {
        r->stats.hits++;
        if (e->status < 0) {
            return e->status;
        }
        *addrs = e->addrs;
        for (size_t i = 0; i < addrs->n; i++) {
            set_port(&addrs->a[i], port);
        }
        return 1;
    }
    r->stats.misses++;
    q = sl_calloc(1, sizeof(*q));
    if (q == NULL) {
        return SL_ENOMEM;
    }
    if (e == NULL) {
        int rc = start(r, host, n, hash, &e);

        if (rc < 0) {
            sl_free(q);
            return rc;
        }
    }
    q->entry = e;
    q->port = port;
    q->cb = cb;
    q->arg = arg;
    q->next = e->waiters;
    q->prevp = &e->waiters;
    if (e->waiters != NULL) {
        e->waiters->prevp = &q->next;
    }
    e->waiters = q;
    *req = q;
    return 0;
}

void sl_dns_cancel(struct sl_dns_req *q)
{
    if (q == NULL) {
        return;
    }
    *q->prevp = q->next;
    if (q->next != NULL) {
        q->next->prevp = q->prevp;
    }
    sl_free(q);
}

void sl_dns_stats(const struct sl_dns *r, struct sl_dns_stats *out)
{
    *out = r->stats;
}
