/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cmd/opts.h - the option parser every subcommand uses.
 *
 * Options are `--name VALUE` or `--name=VALUE`; flags are `--name`. No abbreviations (GNU
 * getopt would take `--fo` for `--force`), no permutation surprises, no global state.
 * Positional arguments may come anywhere. `--help`/`-h` anywhere asks for the usage. Every
 * problem is reported as one line naming it, through sl_eprintf().
 */
#ifndef SL_CMD_OPTS_H
#define SL_CMD_OPTS_H

#include <stdbool.h>
#include <stddef.h>

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

/* Parses a whole decimal number in [min, max] given to option `name`. Prints one line and
 * returns 2 when it is not one; 0 on success. */
int sl_opts_uint(const char *cmd, const char *name, const char *text, unsigned min, unsigned max,
                 unsigned *out);

/* The data directory: `flag` if set, else $SLUICE_DATA, else ./var (docs/reference/cli.md §1). */
const char *sl_opts_data_dir(const char *flag);

#endif
