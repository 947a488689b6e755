/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/sandbox/dockerpull.h - what an image pull through the Docker Engine API needs besides
 * the transport: the reading of the progress stream of `POST /images/create`, the
 * X-Registry-Auth header, the split of an image reference into the call's `fromImage`, `tag`
 * and registry host, and the naming of a failed pull for a person.
 *
 * The progress stream is JSON objects, one a line ("\r\n" or "\n" ends a line), such as
 *   {"status":"Pulling fs layer","progressDetail":{},"id":"f8c00091894f"}
 *   {"status":"Downloading","progressDetail":{"current":1024,"total":4096},"id":"f8c00091894f"}
 *   {"status":"Pull complete","progressDetail":{},"id":"f8c00091894f"}
 *   {"errorDetail":{"message":"..."},"error":"..."}
 * A read may end anywhere, inside a line or a UTF-8 sequence. The reader keeps, per layer (an id
 * seen with a layer status), the bytes downloaded and their total, and whether the layer is in
 * place ("Pull complete", "Already exists"); an "error" line makes the pull failed with its
 * text. The bytes come from the daemon and are treated as hostile: a line longer than
 * SL_DOCKERPULL_LINE_MAX, a line that is not a JSON object and a layer past
 * SL_DOCKERPULL_LAYERS_MAX are skipped (counted in `skipped`), numbers out of range are ignored,
 * and the error text is made one line of at most SL_DOCKERPULL_ERR_MAX - 1 bytes.
 *
 * Pure and sans-I/O; no secret passes through the reader (the stream carries none).
 * Lifecycle: sl_dockerpull_init() on caller storage -> sl_dockerpull_feed() any number of times
 * -> sl_dockerpull_end() once the stream ended -> sl_dockerpull_finish().
 */
#ifndef SL_CONTROL_SANDBOX_DOCKERPULL_H
#define SL_CONTROL_SANDBOX_DOCKERPULL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"

#define SL_DOCKERPULL_LINE_MAX   (64u * 1024u)
#define SL_DOCKERPULL_LAYERS_MAX 128u
#define SL_DOCKERPULL_ERR_MAX    400u
/* The longest layer id kept (Docker's are 12 hex digits). */
#define SL_DOCKERPULL_ID_MAX 72u

struct sl_dockerpull_layer {
    char id[SL_DOCKERPULL_ID_MAX + 1];
    uint64_t current;
    uint64_t total;
    bool done;
};

/* A value type so that owners can embed it; read the public fields, not the `_` ones. */
struct sl_dockerpull {
    /* The line collected so far. */
    struct sl_buf _line;
    /* The current line is over SL_DOCKERPULL_LINE_MAX: the rest of it is dropped. */
    bool _over;
    struct sl_dockerpull_layer layers[SL_DOCKERPULL_LAYERS_MAX];
    size_t n_layers;
    /* Lines skipped (see the top of this file). */
    size_t skipped;
    /* An "error" line was seen; `error` holds its text (the first one). */
    bool failed;
    char error[SL_DOCKERPULL_ERR_MAX];
    /* The daemon's last "Status: ..." line was seen (the image is in place). */
    bool complete;
};

/* The pull's progress, summed over its layers. */
struct sl_dockerpull_progress {
    size_t layers;
    size_t layers_done;
    uint64_t bytes_done;
    uint64_t bytes_total;
};

void sl_dockerpull_init(struct sl_dockerpull *p);

/* Consumes `n` bytes at `data` (borrowed), reading every complete line. Returns 0, or SL_ENOMEM
 * (the line in progress is lost and counted as skipped). */
SL_MUST_CHECK int sl_dockerpull_feed(struct sl_dockerpull *p, const void *data, size_t n);

/* The stream ended: reads a last line that had no line end. */
void sl_dockerpull_end(struct sl_dockerpull *p);

void sl_dockerpull_progress(const struct sl_dockerpull *p, struct sl_dockerpull_progress *out);

void sl_dockerpull_finish(struct sl_dockerpull *p);

/*
 * The value of the X-Registry-Auth header: base64url (with padding, as the daemon decodes it)
 * of {"username","password","serveraddress"}. Appends it to `out`; the intermediate copies are
 * wiped. Returns 0, SL_EINVAL (a NULL or empty username, a NULL password or server), SL_ENOMEM or
 * SL_ETOOBIG (past `out`'s cap).
 */
SL_MUST_CHECK int sl_dockerpull_auth(const char *username, const char *password, const char *server,
                                     struct sl_buf *out);

/* An image reference split for `POST /images/create`. */
struct sl_dockerpull_ref {
    /* The reference without its tag or digest (`fromImage`). */
    char name[256];
    /* The tag, or the digest (`sha256:...`), or "latest" when the reference has neither. */
    char tag[160];
    /* The registry (sl_env_image_registry(): the first path component when it has a '.' or a
     * ':' or is "localhost", else "docker.io"). */
    char host[256];
    /* The serveraddress of X-Registry-Auth: `host`, or "https://index.docker.io/v1/" for
     * docker.io. */
    char server[256];
};

/* Splits `ref` (an image reference as control/env accepts it). Returns 0 or SL_EINVAL (empty,
 * too long, an empty name or tag). */
SL_MUST_CHECK int sl_dockerpull_split(const char *ref, struct sl_dockerpull_ref *out);

enum sl_dockerpull_failure {
    /* No such repository, tag or digest at the registry. */
    SL_DOCKERPULL_NOT_FOUND = 0,
    /* The registry refused the credentials (or wanted some). */
    SL_DOCKERPULL_AUTH,
    /* The registry could not be reached or spoken to (connection, DNS, TLS). */
    SL_DOCKERPULL_UNREACHABLE,
    /* Anything else (the daemon's disk, say). */
    SL_DOCKERPULL_OTHER,
};

/* What a failed pull means, from the HTTP status of the call (0 for an error line inside a 200
 * stream) and the daemon's message (may be NULL). */
enum sl_dockerpull_failure sl_dockerpull_classify(long status, const char *message);

/*
 * The text for a person (one line, into `out` of `cap` bytes):
 *   NOT_FOUND    "image not found: IMAGE"
 *   AUTH         "registry authentication failed for HOST"
 *   UNREACHABLE  "registry unreachable: HOST: MESSAGE"
 *   OTHER        "image pull failed: IMAGE: MESSAGE"
 * `image` is the reference as the environment names it.
 */
void sl_dockerpull_describe(enum sl_dockerpull_failure f, const char *image,
                            const struct sl_dockerpull_ref *ref, const char *message, char *out,
                            size_t cap);

#endif
