/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/store/secrets.h - the control plane's encryption key, sealed values, API tokens and
 * random identifiers (docs/control-plane.md "Secrets" and "Tokens"), on libsodium.
 *
 * The key is 32 bytes, written as standard base64 with '=' padding (44 characters). It comes
 * from SLUICE_ENCRYPTION_KEY, else from DATA/encryption.key (the same text, one trailing newline
 * allowed; the file must not be accessible to group or others). It is held in sodium_malloc
 * memory that is read-only once loaded and wiped when destroyed. No message and no log line of
 * this module ever contains key material, sealed plaintext or a token.
 *
 * A sealed value is base64(nonce[24] || crypto_secretbox_easy(value)) with a fresh random nonce
 * per value, so equal plaintexts seal to different texts.
 *
 * Lifecycle: sl_secrets_load() (or _load_file, _create_from_base64) -> sl_secrets_seal() /
 * sl_secrets_open() from any number of threads -> sl_secrets_destroy().
 *
 * Every function initialises libsodium on first use (once, thread-safe) and returns SL_ECRYPTO
 * when libsodium cannot be initialised.
 */
#ifndef SL_CONTROL_STORE_SECRETS_H
#define SL_CONTROL_STORE_SECRETS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"
#include "control/store/model.h"

/* Bytes of the encryption key. */
#define SL_SECRETS_KEY_BYTES 32
/* Characters of the key's base64 text (with padding, without a newline). */
#define SL_SECRETS_KEY_TEXT_LEN 44
/* The environment variable that holds the key, and the key file's name in the data dir. */
#define SL_SECRETS_KEY_ENV  "SLUICE_ENCRYPTION_KEY"
#define SL_SECRETS_KEY_FILE "encryption.key"

/* An API token: "sl_" + base64url without padding of 32 random bytes (43 characters). */
#define SL_TOKEN_LEN 46
/* Storage for a token including its terminator. */
#define SL_TOKEN_SIZE (SL_TOKEN_LEN + 1)
/* Bytes of a token's hash (BLAKE2b-256). */
#define SL_TOKEN_HASH_BYTES 32

struct sl_secrets; /* opaque */

/* Where sl_secrets_load() found the key. */
enum sl_secrets_source {
    SL_SECRETS_SOURCE_ENV = 0,
    SL_SECRETS_SOURCE_FILE,
};

/*
 * Loads the key the way the daemon does: from SLUICE_ENCRYPTION_KEY when that variable is set
 * (even to ""), else from `data_dir`/encryption.key. Reads the environment, so call it while
 * only one thread runs (at start-up). `source` (may be NULL) tells where the key came from.
 * Returns 0 and `*out` (owned by the caller; sl_secrets_destroy), or:
 *   SL_ENOTFOUND  the variable is unset and the file does not exist (`sluice up` then creates
 *                 one with sl_secrets_generate_key_file());
 *   SL_EINVAL     the key is malformed (not base64, or not 32 bytes), the file is accessible to
 *                 group or others, or it is not a regular file;
 *   SL_EIO        the file exists but cannot be read; SL_ENOMEM; SL_ECRYPTO.
 * On every error `err` says what is wrong, naming the variable or the file, and `*out` is
 * untouched.
 */
SL_MUST_CHECK int sl_secrets_load(const char *data_dir, struct sl_secrets **out,
                                  enum sl_secrets_source *source, char *err, size_t errlen);

/* Loads the key from the file at `path`. Results as sl_secrets_load(). */
SL_MUST_CHECK int sl_secrets_load_file(const char *path, struct sl_secrets **out, char *err,
                                       size_t errlen);

/*
 * Makes a key from its base64 text (`text`, NUL-terminated, borrowed; no whitespace allowed).
 * Returns 0 and `*out`, SL_EINVAL (malformed, `err` says how), SL_ENOMEM or SL_ECRYPTO.
 */
SL_MUST_CHECK int sl_secrets_create_from_base64(const char *text, struct sl_secrets **out,
                                                char *err, size_t errlen);

/*
 * Writes a new random key to `path` (mode 0600), atomically: the text goes to a temporary file
 * in the same directory, which is fsync'd and then linked into place, and the directory is
 * fsync'd. link(2) rather than rename(2) because an existing key must never be replaced: the
 * values sealed with it would be lost. Returns 0, SL_EEXIST when `path` exists (it is left as
 * it was), SL_EIO (`err` names the file and the reason), SL_ENOMEM or SL_ECRYPTO.
 */
SL_MUST_CHECK int sl_secrets_generate_key_file(const char *path, char *err, size_t errlen);

/* Wipes and frees the key. NULL is fine. */
void sl_secrets_destroy(struct sl_secrets *s);

/*
 * Seals the `n` bytes at `p` (borrowed; NULL is fine when n is 0) and appends the sealed text
 * (base64, no terminator counted) to `out`. Thread-safe. Returns 0, SL_ETOOBIG (past the
 * buffer's cap), SL_ENOMEM or SL_ECRYPTO; on error `out` is unchanged.
 */
SL_MUST_CHECK int sl_secrets_seal(const struct sl_secrets *s, const void *p, size_t n,
                                  struct sl_buf *out);

/*
 * Opens the sealed text `sealed` (`n` bytes, borrowed) and appends the plaintext to `out`.
 * Thread-safe. Returns 0, or:
 *   SL_EINVAL   `sealed` is not base64 or too short to be a sealed value;
 *   SL_ECRYPTO  it does not authenticate under this key (another key, or it was altered);
 *   SL_ETOOBIG, SL_ENOMEM.
 * On error `out` is unchanged and no plaintext is left in memory this module allocated.
 */
SL_MUST_CHECK int sl_secrets_open(const struct sl_secrets *s, const char *sealed, size_t n,
                                  struct sl_buf *out);

/*
 * Writes a random (version 4) UUID as SL_UUID_LEN lower-case characters plus the terminator
 * into `out`. Returns 0 or SL_ECRYPTO.
 */
SL_MUST_CHECK int sl_uuid_v4(char out[SL_UUID_LEN + 1]);

/* Writes a new API token into `out` (SL_TOKEN_LEN characters plus the terminator). The caller
 * shows it once and stores only its hash. Returns 0 or SL_ECRYPTO. */
SL_MUST_CHECK int sl_token_new(char out[SL_TOKEN_SIZE]);

/* True when `token` has the shape of a sluice API token ("sl_" and 43 base64url characters). */
bool sl_token_is_wellformed(const char *token);

/* Hashes the token text (any length, NUL-terminated, borrowed) with BLAKE2b-256 into `out`.
 * Returns 0 or SL_ECRYPTO. */
SL_MUST_CHECK int sl_token_hash(const char *token, uint8_t out[SL_TOKEN_HASH_BYTES]);

/* Compares two token hashes in constant time. */
bool sl_token_hash_equal(const uint8_t a[SL_TOKEN_HASH_BYTES],
                         const uint8_t b[SL_TOKEN_HASH_BYTES]);

#endif
