/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/env/environment.h - the environments API of docs/reference/api.md §5.1 without the
 * database: request validation, keep-on-resave, the stored (sealed) form and the API rendering.
 *
 * A POST or PUT goes through three steps:
 *
 *   sl_env_spec_parse()      body -> struct sl_env_spec: every rule that needs no database;
 *   (the caller)             permission for the scope, uniqueness, loading the previous row;
 *   sl_env_spec_to_row()     spec + previous row -> struct sl_env_row with env_json and
 *                            egress_json sealed value by value (docs/control-plane.md);
 *
 * and a row goes back out with sl_env_render() (one environment) or sl_env_render_item() (a
 * list entry). Nothing here touches SQLite, HTTP or libuv, and nothing depends on the secrets
 * module: values are sealed and opened through a struct sl_env_sealer that the caller fills.
 *
 * The request document (unknown fields are errors; JSON null means "absent" for every optional
 * field):
 *   name          required; 1-128 characters (UTF-8 code points), no control characters (C0,
 *                 DEL, C1), no white space at either end, not shaped like a UUID (so that an
 *                 ID-OR-NAME lookup is never ambiguous). Kept verbatim: quotes, SQL
 *                 metacharacters and non-ASCII text are fine.
 *   description   optional string, at most 4096 characters, no control characters but tab, LF
 *                 and CR. Absent = "".
 *   scope         optional "user" (the default) or "global".
 *   base_image    required image reference, at most 255 bytes:
 *                 [domain[:port]/]path[:tag][@algo:hex] with lowercase path components
 *                 (docker's reference grammar).
 *   image_pull    optional "if-missing" (the default: pull base_image when the runtime lacks
 *                 it) or "always" (pull at every sandbox start).
 *   registry_auth optional {username, password} for base_image's registry: username 1-255
 *                 bytes, password 1-4096 bytes, neither with control characters. The password
 *                 is sealed like a secret and never rendered (`has_value`); one left out keeps
 *                 the stored password (there must be one, else 422; it must still open, else
 *                 409). null or absent: none.
 *   cpus          optional number > 0 and <= 1024 with at most two decimals.
 *   memory        optional text: an integer without leading zeros and the unit MiB or GiB,
 *                 > 0 and <= 1 TiB ("512MiB", "2GiB").
 *   network       required "on" or "off": explicit, never inherited.
 *   env           optional array of at most 100 {name, value, secret}: name a shell identifier
 *                 ([A-Za-z_][A-Za-z0-9_]*, at most 128 bytes), unique (case-sensitive); value
 *                 a string without NUL of at most 32 KiB; secret optional bool (false).
 *   egress        optional {default, rules}; default "deny" (the default) or "allow"; at most
 *                 100 rules and 100 credentials. A rule is {host, methods, credential, tls}: host a
 *                 pattern with an optional port, normalised by policy/host.h (SL_HOST_GLOB) and
 *                 checked by sl_host_check_pattern() (upper case and a trailing dot: warnings);
 *                 methods 0-32 distinct RFC 9110 tokens, uppercase; credential {header, value,
 *                 placeholder_env} with the header and value rules of policy/snapshot.h, so
 *                 that a stored environment always compiles into a valid snapshot. A credential
 *                 without "value" keeps the stored one (see sl_env_spec_to_row()).
 *                 placeholder_env, optional: a shell identifier of at most 128 characters,
 *                 not one sluice sets itself (sl_env_name_is_reserved()), unique among the
 *                 rules and not the name of a variable of `env`.
 *                 tls "intercept" (the default) or "passthrough", which no non-empty
 *                 methods and no credential may accompany (stored, rendered and compiled only
 *                 when "passthrough").
 *                 `network: "on"` with default deny and no rules is an error (nothing could
 *                 get out). With `network: "off"` the egress member is ignored altogether (not
 *                 validated, not stored), as docs/reference/api.md §5.1 says "off stores no egress
 * policy". repositories  optional array of at most 1000 distinct paths: at least two segments of
 *                 [A-Za-z0-9._-] (neither "." nor ".."), separated by single slashes, no
 *                 slash at either end, at most 255 bytes. Compared byte for byte.
 * The read-only members of the rendering (id, owner, is_default, created_at, updated_at,
 * observe_until, undecryptable, and has_value inside a credential) are accepted and ignored, so
 * that a GET body can be edited and sent back as a PUT.
 */
#ifndef SL_CONTROL_ENV_ENVIRONMENT_H
#define SL_CONTROL_ENV_ENVIRONMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/errlist.h"
#include "control/store/model.h"

/* Limits of docs/reference/api.md §5.1 and the ones this implementation adds. */
#define SL_ENV_NAME_MAX              128
#define SL_ENV_DESCRIPTION_MAX       4096
#define SL_ENV_IMAGE_MAX             255
#define SL_ENV_CPUS_CENTI_MAX        102400
#define SL_ENV_MEMORY_MAX            ((int64_t)1 << 40)
#define SL_ENV_VARS_MAX              100
#define SL_ENV_VAR_NAME_MAX          128
#define SL_ENV_VALUE_MAX             32768
#define SL_ENV_REPOS_MAX             1000
#define SL_ENV_REPO_MAX              255
#define SL_ENV_REGISTRY_USER_MAX     255
#define SL_ENV_REGISTRY_PASSWORD_MAX 4096
/* Cap on env_json, and on the sealed credential values of egress_json together (bytes). */
#define SL_ENV_SEALED_MAX 32768
/* Nesting deeper than this is refused before jansson parses (it recurses per level). */
#define SL_ENV_DEPTH_MAX 16

/* What the API shows for a secret value, and what a client sends back to keep it. */
#define SL_ENV_MASK "******"

/* Serialise the JSON of this module with these flags: without JSON_REAL_PRECISION jansson
 * prints cpus 0.29 as 0.28999999999999998. */
#define SL_ENV_JSON_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(15))

/* Built-in runtime defaults (docs/reference/api.md §5.2 merge, when neither the chosen environment
 * nor the global default sets a value). */
#define SL_ENV_DEFAULT_IMAGE        "sluice/sandbox:bookworm"
#define SL_ENV_DEFAULT_CPUS_CENTI   100
#define SL_ENV_DEFAULT_MEMORY_BYTES ((int64_t)1 << 30)

/* ---- sealing ------------------------------------------------------------------------------ */

/* Seals `n` bytes of plaintext at `p` and appends the sealed text to `out`. The sealed text must
 * be printable ASCII (base64, say): it is stored inside JSON. Returns 0, SL_ENOMEM, SL_ETOOBIG
 * (past `out`'s cap) or another negative code for a failure of the sealer. */
typedef int sl_seal_fn(void *arg, const void *p, size_t n, struct sl_buf *out);

/* Opens `n` bytes of sealed text and appends the plaintext to `out`. Returns 0; SL_ENOMEM when
 * memory ran out (passed on); any other negative code means "does not open" (the key changed,
 * the text is damaged), which this module reports as undecryptable, never as a crash. */
typedef int sl_open_fn(void *arg, const char *sealed, size_t n, struct sl_buf *out);

/* The caller's sealer (control/store/secrets in the daemon, a toy in tests). Borrowed by every
 * function that takes it; `arg` is passed to both callbacks, which run synchronously. */
struct sl_env_sealer {
    sl_seal_fn *seal;
    sl_open_fn *open;
    void *arg;
};

/* ---- errors ------------------------------------------------------------------------------- */

#define SL_ENV_ERRORS_MAX 100
/* The longest field path an error names, terminator included; a longer one is cut. */
#define SL_ENV_FIELD_MAX   160
#define SL_ENV_MESSAGE_MAX SL_ERRLIST_MESSAGE_MAX

/* Why a request was refused (docs/reference/api.md §5 intro). Caller storage: zero it; the
 * functions that fill it reset it first; release with sl_env_errors_finish(). */
struct sl_env_errors {
    /* The HTTP status to answer: 400 (not JSON, not an object), 422 (validation), 409 (a kept
     * value no longer decrypts); 0 while nothing was refused. */
    int status;
    /* One line for {"message"}. */
    char message[SL_ENV_MESSAGE_MAX];
    /* `count` errors in document order (a base/errlist list), owned; NULL when count == 0
     * (always so for 400). Each is where (`path`: `egress.rules[2].host`, `env[3].name`, the
     * "field" of the rendering) and what; neither text ever contains a value of a variable or
     * a credential. */
    struct sl_errlist_item *items;
    size_t count;
    /* More than SL_ENV_ERRORS_MAX errors were found. */
    bool truncated;
};

/* Frees the items and zeroes `e`. A zeroed `e` is fine. */
void sl_env_errors_finish(struct sl_env_errors *e);

/* `{"message": ..., "errors": [{"field", "message"}, ...]}` ("errors" only when there are
 * some). Returns 0 with `*out` a new reference, or SL_ENOMEM. */
SL_MUST_CHECK int sl_env_errors_render(const struct sl_env_errors *e, json_t **out);

/* `[{"field", "message"}, ...]` of the `n` warnings at `w`. Returns 0 with `*out` a new
 * reference, or SL_ENOMEM. */
SL_MUST_CHECK int sl_env_warnings_render(const struct sl_errlist_item *w, size_t n, json_t **out);

/* ---- the validated request ---------------------------------------------------------------- */

/* One variable of the request. */
struct sl_env_var {
    /* A shell identifier. Owned. */
    char *name;
    /* `value_len` bytes plus a terminator, no NUL inside. Owned; wiped when freed. */
    char *value;
    size_t value_len;
    bool secret;
    /* The value is exactly SL_ENV_MASK: with `secret` it asks to keep the stored value. */
    bool masked;
};

/* One egress rule of the request. */
struct sl_env_rule {
    /* The normal form of the host, `pattern` or `pattern:port`. Owned. */
    char *host;
    /* `n_methods` uppercase tokens; none = every method. Owned (array and strings). */
    char **methods;
    size_t n_methods;
    /* The credential's header as written; NULL when the rule has none. Owned. */
    char *header;
    /* The credential's value, or NULL with `header` set when the request left it out (keep
     * the stored one). Owned; wiped when freed. */
    char *value;
    size_t value_len;
    /* The credential's `placeholder_env` (docs/reference/snapshot.md §3): the variable whose
     * placeholder each sandbox gets instead of the value; NULL for an injected credential.
     * Owned. */
    char *placeholder_env;
    /* `"tls": "passthrough"`: then there are no methods and no credential. */
    bool passthrough;
};

/* A request that passed every check that needs no database. Every pointer is owned. */
struct sl_env_spec {
    char *name;
    /* "" when absent. */
    char *description;
    enum sl_scope scope;
    char *base_image;
    /* `image_pull: "always"` (else "if-missing"). */
    bool image_pull_always;
    /* `registry_auth` was given: its username, and its password (NULL: keep the stored one;
     * wiped when freed). */
    bool has_registry;
    char *registry_username;
    char *registry_password;
    size_t registry_password_len;
    /* CPUs x 100, or -1 for "inherit". */
    int64_t cpus_centi;
    /* Bytes (a multiple of 1 MiB), or -1 for "inherit". */
    int64_t memory_bytes;
    bool network;
    struct sl_env_var *vars;
    size_t n_vars;
    /* Egress, meaningful only with `network`: default allow (true) or deny (false). */
    bool egress_allow;
    struct sl_env_rule *rules;
    size_t n_rules;
    char **repos;
    size_t n_repos;
    /* What is valid but perhaps not what was meant (a host pattern in upper case or with a
     * trailing dot: it is stored in its normal form), each with its field, in document order;
     * owned, NULL when there are none. Not part of the environment: the API answers them. */
    struct sl_errlist_item *warnings;
    size_t n_warnings;
    bool warnings_truncated;
};

/* Parses and validates `n` bytes of a POST/PUT body (borrowed). Returns:
 *   0           `*spec` is filled (release it with sl_env_spec_finish());
 *   SL_EPOLICY  the request is refused: errs->status is 400 (not JSON, nested deeper than
 *               SL_ENV_DEPTH_MAX, duplicate keys, not an object) or 422 (errs->items says why);
 *   SL_ENOMEM   memory ran out.
 * On failure `*spec` is zeroed. jansson allocates through whatever json_set_alloc_funcs() set
 * (the daemon and the tests route it through base/mem). */
SL_MUST_CHECK int sl_env_spec_parse(const void *body, size_t n, struct sl_env_spec *spec,
                                    struct sl_env_errors *errs);

/* The same on a document that is already parsed (borrowed). Strings with NUL bytes (from a
 * parse with JSON_ALLOW_NUL) are refused with their field. */
SL_MUST_CHECK int sl_env_spec_from_json(json_t *root, struct sl_env_spec *spec,
                                        struct sl_env_errors *errs);

/* Frees (and wipes the values of) a spec and zeroes it. A zeroed spec is fine. */
void sl_env_spec_finish(struct sl_env_spec *spec);

/* ---- the stored form ---------------------------------------------------------------------- */

/* Turns a validated request into the stored row. `prev` is the row being replaced (PUT), or
 * NULL (POST). Fills name, description, scope, base_image, cpus_centi, memory_bytes, network,
 * env_json, egress_json (NULL when the network is off) and repos of `*row`, whose owned members
 * must be NULL on entry; id, owner_id, is_default and the timestamps are left to the caller.
 *
 * Every value is sealed on its own through `sealer->seal`. Keep-on-resave:
 *   - a variable with secret true and the value SL_ENV_MASK keeps the stored sealed value of
 *     the variable with the same name; there must be one (else 422), and it must still open
 *     (else 409: give it anew);
 *   - a variable with secret false and the value SL_ENV_MASK is taken literally (a non-secret
 *     value is shown in full, so that is what the client saw), except that a variable stored
 *     as secret cannot be made non-secret without its value (422): that would unmask it;
 *   - a credential without a value keeps a stored credential value for the same host (normal
 *     form with port, byte for byte): when it is the k-th rule with a credential for host H in
 *     the request (counting those with values too), it takes the value of the k-th rule with
 *     a credential for host H in `prev`. So an unchanged or reordered list keeps every value,
 *     and a value never moves to another host or port. The header may change. No such stored
 *     credential is a 422 error; one that no longer opens is 409;
 *   - a variable or credential left out of the request is dropped.
 * The 32 KiB caps apply to env_json (error field "env") and to the sealed credential values
 * together (field "egress.rules"). `prev` is read only when the request keeps something, so a
 * PUT that gives every value anew also replaces a row whose stored JSON is damaged. Returns 0;
 * SL_EPOLICY with `errs` (status 422, or 409 when the only problems are kept values that no
 * longer open); SL_EIO when `prev` is needed and its stored JSON is damaged; SL_ENOMEM; or the
 * sealer's own error. On failure the members it filled are freed again. */
SL_MUST_CHECK int sl_env_spec_to_row(const struct sl_env_spec *spec, const struct sl_env_row *prev,
                                     const struct sl_env_sealer *sealer, struct sl_env_row *row,
                                     struct sl_env_errors *errs);

/* ---- rendering ---------------------------------------------------------------------------- */

/* The API form of §5.1 of one environment: secret values as SL_ENV_MASK, other values opened,
 * credentials as {"header", "has_value": true} only (and their "placeholder_env"), "observe_until"
 * RFC 3339 while the environment is in observe, else null, cpus a number or null, memory text or
 * null, egress null when the network is off, and "undecryptable": [names of variables and
 * hosts of credentials whose values do not open, each once] when there are any (a non-secret
 * variable that does not open shows "value": null). `owner_name` is the owner's user name, or
 * NULL (rendered null) for global scope. Returns 0 with `*out` a new reference; SL_ENOMEM; or
 * SL_EIO when the row's stored JSON is damaged. */
SL_MUST_CHECK int sl_env_render(const struct sl_env_row *row, const char *owner_name,
                                const struct sl_env_sealer *sealer, json_t **out);

/* The list entry: the same members without any variable value (env entries are {name,
 * secret}) and without "undecryptable" (nothing is opened). Same results. */
SL_MUST_CHECK int sl_env_render_item(const struct sl_env_row *row, const char *owner_name,
                                     json_t **out);

/* ---- pieces shared with control/env/resolve -------------------------------------------------- */

/* True when `s` (`n` bytes) is a repository path as `repositories` accepts it. */
bool sl_env_repo_is_valid(const char *s, size_t n);

/* True when `n` bytes at `s` are a shell identifier ([A-Za-z_][A-Za-z0-9_]*), the rule for
 * variable names (environments, and a sandbox command's `env`). */
bool sl_env_name_is_valid(const char *s, size_t n);

/* True when `n` bytes at `s` name a variable that sluice sets itself in every sandbox
 * (docs/reference/containers.md §5.4: HTTP_PROXY and the other proxy variables, the CA bundle's,
 * CI, SLUICE and every SLUICE_*, the git author's) or that a container cannot do without (PATH,
 * HOME): never a placeholder's variable. */
bool sl_env_name_is_reserved(const char *s, size_t n);

/* The registry an image reference is pulled from, by Docker's rule: its first path component
 * when that has a '.' or a ':' or is "localhost", else "docker.io". Written NUL-terminated into
 * `out` of `cap` bytes (cut to fit). */
void sl_env_image_registry(const char *ref, char *out, size_t cap);

/* Writes memory as API text ("512MiB", "2GiB"; a size that is not a whole number of MiB is
 * rounded down) into `buf` of `cap` >= 24 bytes. */
void sl_env_format_memory(int64_t bytes, char *buf, size_t cap);

/* cpus x 100 as a JSON number (null for -1). Returns a new reference, or NULL on OOM. */
json_t *sl_env_cpus_json(int64_t cpus_centi);

/* Parses a stored env_json and checks its shape ([{"name","secret","sealed"}...]). Returns 0
 * with `*out` a new reference to the array, SL_EIO when damaged, or SL_ENOMEM. */
SL_MUST_CHECK int sl_env_load_vars(const char *env_json, json_t **out);

/* Parses a stored registry_json and checks its shape ({"username","sealed"} strings). Returns 0
 * with `*out` a new reference, SL_EIO (damaged) or SL_ENOMEM. */
SL_MUST_CHECK int sl_env_load_registry(const char *registry_json, json_t **out);

/* The API form of one stored variable {"name","value","secret"}: the mask for a secret, the
 * opened value otherwise (null when it does not open). When `sealer` is not NULL every value
 * is opened, and the name of one that does not open is appended to `undecryptable` (an array,
 * borrowed) unless it is there already. With `sealer` NULL the entry has no "value". Returns 0
 * with `*out` a new reference, or SL_ENOMEM. */
SL_MUST_CHECK int sl_env_render_var(const char *name, bool secret, const char *sealed,
                                    const struct sl_env_sealer *sealer, json_t *undecryptable,
                                    json_t **out);

/* The API form of a stored egress_json (NULL gives JSON null), credentials reduced to
 * {"header","has_value":true}. With `sealer`, each credential value is opened and the host of
 * one that does not open is appended to `undecryptable` (once). Returns 0 with `*out` a new
 * reference, SL_EIO when damaged, or SL_ENOMEM. */
SL_MUST_CHECK int sl_env_render_egress(const char *egress_json, const struct sl_env_sealer *sealer,
                                       json_t *undecryptable, json_t **out);

#endif
