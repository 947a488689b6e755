/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/certs/test_certs.c - the interception CA, leaf minting and the leaf cache (certs/).
 *
 * Minted leaves are checked twice: field by field here, and by the real `openssl verify` in
 * X509_STRICT mode with the CA written by sl_ca_write(), which is what a client does.
 */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "base/buf.h"
#include "base/mem.h"
#include "certs/ca.h"
#include "certs/cache.h"
#include "certs/mint.h"
#include "tests/support/pki.h"
#include "tests/support/tmpdir.h"

extern char **environ;

#define PATH_BYTES 512
#define DAY        86400

/* What every test shares: a scratch directory and one CA written to it, with its minter. */
struct fixture {
    /* A mkdtemp() directory under /tmp, removed at the end. */
    char tmp[PATH_BYTES];
    /* tmp/main, holding the CA below as ca.pem and ca.key. */
    char dir[PATH_BYTES];
    char ca_pem[PATH_BYTES];
    struct sl_ca *ca;
    struct sl_minter *minter;
    /* When the CA was made. */
    time_t born;
};

static struct fixture fx;

/* ---- helpers ---- */

static void join(char *out, const char *a, const char *b)
{
    assert_int_equal(sl_test_join(out, PATH_BYTES, a, b), 0);
}

/* Runs argv with standard output and error discarded; returns its exit status, -1 if it died. */
static int run_quiet(const char *const *args)
{
    posix_spawn_file_actions_t fa;
    char *argv[24];
    size_t n = 0;
    pid_t pid;
    int status;
    int rc;

    for (; args[n] != NULL; n++) {
        assert_true(n + 1 < SL_ARRAY_LEN(argv));
        argv[n] = sl_strdup(args[n]);
        assert_non_null(argv[n]);
    }
    argv[n] = NULL;
    assert_int_equal(posix_spawn_file_actions_init(&fa), 0);
    assert_int_equal(posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0), 0);
    assert_int_equal(posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0), 0);
    rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    assert_int_equal(rc, 0);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    posix_spawn_file_actions_destroy(&fa);
    for (size_t i = 0; i < n; i++) {
        sl_free(argv[i]);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* `openssl verify` in strict mode for a TLS server, checking `flag` (-verify_hostname or
 * -verify_ip) against `value`. Returns its exit status: 0 when the leaf verifies. */
static int openssl_verify(const char *leaf_pem, const char *flag, const char *value)
{
    const char *args[] = { "openssl", "verify", "-x509_strict", "-purpose", "sslserver", "-CAfile",
                           fx.ca_pem, flag,     value,          leaf_pem,   NULL };

    return run_quiet(args);
}

static void write_cert(const char *path, X509 *x)
{
    BIO *bio = BIO_new_file(path, "w");

    assert_non_null(bio);
    assert_int_equal(PEM_write_bio_X509(bio, x), 1);
    BIO_free(bio);
}

/* Reads up to `cap` - 1 bytes of `path` into `buf`, NUL-terminated. Returns the length. */
static size_t read_text(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    size_t n;

    assert_non_null(f);
    n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
    assert_int_equal(fclose(f), 0);
    return n;
}

static mode_t mode_of(const char *path)
{
    struct stat st;

    assert_int_equal(stat(path, &st), 0);
    return st.st_mode & 07777;
}

static size_t count_dir_entries(const char *path)
{
    DIR *d = opendir(path);
    struct dirent *de;
    size_t n = 0;

    assert_non_null(d);
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) {
            n++;
        }
    }
    assert_int_equal(closedir(d), 0);
    return n;
}

static struct sl_ca *new_ca_in(const char *dir)
{
    char err[256] = "";
    struct sl_ca *ca = NULL;

    assert_int_equal(sl_ca_create(&ca, err, sizeof(err)), 0);
    assert_int_equal(sl_ca_write(ca, dir, false, err, sizeof(err)), 0);
    return ca;
}

/* A CA directory `name` below fx.tmp and the paths of its two files. */
struct ca_paths {
    char dir[PATH_BYTES];
    char pem[PATH_BYTES];
    char key[PATH_BYTES];
};

static void ca_paths(struct ca_paths *p, const char *name)
{
    join(p->dir, fx.tmp, name);
    join(p->pem, p->dir, SL_CA_CERT_FILE);
    join(p->key, p->dir, SL_CA_KEY_FILE);
}

static X509 *mint(const char *host)
{
    char err[256] = "";
    X509 *x = NULL;
    int rc = sl_minter_mint(fx.minter, host, &x, err, sizeof(err));

    if (rc != 0) {
        print_error("mint %s: %s\n", host, err);
    }
    assert_int_equal(rc, 0);
    assert_non_null(x);
    return x;
}

/* Mints `host`, writes it to tmp/leaf.pem and returns `openssl verify`'s answer for `flag`. */
static int mint_and_verify(const char *host, const char *flag, const char *value)
{
    char leaf_pem[PATH_BYTES];
    X509 *x = mint(host);
    int rc;

    join(leaf_pem, fx.tmp, "leaf.pem");
    write_cert(leaf_pem, x);
    X509_free(x);
    rc = openssl_verify(leaf_pem, flag, value);
    assert_int_equal(unlink(leaf_pem), 0);
    return rc;
}

static bool ext_is_critical(X509 *x, int nid)
{
    int i = X509_get_ext_by_NID(x, nid, -1);

    assert_true(i >= 0);
    return X509_EXTENSION_get_critical(X509_get_ext(x, i)) == 1;
}

/* The one subjectAltName entry of `x`; checks its type and whether the extension is critical. */
static void check_san(X509 *x, int type, const void *value, size_t n, bool critical)
{
    int crit = -1;
    GENERAL_NAMES *names = X509_get_ext_d2i(x, NID_subject_alt_name, &crit, NULL);
    const GENERAL_NAME *gn;
    const ASN1_STRING *s;

    assert_non_null(names);
    assert_int_equal(crit, critical ? 1 : 0);
    assert_int_equal(sk_GENERAL_NAME_num(names), 1);
    gn = sk_GENERAL_NAME_value(names, 0);
    assert_int_equal(gn->type, type);
    s = type == GEN_DNS ? gn->d.dNSName : gn->d.iPAddress;
    assert_int_equal(ASN1_STRING_length(s), n);
    assert_memory_equal(ASN1_STRING_get0_data(s), value, n);
    GENERAL_NAMES_free(names);
}

/* A name made of `total` characters: labels of 63 'a', 'b', ... joined by dots. */
static void long_name(char *out, size_t total)
{
    size_t label = 0;
    char ch = 'a';

    for (size_t i = 0; i < total; i++) {
        if (label == 63 && i + 1 < total) {
            out[i] = '.';
            label = 0;
            ch++;
        } else {
            out[i] = ch;
            label++;
        }
    }
    out[total] = '\0';
}

static int setup(void **state)
{
    char err[256] = "";

    (void)state;
    assert_int_equal(sl_test_tmpdir(fx.tmp, sizeof(fx.tmp), "sluice-test-certs"), 0);
    join(fx.dir, fx.tmp, "main");
    join(fx.ca_pem, fx.dir, SL_CA_CERT_FILE);
    fx.born = time(NULL);
    fx.ca = new_ca_in(fx.dir);
    assert_int_equal(sl_minter_create(fx.ca, &fx.minter, err, sizeof(err)), 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    sl_minter_destroy(fx.minter);
    sl_ca_destroy(fx.ca);
    assert_int_equal(sl_test_rmtree(fx.tmp), 0);
    return 0;
}

/* ---- the CA on disk ---- */

static void ca_write_creates_dir_0700_key_0600_and_cert_0644(void **state)
{
    /* The strictest and the loosest umask must give the same modes. */
    static const struct {
        mode_t umask;
        const char *name;
    } rows[] = { { 077, "modes" }, { 0, "modes-loose" } };

    (void)state;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        struct ca_paths p;
        struct sl_ca *ca;
        mode_t old;

        ca_paths(&p, rows[i].name);
        old = umask(rows[i].umask);
        ca = new_ca_in(p.dir);
        umask(old);
        assert_int_equal(mode_of(p.dir), 0700);
        assert_int_equal(mode_of(p.key), 0600);
        assert_int_equal(mode_of(p.pem), 0644);
        assert_int_equal(count_dir_entries(p.dir), 2); /* no temporary file left behind */
        sl_ca_destroy(ca);
    }
}

static void ca_write_refuses_to_overwrite_without_force(void **state)
{
    struct ca_paths p;
    char before[4096];
    char after[4096];
    char err[512] = "";
    struct sl_ca *first;
    struct sl_ca *second = NULL;

    (void)state;
    ca_paths(&p, "refuse");
    first = new_ca_in(p.dir);
    assert_int_equal(sl_ca_create(&second, err, sizeof(err)), 0);
    read_text(p.key, before, sizeof(before));

    assert_int_equal(sl_ca_write(second, p.dir, false, err, sizeof(err)), SL_EEXIST);
    assert_non_null(strstr(err, p.pem));
    read_text(p.key, after, sizeof(after));
    assert_string_equal(before, after);

    /* Either file is enough to refuse, and the message names the one that exists. */
    assert_int_equal(unlink(p.pem), 0);
    err[0] = '\0';
    assert_int_equal(sl_ca_write(second, p.dir, false, err, sizeof(err)), SL_EEXIST);
    assert_non_null(strstr(err, p.key));
    read_text(p.key, after, sizeof(after));
    assert_string_equal(before, after);
    assert_int_equal(count_dir_entries(p.dir), 1);

    sl_ca_destroy(first);
    sl_ca_destroy(second);
}

static void ca_write_replaces_with_force(void **state)
{
    char dir[PATH_BYTES];
    char err[512] = "";
    struct sl_ca *first;
    struct sl_ca *second = NULL;
    struct sl_ca *loaded = NULL;

    (void)state;
    join(dir, fx.tmp, "force");
    first = new_ca_in(dir);
    assert_int_equal(sl_ca_create(&second, err, sizeof(err)), 0);
    assert_int_equal(sl_ca_write(second, dir, true, err, sizeof(err)), 0);
    assert_int_equal(count_dir_entries(dir), 2);
    assert_int_equal(sl_ca_load_dir(dir, true, &loaded, err, sizeof(err)), 0);
    assert_int_equal(X509_cmp(sl_ca_cert(loaded), sl_ca_cert(second)), 0);
    assert_int_not_equal(X509_cmp(sl_ca_cert(loaded), sl_ca_cert(first)), 0);
    assert_int_equal(EVP_PKEY_eq(sl_ca_key(loaded), sl_ca_key(second)), 1);
    sl_ca_destroy(first);
    sl_ca_destroy(second);
    sl_ca_destroy(loaded);
}

static void ca_write_refuses_a_file_in_place_of_the_directory(void **state)
{
    char path[PATH_BYTES];
    char err[512] = "";

    (void)state;
    join(path, fx.tmp, "not-a-dir");
    assert_int_equal(sl_test_write_text(path, "x"), 0);
    assert_int_equal(sl_ca_write(fx.ca, path, false, err, sizeof(err)), SL_EIO);
    assert_non_null(strstr(err, path));
    assert_int_equal(sl_ca_write(fx.ca, "", false, err, sizeof(err)), SL_EINVAL);
}

static void loads_back_the_ca_it_wrote(void **state)
{
    char err[512] = "";
    struct sl_ca *ca = NULL;
    X509 *x;
    const ASN1_INTEGER *serial;
    BIGNUM *bn;
    struct sl_buf subject;
    const char *cn_prefix = "O=sluice, CN=sluice interception CA ";
    time_t now = time(NULL);

    (void)state;
    assert_int_equal(sl_ca_load_dir(fx.dir, true, &ca, err, sizeof(err)), 0);
    x = sl_ca_cert(ca);
    assert_int_equal(X509_cmp(x, sl_ca_cert(fx.ca)), 0);
    assert_int_equal(EVP_PKEY_eq(sl_ca_key(ca), sl_ca_key(fx.ca)), 1);

    /* ECDSA P-256, self-signed with SHA-256. */
    assert_int_equal(EVP_PKEY_get_base_id(sl_ca_key(ca)), EVP_PKEY_EC);
    assert_int_equal(EVP_PKEY_get_bits(sl_ca_key(ca)), 256);
    assert_int_equal(X509_get_signature_nid(x), NID_ecdsa_with_SHA256);
    assert_int_equal(X509_verify(x, sl_ca_key(ca)), 1);
    assert_int_equal(X509_NAME_cmp(X509_get_subject_name(x), X509_get_issuer_name(x)), 0);

    /* basicConstraints critical CA:TRUE, pathlen:0; keyUsage critical keyCertSign, cRLSign. */
    assert_int_equal(X509_check_ca(x), 1);
    assert_int_equal(X509_get_pathlen(x), 0);
    assert_true(ext_is_critical(x, NID_basic_constraints));
    assert_int_equal(X509_get_key_usage(x), KU_KEY_CERT_SIGN | KU_CRL_SIGN);
    assert_true(ext_is_critical(x, NID_key_usage));
    assert_non_null(X509_get0_subject_key_id(x));

    /* A positive serial of at most 128 bits. */
    serial = X509_get0_serialNumber(x);
    bn = ASN1_INTEGER_to_BN(serial, NULL);
    assert_non_null(bn);
    assert_false(BN_is_negative(bn));
    assert_false(BN_is_zero(bn));
    assert_true(BN_num_bits(bn) <= 128);
    BN_free(bn);

    /* Ten years from now, started at least a day ago. */
    assert_true(ASN1_TIME_cmp_time_t(X509_get0_notBefore(x), now - DAY) <= 0);
    assert_true(ASN1_TIME_cmp_time_t(X509_get0_notAfter(x), now + 3650L * DAY) > 0);
    assert_true(ASN1_TIME_cmp_time_t(X509_get0_notAfter(x), now + 3653L * DAY) < 0);

    sl_buf_init(&subject, 1024);
    assert_int_equal(sl_ca_subject(ca, &subject), 0);
    assert_int_equal(strncmp(sl_buf_cstr(&subject), cn_prefix, strlen(cn_prefix)), 0);
    assert_int_equal(subject.len, strlen(cn_prefix) + 8);
    sl_buf_finish(&subject);
    sl_ca_destroy(ca);
}

static void two_cas_have_different_subjects_and_serials(void **state)
{
    char err[256] = "";
    struct sl_ca *a = NULL;
    struct sl_ca *b = NULL;

    (void)state;
    assert_int_equal(sl_ca_create(&a, err, sizeof(err)), 0);
    assert_int_equal(sl_ca_create(&b, err, sizeof(err)), 0);
    assert_int_not_equal(X509_NAME_cmp(X509_get_subject_name(sl_ca_cert(a)),
                                       X509_get_subject_name(sl_ca_cert(b))),
                         0);
    assert_int_not_equal(ASN1_INTEGER_cmp(X509_get0_serialNumber(sl_ca_cert(a)),
                                          X509_get0_serialNumber(sl_ca_cert(b))),
                         0);
    sl_ca_destroy(a);
    sl_ca_destroy(b);
}

static void ca_passes_strict_verification_as_its_own_anchor(void **state)
{
    const char *args[] = { "openssl", "verify", "-x509_strict", "-CAfile", fx.ca_pem,
                           fx.ca_pem, NULL };

    (void)state;
    assert_int_equal(run_quiet(args), 0);
}

static void ca_pem_round_trips_through_openssl(void **state)
{
    struct sl_buf pem;
    BIO *bio;
    X509 *x;

    (void)state;
    sl_buf_init(&pem, SL_CA_FILE_MAX_BYTES);
    assert_int_equal(sl_ca_cert_pem(fx.ca, &pem), 0);
    assert_int_equal(strncmp(sl_buf_cstr(&pem), "-----BEGIN CERTIFICATE-----\n", 28), 0);
    bio = BIO_new_mem_buf(pem.p, (int)pem.len);
    assert_non_null(bio);
    x = PEM_read_bio_X509(bio, NULL, NULL, NULL);
    assert_non_null(x);
    assert_int_equal(X509_cmp(x, sl_ca_cert(fx.ca)), 0);
    X509_free(x);
    BIO_free(bio);
    sl_buf_finish(&pem);
}

/* ---- loading errors: each names the file ---- */

static void rejects_key_that_does_not_match(void **state)
{
    struct ca_paths o;
    char main_key[PATH_BYTES];
    char err[512] = "";
    struct sl_ca *other;
    struct sl_ca *ca = NULL;

    (void)state;
    ca_paths(&o, "other");
    join(main_key, fx.dir, SL_CA_KEY_FILE);
    other = new_ca_in(o.dir);

    assert_int_equal(sl_ca_load(fx.ca_pem, o.key, &ca, err, sizeof(err)), SL_EINVAL);
    assert_null(ca);
    assert_non_null(strstr(err, o.key));
    assert_non_null(strstr(err, "does not match"));

    err[0] = '\0';
    assert_int_equal(sl_ca_load(o.pem, main_key, &ca, err, sizeof(err)), SL_EINVAL);
    assert_null(ca);
    assert_non_null(strstr(err, main_key));
    sl_ca_destroy(other);
}

static void rejects_garbage_files(void **state)
{
    static const char *const garbage[] = {
        "",
        "hello, this is not a certificate\n",
        "-----BEGIN CERTIFICATE-----\nnot base64 at all!!\n-----END CERTIFICATE-----\n",
        "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIQ\n-----END CERTIFICATE-----\n",
        "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49\n-----END PRIVATE KEY-----\n",
    };
    char path[PATH_BYTES];
    char main_key[PATH_BYTES];
    char err[512];
    struct sl_ca *ca = NULL;

    (void)state;
    join(path, fx.tmp, "garbage.pem");
    join(main_key, fx.dir, SL_CA_KEY_FILE);
    for (size_t i = 0; i < SL_ARRAY_LEN(garbage); i++) {
        assert_int_equal(sl_test_write_text(path, garbage[i]), 0);
        err[0] = '\0';
        assert_int_equal(sl_ca_load(path, main_key, &ca, err, sizeof(err)), SL_EINVAL);
        assert_null(ca);
        assert_non_null(strstr(err, path));
        err[0] = '\0';
        assert_int_equal(sl_ca_load(fx.ca_pem, path, &ca, err, sizeof(err)), SL_EINVAL);
        assert_null(ca);
        assert_non_null(strstr(err, path));
    }
    /* Nothing of OpenSSL's error queue is left for the next caller. */
    assert_int_equal(ERR_peek_error(), 0);
}

static void rejects_missing_and_unreadable_files(void **state)
{
    char missing[PATH_BYTES];
    char err[512] = "";
    struct sl_ca *ca = NULL;

    (void)state;
    join(missing, fx.tmp, "missing.pem");
    assert_int_equal(sl_ca_load(missing, NULL, &ca, err, sizeof(err)), SL_EIO);
    assert_null(ca);
    assert_non_null(strstr(err, missing));
    assert_non_null(strstr(err, "No such file"));

    err[0] = '\0';
    assert_int_equal(sl_ca_load(fx.ca_pem, missing, &ca, err, sizeof(err)), SL_EIO);
    assert_non_null(strstr(err, missing));

    err[0] = '\0';
    assert_int_equal(sl_ca_load_dir("/nonexistent", false, &ca, err, sizeof(err)), SL_EIO);
    assert_non_null(strstr(err, "/nonexistent/ca.pem"));

    /* A directory where the file should be. */
    err[0] = '\0';
    assert_int_equal(sl_ca_load(fx.dir, NULL, &ca, err, sizeof(err)), SL_EIO);
    assert_non_null(strstr(err, fx.dir));
    assert_null(ca);
}

static void rejects_certificate_that_is_not_a_ca(void **state)
{
    char leaf_pem[PATH_BYTES];
    char err[512] = "";
    struct sl_ca *ca = NULL;
    X509 *leaf = mint("leaf-as-ca.sluice.test");

    (void)state;
    join(leaf_pem, fx.tmp, "leaf-as-ca.pem");
    write_cert(leaf_pem, leaf);
    X509_free(leaf);
    assert_int_equal(sl_ca_load(leaf_pem, NULL, &ca, err, sizeof(err)), SL_EINVAL);
    assert_null(ca);
    assert_non_null(strstr(err, leaf_pem));
    assert_non_null(strstr(err, "not a CA"));
}

static void rejects_key_file_as_certificate_and_certificate_as_key(void **state)
{
    char key[PATH_BYTES];
    char err[512] = "";
    struct sl_ca *ca = NULL;

    (void)state;
    join(key, fx.dir, SL_CA_KEY_FILE);
    assert_int_equal(sl_ca_load(key, key, &ca, err, sizeof(err)), SL_EINVAL);
    assert_non_null(strstr(err, key));
    assert_non_null(strstr(err, "certificate"));

    err[0] = '\0';
    assert_int_equal(sl_ca_load(fx.ca_pem, fx.ca_pem, &ca, err, sizeof(err)), SL_EINVAL);
    assert_non_null(strstr(err, fx.ca_pem));
    assert_non_null(strstr(err, "private key"));
    assert_null(ca);
}

static void refuses_encrypted_key_without_prompting(void **state)
{
    char path[PATH_BYTES];
    char err[512] = "";
    unsigned char pass[] = "secret";
    struct sl_ca *ca = NULL;
    BIO *bio;

    (void)state;
    join(path, fx.tmp, "encrypted.key");
    bio = BIO_new_file(path, "w");
    assert_non_null(bio);
    assert_int_equal(PEM_write_bio_PrivateKey(bio, sl_ca_key(fx.ca), EVP_aes_256_cbc(), pass,
                                              (int)sizeof(pass) - 1, NULL, NULL),
                     1);
    BIO_free(bio);
    assert_int_equal(sl_ca_load(fx.ca_pem, path, &ca, err, sizeof(err)), SL_EINVAL);
    assert_non_null(strstr(err, path));
    assert_null(ca);
}

static void loads_certificate_alone_or_both_from_one_file(void **state)
{
    char both[PATH_BYTES];
    char key[PATH_BYTES];
    char text[8192];
    char err[512] = "";
    struct sl_ca *ca = NULL;
    struct sl_minter *m = NULL;
    size_t n;

    (void)state;
    assert_int_equal(sl_ca_load(fx.ca_pem, NULL, &ca, err, sizeof(err)), 0);
    assert_null(sl_ca_key(ca));
    assert_int_equal(X509_cmp(sl_ca_cert(ca), sl_ca_cert(fx.ca)), 0);
    /* A CA without its key can be shown, but neither mint nor be written. */
    assert_int_equal(sl_minter_create(ca, &m, err, sizeof(err)), SL_EINVAL);
    assert_null(m);
    assert_int_equal(sl_ca_write(ca, fx.tmp, true, err, sizeof(err)), SL_EINVAL);
    sl_ca_destroy(ca);
    ca = NULL;

    join(key, fx.dir, SL_CA_KEY_FILE);
    join(both, fx.tmp, "both.pem");
    n = read_text(fx.ca_pem, text, sizeof(text));
    read_text(key, text + n, sizeof(text) - n);
    assert_int_equal(sl_test_write_text(both, text), 0);
    assert_int_equal(sl_ca_load(both, both, &ca, err, sizeof(err)), 0);
    assert_int_equal(EVP_PKEY_eq(sl_ca_key(ca), sl_ca_key(fx.ca)), 1);
    sl_ca_destroy(ca);
}

/* ---- minting ---- */

static void mints_leaves_that_openssl_verifies_for_names(void **state)
{
    char label63[80];
    char name200[201];
    char wrong[201];

    (void)state;
    assert_int_equal(mint_and_verify("a.sluice.test", "-verify_hostname", "a.sluice.test"), 0);
    assert_int_not_equal(mint_and_verify("a.sluice.test", "-verify_hostname", "b.sluice.test"), 0);
    assert_int_not_equal(mint_and_verify("a.sluice.test", "-verify_hostname", "sluice.test"), 0);

    long_name(label63, 63);
    assert_true(snprintf(label63 + 63, sizeof(label63) - 63, ".sluice.test") > 0);
    assert_int_equal(mint_and_verify(label63, "-verify_hostname", label63), 0);

    long_name(name200, 200);
    assert_int_equal(strlen(name200), 200);
    assert_int_equal(mint_and_verify(name200, "-verify_hostname", name200), 0);
    memcpy(wrong, name200, sizeof(wrong));
    wrong[0] = 'z';
    assert_int_not_equal(mint_and_verify(name200, "-verify_hostname", wrong), 0);
}

static void mints_leaves_that_openssl_verifies_for_ip_literals(void **state)
{
    (void)state;
    assert_int_equal(mint_and_verify("192.0.2.7", "-verify_ip", "192.0.2.7"), 0);
    assert_int_not_equal(mint_and_verify("192.0.2.7", "-verify_ip", "192.0.2.8"), 0);
    assert_int_equal(mint_and_verify("2001:db8::7", "-verify_ip", "2001:db8::7"), 0);
    assert_int_equal(mint_and_verify("2001:db8::7", "-verify_ip", "2001:db8:0:0:0:0:0:7"), 0);
    assert_int_not_equal(mint_and_verify("2001:db8::7", "-verify_ip", "2001:db8::8"), 0);
    assert_int_not_equal(mint_and_verify("2001:db8::7", "-verify_ip", "192.0.2.7"), 0);
    /* A name leaf does not cover an address. */
    assert_int_not_equal(mint_and_verify("a.sluice.test", "-verify_ip", "192.0.2.7"), 0);
}

static void leaf_carries_the_extensions_strict_clients_demand(void **state)
{
    const char *host = "a.sluice.test";
    X509 *ca = sl_ca_cert(fx.ca);
    X509 *x = mint(host);
    X509 *y = mint(host);
    X509_NAME *subject = X509_get_subject_name(x);
    char cn[128];
    time_t now = time(NULL);

    (void)state;
    /* basicConstraints critical CA:FALSE; keyUsage critical digitalSignature only. */
    assert_int_equal(X509_check_ca(x), 0);
    assert_true((X509_get_extension_flags(x) & EXFLAG_BCONS) != 0);
    assert_true(ext_is_critical(x, NID_basic_constraints));
    assert_int_equal(X509_get_key_usage(x), KU_DIGITAL_SIGNATURE);
    assert_true(ext_is_critical(x, NID_key_usage));
    /* extendedKeyUsage serverAuth only. */
    assert_int_equal(X509_get_extended_key_usage(x), XKU_SSL_SERVER);
    assert_int_equal(X509_check_purpose(x, X509_PURPOSE_SSL_SERVER, 0), 1);
    /* Key identifiers: SKI of the leaf key, AKI = the CA's SKI. */
    assert_non_null(X509_get0_subject_key_id(x));
    assert_non_null(X509_get0_authority_key_id(x));
    assert_int_equal(
            ASN1_OCTET_STRING_cmp(X509_get0_authority_key_id(x), X509_get0_subject_key_id(ca)), 0);
    /* Issuer, subject, SAN. */
    assert_int_equal(X509_NAME_cmp(X509_get_issuer_name(x), X509_get_subject_name(ca)), 0);
    assert_int_equal(X509_NAME_entry_count(subject), 1);
    assert_int_equal(X509_NAME_get_text_by_NID(subject, NID_commonName, cn, sizeof(cn)), 13);
    assert_string_equal(cn, host);
    check_san(x, GEN_DNS, host, strlen(host), false);
    /* Signed by the CA with ECDSA SHA-256, for the minter's one shared key. */
    assert_int_equal(X509_get_signature_nid(x), NID_ecdsa_with_SHA256);
    assert_int_equal(X509_verify(x, sl_ca_key(fx.ca)), 1);
    assert_int_equal(EVP_PKEY_eq(X509_get0_pubkey(x), sl_minter_leaf_key(fx.minter)), 1);
    assert_int_equal(EVP_PKEY_eq(X509_get0_pubkey(y), sl_minter_leaf_key(fx.minter)), 1);
    assert_int_equal(X509_get_version(x), X509_VERSION_3);
    /* Random serials. */
    assert_int_not_equal(ASN1_INTEGER_cmp(X509_get0_serialNumber(x), X509_get0_serialNumber(y)), 0);
    /* From a day back (at least 23 hours) to at most 90 days ahead. */
    assert_true(ASN1_TIME_cmp_time_t(X509_get0_notBefore(x), now - 23L * 3600) <= 0);
    assert_true(ASN1_TIME_cmp_time_t(X509_get0_notBefore(x), now - 25L * 3600) >= 0);
    assert_true(ASN1_TIME_cmp_time_t(X509_get0_notAfter(x), now + 90L * DAY) <= 0);
    assert_true(ASN1_TIME_cmp_time_t(X509_get0_notAfter(x), now + 89L * DAY) > 0);
    X509_free(x);
    X509_free(y);
}

static void leaf_for_long_name_has_no_cn_and_a_critical_san(void **state)
{
    char name[201];
    unsigned char v4[4] = { 192, 0, 2, 9 };
    unsigned char v6[16] = { 0x20, 0x01, 0x0d, 0xb8, [15] = 0x09 };
    X509 *x;

    (void)state;
    long_name(name, 65);
    x = mint(name);
    assert_int_equal(X509_NAME_entry_count(X509_get_subject_name(x)), 0);
    check_san(x, GEN_DNS, name, 65, true);
    X509_free(x);

    memset(name, 'a', 59);
    memcpy(name + 59, ".test", 6); /* 64 characters still fit in a CN */
    x = mint(name);
    assert_int_equal(X509_NAME_entry_count(X509_get_subject_name(x)), 1);
    check_san(x, GEN_DNS, name, 64, false);
    X509_free(x);

    x = mint("192.0.2.9");
    check_san(x, GEN_IPADD, v4, sizeof(v4), false);
    X509_free(x);
    x = mint("2001:db8::9");
    check_san(x, GEN_IPADD, v6, sizeof(v6), false);
    X509_free(x);
}

static void clamps_leaf_validity_inside_the_ca(void **state)
{
    char err[256] = "";
    X509 *ca = sl_ca_cert(fx.ca);
    X509 *x = NULL;

    (void)state;
    /* Ten days before the CA ends: the leaf ends with it. */
    assert_int_equal(sl_minter_mint_at(fx.minter, "late.sluice.test", fx.born + 3642L * DAY, &x,
                                       err, sizeof(err)),
                     0);
    assert_int_equal(ASN1_TIME_compare(X509_get0_notAfter(x), X509_get0_notAfter(ca)), 0);
    assert_true(ASN1_TIME_compare(X509_get0_notBefore(x), X509_get0_notBefore(ca)) > 0);
    X509_free(x);
    x = NULL;

    /* An hour after the CA began: the leaf begins with it. */
    assert_int_equal(sl_minter_mint_at(fx.minter, "early.sluice.test", fx.born - 2L * DAY + 3600,
                                       &x, err, sizeof(err)),
                     0);
    assert_int_equal(ASN1_TIME_compare(X509_get0_notBefore(x), X509_get0_notBefore(ca)), 0);
    X509_free(x);
}

static void refuses_to_mint_with_expired_or_not_yet_valid_ca(void **state)
{
    char err[256] = "";
    X509 *x = NULL;

    (void)state;
    assert_int_equal(sl_minter_mint_at(fx.minter, "a.sluice.test", fx.born + 3653L * DAY, &x, err,
                                       sizeof(err)),
                     SL_EINVAL);
    assert_non_null(strstr(err, "expired"));
    assert_int_equal(
            sl_minter_mint_at(fx.minter, "a.sluice.test", fx.born - 3L * DAY, &x, err, sizeof(err)),
            SL_EINVAL);
    assert_non_null(strstr(err, "not valid yet"));
    assert_null(x);
}

static void refuses_hosts_that_are_not_normalised(void **state)
{
    static const char *const bad[] = { "",
                                       "A.sluice.test",
                                       "a..b",
                                       ".a",
                                       "a.",
                                       "-a.test",
                                       "a-.test",
                                       "a_b.test",
                                       "a b.test",
                                       "[::1]",
                                       "*.sluice.test",
                                       "1.2.3.4:443",
                                       "fe80::1%eth0",
                                       "caf\xc3\xa9.test",
                                       "a\n.test",
                                       "::ffff:zz" };
    static const char *const good[] = { "a",   "xn--bcher-kva.test", "1-2.test", "localhost",
                                        "::1", "::ffff:192.0.2.1" };
    char err[256];
    char name[300];
    X509 *x = NULL;

    (void)state;
    for (size_t i = 0; i < SL_ARRAY_LEN(bad); i++) {
        err[0] = '\0';
        assert_int_equal(sl_minter_mint(fx.minter, bad[i], &x, err, sizeof(err)), SL_EINVAL);
        assert_non_null(strstr(err, "host"));
        assert_null(x);
    }
    long_name(name, 254);
    assert_int_equal(sl_minter_mint(fx.minter, name, &x, err, sizeof(err)), SL_EINVAL);
    long_name(name, 253);
    x = mint(name);
    X509_free(x);
    x = NULL;
    memset(name, 'a', 64); /* one label of 64 */
    assert_true(snprintf(name + 64, sizeof(name) - 64, ".test") > 0);
    assert_int_equal(sl_minter_mint(fx.minter, name, &x, err, sizeof(err)), SL_EINVAL);
    for (size_t i = 0; i < SL_ARRAY_LEN(good); i++) {
        x = mint(good[i]);
        X509_free(x);
    }
}

/* A CA made by hand, loaded back: where it was written, and what sl_ca_load_dir() said. */
struct handmade {
    char dir[PATH_BYTES];
    char err[512];
    struct sl_ca *ca;
};

/* Writes a CA made by hand (tests/support/pki) rather than by sl_ca_create() into tmp/`name`:
 * basicConstraints CA:TRUE, the keyUsage `ku` unless NULL, a subject key identifier when `ski`;
 * then loads it back with sl_ca_load_dir() and returns what that returns. */
static int load_handmade_ca(struct handmade *h, const char *name, bool ski, const char *ku)
{
    char path[PATH_BYTES];
    EVP_PKEY *key = sl_test_key_new();
    struct sl_test_cert_spec spec = {
        .key = key,
        .cn = "handmade",
        .serial = 7,
        .not_before_s = -2L * DAY,
        .not_after_s = 30L * DAY,
        .basic_constraints = "critical,CA:TRUE",
        .key_usage = ku,
        .subject_key_id = ski ? "hash" : NULL,
    };
    X509 *x;
    BIO *bio;

    assert_non_null(key);
    x = sl_test_cert_make(&spec);
    assert_non_null(x);
    join(h->dir, fx.tmp, name);
    assert_int_equal(mkdir(h->dir, 0700), 0);
    join(path, h->dir, SL_CA_CERT_FILE);
    write_cert(path, x);
    join(path, h->dir, SL_CA_KEY_FILE);
    bio = BIO_new_file(path, "w");
    assert_non_null(bio);
    assert_int_equal(PEM_write_bio_PrivateKey(bio, key, NULL, NULL, 0, NULL, NULL), 1);
    BIO_free(bio);
    X509_free(x);
    EVP_PKEY_free(key);
    return sl_ca_load_dir(h->dir, true, &h->ca, h->err, sizeof(h->err));
}

static void rejects_ca_whose_key_usage_forbids_signing_certificates(void **state)
{
    struct handmade h = { 0 };

    (void)state;
    assert_int_equal(load_handmade_ca(&h, "handmade-ku", true, "critical,digitalSignature"),
                     SL_EINVAL);
    assert_non_null(strstr(h.err, h.dir));
    assert_non_null(strstr(h.err, "keyCertSign"));
    assert_null(h.ca);
}

static void minter_refuses_ca_without_subject_key_identifier(void **state)
{
    struct handmade h = { 0 };
    struct sl_minter *m = NULL;

    (void)state;
    assert_int_equal(load_handmade_ca(&h, "handmade-no-ski", false, NULL), 0);
    assert_int_equal(sl_minter_create(h.ca, &m, h.err, sizeof(h.err)), SL_EINVAL);
    assert_non_null(strstr(h.err, "subject key identifier"));
    assert_null(m);
    sl_ca_destroy(h.ca);
}

static void minter_works_with_a_ca_made_elsewhere(void **state)
{
    struct handmade h = { 0 };
    struct sl_minter *m = NULL;
    X509 *x = NULL;

    (void)state;
    assert_int_equal(load_handmade_ca(&h, "handmade-ok", true, NULL), 0);
    assert_int_equal(sl_minter_create(h.ca, &m, h.err, sizeof(h.err)), 0);
    /* The minter keeps its own references: the CA may go first. */
    sl_ca_destroy(h.ca);
    assert_int_equal(sl_minter_mint(m, "elsewhere.sluice.test", &x, h.err, sizeof(h.err)), 0);
    /* Each minter has its own leaf key. */
    assert_int_not_equal(EVP_PKEY_eq(sl_minter_leaf_key(m), sl_minter_leaf_key(fx.minter)), 1);
    sl_minter_destroy(m);
    assert_int_equal(X509_check_host(x, "elsewhere.sluice.test", 0, 0, NULL), 1);
    X509_free(x);
}

/* ---- the cache ---- */

static struct sl_leaf_cache *new_cache(size_t capacity)
{
    struct sl_leaf_cache_config cfg = { .capacity = capacity };
    struct sl_leaf_cache *c = NULL;

    assert_int_equal(sl_leaf_cache_create(fx.minter, &cfg, &c), 0);
    return c;
}

static struct sl_leaf *get(struct sl_leaf_cache *c, const char *host)
{
    char err[256] = "";
    struct sl_leaf *l = NULL;
    int rc = sl_leaf_cache_get(c, host, &l, err, sizeof(err));

    if (rc != 0) {
        print_error("get %s: %s\n", host, err);
    }
    assert_int_equal(rc, 0);
    assert_non_null(l);
    assert_string_equal(sl_leaf_host(l), host);
    return l;
}

static void cache_returns_the_same_certificate_for_the_same_host(void **state)
{
    struct sl_leaf_cache *c = new_cache(0);
    struct sl_leaf_cache_stats st;
    struct sl_leaf *a;
    struct sl_leaf *b;
    struct sl_leaf *other;

    (void)state;
    a = get(c, "same.sluice.test");
    sl_leaf_cache_stats(c, &st);
    assert_int_equal(st.misses, 1);
    assert_int_equal(st.mints, 1);
    assert_int_equal(st.hits, 0);
    assert_int_equal(st.capacity, SL_LEAF_CACHE_DEFAULT_CAPACITY);

    b = get(c, "same.sluice.test");
    assert_ptr_equal(b, a);
    assert_ptr_equal(sl_leaf_cert(b), sl_leaf_cert(a));
    assert_int_equal(EVP_PKEY_eq(sl_leaf_key(a), sl_minter_leaf_key(fx.minter)), 1);
    assert_int_equal(X509_check_host(sl_leaf_cert(a), "same.sluice.test", 0, 0, NULL), 1);
    assert_null(sl_leaf_ctx(a));
    other = get(c, "other.sluice.test");
    assert_ptr_not_equal(other, a);
    sl_leaf_cache_stats(c, &st);
    assert_int_equal(st.hits, 1);
    assert_int_equal(st.misses, 2);
    assert_int_equal(st.mints, 2);
    assert_int_equal(st.entries, 2);
    assert_int_equal(st.evictions, 0);
    sl_leaf_unref(a);
    sl_leaf_unref(b);
    sl_leaf_unref(other);
    sl_leaf_cache_destroy(c);
}

static void cache_evicts_the_least_recently_used_at_capacity(void **state)
{
    static const char *const hosts[] = { "h1.sluice.test", "h2.sluice.test", "h3.sluice.test",
                                         "h4.sluice.test", "h5.sluice.test" };
    struct sl_leaf_cache *c = new_cache(4);
    struct sl_leaf_cache_stats st;
    struct sl_leaf *first[5];
    struct sl_leaf *l;

    (void)state;
    for (size_t i = 0; i < 4; i++) {
        first[i] = get(c, hosts[i]);
    }
    /* h1 is used again, so h2 is now the least recently used. */
    l = get(c, hosts[0]);
    assert_ptr_equal(l, first[0]);
    sl_leaf_unref(l);
    first[4] = get(c, hosts[4]);
    sl_leaf_cache_stats(c, &st);
    assert_int_equal(st.evictions, 1);
    assert_int_equal(st.entries, 4);
    assert_int_equal(st.mints, 5);

    /* h1 survived; h2 was evicted and comes back as a new leaf. */
    l = get(c, hosts[0]);
    assert_ptr_equal(l, first[0]);
    sl_leaf_unref(l);
    l = get(c, hosts[1]);
    assert_ptr_not_equal(l, first[1]);
    assert_int_not_equal(X509_cmp(sl_leaf_cert(l), sl_leaf_cert(first[1])), 0);
    sl_leaf_unref(l);
    sl_leaf_cache_stats(c, &st);
    assert_int_equal(st.mints, 6);
    assert_int_equal(st.evictions, 2); /* h3 made room for h2 */
    assert_int_equal(st.hits, 2);

    /* The evicted leaf we still hold stays whole. */
    assert_string_equal(sl_leaf_host(first[1]), hosts[1]);
    assert_int_equal(X509_check_host(sl_leaf_cert(first[1]), hosts[1], 0, 0, NULL), 1);
    for (size_t i = 0; i < 5; i++) {
        sl_leaf_unref(first[i]);
    }
    sl_leaf_cache_destroy(c);
}

static void cache_lookup_answers_hits_only(void **state)
{
    struct sl_leaf_cache *c = new_cache(8);
    struct sl_leaf_cache_stats st;
    char name[300];
    struct sl_leaf *a;
    struct sl_leaf *l;

    (void)state;
    assert_null(sl_leaf_cache_lookup(c, "lookup.sluice.test"));
    assert_null(sl_leaf_cache_lookup(c, ""));
    long_name(name, 254);
    assert_null(sl_leaf_cache_lookup(c, name));
    sl_leaf_cache_stats(c, &st);
    assert_int_equal(st.hits + st.misses + st.mints, 0);

    a = get(c, "lookup.sluice.test");
    l = sl_leaf_cache_lookup(c, "lookup.sluice.test");
    assert_ptr_equal(l, a);
    sl_leaf_cache_stats(c, &st);
    assert_int_equal(st.hits, 1);
    assert_int_equal(st.misses, 1);
    sl_leaf_unref(l);
    sl_leaf_unref(a);
    sl_leaf_cache_destroy(c);
}

static void cache_destroy_leaves_held_leaves_valid(void **state)
{
    struct sl_leaf_cache *c = new_cache(2);
    struct sl_leaf *l = get(c, "outlive.sluice.test");

    (void)state;
    sl_leaf_cache_destroy(c);
    assert_int_equal(X509_check_host(sl_leaf_cert(l), "outlive.sluice.test", 0, 0, NULL), 1);
    sl_leaf_unref(l);
    sl_leaf_unref(NULL);
    sl_leaf_cache_destroy(NULL);
}

static void cache_refuses_capacity_over_the_limit(void **state)
{
    struct sl_leaf_cache_config cfg = { .capacity = SL_LEAF_CACHE_MAX_CAPACITY + 1 };
    struct sl_leaf_cache *c = NULL;

    (void)state;
    assert_int_equal(sl_leaf_cache_create(fx.minter, &cfg, &c), SL_EINVAL);
    assert_null(c);
}

/* Attachment hooks: a real SSL_CTX per leaf, counted. */
struct ctx_counts {
    /* Attachments made and freed so far. */
    atomic_int made;
    atomic_int freed;
    /* Fail for this host (NULL: never). */
    const char *fail_host;
    /* Sleep this long in the hook, to hold a mint in flight. */
    long delay_ms;
};

static int make_ctx(X509 *cert, EVP_PKEY *key, void *arg, void **out)
{
    struct ctx_counts *counts = arg;
    SSL_CTX *ctx;

    if (counts->delay_ms > 0) {
        struct timespec ts = { counts->delay_ms / 1000, (counts->delay_ms % 1000) * 1000000L };

        nanosleep(&ts, NULL);
    }
    if (counts->fail_host != NULL && X509_check_host(cert, counts->fail_host, 0, 0, NULL) == 1) {
        return SL_ENOMEM;
    }
    ctx = SSL_CTX_new(TLS_server_method());
    if (ctx == NULL) {
        return SL_ENOMEM;
    }
    if (sl_test_ctx_serve(ctx, cert, key) != 0) {
        SSL_CTX_free(ctx);
        return SL_ECRYPTO;
    }
    atomic_fetch_add(&counts->made, 1);
    *out = ctx;
    return 0;
}

static void free_ctx(void *ctx, void *arg)
{
    struct ctx_counts *counts = arg;

    SSL_CTX_free(ctx);
    atomic_fetch_add(&counts->freed, 1);
}

static struct sl_leaf_cache *new_ctx_cache(size_t capacity, struct ctx_counts *counts)
{
    struct sl_leaf_cache_config cfg = {
        .capacity = capacity, .ctx_fn = make_ctx, .ctx_free_fn = free_ctx, .ctx_arg = counts
    };
    struct sl_leaf_cache *c = NULL;

    assert_int_equal(sl_leaf_cache_create(fx.minter, &cfg, &c), 0);
    return c;
}

static void cache_builds_one_attachment_per_mint_and_frees_it(void **state)
{
    struct ctx_counts counts = { 0 };
    struct sl_leaf_cache *c = new_ctx_cache(2, &counts);
    struct sl_leaf *a;
    struct sl_leaf *b;
    SSL_CTX *ctx;

    (void)state;
    a = get(c, "ctx-a.sluice.test");
    b = get(c, "ctx-a.sluice.test");
    ctx = sl_leaf_ctx(a);
    assert_non_null(ctx);
    assert_ptr_equal(sl_leaf_ctx(b), ctx);
    assert_int_equal(X509_cmp(SSL_CTX_get0_certificate(ctx), sl_leaf_cert(a)), 0);
    assert_int_equal(atomic_load(&counts.made), 1);
    sl_leaf_unref(b);

    /* Two more hosts evict ctx-a; its attachment lives while we hold the leaf. */
    sl_leaf_unref(get(c, "ctx-b.sluice.test"));
    sl_leaf_unref(get(c, "ctx-c.sluice.test"));
    assert_int_equal(atomic_load(&counts.made), 3);
    assert_int_equal(atomic_load(&counts.freed), 0);
    sl_leaf_unref(a);
    assert_int_equal(atomic_load(&counts.freed), 1);
    sl_leaf_cache_destroy(c);
    assert_int_equal(atomic_load(&counts.freed), 3);
}

static void cache_does_not_keep_a_failed_mint(void **state)
{
    struct ctx_counts counts = { .fail_host = "fail.sluice.test" };
    struct sl_leaf_cache *c = new_ctx_cache(4, &counts);
    struct sl_leaf_cache_stats st;
    struct sl_leaf *l = NULL;
    char err[256] = "";

    (void)state;
    assert_int_equal(sl_leaf_cache_get(c, "fail.sluice.test", &l, err, sizeof(err)), SL_ENOMEM);
    assert_null(l);
    assert_non_null(strstr(err, "fail.sluice.test"));
    err[0] = '\0';
    assert_int_equal(sl_leaf_cache_get(c, "Bad.Host", &l, err, sizeof(err)), SL_EINVAL);
    assert_non_null(strstr(err, "host"));
    assert_int_equal(sl_leaf_cache_get(c, "", &l, err, sizeof(err)), SL_EINVAL);
    assert_null(l);
    assert_null(sl_leaf_cache_lookup(c, "fail.sluice.test"));
    sl_leaf_cache_stats(c, &st);
    assert_int_equal(st.mint_errors, 2);
    assert_int_equal(st.entries, 0);

    /* The next request tries again, and succeeds once the hook does. */
    counts.fail_host = NULL;
    l = get(c, "fail.sluice.test");
    sl_leaf_unref(l);
    sl_leaf_cache_stats(c, &st);
    assert_int_equal(st.mints, 1);
    assert_int_equal(st.entries, 1);
    sl_leaf_cache_destroy(c);
    assert_int_equal(atomic_load(&counts.made), atomic_load(&counts.freed));
}

#define POOL_HOSTS      3000
#define MIXED_THREADS   8
#define MIXED_REQUESTS  20000
#define MIXED_CAPACITY  1000
#define SAME_HOST_DELAY 300

struct mixed_worker {
    pthread_t thread;
    /* Shared by all workers; borrowed. */
    struct sl_leaf_cache *cache;
    /* xorshift64 state, never 0. */
    uint64_t seed;
    /* Requests to make, and how many of them went wrong. */
    int requests;
    int errors;
};

static uint64_t xorshift(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void *run_mixed(void *arg)
{
    struct mixed_worker *w = arg;
    struct sl_leaf *held = NULL;
    char host[64];
    char err[256];

    for (int i = 0; i < w->requests; i++) {
        struct sl_leaf *l = NULL;
        unsigned k = (unsigned)(xorshift(&w->seed) % POOL_HOSTS);

        (void)snprintf(host, sizeof(host), "h%u.pool.sluice.test", k);
        if (sl_leaf_cache_get(w->cache, host, &l, err, sizeof(err)) != 0
            || strcmp(sl_leaf_host(l), host) != 0
            || X509_check_host(sl_leaf_cert(l), host, 0, 0, NULL) != 1) {
            w->errors++;
        }
        /* Hold each leaf a little longer, so that some are evicted while referenced. */
        sl_leaf_unref(held);
        held = l;
    }
    sl_leaf_unref(held);
    return NULL;
}

static void cache_serves_eight_threads_on_mixed_hosts(void **state)
{
    struct sl_leaf_cache *c = new_cache(MIXED_CAPACITY);
    struct mixed_worker w[MIXED_THREADS];
    struct sl_leaf_cache_stats st;

    (void)state;
    for (int i = 0; i < MIXED_THREADS; i++) {
        w[i] = (struct mixed_worker){ .cache = c,
                                      .seed = 0x9e3779b97f4a7c15ULL * (uint64_t)(i + 1),
                                      .requests = MIXED_REQUESTS / MIXED_THREADS };
        assert_int_equal(pthread_create(&w[i].thread, NULL, run_mixed, &w[i]), 0);
    }
    for (int i = 0; i < MIXED_THREADS; i++) {
        assert_int_equal(pthread_join(w[i].thread, NULL), 0);
        assert_int_equal(w[i].errors, 0);
    }
    sl_leaf_cache_stats(c, &st);
    assert_int_equal(st.hits + st.misses, MIXED_REQUESTS);
    assert_int_equal(st.mint_errors, 0);
    assert_true(st.hits > 0);
    assert_true(st.evictions > 0);
    assert_true(st.mints <= st.misses);
    assert_int_equal(st.entries, MIXED_CAPACITY);
    assert_int_equal(st.mints - st.evictions, st.entries);
    sl_leaf_cache_destroy(c);
}

struct same_worker {
    pthread_t thread;
    /* Shared by all workers; borrowed. */
    struct sl_leaf_cache *cache;
    /* Releases every worker at once; borrowed. */
    pthread_barrier_t *start;
    /* The answer: a reference the test drops, and the result code. */
    struct sl_leaf *leaf;
    int rc;
};

static void *run_same(void *arg)
{
    struct same_worker *w = arg;
    char err[256];

    (void)pthread_barrier_wait(w->start);
    w->rc = sl_leaf_cache_get(w->cache, "together.sluice.test", &w->leaf, err, sizeof(err));
    return NULL;
}

static void concurrent_misses_for_one_host_mint_once(void **state)
{
    /* The hook holds the mint in flight long enough for every thread to arrive. */
    struct ctx_counts counts = { .delay_ms = SAME_HOST_DELAY };
    struct sl_leaf_cache *c = new_ctx_cache(16, &counts);
    struct same_worker w[MIXED_THREADS];
    struct sl_leaf_cache_stats st;
    pthread_barrier_t start;

    (void)state;
    assert_int_equal(pthread_barrier_init(&start, NULL, MIXED_THREADS), 0);
    for (int i = 0; i < MIXED_THREADS; i++) {
        w[i] = (struct same_worker){ .cache = c, .start = &start };
        assert_int_equal(pthread_create(&w[i].thread, NULL, run_same, &w[i]), 0);
    }
    for (int i = 0; i < MIXED_THREADS; i++) {
        assert_int_equal(pthread_join(w[i].thread, NULL), 0);
        assert_int_equal(w[i].rc, 0);
        assert_ptr_equal(w[i].leaf, w[0].leaf);
    }
    assert_int_equal(pthread_barrier_destroy(&start), 0);
    sl_leaf_cache_stats(c, &st);
    assert_int_equal(st.mints, 1);
    assert_int_equal(atomic_load(&counts.made), 1);
    assert_int_equal(st.hits + st.misses, MIXED_THREADS);
    /* Threads that arrived during the mint waited for it (and count as misses). */
    assert_true(st.misses >= 2);
    for (int i = 0; i < MIXED_THREADS; i++) {
        sl_leaf_unref(w[i].leaf);
    }
    sl_leaf_cache_destroy(c);
    assert_int_equal(atomic_load(&counts.freed), 1);
}

static void concurrent_waiters_share_a_failed_mint(void **state)
{
    struct ctx_counts counts = { .delay_ms = SAME_HOST_DELAY, .fail_host = "together.sluice.test" };
    struct sl_leaf_cache *c = new_ctx_cache(16, &counts);
    struct same_worker w[4];
    struct sl_leaf_cache_stats st;
    pthread_barrier_t start;

    (void)state;
    assert_int_equal(pthread_barrier_init(&start, NULL, 4), 0);
    for (int i = 0; i < 4; i++) {
        w[i] = (struct same_worker){ .cache = c, .start = &start };
        assert_int_equal(pthread_create(&w[i].thread, NULL, run_same, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        assert_int_equal(pthread_join(w[i].thread, NULL), 0);
        assert_int_equal(w[i].rc, SL_ENOMEM);
        assert_null(w[i].leaf);
    }
    assert_int_equal(pthread_barrier_destroy(&start), 0);
    sl_leaf_cache_stats(c, &st);
    assert_int_equal(st.mints, 0);
    assert_int_equal(st.entries, 0);
    assert_true(st.mint_errors >= 1);
    assert_true(st.mint_errors < 4); /* the threads that waited got the first one's error */
    sl_leaf_cache_destroy(c);
}

/* Fails the 1st, 2nd, ... allocation of our own (OpenSSL allocates through its own allocator, so
 * its failures are not swept) through load, minter, cache and a mint; each step must fail cleanly
 * with SL_ENOMEM and leak nothing (LSan checks in the sanitizer build). */
static int load_mint_and_cache_once(void)
{
    char err[256] = "";
    struct sl_ca *ca = NULL;
    struct sl_minter *m = NULL;
    struct sl_leaf_cache *c = NULL;
    struct sl_leaf *l = NULL;
    int rc;

    rc = sl_ca_load_dir(fx.dir, true, &ca, err, sizeof(err));
    if (rc < 0) {
        return rc;
    }
    rc = sl_minter_create(ca, &m, err, sizeof(err));
    sl_ca_destroy(ca);
    if (rc < 0) {
        return rc;
    }
    rc = sl_leaf_cache_create(m, NULL, &c);
    if (rc == 0) {
        rc = sl_leaf_cache_get(c, "sweep.sluice.test", &l, err, sizeof(err));
        sl_leaf_unref(l);
        sl_leaf_cache_destroy(c);
    }
    sl_minter_destroy(m);
    return rc;
}

static void survives_allocation_failures(void **state)
{
    long n;

    (void)state;
    for (n = 1; n < 100; n++) {
        int rc;

        sl_mem_fail_after(n);
        rc = load_mint_and_cache_once();
        if (sl_mem_failures() == 0) {
            sl_mem_fail_after(0);
            assert_int_equal(rc, 0);
            break;
        }
        sl_mem_fail_after(0);
        assert_int_equal(rc, SL_ENOMEM);
    }
    assert_true(n > 1 && n < 100);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ca_write_creates_dir_0700_key_0600_and_cert_0644),
        cmocka_unit_test(ca_write_refuses_to_overwrite_without_force),
        cmocka_unit_test(ca_write_replaces_with_force),
        cmocka_unit_test(ca_write_refuses_a_file_in_place_of_the_directory),
        cmocka_unit_test(loads_back_the_ca_it_wrote),
        cmocka_unit_test(two_cas_have_different_subjects_and_serials),
        cmocka_unit_test(ca_passes_strict_verification_as_its_own_anchor),
        cmocka_unit_test(ca_pem_round_trips_through_openssl),
        cmocka_unit_test(rejects_key_that_does_not_match),
        cmocka_unit_test(rejects_garbage_files),
        cmocka_unit_test(rejects_missing_and_unreadable_files),
        cmocka_unit_test(rejects_certificate_that_is_not_a_ca),
        cmocka_unit_test(rejects_key_file_as_certificate_and_certificate_as_key),
        cmocka_unit_test(refuses_encrypted_key_without_prompting),
        cmocka_unit_test(loads_certificate_alone_or_both_from_one_file),
        cmocka_unit_test(mints_leaves_that_openssl_verifies_for_names),
        cmocka_unit_test(mints_leaves_that_openssl_verifies_for_ip_literals),
        cmocka_unit_test(leaf_carries_the_extensions_strict_clients_demand),
        cmocka_unit_test(leaf_for_long_name_has_no_cn_and_a_critical_san),
        cmocka_unit_test(clamps_leaf_validity_inside_the_ca),
        cmocka_unit_test(refuses_to_mint_with_expired_or_not_yet_valid_ca),
        cmocka_unit_test(refuses_hosts_that_are_not_normalised),
        cmocka_unit_test(rejects_ca_whose_key_usage_forbids_signing_certificates),
        cmocka_unit_test(minter_refuses_ca_without_subject_key_identifier),
        cmocka_unit_test(minter_works_with_a_ca_made_elsewhere),
        cmocka_unit_test(cache_returns_the_same_certificate_for_the_same_host),
        cmocka_unit_test(cache_evicts_the_least_recently_used_at_capacity),
        cmocka_unit_test(cache_lookup_answers_hits_only),
        cmocka_unit_test(cache_destroy_leaves_held_leaves_valid),
        cmocka_unit_test(cache_refuses_capacity_over_the_limit),
        cmocka_unit_test(cache_builds_one_attachment_per_mint_and_frees_it),
        cmocka_unit_test(cache_does_not_keep_a_failed_mint),
        cmocka_unit_test(cache_serves_eight_threads_on_mixed_hosts),
        cmocka_unit_test(concurrent_misses_for_one_host_mint_once),
        cmocka_unit_test(concurrent_waiters_share_a_failed_mint),
        cmocka_unit_test(survives_allocation_failures),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
