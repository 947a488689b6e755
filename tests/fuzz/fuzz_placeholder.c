/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/fuzz/fuzz_placeholder.c - the placeholders of policy/placeholder on arbitrary header
 * values: the scan, the replacement (raw text and Basic credentials decoded and encoded again)
 * and the mask.
 *
 * The input is one header value. Byte 0, when the input has more than one byte, picks the cap of
 * the replacement's buffer (small caps reach SL_ETOOBIG) and is dropped from the value.
 *
 * Invariants, beyond ASan/UBSan:
 *   - the replacement of placeholder A leaves no A that the scan could find, and counts a
 *     replacement exactly when the scan finds A in the value; with none, the value is copied
 *     byte for byte;
 *   - it never makes or removes placeholder B (another variable's): the scan finds B in the
 *     result exactly when it finds it in the value;
 *   - a scan that excludes A finds neither A nor anything when only A is there;
 *   - a failed replacement (the cap) fails cleanly with SL_ETOOBIG;
 *   - the mask keeps the length and leaves no placeholder shape; text without one is untouched.
 */
#include <stdint.h>
#include <string.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/mem.h"
#include "policy/placeholder.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define INPUT_MAX ((size_t)64 << 10)

static const struct sl_placeholder set[] = {
    { "OPENAI_API_KEY", "sluice-ph-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa2", "api.test",
      "Authorization", "sk-REAL-A" },
    { "OTHER", "sluice-ph-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb3", "other.test", "X-Key",
      "s3cr3t:B" },
};

static bool has(const struct sl_placeholder *ph, struct sl_slice s)
{
    return sl_placeholder_scan(ph, 1, s, NULL) != NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sl_slice v = sl_slice_of(data, size);
    struct sl_buf out;
    size_t cap = (size_t)1 << 20;
    unsigned count = 0;
    const struct sl_placeholder *found;
    char *masked;
    int rc;

    if (size > INPUT_MAX) {
        return 0;
    }
    if (size > 1) {
        cap = data[0] < 64 ? (size_t)data[0] + 1 : cap;
        v = sl_slice_of(data + 1, size - 1);
    }
    found = sl_placeholder_scan(set, 2, v, NULL);
    SL_BUG_ON((found != NULL) != (has(&set[0], v) || has(&set[1], v)));
    found = sl_placeholder_scan(set, 2, v, &set[0]);
    SL_BUG_ON(found == &set[0]);
    SL_BUG_ON((found != NULL) != has(&set[1], v));

    sl_buf_init(&out, cap);
    rc = sl_placeholder_replace(&out, v, &set[0], &count);
    if (rc == 0) {
        struct sl_slice r = sl_slice_of(out.p, out.len);

        SL_BUG_ON(has(&set[0], r));
        SL_BUG_ON((count > 0) != has(&set[0], v));
        SL_BUG_ON(count == 0 && !sl_slice_eq(r, v));
        SL_BUG_ON(has(&set[1], r) != has(&set[1], v));
    } else {
        SL_BUG_ON(rc != SL_ETOOBIG);
    }
    sl_buf_finish(&out);

    masked = sl_malloc(v.n + 1);
    if (masked != NULL) {
        bool seen;

        memcpy(masked, v.p, v.n);
        masked[v.n] = '\0';
        seen = sl_placeholder_seen(masked, v.n);
        sl_placeholder_mask(masked, v.n);
        SL_BUG_ON(sl_placeholder_seen(masked, v.n));
        SL_BUG_ON(!seen && memcmp(masked, v.p, v.n) != 0);
        SL_BUG_ON(masked[v.n] != '\0');
        sl_free(masked);
    }
    return 0;
}
