/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proxy/gitpush.h - the start of a git push, without I/O: the ref-update commands at the head of
 * a `POST .../git-receive-pack` body, and the receive-pack result that refuses them
 * (docs/reference/proxy.md §4.11; the formats are git's gitprotocol-pack(5) "Reference Update
 * Request" and "Report Status", and gitprotocol-common(5) pkt-lines).
 *
 * The body starts with pkt-lines (four hex digits giving the line's length, the four included,
 * then the data; "0000" is a flush-pkt):
 *
 *   *( "shallow " OID LF )
 *   OLD-OID SP NEW-OID SP REFNAME NUL CAPABILITIES LF      the first command
 *   *( OLD-OID SP NEW-OID SP REFNAME LF )                  the others
 *   "0000"
 *   then push options (when asked for) and the pack, which are not read here.
 *
 * A body that is only "0000" is git's probe (sent before a large push to learn whether it is
 * authorised): a list of no command. The reader is strict, because what it does not understand
 * it cannot judge: a `push-cert` (signed push), a special packet, an empty pkt-line, a second
 * NUL-separated capability list, a shallow line after a command, an OID that is not 40 or 64
 * hex digits, a ref name with a space or a control byte, are each malformed.
 *
 * Lifecycle: sl_gitpush_reader_init() on caller storage, then sl_gitpush_next() over the body
 * bytes held so far (the same bytes again, longer each time) until END or BAD. Nothing is
 * allocated; nothing is read past the `n` bytes given.
 */
#ifndef SL_PROXY_GITPUSH_H
#define SL_PROXY_GITPUSH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/slice.h"

/* The command list (shallow lines and the flush-pkt included) must end within this many bytes
 * of the body. A command takes at least 87 bytes, so that is at most 753 commands. */
#define SL_GITPUSH_MAX_BYTES ((size_t)64 * 1024)

/* The longest pkt-line git writes (LARGE_PACKET_MAX), the four length digits included. */
#define SL_GITPUSH_PKT_MAX 65520u

/* Capabilities of the first command that the refusal depends on. */
enum sl_gitpush_cap {
    SL_GITPUSH_CAP_REPORT_STATUS = 1 << 0,
    SL_GITPUSH_CAP_REPORT_STATUS_V2 = 1 << 1,
    SL_GITPUSH_CAP_SIDE_BAND_64K = 1 << 2,
    SL_GITPUSH_CAP_SIDE_BAND = 1 << 3,
};

/* One ref-update command. The slices borrow the buffer given to sl_gitpush_next(). */
struct sl_gitpush_cmd {
    /* 40 or 64 hex digits each, the same length; all zeros for a creation (old) or a deletion
     * (new). */
    struct sl_slice old_oid;
    struct sl_slice new_oid;
    /* The full ref name (`refs/heads/main`): 1 or more bytes, no space, no control byte. */
    struct sl_slice ref;
};

enum sl_gitpush_event {
    /* The bytes so far hold no complete next item: give more. */
    SL_GITPUSH_MORE = 0,
    /* `*cmd` is the next command. */
    SL_GITPUSH_COMMAND,
    /* The flush-pkt that ends the list was read: `pos` is the list's length. Repeats. */
    SL_GITPUSH_END,
    /* Malformed, or over a bound: `why` says what. Repeats. */
    SL_GITPUSH_BAD,
};

/* Where the reader is. Caller storage; the members are for reading. */
struct sl_gitpush_reader {
    /* Bytes of complete pkt-lines read so far. */
    size_t pos;
    /* Commands and shallow lines read so far. */
    uint32_t n_commands;
    uint32_t n_shallow;
    /* SL_GITPUSH_CAP_* flags of the first command. */
    unsigned caps;
    /* END or BAD was reached (it is repeated); `why` is a static phrase for BAD. */
    enum sl_gitpush_event done;
    const char *why;
};

void sl_gitpush_reader_init(struct sl_gitpush_reader *r);

/* Reads the next item of the command list from `buf` (`n` bytes: the body from its first byte;
 * each call passes at least the bytes of the previous one). Returns the event; for
 * SL_GITPUSH_COMMAND fills `*cmd`. Reads whole pkt-lines only, so the cost over a body arriving
 * in pieces is linear. */
enum sl_gitpush_event sl_gitpush_next(struct sl_gitpush_reader *r, const uint8_t *buf, size_t n,
                                      struct sl_gitpush_cmd *cmd);

/* Appends to `out` the receive-pack result refusing every command of the command list at
 * `list` (`n` bytes that a reader took to END), each with `message` (one line of printable
 * ASCII): the report-status `unpack ok`, then `ng REF MESSAGE` per command, then a flush-pkt;
 * inside side-band channel 1 packets (followed by a flush-pkt) when `caps` has side-band-64k or
 * side-band. Returns 0, SL_EINVAL when `list` is not such a list, or SL_ETOOBIG / SL_ENOMEM
 * from `out`. */
SL_MUST_CHECK int sl_gitpush_refusal(struct sl_buf *out, const uint8_t *list, size_t n,
                                     unsigned caps, const char *message);

#endif
