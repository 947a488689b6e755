/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cmd/confcheck.c - `sluice config check FILE [--for up|control|proxy]` (docs/reference/cli.md
 * §1.8): reads a configuration file as the command named would (`sluice up` by default) and
 * names the line and key of every problem: a syntax error, an unknown key, a key given twice, a
 * value the command refuses. Values are checked by the commands' own parsers, run without
 * starting anything: each key alone (so that every bad value is found, not just the first),
 * then all of them together (for rules between keys, such as --ca-cert with --ca-key).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/mem.h"
#include "cmd/cmd.h"
#include "cmd/config.h"
#include "cmd/opts.h"

static const char usage[] =
        "usage: sluice config check FILE [--for up|control|proxy]\n"
        "\n"
        "Checks a configuration file as `sluice COMMAND --config FILE` would read it (COMMAND\n"
        "is up unless --for names another): every line's problem is printed as FILE:LINE:\n"
        "..., then `FILE: invalid, N errors` (exit 1); a valid file gets a one-line summary\n"
        "(exit 0).\n"
        "\n"
        "The format: `key = value` lines, a key being a flag's name without its --; a\n"
        "repeatable flag's key repeats; `#` starts a comment line. Keys before the first\n"
        "section header are the command's own; [up], [control] and [proxy] hold those of each\n"
        "command (sluice up reads [up] and [control] as its flags and passes [proxy] to its\n"
        "proxy).\n";

typedef int check_fn(int argc, char **argv);

/* What one command reads of the file, and how its values are checked. */
struct reader {
    const char *cmd;
    check_fn *check;
    /* The sections read (the top too), NULL-terminated. */
    const char *sections[3];
};

struct check {
    const struct sl_conf *conf;
    struct sl_conf_errors errs;
    size_t keys;
};

/* Runs `fn` with standard error going to a temporary file; the first line it wrote, without
 * its "sluice: CMD: " prefix, lands in `msg`. Returns what `fn` returned. */
static int run_captured(check_fn *fn, const char *cmd, int argc, char **argv, char *msg, size_t cap)
{
    FILE *tmp = tmpfile();
    int saved;
    int rc;
    char prefix[64];
    size_t n;

    msg[0] = '\0';
    if (tmp == NULL) {
        return fn(argc, argv);
    }
    /* sl_eprintf() writes with write(2): nothing is buffered to flush first. */
    saved = dup(STDERR_FILENO);
    if (saved == -1 || dup2(fileno(tmp), STDERR_FILENO) == -1) {
        if (saved != -1) {
            (void)close(saved);
        }
        (void)fclose(tmp);
        return fn(argc, argv);
    }
    rc = fn(argc, argv);
    (void)dup2(saved, STDERR_FILENO);
    (void)close(saved);
    rewind(tmp);
    if (fgets(msg, (int)cap, tmp) == NULL) {
        msg[0] = '\0';
    }
    (void)fclose(tmp);
    msg[strcspn(msg, "\n")] = '\0';
    (void)snprintf(prefix, sizeof(prefix), "sluice: %s: ", cmd);
    n = strlen(prefix);
    if (strncmp(msg, prefix, n) == 0) {
        memmove(msg, msg + n, strlen(msg + n) + 1);
    }
    return rc;
}

static bool reads(const struct reader *r, const char *section)
{
    if (section[0] == '\0') {
        return true;
    }
    for (size_t i = 0; r->sections[i] != NULL; i++) {
        if (strcmp(section, r->sections[i]) == 0) {
            return true;
        }
    }
    return false;
}

/* The argument vector of the entries of `r` (only those of `key` when not NULL), as
 * "--KEY=VALUE" strings; NULL when out of memory. Freed with free_argv(). */
static char **make_argv(const struct check *c, const struct reader *r, const char *key, int *argc)
{
    char **v = sl_calloc(c->conf->n + 2, sizeof(char *));
    int n = 0;

    if (v == NULL) {
        return NULL;
    }
    v[n++] = sl_strdup(r->cmd);
    for (size_t i = 0; i < c->conf->n; i++) {
        const struct sl_conf_entry *e = &c->conf->entries[i];
        size_t len;

        if (!reads(r, e->section) || (key != NULL && strcmp(e->key, key) != 0)) {
            continue;
        }
        len = strlen(e->key) + strlen(e->value) + 4;
        v[n] = sl_malloc(len);
        if (v[n] != NULL) {
            (void)snprintf(v[n], len, "--%s=%s", e->key, e->value);
        }
        n++;
    }
    for (int i = 0; i < n; i++) {
        if (v[i] == NULL) {
            for (int k = 0; k < n; k++) {
                sl_free(v[k]);
            }
            sl_free(v);
            return NULL;
        }
    }
    *argc = n;
    return v;
}

static void free_argv(char **v, int argc)
{
    for (int i = 0; i < argc; i++) {
        sl_free(v[i]);
    }
    sl_free(v);
}

/* The entry of `key` that a message about it belongs to: the second for "given twice", else
 * the first. */
static const struct sl_conf_entry *entry_for(const struct check *c, const struct reader *r,
                                             const char *key, bool second)
{
    const struct sl_conf_entry *found = NULL;

    for (size_t i = 0; i < c->conf->n; i++) {
        const struct sl_conf_entry *e = &c->conf->entries[i];

        if (!reads(r, e->section) || strcmp(e->key, key) != 0) {
            continue;
        }
        if (found != NULL && second) {
            return e;
        }
        if (found == NULL) {
            found = e;
            if (!second) {
                return e;
            }
        }
    }
    return found;
}

static void report(struct check *c, const struct reader *r, const char *key, const char *msg)
{
    const struct sl_conf_entry *e = entry_for(c, r, key, strstr(msg, "given twice") != NULL);
    unsigned line = e != NULL ? e->line : 0;

    if (strncmp(msg, "unknown option", 14) == 0 && strstr(msg, "(see sluice") != NULL) {
        sl_conf_error_add(&c->errs, line, "unknown key '%s' (sluice %s has no --%s)", key, r->cmd,
                          key);
    } else {
        sl_conf_error_add(&c->errs, line, "key '%s': %s", key, msg);
    }
}

/* The key a message about every key together names (its first `--NAME`), or NULL. */
static const char *named_key(const struct check *c, const struct reader *r, const char *msg)
{
    for (const char *p = strstr(msg, "--"); p != NULL; p = strstr(p + 2, "--")) {
        for (size_t i = 0; i < c->conf->n; i++) {
            const struct sl_conf_entry *e = &c->conf->entries[i];
            size_t n = strlen(e->key);

            if (reads(r, e->section) && strncmp(p + 2, e->key, n) == 0
                && strchr("' ,=", p[2 + n]) != NULL) {
                return e->key;
            }
        }
    }
    return NULL;
}

/* Checks what `r` reads: each key alone, then all together. */
static void check_reader(struct check *c, const struct reader *r)
{
    char msg[SL_LOG_LINE_MAX];
    bool bad = false;
    char **v;
    int argc = 0;

    for (size_t i = 0; i < c->conf->n; i++) {
        const struct sl_conf_entry *e = &c->conf->entries[i];

        if (!reads(r, e->section) || entry_for(c, r, e->key, false) != e) {
            continue;
        }
        c->keys++;
        v = make_argv(c, r, e->key, &argc);
        if (v == NULL) {
            sl_conf_error_add(&c->errs, 0, "out of memory");
            return;
        }
        if (run_captured(r->check, r->cmd, argc, v, msg, sizeof(msg)) != SL_CMD_OK) {
            report(c, r, e->key, msg[0] != '\0' ? msg : "refused");
            bad = true;
        }
        free_argv(v, argc);
    }
    if (bad) {
        return;
    }
    v = make_argv(c, r, NULL, &argc);
    if (v == NULL) {
        sl_conf_error_add(&c->errs, 0, "out of memory");
        return;
    }
    if (run_captured(r->check, r->cmd, argc, v, msg, sizeof(msg)) != SL_CMD_OK) {
        const char *key = named_key(c, r, msg);

        if (key != NULL) {
            report(c, r, key, msg);
        } else {
            sl_conf_error_add(&c->errs, 0, "sluice %s: %s", r->cmd, msg);
        }
    }
    free_argv(v, argc);
}

/* The keys of [proxy] that sluice up gives its proxy itself (cmd/up.c refuses them too). */
static void check_up_proxy_keys(struct check *c)
{
    static const char *const own[] = { "listen", "data", "admin-socket", "audit-log" };

    for (size_t i = 0; i < c->conf->n; i++) {
        const struct sl_conf_entry *e = &c->conf->entries[i];

        if (strcmp(e->section, "proxy") != 0) {
            continue;
        }
        for (size_t k = 0; k < SL_ARRAY_LEN(own); k++) {
            if (strcmp(e->key, own[k]) == 0) {
                sl_conf_error_add(&c->errs, e->line,
                                  "key '%s' in [proxy]: sluice up gives its proxy this itself "
                                  "(set it in [up])",
                                  e->key);
            }
        }
    }
}

static size_t count_in(const struct sl_conf *conf, const char *section)
{
    size_t n = 0;

    for (size_t i = 0; i < conf->n; i++) {
        n += strcmp(conf->entries[i].section, section) == 0;
    }
    return n;
}

/* `FILE: valid for sluice CMD, N keys (top 1, [up] 2, [proxy] 3); not read: [control] 1`. The
 * top was renamed [up] for up by the time this runs. */
static void print_summary(const struct sl_conf *conf, const char *path, const char *cmd,
                          size_t keys)
{
    static const char *const names[] = { "", "up", "control", "proxy" };
    bool first = true;
    bool first_unread = true;

    printf("%s: valid for sluice %s, %zu key%s (", path, cmd, keys, keys == 1 ? "" : "s");
    for (size_t pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < SL_ARRAY_LEN(names); i++) {
            size_t n = count_in(conf, names[i]);
            bool read = names[i][0] == '\0' || strcmp(names[i], cmd) == 0
                        || (strcmp(cmd, "up") == 0 && strcmp(names[i], "control") == 0)
                        || (strcmp(cmd, "up") == 0 && strcmp(names[i], "proxy") == 0);

            if (n == 0 || read != (pass == 0)) {
                continue;
            }
            if (pass == 1 && first_unread) {
                printf("); not read: ");
                first_unread = false;
                first = true;
            }
            printf("%s%s%s%s %zu line%s", first ? "" : ", ", names[i][0] != '\0' ? "[" : "top",
                   names[i], names[i][0] != '\0' ? "]" : "", n, n == 1 ? "" : "s");
            first = false;
        }
        if (pass == 0 && first) {
            printf("no lines");
        }
    }
    printf("%s\n", first_unread ? ")" : "");
}

static int by_line(const void *a, const void *b)
{
    const struct sl_conf_error *x = a;
    const struct sl_conf_error *y = b;

    return x->line < y->line ? -1 : x->line > y->line;
}

static int check_file(const char *path, const char *cmd)
{
    static const struct reader up = { "up", sl_cmd_up_check, { "up", "control", NULL } };
    static const struct reader up_proxy = { "proxy", sl_cmd_proxy_check, { "proxy", NULL, NULL } };
    static const struct reader control = { "control",
                                           sl_cmd_control_check,
                                           { "control", NULL, NULL } };
    static const struct reader proxy = { "proxy", sl_cmd_proxy_check, { "proxy", NULL, NULL } };
    struct check *c = sl_calloc(1, sizeof(*c));
    struct sl_conf *conf = NULL;
    char err[512] = "";
    int rc;

    if (c == NULL) {
        sl_eprintf("config: out of memory");
        return SL_CMD_FAIL;
    }
    if (sl_conf_load(path, &conf, &c->errs, err, sizeof(err)) < 0) {
        sl_eprintf("config check: %s", err);
        sl_free(c);
        return SL_CMD_FAIL;
    }
    c->conf = conf;
    if (strcmp(cmd, "up") == 0) {
        check_reader(c, &up);
        /* [proxy] alone: the top belongs to up. */
        {
            struct reader only_proxy = up_proxy;

            for (size_t i = 0; i < conf->n; i++) {
                if (conf->entries[i].section[0] == '\0') {
                    conf->entries[i].section = "up";
                }
            }
            check_up_proxy_keys(c);
            check_reader(c, &only_proxy);
        }
    } else if (strcmp(cmd, "control") == 0) {
        check_reader(c, &control);
    } else {
        check_reader(c, &proxy);
    }
    /* qsort is not stable, but two errors of one line keep an order that does not matter. */
    qsort(c->errs.items, c->errs.n, sizeof(c->errs.items[0]), by_line);
    for (size_t i = 0; i < c->errs.n; i++) {
        if (c->errs.items[i].line == 0) {
            printf("%s: %s\n", path, c->errs.items[i].message);
        } else {
            printf("%s:%u: %s\n", path, c->errs.items[i].line, c->errs.items[i].message);
        }
    }
    if (c->errs.n > 0) {
        printf("%s: invalid, %s%zu error%s\n", path, c->errs.truncated ? "more than " : "",
               c->errs.n, c->errs.n == 1 ? "" : "s");
        rc = SL_CMD_FAIL;
    } else {
        print_summary(conf, path, cmd, c->keys);
        rc = SL_CMD_OK;
    }
    sl_conf_destroy(conf);
    sl_free(c);
    return rc;
}

int sl_cmd_config(int argc, char **argv)
{
    const char *pos[2];
    size_t n_pos = 0;
    const char *for_cmd = NULL;
    const struct sl_opt opts[] = {
        { "--for", SL_OPT_VALUE, NULL, &for_cmd, NULL, NULL, 0 },
    };
    int rc;

    if (!sl_opts_parse_or_usage("config", usage, argc, argv, opts, SL_ARRAY_LEN(opts), pos, 2,
                                &n_pos, &rc)) {
        return rc;
    }
    if (n_pos == 0 || strcmp(pos[0], "check") != 0) {
        sl_eprintf("config: missing command: check (see sluice config --help)");
        return SL_CMD_USAGE;
    }
    if (n_pos < 2) {
        sl_eprintf("config check: missing FILE (see sluice config --help)");
        return SL_CMD_USAGE;
    }
    if (for_cmd == NULL) {
        for_cmd = "up";
    }
    if (strcmp(for_cmd, "up") != 0 && strcmp(for_cmd, "control") != 0
        && strcmp(for_cmd, "proxy") != 0) {
        sl_eprintf("config check: option '--for' needs up, control or proxy, not '%s'", for_cmd);
        return SL_CMD_USAGE;
    }
    return check_file(pos[1], for_cmd);
}
