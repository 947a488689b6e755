/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proxy/dnsd.c - the DNS responder (proxy/dnsd.h): the query reader and answer writer of RFC
 * 1035 §4, then the UDP and TCP (RFC 7766) sockets on the main thread's loop, and the audit line
 * of every answered query.
 */
#include "proxy/dnsd.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/list.h"
#include "base/log.h"
#include "base/mem.h"
#include "policy/decision.h"
#include "policy/host.h"
#include "policy/snapshot.h"
#include "proxy/audit.h"

/* The header (RFC 1035 §4.1.1): id, flags, and the four section counts. */
#define HEADER_BYTES 12
/* Flags. */
#define FLAG_QR 0x8000u
#define FLAG_AA 0x0400u
#define FLAG_RD 0x0100u
#define FLAG_RA 0x0080u
/* A name's wire form is at most 255 bytes, labels at most 63 (RFC 1035 §2.3.4). */
#define NAME_WIRE_MAX 255u
#define LABEL_MAX     63u
/* An A record after the question: pointer, type, class, TTL, length, address. */
#define A_RECORD_BYTES 16u
/* TCP: connections at once, and how long one may go without a complete query. */
#define DNSD_TCP_MAX     64u
#define DNSD_TCP_IDLE_MS 5000u
/* TCP connections at once from one client address: one sandbox cannot take every slot. */
#define DNSD_TCP_PER_CLIENT 8u

static uint16_t get16(const uint8_t *p)
{
    return (uint16_t)((unsigned)p[0] << 8 | p[1]);
}

static void put16(uint8_t *p, unsigned v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

/* Reads the question's name at `p`/`n` into q->name. Returns its wire length, or 0 when it is
 * malformed: a pointer (nothing in a query to point at), an extended label type, more than 255
 * bytes, or cut short. */
static size_t read_name(const uint8_t *p, size_t n, struct sl_dnsd_query *q)
{
    size_t off = 0;
    size_t text = 0;

    q->name_plain = true;
    for (;;) {
        unsigned len;

        if (off >= n) {
            return 0;
        }
        len = p[off];
        if (len == 0) {
            off++;
            break;
        }
        if (len > LABEL_MAX || off + 1 + len > n || off + 1 + len + 1 > NAME_WIRE_MAX) {
            return 0;
        }
        if (text > 0) {
            q->name[text++] = '.';
        }
        for (unsigned i = 0; i < len; i++) {
            uint8_t c = p[off + 1 + i];

            if (c < 0x21 || c > 0x7e || c == '.') {
                c = '?';
                q->name_plain = false;
            }
            q->name[text++] = (char)c;
        }
        off += 1 + len;
    }
    if (text == 0) {
        /* The root. */
        q->name[text++] = '.';
    }
    q->name[text] = '\0';
    q->name_len = text;
    return off;
}

bool sl_dnsd_parse(const uint8_t *p, size_t n, struct sl_dnsd_query *q)
{
    unsigned flags;
    size_t name_len;

    memset(q, 0, sizeof(*q));
    q->name[0] = '\0';
    if (n < HEADER_BYTES) {
        return false;
    }
    flags = get16(p + 2);
    if ((flags & FLAG_QR) != 0) {
        /* A response: never answered, so that two responders cannot ping-pong. */
        return false;
    }
    q->id = get16(p);
    q->opcode = (uint8_t)(flags >> 11 & 0xfu);
    q->rd = (flags & FLAG_RD) != 0;
    if (q->opcode != 0) {
        q->rcode = SL_DNSD_NOTIMP;
        return true;
    }
    q->rcode = SL_DNSD_FORMERR;
    if (get16(p + 4) != 1 || get16(p + 6) != 0 || get16(p + 8) != 0) {
        return true;
    }
    name_len = read_name(p + HEADER_BYTES, n - HEADER_BYTES, q);
    if (name_len == 0 || HEADER_BYTES + name_len + 4 > n) {
        q->name[0] = '\0';
        q->name_len = 0;
        return true;
    }
    q->has_question = true;
    q->question = p + HEADER_BYTES;
    q->question_len = name_len + 4;
    q->qtype = get16(p + HEADER_BYTES + name_len);
    q->qclass = get16(p + HEADER_BYTES + name_len + 2);
    if (q->qclass != SL_DNSD_CLASS_IN
        || (q->qtype != SL_DNSD_TYPE_A && q->qtype != SL_DNSD_TYPE_AAAA)) {
        q->rcode = SL_DNSD_REFUSED;
        return true;
    }
    q->rcode = SL_DNSD_NOERROR;
    q->answer_a = q->qtype == SL_DNSD_TYPE_A;
    return true;
}

int sl_dnsd_answer(const struct sl_dnsd_query *q, const uint8_t addr[4], uint8_t *out, size_t cap)
{
    size_t len = HEADER_BYTES + (q->has_question ? q->question_len : 0)
                 + (q->answer_a ? A_RECORD_BYTES : 0);
    unsigned flags = FLAG_QR | (unsigned)q->opcode << 11 | FLAG_AA | (q->rd ? FLAG_RD : 0) | FLAG_RA
                     | (unsigned)q->rcode;
    uint8_t *p;

    if (len > cap || len > SL_DNSD_ANSWER_MAX) {
        return SL_ETOOBIG;
    }
    put16(out, q->id);
    put16(out + 2, flags);
    put16(out + 4, q->has_question ? 1 : 0);
    put16(out + 6, q->answer_a ? 1 : 0);
    put16(out + 8, 0);
    put16(out + 10, 0);
    p = out + HEADER_BYTES;
    if (q->has_question) {
        memcpy(p, q->question, q->question_len);
        p += q->question_len;
    }
    if (q->answer_a) {
        /* The name: a pointer to the question's, right after the header (RFC 1035 §4.1.4). */
        put16(p, 0xc000u | HEADER_BYTES);
        put16(p + 2, SL_DNSD_TYPE_A);
        put16(p + 4, SL_DNSD_CLASS_IN);
        put16(p + 6, 0);
        put16(p + 8, SL_DNSD_TTL_S);
        put16(p + 10, 4);
        memcpy(p + 12, addr, 4);
    }
    return (int)len;
}

const char *sl_dnsd_type_name(uint16_t type, char buf[16])
{
    static const struct {
        uint16_t type;
        const char *name;
    } names[] = {
        { 1, "A" },     { 2, "NS" },     { 5, "CNAME" }, { 6, "SOA" },  { 12, "PTR" },
        { 15, "MX" },   { 16, "TXT" },   { 28, "AAAA" }, { 33, "SRV" }, { 35, "NAPTR" },
        { 64, "SVCB" }, { 65, "HTTPS" }, { 255, "ANY" },
    };

    for (size_t i = 0; i < SL_ARRAY_LEN(names); i++) {
        if (names[i].type == type) {
            return names[i].name;
        }
    }
    (void)snprintf(buf, 16, "TYPE%u", (unsigned)type);
    return buf;
}

const char *sl_dnsd_rcode_name(enum sl_dnsd_rcode rcode)
{
    switch (rcode) {
    case SL_DNSD_NOERROR:
        return "NOERROR";
    case SL_DNSD_FORMERR:
        return "FORMERR";
    case SL_DNSD_NOTIMP:
        return "NOTIMP";
    case SL_DNSD_REFUSED:
        return "REFUSED";
    }
    return "SERVFAIL";
}

/*
 * The responder.
 */

/* One --dns-listen address: its UDP socket and TCP listener. */
struct dnsd_addr {
    struct sl_dnsd *d;
    struct sockaddr_in sin;
    uv_udp_t udp;
    uv_tcp_t tcp;
};

/* A TCP connection: its length-prefixed input, one answer at a time. */
struct dnsd_conn {
    struct sl_dnsd *d;
    const struct dnsd_addr *a;
    /* Link in the server's conns. */
    struct sl_list link;
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_write_t wr;
    struct sockaddr_storage peer;
    /* Bytes read and not yet answered: a length prefix, then the query. */
    uint8_t in[2 + SL_DNSD_QUERY_MAX];
    size_t in_len;
    /* The answer being written, with its length prefix. */
    uint8_t out[2 + SL_DNSD_ANSWER_MAX];
    bool writing;
    /* The peer sent its FIN: close once the answer in flight has left. */
    bool eof;
    bool closing;
    /* Close callbacks still owed (tcp, timer); the memory goes with the last. */
    unsigned pending;
};

struct sl_dnsd {
    uv_loop_t *loop;
    struct sl_audit *audit;
    /* The snapshot queries are identified with (a reference), or NULL. */
    struct sl_snapshot *snap;
    struct dnsd_addr *addrs;
    size_t n_addrs;
    /* Handles initialised (two per address as far as they got); the memory goes with the last
     * close callback. */
    unsigned handles;
    bool closing;
    /* Open TCP connections (struct dnsd_conn.link) and their number. */
    struct sl_list conns;
    unsigned n_conns;
    struct sl_dnsd_stats stats;
    /* One datagram in, one out: the loop takes them one at a time. */
    uint8_t udp_in[SL_DNSD_QUERY_MAX];
    uint8_t udp_out[SL_DNSD_ANSWER_MAX];
};

/* Which client asks, and what its environment says of the name (docs/reference/proxy.md
 * §4.12): no snapshot, no client, an expired one; a name no rule allows on any port
 * (host-not-allowed); a name that is no host at all (bad-host); else nothing to mark, and the
 * rule that allows it on 443 or 80 when one does. */
static void mark_query(const struct sl_dnsd *d, const struct sockaddr *peer,
                       const struct sl_dnsd_query *q, struct sl_audit_record *a)
{
    const struct sl_client *client = sl_policy_identify_address(d->snap, peer);
    struct sl_host host;
    struct sl_decision dec;

    if (d->snap == NULL) {
        a->reason = SL_REASON_NO_POLICY;
        return;
    }
    if (client == NULL) {
        a->reason = SL_REASON_NO_IDENTITY;
        return;
    }
    a->client = sl_client_id(client);
    a->environment = sl_env_name(sl_client_env(client));
    if (!q->has_question) {
        return;
    }
    if (!q->name_plain
        || sl_host_normalize(sl_slice_of(q->name, q->name_len), 0, &host, NULL) < 0) {
        a->reason = SL_REASON_BAD_HOST;
        return;
    }
    {
        struct sl_request_view v = { &host, 443, NULL, true, NULL };

        sl_policy_decide(d->snap, client, &v, (int64_t)time(NULL), &dec);
    }
    /* A rule naming the host on another port allows the name too: nothing to mark. */
    if (dec.allow || dec.reason == SL_REASON_PORT_NOT_ALLOWED) {
        a->rule = dec.rule;
        return;
    }
    a->reason = dec.reason;
}

/* Answers the query `p`/`n` that came from `peer` to `a` into `out` (SL_DNSD_ANSWER_MAX bytes)
 * and audits it. Returns the answer's length, or 0 for no answer. */
static size_t answer_query(struct sl_dnsd *d, const struct dnsd_addr *a,
                           const struct sockaddr *peer, const uint8_t *p, size_t n,
                           const char *transport, uint8_t *out)
{
    uint64_t t0 = uv_hrtime();
    struct sl_dnsd_query q;
    char type[16];
    int len;

    if (!sl_dnsd_parse(p, n, &q)) {
        d->stats.dropped++;
        return 0;
    }
    len = sl_dnsd_answer(&q, (const uint8_t *)&a->sin.sin_addr, out, SL_DNSD_ANSWER_MAX);
    SL_BUG_ON(len < 0);
    d->stats.answered[q.rcode]++;
    if (d->audit != NULL) {
        struct sl_audit_record r = {
            .src = peer,
            .method = "DNS",
            .host = q.has_question ? q.name : NULL,
            .dns = true,
            .dns_type = q.has_question ? sl_dnsd_type_name(q.qtype, type) : NULL,
            .dns_rcode = sl_dnsd_rcode_name(q.rcode),
            .dns_transport = transport,
            .reason = SL_REASON_NONE,
            .policy_version = d->snap != NULL ? sl_snapshot_version(d->snap) : 0,
        };

        mark_query(d, peer, &q, &r);
        r.ms = (double)(uv_hrtime() - t0) / 1e6;
        sl_audit_write(d->audit, &r);
    }
    return (size_t)len;
}

/*
 * UDP.
 */

static void on_udp_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct dnsd_addr *a = h->data;

    (void)suggested;
    *buf = uv_buf_init((char *)a->d->udp_in, sizeof(a->d->udp_in));
}

static void on_udp_read(uv_udp_t *h, ssize_t nread, const uv_buf_t *buf,
                        const struct sockaddr *peer, unsigned flags)
{
    struct dnsd_addr *a = h->data;
    struct sl_dnsd *d = a->d;
    size_t n;
    uv_buf_t out;

    (void)buf;
    if (nread <= 0 || peer == NULL || d->closing) {
        /* Nothing more to read now, or an error of the socket's (an ICMP error of an earlier
         * answer): nothing to answer. */
        return;
    }
    /* A datagram larger than any query is read as its header alone: FORMERR (its question is
     * not there), unless the header says it gets no answer at all. */
    n = answer_query(d, a, peer, d->udp_in,
                     (flags & UV_UDP_PARTIAL) != 0 ? (size_t)HEADER_BYTES : (size_t)nread, "udp",
                     d->udp_out);
    if (n == 0) {
        return;
    }
    out = uv_buf_init((char *)d->udp_out, (unsigned)n);
    if (uv_udp_try_send(h, &out, 1, peer) < 0) {
        d->stats.dropped++;
    }
}

/*
 * TCP.
 */

static void on_conn_handle_closed(uv_handle_t *h);

static void close_conn(struct dnsd_conn *c)
{
    if (c->closing) {
        return;
    }
    c->closing = true;
    c->pending = 2;
    uv_close((uv_handle_t *)&c->tcp, on_conn_handle_closed);
    uv_close((uv_handle_t *)&c->timer, on_conn_handle_closed);
}

static void on_conn_timer(uv_timer_t *t)
{
    close_conn(t->data);
}

static void on_conn_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct dnsd_conn *c = h->data;

    (void)suggested;
    *buf = uv_buf_init((char *)c->in + c->in_len, (unsigned)(sizeof(c->in) - c->in_len));
}

static void on_conn_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

static void on_conn_written(uv_write_t *w, int status)
{
    struct dnsd_conn *c = w->data;

    c->writing = false;
    if (status < 0 || c->closing) {
        close_conn(c);
        return;
    }
    on_conn_read((uv_stream_t *)&c->tcp, 0, NULL);
}

/* Answers the next complete query in c->in, if any. Returns false when the connection closed. */
static bool serve_next(struct dnsd_conn *c)
{
    size_t len;
    size_t n;
    uv_buf_t out;

    if (c->in_len < 2) {
        return true;
    }
    len = get16(c->in);
    if (len == 0 || len > SL_DNSD_QUERY_MAX) {
        c->d->stats.dropped++;
        close_conn(c);
        return false;
    }
    if (c->in_len < 2 + len) {
        return true;
    }
    n = answer_query(c->d, c->a, (const struct sockaddr *)&c->peer, c->in + 2, len, "tcp",
                     c->out + 2);
    c->in_len -= 2 + len;
    memmove(c->in, c->in + 2 + len, c->in_len);
    if (n == 0) {
        close_conn(c);
        return false;
    }
    put16(c->out, (unsigned)n);
    out = uv_buf_init((char *)c->out, (unsigned)(n + 2));
    c->wr.data = c;
    if (uv_write(&c->wr, (uv_stream_t *)&c->tcp, &out, 1, on_conn_written) < 0) {
        close_conn(c);
        return false;
    }
    c->writing = true;
    (void)uv_timer_start(&c->timer, on_conn_timer, DNSD_TCP_IDLE_MS, 0);
    return true;
}

/* Reading follows the state: not while an answer is on its way (the next query waits in the
 * kernel), nor once the input holds a complete query not yet answered. */
static void on_conn_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct dnsd_conn *c = s->data;

    (void)buf;
    if (c->closing) {
        return;
    }
    if (nread == UV_EOF) {
        c->eof = true;
    } else if (nread < 0) {
        close_conn(c);
        return;
    } else {
        c->in_len += (size_t)nread;
    }
    if (!c->writing && !serve_next(c)) {
        return;
    }
    if (c->writing) {
        (void)uv_read_stop(s);
        return;
    }
    if (c->eof) {
        close_conn(c);
        return;
    }
    (void)uv_read_start(s, on_conn_alloc, on_conn_read);
}

/* Whether `a` and `b` are the same IP address (ports aside). */
static bool same_ip(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    if (a->ss_family != b->ss_family) {
        return false;
    }
    if (a->ss_family == AF_INET) {
        return ((const struct sockaddr_in *)(const void *)a)->sin_addr.s_addr
               == ((const struct sockaddr_in *)(const void *)b)->sin_addr.s_addr;
    }
    return a->ss_family == AF_INET6
           && memcmp(&((const struct sockaddr_in6 *)(const void *)a)->sin6_addr,
                     &((const struct sockaddr_in6 *)(const void *)b)->sin6_addr,
                     sizeof(struct in6_addr))
                      == 0;
}

/* The TCP connections open from `c`'s peer address, `c` included. */
static size_t conns_of_peer(const struct sl_dnsd *d, const struct dnsd_conn *c)
{
    size_t n = 0;

    for (struct sl_list *l = d->conns.next; l != &d->conns; l = l->next) {
        const struct dnsd_conn *o = SL_CONTAINER_OF(l, struct dnsd_conn, link);

        n += !o->closing && same_ip(&o->peer, &c->peer);
    }
    return n;
}

/* The TCP connections open (not closing), `c` included. */
static size_t conns_open(const struct sl_dnsd *d)
{
    size_t n = 0;

    for (struct sl_list *l = d->conns.next; l != &d->conns; l = l->next) {
        n += !SL_CONTAINER_OF(l, struct dnsd_conn, link)->closing;
    }
    return n;
}

/* With every slot taken, the connection to close for newcomer `c`: the oldest of the address
 * that holds the most, when that address holds more than `c`'s does (`held`, `c` included).
 * NULL: `c` itself goes. So addresses working together cannot keep a newcomer out: each new
 * connection takes the place of one of the largest holder's, and an address holding fewer is
 * never the one to lose. At most DNSD_TCP_MAX + 1 connections: the scan is bounded. */
static struct dnsd_conn *eviction_victim(const struct sl_dnsd *d, const struct dnsd_conn *c,
                                         size_t held)
{
    struct dnsd_conn *victim = NULL;
    size_t most = held;

    /* The list is newest first: walking it from the tail meets each address's oldest first,
     * and only a strictly larger count replaces the victim. */
    for (struct sl_list *l = d->conns.prev; l != &d->conns; l = l->prev) {
        struct dnsd_conn *o = SL_CONTAINER_OF(l, struct dnsd_conn, link);
        size_t n;

        if (o == c || o->closing) {
            continue;
        }
        n = conns_of_peer(d, o);
        if (n > most) {
            most = n;
            victim = o;
        }
    }
    return victim;
}

static void on_tcp_connection(uv_stream_t *server, int status)
{
    struct dnsd_addr *a = server->data;
    struct sl_dnsd *d = a->d;
    struct dnsd_conn *c;
    int namelen;
    size_t held = 0;

    if (status < 0 || d->closing) {
        return;
    }
    c = sl_calloc(1, sizeof(*c));
    if (c == NULL) {
        return;
    }
    c->d = d;
    c->a = a;
    (void)uv_tcp_init(d->loop, &c->tcp);
    (void)uv_timer_init(d->loop, &c->timer);
    c->tcp.data = c;
    c->timer.data = c;
    sl_list_push_front(&d->conns, &c->link);
    d->n_conns++;
    namelen = (int)sizeof(c->peer);
    if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0
        || uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&c->peer, &namelen) < 0
        || (held = conns_of_peer(d, c)) > DNSD_TCP_PER_CLIENT) {
        d->stats.dropped++;
        close_conn(c);
        return;
    }
    if (conns_open(d) > DNSD_TCP_MAX) {
        struct dnsd_conn *victim = eviction_victim(d, c, held);

        d->stats.dropped++;
        close_conn(victim != NULL ? victim : c);
        if (victim == NULL) {
            return;
        }
    }
    (void)uv_timer_start(&c->timer, on_conn_timer, DNSD_TCP_IDLE_MS, 0);
    if (uv_read_start((uv_stream_t *)&c->tcp, on_conn_alloc, on_conn_read) < 0) {
        close_conn(c);
    }
}

/*
 * Start and close.
 */

static void free_dnsd(struct sl_dnsd *d)
{
    sl_snapshot_unref(d->snap);
    sl_free(d->addrs);
    sl_free(d);
}

static void on_conn_handle_closed(uv_handle_t *h)
{
    struct dnsd_conn *c = h->data;
    struct sl_dnsd *d = c->d;

    if (--c->pending > 0) {
        return;
    }
    sl_list_remove(&c->link);
    d->n_conns--;
    sl_free(c);
    if (d->closing && d->handles == 0 && sl_list_empty(&d->conns)) {
        free_dnsd(d);
    }
}

static void on_addr_handle_closed(uv_handle_t *h)
{
    struct dnsd_addr *a = h->data;
    struct sl_dnsd *d = a->d;

    if (--d->handles == 0 && sl_list_empty(&d->conns)) {
        free_dnsd(d);
    }
}

static void format_addr(const struct sockaddr_in *sin, char *buf, size_t cap)
{
    char ip[INET_ADDRSTRLEN] = "?";

    (void)inet_ntop(AF_INET, &sin->sin_addr, ip, sizeof(ip));
    (void)snprintf(buf, cap, "%s:%u", ip, (unsigned)ntohs(sin->sin_port));
}

static int bind_addr(struct sl_dnsd *d, struct dnsd_addr *a, char *err, size_t errlen)
{
    char text[INET_ADDRSTRLEN + 8];
    const char *what = "UDP";
    int rc;

    format_addr(&a->sin, text, sizeof(text));
    rc = uv_udp_init(d->loop, &a->udp);
    if (rc < 0) {
        goto fail;
    }
    a->udp.data = a;
    d->handles++;
    rc = uv_udp_bind(&a->udp, (const struct sockaddr *)&a->sin, 0);
    if (rc == 0) {
        rc = uv_udp_recv_start(&a->udp, on_udp_alloc, on_udp_read);
    }
    if (rc < 0) {
        goto fail;
    }
    what = "TCP";
    rc = uv_tcp_init(d->loop, &a->tcp);
    if (rc < 0) {
        goto fail;
    }
    a->tcp.data = a;
    d->handles++;
    rc = uv_tcp_bind(&a->tcp, (const struct sockaddr *)&a->sin, 0);
    if (rc == 0) {
        rc = uv_listen((uv_stream_t *)&a->tcp, 128, on_tcp_connection);
    }
    if (rc < 0) {
        goto fail;
    }
    return 0;
fail:
    (void)snprintf(err, errlen, "cannot answer DNS over %s on %s: %s", what, text, uv_strerror(rc));
    return rc;
}

int sl_dnsd_start(uv_loop_t *loop, const struct sockaddr_in *addrs, size_t n,
                  struct sl_audit *audit, struct sl_dnsd **out, char *err, size_t errlen)
{
    struct sl_dnsd *d = sl_calloc(1, sizeof(*d));
    int rc = 0;

    *out = NULL;
    if (d == NULL) {
        (void)snprintf(err, errlen, "out of memory");
        return SL_ENOMEM;
    }
    d->loop = loop;
    sl_list_init(&d->conns);
    d->audit = audit;
    d->addrs = sl_calloc(n > 0 ? n : 1, sizeof(*d->addrs));
    if (d->addrs == NULL) {
        sl_free(d);
        (void)snprintf(err, errlen, "out of memory");
        return SL_ENOMEM;
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        d->addrs[i].d = d;
        d->addrs[i].sin = addrs[i];
        d->n_addrs++;
        rc = bind_addr(d, &d->addrs[i], err, errlen);
    }
    if (rc < 0) {
        sl_dnsd_close(d);
        return rc;
    }
    *out = d;
    return 0;
}

void sl_dnsd_set_snapshot(struct sl_dnsd *d, struct sl_snapshot *s)
{
    sl_snapshot_unref(d->snap);
    d->snap = s != NULL ? sl_snapshot_ref(s) : NULL;
}

void sl_dnsd_stats(const struct sl_dnsd *d, struct sl_dnsd_stats *out)
{
    *out = d->stats;
}

void sl_dnsd_close(struct sl_dnsd *d)
{
    if (d == NULL || d->closing) {
        return;
    }
    d->closing = true;
    for (struct sl_list *l = d->conns.next; l != &d->conns; l = l->next) {
        close_conn(SL_CONTAINER_OF(l, struct dnsd_conn, link));
    }
    for (size_t i = 0; i < d->n_addrs; i++) {
        struct dnsd_addr *a = &d->addrs[i];

        if (a->udp.loop != NULL && !uv_is_closing((uv_handle_t *)&a->udp)) {
            uv_close((uv_handle_t *)&a->udp, on_addr_handle_closed);
        }
        if (a->tcp.loop != NULL && !uv_is_closing((uv_handle_t *)&a->tcp)) {
            uv_close((uv_handle_t *)&a->tcp, on_addr_handle_closed);
        }
    }
    if (d->handles == 0 && sl_list_empty(&d->conns)) {
        free_dnsd(d);
    }
}
