/* SPDX-License-Identifier: Apache-2.0 */
#include "cmd/opts.h"

#include <stdlib.h>
#include <string.h>

#include "base/log.h"
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

const char *sl_opts_data_dir(const char *flag)
{
    const char *env;

    if (flag != NULL) {
        return flag;
    }
    env = getenv("SLUICE_DATA");
    return env != NULL && env[0] != '\0' ? env : "./var";
}
