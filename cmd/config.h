/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cmd/config.h - configuration files (docs/reference/cli.md "Configuration files"): the flags of
 * `sluice up`, `sluice proxy` and `sluice control`, one `key = value` a line.
 *
 *   # a comment (only where a line starts)
 *   data = /var/lib/sluice
 *   [proxy]
 *   resolve = a.example:443:127.0.0.1
 *   resolve = b.example:443:127.0.0.1
 *
 * A key is a flag's name without its `--`; a repeatable flag's key repeats. Keys before the first
 * section header belong to the command that reads the file; `[up]`, `[control]` and `[proxy]`
 * hold the keys of those commands, so that one file can serve all three. This module reads the
 * file into entries and says what is wrong with its lines; cmd/opts.c applies the entries to a
 * command's flags (the command line wins).
 *
 * Lifecycle: sl_conf_load() -> read `entries` -> sl_conf_destroy(). The entries' strings live in
 * the conf and die with it.
 */
#ifndef SL_CMD_CONFIG_H
#define SL_CMD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"

/* Largest file read. */
#define SL_CONF_MAX_BYTES (1u << 20)
/* Most errors kept; beyond it the list says it was cut. */
#define SL_CONF_ERRORS_MAX 100

/* The sections a file may have; "" (no header yet) is the reader's own. */
#define SL_CONF_SECTION_TOP ""

struct sl_conf_entry {
    /* SL_CONF_SECTION_TOP, "up", "control" or "proxy". */
    const char *section;
    const char *key;
    const char *value;
    unsigned line;
};

struct sl_conf_error {
    /* 0 for an error of the whole file. */
    unsigned line;
    char message[320];
};

struct sl_conf_errors {
    struct sl_conf_error items[SL_CONF_ERRORS_MAX];
    size_t n;
    bool truncated;
};

struct sl_conf {
    char *path;
    char *text;
    size_t text_len;
    struct sl_conf_entry *entries;
    size_t n;
};

/* Appends an error about `line` (0: the file) to `errs`. */
void sl_conf_error_add(struct sl_conf_errors *errs, unsigned line, const char *fmt, ...)
        SL_PRINTF(3, 4);

/* Parses `text` (`len` bytes, NUL-terminated or not; copied) as a configuration file named
 * `path` into `*out`, with every line's problem in `errs` (a syntax error, an unknown section, a
 * key written with `--`, a missing value). Returns 0 (the conf is made even when `errs` has
 * entries: the good lines are in it), SL_ETOOBIG (over SL_CONF_MAX_BYTES) or SL_ENOMEM. */
SL_MUST_CHECK int sl_conf_parse(const char *path, const char *text, size_t len,
                                struct sl_conf **out, struct sl_conf_errors *errs);

/* Reads the file `path` and parses it. Returns what sl_conf_parse() does, or SL_EIO with a
 * sentence in `err` when it cannot be read. */
SL_MUST_CHECK int sl_conf_load(const char *path, struct sl_conf **out, struct sl_conf_errors *errs,
                               char *err, size_t errlen);

/* True when `section` is read by a command that reads `own` (its own section, and the top). */
bool sl_conf_section_is(const char *section, const char *own);

/* Frees `c`. NULL is a no-op. */
void sl_conf_destroy(struct sl_conf *c);

#endif
