/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/env/pusher.h - delivers policy snapshots to every proxy replica's admin socket
 * (docs/reference/proxy.md §4.9 `PUT /v1/snapshot`) and keeps them delivered.
 *
 * A proxy is reached on a local unix socket, or over the network at `https://HOST:PORT` under
 * mutual TLS (http/tls.h): the pusher shows the control plane's certificate and verifies the
 * proxy's against the CA, the CRL and HOST before it sends a byte of HTTP, so a proxy whose
 * certificate is wrong or revoked gets nothing and stays unreachable with the reason as its
 * last error. Everything below holds for both kinds alike.
 *
 * The control plane calls sl_pusher_push() after each committed change with the newest
 * snapshot; the pusher sends it to every proxy on its own schedule:
 *   - one request at a time per proxy; a newer snapshot pushed meanwhile replaces the pending
 *     one (only the newest is ever sent);
 *   - a proxy that cannot be reached, times out or answers 5xx is retried with back-off
 *     (100 ms doubling to 2 s);
 *   - every `check_ms` (500 ms by default) each proxy is asked `GET /v1/status`; one that
 *     reports an older version or none (it restarted: a proxy starts with no policy and
 *     refuses everything) gets the current snapshot again at once, so a restarted proxy is
 *     enforcing the current policy within a second; the same answer tells whether the proxy's
 *     audit log is writable (sl_pusher_target());
 *   - 409 (the proxy holds a version at least as new with other bytes) and other 4xx are not
 *     retried until the next push: they mean two writers or a bug, and are logged.
 *
 * Lifecycle: sl_pusher_create() on the control plane's loop -> sl_pusher_push() any number of
 * times (loop thread) -> sl_pusher_close(), after whose callback the memory is gone.
 */
#ifndef SL_CONTROL_ENV_PUSHER_H
#define SL_CONTROL_ENV_PUSHER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "base/err.h"
#include "http/tls.h"

#define SL_PUSHER_TARGETS_MAX 16

struct sl_pusher; /* opaque */

/* Called on the loop whenever the version every proxy has acknowledged (the minimum over the
 * targets, 0 while one has none) may have grown. */
typedef void sl_pusher_acked_fn(void *arg, int64_t acked_by_all);

struct sl_pusher_config {
    /* Admin socket paths (borrowed during create; copied). */
    const char *const *sockets;
    size_t n_sockets;
    /* Status poll interval; 0 means 500 ms. */
    uint64_t check_ms;
    /* Time for one request to complete; 0 means 5 000 ms. */
    uint64_t request_timeout_ms;
    /* Optional (NULL for none): see sl_pusher_acked_fn. */
    sl_pusher_acked_fn *on_acked;
    void *acked_arg;
    /* Admin URLs `https://HOST:PORT` of proxies on the network (borrowed during create;
     * copied), after the sockets in the target order; together at most SL_PUSHER_TARGETS_MAX.
     * HOST is a DNS name (resolved on the thread pool at each connection) or an IP literal. */
    const char *const *urls;
    size_t n_urls;
    /* The client TLS context for the URLs (borrowed: it must outlive the pusher); required
     * when there are URLs. */
    struct sl_http_tls *tls;
    /* A target that never answered is warned about (`proxy admin ... unreachable; retrying`)
     * only this long after create: a proxy started beside the control plane may still be
     * coming up. One that answered once is warned about at its first failure. 0 means
     * 10 000 ms. */
    uint64_t start_grace_ms;
};

/* What one proxy has, as far as the pusher knows. */
struct sl_pusher_target_status {
    /* The socket path, or NULL for a URL target. */
    const char *socket;
    /* The URL, or NULL for a socket target. */
    const char *url;
    /* Version the proxy acknowledged or reported, 0 when none. */
    int64_t acked_version;
    /* True while the last attempt to reach it failed. */
    bool unreachable;
    /* The last error for a person, "" when none. */
    const char *last_error;
    /* Its audit log, from its last GET /v1/status: 1 healthy, 0 failing (why in `audit_error`),
     * -1 no audit log or not known yet. */
    int audit_healthy;
    const char *audit_error;
};

/* Returns 0, SL_ENOMEM, SL_ETOOBIG (too many targets) or SL_EINVAL (a path too long, a URL
 * that is not https://HOST:PORT with nothing after it, URLs without a TLS context), with a
 * sentence in `err` (`errlen` bytes, may be 0). */
SL_MUST_CHECK int sl_pusher_create(uv_loop_t *loop, const struct sl_pusher_config *cfg,
                                   struct sl_pusher **out, char *err, size_t errlen);

/* Makes `json` (borrowed; copied) with `version` the snapshot to deliver. A version not
 * newer than the current one is ignored (returns SL_EEXIST). */
SL_MUST_CHECK int sl_pusher_push(struct sl_pusher *p, int64_t version, const void *json, size_t n);

/* The newest version handed to sl_pusher_push(), 0 before the first. */
int64_t sl_pusher_version(const struct sl_pusher *p);

/* Status of target `i` (0 ... n_sockets+n_urls-1, sockets first); strings borrowed until the
 * next loop turn. */
void sl_pusher_target(const struct sl_pusher *p, size_t i, struct sl_pusher_target_status *out);

/* The newest version every target has acknowledged (their minimum; 0 while one has none). */
int64_t sl_pusher_acked_by_all(const struct sl_pusher *p);

/* Number of targets. */
size_t sl_pusher_targets(const struct sl_pusher *p);

/* Stops everything; `closed(arg)` runs once when all memory is released (never synchronously). */
void sl_pusher_close(struct sl_pusher *p, void (*closed)(void *arg), void *arg);

#endif
