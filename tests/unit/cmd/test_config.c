/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/cmd/test_config.c - cmd/config and the --config part of cmd/opts
 * (docs/reference/cli.md "Configuration files"): the `key = value` format with its sections,
 * comments and repeated keys; every bad line named by number; the entries applied to a
 * command's options with the command line winning; a key given twice; `config` inside a file.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "cmd/cmd.h"
#include "cmd/config.h"
#include "cmd/opts.h"
#include "tests/support/tmpdir.h"

static struct sl_conf *parse_ok(const char *text, struct sl_conf_errors *errs)
{
    struct sl_conf *c = NULL;

    memset(errs, 0, sizeof(*errs));
    assert_int_equal(sl_conf_parse("t.conf", text, strlen(text), &c, errs), 0);
    assert_non_null(c);
    return c;
}

static void reads_keys_sections_comments_and_repeats(void **state)
{
    static const char text[] = "# top comment\n"
                               "  listen = 127.0.0.1:3128  \n"
                               "\n"
                               "\tworkers=2\r\n"
                               "[proxy]\n"
                               "resolve = a.example:443:127.0.0.1\n"
                               "   # indented comment\n"
                               "resolve = b.example:443:127.0.0.1\n"
                               "[ up ]\n"
                               "git-url = https://git.example/x#not-a-comment\n"
                               "data = /var/lib/sluice";
    struct sl_conf_errors errs;
    struct sl_conf *c = parse_ok(text, &errs);

    (void)state;
    assert_int_equal(errs.n, 0);
    assert_int_equal(c->n, 6);
    assert_string_equal(c->entries[0].section, "");
    assert_string_equal(c->entries[0].key, "listen");
    assert_string_equal(c->entries[0].value, "127.0.0.1:3128");
    assert_int_equal(c->entries[0].line, 2);
    assert_string_equal(c->entries[1].key, "workers");
    assert_string_equal(c->entries[1].value, "2");
    assert_int_equal(c->entries[1].line, 4);
    assert_string_equal(c->entries[2].section, "proxy");
    assert_string_equal(c->entries[3].value, "b.example:443:127.0.0.1");
    assert_int_equal(c->entries[3].line, 8);
    assert_string_equal(c->entries[4].section, "up");
    /* `#` is a comment only where a line starts. */
    assert_string_equal(c->entries[4].value, "https://git.example/x#not-a-comment");
    /* The last line needs no newline. */
    assert_string_equal(c->entries[5].value, "/var/lib/sluice");
    assert_int_equal(c->entries[5].line, 11);
    assert_true(sl_conf_section_is("", "proxy"));
    assert_true(sl_conf_section_is("proxy", "proxy"));
    assert_false(sl_conf_section_is("up", "proxy"));
    sl_conf_destroy(c);
}

static void names_every_bad_line(void **state)
{
    static const char text[] = "listen 127.0.0.1:3128\n" /* 1: no = */
                               "--workers = 2\n"         /* 2: leading -- */
                               "= 2\n"                   /* 3: no key */
                               "Workers = 2\n"           /* 4: not a flag name */
                               "workers =\n"             /* 5: no value */
                               "[nope]\n"                /* 6: unknown section */
                               "listen = 1.2.3.4:1\n"    /* 7: under a bad header: skipped */
                               "[proxy\n"                /* 8: unclosed */
                               "[proxy]\n"               /* 9 */
                               "workers = 3\n";          /* 10: fine */
    struct sl_conf_errors errs;
    struct sl_conf *c = parse_ok(text, &errs);
    const unsigned lines[] = { 1, 2, 3, 4, 5, 6, 8 };

    (void)state;
    assert_int_equal(errs.n, SL_ARRAY_LEN(lines));
    for (size_t i = 0; i < SL_ARRAY_LEN(lines); i++) {
        assert_int_equal(errs.items[i].line, lines[i]);
    }
    assert_non_null(strstr(errs.items[0].message, "KEY = VALUE"));
    assert_non_null(strstr(errs.items[1].message, "without the leading --"));
    assert_non_null(strstr(errs.items[4].message, "missing value"));
    assert_non_null(strstr(errs.items[5].message, "unknown section [nope]"));
    assert_int_equal(c->n, 1);
    assert_string_equal(c->entries[0].section, "proxy");
    assert_int_equal(c->entries[0].line, 10);
    sl_conf_destroy(c);
}

static void refuses_a_nul_byte_and_a_huge_file(void **state)
{
    static const char text[] = "a = 1\nb = x\0y\nc = 3\n";
    struct sl_conf_errors errs;
    struct sl_conf *c = NULL;

    (void)state;
    memset(&errs, 0, sizeof(errs));
    assert_int_equal(sl_conf_parse("t", text, sizeof(text) - 1, &c, &errs), 0);
    assert_int_equal(errs.n, 1);
    assert_int_equal(errs.items[0].line, 2);
    assert_int_equal(c->n, 2);
    sl_conf_destroy(c);
    c = NULL;
    assert_int_equal(sl_conf_parse("t", text, SL_CONF_MAX_BYTES + 1, &c, &errs), SL_ETOOBIG);
    assert_null(c);
}

/* A command's options, as the daemons' front-ends declare them. */
struct fake {
    const char *listen[4];
    size_t n_listen;
    const char *workers;
    const char *data;
    bool force;
};

static void fake_opts(struct fake *f, struct sl_opt *opts)
{
    memset(f, 0, sizeof(*f));
    opts[0] = (struct sl_opt){ "--listen", SL_OPT_LIST, NULL, NULL, f->listen, &f->n_listen, 4 };
    opts[1] = (struct sl_opt){ "--workers", SL_OPT_VALUE, NULL, &f->workers, NULL, NULL, 0 };
    opts[2] = (struct sl_opt){ "--data", SL_OPT_VALUE, NULL, &f->data, NULL, NULL, 0 };
    opts[3] = (struct sl_opt){ "--force", SL_OPT_FLAG, &f->force, NULL, NULL, NULL, 0 };
}

static void applies_its_sections_and_names_unknown_keys(void **state)
{
    static const char *const sections[] = { "proxy", NULL };
    static const char text[] = "workers = 2\n"
                               "[up]\n"
                               "bogus = 1\n" /* another command's section: not read */
                               "[proxy]\n"
                               "listen = 127.0.0.1:1\n"
                               "listen = 127.0.0.1:2\n"
                               "force = true\n"
                               "tls = yes\n"     /* 8: unknown */
                               "workers = 3\n"   /* 9: twice */
                               "force = maybe\n" /* 10: not a flag value */
                               "config = x\n";   /* 11 */
    struct sl_conf_errors errs;
    struct sl_conf *c = parse_ok(text, &errs);
    struct sl_opt opts[4];
    struct fake f;

    (void)state;
    fake_opts(&f, opts);
    assert_int_equal(sl_opts_apply_conf(c, sections, "proxy", opts, 4, NULL, &errs), 4);
    assert_int_equal(errs.items[0].line, 8);
    assert_string_equal(errs.items[0].message, "unknown key 'tls' (sluice proxy has no --tls)");
    assert_int_equal(errs.items[1].line, 9);
    assert_non_null(strstr(errs.items[1].message, "given twice (first on line 1"));
    assert_int_equal(errs.items[2].line, 10);
    assert_int_equal(errs.items[3].line, 11);
    assert_int_equal(f.n_listen, 2);
    assert_string_equal(f.listen[1], "127.0.0.1:2");
    assert_string_equal(f.workers, "2");
    assert_true(f.force);
    sl_conf_destroy(c);
}

static void the_command_line_wins(void **state)
{
    static const char *const sections[] = { "proxy", NULL };
    static char a_cmd[] = "proxy";
    static char a_config[] = "--config";
    static char a_listen[] = "--listen=127.0.0.1:9";
    static char a_workers[] = "--workers";
    static char a_eight[] = "8";
    static const char text[] = "[proxy]\n"
                               "listen = 127.0.0.1:1\n"
                               "listen = 127.0.0.1:2\n"
                               "workers = 2\n"
                               "data = /srv/sluice\n";
    char dir[256];
    char path[300];
    char *argv[] = { a_cmd, a_config, path, a_listen, a_workers, a_eight, NULL };
    struct sl_conf *conf = NULL;
    struct sl_opt opts[4];
    struct fake f;
    const char *pos[1];
    size_t n_pos = 0;
    bool help = false;

    (void)state;
    assert_int_equal(sl_test_tmpdir(dir, sizeof(dir), "sluice-conf"), 0);
    assert_int_equal(sl_test_join(path, sizeof(path), dir, "s.conf"), 0);
    assert_int_equal(sl_test_write_text(path, text), 0);
    fake_opts(&f, opts);
    assert_int_equal(
            sl_opts_parse_config("proxy", sections, 6, argv, opts, 4, pos, 0, &n_pos, &help, &conf),
            SL_CMD_OK);
    assert_non_null(conf);
    /* A repeatable key given on the command line replaces all of the file's values. */
    assert_int_equal(f.n_listen, 1);
    assert_string_equal(f.listen[0], "127.0.0.1:9");
    assert_string_equal(f.workers, "8");
    /* What the command line left alone comes from the file. */
    assert_string_equal(f.data, "/srv/sluice");
    sl_conf_destroy(conf);

    /* A bad file is a usage error, with no conf left behind. */
    assert_int_equal(sl_test_write_text(path, "[proxy]\nworkerz = 2\n"), 0);
    fake_opts(&f, opts);
    assert_int_equal(
            sl_opts_parse_config("proxy", sections, 3, argv, opts, 4, pos, 0, &n_pos, &help, &conf),
            SL_CMD_USAGE);
    assert_null(conf);
    /* A missing file too. */
    assert_int_equal(sl_test_rmtree(dir), 0);
    fake_opts(&f, opts);
    assert_int_equal(
            sl_opts_parse_config("proxy", sections, 3, argv, opts, 4, pos, 0, &n_pos, &help, &conf),
            SL_CMD_USAGE);
    assert_null(conf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reads_keys_sections_comments_and_repeats),
        cmocka_unit_test(names_every_bad_line),
        cmocka_unit_test(refuses_a_nul_byte_and_a_huge_file),
        cmocka_unit_test(applies_its_sections_and_names_unknown_keys),
        cmocka_unit_test(the_command_line_wins),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
