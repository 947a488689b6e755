/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/sandbox/dockerpull.c - the progress stream of an image pull, the X-Registry-Auth
 * header, image references and the naming of failed pulls. See dockerpull.h.
 */
#include "control/sandbox/dockerpull.h"

#include <stdio.h>
#include <string.h>

#include <jansson.h>
#include <sodium.h>

#include "base/mem.h"
#include "control/env/environment.h"

/* The most bytes of the JSON behind X-Registry-Auth (credentials as the store keeps them, each
 * character escaped at worst into six). */
#define AUTH_TEXT_MAX (40u * 1024u)

void sl_dockerpull_init(struct sl_dockerpull *p)
{
    memset(p, 0, sizeof(*p));
    sl_buf_init(&p->_line, SL_DOCKERPULL_LINE_MAX);
}

void sl_dockerpull_finish(struct sl_dockerpull *p)
{
    sl_buf_finish(&p->_line);
    memset(p, 0, sizeof(*p));
}

/* Copies `s` into `out` as one line of printable text (control bytes become spaces). */
static void one_line(char *out, size_t cap, const char *s)
{
    (void)snprintf(out, cap, "%s", s);
    for (char *c = out; *c != '\0'; c++) {
        if ((unsigned char)*c < 0x20 || *c == 0x7f) {
            *c = ' ';
        }
    }
}

/* A non-negative JSON integer below 2^53 (a size the daemon reports), else `fallback`. */
static uint64_t size_of(const json_t *j, uint64_t fallback)
{
    json_int_t v;

    if (!json_is_integer(j)) {
        return fallback;
    }
    v = json_integer_value(j);
    return v >= 0 && v < ((json_int_t)1 << 53) ? (uint64_t)v : fallback;
}

static struct sl_dockerpull_layer *layer(struct sl_dockerpull *p, const char *id)
{
    size_t n = strlen(id);

    if (n == 0 || n > SL_DOCKERPULL_ID_MAX) {
        return NULL;
    }
    for (size_t i = 0; i < p->n_layers; i++) {
        if (strcmp(p->layers[i].id, id) == 0) {
            return &p->layers[i];
        }
    }
    if (p->n_layers == SL_DOCKERPULL_LAYERS_MAX) {
        return NULL;
    }
    memset(&p->layers[p->n_layers], 0, sizeof(p->layers[0]));
    memcpy(p->layers[p->n_layers].id, id, n + 1);
    return &p->layers[p->n_layers++];
}

/* The statuses the daemon gives a layer, and what each says of its bytes. */
enum layer_step {
    STEP_NONE = 0,
    STEP_SEEN,
    STEP_DOWNLOADING,
    STEP_DOWNLOADED,
    STEP_DONE,
};

static enum layer_step step_of(const char *status)
{
    static const struct {
        const char *status;
        enum layer_step step;
    } steps[] = {
        { "Pulling fs layer", STEP_SEEN },
        { "Waiting", STEP_SEEN },
        { "Retrying", STEP_SEEN },
        { "Downloading", STEP_DOWNLOADING },
        { "Verifying Checksum", STEP_DOWNLOADED },
        { "Download complete", STEP_DOWNLOADED },
        { "Extracting", STEP_DOWNLOADED },
        { "Pull complete", STEP_DONE },
        { "Already exists", STEP_DONE },
    };

    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        /* "Retrying in 5 seconds" and the like. */
        if (strncmp(status, steps[i].status, strlen(steps[i].status)) == 0) {
            return steps[i].step;
        }
    }
    return STEP_NONE;
}

static void read_line(struct sl_dockerpull *p, const char *s, size_t n)
{
    json_t *j;
    const char *status;
    const char *id;
    const char *err;
    struct sl_dockerpull_layer *l;
    const json_t *detail;
    enum layer_step step;

    while (n > 0 && (s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t')) {
        n--;
    }
    if (n == 0) {
        return;
    }
    j = json_loadb(s, n, 0, NULL);
    if (!json_is_object(j)) {
        json_decref(j);
        p->skipped++;
        return;
    }
    err = json_string_value(json_object_get(j, "error"));
    if (err == NULL) {
        err = json_string_value(json_object_get(json_object_get(j, "errorDetail"), "message"));
    }
    if (err != NULL) {
        if (!p->failed) {
            p->failed = true;
            one_line(p->error, sizeof(p->error), err[0] != '\0' ? err : "unknown error");
        }
        json_decref(j);
        return;
    }
    status = json_string_value(json_object_get(j, "status"));
    id = json_string_value(json_object_get(j, "id"));
    if (status == NULL) {
        json_decref(j);
        return;
    }
    if (strncmp(status, "Status: ", 8) == 0) {
        p->complete = true;
    }
    step = step_of(status);
    if (step == STEP_NONE || id == NULL) {
        json_decref(j);
        return;
    }
    l = layer(p, id);
    if (l == NULL) {
        p->skipped++;
        json_decref(j);
        return;
    }
    detail = json_object_get(j, "progressDetail");
    switch (step) {
    case STEP_DOWNLOADING:
        l->total = size_of(json_object_get(detail, "total"), l->total);
        l->current = size_of(json_object_get(detail, "current"), l->current);
        if (l->total != 0 && l->current > l->total) {
            l->current = l->total;
        }
        break;
    case STEP_DOWNLOADED:
        l->current = l->total;
        break;
    case STEP_DONE:
        l->current = l->total;
        l->done = true;
        break;
    case STEP_SEEN:
    case STEP_NONE:
        break;
    }
    json_decref(j);
}

int sl_dockerpull_feed(struct sl_dockerpull *p, const void *data, size_t n)
{
    const char *s = data;

    while (n > 0) {
        const char *nl = memchr(s, '\n', n);
        size_t k = nl != NULL ? (size_t)(nl - s) : n;
        int rc = 0;

        if (!p->_over) {
            rc = sl_buf_append(&p->_line, s, k);
            if (rc == SL_ETOOBIG) {
                p->_over = true;
                rc = 0;
            }
        }
        if (rc < 0) {
            /* Out of memory: this line is lost. */
            p->_over = true;
        }
        if (nl != NULL) {
            if (p->_over) {
                p->skipped++;
            } else {
                read_line(p, (const char *)p->_line.p, p->_line.len);
            }
            sl_buf_reset(&p->_line);
            p->_over = false;
            k++;
        }
        s += k;
        n -= k;
        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}

void sl_dockerpull_end(struct sl_dockerpull *p)
{
    if (p->_over) {
        p->skipped++;
    } else if (p->_line.len > 0) {
        read_line(p, (const char *)p->_line.p, p->_line.len);
    }
    sl_buf_reset(&p->_line);
    p->_over = false;
}

void sl_dockerpull_progress(const struct sl_dockerpull *p, struct sl_dockerpull_progress *out)
{
    memset(out, 0, sizeof(*out));
    out->layers = p->n_layers;
    for (size_t i = 0; i < p->n_layers; i++) {
        out->layers_done += p->layers[i].done ? 1 : 0;
        out->bytes_done += p->layers[i].current;
        out->bytes_total += p->layers[i].total;
    }
}

/* ---- X-Registry-Auth ---------------------------------------------------------------------- */

/* Appends `s` as a JSON string (quotes, backslashes and control bytes escaped). */
static int append_json_string(struct sl_buf *b, const char *s)
{
    static const char hex[] = "0123456789abcdef";

    SL_TRY(sl_buf_append(b, "\"", 1));
    for (const unsigned char *c = (const unsigned char *)s; *c != '\0'; c++) {
        if (*c == '"' || *c == '\\') {
            char e[2] = { '\\', (char)*c };

            SL_TRY(sl_buf_append(b, e, 2));
        } else if (*c < 0x20) {
            char e[6] = { '\\', 'u', '0', '0', hex[*c >> 4], hex[*c & 15] };

            SL_TRY(sl_buf_append(b, e, 6));
        } else {
            SL_TRY(sl_buf_append(b, c, 1));
        }
    }
    return sl_buf_append(b, "\"", 1);
}

int sl_dockerpull_auth(const char *username, const char *password, const char *server,
                       struct sl_buf *out)
{
    struct sl_buf text;
    char *b64 = NULL;
    size_t cap;
    int rc;

    if (username == NULL || username[0] == '\0' || password == NULL || server == NULL) {
        return SL_EINVAL;
    }
    /* Built by hand, not with jansson, so that every copy of the password can be wiped; all
     * the room is taken at once, so that no growth leaves a copy behind. */
    sl_buf_init(&text, AUTH_TEXT_MAX);
    if (sl_buf_reserve(&text, AUTH_TEXT_MAX - 1) == NULL) {
        sl_buf_finish(&text);
        return SL_ENOMEM;
    }
    rc = sl_buf_append_str(&text, "{\"username\":");
    rc = rc < 0 ? rc : append_json_string(&text, username);
    rc = rc < 0 ? rc : sl_buf_append_str(&text, ",\"password\":");
    rc = rc < 0 ? rc : append_json_string(&text, password);
    rc = rc < 0 ? rc : sl_buf_append_str(&text, ",\"serveraddress\":");
    rc = rc < 0 ? rc : append_json_string(&text, server);
    rc = rc < 0 ? rc : sl_buf_append_str(&text, "}");
    if (rc == 0) {
        cap = sodium_base64_ENCODED_LEN(text.len, sodium_base64_VARIANT_URLSAFE);
        b64 = sl_malloc(cap);
        rc = b64 != NULL ? 0 : SL_ENOMEM;
    }
    if (rc == 0) {
        (void)sodium_bin2base64(b64, cap, text.p, text.len, sodium_base64_VARIANT_URLSAFE);
        rc = sl_buf_append_str(out, b64);
        sodium_memzero(b64, cap);
    }
    sl_free(b64);
    sodium_memzero(text.p, text.len);
    sl_buf_finish(&text);
    return rc;
}

/* ---- references --------------------------------------------------------------------------- */

int sl_dockerpull_split(const char *ref, struct sl_dockerpull_ref *out)
{
    size_t n = ref != NULL ? strlen(ref) : 0;
    const char *at;
    const char *slash;
    const char *colon;
    const char *tag;
    size_t name_len;

    memset(out, 0, sizeof(*out));
    if (n == 0 || n >= sizeof(out->name)) {
        return SL_EINVAL;
    }
    at = strchr(ref, '@');
    slash = strrchr(ref, '/');
    tag = "latest";
    name_len = n;
    if (at != NULL) {
        name_len = (size_t)(at - ref);
        tag = at + 1;
    } else {
        colon = strrchr(ref, ':');
        if (colon != NULL && (slash == NULL || colon > slash)) {
            name_len = (size_t)(colon - ref);
            tag = colon + 1;
        }
    }
    if (name_len == 0 || tag[0] == '\0' || strlen(tag) >= sizeof(out->tag)) {
        return SL_EINVAL;
    }
    memcpy(out->tag, tag, strlen(tag) + 1);
    memcpy(out->name, ref, name_len);
    out->name[name_len] = '\0';
    sl_env_image_registry(out->name, out->host, sizeof(out->host));
    if (strcmp(out->host, "docker.io") == 0) {
        (void)snprintf(out->server, sizeof(out->server), "https://index.docker.io/v1/");
    } else {
        (void)snprintf(out->server, sizeof(out->server), "%s", out->host);
    }
    return 0;
}

/* ---- failures ----------------------------------------------------------------------------- */

static bool has_any(const char *s, const char *const *needles, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (strstr(s, needles[i]) != NULL) {
            return true;
        }
    }
    return false;
}

enum sl_dockerpull_failure sl_dockerpull_classify(long status, const char *message)
{
    static const char *const not_found[] = {
        "manifest unknown",
        "repository does not exist",
        "name unknown",
    };
    static const char *const auth[] = {
        "unauthorized", "authentication required",        "no basic auth credentials",
        "denied",       "incorrect username or password",
    };
    static const char *const unreachable[] = {
        "dial tcp",
        "connection refused",
        "no such host",
        "i/o timeout",
        "timeout",
        "Timeout",
        "x509:",
        "tls:",
        "certificate",
        "EOF",
        "HTTP request to an HTTPS server",
        "server gave HTTP response",
        "connection reset",
        "network is unreachable",
        "no route to host",
        "lookup ",
    };
    const char *m = message != NULL ? message : "";

    if (status == 404 || has_any(m, not_found, sizeof(not_found) / sizeof(not_found[0]))) {
        return SL_DOCKERPULL_NOT_FOUND;
    }
    if (status == 401 || has_any(m, auth, sizeof(auth) / sizeof(auth[0]))) {
        return SL_DOCKERPULL_AUTH;
    }
    if (has_any(m, unreachable, sizeof(unreachable) / sizeof(unreachable[0]))) {
        return SL_DOCKERPULL_UNREACHABLE;
    }
    return SL_DOCKERPULL_OTHER;
}

void sl_dockerpull_describe(enum sl_dockerpull_failure f, const char *image,
                            const struct sl_dockerpull_ref *ref, const char *message, char *out,
                            size_t cap)
{
    char text[SL_DOCKERPULL_ERR_MAX];
    const char *m = message != NULL && message[0] != '\0' ? message : "no reason given";

    switch (f) {
    case SL_DOCKERPULL_NOT_FOUND:
        (void)snprintf(text, sizeof(text), "image not found: %s", image);
        break;
    case SL_DOCKERPULL_AUTH:
        (void)snprintf(text, sizeof(text), "registry authentication failed for %s", ref->host);
        break;
    case SL_DOCKERPULL_UNREACHABLE:
        (void)snprintf(text, sizeof(text), "registry unreachable: %s: %s", ref->host, m);
        break;
    case SL_DOCKERPULL_OTHER:
    default:
        (void)snprintf(text, sizeof(text), "image pull failed: %s: %s", image, m);
        break;
    }
    one_line(out, cap, text);
}
