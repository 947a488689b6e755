/* SPDX-License-Identifier: Apache-2.0 */
#include "certs/ca.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include "base/file.h"
#include "base/mem.h"
#include "certs/certs_int.h"

/* Two days back: clients with a lagging clock still accept the CA, and leaves, which start one
 * day back, fit inside it. */
#define CA_BACKDATE_DAYS 2
/* Ten years, leap days included. */
#define CA_LIFETIME_DAYS 3652
/* Big enough for any path we accept; longer ones are refused rather than cut. */
#define PATH_BYTES 4096

struct sl_ca {
    /* The CA certificate; owned. Never NULL once built. */
    X509 *cert;
    /* Its private key; owned. NULL when loaded from the certificate alone. */
    EVP_PKEY *key;
};

void sl__certs_seterr(char *err, size_t errlen, const char *fmt, ...)
{
    unsigned long e = ERR_peek_last_error();
    va_list ap;
    int n;

    if (errlen > 0) {
        va_start(ap, fmt);
        n = vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
        if (n < 0) {
            err[0] = '\0';
        } else if ((size_t)n < errlen && e != 0) {
            const char *reason = ERR_reason_error_string(e);

            (void)snprintf(err + n, errlen - (size_t)n, " (openssl: %s)",
                           reason != NULL ? reason : "unknown error");
        }
    }
    ERR_clear_error();
}

EVP_PKEY *sl__certs_gen_p256(void)
{
    return EVP_EC_gen("P-256");
}

int sl__certs_set_serial(X509 *x)
{
    unsigned char raw[16];
    BIGNUM *bn;
    int rc = SL_ECRYPTO;

    if (RAND_bytes(raw, (int)sizeof(raw)) != 1) {
        return SL_ECRYPTO;
    }
    bn = BN_bin2bn(raw, (int)sizeof(raw), NULL);
    if (bn == NULL) {
        return SL_ECRYPTO;
    }
    /* A serial must be positive (RFC 5280 §4.1.2.2); BN_bin2bn never makes a negative one. */
    if (BN_is_zero(bn) && BN_one(bn) != 1) {
        goto out;
    }
    if (BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) != NULL) {
        rc = 0;
    }
out:
    BN_free(bn);
    return rc;
}

int sl__certs_add_ext(X509 *issuer, X509 *x, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509_EXTENSION *ext;
    int ok;

    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
    ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    if (ext == NULL) {
        return SL_ECRYPTO;
    }
    ok = X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
    return ok == 1 ? 0 : SL_ECRYPTO;
}

static int build_ca_cert(X509 *x, EVP_PKEY *key, const char *what, time_t now)
{
    unsigned char tag[4];
    char cn[64];
    X509_NAME *name = X509_get_subject_name(x);
    int n;

    SL_ENSURE(RAND_bytes(tag, (int)sizeof(tag)) == 1, SL_ECRYPTO);
    n = snprintf(cn, sizeof(cn), "sluice %s CA %02x%02x%02x%02x", what, tag[0], tag[1], tag[2],
                 tag[3]);
    SL_ENSURE(n > 0 && (size_t)n < sizeof(cn), SL_ECRYPTO);

    SL_ENSURE(X509_set_version(x, X509_VERSION_3) == 1, SL_ECRYPTO);
    SL_TRY(sl__certs_set_serial(x));
    SL_ENSURE(X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, (const unsigned char *)"sluice",
                                         -1, -1, 0)
                      == 1,
              SL_ECRYPTO);
    SL_ENSURE(X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1,
                                         -1, 0)
                      == 1,
              SL_ECRYPTO);
    SL_ENSURE(X509_set_issuer_name(x, name) == 1, SL_ECRYPTO);
    SL_ENSURE(X509_time_adj_ex(X509_getm_notBefore(x), -CA_BACKDATE_DAYS, 0, &now) != NULL,
              SL_ECRYPTO);
    SL_ENSURE(X509_time_adj_ex(X509_getm_notAfter(x), CA_LIFETIME_DAYS, 0, &now) != NULL,
              SL_ECRYPTO);
    SL_ENSURE(X509_set_pubkey(x, key) == 1, SL_ECRYPTO);
    SL_TRY(sl__certs_add_ext(x, x, NID_basic_constraints, "critical,CA:TRUE,pathlen:0"));
    SL_TRY(sl__certs_add_ext(x, x, NID_key_usage, "critical,keyCertSign,cRLSign"));
    /* The subject key identifier goes first: the authority key identifier copies it. */
    SL_TRY(sl__certs_add_ext(x, x, NID_subject_key_identifier, "hash"));
    SL_TRY(sl__certs_add_ext(x, x, NID_authority_key_identifier, "keyid:always"));
    SL_ENSURE(X509_sign(x, key, EVP_sha256()) > 0, SL_ECRYPTO);
    return 0;
}

int sl_ca_create(struct sl_ca **out, char *err, size_t errlen)
{
    return sl__certs_ca_create("interception", out, err, errlen);
}

int sl__certs_ca_create(const char *what, struct sl_ca **out, char *err, size_t errlen)
{
    struct sl_ca *ca;
    int rc;

    ca = sl_calloc(1, sizeof(*ca));
    if (ca == NULL) {
        sl__certs_seterr(err, errlen, "cannot create the CA: out of memory");
        return SL_ENOMEM;
    }
    ERR_clear_error();
    ca->key = sl__certs_gen_p256();
    if (ca->key == NULL) {
        sl__certs_seterr(err, errlen, "cannot generate the CA key");
        rc = SL_ECRYPTO;
        goto fail;
    }
    ca->cert = X509_new();
    if (ca->cert == NULL) {
        sl__certs_seterr(err, errlen, "cannot create the CA certificate: out of memory");
        rc = SL_ENOMEM;
        goto fail;
    }
    rc = build_ca_cert(ca->cert, ca->key, what, time(NULL));
    if (rc < 0) {
        sl__certs_seterr(err, errlen, "cannot build the CA certificate");
        goto fail;
    }
    *out = ca;
    return 0;
fail:
    sl_ca_destroy(ca);
    return rc;
}

void sl_ca_destroy(struct sl_ca *ca)
{
    if (ca == NULL) {
        return;
    }
    X509_free(ca->cert);
    EVP_PKEY_free(ca->key);
    sl_free(ca);
}

X509 *sl_ca_cert(const struct sl_ca *ca)
{
    return ca->cert;
}

EVP_PKEY *sl_ca_key(const struct sl_ca *ca)
{
    return ca->key;
}

/* Reads the whole regular file `path` into `b` (capped at SL_CA_FILE_MAX_BYTES). */
static int read_file(const char *path, struct sl_buf *b, char *err, size_t errlen)
{
    int rc = sl_file_read(path, b, err, errlen);

    if (rc == SL_ETOOBIG) {
        sl__certs_seterr(err, errlen, "%s: larger than %zu bytes, not a CA file", path,
                         SL_CA_FILE_MAX_BYTES);
    }
    return rc == SL_ENOTFOUND ? SL_EIO : rc;
}

/* OpenSSL's default would prompt on the terminal for the password of an encrypted key. */
static int no_password(char *buf, int size, int rwflag, void *arg)
{
    (void)buf;
    (void)size;
    (void)rwflag;
    (void)arg;
    return -1;
}

/* Reads the PEM file at `path` into `b` (initialised by the caller) and opens a memory BIO on it
 * in `*bio`. Returns 0, or a negative code with the message in `err`. */
static int open_pem(const char *path, struct sl_buf *b, BIO **bio, char *err, size_t errlen)
{
    int rc = read_file(path, b, err, errlen);

    if (rc < 0) {
        return rc;
    }
    ERR_clear_error();
    *bio = BIO_new_mem_buf(sl_buf_cstr(b), (int)b->len);
    if (*bio == NULL) {
        sl__certs_seterr(err, errlen, "cannot read %s: out of memory", path);
        return SL_ENOMEM;
    }
    return 0;
}

/* Reads the PEM certificate (into `*cert`, `key` NULL) or private key (into `*key`, `cert`
 * NULL) at `path`. The file's bytes are wiped after a key is read. */
int sl__certs_load_pem(const char *path, X509 **cert, EVP_PKEY **key, char *err, size_t errlen)
{
    struct sl_buf b;
    BIO *bio = NULL;
    bool found = false;
    int rc;

    sl_buf_init(&b, SL_CA_FILE_MAX_BYTES);
    rc = open_pem(path, &b, &bio, err, errlen);
    if (rc == 0) {
        if (key != NULL) {
            *key = PEM_read_bio_PrivateKey(bio, NULL, no_password, NULL);
            found = *key != NULL;
        } else {
            *cert = PEM_read_bio_X509(bio, NULL, no_password, NULL);
            found = *cert != NULL;
        }
        BIO_free(bio);
        if (!found) {
            sl__certs_seterr(err, errlen,
                             key != NULL ? "%s: no valid PEM private key found (encrypted keys "
                                           "are not supported)"
                                         : "%s: no valid PEM certificate found",
                             path);
            rc = SL_EINVAL;
        }
    }
    if (key != NULL && b.p != NULL) {
        OPENSSL_cleanse(b.p, b.len);
    }
    sl_buf_finish(&b);
    return rc;
}

static int check_is_ca(const char *path, X509 *x, char *err, size_t errlen)
{
    ERR_clear_error();
    /* X509_get_key_usage() answers "everything" when there is no keyUsage extension. */
    if ((X509_get_key_usage(x) & KU_KEY_CERT_SIGN) == 0) {
        sl__certs_seterr(err, errlen,
                         "%s: the certificate is not a CA (its keyUsage lacks keyCertSign)", path);
        return SL_EINVAL;
    }
    /* 1 is "basicConstraints CA:TRUE"; the other non-zero answers are legacy guesses (v1 roots,
     * Netscape types) that a CA of ours never relies on. */
    if (X509_check_ca(x) != 1) {
        sl__certs_seterr(err, errlen,
                         "%s: the certificate is not a CA (no basicConstraints CA:TRUE)", path);
        return SL_EINVAL;
    }
    return 0;
}

int sl_ca_load(const char *cert_path, const char *key_path, struct sl_ca **out, char *err,
               size_t errlen)
{
    struct sl_ca *ca;
    int rc;

    ca = sl_calloc(1, sizeof(*ca));
    if (ca == NULL) {
        sl__certs_seterr(err, errlen, "cannot load %s: out of memory", cert_path);
        return SL_ENOMEM;
    }
    rc = sl__certs_load_pem(cert_path, &ca->cert, NULL, err, errlen);
    if (rc < 0) {
        goto fail;
    }
    rc = check_is_ca(cert_path, ca->cert, err, errlen);
    if (rc < 0) {
        goto fail;
    }
    if (key_path != NULL) {
        rc = sl__certs_load_pem(key_path, NULL, &ca->key, err, errlen);
        if (rc < 0) {
            goto fail;
        }
        ERR_clear_error();
        if (X509_check_private_key(ca->cert, ca->key) != 1) {
            sl__certs_seterr(err, errlen, "%s: the private key does not match the certificate %s",
                             key_path, cert_path);
            rc = SL_EINVAL;
            goto fail;
        }
    }
    *out = ca;
    return 0;
fail:
    sl_ca_destroy(ca);
    return rc;
}

int sl__certs_join_path(char *out, size_t outlen, const char *dir, const char *name)
{
    size_t n = strlen(dir);
    const char *sep = n > 0 && dir[n - 1] == '/' ? "" : "/";
    int w;

    w = snprintf(out, outlen, "%s%s%s", dir, sep, name);
    return w < 0 || (size_t)w >= outlen ? SL_ETOOBIG : 0;
}

/* The paths of the CA's two files in `dir`; `what` ("the data directory", ...) starts the
 * message of a name that is empty or too long. */
static int ca_paths(const char *dir, char cert_path[PATH_BYTES], char key_path[PATH_BYTES],
                    const char *what, char *err, size_t errlen)
{
    if (dir[0] == '\0') {
        sl__certs_seterr(err, errlen, "%s name is empty", what);
        return SL_EINVAL;
    }
    if (sl__certs_join_path(cert_path, PATH_BYTES, dir, SL_CA_CERT_FILE) < 0
        || sl__certs_join_path(key_path, PATH_BYTES, dir, SL_CA_KEY_FILE) < 0) {
        sl__certs_seterr(err, errlen, "%s name is too long", what);
        return SL_ETOOBIG;
    }
    return 0;
}

int sl_ca_load_dir(const char *dir, bool with_key, struct sl_ca **out, char *err, size_t errlen)
{
    char cert_path[PATH_BYTES];
    char key_path[PATH_BYTES];

    SL_TRY(ca_paths(dir, cert_path, key_path, "the data directory", err, errlen));
    return sl_ca_load(cert_path, with_key ? key_path : NULL, out, err, errlen);
}

/* Appends the CA's certificate as PEM, or its subject on one line, to `out`. */
static int append_text(const struct sl_ca *ca, bool subject, struct sl_buf *out)
{
    char *data = NULL;
    bool written;
    BIO *bio;
    long n = 0;
    int rc = SL_ECRYPTO;

    ERR_clear_error();
    bio = BIO_new(BIO_s_mem());
    if (bio == NULL) {
        return SL_ENOMEM;
    }
    if (subject) {
        written = X509_NAME_print_ex(bio, X509_get_subject_name(ca->cert), 0,
                                     XN_FLAG_ONELINE & ~XN_FLAG_SPC_EQ)
                  >= 0;
    } else {
        written = PEM_write_bio_X509(bio, ca->cert) == 1;
    }
    if (written) {
        n = BIO_get_mem_data(bio, &data);
    }
    if (n > 0 && data != NULL) {
        rc = sl_buf_append(out, data, (size_t)n);
    }
    BIO_free(bio);
    ERR_clear_error();
    return rc;
}

int sl_ca_cert_pem(const struct sl_ca *ca, struct sl_buf *out)
{
    return append_text(ca, false, out);
}

int sl_ca_subject(const struct sl_ca *ca, struct sl_buf *out)
{
    return append_text(ca, true, out);
}

/* Makes sure `dir` is a directory, creating it with mode 0700 when it is missing. */
int sl__certs_ensure_dir(const char *dir, char *err, size_t errlen)
{
    struct stat st;

    if (mkdir(dir, 0700) == 0) {
        /* mkdir applies the umask, which may only take bits away; make the mode exact. */
        if (chmod(dir, 0700) == -1) {
            sl__certs_seterr(err, errlen, "cannot set the mode of %s: %s", dir, strerror(errno));
            return SL_EIO;
        }
        return 0;
    }
    if (errno != EEXIST) {
        sl__certs_seterr(err, errlen, "cannot create directory %s: %s", dir, strerror(errno));
        return SL_EIO;
    }
    if (stat(dir, &st) == -1) {
        sl__certs_seterr(err, errlen, "cannot use directory %s: %s", dir, strerror(errno));
        return SL_EIO;
    }
    if (!S_ISDIR(st.st_mode)) {
        sl__certs_seterr(err, errlen, "cannot use directory %s: not a directory", dir);
        return SL_EIO;
    }
    return 0;
}

int sl__certs_check_absent(const char *path, char *err, size_t errlen)
{
    struct stat st;

    if (lstat(path, &st) == 0) {
        sl__certs_seterr(err, errlen, "%s exists already; not overwritten", path);
        return SL_EEXIST;
    }
    if (errno != ENOENT) {
        sl__certs_seterr(err, errlen, "cannot check %s: %s", path, strerror(errno));
        return SL_EIO;
    }
    return 0;
}

static int write_all(int fd, const unsigned char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);

        if (w == -1 && errno == EINTR) {
            continue;
        }
        if (w == -1) {
            return SL_EIO;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Creates an unused temporary name next to `path` and opens it with O_EXCL and `mode`. */
static int open_temp(const char *path, mode_t mode, char *tmp, size_t tmplen)
{
    unsigned char rnd[8];
    int fd = -1;
    int w;

    for (int tries = 0; fd == -1 && tries < 8; tries++) {
        if (RAND_bytes(rnd, (int)sizeof(rnd)) != 1) {
            errno = EIO;
            return -1;
        }
        w = snprintf(tmp, tmplen, "%s.tmp-%02x%02x%02x%02x%02x%02x%02x%02x", path, rnd[0], rnd[1],
                     rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
        if (w < 0 || (size_t)w >= tmplen) {
            errno = ENAMETOOLONG;
            return -1;
        }
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        if (fd == -1 && errno != EEXIST) {
            return -1;
        }
    }
    return fd;
}

/* Writes `n` bytes to a new temporary file next to `path`, created with `mode` (exactly: the
 * umask is undone) and synced. On success `tmp` names it; the caller renames or unlinks it. */
static int write_temp(const char *path, mode_t mode, const void *p, size_t n, char *tmp,
                      size_t tmplen, char *err, size_t errlen)
{
    int fd;

    fd = open_temp(path, mode, tmp, tmplen);
    if (fd == -1) {
        sl__certs_seterr(err, errlen, "cannot create a temporary file for %s: %s", path,
                         strerror(errno));
        return SL_EIO;
    }
    if (fchmod(fd, mode) == -1 || write_all(fd, p, n) < 0 || fsync(fd) == -1) {
        sl__certs_seterr(err, errlen, "cannot write %s: %s", path, strerror(errno));
        goto fail_close;
    }
    if (close(fd) == -1) {
        sl__certs_seterr(err, errlen, "cannot write %s: %s", path, strerror(errno));
        goto fail_unlink;
    }
    return 0;
fail_close:
    (void)close(fd);
fail_unlink:
    (void)unlink(tmp);
    return SL_EIO;
}

static int sync_dir(const char *dir, char *err, size_t errlen)
{
    int fd;
    int rc = 0;

    fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd == -1) {
        sl__certs_seterr(err, errlen, "cannot sync directory %s: %s", dir, strerror(errno));
        return SL_EIO;
    }
    if (fsync(fd) == -1) {
        sl__certs_seterr(err, errlen, "cannot sync directory %s: %s", dir, strerror(errno));
        rc = SL_EIO;
    }
    (void)close(fd);
    return rc;
}

int sl__certs_write_atomic(const char *dir, const char *path, mode_t mode, const void *p, size_t n,
                           char *err, size_t errlen)
{
    char tmp[PATH_BYTES + 32];

    SL_TRY(write_temp(path, mode, p, n, tmp, sizeof(tmp), err, errlen));
    if (rename(tmp, path) == -1) {
        sl__certs_seterr(err, errlen, "cannot write %s: %s", path, strerror(errno));
        (void)unlink(tmp);
        return SL_EIO;
    }
    return sync_dir(dir, err, errlen);
}

/* The key in PEM form, in a memory BIO that wipes its bytes when freed. */
BIO *sl__certs_key_pem(EVP_PKEY *key)
{
    BIO *bio;

    bio = BIO_new(BIO_s_secmem());
    if (bio == NULL) {
        return NULL;
    }
    if (PEM_write_bio_PrivateKey(bio, key, NULL, NULL, 0, NULL, NULL) != 1) {
        BIO_free(bio);
        return NULL;
    }
    return bio;
}

/* Both files are written to temporaries before either is renamed, so that a failure to write
 * (a full disk) leaves the old pair in place. */
static int write_files(const struct sl_ca *ca, const char *dir, const char *cert_path,
                       const char *key_path, char *err, size_t errlen)
{
    char cert_tmp[PATH_BYTES + 32];
    char key_tmp[PATH_BYTES + 32];
    struct sl_buf pem;
    BIO *kbio = NULL;
    char *kdata = NULL;
    long klen;
    int rc;

    sl_buf_init(&pem, SL_CA_FILE_MAX_BYTES);
    ERR_clear_error();
    rc = sl_ca_cert_pem(ca, &pem);
    kbio = sl__certs_key_pem(ca->key);
    klen = kbio != NULL ? BIO_get_mem_data(kbio, &kdata) : 0;
    if (rc < 0 || klen <= 0 || kdata == NULL) {
        sl__certs_seterr(err, errlen, "cannot encode the CA for %s", dir);
        rc = rc < 0 ? rc : SL_ECRYPTO;
        goto out;
    }
    rc = write_temp(key_path, 0600, kdata, (size_t)klen, key_tmp, sizeof(key_tmp), err, errlen);
    if (rc < 0) {
        goto out;
    }
    rc = write_temp(cert_path, 0644, pem.p, pem.len, cert_tmp, sizeof(cert_tmp), err, errlen);
    if (rc < 0) {
        goto fail_unlink_key;
    }
    if (rename(key_tmp, key_path) == -1) {
        sl__certs_seterr(err, errlen, "cannot write %s: %s", key_path, strerror(errno));
        rc = SL_EIO;
        goto fail_unlink_cert;
    }
    if (rename(cert_tmp, cert_path) == -1) {
        sl__certs_seterr(err, errlen, "cannot write %s: %s (%s was replaced already)", cert_path,
                         strerror(errno), key_path);
        rc = SL_EIO;
        goto fail_unlink_cert;
    }
    rc = sync_dir(dir, err, errlen);
    goto out;
fail_unlink_cert:
    (void)unlink(cert_tmp);
fail_unlink_key:
    (void)unlink(key_tmp);
out:
    BIO_free(kbio);
    sl_buf_finish(&pem);
    return rc;
}

int sl_ca_write(const struct sl_ca *ca, const char *dir, bool force, char *err, size_t errlen)
{
    char cert_path[PATH_BYTES];
    char key_path[PATH_BYTES];

    if (ca->key == NULL) {
        sl__certs_seterr(err, errlen, "cannot write the CA: it was loaded without its key");
        return SL_EINVAL;
    }
    SL_TRY(ca_paths(dir, cert_path, key_path, "cannot write the CA: the directory", err, errlen));
    SL_TRY(sl__certs_ensure_dir(dir, err, errlen));
    if (!force) {
        SL_TRY(sl__certs_check_absent(cert_path, err, errlen));
        SL_TRY(sl__certs_check_absent(key_path, err, errlen));
    }
    return write_files(ca, dir, cert_path, key_path, err, errlen);
}
