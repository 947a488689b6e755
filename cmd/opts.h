/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cmd/opts.h - the option parser every subcommand uses.
 *
 * Options are `--name VALUE` or `--name=VALUE`; flags are `--name`. No abbreviations (GNU
 * getopt would take `--fo` for `--force`), no permutation surprises, no global state.
 * Positional arguments may come anywhere. `--help`/`-h` anywhere asks for the usage. Every
 * problem is reported as one line naming it, through sl_eprintf().
 *
 * The daemons' commands also read `--config FILE` (sl_opts_parse_config(), cmd/config.h): every
 * flag can then come from the file, under its own name; a flag on the command line wins over
 * the file (all of the file's values for that key are ignored).
 */
#ifndef SL_CMD_OPTS_H
#define SL_CMD_OPTS_H

#include <stdbool.h>
#include <stddef.h>

#include "cmd/config.h"

enum sl_opt_kind {
    /* `--name`: sets *flag. */
    SL_OPT_FLAG = 0,
    /* `--name VALUE`: sets *value (given twice: an error). */
    SL_OPT_VALUE,
    /* `--name VALUE`, repeatable: appends to list[*n], at most `max`. */
    SL_OPT_LIST,
};

struct sl_opt {
    const char *name;
    enum sl_opt_kind kind;
    bool *flag;
    const char **value;
    const char **list;
    size_t *n;
    size_t max;
};

/* Parses argv[1..argc) (argv[0] is the command's name) against `opts`. Positional arguments
 * go to `pos` (at most `max_pos`; their number in `*n_pos`). Returns 0 (with `*help` set when
 * --help was asked) or 2 after printing one line naming the problem; `cmd` prefixes it. */
int sl_opts_parse(const char *cmd, int argc, char **argv, const struct sl_opt *opts, size_t n_opts,
                  const char **pos, size_t max_pos, size_t *n_pos, bool *help);

/* sl_opts_parse() plus `--config FILE`: after the command line, the file's keys of the
 * sections in `sections` (NULL-terminated; keys before any header are read too) are applied to
 * the options the command line did not give. Every problem of the file (syntax, an unknown
 * key, a key given twice, `config` inside the file) is printed as `CMD: FILE:LINE: ...`, and
 * the result is 2. With a file, `*conf` holds it afterwards (the values point into it): the
 * caller frees it with sl_conf_destroy() once done with the options; else `*conf` is NULL. */
int sl_opts_parse_config(const char *cmd, const char *const *sections, int argc, char **argv,
                         const struct sl_opt *opts, size_t n_opts, const char **pos, size_t max_pos,
                         size_t *n_pos, bool *help, struct sl_conf **conf);

/* Applies the entries of `conf` in `sections` to `opts`, skipping the options marked in `given`
 * (NULL: none); every problem goes to `errs`. Returns the number of problems added. */
size_t sl_opts_apply_conf(const struct sl_conf *conf, const char *const *sections, const char *cmd,
                          const struct sl_opt *opts, size_t n_opts, const bool *given,
                          struct sl_conf_errors *errs);

/* Parses a whole decimal number in [min, max] given to option `name`. Prints one line and
 * returns 2 when it is not one; 0 on success. */
int sl_opts_uint(const char *cmd, const char *name, const char *text, unsigned min, unsigned max,
                 unsigned *out);

/* The data directory: `flag` if set, else $SLUICE_DATA, else ./var (docs/reference/cli.md §1). */
const char *sl_opts_data_dir(const char *flag);

#endif
