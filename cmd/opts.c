/* SPDX-License-Identifier: Apache-2.0 */
#include "cmd/opts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/mem.h"
#include "cmd/cmd.h"

static const struct sl_opt *find(const struct sl_opt *opts, size_t n, const char *arg, size_t len)
{
    for (size_t k = 0; k < n; k++) {
        if (strlen(opts[k].name) == len && memcmp(opts[k].name, arg, len) == 0) {
            return &opts[k];
        }
    }
    return NULL;
}

int sl_opts_parse(const char *cmd, int argc, char **argv, const struct sl_opt *opts, size_t n_opts,
                  const char **pos, size_t max_pos, size_t *n_pos, bool *help)
{
    *help = false;
    *n_pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const struct sl_opt *o;
        const char *eq;
        const char *value;
        size_t len;

        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            *help = true;
            return SL_CMD_OK;
        }
        if (arg[0] != '-' || strcmp(arg, "-") == 0) {
            if (*n_pos >= max_pos) {
                sl_eprintf("%s: unexpected argument '%s' (see sluice %s --help)", cmd, arg, cmd);
                return SL_CMD_USAGE;
            }
            pos[(*n_pos)++] = arg;
            continue;
        }
        eq = strchr(arg, '=');
        len = eq != NULL ? (size_t)(eq - arg) : strlen(arg);
        o = find(opts, n_opts, arg, len);
        if (o == NULL) {
            sl_eprintf("%s: unknown option '%.*s' (see sluice %s --help)", cmd, (int)len, arg, cmd);
            return SL_CMD_USAGE;
        }
        if (o->kind == SL_OPT_FLAG) {
            if (eq != NULL) {
                sl_eprintf("%s: option '%s' takes no value", cmd, o->name);
                return SL_CMD_USAGE;
            }
            *o->flag = true;
            continue;
        }
        if (eq != NULL) {
            value = eq + 1;
        } else if (i + 1 < argc && (argv[i + 1][0] != '-' || strcmp(argv[i + 1], "-") == 0)) {
            value = argv[++i];
        } else {
            value = "";
        }
        if (value[0] == '\0') {
            sl_eprintf("%s: missing value for option '%s' (see sluice %s --help)", cmd, o->name,
                       cmd);
            return SL_CMD_USAGE;
        }
        if (o->kind == SL_OPT_VALUE) {
            if (*o->value != NULL) {
                sl_eprintf("%s: option given twice: '%s' (see sluice %s --help)", cmd, o->name,
                           cmd);
                return SL_CMD_USAGE;
            }
            *o->value = value;
            continue;
        }
        if (*o->n >= o->max) {
            sl_eprintf("%s: option '%s' given more than %zu times", cmd, o->name, o->max);
            return SL_CMD_USAGE;
        }
        o->list[(*o->n)++] = value;
    }
    return SL_CMD_OK;
}

bool sl_opts_parse_or_usage(const char *cmd, const char *usage, int argc, char **argv,
                            const struct sl_opt *opts, size_t n_opts, const char **pos,
                            size_t max_pos, size_t *n_pos, int *rc)
{
    bool help = false;

    *rc = sl_opts_parse(cmd, argc, argv, opts, n_opts, pos, max_pos, n_pos, &help);
    if (*rc == SL_CMD_OK && help) {
        (void)fputs(usage, stdout);
        return false;
    }
    return *rc == SL_CMD_OK;
}

static bool in_sections(const char *section, const char *const *sections)
{
    if (section[0] == '\0') {
        return true;
    }
    for (size_t i = 0; sections[i] != NULL; i++) {
        if (strcmp(section, sections[i]) == 0) {
            return true;
        }
    }
    return false;
}

/* Whether the option has a value already (given, or set by an earlier line). */
static bool has_value(const struct sl_opt *o)
{
    switch (o->kind) {
    case SL_OPT_FLAG:
        return *o->flag;
    case SL_OPT_VALUE:
        return *o->value != NULL;
    case SL_OPT_LIST:
        return *o->n > 0;
    }
    return false;
}

static void apply_entry(const struct sl_conf_entry *e, const struct sl_opt *o, unsigned *first,
                        const char *cmd, struct sl_conf_errors *errs)
{
    if (o->kind == SL_OPT_FLAG) {
        if (strcmp(e->value, "true") == 0 || strcmp(e->value, "yes") == 0) {
            *o->flag = true;
        } else if (strcmp(e->value, "false") != 0 && strcmp(e->value, "no") != 0) {
            sl_conf_error_add(errs, e->line, "key '%s': a flag takes true or false, not '%s'",
                              e->key, e->value);
        }
        return;
    }
    if (o->kind == SL_OPT_VALUE) {
        if (*first != 0) {
            sl_conf_error_add(errs, e->line,
                              "key '%s' given twice (first on line %u; sluice %s takes one)",
                              e->key, *first, cmd);
            return;
        }
        *first = e->line;
        *o->value = e->value;
        return;
    }
    if (*o->n >= o->max) {
        sl_conf_error_add(errs, e->line, "key '%s' given more than %zu times", e->key, o->max);
        return;
    }
    o->list[(*o->n)++] = e->value;
}

size_t sl_opts_apply_conf(const struct sl_conf *conf, const char *const *sections, const char *cmd,
                          const struct sl_opt *opts, size_t n_opts, const bool *given,
                          struct sl_conf_errors *errs)
{
    size_t before = errs->n;
    unsigned *first = sl_calloc(n_opts + 1, sizeof(*first));

    if (first == NULL) {
        sl_conf_error_add(errs, 0, "out of memory");
        return errs->n - before;
    }
    for (size_t i = 0; i < conf->n; i++) {
        const struct sl_conf_entry *e = &conf->entries[i];
        const struct sl_opt *o = NULL;
        size_t k;

        if (!in_sections(e->section, sections)) {
            continue;
        }
        if (strcmp(e->key, "config") == 0) {
            sl_conf_error_add(errs, e->line, "key 'config': a file cannot name another");
            continue;
        }
        for (k = 0; k < n_opts; k++) {
            if (strncmp(opts[k].name, "--", 2) == 0 && strcmp(opts[k].name + 2, e->key) == 0) {
                o = &opts[k];
                break;
            }
        }
        if (o == NULL) {
            sl_conf_error_add(errs, e->line, "unknown key '%s' (sluice %s has no --%s)", e->key,
                              cmd, e->key);
            continue;
        }
        if (given != NULL && given[k]) {
            continue;
        }
        apply_entry(e, o, &first[k], cmd, errs);
    }
    sl_free(first);
    return errs->n - before;
}

static void print_conf_errors(const char *cmd, const char *path, const struct sl_conf_errors *errs)
{
    for (size_t i = 0; i < errs->n; i++) {
        if (errs->items[i].line == 0) {
            sl_eprintf("%s: %s: %s", cmd, path, errs->items[i].message);
        } else {
            sl_eprintf("%s: %s:%u: %s", cmd, path, errs->items[i].line, errs->items[i].message);
        }
    }
    if (errs->truncated) {
        sl_eprintf("%s: %s: more errors not shown", cmd, path);
    }
}

int sl_opts_parse_config(const char *cmd, const char *const *sections, int argc, char **argv,
                         const struct sl_opt *opts, size_t n_opts, const char **pos, size_t max_pos,
                         size_t *n_pos, bool *help, struct sl_conf **conf)
{
    struct sl_opt *all = sl_calloc(n_opts + 1, sizeof(*all));
    bool *given = sl_calloc(n_opts + 1, sizeof(*given));
    struct sl_conf_errors *errs = sl_calloc(1, sizeof(*errs));
    const char *path = NULL;
    char err[512] = "";
    int rc;

    *conf = NULL;
    if (all == NULL || given == NULL || errs == NULL) {
        sl_eprintf("%s: out of memory", cmd);
        rc = SL_CMD_FAIL;
        goto done;
    }
    memcpy(all, opts, n_opts * sizeof(*opts));
    all[n_opts] = (struct sl_opt){ "--config", SL_OPT_VALUE, NULL, &path, NULL, NULL, 0 };
    rc = sl_opts_parse(cmd, argc, argv, all, n_opts + 1, pos, max_pos, n_pos, help);
    if (rc != SL_CMD_OK || *help || path == NULL) {
        goto done;
    }
    for (size_t k = 0; k < n_opts; k++) {
        given[k] = has_value(&opts[k]);
    }
    if (sl_conf_load(path, conf, errs, err, sizeof(err)) < 0) {
        sl_eprintf("%s: --config: %s", cmd, err);
        rc = SL_CMD_USAGE;
        goto done;
    }
    (void)sl_opts_apply_conf(*conf, sections, cmd, opts, n_opts, given, errs);
    if (errs->n > 0) {
        print_conf_errors(cmd, path, errs);
        sl_conf_destroy(*conf);
        *conf = NULL;
        rc = SL_CMD_USAGE;
    }
done:
    sl_free(errs);
    sl_free(given);
    sl_free(all);
    return rc;
}

int sl_opts_uint(const char *cmd, const char *name, const char *text, unsigned min, unsigned max,
                 unsigned *out)
{
    unsigned long v = 0;

    if (text[0] == '\0' || strlen(text) > 10) {
        goto bad;
    }
    for (const char *p = text; *p != '\0'; p++) {
        if (*p < '0' || *p > '9') {
            goto bad;
        }
        v = v * 10 + (unsigned long)(*p - '0');
    }
    if (v < min || v > max) {
        goto bad;
    }
    *out = (unsigned)v;
    return SL_CMD_OK;
bad:
    sl_eprintf("%s: option '%s' needs a whole number from %u to %u, not '%s'", cmd, name, min, max,
               text);
    return SL_CMD_USAGE;
}

int sl_opts_uints(const char *cmd, const struct sl_opt_uint *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (v[i].text != NULL
            && sl_opts_uint(cmd, v[i].name, v[i].text, v[i].min, v[i].max, v[i].out) != SL_CMD_OK) {
            return SL_CMD_USAGE;
        }
    }
    return SL_CMD_OK;
}

int sl_opts_log_level(const char *cmd, const char *text, enum sl_log_level *out)
{
    if (text != NULL && sl_log_level_parse(text, out) < 0) {
        sl_eprintf("%s: option '--log-level' needs error, warn, info, debug or trace, not '%s'",
                   cmd, text);
        return SL_CMD_USAGE;
    }
    return SL_CMD_OK;
}

int sl_opts_conf_hint(const char *cmd, const struct sl_conf *conf, int rc)
{
    if (rc != SL_CMD_OK && conf != NULL) {
        sl_eprintf("%s: the value may come from %s: `sluice config check %s --for %s` names its "
                   "line",
                   cmd, conf->path, conf->path, cmd);
    }
    return rc;
}

int sl_opts_daemon(int argc, char **argv, void *cfg, sl_opts_parse_fn *parse,
                   sl_opts_start_fn *start, const char *usage)
{
    struct sl_conf *conf = NULL;
    bool help = false;
    int rc = parse(argc, argv, cfg, &help, &conf);

    if (start != NULL && help) {
        (void)fputs(usage, stdout);
    } else if (start != NULL && rc == SL_CMD_OK) {
        rc = start(cfg);
    }
    sl_conf_destroy(conf);
    return rc;
}

const char *sl_opts_data_dir(const char *flag)
{
    const char *env;

    if (flag != NULL) {
        return flag;
    }
    env = getenv("SLUICE_DATA");
    return env != NULL && env[0] != '\0' ? env : "./var";
}

bool sl_opts_is_help(const char *arg)
{
    return strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0 || strcmp(arg, "help") == 0;
}

const struct sl_subcmd *sl_opts_find_subcmd(const struct sl_subcmd *subs, size_t n,
                                            const char *name)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(subs[i].name, name) == 0) {
            return &subs[i];
        }
    }
    return NULL;
}

int sl_opts_run_subcmd(const char *cmd, const struct sl_subcmd *subs, size_t n, int argc,
                       char **argv)
{
    const struct sl_subcmd *s = sl_opts_find_subcmd(subs, n, argv[1]);
    bool top = cmd[0] == '\0';

    if (s != NULL) {
        return s->run(argc - 1, argv + 1);
    }
    sl_eprintf("%s%sunknown %s '%s' (see sluice %s%s--help)", cmd, top ? "" : ": ",
               argv[1][0] == '-' ? "option" : "command", argv[1], cmd, top ? "" : " ");
    return SL_CMD_USAGE;
}
