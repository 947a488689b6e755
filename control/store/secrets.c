/* SPDX-License-Identifier: Apache-2.0 */
#include "control/store/secrets.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "base/mem.h"

/* A key text longer than this is refused before decoding; shorter ones are decoded so that the
 * message can say how many bytes they hold. */
#define KEY_TEXT_MAX 256
/* Room for what KEY_TEXT_MAX base64 characters can decode to. */
#define KEY_DECODED_MAX ((size_t)KEY_TEXT_MAX / 4 * 3)
/* The sealed value's overhead before base64: nonce and authenticator. */
#define SEAL_OVERHEAD (crypto_secretbox_NONCEBYTES + crypto_secretbox_MACBYTES)
/* A plaintext longer than this is refused, so that the size arithmetic cannot overflow. */
#define SEAL_PLAINTEXT_MAX (SIZE_MAX / 4 - 64)

_Static_assert(SL_SECRETS_KEY_BYTES == crypto_secretbox_KEYBYTES, "secretbox key size");
_Static_assert(SL_SECRETS_KEY_TEXT_LEN + 1
                       == sodium_base64_ENCODED_LEN(SL_SECRETS_KEY_BYTES,
                                                    sodium_base64_VARIANT_ORIGINAL),
               "key text length");
_Static_assert(SL_TOKEN_SIZE - 3
                       == sodium_base64_ENCODED_LEN(32, sodium_base64_VARIANT_URLSAFE_NO_PADDING),
               "token length");
_Static_assert(SL_TOKEN_HASH_BYTES >= crypto_generichash_BYTES_MIN
                       && SL_TOKEN_HASH_BYTES <= crypto_generichash_BYTES_MAX,
               "token hash size");

struct sl_secrets {
    /* SL_SECRETS_KEY_BYTES bytes in sodium_malloc memory, read-only after load. Owned. */
    unsigned char *key;
};

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int init_rc;

static void init_sodium(void)
{
    init_rc = sodium_init() < 0 ? SL_ECRYPTO : 0;
}

/* sodium_init() must run before any other libsodium call; pthread_once makes the first call
 * from any thread the only one. */
static int ensure_init(void)
{
    if (pthread_once(&init_once, init_sodium) != 0) {
        return SL_ECRYPTO;
    }
    return init_rc;
}

/*
 * Decodes the key text (`n` bytes at `text`, which may be a secret held anywhere) into a new
 * secrets object. `what` names the source in messages. Every message describes the text's
 * shape only (its length, that it is not base64); none quotes any part of it.
 */
static int key_from_text(const char *text, size_t n, const char *what, struct sl_secrets **out,
                         char *err, size_t errlen)
{
    unsigned char *bin = NULL;
    struct sl_secrets *s = NULL;
    size_t bin_len = 0;
    int rc;

    rc = ensure_init();
    if (rc < 0) {
        sl_errf(err, errlen, "cannot initialise libsodium");
        return rc;
    }
    if (n == 0) {
        sl_errf(err, errlen, "%s is empty; it must be the base64 text of %d random bytes", what,
                SL_SECRETS_KEY_BYTES);
        return SL_EINVAL;
    }
    if (n > KEY_TEXT_MAX) {
        sl_errf(err, errlen, "%s is too long (%zu characters); a key is %d base64 characters", what,
                n, SL_SECRETS_KEY_TEXT_LEN);
        return SL_EINVAL;
    }
    bin = sodium_malloc(KEY_DECODED_MAX);
    if (bin == NULL) {
        sl_errf(err, errlen, "cannot load %s: out of memory", what);
        return SL_ENOMEM;
    }
    /* No characters to ignore and no end pointer: the whole text must be canonical base64. */
    if (sodium_base642bin(bin, KEY_DECODED_MAX, text, n, NULL, &bin_len, NULL,
                          sodium_base64_VARIANT_ORIGINAL)
        != 0) {
        sl_errf(err, errlen,
                "%s is not valid base64 (standard alphabet with '=' padding, no spaces); a key "
                "is %d characters",
                what, SL_SECRETS_KEY_TEXT_LEN);
        rc = SL_EINVAL;
        goto fail_free_bin;
    }
    if (bin_len != SL_SECRETS_KEY_BYTES) {
        sl_errf(err, errlen,
                "%s decodes to %zu bytes; the key must be exactly %d bytes (%d base64 "
                "characters)",
                what, bin_len, SL_SECRETS_KEY_BYTES, SL_SECRETS_KEY_TEXT_LEN);
        rc = SL_EINVAL;
        goto fail_free_bin;
    }
    s = sl_calloc(1, sizeof(*s));
    if (s == NULL) {
        sl_errf(err, errlen, "cannot load %s: out of memory", what);
        rc = SL_ENOMEM;
        goto fail_free_bin;
    }
    s->key = sodium_malloc(SL_SECRETS_KEY_BYTES);
    if (s->key == NULL) {
        sl_errf(err, errlen, "cannot load %s: out of memory", what);
        rc = SL_ENOMEM;
        goto fail_free_s;
    }
    memcpy(s->key, bin, SL_SECRETS_KEY_BYTES);
    if (sodium_mprotect_readonly(s->key) != 0) {
        sl_errf(err, errlen, "cannot protect the key's memory");
        rc = SL_ECRYPTO;
        goto fail_free_key;
    }
    sodium_free(bin);
    *out = s;
    return 0;

fail_free_key:
    sodium_free(s->key);
fail_free_s:
    sl_free(s);
fail_free_bin:
    /* sodium_free wipes the memory before releasing it. */
    sodium_free(bin);
    return rc;
}

int sl_secrets_create_from_base64(const char *text, struct sl_secrets **out, char *err,
                                  size_t errlen)
{
    return key_from_text(text, strlen(text), "the encryption key", out, err, errlen);
}

/* Reads at most `cap` bytes of `fd` into `p`; returns the count or -1 with errno set. */
static ssize_t read_some(int fd, unsigned char *p, size_t cap)
{
    size_t got = 0;

    while (got < cap) {
        ssize_t r = read(fd, p + got, cap - got);

        if (r == -1) {
            if (errno == EINTR) {
                continue;
            }
            return -1;
        }
        if (r == 0) {
            break;
        }
        got += (size_t)r;
    }
    return (ssize_t)got;
}

/* Checks the opened key file: a regular file that group and others cannot touch. */
static int check_key_file(int fd, const char *path, char *err, size_t errlen)
{
    struct stat st;

    if (fstat(fd, &st) == -1) {
        sl_errf(err, errlen, "cannot stat %s: %s", path, sl_strerror(-errno));
        return SL_EIO;
    }
    if (!S_ISREG(st.st_mode)) {
        sl_errf(err, errlen, "%s is not a regular file", path);
        return SL_EINVAL;
    }
    /* Stricter than "not readable by others": a key others may write could be swapped. */
    if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
        sl_errf(err, errlen,
                "%s is accessible to group or others (mode %04o); the key file must be mode "
                "0600 (chmod 600 %s)",
                path, (unsigned)(st.st_mode & 07777), path);
        return SL_EINVAL;
    }
    return 0;
}

int sl_secrets_load_file(const char *path, struct sl_secrets **out, char *err, size_t errlen)
{
    unsigned char *text = NULL;
    ssize_t got;
    size_t n;
    int fd;
    int rc;

    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd == -1) {
        if (errno == ENOENT) {
            sl_errf(err, errlen, "%s does not exist", path);
            return SL_ENOTFOUND;
        }
        sl_errf(err, errlen, "cannot open %s: %s", path, sl_strerror(-errno));
        return SL_EIO;
    }
    rc = check_key_file(fd, path, err, errlen);
    if (rc < 0) {
        goto fail_close;
    }
    rc = ensure_init();
    if (rc < 0) {
        sl_errf(err, errlen, "cannot initialise libsodium");
        goto fail_close;
    }
    /* One byte more than the longest acceptable text (a newline), and one more to notice a
     * file that is longer still. */
    text = sodium_malloc(KEY_TEXT_MAX + 2);
    if (text == NULL) {
        sl_errf(err, errlen, "cannot load %s: out of memory", path);
        rc = SL_ENOMEM;
        goto fail_close;
    }
    got = read_some(fd, text, KEY_TEXT_MAX + 2);
    if (got == -1) {
        sl_errf(err, errlen, "cannot read %s: %s", path, sl_strerror(-errno));
        rc = SL_EIO;
        goto fail_free_text;
    }
    n = (size_t)got;
    if (n > 0 && text[n - 1] == '\n') {
        n--;
    }
    if (n > KEY_TEXT_MAX) {
        sl_errf(err, errlen, "%s is too long; a key file holds %d base64 characters", path,
                SL_SECRETS_KEY_TEXT_LEN);
        rc = SL_EINVAL;
        goto fail_free_text;
    }
    rc = key_from_text((const char *)text, n, path, out, err, errlen);
fail_free_text:
    sodium_free(text);
fail_close:
    (void)close(fd);
    return rc;
}

int sl_secrets_load(const char *data_dir, struct sl_secrets **out, enum sl_secrets_source *source,
                    char *err, size_t errlen)
{
    const char *env = getenv(SL_SECRETS_KEY_ENV);
    char path[PATH_MAX];
    int n;
    int rc;

    if (env != NULL) {
        rc = key_from_text(env, strlen(env), SL_SECRETS_KEY_ENV, out, err, errlen);
        if (rc == 0 && source != NULL) {
            *source = SL_SECRETS_SOURCE_ENV;
        }
        return rc;
    }
    n = snprintf(path, sizeof(path), "%s/%s", data_dir, SL_SECRETS_KEY_FILE);
    if (n < 0 || (size_t)n >= sizeof(path)) {
        sl_errf(err, errlen, "the data directory's path is too long");
        return SL_EINVAL;
    }
    rc = sl_secrets_load_file(path, out, err, errlen);
    if (rc == SL_ENOTFOUND) {
        sl_errf(err, errlen, "no encryption key: %s is unset and %s does not exist",
                SL_SECRETS_KEY_ENV, path);
    }
    if (rc == 0 && source != NULL) {
        *source = SL_SECRETS_SOURCE_FILE;
    }
    return rc;
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);

        if (w == -1) {
            if (errno == EINTR) {
                continue;
            }
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* fsync()s the directory that holds `path`, so that the new name survives a crash. */
static int sync_parent_dir(const char *path)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    size_t n;
    int fd;
    int rc = 0;

    if (slash == NULL) {
        memcpy(dir, ".", 2);
    } else {
        n = slash == path ? 1 : (size_t)(slash - path);
        if (n >= sizeof(dir)) {
            errno = ENAMETOOLONG;
            return -1;
        }
        memcpy(dir, path, n);
        dir[n] = '\0';
    }
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd == -1) {
        return -1;
    }
    if (fsync(fd) == -1) {
        rc = -1;
    }
    (void)close(fd);
    return rc;
}

/* Writes the `n` bytes at `text` to a new file made from the template `tmp` (mkstemp rewrites
 * it): mode 0600, synced to disk. On failure the file is removed again. */
static int write_temp_file(char *tmp, const char *text, size_t n, char *err, size_t errlen)
{
    /* mkstemp creates the file with mode 0600; fchmod says so explicitly. */
    int fd = mkstemp(tmp);

    if (fd == -1) {
        sl_errf(err, errlen, "cannot create a temporary file %s: %s", tmp, sl_strerror(-errno));
        return SL_EIO;
    }
    if (fchmod(fd, S_IRUSR | S_IWUSR) == -1 || write_all(fd, text, n) == -1 || fsync(fd) == -1) {
        sl_errf(err, errlen, "cannot write %s: %s", tmp, sl_strerror(-errno));
        (void)close(fd);
        (void)unlink(tmp);
        return SL_EIO;
    }
    if (close(fd) == -1) {
        sl_errf(err, errlen, "cannot write %s: %s", tmp, sl_strerror(-errno));
        (void)unlink(tmp);
        return SL_EIO;
    }
    return 0;
}

int sl_secrets_generate_key_file(const char *path, char *err, size_t errlen)
{
    /* The key, then its text: 44 characters, a newline and the terminator. */
    enum {
        TEXT_SIZE = SL_SECRETS_KEY_TEXT_LEN + 2
    };

    char tmp[PATH_MAX];
    unsigned char *key;
    char *text;
    int n;
    int rc;

    rc = ensure_init();
    if (rc < 0) {
        sl_errf(err, errlen, "cannot initialise libsodium");
        return rc;
    }
    n = snprintf(tmp, sizeof(tmp), "%s.tmp.XXXXXX", path);
    if (n < 0 || (size_t)n >= sizeof(tmp)) {
        sl_errf(err, errlen, "the key file's path is too long");
        return SL_EINVAL;
    }
    key = sodium_malloc(SL_SECRETS_KEY_BYTES + TEXT_SIZE);
    if (key == NULL) {
        sl_errf(err, errlen, "cannot create %s: out of memory", path);
        return SL_ENOMEM;
    }
    text = (char *)key + SL_SECRETS_KEY_BYTES;
    randombytes_buf(key, SL_SECRETS_KEY_BYTES);
    (void)sodium_bin2base64(text, TEXT_SIZE, key, SL_SECRETS_KEY_BYTES,
                            sodium_base64_VARIANT_ORIGINAL);
    text[SL_SECRETS_KEY_TEXT_LEN] = '\n';
    rc = write_temp_file(tmp, text, SL_SECRETS_KEY_TEXT_LEN + 1, err, errlen);
    /* sodium_free wipes the key and its text. */
    sodium_free(key);
    if (rc < 0) {
        return rc;
    }
    if (link(tmp, path) == -1) {
        if (errno == EEXIST) {
            sl_errf(err, errlen, "%s exists already; it was left as it is", path);
            rc = SL_EEXIST;
        } else {
            sl_errf(err, errlen, "cannot create %s: %s", path, sl_strerror(-errno));
            rc = SL_EIO;
        }
        (void)unlink(tmp);
        return rc;
    }
    (void)unlink(tmp);
    if (sync_parent_dir(path) == -1) {
        sl_errf(err, errlen, "wrote %s but cannot sync its directory: %s", path,
                sl_strerror(-errno));
        return SL_EIO;
    }
    return 0;
}

void sl_secrets_destroy(struct sl_secrets *s)
{
    if (s == NULL) {
        return;
    }
    /* sodium_free makes the page writable again and wipes it before unmapping. */
    sodium_free(s->key);
    sl_free(s);
}

int sl_secrets_seal(const struct sl_secrets *s, const void *p, size_t n, struct sl_buf *out)
{
    static const unsigned char empty[1];
    unsigned char *raw;
    size_t raw_len;
    size_t text_size;
    char *text;
    int rc;

    SL_TRY(ensure_init());
    SL_ENSURE(n <= SEAL_PLAINTEXT_MAX && n <= crypto_secretbox_MESSAGEBYTES_MAX, SL_ETOOBIG);
    if (p == NULL) {
        SL_ENSURE(n == 0, SL_EINVAL);
        p = empty;
    }
    raw_len = SEAL_OVERHEAD + n;
    text_size = sodium_base64_ENCODED_LEN(raw_len, sodium_base64_VARIANT_ORIGINAL);
    /* One block for the binary and its text; it never holds plaintext. */
    raw = sl_malloc(raw_len + text_size);
    if (raw == NULL) {
        return SL_ENOMEM;
    }
    text = (char *)raw + raw_len;
    randombytes_buf(raw, crypto_secretbox_NONCEBYTES);
    if (crypto_secretbox_easy(raw + crypto_secretbox_NONCEBYTES, p, n, raw, s->key) != 0) {
        rc = SL_ECRYPTO;
        goto done;
    }
    (void)sodium_bin2base64(text, text_size, raw, raw_len, sodium_base64_VARIANT_ORIGINAL);
    rc = sl_buf_append(out, text, text_size - 1);
done:
    sl_free(raw);
    return rc;
}

int sl_secrets_open(const struct sl_secrets *s, const char *sealed, size_t n, struct sl_buf *out)
{
    unsigned char *bin;
    size_t bin_cap;
    size_t bin_len = 0;
    int rc;

    SL_TRY(ensure_init());
    SL_ENSURE(n <= SEAL_PLAINTEXT_MAX, SL_ETOOBIG);
    bin_cap = n / 4 * 3 + 3;
    bin = sl_malloc(bin_cap);
    if (bin == NULL) {
        return SL_ENOMEM;
    }
    if (sodium_base642bin(bin, bin_cap, sealed, n, NULL, &bin_len, NULL,
                          sodium_base64_VARIANT_ORIGINAL)
                != 0
        || bin_len < SEAL_OVERHEAD) {
        rc = SL_EINVAL;
        goto done;
    }
    /* Decrypted in place: libsodium allows the message to overlap the ciphertext. */
    if (crypto_secretbox_open_easy(bin + crypto_secretbox_NONCEBYTES,
                                   bin + crypto_secretbox_NONCEBYTES,
                                   bin_len - crypto_secretbox_NONCEBYTES, bin, s->key)
        != 0) {
        rc = SL_ECRYPTO;
        goto done;
    }
    rc = sl_buf_append(out, bin + crypto_secretbox_NONCEBYTES, bin_len - SEAL_OVERHEAD);
done:
    sodium_memzero(bin, bin_cap);
    sl_free(bin);
    return rc;
}

int sl_uuid_v4(char out[SL_UUID_LEN + 1])
{
    static const char hex[] = "0123456789abcdef";
    uint8_t b[16];
    size_t o = 0;

    SL_TRY(ensure_init());
    randombytes_buf(b, sizeof(b));
    /* RFC 9562 §5.4: version 4 in the high nibble of byte 6, variant 10 in byte 8. */
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x40);
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80);
    for (size_t i = 0; i < sizeof(b); i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) {
            out[o++] = '-';
        }
        out[o++] = hex[b[i] >> 4];
        out[o++] = hex[b[i] & 0x0f];
    }
    out[o] = '\0';
    return 0;
}

int sl_token_new(char out[SL_TOKEN_SIZE])
{
    uint8_t raw[32];

    SL_TRY(ensure_init());
    randombytes_buf(raw, sizeof(raw));
    (void)sodium_bin2base64(out + 3, SL_TOKEN_SIZE - 3, raw, sizeof(raw),
                            sodium_base64_VARIANT_URLSAFE_NO_PADDING);
    out[0] = 's';
    out[1] = 'l';
    out[2] = '_';
    sodium_memzero(raw, sizeof(raw));
    return 0;
}

bool sl_token_is_wellformed(const char *token)
{
    if (strncmp(token, "sl_", 3) != 0) {
        return false;
    }
    for (size_t i = 3; i < SL_TOKEN_LEN; i++) {
        char c = token[i];
        bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')
                  || c == '-' || c == '_';

        if (!ok) {
            return false;
        }
    }
    return token[SL_TOKEN_LEN] == '\0';
}

int sl_token_hash(const char *token, uint8_t out[SL_TOKEN_HASH_BYTES])
{
    SL_TRY(ensure_init());
    if (crypto_generichash(out, SL_TOKEN_HASH_BYTES, (const unsigned char *)token, strlen(token),
                           NULL, 0)
        != 0) {
        return SL_ECRYPTO;
    }
    return 0;
}

bool sl_token_hash_equal(const uint8_t a[SL_TOKEN_HASH_BYTES], const uint8_t b[SL_TOKEN_HASH_BYTES])
{
    return sodium_memcmp(a, b, SL_TOKEN_HASH_BYTES) == 0;
}
