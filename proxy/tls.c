/* SPDX-License-Identifier: Apache-2.0 */
#include "proxy/tls.h"

#include <arpa/inet.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <uv.h>

#include "base/mem.h"

/* Largest session cache a client context accepts (lookups scan the table). */
#define SESSION_CACHE_MAX 4096u
/* scope " [" host "]:" port NUL. */
#define SESS_KEY_MAX (SL_TLS_SCOPE_MAX + SL_TLS_HOST_MAX + 11u)
/* Room for a failure text. */
#define ERR_TEXT_BYTES 256u
/* OpenSSL security level of upstream connections: 112 bits (RSA and DH keys of 2048 bits, ECC
 * of 224, no SHA-1 signature). */
#define UPSTREAM_SECURITY_LEVEL 2
/* Longest method token sl_tls_sniff() waits for (the longest registered method has 17). */
#define SNIFF_METHOD_MAX 24u
/* Largest TLSPlaintext fragment (RFC 8446 §5.1). */
#define TLS_PLAINTEXT_MAX 16384u

/* TLS 1.3 suites, AES-128-GCM first: TLS 1.3's mandatory suite, as strong as the others for
 * this use, with a cheaper key schedule than the SHA-384 suite OpenSSL lists first (HKDF was
 * 18 % of a handshake's instructions) and 10 AES rounds instead of 14 for every record. */
static const char tls13_suites[] =
        "TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256:TLS_AES_256_GCM_SHA384";
/* TLS 1.2 suites of the client-facing side: ECDHE key exchange (forward secrecy) with an AEAD
 * only, in the TLS 1.3 order above. No CBC suite (MAC-then-encrypt: the Lucky13 timing oracle,
 * and BEAST's predictable IVs before TLS 1.1), no static RSA, no SHA-1 MAC. ECDSA first: every
 * leaf the minter makes has a P-256 key; the RSA ones serve a context given an RSA certificate.
 * Upstream connections keep OpenSSL's default list: the proxy does not choose its origins. */
static const char tls12_server_suites[] = "ECDHE-ECDSA-AES128-GCM-SHA256:"
                                          "ECDHE-ECDSA-CHACHA20-POLY1305:"
                                          "ECDHE-ECDSA-AES256-GCM-SHA384:"
                                          "ECDHE-RSA-AES128-GCM-SHA256:"
                                          "ECDHE-RSA-CHACHA20-POLY1305:"
                                          "ECDHE-RSA-AES256-GCM-SHA384";
/* The ALPN list a client offers, in wire format (RFC 7301 §3.1). */
static const unsigned char alpn_http11[] = { 8, 'h', 't', 't', 'p', '/', '1', '.', '1' };

/* Where a server engine stands with its SNI callback. */
enum sni_state {
    /* The ClientHello has not been seen yet. */
    SNI_IDLE = 0,
    /* The callback asked to retry; no certificate has been set since. */
    SNI_WAITING,
    /* The callback has run and a certificate is settled. */
    SNI_DONE,
};

/* Ciphertext waiting in one direction: bytes [off, off + len) of p (cap bytes). The memory is
 * held only while bytes wait: it is freed when the last one is taken, so an idle engine holds
 * none. */
struct cbuf {
    uint8_t *p;
    size_t off;
    size_t len;
    size_t cap;
};

struct sl_tls {
    /* The OpenSSL connection; owned. It owns the BIO. */
    SSL *ssl;
    /* The BIO through which OpenSSL reads `in` and writes `out` (the method below), one for
     * both directions (SSL owns it); its data is this engine. `in` holds the ciphertext fed and
     * not yet read by OpenSSL, `out` what OpenSSL wrote and we have not sent; the amounts are
     * capped by sl_tls_feed() and sl_tls_write(). Ours rather than OpenSSL's memory BIOs: what
     * waits is known without a BIO_ctrl() round trip (dozens per request), and nothing is kept
     * once drained (a memory BIO keeps the most it ever held). */
    BIO *bio;
    struct cbuf in;
    struct cbuf out;
    /* Most output ciphertext, in bytes, that may be pending before sl_tls_write() accepts 0. */
    size_t out_cap;
    /* 0 while healthy; otherwise the failure code every call returns. */
    int failed;
    /* The BIO could not take OpenSSL's output for lack of memory: the failure that follows is
     * SL_ENOMEM (OpenSSL sees a failed write, as of a socket). */
    bool out_of_memory;
    /* Fixed at creation: the proxy's side of a client connection (accept state). */
    bool is_server;
    /* sl_tls_handshake() has returned SL_TLS_HS_DONE. */
    bool hs_done;
    /* sl_tls_feed_eof() was called. */
    bool eof_fed;
    /* close_notify was received. */
    bool peer_closed;
    /* sl_tls_shutdown() was called (writes are over), and whether close_notify is queued. */
    bool closing;
    bool close_queued;
    /* Server: progress of the SNI callback; only on_client_hello() and the certificate setters
     * change it. */
    enum sni_state sni_state;
    /* Server: the SNI callback and its argument (borrowed); NULL for none. */
    sl_tls_sni_fn *sni_fn;
    void *sni_arg;
    /* Server: the SNI the client sent, NUL-terminated; empty when none. */
    char sni[256];
    /* Server: the handshake was refused for its SNI by the engine itself: one holding a byte
     * outside printable ASCII (read_sni(): a name, but none a host can have), or a ClientHello
     * after a HelloRetryRequest naming another server than the first (on_client_hello()). */
    bool sni_refused;
    /* The negotiated ALPN protocol, NUL-terminated; empty when none. Both sides only ever
     * agree on "http/1.1" (our offer as a client, our only choice as a server). */
    char alpn[16];
    /* Client: the session cache key "host:port" ("[v6]:port"); NULL for server engines. */
    char *sess_key;
    /* OpenSSL's text for the last failure, ERR_TEXT_BYTES; NULL until the first failure (most
     * connections never need it, and an idle connection's memory is mostly its TLS state). */
    char *err_text;
    /* The alert description the peer failed the engine with, -1 for none (fail()). */
    int peer_alert;
};

/*
 * The session cache of a client context. It hangs off the SSL_CTX as ex_data, so it lives and
 * dies with the context; worker threads share it, hence the mutex.
 */
struct sess_entry {
    /* The cached session, one reference owned by the cache; NULL for a free slot. */
    SSL_SESSION *sess;
    /* Value of the cache clock at the last store or use (LRU order). */
    uint64_t used;
    /* FNV-1a hash of `key`, compared first. */
    uint64_t hash;
    /* "scope host:port", NUL-terminated (a host has no space, so the last one ends the scope). */
    char key[SESS_KEY_MAX];
};

struct sess_cache {
    /* Guards everything below but `cap`; held for table scans only, never across OpenSSL
     * calls that may block. */
    uv_mutex_t lock;
    /* Ticks on every store or use. Guarded by `lock`. */
    uint64_t clock;
    /* Slots in `entries`. */
    size_t cap;
    /* `cap` slots, owned. Guarded by `lock`. */
    struct sess_entry *entries;
};

/* ---- the engine's BIOs ------------------------------------------------------------------- */

static uv_once_t bio_once = UV_ONCE_INIT;
static BIO_METHOD *bio_method;

/* How far past the output cap sl_tls_read() still reads: one record sl_tls_write() may add on
 * top of the cap, with its header, padding and tag. */
#define READ_OUT_SLACK ((size_t)SL_TLS_WRITE_MAX + 256)

/* Appends n bytes; grows geometrically, moving what waits to the front first. */
static int cbuf_put(struct cbuf *b, const void *p, size_t n)
{
    if (b->off + b->len + n > b->cap) {
        if (b->off > 0) {
            memmove(b->p, b->p + b->off, b->len);
            b->off = 0;
        }
        if (b->len + n > b->cap) {
            size_t cap = b->cap < 1024 ? 1024 : b->cap;
            uint8_t *q;

            while (cap < b->len + n) {
                cap *= 2;
            }
            q = sl_realloc(b->p, cap);
            if (q == NULL) {
                return SL_ENOMEM;
            }
            b->p = q;
            b->cap = cap;
        }
    }
    memcpy(b->p + b->off + b->len, p, n);
    b->len += n;
    return 0;
}

/* Drops the first n waiting bytes; the memory goes once nothing waits. */
static void cbuf_take(struct cbuf *b, size_t n)
{
    SL_BUG_ON(n > b->len);
    b->off += n;
    b->len -= n;
    if (b->len == 0) {
        sl_free(b->p);
        *b = (struct cbuf){ 0 };
    }
}

static int bio_write_ex(BIO *bio, const char *data, size_t n, size_t *written)
{
    struct sl_tls *t = BIO_get_data(bio);

    BIO_clear_retry_flags(bio);
    if (cbuf_put(&t->out, data, n) < 0) {
        t->out_of_memory = true;
        *written = 0;
        return 0;
    }
    *written = n;
    return 1;
}

/* Empty input is "retry" until the transport ended (sl_tls_feed_eof()), then end of file. */
static int bio_read_ex(BIO *bio, char *data, size_t n, size_t *got)
{
    struct sl_tls *t = BIO_get_data(bio);

    BIO_clear_retry_flags(bio);
    *got = 0;
    if (t->in.len == 0) {
        if (!t->eof_fed) {
            BIO_set_retry_read(bio);
        }
        return 0;
    }
    if (n > t->in.len) {
        n = t->in.len;
    }
    memcpy(data, t->in.p + t->in.off, n);
    cbuf_take(&t->in, n);
    *got = n;
    return 1;
}

static long bio_ctrl(BIO *bio, int cmd, long num, void *ptr)
{
    struct sl_tls *t = BIO_get_data(bio);

    (void)num;
    (void)ptr;
    switch (cmd) {
    case BIO_CTRL_PENDING:
        return (long)t->in.len;
    case BIO_CTRL_WPENDING:
        return (long)t->out.len;
    case BIO_CTRL_EOF:
        return t->in.len == 0 && t->eof_fed;
    case BIO_CTRL_FLUSH:
        return 1;
    default:
        return 0;
    }
}

static int bio_create(BIO *bio)
{
    BIO_set_init(bio, 1);
    return 1;
}

static void init_bio_method(void)
{
    BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "sluice ciphertext");

    if (m != NULL
        && (BIO_meth_set_write_ex(m, bio_write_ex) != 1 || BIO_meth_set_read_ex(m, bio_read_ex) != 1
            || BIO_meth_set_ctrl(m, bio_ctrl) != 1 || BIO_meth_set_create(m, bio_create) != 1)) {
        BIO_meth_free(m);
        m = NULL;
    }
    bio_method = m;
}

static uv_once_t ex_once = UV_ONCE_INIT;
/* The SSL_CTX ex_data index of the session cache; -1 when OpenSSL refused one. */
static int ex_index = -1;

static size_t be16(const uint8_t *p)
{
    return ((size_t)p[0] << 8) | p[1];
}

/* The failure text's storage, allocated at the first failure; NULL when memory ran out (the
 * failure then has no text, and sl_tls_error() says ""). */
static char *err_buf(struct sl_tls *t)
{
    if (t->err_text == NULL) {
        t->err_text = sl_calloc(1, ERR_TEXT_BYTES);
    }
    return t->err_text;
}

static void set_err(struct sl_tls *t, const char *fmt, ...) SL_PRINTF(2, 3);

static void set_err(struct sl_tls *t, const char *fmt, ...)
{
    va_list ap;

    if (err_buf(t) == NULL) {
        return;
    }
    va_start(ap, fmt);
    (void)vsnprintf(t->err_text, ERR_TEXT_BYTES, fmt, ap);
    va_end(ap);
}

static void set_text(char *buf, size_t len, const char *what)
{
    unsigned long e = ERR_peek_error();

    if (buf == NULL || len == 0) {
        ERR_clear_error();
        return;
    }
    if (e != 0) {
        char detail[200];

        ERR_error_string_n(e, detail, sizeof(detail));
        (void)snprintf(buf, len, "%s: %s", what, detail);
    } else {
        (void)snprintf(buf, len, "%s", what);
    }
    ERR_clear_error();
}

static uint64_t hash_key(const char *s)
{
    uint64_t h = 14695981039346656037u;

    for (; *s != '\0'; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211u;
    }
    return h;
}

static void cache_free(struct sess_cache *c)
{
    if (c == NULL) {
        return;
    }
    for (size_t i = 0; i < c->cap; i++) {
        SSL_SESSION_free(c->entries[i].sess);
    }
    uv_mutex_destroy(&c->lock);
    sl_free(c->entries);
    sl_free(c);
}

static void on_ctx_ex_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl,
                           void *argp)
{
    (void)parent;
    (void)ad;
    (void)idx;
    (void)argl;
    (void)argp;
    cache_free(ptr);
}

static void init_ex_index(void)
{
    ex_index = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, on_ctx_ex_free);
}

static int cache_create(size_t cap, struct sess_cache **out)
{
    struct sess_cache *c = sl_calloc(1, sizeof(*c));

    if (c == NULL) {
        return SL_ENOMEM;
    }
    c->entries = sl_calloc(cap, sizeof(*c->entries));
    if (c->entries == NULL) {
        sl_free(c);
        return SL_ENOMEM;
    }
    c->cap = cap;
    if (uv_mutex_init(&c->lock) != 0) {
        sl_free(c->entries);
        sl_free(c);
        return SL_ENOMEM;
    }
    *out = c;
    return 0;
}

static struct sess_cache *cache_of(SSL_CTX *ctx)
{
    if (ex_index < 0 || ctx == NULL) {
        return NULL;
    }
    return SSL_CTX_get_ex_data(ctx, ex_index);
}

/* The slot holding `key`, or NULL. Call with the lock held. */
static struct sess_entry *cache_find(struct sess_cache *c, const char *key, uint64_t h)
{
    for (size_t i = 0; i < c->cap; i++) {
        struct sess_entry *e = &c->entries[i];

        if (e->sess != NULL && e->hash == h && strcmp(e->key, key) == 0) {
            return e;
        }
    }
    return NULL;
}

/* Stores a new reference to `sess` under `key`, replacing the key's old session or, when the
 * table is full, the least recently used one. */
static void cache_put(struct sess_cache *c, const char *key, SSL_SESSION *sess)
{
    uint64_t h = hash_key(key);
    SSL_SESSION *old = NULL;
    struct sess_entry *e;

    if (SSL_SESSION_up_ref(sess) != 1) {
        return;
    }
    uv_mutex_lock(&c->lock);
    e = cache_find(c, key, h);
    if (e == NULL) {
        e = &c->entries[0];
        for (size_t i = 0; i < c->cap && e->sess != NULL; i++) {
            if (c->entries[i].sess == NULL || c->entries[i].used < e->used) {
                e = &c->entries[i];
            }
        }
    }
    old = e->sess;
    e->sess = sess;
    e->used = ++c->clock;
    e->hash = h;
    (void)snprintf(e->key, sizeof(e->key), "%s", key);
    uv_mutex_unlock(&c->lock);
    SSL_SESSION_free(old);
}

static bool session_is_expired(const SSL_SESSION *s)
{
    long long born = SSL_SESSION_get_time(s);
    long long ttl = SSL_SESSION_get_timeout(s);

    return (long long)time(NULL) >= born + ttl;
}

/* Returns a new reference to the session cached for `key`, or NULL. A TLS 1.3 session leaves
 * the cache as it is taken: tickets are for one use (RFC 8446 §C.4), and the connection that
 * uses it receives fresh ones. */
static SSL_SESSION *cache_take(struct sess_cache *c, const char *key)
{
    uint64_t h = hash_key(key);
    SSL_SESSION *drop = NULL;
    SSL_SESSION *got = NULL;
    struct sess_entry *e;

    uv_mutex_lock(&c->lock);
    e = cache_find(c, key, h);
    if (e != NULL) {
        if (session_is_expired(e->sess) || !SSL_SESSION_is_resumable(e->sess)) {
            drop = e->sess;
            e->sess = NULL;
        } else if (SSL_SESSION_get_protocol_version(e->sess) >= TLS1_3_VERSION) {
            got = e->sess;
            e->sess = NULL;
        } else if (SSL_SESSION_up_ref(e->sess) == 1) {
            got = e->sess;
            e->used = ++c->clock;
        }
    }
    uv_mutex_unlock(&c->lock);
    SSL_SESSION_free(drop);
    return got;
}

static void cache_remove(struct sess_cache *c, const char *key)
{
    uint64_t h = hash_key(key);
    SSL_SESSION *drop = NULL;
    struct sess_entry *e;

    uv_mutex_lock(&c->lock);
    e = cache_find(c, key, h);
    if (e != NULL) {
        drop = e->sess;
        e->sess = NULL;
    }
    uv_mutex_unlock(&c->lock);
    SSL_SESSION_free(drop);
}

/* Runs on the client's thread when a session (TLS 1.2: at the end of a full handshake; TLS 1.3:
 * for each NewSessionTicket) becomes resumable. */
static int on_new_session(SSL *ssl, SSL_SESSION *sess)
{
    struct sl_tls *t = SSL_get_app_data(ssl);
    struct sess_cache *c = cache_of(SSL_get_SSL_CTX(ssl));

    if (t != NULL && c != NULL && t->sess_key != NULL && t->failed == 0) {
        cache_put(c, t->sess_key, sess);
    }
    /* 0: OpenSSL drops the reference it lent us; cache_put() took its own. */
    return 0;
}

int sl_tls_client_ctx_new(const char *extra_ca_file, size_t session_cache_max, SSL_CTX **out,
                          char *err, size_t errlen)
{
    struct sess_cache *cache = NULL;
    SSL_CTX *ctx = NULL;
    int rc = SL_ECRYPTO;

    if (session_cache_max == 0) {
        session_cache_max = SL_TLS_SESSION_CACHE_DEFAULT;
    }
    if (session_cache_max > SESSION_CACHE_MAX) {
        (void)snprintf(err, errlen, "session cache of %zu entries is over the limit of %u",
                       session_cache_max, SESSION_CACHE_MAX);
        return SL_EINVAL;
    }
    uv_once(&ex_once, init_ex_index);
    if (ex_index < 0) {
        set_text(err, errlen, "cannot get an SSL_CTX ex_data index");
        return SL_ECRYPTO;
    }
    ctx = SSL_CTX_new(TLS_client_method());
    if (ctx == NULL) {
        set_text(err, errlen, "cannot create the upstream TLS context");
        return SL_ECRYPTO;
    }
    if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1
        || SSL_CTX_set_ciphersuites(ctx, tls13_suites) != 1
        || SSL_CTX_set_alpn_protos(ctx, alpn_http11, sizeof(alpn_http11)) != 0) {
        set_text(err, errlen, "cannot configure the upstream TLS context");
        goto fail_ctx;
    }
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    /* docs/reference/proxy.md §4.4: at least 112-bit security (OpenSSL level 2) for every
     * upstream key and signature, whatever the host's OpenSSL defaults to. OpenSSL's own default
     * is level 1, where a 1024-bit RSA leaf passes; Debian builds raise it to 2, other builds
     * and an OPENSSL_CONF do not. A configuration that asks for more keeps its level. */
    if (SSL_CTX_get_security_level(ctx) < UPSTREAM_SECURITY_LEVEL) {
        SSL_CTX_set_security_level(ctx, UPSTREAM_SECURITY_LEVEL);
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
        set_text(err, errlen, "cannot use the system trust store");
        goto fail_ctx;
    }
    if (extra_ca_file != NULL && SSL_CTX_load_verify_file(ctx, extra_ca_file) != 1) {
        char what[300];

        (void)snprintf(what, sizeof(what), "cannot load CA certificates from %s", extra_ca_file);
        set_text(err, errlen, what);
        rc = SL_EIO;
        goto fail_ctx;
    }
    rc = cache_create(session_cache_max, &cache);
    if (rc < 0) {
        (void)snprintf(err, errlen, "cannot allocate the TLS session cache");
        goto fail_ctx;
    }
    if (SSL_CTX_set_ex_data(ctx, ex_index, cache) != 1) {
        set_text(err, errlen, "cannot attach the TLS session cache");
        rc = SL_ECRYPTO;
        goto fail_cache;
    }
    /* From here the context owns the cache (on_ctx_ex_free). */
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(ctx, on_new_session);
    *out = ctx;
    return 0;

fail_cache:
    cache_free(cache);
fail_ctx:
    SSL_CTX_free(ctx);
    return rc;
}

/* RFC 7301 §3.2: pick http/1.1 when the client offers it, else http/1.0 (the proxy speaks
 * both); a client that offers only protocols we do not speak (h2 alone) gets a fatal
 * no_application_protocol alert rather than a peer it did not ask for. OpenSSL does not call
 * this when the client sent no ALPN at all. */
static int on_alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                          const unsigned char *in, unsigned int inlen, void *arg)
{
    static const char http10[] = "http/1.0";
    const unsigned char *found10 = NULL;

    (void)ssl;
    (void)arg;
    for (unsigned int i = 0; i < inlen;) {
        unsigned int n = in[i];

        if (n == 0 || n > inlen - i - 1) {
            return SSL_TLSEXT_ERR_ALERT_FATAL;
        }
        if (n == sizeof(alpn_http11) - 1 && memcmp(in + i + 1, alpn_http11 + 1, n) == 0) {
            *out = in + i + 1;
            *outlen = (unsigned char)n;
            return SSL_TLSEXT_ERR_OK;
        }
        if (n == sizeof(http10) - 1 && memcmp(in + i + 1, http10, n) == 0) {
            found10 = in + i + 1;
        }
        i += 1 + n;
    }
    if (found10 != NULL) {
        *out = found10;
        *outlen = (unsigned char)(sizeof(http10) - 1);
        return SSL_TLSEXT_ERR_OK;
    }
    return SSL_TLSEXT_ERR_ALERT_FATAL;
}

/* Copies the host_name of the server_name extension (RFC 6066 §3) into t->sni. Like OpenSSL's
 * own parser, exactly one entry of type host_name is accepted. The name must be printable
 * ASCII: it ends up in logs and in policy lookups. Returns 0 (also when there is no SNI) or -1
 * with the alert in *al. */
static int read_sni(SSL *ssl, struct sl_tls *t, int *al)
{
    const unsigned char *p = NULL;
    size_t n = 0;
    size_t len;

    if (SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_server_name, &p, &n) != 1) {
        return 0;
    }
    if (n < 5 || be16(p) != n - 2 || p[2] != TLSEXT_NAMETYPE_host_name) {
        goto malformed;
    }
    len = be16(p + 3);
    if (len == 0 || len != n - 5 || len >= sizeof(t->sni)) {
        goto malformed;
    }
    for (size_t i = 0; i < len; i++) {
        if (p[5 + i] < 0x21 || p[5 + i] > 0x7e) {
            set_err(t, "SNI holds a non-printable byte");
            t->sni_refused = true;
            *al = SSL_AD_UNRECOGNIZED_NAME;
            return -1;
        }
    }
    memcpy(t->sni, p + 5, len);
    t->sni[len] = '\0';
    return 0;

malformed:
    set_err(t, "malformed server_name extension");
    *al = SSL_AD_DECODE_ERROR;
    return -1;
}

/* Whether the ClientHello's server_name extension holds exactly the SNI read from the first
 * (none when there was none). */
static bool sni_unchanged(SSL *ssl, const struct sl_tls *t)
{
    const unsigned char *p = NULL;
    size_t n = 0;
    size_t len = strlen(t->sni);

    if (SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_server_name, &p, &n) != 1) {
        return len == 0;
    }
    return len > 0 && n == len + 5 && be16(p) == n - 2 && p[2] == TLSEXT_NAMETYPE_host_name
           && be16(p + 3) == len && memcmp(p + 5, t->sni, len) == 0;
}

/* The ClientHello hook: runs before OpenSSL picks a certificate, again each time the handshake
 * resumes after SSL_CLIENT_HELLO_RETRY, and for the second ClientHello after a
 * HelloRetryRequest. */
static int on_client_hello(SSL *ssl, int *al, void *arg)
{
    struct sl_tls *t = SSL_get_app_data(ssl);

    (void)arg;
    if (t == NULL) {
        *al = SSL_AD_INTERNAL_ERROR;
        return SSL_CLIENT_HELLO_ERROR;
    }
    switch (t->sni_state) {
    case SNI_IDLE:
        break;
    case SNI_WAITING:
        return SSL_CLIENT_HELLO_RETRY;
    case SNI_DONE:
        /* The second ClientHello after a HelloRetryRequest must be the first but for its key
         * share, cookie, early data and padding (RFC 8446 §4.1.2): a server name changed there
         * would be one the SNI callback never judged. */
        if (!sni_unchanged(ssl, t)) {
            set_err(t, "the ClientHello after a HelloRetryRequest names another server");
            t->sni_refused = true;
            *al = SSL_AD_ILLEGAL_PARAMETER;
            return SSL_CLIENT_HELLO_ERROR;
        }
        return SSL_CLIENT_HELLO_SUCCESS;
    }
    if (read_sni(ssl, t, al) < 0) {
        return SSL_CLIENT_HELLO_ERROR;
    }
    if (t->sni_fn == NULL) {
        t->sni_state = SNI_DONE;
        return SSL_CLIENT_HELLO_SUCCESS;
    }
    switch (t->sni_fn(t, t->sni[0] != '\0' ? t->sni : NULL, t->sni_arg)) {
    case SL_TLS_SNI_OK:
        t->sni_state = SNI_DONE;
        return SSL_CLIENT_HELLO_SUCCESS;
    case SL_TLS_SNI_RETRY:
        t->sni_state = SNI_WAITING;
        return SSL_CLIENT_HELLO_RETRY;
    case SL_TLS_SNI_REFUSE:
        break;
    }
    set_err(t, "server name refused");
    *al = SSL_AD_UNRECOGNIZED_NAME;
    return SSL_CLIENT_HELLO_ERROR;
}

int sl_tls_server_ctx_configure(SSL_CTX *ctx)
{
    SL_ENSURE(ctx != NULL, SL_EINVAL);
    /* One session ticket per full handshake instead of OpenSSL's two: each is a serialised,
     * encrypted and MACed session (7 % of a handshake's instructions for the pair), and a
     * client resumes with one. */
    if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1
        || SSL_CTX_set_ciphersuites(ctx, tls13_suites) != 1
        || SSL_CTX_set_cipher_list(ctx, tls12_server_suites) != 1
        || SSL_CTX_set_num_tickets(ctx, 1) != 1) {
        ERR_clear_error();
        return SL_ECRYPTO;
    }
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION
                                     | SSL_OP_CIPHER_SERVER_PREFERENCE);
    /* The chain sent is the leaf alone, as the proxy's clients trust its CA directly. Without
     * NO_AUTO_CHAIN OpenSSL would try to build a chain for every handshake from the context's
     * (empty) trust store, to the same result. */
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS | SSL_MODE_NO_AUTO_CHAIN);
    SSL_CTX_set_alpn_select_cb(ctx, on_alpn_select, NULL);
    SSL_CTX_set_client_hello_cb(ctx, on_client_hello, NULL);
    return 0;
}

int sl_tls_server_ctx_new(SSL_CTX **out, char *err, size_t errlen)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());

    if (ctx == NULL) {
        set_text(err, errlen, "cannot create the client-facing TLS context");
        return SL_ECRYPTO;
    }
    if (sl_tls_server_ctx_configure(ctx) < 0) {
        set_text(err, errlen, "cannot configure the client-facing TLS context");
        SSL_CTX_free(ctx);
        return SL_ECRYPTO;
    }
    *out = ctx;
    return 0;
}

static int engine_create(SSL_CTX *ctx, bool is_server, size_t out_cap, struct sl_tls **out)
{
    struct sl_tls *t;

    if (out_cap == 0) {
        out_cap = SL_TLS_OUT_CAP_DEFAULT;
    }
    SL_ENSURE(ctx != NULL && out_cap <= SL_TLS_OUT_CAP_MAX, SL_EINVAL);
    t = sl_calloc(1, sizeof(*t));
    if (t == NULL) {
        return SL_ENOMEM;
    }
    t->is_server = is_server;
    t->out_cap = out_cap;
    t->peer_alert = -1;
    t->ssl = SSL_new(ctx);
    if (t->ssl == NULL) {
        goto fail_free;
    }
    uv_once(&bio_once, init_bio_method);
    if (bio_method == NULL) {
        goto fail_ssl;
    }
    /* One BIO for both directions: SSL_set_bio() takes the single reference. */
    t->bio = BIO_new(bio_method);
    if (t->bio == NULL) {
        goto fail_ssl;
    }
    BIO_set_data(t->bio, t);
    SSL_set_bio(t->ssl, t->bio, t->bio);
    if (SSL_set_app_data(t->ssl, t) != 1) {
        goto fail_ssl;
    }
    if (is_server) {
        SSL_set_accept_state(t->ssl);
    } else {
        SSL_set_connect_state(t->ssl);
    }
    *out = t;
    return 0;

fail_ssl:
    SSL_free(t->ssl);
fail_free:
    sl_free(t);
    ERR_clear_error();
    return SL_ECRYPTO;
}

int sl_tls_create_server(SSL_CTX *ctx, size_t out_cap_bytes, struct sl_tls **out)
{
    return engine_create(ctx, true, out_cap_bytes, out);
}

/* True when `host` is a literal of the family that `host_is_ip` claims, or a plausible name. */
static bool host_is_consistent(const char *host, bool host_is_ip)
{
    unsigned char addr[16];
    size_t n = strlen(host);
    bool is_ip;

    if (n == 0 || n > SL_TLS_HOST_MAX) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (host[i] < 0x21 || host[i] > 0x7e) {
            return false;
        }
    }
    is_ip = inet_pton(AF_INET, host, addr) == 1 || inet_pton(AF_INET6, host, addr) == 1;
    return is_ip == host_is_ip;
}

int sl_tls_create_client(SSL_CTX *ctx, const char *host, bool host_is_ip, uint16_t port,
                         const char *scope, size_t out_cap_bytes, struct sl_tls **out)
{
    struct sess_cache *cache;
    SSL_SESSION *sess = NULL;
    struct sl_tls *t = NULL;
    int rc;

    if (scope == NULL) {
        scope = "";
    }
    SL_ENSURE(host != NULL && port != 0 && host_is_consistent(host, host_is_ip), SL_EINVAL);
    SL_ENSURE(strlen(scope) <= SL_TLS_SCOPE_MAX, SL_EINVAL);
    SL_TRY(engine_create(ctx, false, out_cap_bytes, &t));
    t->sess_key = sl_malloc(SESS_KEY_MAX);
    if (t->sess_key == NULL) {
        sl_tls_destroy(t);
        return SL_ENOMEM;
    }
    if (strchr(host, ':') != NULL) {
        (void)snprintf(t->sess_key, SESS_KEY_MAX, "%s [%s]:%u", scope, host, (unsigned)port);
    } else {
        (void)snprintf(t->sess_key, SESS_KEY_MAX, "%s %s:%u", scope, host, (unsigned)port);
    }
    SSL_set_verify(t->ssl, SSL_VERIFY_PEER, NULL);
    if (host_is_ip) {
        /* RFC 6066 §3: literal IPv4 and IPv6 addresses are not permitted in SNI. */
        if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(t->ssl), host) != 1) {
            goto fail_engine;
        }
    } else {
        /* A mutable copy: the SSL_set_tlsext_host_name() macro casts its argument to void *. */
        char name[SL_TLS_HOST_MAX + 1];

        (void)snprintf(name, sizeof(name), "%s", host);
        if (SSL_set_tlsext_host_name(t->ssl, name) != 1 || SSL_set1_host(t->ssl, host) != 1) {
            goto fail_engine;
        }
        /* RFC 6125 §6.4.4 lets a client fall back to the subject CN when the certificate has
         * no DNS name; OpenSSL does by default. The CA/Browser Forum rules require SANs, and a
         * CN is not constrained the way a SAN is, so the CN is never used. */
        SSL_set_hostflags(t->ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS
                                          | X509_CHECK_FLAG_NEVER_CHECK_SUBJECT);
    }
    cache = cache_of(ctx);
    if (cache != NULL) {
        sess = cache_take(cache, t->sess_key);
    }
    if (sess != NULL) {
        rc = SSL_set_session(t->ssl, sess);
        SSL_SESSION_free(sess);
        if (rc != 1) {
            /* Not fatal: the handshake simply runs in full. */
            ERR_clear_error();
        }
    }
    *out = t;
    return 0;

fail_engine:
    sl_tls_destroy(t);
    ERR_clear_error();
    return SL_ECRYPTO;
}

void sl_tls_destroy(struct sl_tls *t)
{
    if (t == NULL) {
        return;
    }
    /* SSL_free() marks the session of a connection that was not shut down as not resumable,
     * an SSL 3.0 rule that TLS 1.1 dropped (RFC 5246 §7.2.1). Keep healthy sessions usable. */
    if (t->hs_done && t->failed == 0) {
        SSL_set_shutdown(t->ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
    }
    SSL_free(t->ssl);
    sl_free(t->in.p);
    sl_free(t->out.p);
    sl_free(t->sess_key);
    sl_free(t->err_text);
    sl_free(t);
}

void sl_tls_set_sni_fn(struct sl_tls *t, sl_tls_sni_fn *fn, void *arg)
{
    t->sni_fn = fn;
    t->sni_arg = arg;
}

int sl_tls_set_certificate(struct sl_tls *t, X509 *leaf, EVP_PKEY *key)
{
    unsigned char id[EVP_MAX_MD_SIZE];
    unsigned int idlen = 0;

    SL_ENSURE(t != NULL && leaf != NULL && key != NULL, SL_EINVAL);
    SL_ENSURE(t->is_server && t->failed == 0 && !t->hs_done, SL_EINVAL);
    ERR_clear_error();
    /* SSL_use_cert_and_key() refuses a key that does not match the certificate; one call rather
     * than SSL_use_certificate() and SSL_use_PrivateKey() looks the key type up once (14 k
     * instructions less per handshake, a third of what setting the leaf cost). The session ID
     * context is the certificate's fingerprint (SHA-1, which X509 caches): a session, or a
     * ticket, issued under one certificate is never resumed under another, so a client cannot
     * carry a session from one intercepted host to the next. */
    if (SSL_use_cert_and_key(t->ssl, leaf, key, NULL, 1) != 1
        || X509_digest(leaf, EVP_sha1(), id, &idlen) != 1 || idlen > SSL_MAX_SID_CTX_LENGTH
        || SSL_set_session_id_context(t->ssl, id, idlen) != 1) {
        if (err_buf(t) != NULL) {
            set_text(t->err_text, ERR_TEXT_BYTES, "cannot use the certificate");
        }
        return SL_ECRYPTO;
    }
    if (t->sni_state == SNI_WAITING) {
        t->sni_state = SNI_DONE;
    }
    return 0;
}

/* Records the failure behind `ssl_err` and returns its code: UV_ECONNRESET when the transport
 * ended without close_notify, SL_ECRYPTO for everything else. */
static int fail(struct sl_tls *t, int ssl_err)
{
    unsigned long e = ERR_peek_error();
    int rc = SL_ECRYPTO;

    if ((ssl_err == SSL_ERROR_SYSCALL && e == 0)
        || (ssl_err == SSL_ERROR_SSL && ERR_GET_LIB(e) == ERR_LIB_SSL
            && ERR_GET_REASON(e) == SSL_R_UNEXPECTED_EOF_WHILE_READING)) {
        rc = UV_ECONNRESET;
    }
    if (t->out_of_memory) {
        rc = SL_ENOMEM;
    }
    /* OpenSSL gives a fatal alert received from the peer the reason SSL_AD_REASON_OFFSET plus
     * the alert's description. */
    if (ssl_err == SSL_ERROR_SSL && ERR_GET_LIB(e) == ERR_LIB_SSL
        && ERR_GET_REASON(e) >= SSL_AD_REASON_OFFSET
        && ERR_GET_REASON(e) < SSL_AD_REASON_OFFSET + 256) {
        t->peer_alert = ERR_GET_REASON(e) - SSL_AD_REASON_OFFSET;
    }
    if (t->err_text == NULL || t->err_text[0] == '\0') {
        if (e != 0) {
            if (err_buf(t) != NULL) {
                ERR_error_string_n(e, t->err_text, ERR_TEXT_BYTES);
            }
        } else if (rc == SL_ENOMEM) {
            set_err(t, "out of memory for the TLS output");
        } else if (rc == UV_ECONNRESET) {
            set_err(t, "the peer closed the connection without close_notify");
        } else {
            set_err(t, "TLS failure (SSL_get_error %d)", ssl_err);
        }
    }
    ERR_clear_error();
    t->failed = rc;
    if (!t->is_server) {
        struct sess_cache *c = cache_of(SSL_get_SSL_CTX(t->ssl));

        if (c != NULL && t->sess_key != NULL) {
            cache_remove(c, t->sess_key);
        }
    }
    return rc;
}

/* SSL_get_error() needs an empty error queue before the call it explains. Peeking first is
 * cheaper than clearing: ERR_clear_error() resets every slot of the queue even when it is
 * empty, and handshake steps, reads and writes run several times per connection. */
static void clear_errors(void)
{
    if (ERR_peek_error() != 0) {
        ERR_clear_error();
    }
}

static void on_handshake_done(struct sl_tls *t)
{
    const unsigned char *p = NULL;
    unsigned int n = 0;

    t->hs_done = true;
    SSL_get0_alpn_selected(t->ssl, &p, &n);
    if (p != NULL && n > 0 && n < sizeof(t->alpn)) {
        memcpy(t->alpn, p, n);
        t->alpn[n] = '\0';
    }
}

int sl_tls_handshake(struct sl_tls *t)
{
    int r;
    int e;

    if (t->failed != 0) {
        return t->failed;
    }
    if (t->hs_done) {
        return SL_TLS_HS_DONE;
    }
    if (t->sni_state == SNI_WAITING) {
        return SL_TLS_HS_WANT_CERT;
    }
    clear_errors();
    r = SSL_do_handshake(t->ssl);
    if (r == 1) {
        on_handshake_done(t);
        return SL_TLS_HS_DONE;
    }
    e = SSL_get_error(t->ssl, r);
    switch (e) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
        return SL_TLS_HS_WANT_IO;
    case SSL_ERROR_WANT_CLIENT_HELLO_CB:
        return SL_TLS_HS_WANT_CERT;
    case SSL_ERROR_ZERO_RETURN:
        set_err(t, "close_notify during the handshake");
        return fail(t, e);
    case SSL_ERROR_SYSCALL:
    case SSL_ERROR_SSL:
    default:
        return fail(t, e);
    }
}

int sl_tls_feed(struct sl_tls *t, const uint8_t *p, size_t n)
{
    size_t held;
    int r;

    if (t->failed != 0) {
        return t->failed;
    }
    SL_ENSURE(!t->eof_fed, SL_EINVAL);
    held = t->in.len;
    if (n == 0 || held >= SL_TLS_IN_RING_BYTES) {
        return 0; /* Nothing to take, or the input is full. */
    }
    if (n > SL_TLS_IN_RING_BYTES - held) {
        n = SL_TLS_IN_RING_BYTES - held;
    }
    r = cbuf_put(&t->in, p, n);
    return r < 0 ? r : (int)n;
}

void sl_tls_feed_eof(struct sl_tls *t)
{
    if (!t->eof_fed) {
        /* Once what was fed is read, the input reads as the end of the transport. */
        t->eof_fed = true;
    }
}

struct sl_slice sl_tls_out_peek(struct sl_tls *t)
{
    if (t->out.len == 0) {
        return (struct sl_slice){ NULL, 0 };
    }
    return sl_slice_of(t->out.p + t->out.off, t->out.len);
}

void sl_tls_out_ack(struct sl_tls *t, size_t n)
{
    /* Acknowledging bytes that were never peeked would drop ciphertext from the stream. */
    SL_BUG_ON(n > t->out.len);
    if (n > 0) {
        cbuf_take(&t->out, n);
    }
}

size_t sl_tls_out_copy(struct sl_tls *t, uint8_t *buf, size_t cap)
{
    size_t n = t->out.len < cap ? t->out.len : cap;

    if (n > 0) {
        memcpy(buf, t->out.p + t->out.off, n);
        cbuf_take(&t->out, n);
    }
    return n;
}

size_t sl_tls_out_pending(const struct sl_tls *t)
{
    return t->out.len;
}

int sl_tls_read(struct sl_tls *t, uint8_t *buf, size_t cap)
{
    size_t got = 0;
    int r;
    int e;

    if (t->failed != 0) {
        return t->failed;
    }
    if (t->peer_closed) {
        return UV_EOF;
    }
    SL_ENSURE(t->hs_done && buf != NULL && cap > 0, SL_EINVAL);
    /* With nothing fed and nothing buffered, SSL_read_ex could only say "want read", after
     * allocating its 16 KiB read buffer and (SSL_MODE_RELEASE_BUFFERS) freeing it again: every
     * wake-up of a quiet connection would cost a malloc/free pair. */
    if (t->in.len == 0 && SSL_has_pending(t->ssl) == 0) {
        if (!t->eof_fed) {
            return 0;
        }
        /* The transport ended at a record boundary without close_notify: the input is cut
         * short, but nothing we send is lost yet. A client that sends its request and shuts
         * its socket's sending side without closing its TLS session still reads the answer,
         * so the engine is not failed (OpenSSL's SSL_read would make it so): writing goes on.
         * A record cut in the middle still reaches SSL_read_ex and fails the engine. */
        if (t->err_text == NULL || t->err_text[0] == '\0') {
            set_err(t, "the peer closed the connection without close_notify");
        }
        return UV_ECONNRESET;
    }
    /* A read makes output of its own: a KeyUpdate reply to every KeyUpdate that asks for one
     * (TLS 1.3), an alert. A peer that sends such requests and reads nothing would grow the
     * output without bound, a few bytes for a few bytes, so nothing is read while more waits
     * than writes alone can leave there (the cap and one record): reading goes on once the
     * peer has taken some. */
    if (t->out.len >= t->out_cap + READ_OUT_SLACK) {
        return 0;
    }
    clear_errors();
    r = SSL_read_ex(t->ssl, buf, cap > INT_MAX ? INT_MAX : cap, &got);
    if (r == 1) {
        return (int)got;
    }
    e = SSL_get_error(t->ssl, r);
    switch (e) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
        return 0;
    case SSL_ERROR_ZERO_RETURN:
        t->peer_closed = true;
        return UV_EOF;
    case SSL_ERROR_SYSCALL:
    case SSL_ERROR_SSL:
    default:
        return fail(t, e);
    }
}

int sl_tls_write(struct sl_tls *t, const uint8_t *p, size_t n)
{
    size_t pending;
    size_t written = 0;
    int r;
    int e;

    if (t->failed != 0) {
        return t->failed;
    }
    SL_ENSURE(t->hs_done && !t->closing, SL_EINVAL);
    pending = sl_tls_out_pending(t);
    if (n == 0 || pending >= t->out_cap) {
        return 0;
    }
    if (n > SL_TLS_WRITE_MAX) {
        n = SL_TLS_WRITE_MAX;
    }
    if (n > t->out_cap - pending) {
        n = t->out_cap - pending;
    }
    clear_errors();
    r = SSL_write_ex(t->ssl, p, n, &written);
    if (r == 1) {
        return (int)written;
    }
    e = SSL_get_error(t->ssl, r);
    switch (e) {
    case SSL_ERROR_WANT_WRITE:
    case SSL_ERROR_WANT_READ:
        /* A memory BIO takes every write, and renegotiation is off: this cannot happen. If it
         * does, OpenSSL holds a half-written record, and the stream cannot go on safely. */
        set_err(t, "TLS write could not complete");
        return fail(t, e);
    case SSL_ERROR_ZERO_RETURN:
    case SSL_ERROR_SYSCALL:
    case SSL_ERROR_SSL:
    default:
        return fail(t, e);
    }
}

int sl_tls_shutdown(struct sl_tls *t)
{
    int r;
    int e;

    if (t->failed != 0) {
        return t->failed;
    }
    SL_ENSURE(t->hs_done, SL_EINVAL);
    if (t->close_queued) {
        return 1;
    }
    t->closing = true;
    ERR_clear_error();
    r = SSL_shutdown(t->ssl);
    if (r >= 0) {
        t->close_queued = true;
        return 1;
    }
    e = SSL_get_error(t->ssl, r);
    switch (e) {
    case SSL_ERROR_WANT_WRITE:
        return 0;
    case SSL_ERROR_WANT_READ:
        /* Sent; OpenSSL would now wait for the peer's close_notify, which sl_tls_read() sees. */
        t->close_queued = true;
        return 1;
    case SSL_ERROR_SYSCALL:
    case SSL_ERROR_SSL:
    default:
        return fail(t, e);
    }
}

bool sl_tls_is_server(const struct sl_tls *t)
{
    return t->is_server;
}

bool sl_tls_is_handshake_done(const struct sl_tls *t)
{
    return t->hs_done;
}

bool sl_tls_is_session_reused(const struct sl_tls *t)
{
    return t->hs_done && SSL_session_reused(t->ssl) == 1;
}

bool sl_tls_is_failed(const struct sl_tls *t)
{
    return t->failed != 0;
}

const char *sl_tls_alpn(const struct sl_tls *t)
{
    return t->alpn[0] != '\0' ? t->alpn : NULL;
}

bool sl_tls_sni_refused(const struct sl_tls *t)
{
    return t->sni_refused;
}

const char *sl_tls_sni(const struct sl_tls *t)
{
    return t->sni[0] != '\0' ? t->sni : NULL;
}

const char *sl_tls_verify_error(const struct sl_tls *t)
{
    return X509_verify_cert_error_string(SSL_get_verify_result(t->ssl));
}

int sl_tls_peer_alert(const struct sl_tls *t)
{
    return t->peer_alert;
}

const char *sl_tls_error_text(const struct sl_tls *t)
{
    return t->err_text != NULL ? t->err_text : "";
}

static bool is_tchar(uint8_t c)
{
    /* RFC 9110 §5.6.2: tchar. */
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
        return true;
    }
    return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

enum sl_tls_sniff_result sl_tls_sniff(const uint8_t *p, size_t n)
{
    if (n == 0) {
        return SL_TLS_SNIFF_NEED_MORE;
    }
    if (p[0] == 0x16) {
        /* RFC 8446 §5.1: handshake(22), legacy_record_version 3.x, a length that fits one
         * plaintext fragment and holds a handshake header, then msg_type client_hello(1). */
        if (n < 2) {
            return SL_TLS_SNIFF_NEED_MORE;
        }
        if (p[1] != 3) {
            return SL_TLS_SNIFF_OTHER;
        }
        if (n < 3) {
            return SL_TLS_SNIFF_NEED_MORE;
        }
        if (p[2] > 4) {
            return SL_TLS_SNIFF_OTHER;
        }
        if (n < 5) {
            return SL_TLS_SNIFF_NEED_MORE;
        }
        if (be16(p + 3) < 4 || be16(p + 3) > TLS_PLAINTEXT_MAX) {
            return SL_TLS_SNIFF_OTHER;
        }
        if (n < 6) {
            return SL_TLS_SNIFF_NEED_MORE;
        }
        return p[5] == 1 ? SL_TLS_SNIFF_TLS : SL_TLS_SNIFF_OTHER;
    }
    for (size_t i = 0; i <= SNIFF_METHOD_MAX; i++) {
        if (i == n) {
            return SL_TLS_SNIFF_NEED_MORE;
        }
        if (p[i] == ' ') {
            return i > 0 ? SL_TLS_SNIFF_HTTP : SL_TLS_SNIFF_OTHER;
        }
        if (!is_tchar(p[i])) {
            return SL_TLS_SNIFF_OTHER;
        }
    }
    return SL_TLS_SNIFF_OTHER;
}

/*
 * Passthrough tunnels: the records around the hellos.
 */

/* Largest record body sl_tls_record_head() takes: a TLS 1.2 TLSCiphertext (RFC 5246 §6.2.3). */
#define TLS_RECORD_BODY_MAX (TLS_PLAINTEXT_MAX + 2048u)
/* RFC 8446 §4: handshake message types. */
#define HS_SERVER_HELLO 2u
/* Handshake header (type, 24-bit length), legacy_version and random: what tells a
 * HelloRetryRequest from a ServerHello. */
#define HELLO_RANDOM_END 38u

/* RFC 8446 §4.1.3: a HelloRetryRequest is a ServerHello with this random, the SHA-256 of
 * "HelloRetryRequest". */
static const uint8_t hrr_random[32] = {
    0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91,
    0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
};

int sl_tls_record_head(const uint8_t *p, size_t n, uint8_t *type, size_t *len)
{
    if (n >= 2 && p[1] != 3) {
        return SL_EINVAL;
    }
    if (n < 5) {
        return 0;
    }
    if (be16(p + 3) > TLS_RECORD_BODY_MAX) {
        return SL_EINVAL;
    }
    *type = p[0];
    *len = be16(p + 3);
    return 1;
}

int sl_tls_hello_span(const uint8_t *p, size_t n, size_t *span)
{
    size_t off = 0;
    /* Handshake bytes seen, and the message's length with its header once known. */
    size_t got = 0;
    size_t want = 0;
    uint8_t hdr[4];

    for (;;) {
        uint8_t type;
        size_t len;
        int rc = sl_tls_record_head(p + off, n - off, &type, &len);

        if (rc <= 0) {
            return rc;
        }
        if (type != SL_TLS_CT_HANDSHAKE || len == 0 || len > TLS_PLAINTEXT_MAX) {
            return SL_EINVAL;
        }
        /* The message's header may itself be split over records. */
        for (size_t i = 0; got + i < 4 && i < len; i++) {
            if (off + 5 + i >= n) {
                return 0;
            }
            hdr[got + i] = p[off + 5 + i];
        }
        got += len;
        if (want == 0 && got >= 4) {
            want = 4 + (((size_t)hdr[1] << 16) | ((size_t)hdr[2] << 8) | hdr[3]);
        }
        if (n - off - 5 < len) {
            return 0;
        }
        off += 5 + len;
        if (want != 0 && got >= want) {
            if (got != want) {
                return SL_EINVAL;
            }
            *span = off;
            return 1;
        }
    }
}

/* The verdict on the first handshake message's first `w->msg_len` bytes. */
static enum sl_tls_watch_verdict judge_server_hello(const struct sl_tls_server_watch *w)
{
    if (w->msg_len >= 1 && w->msg[0] != HS_SERVER_HELLO) {
        return SL_TLS_WATCH_OTHER;
    }
    if (w->msg_len >= 4
        && (((size_t)w->msg[1] << 16) | ((size_t)w->msg[2] << 8) | w->msg[3])
                   < HELLO_RANDOM_END - 4) {
        return SL_TLS_WATCH_OTHER;
    }
    if (w->msg_len < HELLO_RANDOM_END) {
        return SL_TLS_WATCH_MORE;
    }
    return memcmp(w->msg + 6, hrr_random, sizeof(hrr_random)) == 0 ? SL_TLS_WATCH_HRR
                                                                   : SL_TLS_WATCH_OTHER;
}

enum sl_tls_watch_verdict sl_tls_watch_server(struct sl_tls_server_watch *w, const uint8_t *p,
                                              size_t n)
{
    size_t i = 0;

    while (i < n) {
        size_t take;

        if (w->head_len < sizeof(w->head)) {
            uint8_t type;
            size_t len;

            w->head[w->head_len++] = p[i++];
            switch (sl_tls_record_head(w->head, w->head_len, &type, &len)) {
            case 0:
                continue;
            case 1:
                break;
            default:
                return SL_TLS_WATCH_OTHER;
            }
            if (type != SL_TLS_CT_HANDSHAKE && w->msg_len > 0) {
                /* Another record inside the first handshake message. */
                return SL_TLS_WATCH_OTHER;
            }
            w->left = (uint16_t)len;
            if (len == 0) {
                w->head_len = 0;
            }
            continue;
        }
        take = n - i < w->left ? n - i : w->left;
        if (w->head[0] == SL_TLS_CT_HANDSHAKE) {
            size_t k = sizeof(w->msg) - w->msg_len;
            enum sl_tls_watch_verdict v;

            k = take < k ? take : k;
            memcpy(w->msg + w->msg_len, p + i, k);
            w->msg_len = (uint8_t)(w->msg_len + k);
            v = judge_server_hello(w);
            if (v != SL_TLS_WATCH_MORE) {
                return v;
            }
        }
        i += take;
        w->left = (uint16_t)(w->left - take);
        if (w->left == 0) {
            w->head_len = 0;
        }
    }
    return SL_TLS_WATCH_MORE;
}
