/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/fuzz/fuzz_dockerpull.c - the reader of an image pull's progress stream
 * (control/sandbox/dockerpull) on arbitrary bytes, fed whole and again in two pieces split at a
 * point taken from the input's first byte.
 *
 * Invariants, not just "no crash": both feedings agree on everything the reader reports (layers,
 * bytes, the error, lines skipped, completion); no more layers than the reader keeps, no more
 * done than seen; a layer's bytes never pass its known total; the error is one terminated line.
 * The reference splitting and classifying functions run on the input too. ASan catches any read
 * past the input.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "base/err.h"
#include "control/sandbox/dockerpull.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void run(struct sl_dockerpull *p, const uint8_t *d, size_t n, size_t cut)
{
    sl_dockerpull_init(p);
    if (sl_dockerpull_feed(p, d, cut) < 0 || sl_dockerpull_feed(p, d + cut, n - cut) < 0) {
        /* Out of memory is not expected at these sizes. */
        __builtin_trap();
    }
    sl_dockerpull_end(p);
}

static struct sl_dockerpull whole;
static struct sl_dockerpull split;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sl_dockerpull_progress a;
    struct sl_dockerpull_progress b;
    struct sl_dockerpull_ref ref;
    char text[256];
    char out[512];
    size_t cut;
    size_t n;

    if (size == 0 || size > (1u << 18)) {
        return 0;
    }
    cut = data[0];
    data++;
    size--;
    cut = cut > size ? size : cut;
    run(&whole, data, size, size);
    run(&split, data, size, cut);
    sl_dockerpull_progress(&whole, &a);
    sl_dockerpull_progress(&split, &b);
    if (memcmp(&a, &b, sizeof(a)) != 0 || whole.failed != split.failed
        || whole.complete != split.complete || whole.skipped != split.skipped
        || strcmp(whole.error, split.error) != 0) {
        __builtin_trap();
    }
    if (a.layers > SL_DOCKERPULL_LAYERS_MAX || a.layers_done > a.layers
        || memchr(whole.error, '\0', sizeof(whole.error)) == NULL) {
        __builtin_trap();
    }
    for (size_t i = 0; i < whole.n_layers; i++) {
        const struct sl_dockerpull_layer *l = &whole.layers[i];

        if (l->total != 0 && l->current > l->total) {
            __builtin_trap();
        }
    }
    for (const char *c = whole.error; *c != '\0'; c++) {
        if ((unsigned char)*c < 0x20) {
            __builtin_trap();
        }
    }
    /* The input as a reference and as a daemon's message. */
    n = size < sizeof(text) - 1 ? size : sizeof(text) - 1;
    memcpy(text, data, n);
    text[n] = '\0';
    if (sl_dockerpull_split(text, &ref) == 0) {
        sl_dockerpull_describe(sl_dockerpull_classify(500, text), text, &ref, text, out,
                               sizeof(out));
        for (const char *c = out; *c != '\0'; c++) {
            if ((unsigned char)*c < 0x20) {
                __builtin_trap();
            }
        }
    }
    sl_dockerpull_finish(&whole);
    sl_dockerpull_finish(&split);
    return 0;
}
