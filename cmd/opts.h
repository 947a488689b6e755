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

#include "base/log.h"
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

/* sl_opts_parse(), with `usage` printed on standard output for --help. True when the command
 * goes on; false when it is done, `*rc` its exit status (0 after the usage). */
bool sl_opts_parse_or_usage(const char *cmd, const char *usage, int argc, char **argv,
                            const struct sl_opt *opts, size_t n_opts, const char **pos,
                            size_t max_pos, size_t *n_pos, int *rc);

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

/* A number option for sl_opts_uints(): its name, its text (NULL when not given), the range it
 * must be in and where it goes. */
struct sl_opt_uint {
    const char *name;
    const char *text;
    unsigned min;
    unsigned max;
    unsigned *out;
};

/* sl_opts_uint() of each given option of `v`, in order, up to the first that is not a number
 * in its range: 0, or 2 with that one line printed. */
int sl_opts_uints(const char *cmd, const struct sl_opt_uint *v, size_t n);

/* `--log-level` given as `text` (NULL: not given) into `*out`. Prints one line and returns 2
 * for another word; 0 on success. */
int sl_opts_log_level(const char *cmd, const char *text, enum sl_log_level *out);

/* Returns `rc`; when it is a failure and the options came partly from the file `conf` (NULL:
 * none), first prints the line telling how to find the culprit (`sluice config check FILE --for
 * CMD`). For the checks after sl_opts_parse_config(). */
int sl_opts_conf_hint(const char *cmd, const struct sl_conf *conf, int rc);

/* Reads a daemon's command line (and --config) into its configuration `cfg`; `*conf` keeps the
 * file's strings. Returns 0 (with `*help` set for --help) or 2 after printing why. */
typedef int sl_opts_parse_fn(int argc, char **argv, void *cfg, bool *help, struct sl_conf **conf);
/* Runs a daemon on its configuration: its exit status. */
typedef int sl_opts_start_fn(void *cfg);

/* A daemon's command (`sluice control`, `sluice proxy`): `parse` into `cfg`, then for --help
 * `usage` printed, else `start`; with `start` NULL only the flags are checked (--help then
 * prints nothing), as `sluice config check` does. Returns the exit status. */
int sl_opts_daemon(int argc, char **argv, void *cfg, sl_opts_parse_fn *parse,
                   sl_opts_start_fn *start, const char *usage);

/* The data directory: `flag` if set, else $SLUICE_DATA, else ./var (docs/reference/cli.md §1). */
const char *sl_opts_data_dir(const char *flag);

/* A subcommand: its name, and what runs it on the arguments from that name on. */
struct sl_subcmd {
    const char *name;
    int (*run)(int argc, char **argv);
};

/* True when `arg` asks for the usage: --help, -h or help. */
bool sl_opts_is_help(const char *arg);

/* The subcommand of `subs` (`n` of them) named `name`, or NULL. */
const struct sl_subcmd *sl_opts_find_subcmd(const struct sl_subcmd *subs, size_t n,
                                            const char *name);

/* Runs the subcommand argv[1] of `subs` on argv[1..argc); for another word prints
 * `CMD: unknown command 'WORD' (see sluice CMD --help)` (option for a word starting with '-';
 * `cmd` "" for sluice itself, without the prefix) and returns 2. */
int sl_opts_run_subcmd(const char *cmd, const struct sl_subcmd *subs, size_t n, int argc,
                       char **argv);

#endif
