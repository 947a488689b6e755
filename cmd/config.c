/* SPDX-License-Identifier: Apache-2.0 */
#include "cmd/config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <sodium.h>

#include "base/buf.h"
#include "base/file.h"
#include "base/mem.h"

static const char *const sections[] = { "up", "control", "proxy" };

void sl_conf_error_add(struct sl_conf_errors *errs, unsigned line, const char *fmt, ...)
{
    struct sl_conf_error *e;
    va_list ap;

    if (errs->n >= SL_CONF_ERRORS_MAX) {
        errs->truncated = true;
        return;
    }
    e = &errs->items[errs->n++];
    e->line = line;
    va_start(ap, fmt);
    (void)vsnprintf(e->message, sizeof(e->message), fmt, ap);
    va_end(ap);
}

bool sl_conf_section_is(const char *section, const char *own)
{
    return section[0] == '\0' || strcmp(section, own) == 0;
}

static bool is_space(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\r';
}

/* Trims white space at both ends of [*p, *p + *n). */
static void trim(char **p, size_t *n)
{
    while (*n > 0 && is_space((*p)[0])) {
        (*p)++;
        (*n)--;
    }
    while (*n > 0 && is_space((*p)[*n - 1])) {
        (*n)--;
    }
}

static bool is_key_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-';
}

/* A section header `[name]`: the section, or NULL after an error. */
static const char *section_of(char *s, size_t n, unsigned line, struct sl_conf_errors *errs)
{
    char *name = s + 1;
    size_t len;

    if (n < 2 || s[n - 1] != ']') {
        sl_conf_error_add(errs, line,
                          "a section header is [up], [control] or [proxy] alone on "
                          "its line");
        return NULL;
    }
    len = n - 2;
    trim(&name, &len);
    for (size_t i = 0; i < SL_ARRAY_LEN(sections); i++) {
        if (strlen(sections[i]) == len && memcmp(sections[i], name, len) == 0) {
            return sections[i];
        }
    }
    sl_conf_error_add(errs, line,
                      "unknown section [%.*s] (the sections are [up], [control] and "
                      "[proxy])",
                      (int)(len > 64 ? 64 : len), name);
    return NULL;
}

/* One `key = value` line into `e` (its strings cut in place). Returns false after an error. */
static bool entry_of(char *s, size_t n, unsigned line, struct sl_conf_entry *e,
                     struct sl_conf_errors *errs)
{
    char *eq = memchr(s, '=', n);
    char *key = s;
    char *value;
    size_t klen;
    size_t vlen;

    if (eq == NULL) {
        sl_conf_error_add(errs, line, "expected KEY = VALUE");
        return false;
    }
    klen = (size_t)(eq - s);
    value = eq + 1;
    vlen = n - klen - 1;
    trim(&key, &klen);
    trim(&value, &vlen);
    if (klen >= 2 && key[0] == '-' && key[1] == '-') {
        sl_conf_error_add(errs, line, "key '%.*s': write it without the leading --",
                          (int)(klen > 64 ? 64 : klen), key);
        return false;
    }
    if (klen == 0) {
        sl_conf_error_add(errs, line, "expected KEY = VALUE (the key is missing)");
        return false;
    }
    for (size_t i = 0; i < klen; i++) {
        if (!is_key_char(key[i])) {
            sl_conf_error_add(errs, line,
                              "key '%.*s': a key is a flag's name (a-z, 0-9 and -), e.g. "
                              "listen",
                              (int)(klen > 64 ? 64 : klen), key);
            return false;
        }
    }
    if (vlen == 0) {
        sl_conf_error_add(errs, line, "key '%.*s': missing value", (int)klen, key);
        return false;
    }
    key[klen] = '\0';
    value[vlen] = '\0';
    e->key = key;
    e->value = value;
    e->line = line;
    return true;
}

int sl_conf_parse(const char *path, const char *text, size_t len, struct sl_conf **out,
                  struct sl_conf_errors *errs)
{
    struct sl_conf *c;
    const char *section = SL_CONF_SECTION_TOP;
    size_t lines = 1;
    size_t pos = 0;
    unsigned line = 0;

    if (len > SL_CONF_MAX_BYTES) {
        return SL_ETOOBIG;
    }
    for (size_t i = 0; i < len; i++) {
        lines += text[i] == '\n';
    }
    c = sl_calloc(1, sizeof(*c));
    if (c == NULL) {
        return SL_ENOMEM;
    }
    c->path = sl_strdup(path);
    c->text = sl_malloc(len + 1);
    c->entries = sl_calloc(lines, sizeof(*c->entries));
    if (c->path == NULL || c->text == NULL || c->entries == NULL) {
        sl_conf_destroy(c);
        return SL_ENOMEM;
    }
    memcpy(c->text, text, len);
    c->text[len] = '\0';
    c->text_len = len;
    while (pos < len) {
        char *s = c->text + pos;
        char *nl = memchr(s, '\n', len - pos);
        size_t n = nl != NULL ? (size_t)(nl - s) : len - pos;

        pos += n + 1;
        line++;
        trim(&s, &n);
        if (n == 0 || s[0] == '#') {
            continue;
        }
        if (memchr(s, '\0', n) != NULL) {
            sl_conf_error_add(errs, line, "a NUL byte in the line");
            continue;
        }
        if (s[0] == '[') {
            const char *next = section_of(s, n, line, errs);

            /* After a bad header, its keys are not read as another section's. */
            section = next != NULL ? next : "?";
            continue;
        }
        if (entry_of(s, n, line, &c->entries[c->n], errs) && section[0] != '?') {
            c->entries[c->n++].section = section;
        }
    }
    *out = c;
    return 0;
}

int sl_conf_load(const char *path, struct sl_conf **out, struct sl_conf_errors *errs, char *err,
                 size_t errlen)
{
    struct sl_buf text;
    int rc;

    sl_buf_init(&text, SL_CONF_MAX_BYTES);
    rc = sl_file_read(path, &text, err, errlen);
    if (rc == SL_ETOOBIG) {
        (void)snprintf(err, errlen, "%s is larger than %u bytes", path, SL_CONF_MAX_BYTES);
    } else if (rc == SL_ENOTFOUND) {
        (void)snprintf(err, errlen, "cannot read %s: no such file", path);
        rc = SL_EIO;
    }
    if (rc == 0) {
        rc = sl_conf_parse(path, (const char *)text.p, text.len, out, errs);
        if (rc == SL_ENOMEM) {
            (void)snprintf(err, errlen, "out of memory");
        }
    }
    /* The file may hold a token (git-token). */
    if (text.p != NULL) {
        sodium_memzero(text.p, text.len);
    }
    sl_buf_finish(&text);
    return rc;
}

void sl_conf_destroy(struct sl_conf *c)
{
    if (c == NULL) {
        return;
    }
    if (c->text != NULL) {
        sodium_memzero(c->text, c->text_len);
    }
    sl_free(c->text);
    sl_free(c->entries);
    sl_free(c->path);
    sl_free(c);
}
