/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proxy/audit.h - the audit log of docs/reference/proxy.md §4.7: one JSON object per line per
 * request or refusal, written without blocking the workers.
 *
 * A worker formats its line on its own thread into a stack buffer and appends it, under a
 * mutex held only for a memcpy, to the pending block; a writer thread swaps the block out and
 * writes it with write(2), in batches: 20 ms after the first line of a batch, or once 64 KiB
 * are pending, whichever comes first (sl_audit_close() writes the rest at once). The workers
 * never wait for the disk. Pending bytes are capped: when
 * the disk cannot keep up and the cap is reached, lines are dropped and counted, and the count
 * is reported in the log (and in sl_audit_dropped()) rather than growing memory without bound.
 * The last quarter of the cap is for the lines of allowed requests only (sl_audit_congested()).
 *
 * The file only ever gets whole lines. When a write fails (a full disk), the writer keeps the
 * lines it could not write (they count against the cap), reports itself unhealthy
 * (sl_audit_healthy(), which the proxy's --audit-failure turns into refusals or not) and tries
 * again every 200 ms; a line the failed write left partly in the file is cut off again and
 * kept whole for the retry. Health comes back with the first complete write. sl_audit_reopen()
 * (SIGUSR1, after a rotation) has the writer close and open the path again between two lines,
 * so that no line is lost or split across the rotation.
 *
 * Lines never contain a credential value, a token or a query string: the record has no field
 * that could carry one, and the path is cut at its '?'. Nor a placeholder (policy/placeholder.h):
 * its random part is masked in the host, the path and a CONNECT's Host header.
 *
 * Lifecycle: sl_audit_open() -> sl_audit_write(), sl_audit_reopen(), sl_audit_healthy() from
 * any thread -> sl_audit_close() (flushes what is pending, once, then joins the writer).
 */
#ifndef SL_PROXY_AUDIT_H
#define SL_PROXY_AUDIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "base/err.h"
#include "policy/decision.h"

struct sl_audit; /* opaque */

/* One decision. Strings are borrowed for the duration of sl_audit_write(); NULL is written as
 * JSON null. */
struct sl_audit_record {
    /* Client id and environment name, NULL when unknown. */
    const char *client;
    const char *environment;
    /* The client's address (AF_INET/AF_INET6), NULL when unknown. */
    const struct sockaddr *src;
    /* Request method ("CONNECT" for a tunnel decision), scheme ("https"/"http"), host, port. */
    const char *method;
    const char *scheme;
    const char *host;
    uint16_t port;
    /* The request target's path; everything from '?' on is dropped. NULL for CONNECT. */
    const char *path;
    /* A CONNECT's Host header when it named another host or port than the CONNECT (written as
     * `"connect_host_header"` after "path"; absent when NULL). As sent, cut at 512 bytes. Only
     * on a line without a path (a CONNECT's), whose room it takes: a line stays within
     * SL_AUDIT_LINE_MAX whatever the strings hold. */
    const char *connect_host_header;
    /* A lookup answered by the DNS responder (proxy/dnsd.h, docs/reference/proxy.md §4.12):
     * written `"dns":{"type":TYPE,"rcode":RCODE,"transport":TRANSPORT}` (after "path") and
     * `"decision":"dns"` whatever `allow`, `challenge` and `error` say; `reason` then marks a
     * name the client's environment does not allow (or no client). The three strings are
     * borrowed (cut at 16 bytes; NULL written as null: a query without a question has no
     * type); ignored unless `dns`. */
    bool dns;
    const char *dns_type;
    const char *dns_rcode;
    const char *dns_transport;
    /* The decision: "allow"; else "deny" for a refusal of the policy's own, or "error" (`error`
     * set) for a request the proxy could not carry out (docs/reference/proxy.md §4.7). */
    bool allow;
    /* A refusal that is a challenge: a 407 for a proxy request without Proxy-Authorization
     * (reason no-identity). Written as "decision":"challenge"; ignored when `allow`. */
    bool challenge;
    /* A failure that is not a policy decision (docs/reference/proxy.md §4.7): written as
     * "decision":"error"; ignored when `allow`. */
    bool error;
    /* SL_REASON_NONE for an allowed request (written as null). */
    enum sl_reason reason;
    /* An allow of an environment in observe that the policy would have refused for `would_deny`
     * (policy/decision.h): written as `"observed":true,"would_deny":"REASON"` after "reason".
     * Ignored unless `allow`. */
    bool observed;
    enum sl_reason would_deny;
    /* The rule that decided, NULL when none did. */
    const char *rule;
    /* True when a credential was injected. */
    bool credential;
    /* True for a tunnel relayed uninspected under a `"tls": "passthrough"` rule: the line then
     * carries `"tls":"passthrough"` (after "rule"), and stands for the whole tunnel, since the
     * requests inside are not seen. Lines of other requests do not have the member. */
    bool passthrough;
    /* True for a connection taken by a transparent listener (docs/reference/proxy.md §4.12):
     * the line carries `"mode":"transparent"` (after "tls" or "rule"); lines of the explicit
     * proxy do not have the member. */
    bool transparent;
    /* Status sent to the client (0 when none was sent: the connection was closed). */
    int status;
    uint64_t bytes_up;
    uint64_t bytes_down;
    /* When the transfer was cut short: who ("client", "upstream", or "both" for a relay that
     * idled) and why ("send-timeout", "idle-timeout", "reset", "closed", "malformed"); the line
     * then carries `"aborted":{"side":...,"cause":...}` (after "bytes_down"). NULL: not cut,
     * no such member. Static strings. */
    const char *aborted_side;
    const char *aborted_cause;
    /* Duration of the request in milliseconds; written with one decimal, capped at 1e12 either
     * way, NaN and infinities as null. */
    double ms;
    /* Version of the snapshot that decided, 0 when there was none. */
    int64_t policy_version;
};

/* Opens the log: `path` is a file (created 0600 if missing, appended to), or "-" for standard
 * output. `max_pending_bytes` caps the memory for lines not yet written (0: 16 MiB). On
 * failure writes a message naming the file into `err`. */
SL_MUST_CHECK int sl_audit_open(const char *path, size_t max_pending_bytes, struct sl_audit **out,
                                char *err, size_t errlen);

/* Formats `r` and queues the line. Never blocks on I/O. Any thread. NULL `a` is a no-op. */
void sl_audit_write(struct sl_audit *a, const struct sl_audit_record *r);

/* Lines dropped so far because the writer could not keep up. */
uint64_t sl_audit_dropped(struct sl_audit *a);

/* False from a failed write of the log until the writer wrote everything it holds again.
 * Cheap (one atomic load): the workers ask it for every request. NULL `a` is healthy. */
bool sl_audit_healthy(const struct sl_audit *a);

/* True while 3/4 of the pending cap or more is taken (the writer does not keep up: a slow disk, a
 * standard output nobody reads fast enough). From there on only the lines of allowed requests
 * are queued (the others are dropped and counted), the rest of the cap kept for the requests
 * already let out; under --audit-failure deny the proxy refuses new ones. Cheap (one atomic
 * load). NULL `a` is never congested. */
bool sl_audit_congested(const struct sl_audit *a);

/* The writer's state, for the admin socket and the metrics (docs/reference/proxy.md §4.9). */
struct sl_audit_health {
    bool healthy;
    /* write(2) calls that failed, lines dropped (never written: the cap, or a stop while the
     * file took nothing), files reopened. */
    uint64_t write_failures;
    uint64_t dropped;
    uint64_t reopens;
    /* Bytes queued or held for a retry. */
    size_t pending_bytes;
    /* errno of the last failed write, 0 while healthy. */
    int last_errno;
};

/* Fills `out`. NULL `a` reads as healthy and idle. */
void sl_audit_health(struct sl_audit *a, struct sl_audit_health *out);

/* Asks the writer to close the file and open its path again, between two lines (log
 * rotation; a no-op for standard output). Returns at once. NULL is a no-op. */
void sl_audit_reopen(struct sl_audit *a);

/* Writes what is pending, stops the writer and frees everything. NULL is a no-op. */
void sl_audit_close(struct sl_audit *a);

/* Formats `r` as one JSON line (with its '\n') into `buf`. Returns the length, or SL_ETOOBIG
 * when `cap` is too small. Exposed for tests. */
SL_MUST_CHECK int sl_audit_format(const struct sl_audit_record *r, char *buf, size_t cap);

/* Longest line sl_audit_write() produces; longer strings are cut (marked with "..."). */
#define SL_AUDIT_LINE_MAX 16384

#endif
