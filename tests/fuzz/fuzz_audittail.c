/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/fuzz/fuzz_audittail.c - the audit log's tail reader (control/web/audittail) and the
 * suggested rule of one refusal with its sentence (control/web/suggest) on arbitrary file contents.
 * The first two bytes choose the line cap and the limit; the rest is written to a temporary file
 * and read back with sl_audittail_read().
 *
 * Invariants, not just "no crash": the lines handed over are exactly, in order, those of a
 * straightforward reference (split at '\n', the segment after the last '\n' dropped, empty lines
 * and lines over the cap skipped, newest first, at most `limit`); every line is non-empty,
 * within the cap and holds no '\n'. Each line that parses as a JSON object naming an environment
 * gets a suggestion (for an environment without rules) that is either none or a rule with a host
 * and a sentence starting "to allow it, add " without control characters.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "base/err.h"
#include "control/web/audittail.h"
#include "control/web/suggest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_LINES 4096

struct ref {
    const uint8_t *p[MAX_LINES];
    size_t n[MAX_LINES];
    size_t count;
    size_t next;
    size_t line_max;
};

static void check_suggestion(const char *line, size_t n)
{
    json_t *e = json_loadb(line, n, 0, NULL);
    const char *env = json_string_value(json_object_get(e, "environment"));
    struct sl_suggest *sg = NULL;
    json_t *s = NULL;
    char out[512];
    bool some;
    int len;

    if (!json_is_object(e) || env == NULL) {
        json_decref(e);
        return;
    }
    if (sl_suggest_create(env, NULL, &sg) != 0 || sl_suggest_line(sg, e, &s) != 0) {
        /* Out of memory only. */
        __builtin_trap();
    }
    some = s != NULL;
    len = some ? sl_suggest_sentence(s, env, out, sizeof(out)) : 0;
    if (some && !json_is_string(json_object_get(json_object_get(s, "rule"), "host"))) {
        __builtin_trap();
    }
    json_decref(s);
    sl_suggest_destroy(sg);
    json_decref(e);
    if (!some) {
        return;
    }
    if (len < 0) {
        if (len != SL_ETOOBIG || out[0] != '\0') {
            __builtin_trap();
        }
        return;
    }
    if ((size_t)len != strlen(out) || (len > 0 && strncmp(out, "to allow it, add ", 17) != 0)) {
        __builtin_trap();
    }
    for (int i = 0; i < len; i++) {
        if ((unsigned char)out[i] < 0x20) {
            __builtin_trap();
        }
    }
}

static enum sl_audittail_take on_line(void *arg, const char *line, size_t n)
{
    struct ref *r = arg;

    if (n == 0 || n > r->line_max || memchr(line, '\n', n) != NULL || r->next >= r->count
        || r->n[r->next] != n || memcmp(r->p[r->next], line, n) != 0) {
        __builtin_trap();
    }
    r->next++;
    check_suggestion(line, n);
    return SL_AUDITTAIL_COUNT;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct ref r;
    char path[] = "/tmp/sl-fuzz-audittail-XXXXXX";
    const uint8_t *body;
    size_t len;
    size_t limit;
    size_t end;
    int fd;

    if (size < 2) {
        return 0;
    }
    memset(&r, 0, sizeof(r));
    r.line_max = (size_t)data[0] % 200 + 1;
    limit = (size_t)data[1] % 32 + 1;
    body = data + 2;
    len = size - 2;
    /* The reference: complete lines only, newest first. */
    end = len;
    while (end > 0 && body[end - 1] != '\n') {
        end--;
    }
    while (end > 0 && r.count < limit && r.count < MAX_LINES) {
        size_t stop = end - 1;
        size_t start = stop;

        while (start > 0 && body[start - 1] != '\n') {
            start--;
        }
        if (stop > start && stop - start <= r.line_max) {
            r.p[r.count] = body + start;
            r.n[r.count] = stop - start;
            r.count++;
        }
        end = start;
    }
    fd = mkstemp(path);
    if (fd == -1) {
        return 0;
    }
    if (write(fd, body, len) != (ssize_t)len) {
        (void)close(fd);
        (void)unlink(path);
        return 0;
    }
    (void)close(fd);
    if (sl_audittail_read(path, limit, r.line_max, len + 1, on_line, &r, NULL) != 0
        || r.next != r.count) {
        __builtin_trap();
    }
    (void)unlink(path);
    return 0;
}
