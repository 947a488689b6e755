/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/fuzz/fuzz_conn.c - the connection state machine of proxy/conn.c (and its rooms), run for
 * real: a worker (sl__worker_init(), its libuv loop and its listener, its resolver with --resolve
 * pins, its upstream pool) inside the fuzz process, a client that sends the fuzz input, and a
 * scripted origin. Request head -> decide -> CONNECT / tunnel sniff / absolute-form -> dial ->
 * forward
 * -> response, with the proxy's own stream, upstream and TLS code.
 *
 * Transport: TCP on loopback only. proxy/stream.c is bound to uv_tcp_t (TCP_NODELAY, the peer
 * address that identifies the client), so the harness uses real loopback sockets: the worker
 * listens on 127.0.0.1:<ephemeral>, the origin on a loopback address of its own derived from
 * the pid (127.x.y.z, port 8080 and, when it may bind them, 80 and 443), which the policy's
 * names are pinned to; port 443 only ever gets passthrough tunnels' raw bytes. The harness's
 * sockets close with SO_LINGER 0 (no TIME_WAIT piles up).
 *
 * The loop is driven by hand (UV_RUN_NOWAIT) until it is quiet: no event ready, nothing due,
 * no request in flight (a thread-pool job such as minting a leaf is waited for), and the
 * harness moved no byte. Every run then closes all connections (sl__conn_close_all(), the
 * upstream pool) and the loop must come back to the handles it had before the run.
 *
 * Policy (client 127.0.0.0/8, default deny):
 *   allowed.test (80, 443) and allowed.test:8080  methods GET HEAD POST PUT
 *   api.allowed.test (80, 443)                     credential Authorization: Bearer CRED
 *   pass.allowed.test (443)                        "tls": "passthrough" (relayed uninspected)
 *   ph.allowed.test (80, 443)                      a placeholder credential: the client's
 *                                                  placeholder PLACEHOLDER stands for CRED PH
 *   denied.test                                    no rule (pinned to the origin all the same)
 *   git: allowed.test (443), repository acme/site, access write, credential Basic CRED...: its
 *   own paths get the credential over TLS only and a push is held (proxy/conn_git.c) until
 *   its commands are read; since upstream TLS never completes here, a held push ends in its
 *   refusal (bad body) or the dial's 502, which runs the hold's setup and teardown, not its
 *   reading (fuzz_gitpush.c fuzzes the reader).
 *
 * Input: byte 0 is flags (bit 0: the client half-closes after its last piece; bit 1: the origin
 * half-closes its connections at the end; bit 2: the client sends its pieces without waiting
 * in between; after the first piece, bit 3: the worker drains as on SIGTERM, bit 4: a reload
 * revokes allowed.test, which long-lived relays must notice; bit 5: the origin half-closes a
 * connection on which a request comes that it has no answer left for; bit 6: when the first
 * piece got a 200, the client speaks TLS in the tunnel and sends the other pieces through it:
 * the intercepted path with its minted leaf, SNI-less. Upstream TLS is not completed: the
 * origin's port 443 takes raw bytes, and its HTTP ports take a connection that starts with a
 * TLS record as such, so such requests end in 502 upstream-tls; bit 7: memory runs out, the
 * next two bytes (little-endian, 0 read as 1) saying how many of sluice's allocations inside the
 * worker's loop succeed first: that one and every later one there fail, until the teardown
 * (base/mem.h; the harness's own allocations, made between turns of the loop, never fail; a
 * leaf minted on the thread pool meanwhile may or may not). The rest is the
 * client's bytes, optionally followed by SEP_ORIGIN and the origin's. Each part is split into
 * pieces at SEP_PIECE: the client writes its pieces one by one; the origin answers the k-th request
 * head it receives (over all its connections) with its k-th piece.
 *
 * SLUICE_FUZZ_CONN_TRACE=1 in the environment prints what each side received (for seeds) and
 * the proxy's debug log.
 *
 * Invariants, beyond ASan/UBSan/LSan:
 *   - every run settles (bounded rounds) and ends with every connection and handle closed,
 *     memory running out or not, and the worker still accepts a new connection after it;
 *   - with memory running out (bit 7), the input runs three times, twice with memory enough
 *     first: the last run refuses for no reason, and cuts no transfer for a side and cause,
 *     that the others did not have but out-of-memory (a failed allocation is never read as the
 *     client's or the upstream's fault); a new connection without memory is closed and counted
 *     (checked once per process);
 *   - the origin receives (on its HTTP ports) only well-framed requests (strict http/h1, no error
 * ever), each for the allowed host (exactly one Host: allowed.test:8080, or allowed.test on port
 * 80) with an allowed method, an origin-form target, HTTP/1.1, no hop-by-hop header (Connection and
 *     Upgrade only as the websocket pair), at most one of Content-Length and
 *     Transfer-Encoding: so nothing reaches it for a denied, ambiguous or malformed request;
 *   - the client's placeholder never reaches the origin in a request head (any header, Basic
 *     decoded, or the target): it may only go to ph.allowed.test, over TLS, which fuzz bytes
 *     cannot complete;
 *   - the credential never reaches the origin (it is only ever decided under TLS, which fuzz
 *     bytes cannot complete) and never reaches the client, unless one of them sent it;
 *   - a refusal of the proxy's own has an error status, exactly one X-Sluice-Reason with a
 *     code of docs/reference/proxy.md §4.5, a Content-Type and a Content-Length;
 *   - the client receives well-formed HTTP responses (strict http/h1, bodiless for HEAD and a
 *     2xx to CONNECT), in the order of its requests, up to a 200 that opens a tunnel (followed
 * further on a port-80 tunnel, which carries plain HTTP) or a 101.
 */
/* memmem and accept4. */
#define _GNU_SOURCE 1

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <uv.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/log.h"
#include "base/mem.h"
#include "certs/ca.h"
#include "certs/cache.h"
#include "certs/mint.h"
#include "http/h1.h"
#include "policy/decision.h"
#include "policy/placeholder.h"
#include "policy/snapshot.h"
#include "proxy/addr.h"
#include "proxy/conn.h"
#include "proxy/proxy.h"
#include "proxy/proxy_int.h"
#include "proxy/tls.h"
#include "proxy/upstream.h"
#include "proxy/worker.h"
#include "tests/support/h1trace.h"
#include "tests/support/pki.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define INPUT_MAX   (16u * 1024u)
#define PIECES_MAX  24
#define ORIGINS_MAX 16
#define REQS_MAX    64
#define RX_MAX      ((size_t)1 << 20)
#define ROUNDS_MAX  4000
#define SEP_PIECE   "\n~~~\n"
#define SEP_ORIGIN  "\n=====ORIGIN=====\n"
/* Not a valid host name (the proxy lowercases those in its refusals): compared without case. */
#define CRED "FUZZ_C0NN_S3CRET"
/* The client's placeholder for ph.allowed.test's credential (policy/placeholder.h). */
#define PLACEHOLDER "sluice-ph-fuzzfuzzfuzzfuzzfuzzfuzzfuzzfuzzfuzzfuzz"
#define ORIGIN_PORT 8080

#define F_CLIENT_SHUT 1
#define F_ORIGIN_SHUT 2
#define F_BURST       4
#define F_DRAIN       8
#define F_REVOKE      16
#define F_ORIGIN_FIN  32
#define F_TLS         64
#define F_OOM         128

static const char policy[] =
        "{\"version\": 1, \"environments\": {\"e\": {\"default\": \"deny\", \"rules\": ["
        "{\"host\": \"allowed.test\", \"methods\": [\"GET\", \"HEAD\", \"POST\", \"PUT\"]},"
        "{\"host\": \"allowed.test:8080\", \"methods\": [\"GET\", \"HEAD\", \"POST\", \"PUT\"]},"
        "{\"host\": \"api.allowed.test\", \"credential\": {\"header\": \"Authorization\", "
        "\"value\": \"Bearer " CRED "\"}},"
        "{\"host\": \"pass.allowed.test\", \"tls\": \"passthrough\"},"
        "{\"host\": \"ph.allowed.test\", \"credential\": {\"header\": \"Authorization\", "
        "\"value\": \"" CRED "PH\", \"placeholder_env\": \"FUZZ_KEY\"}}"
        "]}}, \"clients\": [{\"id\": \"fuzz\", \"cidr\": \"127.0.0.0/8\", \"environment\": "
        "\"e\", \"placeholders\": {\"FUZZ_KEY\": \"" PLACEHOLDER
        "\"}, \"git\": {\"host\": \"allowed.test\", \"repo\": \"acme/site\", \"access\": "
        "\"write\", \"credential\": {\"header\": \"Authorization\", \"value\": \"Basic " CRED
        "GIT\"}, \"default_branch\": \"main\", \"protected_branches\": [\"release/*\"]}}]}";

/* The snapshot a revoking reload installs: allowed.test is no longer allowed. */
static const char revoked[] =
        "{\"version\": 2, \"environments\": {\"e\": {\"default\": \"deny\", \"rules\": ["
        "{\"host\": \"api.allowed.test\"},"
        "{\"host\": \"ph.allowed.test\", \"credential\": {\"header\": \"Authorization\", "
        "\"value\": \"" CRED "PH\", \"placeholder_env\": \"FUZZ_KEY\"}}"
        "]}}, \"clients\": [{\"id\": \"fuzz\", \"cidr\": \"127.0.0.0/8\", \"environment\": "
        "\"e\", \"placeholders\": {\"FUZZ_KEY\": \"" PLACEHOLDER "\"}}]}";

static const char *const pinned[] = { "allowed.test:8080",     "allowed.test:80",
                                      "allowed.test:443",      "api.allowed.test:80",
                                      "api.allowed.test:443",  "denied.test:8080",
                                      "denied.test:80",        "denied.test:443",
                                      "pass.allowed.test:443", "pass.allowed.test:80" };

/* The placeholder as the policy compiles it, for the origin's check (only `value` is read). */
static const struct sl_placeholder fuzz_ph = { "FUZZ_KEY", PLACEHOLDER, "ph.allowed.test",
                                               "Authorization", CRED "PH" };

/* The Host an origin request may carry on each port, as the policy allows it: allowed.test
 * with the four methods of its rules; api.allowed.test and pass.allowed.test (plain HTTP in a
 * tunnel to port 80) with any method, as their rules name none. */
struct origin_host {
    const char *host;
    uint16_t port;
    bool any_method;
};

static const struct origin_host origin_hosts[] = { { "allowed.test", 80, false },
                                                   { "allowed.test:8080", 8080, false },
                                                   { "api.allowed.test", 80, true },
                                                   { "pass.allowed.test", 80, true } };

/* What lives for the whole process: the worker and what it shares. */
static struct {
    bool ready;
    /* The two snapshots (references owned here); the worker's is one of them. */
    struct sl_snapshot *snap;
    struct sl_snapshot *snap_revoked;
    /* The harness client's TLS (no verification: it is the proxy's leaf either way). */
    SSL_CTX *client_tls;
    struct sl_proxy_config cfg;
    struct sl__shared sh;
    struct sl__worker w;
    struct sl_minter *minter;
    struct sockaddr_in proxy_addr;
    /* The loopback address of this process: the origin's, the proxy's and the client's. */
    struct in_addr self;
    int origin_listen[3];
    uint16_t origin_port[3];
    size_t n_origin_listen;
    unsigned baseline_handles;
} g;

struct piece {
    const uint8_t *p;
    size_t n;
};

/* One connection the origin accepted. */
struct origin_conn {
    int fd;
    /* The port it came in on: the Host it must carry. */
    uint16_t port;
    struct sl_arena arena;
    struct sl_h1 p;
    /* Received and not yet parsed. */
    struct sl_buf in;
    /* A 101 ended the HTTP on it, or it never carried HTTP (port 443: passthrough tunnels). */
    bool done;
    /* A raw connection got its answer (the next origin piece, once). */
    bool answered;
    /* Bytes came on it: its first byte was looked at. */
    bool started;
    bool eof;
};

/* One run. */
struct run {
    uint8_t flags;
    struct piece client[PIECES_MAX];
    size_t n_client;
    struct piece origin[PIECES_MAX];
    size_t n_origin;
    size_t next_origin;
    int client_fd;
    bool client_eof;
    /* Everything the client sent, and everything each side received (capped). */
    struct sl_buf client_tx;
    struct sl_buf client_rx;
    struct sl_buf origin_rx;
    struct origin_conn oc[ORIGINS_MAX];
    size_t n_oc;
    /* F_TLS: the client's TLS session in its tunnel (memory BIOs), from the CONNECT's 200 on;
     * `tls_up` once its handshake is done. Ciphertext waits in `tls_raw` for the session. */
    SSL *tls;
    BIO *tls_in;
    BIO *tls_out;
    bool tls_up;
    /* The proxy ended the session: the client sends nothing more. */
    bool tls_dead;
    struct sl_buf tls_raw;
    /* F_OOM: what is left of the allocation countdown between turns of the worker's loop. */
    long oom_left;
};

/* `s` is exactly `str`. */
static bool slice_is(struct sl_slice s, const char *str)
{
    return sl_slice_eq(s, sl_slice_str(str));
}

/* True when `needle` (upper case) is in `p`, in any case. */
static bool contains(const uint8_t *p, size_t n, const char *needle)
{
    size_t k = strlen(needle);

    for (size_t i = 0; i + k <= n; i++) {
        size_t j = 0;

        while (j < k && (p[i + j] == needle[j] || p[i + j] == (uint8_t)(needle[j] | 0x20))) {
            j++;
        }
        if (j == k) {
            return true;
        }
    }
    return false;
}

/* Set when a capped buffer of the run could not take more: the checks on it are skipped. */
static bool overflow;

static void keep(struct sl_buf *b, const void *p, size_t n)
{
    if (sl_buf_append(b, p, n) < 0) {
        overflow = true;
    }
}

static void no_linger(int fd)
{
    struct linger l = { 1, 0 };

    (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
}

/*
 * Setup, once per process.
 */

static int origin_listen(struct in_addr a, uint16_t port)
{
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr = a };
    int one = 1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    SL_BUG_ON(fd == -1);
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == -1 || listen(fd, 64) == -1) {
        close(fd);
        return -1;
    }
    return fd;
}

static void count_handle(uv_handle_t *h, void *arg)
{
    (void)h;
    (*(unsigned *)arg)++;
}

static unsigned loop_handles(void)
{
    unsigned n = 0;

    uv_walk(&g.w.loop, count_handle, &n);
    return n;
}

/* A leaf's server context, as proxy/proxy.c attaches one to every minted leaf. */
static int make_leaf_ctx(X509 *cert, EVP_PKEY *key, void *arg, void **out)
{
    SSL_CTX *ctx = NULL;
    char err[256];

    (void)arg;
    if (sl_tls_server_ctx_new(&ctx, err, sizeof(err)) < 0) {
        return SL_ECRYPTO;
    }
    if (sl_test_ctx_serve(ctx, cert, key) != 0) {
        SSL_CTX_free(ctx);
        return SL_ECRYPTO;
    }
    *out = ctx;
    return 0;
}

static void free_leaf_ctx(void *ctx, void *arg)
{
    (void)arg;
    SSL_CTX_free(ctx);
}

static void check_sheds_without_memory(void);

static void setup(void)
{
    const struct sl_leaf_cache_config cc = { 16, make_leaf_ctx, free_leaf_ctx, NULL };
    static const uint16_t ports[3] = { ORIGIN_PORT, 80, 443 };
    struct sl__listen listen = { .kind = SL__LISTEN_PROXY };
    struct sockaddr_in *la = (struct sockaddr_in *)(void *)&listen.addr;
    struct in_addr origin = { 0 };
    char origin_ip[INET_ADDRSTRLEN];
    char err[512] = "";
    int namelen = (int)sizeof(g.proxy_addr);
    unsigned pid = (unsigned)getpid();

    if (g.ready) {
        return;
    }
    sl_log_set_level(getenv("SLUICE_FUZZ_CONN_TRACE") != NULL ? SL_LOG_DEBUG : SL_LOG_ERROR);
    /* An origin address of this process's own in 127/8, so parallel fuzzers never meet (the
     * next ones when it is taken all the same). */
    for (unsigned tries = 0; g.n_origin_listen == 0 && tries < 64; tries++) {
        unsigned k = pid + tries * 7919u;

        origin.s_addr = htonl((127u << 24) | ((10u + (k >> 16) % 200u) << 16)
                              | ((k >> 8 & 255u) << 8) | (1u + (k & 255u) % 254u));
        for (size_t i = 0; i < SL_ARRAY_LEN(ports); i++) {
            int fd = origin_listen(origin, ports[i]);

            /* Ports 80 and 443 need privileges; without them, their dials are refused. */
            if (fd < 0 && i == 0) {
                break;
            }
            if (fd >= 0) {
                g.origin_listen[g.n_origin_listen] = fd;
                g.origin_port[g.n_origin_listen++] = ports[i];
            }
        }
    }
    SL_BUG_ON(g.n_origin_listen == 0);
    SL_BUG_ON(inet_ntop(AF_INET, &origin, origin_ip, sizeof(origin_ip)) == NULL);

    sl_proxy_config_init(&g.cfg);
    for (size_t i = 0; i < SL_ARRAY_LEN(pinned); i++) {
        char arg[128];

        SL_BUG_ON(snprintf(arg, sizeof(arg), "%s:%s", pinned[i], origin_ip) <= 0);
        SL_BUG_ON(sl_dns_pin_parse(arg, &g.cfg.pins[g.cfg.n_pins++], err, sizeof(err)) != 0);
    }
    g.sh.cfg = &g.cfg;
    SL_BUG_ON(sl_peers_new(g.cfg.max_connections, g.cfg.max_connections_per_client, &g.sh.peers)
              != 0);
    SL_BUG_ON(sl_addr_policy_create(&g.sh.addrs) != 0);
    SL_BUG_ON(sl_addr_policy_add_allow(g.sh.addrs, "127.0.0.0/8", err, sizeof(err)) != 0);
    SL_BUG_ON(sl_test_minter_create(&g.minter, err, sizeof(err)) != 0);
    SL_BUG_ON(sl_leaf_cache_create(g.minter, &cc, &g.sh.leaves) != 0);
    SL_BUG_ON(sl_tls_server_ctx_new(&g.sh.server_ctx, err, sizeof(err)) != 0);
    SL_BUG_ON(sl_tls_client_ctx_new(NULL, 0, &g.sh.client_ctx, err, sizeof(err)) != 0);
    g.client_tls = SSL_CTX_new(TLS_client_method());
    SL_BUG_ON(g.client_tls == NULL);
    SSL_CTX_set_verify(g.client_tls, SSL_VERIFY_NONE, NULL);

    la->sin_family = AF_INET;
    /* The process's own address for the proxy and the client too: other programs' loopback
     * traffic (a load test next door) cannot take the ports it needs. */
    la->sin_addr = origin;
    g.self = origin;
    SL_BUG_ON(sl__worker_init(&g.w, 0, &g.sh, &listen, 1, err, sizeof(err)) != 0);
    SL_BUG_ON(uv_tcp_getsockname(&g.w.listeners[0].tcp, (struct sockaddr *)&g.proxy_addr, &namelen)
              != 0);
    SL_BUG_ON(sl_snapshot_parse(policy, strlen(policy), &g.snap, NULL) != 0);
    SL_BUG_ON(sl_snapshot_parse(revoked, strlen(revoked), &g.snap_revoked, NULL) != 0);
    g.w.snapshot = g.snap;
    (void)uv_run(&g.w.loop, UV_RUN_NOWAIT);
    g.baseline_handles = loop_handles();
    g.ready = true;
    check_sheds_without_memory();
}

/*
 * The origin.
 */

static void check_origin_head(const struct origin_conn *o, const struct sl_h1_head *h)
{
    static const char *const methods[] = { "GET", "HEAD", "POST", "PUT" };
    const struct sl_h1_header *host = sl_h1_find(h, "host");
    const struct origin_host *want = NULL;
    bool method_ok = false;

    SL_BUG_ON(sl_h1_count(h, "host") != 1);
    for (size_t i = 0; i < SL_ARRAY_LEN(origin_hosts); i++) {
        if (origin_hosts[i].port == o->port && slice_is(host->value, origin_hosts[i].host)) {
            want = &origin_hosts[i];
        }
    }
    /* Only a name the policy allows on the port it came in on. */
    SL_BUG_ON(want == NULL);
    /* The client's placeholder is refused anywhere in a head (its one rule is TLS only). */
    SL_BUG_ON(strstr(h->target, PLACEHOLDER) != NULL);
    for (size_t i = 0; i < h->n_headers; i++) {
        SL_BUG_ON(sl_placeholder_scan(&fuzz_ph, 1, h->headers[i].value, NULL) != NULL);
    }
    for (size_t i = 0; i < SL_ARRAY_LEN(methods); i++) {
        method_ok = method_ok || strcmp(h->method, methods[i]) == 0;
    }
    SL_BUG_ON(!method_ok && !want->any_method);
    /* A method-override header names an allowed method too. */
    for (size_t i = 0; i < h->n_headers && !want->any_method; i++) {
        static const char *const overrides[] = { "x-http-method-override", "x-http-method",
                                                 "x-method-override" };
        const struct sl_h1_header *f = &h->headers[i];
        bool named = false;

        for (size_t k = 0; k < SL_ARRAY_LEN(overrides); k++) {
            named = named || sl_h1_name_is(f->name, overrides[k]);
        }
        if (named) {
            bool ok = false;

            for (size_t k = 0; k < SL_ARRAY_LEN(methods); k++) {
                ok = ok
                     || (f->value.n == strlen(methods[k])
                         && strncasecmp((const char *)f->value.p, methods[k], f->value.n) == 0);
            }
            SL_BUG_ON(!ok);
        }
    }
    SL_BUG_ON(h->target[0] != '/');
    SL_BUG_ON(h->version_major != 1 || h->version_minor != 1);
    sl_test_h1_check_no_hop_headers(h);
    SL_BUG_ON(sl_h1_count(h, "connection") > 1 || sl_h1_count(h, "upgrade") > 1);
    SL_BUG_ON(sl_h1_count(h, "upgrade") != sl_h1_count(h, "connection"));
    if (sl_h1_count(h, "upgrade") == 1) {
        SL_BUG_ON(!slice_is(sl_h1_find(h, "upgrade")->value, "websocket"));
        SL_BUG_ON(!slice_is(sl_h1_find(h, "connection")->value, "Upgrade"));
    }
    SL_BUG_ON(sl_h1_count(h, "content-length") + sl_h1_count(h, "transfer-encoding") > 1);
}

static void origin_send(int fd, const struct piece *pc)
{
    size_t off = 0;

    /* Loopback buffers take a piece of at most INPUT_MAX bytes at once; a peer that reset the
     * connection takes nothing. */
    while (off < pc->n) {
        ssize_t n = send(fd, pc->p + off, pc->n - off, MSG_NOSIGNAL);

        if (n <= 0) {
            return;
        }
        off += (size_t)n;
    }
}

/* Parses what the origin received on `o`, checks each request head, answers it. */
static void origin_parse(struct run *r, struct origin_conn *o)
{
    size_t pos = 0;

    if (o->port == 443 && !o->answered && o->in.len > 0) {
        /* Whatever the passthrough tunnel's client sent, byte for byte (its TLS hello). */
        o->answered = true;
        if (r->next_origin < r->n_origin) {
            origin_send(o->fd, &r->origin[r->next_origin++]);
        }
    }
    if (!o->done && !o->started && o->in.len > 0 && o->in.p[0] == 0x16) {
        /* A TLS handshake record as a connection's first byte on an HTTP port: the upstream
         * TLS of an intercepted tunnel to that port (bit 6 with a CONNECT to port 8080 or 80),
         * which never completes here. Not HTTP: nothing to check, nothing to answer. */
        o->done = true;
    }
    o->started = o->started || o->in.len > 0;
    while (!o->done && pos < o->in.len) {
        struct sl_h1_event ev;
        int used = sl_h1_feed(&o->p, o->in.p + pos, o->in.len - pos, &ev);

        /* The proxy only ever sends well-framed requests. */
        SL_BUG_ON(used < 0);
        pos += (size_t)used;
        if (ev.type == SL_H1_EV_HEAD) {
            check_origin_head(o, sl_h1_head(&o->p));
            if (r->next_origin < r->n_origin) {
                origin_send(o->fd, &r->origin[r->next_origin++]);
            } else if ((r->flags & F_ORIGIN_FIN) != 0) {
                /* No answer left: the origin closes, as a server ending an idle keep-alive
                 * connection just as a request comes in (a pooled upstream that went stale:
                 * the proxy retries once on a fresh one). */
                (void)shutdown(o->fd, SHUT_WR);
            }
        } else if (ev.type == SL_H1_EV_UPGRADE) {
            o->done = true;
        } else if (ev.type == SL_H1_EV_END) {
            sl_arena_reset(&o->arena);
        } else if (ev.type == SL_H1_EV_NONE && used == 0) {
            break;
        }
    }
    if (o->done) {
        pos = o->in.len;
    }
    sl_buf_consume(&o->in, pos);
}

static bool origin_accept(struct run *r)
{
    bool busy = false;

    for (size_t i = 0; i < g.n_origin_listen; i++) {
        for (;;) {
            int fd = accept4(g.origin_listen[i], NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
            struct origin_conn *o;

            if (fd == -1) {
                break;
            }
            busy = true;
            no_linger(fd);
            if (r->n_oc == ORIGINS_MAX) {
                close(fd);
                continue;
            }
            o = &r->oc[r->n_oc++];
            *o = (struct origin_conn){ .fd = fd,
                                       .port = g.origin_port[i],
                                       .done = g.origin_port[i] == 443 };
            sl_arena_init(&o->arena, 4096, (size_t)1 << 20);
            sl_h1_init(&o->p, SL_H1_REQUEST, NULL, &o->arena);
            sl_buf_init(&o->in, RX_MAX);
        }
    }
    return busy;
}

/* Reads what `fd` has into `b` (and `also`, when not NULL). Returns whether anything came;
 * sets `*eof` at the end of the stream. */
static bool drain_fd(int fd, struct sl_buf *b, struct sl_buf *also, bool *eof)
{
    bool busy = false;
    uint8_t buf[16384];

    while (!*eof) {
        ssize_t n = recv(fd, buf, sizeof(buf), 0);

        if (n > 0) {
            busy = true;
            keep(b, buf, (size_t)n);
            if (also != NULL) {
                keep(also, buf, (size_t)n);
            }
            continue;
        }
        if (n == -1 && errno == EINTR) {
            continue;
        }
        if (n == 0 || errno != EAGAIN) {
            *eof = true;
            busy = true;
        }
        break;
    }
    return busy;
}

/* Sends the client's pending ciphertext. */
static void tls_flush(struct run *r)
{
    uint8_t buf[16384];
    int n;

    while ((n = BIO_read(r->tls_out, buf, sizeof(buf))) > 0) {
        struct piece pc = { buf, (size_t)n };

        origin_send(r->client_fd, &pc);
    }
}

/* Feeds the client's session what arrived; its plaintext is what the client received. */
static bool tls_pump(struct run *r)
{
    uint8_t buf[16384];
    bool busy = false;
    int n;

    if (r->tls_raw.len > 0) {
        SL_BUG_ON(BIO_write(r->tls_in, r->tls_raw.p, (int)r->tls_raw.len) != (int)r->tls_raw.len);
        sl_buf_reset(&r->tls_raw);
    }
    ERR_clear_error();
    if (!SSL_is_init_finished(r->tls)) {
        (void)SSL_do_handshake(r->tls);
    }
    if (SSL_is_init_finished(r->tls)) {
        r->tls_up = true;
        while ((n = SSL_read(r->tls, buf, sizeof(buf))) > 0) {
            keep(&r->client_rx, buf, (size_t)n);
            busy = true;
        }
    }
    ERR_clear_error();
    tls_flush(r);
    return busy;
}

/* Moves every byte the harness can move. Returns whether anything moved. */
static bool pump(struct run *r)
{
    bool busy = origin_accept(r);

    if (r->client_fd >= 0 && r->tls == NULL) {
        busy = drain_fd(r->client_fd, &r->client_rx, NULL, &r->client_eof) || busy;
    } else if (r->client_fd >= 0) {
        busy = drain_fd(r->client_fd, &r->tls_raw, NULL, &r->client_eof) || busy;
        busy = tls_pump(r) || busy;
    }
    for (size_t i = 0; i < r->n_oc; i++) {
        struct origin_conn *o = &r->oc[i];

        if (o->fd >= 0 && drain_fd(o->fd, &o->in, &r->origin_rx, &o->eof)) {
            busy = true;
            origin_parse(r, o);
        }
    }
    return busy;
}

/* The loop has nothing to do now: no event ready, no timer due, no request in flight. */
static bool loop_quiet(void)
{
    struct pollfd p = { .fd = uv_backend_fd(&g.w.loop), .events = POLLIN };

    if (uv_backend_timeout(&g.w.loop) == 0 || poll(&p, 1, 0) > 0) {
        return false;
    }
    if (g.w.loop.active_reqs.count > 0) {
        /* A write, connect or thread-pool job (a leaf being minted) still runs: wait a bit. */
        (void)poll(&p, 1, 5);
        return false;
    }
    return true;
}

/* Runs the loop and the harness until neither has anything left to do. */
static void settle(struct run *r)
{
    int quiet = 0;

    for (int round = 0; round < ROUNDS_MAX; round++) {
        bool busy = pump(r);

        /* Only the worker's turns spend the countdown (F_OOM). */
        sl_mem_fail_resume(r->oom_left);
        (void)uv_run(&g.w.loop, UV_RUN_NOWAIT);
        r->oom_left = sl_mem_fail_suspend();
        busy = pump(r) || busy;
        if (!busy && loop_quiet()) {
            if (++quiet == 2) {
                return;
            }
        } else {
            quiet = 0;
        }
    }
    {
        /* A livelock: the proxy or the harness keeps going without end. */
        const bool never_settles = true;

        SL_BUG_ON(never_settles);
    }
}

/*
 * The client's view.
 */

struct sent {
    bool head;
    bool connect;
    uint16_t port;
};

/* The requests the client sent, in order, as the proxy parses them: whether each is HEAD or a
 * CONNECT (and to which port), following a CONNECT into its tunnel. */
static size_t client_requests(const struct run *r, struct sent *out)
{
    struct sl_arena arena;
    struct sl_h1 p;
    size_t pos = 0;
    size_t n = 0;

    sl_arena_init(&arena, 4096, (size_t)1 << 22);
    sl_h1_init(&p, SL_H1_REQUEST, NULL, &arena);
    while (n < REQS_MAX && pos < r->client_tx.len) {
        struct sl_h1_event ev;
        int used = sl_h1_feed(&p, r->client_tx.p + pos, r->client_tx.len - pos, &ev);

        if (used < 0) {
            break;
        }
        pos += (size_t)used;
        if (ev.type == SL_H1_EV_HEAD) {
            const struct sl_h1_head *h = sl_h1_head(&p);
            const char *colon = strrchr(h->target, ':');

            out[n].head = strcmp(h->method, "HEAD") == 0;
            out[n].connect = strcmp(h->method, "CONNECT") == 0;
            out[n].port = colon != NULL && strcmp(colon, ":80") == 0 ? 80 : 0;
            n++;
        } else if (ev.type == SL_H1_EV_UPGRADE) {
            if (n == 0 || !out[n - 1].connect || (out[n - 1].port != 80 && !r->tls_up)) {
                break;
            }
            /* A tunnel to port 80 may carry plain HTTP, and the harness's TLS session carries
             * HTTP: a fresh parser, as the proxy does. */
            sl_h1_finish(&p);
            sl_arena_reset(&arena);
            sl_h1_init(&p, SL_H1_REQUEST, NULL, &arena);
        } else if (ev.type == SL_H1_EV_NONE && used == 0) {
            break;
        }
    }
    sl_h1_finish(&p);
    sl_arena_finish(&arena);
    return n;
}

/* A refusal of the proxy's own (docs/reference/proxy.md §4.5): an error status, a reason code of
 * the list, a one-line text body. Responses relayed from an origin that wrote the header itself are
 * not the proxy's: `origin_says_reason` skips them. */
static void check_refusal(const struct sl_h1_head *h, bool origin_says_reason)
{
    const struct sl_h1_header *f = sl_h1_find(h, "x-sluice-reason");
    bool known = false;

    if (f == NULL || origin_says_reason) {
        return;
    }
    for (int r = SL_REASON_NONE + 1; r <= SL_REASON_LAST; r++) {
        known = known || slice_is(f->value, sl_reason_code((enum sl_reason)r));
    }
    SL_BUG_ON(!known || sl_h1_count(h, "x-sluice-reason") != 1);
    SL_BUG_ON(h->status < 400 || sl_h1_count(h, "content-length") != 1);
    SL_BUG_ON(sl_h1_find(h, "content-type") == NULL);
}

/* The client received well-formed responses, in the order of its requests. */
static void check_client_rx(const struct run *r)
{
    struct sent reqs[REQS_MAX];
    size_t n = client_requests(r, reqs);
    bool origin_says_reason = false;
    size_t i = 0;
    size_t pos = 0;
    struct sl_arena arena;
    struct sl_h1 p;

    for (size_t k = 0; k < r->n_origin; k++) {
        origin_says_reason =
                origin_says_reason || contains(r->origin[k].p, r->origin[k].n, "X-SLUICE-REASON");
    }
    sl_arena_init(&arena, 4096, (size_t)1 << 22);
    sl_h1_init(&p, SL_H1_RESPONSE, NULL, &arena);
    if (n > 0 && reqs[0].head) {
        sl_h1_expect_no_body(&p);
    }
    while (pos < r->client_rx.len) {
        struct sl_h1_event ev;
        int used = sl_h1_feed(&p, r->client_rx.p + pos, r->client_rx.len - pos, &ev);
        const struct sl_h1_head *h;

        SL_BUG_ON(used < 0);
        pos += (size_t)used;
        if (ev.type == SL_H1_EV_UPGRADE || (ev.type == SL_H1_EV_NONE && used == 0)) {
            break;
        }
        if (ev.type != SL_H1_EV_HEAD && ev.type != SL_H1_EV_END) {
            continue;
        }
        h = sl_h1_head(&p);
        if (h->status < 200) {
            continue;
        }
        if (ev.type == SL_H1_EV_HEAD) {
            check_refusal(h, origin_says_reason);
            if (i >= n || !reqs[i].connect || h->status >= 300) {
                continue;
            }
            /* A 2xx to CONNECT has no content (RFC 9110 §9.3.6): the tunnel starts after its
             * head. Its bytes are TLS, or nothing (the proxy closes a tunnel that is not),
             * except on port 80, where plain HTTP may follow: responses again. */
            if (reqs[i].port != 80 && !r->tls_up) {
                break;
            }
            sl_h1_finish(&p);
            sl_arena_reset(&arena);
            sl_h1_init(&p, SL_H1_RESPONSE, NULL, &arena);
        }
        i++;
        sl_arena_reset(&arena);
        if (i < n && reqs[i].head) {
            sl_h1_expect_no_body(&p);
        }
    }
    sl_h1_finish(&p);
    sl_arena_finish(&arena);
}

/*
 * A run.
 */

static size_t split(const uint8_t *p, size_t n, struct piece *out, size_t max)
{
    size_t k = 0;
    const size_t sep = strlen(SEP_PIECE);

    while (k < max - 1) {
        const uint8_t *s = memmem(p, n, SEP_PIECE, sep);

        if (s == NULL) {
            break;
        }
        out[k++] = (struct piece){ p, (size_t)(s - p) };
        n -= (size_t)(s - p) + sep;
        p = s + sep;
    }
    out[k++] = (struct piece){ p, n };
    return k;
}

static void client_send(struct run *r, const struct piece *pc)
{
    size_t off = 0;

    keep(&r->client_tx, pc->p, pc->n);
    if (r->tls != NULL) {
        /* Inside the TLS tunnel: a session whose handshake failed sends nothing more. */
        if (r->tls_up && !r->tls_dead) {
            ERR_clear_error();
            /* Memory BIOs take it all, unless the proxy ended the session (an alert). */
            if (SSL_write(r->tls, pc->p, (int)pc->n) <= 0) {
                r->tls_dead = true;
            }
            ERR_clear_error();
            tls_flush(r);
        }
        return;
    }
    /* The proxy stops reading while it waits (dialling): the kernel keeps the rest. A client
     * the proxy has closed takes nothing more. */
    for (int tries = 0; off < pc->n && tries < 64; tries++) {
        ssize_t n = send(r->client_fd, pc->p + off, pc->n - off, MSG_NOSIGNAL);

        if (n > 0) {
            off += (size_t)n;
        } else if (n == -1 && errno == EAGAIN) {
            settle(r);
        } else {
            return;
        }
    }
}

static int client_connect(void);

/* The worker still accepts: a new connection becomes one of its connections (a listener left
 * waiting on a connection nobody took, after memory ran out, would not), then goes. */
static void check_still_accepts(void)
{
    int fd = client_connect();
    bool accepted = false;

    for (int round = 0; round < ROUNDS_MAX && !accepted; round++) {
        struct pollfd p = { .fd = uv_backend_fd(&g.w.loop), .events = POLLIN };

        (void)poll(&p, 1, round == 0 ? 0 : 1);
        (void)uv_run(&g.w.loop, UV_RUN_NOWAIT);
        accepted = g.w.n_conns > 0;
    }
    SL_BUG_ON(!accepted);
    close(fd);
    sl__conn_close_all(&g.w);
    for (int round = 0; round < ROUNDS_MAX && loop_handles() != g.baseline_handles; round++) {
        (void)uv_run(&g.w.loop, UV_RUN_NOWAIT);
    }
    SL_BUG_ON(g.w.n_conns != 0 || loop_handles() != g.baseline_handles);
    SL_BUG_ON(atomic_load(&g.sh.connections) != 0 || sl_peers_addresses(g.sh.peers) != 0);
}

/* A new connection the worker has no memory for is closed at once and counted (the metric
 * sluice_connections_refused_total{reason="out-of-memory"}, docs/reference/proxy.md §4.10): the
 * first one takes the listener's spare handle, the second arrives while that is still closing,
 * waits for it and goes the same way. Run once per process, before any input. */
static void check_sheds_without_memory(void)
{
    uint64_t before = atomic_load(&g.w.counters.connections_refused_memory);
    int fd[2] = { client_connect(), client_connect() };
    long left = 1;
    uint64_t shed = 0;

    for (int round = 0; round < ROUNDS_MAX && shed < 2; round++) {
        struct pollfd p = { .fd = uv_backend_fd(&g.w.loop), .events = POLLIN };

        (void)poll(&p, 1, round == 0 ? 0 : 1);
        /* Every allocation of the worker's fails, from its first on. */
        sl_mem_fail_resume(left);
        (void)uv_run(&g.w.loop, UV_RUN_NOWAIT);
        left = sl_mem_fail_suspend();
        shed = atomic_load(&g.w.counters.connections_refused_memory) - before;
    }
    SL_BUG_ON(shed != 2 || g.w.n_conns != 0 || atomic_load(&g.sh.connections) != 0);
    for (size_t i = 0; i < 2; i++) {
        struct pollfd p = { .fd = fd[i], .events = POLLIN };
        char byte;

        /* Closed without an answer. */
        SL_BUG_ON(poll(&p, 1, 1000) != 1);
        SL_BUG_ON(recv(fd[i], &byte, 1, 0) > 0);
        close(fd[i]);
    }
    for (int round = 0; round < ROUNDS_MAX && loop_handles() != g.baseline_handles; round++) {
        (void)uv_run(&g.w.loop, UV_RUN_NOWAIT);
    }
    SL_BUG_ON(loop_handles() != g.baseline_handles);
    check_still_accepts();
}

static void teardown(struct run *r)
{
    sl__conn_close_all(&g.w);
    sl_upstream_pool_close(&g.w);
    g.w.draining = false;
    g.w.snapshot = g.snap;
    if (r->client_fd >= 0) {
        close(r->client_fd);
        r->client_fd = -1;
    }
    for (size_t i = 0; i < r->n_oc; i++) {
        close(r->oc[i].fd);
        r->oc[i].fd = -1;
    }
    for (int round = 0; round < ROUNDS_MAX; round++) {
        (void)uv_run(&g.w.loop, UV_RUN_NOWAIT);
        if (g.w.n_conns == 0 && g.w.n_idle == 0 && g.w.loop.active_reqs.count == 0
            && loop_handles() == g.baseline_handles) {
            break;
        }
        (void)origin_accept(r);
        for (size_t i = 0; i < r->n_oc; i++) {
            if (r->oc[i].fd >= 0) {
                close(r->oc[i].fd);
                r->oc[i].fd = -1;
            }
        }
        if (g.w.loop.active_reqs.count > 0) {
            struct pollfd p = { .fd = uv_backend_fd(&g.w.loop), .events = POLLIN };

            (void)poll(&p, 1, 5);
        }
    }
    /* Every connection, upstream and handle of the run is gone. */
    SL_BUG_ON(g.w.n_conns != 0 || g.w.n_idle != 0 || g.w.conns != NULL);
    SL_BUG_ON(loop_handles() != g.baseline_handles);
    SL_BUG_ON(atomic_load(&g.sh.connections) != 0);
    /* ... and so is every connection's slot of its address (--max-connections-per-client). */
    SL_BUG_ON(sl_peers_addresses(g.sh.peers) != 0);
    {
        struct sl_dns_stats rs;

        /* Every name the policy allows is pinned: the system resolver is never asked (this
         * harness stays on loopback). */
        sl_dns_stats(g.w.dns, &rs);
        SL_BUG_ON(rs.misses != 0 || rs.hits != 0);
    }
    check_still_accepts();
}

/* A client connected to the worker's listener from the process's own address. The listener's
 * backlog completes the handshake; the worker accepts in the loop. */
static int client_connect(void)
{
    struct sockaddr_in src = { .sin_family = AF_INET, .sin_addr = g.self };
    int one = 1;
    int err = 0;

    for (int tries = 0; tries < 8; tries++) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        SL_BUG_ON(fd == -1);
        no_linger(fd);
        (void)setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
        if (bind(fd, (struct sockaddr *)&src, sizeof(src)) == 0
            && connect(fd, (struct sockaddr *)&g.proxy_addr, sizeof(g.proxy_addr)) == 0) {
            return fd;
        }
        err = errno;
        close(fd);
    }
    sl_log(SL_LOG_ERROR, 0, "msg=\"cannot connect to the worker\" err=\"%s\"", strerror(err));
    SL_BUG_ON(err != 0);
    return -1;
}

/* After the first piece (a CONNECT, for this flag): when its 200 came, the rest of the client's
 * pieces go through a TLS session with the proxy's intercepting end. */
static void start_tls(struct run *r)
{
    static const char ok[] = "HTTP/1.1 200 ";

    if (r->client_rx.len < sizeof(ok) || memcmp(r->client_rx.p, ok, sizeof(ok) - 1) != 0
        || memcmp(r->client_rx.p + r->client_rx.len - 4, "\r\n\r\n", 4) != 0) {
        return;
    }
    r->tls = SSL_new(g.client_tls);
    r->tls_in = BIO_new(BIO_s_mem());
    r->tls_out = BIO_new(BIO_s_mem());
    SL_BUG_ON(r->tls == NULL || r->tls_in == NULL || r->tls_out == NULL);
    SSL_set_bio(r->tls, r->tls_in, r->tls_out);
    SSL_set_connect_state(r->tls);
    (void)tls_pump(r);
    for (int k = 0; k < 8 && !r->tls_up; k++) {
        settle(r);
    }
}

static void run(struct run *r)
{
    r->client_fd = client_connect();
    SL_BUG_ON(fcntl(r->client_fd, F_SETFL, O_NONBLOCK) == -1);
    settle(r);
    for (size_t i = 0; i < r->n_client; i++) {
        if (r->client[i].n > 0) {
            client_send(r, &r->client[i]);
        }
        if ((r->flags & F_BURST) == 0 || i + 1 == r->n_client) {
            settle(r);
        }
        if (i == 0 && (r->flags & F_TLS) != 0) {
            start_tls(r);
        }
        if (i == 0 && (r->flags & (F_DRAIN | F_REVOKE)) != 0) {
            /* What SIGTERM and a reload do to a worker's connections (proxy/worker.c), the
             * listener left open. */
            if ((r->flags & F_REVOKE) != 0) {
                g.w.snapshot = g.snap_revoked;
                sl__conn_policy_changed(&g.w);
            }
            if ((r->flags & F_DRAIN) != 0) {
                g.w.draining = true;
                sl_upstream_pool_close(&g.w);
                sl__conn_drain_all(&g.w);
            }
            settle(r);
        }
    }
    if ((r->flags & F_CLIENT_SHUT) != 0) {
        (void)shutdown(r->client_fd, SHUT_WR);
        settle(r);
    }
    if ((r->flags & F_ORIGIN_SHUT) != 0) {
        for (size_t i = 0; i < r->n_oc; i++) {
            (void)shutdown(r->oc[i].fd, SHUT_WR);
        }
        settle(r);
    }
}

/* The refusals of one run, by reason (denied and failed together), and the transfers it cut
 * short, by side and cause: from the worker's counters. */
struct reasons {
    uint64_t n[SL_REASON_LAST + 1];
    uint64_t aborted[SL__SIDE_N][SL__ABORT_N];
};

static void count_reasons(struct reasons *out)
{
    for (int i = 0; i <= SL_REASON_LAST; i++) {
        out->n[i] = atomic_load(&g.w.counters.denied_by_reason[i])
                    + atomic_load(&g.w.counters.failed_by_reason[i]);
    }
    for (int side = 0; side < SL__SIDE_N; side++) {
        for (int cause = 0; cause < SL__ABORT_N; cause++) {
            out->aborted[side][cause] = atomic_load(&g.w.counters.aborted[side][cause]);
        }
    }
}

/* One run of the client's and the origin's bytes with `flags`, memory running out after
 * `oom_left` allocations of the worker's (0: never); `seen` gets the reasons it refused with. */
static void run_once(uint8_t flags, long oom_left, const uint8_t *data, size_t size,
                     struct reasons *seen)
{
    struct run r = { .client_fd = -1, .flags = flags, .oom_left = oom_left };
    const uint8_t *origin = memmem(data, size, SEP_ORIGIN, strlen(SEP_ORIGIN));
    struct reasons before;

    overflow = false;
    if (origin != NULL) {
        size_t client_n = (size_t)(origin - data);
        size_t skip = client_n + strlen(SEP_ORIGIN);

        r.n_client = split(data, client_n, r.client, PIECES_MAX);
        r.n_origin = split(origin + strlen(SEP_ORIGIN), size - skip, r.origin, PIECES_MAX);
    } else {
        r.n_client = split(data, size, r.client, PIECES_MAX);
    }
    sl_buf_init(&r.client_tx, RX_MAX);
    sl_buf_init(&r.client_rx, RX_MAX);
    sl_buf_init(&r.origin_rx, RX_MAX);
    sl_buf_init(&r.tls_raw, RX_MAX);

    count_reasons(&before);
    run(&r);
    teardown(&r);
    count_reasons(seen);
    for (int i = 0; i <= SL_REASON_LAST; i++) {
        seen->n[i] -= before.n[i];
    }
    for (int side = 0; side < SL__SIDE_N; side++) {
        for (int cause = 0; cause < SL__ABORT_N; cause++) {
            seen->aborted[side][cause] -= before.aborted[side][cause];
        }
    }

    /* The credential is injected only under TLS: it never reaches the origin, and no error
     * shows it to the client, unless they sent it themselves. */
    if (!overflow && !contains(r.client_tx.p, r.client_tx.len, CRED)) {
        SL_BUG_ON(contains(r.origin_rx.p, r.origin_rx.len, CRED));
        SL_BUG_ON(!contains(data, size, CRED) && contains(r.client_rx.p, r.client_rx.len, CRED));
    }
    if (!overflow) {
        check_client_rx(&r);
    }
    if (getenv("SLUICE_FUZZ_CONN_TRACE") != NULL) {
        /* What each side received, for writing seeds. */
        printf("--- origin received %zu bytes:\n%.*s\n--- client received %zu bytes:\n%.*s\n",
               r.origin_rx.len, (int)r.origin_rx.len, (const char *)r.origin_rx.p, r.client_rx.len,
               (int)r.client_rx.len, (const char *)r.client_rx.p);
    }

    for (size_t i = 0; i < r.n_oc; i++) {
        sl_h1_finish(&r.oc[i].p);
        sl_arena_finish(&r.oc[i].arena);
        sl_buf_finish(&r.oc[i].in);
    }
    sl_buf_finish(&r.client_tx);
    sl_buf_finish(&r.client_rx);
    sl_buf_finish(&r.origin_rx);
    sl_buf_finish(&r.tls_raw);
    SSL_free(r.tls);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct reasons ref;
    struct reasons warm;
    struct reasons oom;
    uint8_t flags;
    long oom_left;

    if (size < 1 || size - 1 > INPUT_MAX) {
        return 0;
    }
    setup();
    flags = data[0];
    data++;
    size--;
    if ((flags & F_OOM) == 0) {
        run_once(flags, 0, data, size, &ref);
        return 0;
    }
    if (size < 2) {
        return 0;
    }
    oom_left = (long)data[0] | (long)data[1] << 8;
    data += 2;
    size -= 2;
    /* The same bytes with memory enough, twice (the first run may still be minting the
     * tunnel's leaf when the harness gives up on the handshake; the second finds it made, as
     * the run that follows does), then with memory running out: that run may refuse for want
     * of memory where the others did not, but never for a reason neither had (a failed
     * allocation read as the client's or the upstream's fault). */
    run_once(flags & ~F_OOM, 0, data, size, &ref);
    run_once(flags & ~F_OOM, 0, data, size, &warm);
    run_once(flags, oom_left == 0 ? 1 : oom_left, data, size, &oom);
    for (int i = 0; i <= SL_REASON_LAST; i++) {
        if (oom.n[i] > 0 && ref.n[i] == 0 && warm.n[i] == 0 && i != SL_REASON_OUT_OF_MEMORY) {
            sl_log(SL_LOG_ERROR, 0,
                   "msg=\"memory running out was refused as another reason\" reason=%s",
                   sl_reason_code((enum sl_reason)i));
            SL_BUG_ON(true);
        }
    }
    /* Nor is a transfer cut for a cause neither had, but out-of-memory. */
    for (int side = 0; side < SL__SIDE_N; side++) {
        for (int cause = 0; cause < SL__ABORT_N; cause++) {
            if (oom.aborted[side][cause] > 0 && ref.aborted[side][cause] == 0
                && warm.aborted[side][cause] == 0 && cause != SL__ABORT_OUT_OF_MEMORY) {
                sl_log(SL_LOG_ERROR, 0,
                       "msg=\"memory running out cut a transfer for another cause\" side=%s "
                       "cause=%s",
                       sl__abort_side_name((enum sl__abort_side)side),
                       sl__abort_cause_name((enum sl__abort_cause)cause));
                SL_BUG_ON(true);
            }
        }
    }
    return 0;
}
