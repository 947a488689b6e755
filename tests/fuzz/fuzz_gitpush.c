/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/fuzz/fuzz_gitpush.c - the reader of a push's ref-update commands (proxy/gitpush.h) on
 * arbitrary bodies, and the refusal built from what it accepted.
 *
 * Input: one byte choosing how many bytes arrive at a time (1-64, or all at once; more for a
 * long body, so that it arrives in at most 1024 pieces), then the body.
 *
 * Invariants, not just "no crash":
 *   - every buffer given to the reader is a heap copy of exactly the bytes it may read, so a
 *     read past them is caught by the sanitizers; every slice it returns lies inside them;
 *   - the verdict (END, BAD, or MORE when the body runs out), the commands (ids and refs), the
 *     capabilities and the list's length are those of a simple reference parse of the whole
 *     body written here independently, and are the same whether the body arrives whole or in
 *     pieces;
 *   - each command's protected-branch verdict (policy/git.h) agrees with a reference glob;
 *   - for a list read to END, the refusal is built (with and without side-band) and parses
 *     back into `unpack ok`, one `ng REF MESSAGE` per command in order, and a flush.
 */
#include <stdint.h>
#include <string.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/mem.h"
#include "policy/git.h"
#include "proxy/gitpush.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The commands kept for comparison (more are counted, not kept). */
#define KEEP_MAX 64

#define MESSAGE "agents may not push to protected or default branches; open a pull request"

struct parsed {
    enum sl_gitpush_event end;
    size_t pos;
    unsigned caps;
    size_t commands;
    /* Offsets and lengths of the first KEEP_MAX commands' ref names in the body. */
    size_t ref_off[KEEP_MAX];
    size_t ref_len[KEEP_MAX];
    size_t old_off[KEEP_MAX];
    size_t oid_len[KEEP_MAX];
};

/*
 * The reference parse: the grammar of proxy/gitpush.h, written as plainly as possible over the
 * whole body.
 */

static bool is_hex(uint8_t c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static bool all_hex(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!is_hex(p[i])) {
            return false;
        }
    }
    return true;
}

static size_t find(const uint8_t *p, size_t n, uint8_t c)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] == c) {
            return i;
        }
    }
    return n;
}

static bool word_in(const uint8_t *p, size_t n, const char *w)
{
    size_t wl = strlen(w);
    size_t start = 0;

    for (size_t i = 0; i <= n; i++) {
        if (i == n || p[i] == ' ') {
            if (i - start == wl && memcmp(p + start, w, wl) == 0) {
                return true;
            }
            start = i + 1;
        }
    }
    return false;
}

static bool starts(const uint8_t *p, size_t n, const char *s)
{
    return n >= strlen(s) && memcmp(p, s, strlen(s)) == 0;
}

/* One command line (`p`, `n` bytes, its LF removed) at body offset `off`. Returns false when it
 * is malformed. */
static bool ref_command(const uint8_t *p, size_t n, size_t off, struct parsed *o)
{
    size_t nul = find(p, n, 0);
    size_t sp1 = find(p, nul, ' ');
    size_t sp2;

    if (nul < n && o->commands > 0) {
        return false;
    }
    if ((sp1 != 40 && sp1 != 64) || !all_hex(p, sp1) || sp1 == nul) {
        return false;
    }
    sp2 = sp1 + 1 + find(p + sp1 + 1, nul - sp1 - 1, ' ');
    if (sp2 - sp1 - 1 != sp1 || !all_hex(p + sp1 + 1, sp1) || sp2 >= nul) {
        return false;
    }
    if (sp2 + 1 == nul) {
        return false;
    }
    for (size_t i = sp2 + 1; i < nul; i++) {
        if (p[i] <= ' ' || p[i] == 0x7f) {
            return false;
        }
    }
    if (nul < n) {
        const uint8_t *c = p + nul + 1;
        size_t cn = n - nul - 1;

        o->caps = (word_in(c, cn, "report-status") ? SL_GITPUSH_CAP_REPORT_STATUS : 0u)
                  | (word_in(c, cn, "report-status-v2") ? SL_GITPUSH_CAP_REPORT_STATUS_V2 : 0u)
                  | (word_in(c, cn, "side-band-64k") ? SL_GITPUSH_CAP_SIDE_BAND_64K : 0u)
                  | (word_in(c, cn, "side-band") ? SL_GITPUSH_CAP_SIDE_BAND : 0u);
    }
    if (o->commands < KEEP_MAX) {
        o->old_off[o->commands] = off;
        o->oid_len[o->commands] = sp1;
        o->ref_off[o->commands] = off + sp2 + 1;
        o->ref_len[o->commands] = nul - sp2 - 1;
    }
    o->commands++;
    return true;
}

static void reference(const uint8_t *p, size_t n, struct parsed *o)
{
    size_t pos = 0;

    memset(o, 0, sizeof(*o));
    for (;;) {
        size_t v = 0;
        size_t len;
        const uint8_t *d;

        if (n - pos < 4) {
            o->end = pos + 4 > SL_GITPUSH_MAX_BYTES ? SL_GITPUSH_BAD : SL_GITPUSH_MORE;
            break;
        }
        if (!all_hex(p + pos, 4)) {
            o->end = SL_GITPUSH_BAD;
            break;
        }
        for (int i = 0; i < 4; i++) {
            uint8_t c = p[pos + (size_t)i];

            v = v * 16 + (size_t)(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
        }
        if (pos + (v < 4 ? 4 : v) > SL_GITPUSH_MAX_BYTES || (v > 0 && v <= 4) || v > 65520) {
            o->end = SL_GITPUSH_BAD;
            break;
        }
        if (v == 0) {
            pos += 4;
            o->end = SL_GITPUSH_END;
            break;
        }
        if (n - pos < v) {
            o->end = SL_GITPUSH_MORE;
            break;
        }
        d = p + pos + 4;
        len = v - 4;
        if (d[len - 1] == '\n') {
            len--;
        }
        if (starts(d, len, "push-cert")) {
            o->end = SL_GITPUSH_BAD;
            break;
        }
        if (starts(d, len, "shallow ")) {
            if (o->commands > 0 || (len - 8 != 40 && len - 8 != 64) || !all_hex(d + 8, len - 8)) {
                o->end = SL_GITPUSH_BAD;
                break;
            }
        } else if (!ref_command(d, len, pos + 4, o)) {
            o->end = SL_GITPUSH_BAD;
            break;
        }
        pos += v;
    }
    o->pos = o->end == SL_GITPUSH_END ? pos : 0;
    if (o->end == SL_GITPUSH_BAD) {
        o->commands = 0;
        o->caps = 0;
    }
}

/*
 * The reader under test.
 */

static void under_test(const uint8_t *body, size_t n, size_t step, struct parsed *o)
{
    struct sl_gitpush_reader r;
    struct sl_gitpush_cmd cmd;
    enum sl_gitpush_event ev = SL_GITPUSH_MORE;
    size_t have = step == 0 ? n : (step < n ? step : n);

    memset(o, 0, sizeof(*o));
    sl_gitpush_reader_init(&r);
    for (;;) {
        uint8_t *copy = sl_malloc(have > 0 ? have : 1);

        if (copy == NULL) {
            SL_BUG_ON(true);
            return;
        }
        memcpy(copy, body, have);
        while ((ev = sl_gitpush_next(&r, copy, have, &cmd)) == SL_GITPUSH_COMMAND) {
            SL_BUG_ON(cmd.ref.n == 0 || cmd.ref.p < copy || cmd.ref.p + cmd.ref.n > copy + have);
            SL_BUG_ON(cmd.old_oid.p < copy || cmd.new_oid.p + cmd.new_oid.n > copy + have);
            SL_BUG_ON(cmd.old_oid.n != cmd.new_oid.n
                      || (cmd.old_oid.n != 40 && cmd.old_oid.n != 64));
            if (o->commands < KEEP_MAX) {
                o->old_off[o->commands] = (size_t)(cmd.old_oid.p - copy);
                o->oid_len[o->commands] = cmd.old_oid.n;
                o->ref_off[o->commands] = (size_t)(cmd.ref.p - copy);
                o->ref_len[o->commands] = cmd.ref.n;
            }
            o->commands++;
        }
        SL_BUG_ON(r.pos > have);
        sl_free(copy);
        if (ev != SL_GITPUSH_MORE || have == n) {
            break;
        }
        have = have + step < n ? have + step : n;
    }
    SL_BUG_ON(ev == SL_GITPUSH_BAD && r.why == NULL);
    o->end = ev;
    o->pos = ev == SL_GITPUSH_END ? r.pos : 0;
    SL_BUG_ON(o->pos > SL_GITPUSH_MAX_BYTES);
    if (ev == SL_GITPUSH_BAD) {
        o->commands = 0;
        o->caps = 0;
    } else {
        o->caps = r.caps;
    }
    /* The verdict repeats. */
    if (ev != SL_GITPUSH_MORE) {
        SL_BUG_ON(sl_gitpush_next(&r, body, n, &cmd) != ev);
    }
}

static void same(const struct parsed *a, const struct parsed *b)
{
    SL_BUG_ON(a->end != b->end || a->pos != b->pos || a->caps != b->caps);
    if (a->end == SL_GITPUSH_BAD) {
        return;
    }
    SL_BUG_ON(a->commands != b->commands);
    for (size_t i = 0; i < a->commands && i < KEEP_MAX; i++) {
        SL_BUG_ON(a->ref_off[i] != b->ref_off[i] || a->ref_len[i] != b->ref_len[i]
                  || a->old_off[i] != b->old_off[i] || a->oid_len[i] != b->oid_len[i]);
    }
}

/*
 * Protected refs: policy/git.h against a reference glob.
 */

static uint8_t low(uint8_t c)
{
    return c >= 'A' && c <= 'Z' ? (uint8_t)(c + 32) : c;
}

/* '*' matches any run; recursion bounded by the pattern's few stars. */
static bool ref_glob(const char *pat, const uint8_t *s, size_t n)
{
    if (*pat == '\0') {
        return n == 0;
    }
    if (*pat == '*') {
        for (size_t k = 0; k <= n; k++) {
            if (ref_glob(pat + 1, s + k, n - k)) {
                return true;
            }
        }
        return false;
    }
    return n > 0 && low((uint8_t)*pat) == low(s[0]) && ref_glob(pat + 1, s + 1, n - 1);
}

static void check_protection(const uint8_t *ref, size_t n)
{
    static const char *const globs[] = { "release/*", "*-stable", "a*b*c" };
    struct sl_slice g[3];
    bool want = false;
    const size_t k = strlen("refs/heads/");

    for (size_t i = 0; i < 3; i++) {
        g[i] = sl_slice_str(globs[i]);
    }
    if (n > k) {
        bool heads = true;

        for (size_t i = 0; i < k; i++) {
            heads = heads && low(ref[i]) == (uint8_t) "refs/heads/"[i];
        }
        if (heads) {
            want = ref_glob("main", ref + k, n - k);
            for (size_t i = 0; i < 3 && !want; i++) {
                want = ref_glob(globs[i], ref + k, n - k);
            }
        }
    }
    SL_BUG_ON(sl_git_ref_matches(sl_slice_of(ref, n), sl_slice_str("main"), g, 3) != want);
}

/*
 * The refusal, parsed back.
 */

/* Reads the pkt-line at `*at` of `p` (`n` bytes): its data, or a flush (`*len` 0). */
static bool next_pkt(const uint8_t *p, size_t n, size_t *at, const uint8_t **d, size_t *len)
{
    size_t v = 0;

    if (n - *at < 4 || !all_hex(p + *at, 4)) {
        return false;
    }
    for (int i = 0; i < 4; i++) {
        uint8_t c = p[*at + (size_t)i];

        v = v * 16 + (size_t)(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
    }
    if (v == 0) {
        *at += 4;
        *len = 0;
        return true;
    }
    if (v < 5 || v > 65520 || n - *at < v) {
        return false;
    }
    *d = p + *at + 4;
    *len = v - 4;
    *at += v;
    return true;
}

static void check_refusal(const uint8_t *body, const struct parsed *o, unsigned caps)
{
    struct sl_buf out;
    struct sl_buf report;
    const uint8_t *d = NULL;
    size_t len = 0;
    size_t at = 0;
    const size_t mlen = strlen(MESSAGE);

    sl_buf_init(&out, (size_t)4 << 20);
    sl_buf_init(&report, (size_t)4 << 20);
    SL_BUG_ON(sl_gitpush_refusal(&out, body, o->pos, caps, MESSAGE) != 0);
    if ((caps & (SL_GITPUSH_CAP_SIDE_BAND_64K | SL_GITPUSH_CAP_SIDE_BAND)) != 0) {
        size_t max = (caps & SL_GITPUSH_CAP_SIDE_BAND_64K) != 0 ? 65520 : 1000;

        for (;;) {
            SL_BUG_ON(!next_pkt(out.p, out.len, &at, &d, &len));
            if (len == 0) {
                break;
            }
            SL_BUG_ON(d[0] != 1 || len + 4 > max);
            SL_BUG_ON(sl_buf_append(&report, d + 1, len - 1) != 0);
        }
        SL_BUG_ON(at != out.len);
    } else {
        SL_BUG_ON(sl_buf_append(&report, out.p, out.len) != 0);
    }
    at = 0;
    SL_BUG_ON(!next_pkt(report.p, report.len, &at, &d, &len) || len != 10
              || memcmp(d, "unpack ok\n", 10) != 0);
    for (size_t i = 0; i < o->commands; i++) {
        SL_BUG_ON(!next_pkt(report.p, report.len, &at, &d, &len) || len < 3 || memcmp(d, "ng ", 3));
        if (i < KEEP_MAX) {
            size_t rl = o->ref_len[i];

            SL_BUG_ON(len != 3 + rl + 1 + mlen + 1 || memcmp(d + 3, body + o->ref_off[i], rl) != 0
                      || d[3 + rl] != ' ' || memcmp(d + 4 + rl, MESSAGE, mlen) != 0
                      || d[len - 1] != '\n');
        }
    }
    SL_BUG_ON(!next_pkt(report.p, report.len, &at, &d, &len) || len != 0 || at != report.len);
    sl_buf_finish(&report);
    sl_buf_finish(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct parsed want;
    struct parsed whole;
    struct parsed pieces;
    const uint8_t *body;
    size_t n;
    size_t step;

    if (size == 0) {
        return 0;
    }
    step = data[0] % 65;
    body = data + 1;
    n = size - 1;
    /* Each piece is a fresh copy of the whole prefix: at most 1024 of them per input. */
    if (step > 0 && n / step > 1024) {
        step = n / 1024 + 1;
    }
    reference(body, n, &want);
    under_test(body, n, 0, &whole);
    same(&whole, &want);
    if (step > 0) {
        under_test(body, n, step, &pieces);
        same(&pieces, &want);
    }
    for (size_t i = 0; i < whole.commands && i < KEEP_MAX; i++) {
        /* The reference glob is quadratic: long refs are left to the unit tests. */
        if (whole.ref_len[i] <= 2000) {
            check_protection(body + whole.ref_off[i], whole.ref_len[i]);
        }
    }
    if (n > 0) {
        /* Any bytes as a ref name too, cut at 300. */
        check_protection(body, n < 300 ? n : 300);
    }
    if (whole.end == SL_GITPUSH_END) {
        check_refusal(body, &whole, 0);
        check_refusal(body, &whole, SL_GITPUSH_CAP_SIDE_BAND_64K);
        check_refusal(body, &whole, SL_GITPUSH_CAP_SIDE_BAND);
    }
    return 0;
}
