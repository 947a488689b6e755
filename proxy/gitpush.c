/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proxy/gitpush.c - the reader of a push's ref-update commands and the refusal's receive-pack
 * result (proxy/gitpush.h).
 */
#include "proxy/gitpush.h"

#include <string.h>

/* The four length digits of a pkt-line. */
#define PKT_HEADER 4
/* The data of a side-band packet: a pkt-line less its length digits and its band byte. */
#define BAND_64K_DATA_MAX (SL_GITPUSH_PKT_MAX - PKT_HEADER - 1)
#define BAND_DATA_MAX     (1000 - PKT_HEADER - 1)
/* Room for the report before it is cut into side-band packets: the list's refs plus a line of
 * text per command fit many times over. */
#define REPORT_MAX ((size_t)1 << 20)

void sl_gitpush_reader_init(struct sl_gitpush_reader *r)
{
    *r = (struct sl_gitpush_reader){ .done = SL_GITPUSH_MORE };
}

static int hex_value(uint8_t ch)
{
    if (ch >= '0' && ch <= '9') {
        return ch - '0';
    }
    if (ch >= 'a' && ch <= 'f') {
        return ch - 'a' + 10;
    }
    if (ch >= 'A' && ch <= 'F') {
        return ch - 'A' + 10;
    }
    return -1;
}

/* The length in the four digits at `p`, or -1 when they are not hex. */
static long pkt_length(const uint8_t *p)
{
    long v = 0;

    for (int i = 0; i < PKT_HEADER; i++) {
        int d = hex_value(p[i]);

        if (d < 0) {
            return -1;
        }
        v = v * 16 + d;
    }
    return v;
}

static enum sl_gitpush_event fail(struct sl_gitpush_reader *r, const char *why)
{
    r->done = SL_GITPUSH_BAD;
    r->why = why;
    return SL_GITPUSH_BAD;
}

/* Is `p` (`n` bytes) an object id: 40 or 64 hex digits? */
static bool is_oid(const uint8_t *p, size_t n)
{
    if (n != 40 && n != 64) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (hex_value(p[i]) < 0) {
            return false;
        }
    }
    return true;
}

/* The length of the object id starting at `p` (`n` bytes available) when a space follows it:
 * 40 or 64; else 0. */
static size_t oid_then_space(const uint8_t *p, size_t n)
{
    static const size_t lengths[] = { 64, 40 };

    for (size_t i = 0; i < SL_ARRAY_LEN(lengths); i++) {
        size_t k = lengths[i];

        if (n > k && p[k] == ' ' && is_oid(p, k)) {
            return k;
        }
    }
    return 0;
}

static bool has_word(const uint8_t *p, size_t n, const char *word)
{
    size_t k = strlen(word);
    size_t i = 0;

    while (i < n) {
        size_t start = i;

        while (i < n && p[i] != ' ') {
            i++;
        }
        if (i - start == k && memcmp(p + start, word, k) == 0) {
            return true;
        }
        i++;
    }
    return false;
}

static unsigned read_caps(const uint8_t *p, size_t n)
{
    unsigned caps = 0;

    caps |= has_word(p, n, "report-status") ? SL_GITPUSH_CAP_REPORT_STATUS : 0u;
    caps |= has_word(p, n, "report-status-v2") ? SL_GITPUSH_CAP_REPORT_STATUS_V2 : 0u;
    caps |= has_word(p, n, "side-band-64k") ? SL_GITPUSH_CAP_SIDE_BAND_64K : 0u;
    caps |= has_word(p, n, "side-band") ? SL_GITPUSH_CAP_SIDE_BAND : 0u;
    return caps;
}

/* One command's data (its LF removed): OLD SP NEW SP REF [NUL CAPS]. */
static enum sl_gitpush_event read_command(struct sl_gitpush_reader *r, const uint8_t *p, size_t n,
                                          struct sl_gitpush_cmd *cmd)
{
    const uint8_t *nul = memchr(p, '\0', n);
    size_t line = nul != NULL ? (size_t)(nul - p) : n;
    size_t k = oid_then_space(p, line);
    size_t ref;

    if (nul != NULL && r->n_commands > 0) {
        return fail(r, "a capability list after the first command");
    }
    if (k == 0 || line < 2 * k + 3 || oid_then_space(p + k + 1, line - k - 1) != k) {
        return fail(r, "a command is not OLD-OID NEW-OID REFNAME");
    }
    ref = 2 * k + 2;
    for (size_t i = ref; i < line; i++) {
        if (p[i] <= 0x20 || p[i] == 0x7f) {
            return fail(r, "a ref name with a space or a control character");
        }
    }
    if (nul != NULL) {
        r->caps = read_caps(nul + 1, n - line - 1);
    }
    r->n_commands++;
    *cmd = (struct sl_gitpush_cmd){ sl_slice_of(p, k), sl_slice_of(p + k + 1, k),
                                    sl_slice_of(p + ref, line - ref) };
    return SL_GITPUSH_COMMAND;
}

enum sl_gitpush_event sl_gitpush_next(struct sl_gitpush_reader *r, const uint8_t *buf, size_t n,
                                      struct sl_gitpush_cmd *cmd)
{
    static const char shallow[] = "shallow ";
    static const char cert[] = "push-cert";
    const uint8_t *p;
    size_t len;
    long v;

    if (r->done != SL_GITPUSH_MORE) {
        return r->done;
    }
    for (;;) {
        if (n < r->pos + PKT_HEADER) {
            return r->pos + PKT_HEADER > SL_GITPUSH_MAX_BYTES
                           ? fail(r, "the command list is longer than 64 KiB")
                           : SL_GITPUSH_MORE;
        }
        v = pkt_length(buf + r->pos);
        if (v < 0) {
            return fail(r, "a pkt-line length is not four hex digits");
        }
        if (r->pos + (v < PKT_HEADER ? PKT_HEADER : (size_t)v) > SL_GITPUSH_MAX_BYTES) {
            return fail(r, "the command list is longer than 64 KiB");
        }
        if (v == 0) {
            r->pos += PKT_HEADER;
            r->done = SL_GITPUSH_END;
            return SL_GITPUSH_END;
        }
        if (v < PKT_HEADER) {
            return fail(r, "a special packet (delim or response-end) in the command list");
        }
        if (v == PKT_HEADER) {
            return fail(r, "an empty pkt-line in the command list");
        }
        if ((unsigned long)v > SL_GITPUSH_PKT_MAX) {
            return fail(r, "a pkt-line longer than 65520 bytes");
        }
        if (n < r->pos + (size_t)v) {
            return SL_GITPUSH_MORE;
        }
        p = buf + r->pos + PKT_HEADER;
        len = (size_t)v - PKT_HEADER;
        r->pos += (size_t)v;
        if (p[len - 1] == '\n') {
            len--;
        }
        if (len >= sizeof(cert) - 1 && memcmp(p, cert, sizeof(cert) - 1) == 0) {
            return fail(r, "signed pushes (push-cert) are not supported");
        }
        if (len >= sizeof(shallow) - 1 && memcmp(p, shallow, sizeof(shallow) - 1) == 0) {
            if (r->n_commands > 0) {
                return fail(r, "a shallow line after a command");
            }
            if (!is_oid(p + sizeof(shallow) - 1, len - (sizeof(shallow) - 1))) {
                return fail(r, "a shallow line without an object id");
            }
            r->n_shallow++;
            continue;
        }
        return read_command(r, p, len, cmd);
    }
}

/* Appends the four length digits of a pkt-line of `len` bytes (at most SL_GITPUSH_PKT_MAX). */
static int put_length(struct sl_buf *b, size_t len)
{
    static const char digits[] = "0123456789abcdef";
    char head[PKT_HEADER] = { digits[(len >> 12) & 15], digits[(len >> 8) & 15],
                              digits[(len >> 4) & 15], digits[len & 15] };

    return sl_buf_append(b, head, sizeof(head));
}

/* Appends one pkt-line holding `n` bytes of `p`. */
static int put_pkt(struct sl_buf *b, const void *p, size_t n)
{
    SL_TRY(put_length(b, n + PKT_HEADER));
    return sl_buf_append(b, p, n);
}

/* `ng REF MESSAGE` lines for the commands of `list`, between `unpack ok` and a flush-pkt. */
static int put_report(struct sl_buf *b, const uint8_t *list, size_t n, const char *message)
{
    static const char unpack[] = "unpack ok\n";
    struct sl_gitpush_reader r;
    struct sl_gitpush_cmd cmd;
    enum sl_gitpush_event ev = SL_GITPUSH_MORE;
    struct sl_buf line;
    int rc = 0;

    sl_buf_init(&line, SL_GITPUSH_PKT_MAX);
    SL_TRY(put_pkt(b, unpack, sizeof(unpack) - 1));
    sl_gitpush_reader_init(&r);
    while (rc == 0 && (ev = sl_gitpush_next(&r, list, n, &cmd)) == SL_GITPUSH_COMMAND) {
        sl_buf_reset(&line);
        rc = sl_buf_append_str(&line, "ng ");
        rc = rc == 0 ? sl_buf_append(&line, cmd.ref.p, cmd.ref.n) : rc;
        rc = rc == 0 ? sl_buf_printf(&line, " %s\n", message) : rc;
        rc = rc == 0 ? put_pkt(b, line.p, line.len) : rc;
    }
    sl_buf_finish(&line);
    if (rc == 0 && ev != SL_GITPUSH_END) {
        rc = SL_EINVAL;
    }
    return rc == 0 ? sl_buf_append(b, "0000", PKT_HEADER) : rc;
}

int sl_gitpush_refusal(struct sl_buf *out, const uint8_t *list, size_t n, unsigned caps,
                       const char *message)
{
    size_t band_max = (caps & SL_GITPUSH_CAP_SIDE_BAND_64K) != 0 ? BAND_64K_DATA_MAX
                      : (caps & SL_GITPUSH_CAP_SIDE_BAND) != 0   ? BAND_DATA_MAX
                                                                 : 0;
    struct sl_buf report;
    int rc;

    if (band_max == 0) {
        return put_report(out, list, n, message);
    }
    /* Side-band: the report is the data of channel 1, cut into packets; a flush-pkt ends the
     * multiplexed stream (receive-pack's report() and its final packet_flush()). */
    sl_buf_init(&report, REPORT_MAX);
    rc = put_report(&report, list, n, message);
    for (size_t off = 0; rc == 0 && off < report.len;) {
        size_t k = report.len - off < band_max ? report.len - off : band_max;
        uint8_t band = 1;

        rc = put_length(out, k + 1 + PKT_HEADER);
        rc = rc == 0 ? sl_buf_append(out, &band, 1) : rc;
        rc = rc == 0 ? sl_buf_append(out, report.p + off, k) : rc;
        off += k;
    }
    sl_buf_finish(&report);
    return rc == 0 ? sl_buf_append(out, "0000", PKT_HEADER) : rc;
}
