/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/unit/control/sandbox/test_firewall.c - the two walls in nftables: the host table's and the
 * inner wall's ruleset text, input validation, table names; then, as root on the real kernel,
 * install (twice), listing, the redirected ports, removal (twice), and real traffic from a network
 * namespace through a veth pair whose host side plays the bridge: sluice's ports on the gateway
 * reachable (proxy, DNS over UDP and TCP, 80, 443, the redirect port), a port the rules name
 * redirected to the transparent listener (which reads the original destination with
 * SO_ORIGINAL_DST), everything else refused at once; and the inner wall installed inside the
 * namespace holding alone (the host table removed): the gateway's listed ports and the
 * namespace's own loopback reachable, 127.0.0.11, other ports, UDP and new connections into the
 * namespace refused at once.
 *
 * Kernel objects are all test-owned: the table sluice_t_fw, the namespace sl-t-fw and the veth
 * pair sl-t-fwbr/sl-t-fwns on 10.213.251.0/24. They are removed before and after the tests
 * (tools/dockerd.sh also clears sluice_t_* tables left by a crashed run). The fixed ports 53, 80
 * and 443 are bound on the test's own address 10.213.251.1 only.
 */
#define _GNU_SOURCE 1 /* setns() and CLONE_NEWNET for the namespace probe */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <nftables/libnftables.h>
#include <poll.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/buf.h"
#include "base/err.h"
#include "control/sandbox/firewall.h"

#define TABLE   "sluice_t_fw"
#define NETNS   "sl-t-fw"
#define HOST_IF "sl-t-fwbr"
#define NS_IF   "sl-t-fwns"
#define HOST_IP "10.213.251.1"
#define NS_IP   "10.213.251.2"
/* A port the rules name: redirected to the transparent listener; nothing listens on it. */
#define NAMED_PORT 8443u
/* linux/netfilter_ipv4.h (whose headers clash with netinet/in.h): the original destination of
 * a redirected connection, at level SOL_IP. */
#define ORIGINAL_DST 80

static const struct sl_firewall_config good = {
    .table = "sluice_sluice0",
    .bridge = "sl-br0",
    .gateway = "10.213.0.1",
    .proxy_port = 3128,
    .redirect_port = 3129,
};

static const uint16_t wall_tcp[] = { 3128, 443, 53, 80, 3129, 443 };
static const uint16_t wall_udp[] = { 53 };
static const struct sl_firewall_wall good_wall = {
    .gateway = "10.213.0.1",
    .tcp_ports = wall_tcp,
    .n_tcp_ports = SL_ARRAY_LEN(wall_tcp),
    .udp_ports = wall_udp,
    .n_udp_ports = SL_ARRAY_LEN(wall_udp),
};

static char *render(const struct sl_firewall_config *cfg, int *rc)
{
    static char text[4096];
    struct sl_buf b;

    sl_buf_init(&b, 1 << 16);
    *rc = sl_firewall_render(cfg, &b);
    assert_true(b.len < sizeof(text));
    memcpy(text, sl_buf_cstr(&b), b.len + 1);
    sl_buf_finish(&b);
    return text;
}

static char *render_wall(const struct sl_firewall_wall *w, int *rc)
{
    static char text[4096];
    struct sl_buf b;

    sl_buf_init(&b, 1 << 16);
    *rc = sl_firewall_wall_render(w, &b);
    assert_true(b.len < sizeof(text));
    memcpy(text, sl_buf_cstr(&b), b.len + 1);
    sl_buf_finish(&b);
    return text;
}

static void ruleset_names_the_table_the_set_and_the_three_hooks(void **state)
{
    int rc;
    const char *t = render(&good, &rc);

    (void)state;
    assert_int_equal(rc, 0);
    assert_non_null(strstr(t, "table inet sluice_sluice0 {\n"
                              "\tset redirect_ports {\n"
                              "\t\ttype inet_service\n"
                              "\t}\n"));
    assert_non_null(strstr(t,
                           "\tchain prerouting {\n"
                           "\t\ttype nat hook prerouting priority dstnat - 10; policy accept;\n"));
    assert_non_null(strstr(t, "\tchain input {\n"
                              "\t\ttype filter hook input priority filter - 10; policy accept;\n"));
    assert_non_null(strstr(t,
                           "\tchain forward {\n"
                           "\t\ttype filter hook forward priority filter - 10; policy accept;\n"));
}

static void prerouting_redirects_the_named_ports_to_the_redirect_port(void **state)
{
    int rc;
    const char *t = render(&good, &rc);

    (void)state;
    assert_int_equal(rc, 0);
    assert_non_null(strstr(t,
                           "\t\ttype nat hook prerouting priority dstnat - 10; policy accept;\n"
                           "\t\tiifname \"sl-br0\" ip daddr 10.213.0.1 tcp dport @redirect_ports "
                           "redirect to :3129\n"
                           "\t}\n"));
}

static void input_accepts_replies_and_sluices_ports_then_rejects_the_rest(void **state)
{
    int rc;
    const char *t = render(&good, &rc);

    (void)state;
    assert_int_equal(rc, 0);
    assert_non_null(strstr(t, "\t\ttype filter hook input priority filter - 10; policy accept;\n"
                              "\t\tiifname \"sl-br0\" ct state established,related accept\n"
                              "\t\tiifname \"sl-br0\" ip daddr 10.213.0.1 tcp dport { 53, 80, 443, "
                              "3128, 3129 } accept\n"
                              "\t\tiifname \"sl-br0\" ip daddr 10.213.0.1 udp dport 53 accept\n"
                              "\t\tiifname \"sl-br0\" meta l4proto tcp reject with tcp reset\n"
                              "\t\tiifname \"sl-br0\" reject with icmpx admin-prohibited\n"
                              "\t}\n"));
}

static void forward_rejects_from_the_bridge_and_new_connections_to_it(void **state)
{
    int rc;
    const char *t = render(&good, &rc);

    (void)state;
    assert_int_equal(rc, 0);
    assert_non_null(strstr(t, "\t\ttype filter hook forward priority filter - 10; policy accept;\n"
                              "\t\tiifname \"sl-br0\" meta l4proto tcp reject with tcp reset\n"
                              "\t\tiifname \"sl-br0\" reject with icmpx admin-prohibited\n"
                              "\t\toifname \"sl-br0\" ct state established,related accept\n"
                              "\t\toifname \"sl-br0\" meta l4proto tcp reject with tcp reset\n"
                              "\t\toifname \"sl-br0\" reject with icmpx admin-prohibited\n"
                              "\t}\n}\n"));
    /* Nothing is ever accepted as new forwarded traffic. */
    assert_null(strstr(strstr(t, "chain forward"), "dport"));
}

static void render_appends_after_existing_text(void **state)
{
    struct sl_buf b;

    (void)state;
    sl_buf_init(&b, 1 << 16);
    assert_int_equal(sl_buf_append_str(&b, "# head\n"), 0);
    assert_int_equal(sl_firewall_render(&good, &b), 0);
    assert_memory_equal(sl_buf_cstr(&b), "# head\ntable inet sluice_sluice0 {\n", 34);
    sl_buf_finish(&b);
}

static void gateway_is_canonical_and_ports_sorted_once(void **state)
{
    struct sl_firewall_config cfg = good;
    int rc;

    (void)state;
    cfg.gateway = "192.168.7.254";
    cfg.proxy_port = 65535;
    assert_non_null(
            strstr(render(&cfg, &rc),
                   "ip daddr 192.168.7.254 tcp dport { 53, 80, 443, 3129, 65535 } accept\n"));
    assert_int_equal(rc, 0);
    /* A proxy or redirect port among the fixed ones is listed once. */
    cfg.proxy_port = 443;
    cfg.redirect_port = 80;
    assert_non_null(
            strstr(render(&cfg, &rc), "ip daddr 192.168.7.254 tcp dport { 53, 80, 443 } accept\n"));
    assert_int_equal(rc, 0);
}

/* Expects `cfg` refused with SL_EINVAL by render (buffer untouched) and by install (a message,
 * nothing sent to the kernel: this runs without root too). */
static void expect_refused(const struct sl_firewall_config *cfg, const char *msg_part)
{
    struct sl_buf b;
    char err[256] = "";

    sl_buf_init(&b, 1 << 16);
    assert_int_equal(sl_firewall_render(cfg, &b), SL_EINVAL);
    assert_int_equal(b.len, 0);
    sl_buf_finish(&b);
    assert_int_equal(sl_firewall_install(cfg, err, sizeof(err)), SL_EINVAL);
    if (strstr(err, msg_part) == NULL) {
        fail_msg("message \"%s\" does not say \"%s\"", err, msg_part);
    }
}

static void bad_table_names_are_refused(void **state)
{
    static const char *const bad[] = {
        NULL,
        "",
        "sbx_egress",
        "sluice",
        "sluice_a-b",
        "sluice_a b",
        "sluice_a;flush ruleset",
        "sluice_a}",
        "sluice_\"x\"",
    };
    static const uint16_t one[] = { 8443 };
    struct sl_firewall_config cfg = good;
    char err[128];
    char too_long[SL_FIREWALL_TABLE_CAP + 1];

    (void)state;
    for (size_t i = 0; i < SL_ARRAY_LEN(bad); i++) {
        cfg.table = bad[i];
        expect_refused(&cfg, "table name");
        assert_int_equal(sl_firewall_remove(bad[i], err, sizeof(err)), SL_EINVAL);
        assert_int_equal(sl_firewall_set_redirect_ports(bad[i], one, 1, err, sizeof(err)),
                         SL_EINVAL);
    }
    memcpy(too_long, "sluice_", 7);
    memset(too_long + 7, 'a', sizeof(too_long) - 8);
    too_long[sizeof(too_long) - 1] = '\0';
    assert_int_equal(strlen(too_long), SL_FIREWALL_TABLE_CAP);
    cfg.table = too_long;
    expect_refused(&cfg, "table name");
    assert_int_equal(sl_firewall_remove(too_long, err, sizeof(err)), SL_EINVAL);
    /* 63 characters is the longest name. */
    cfg.table = "sluice_12345678901234567890123456789012345678901234567890123456";
    assert_int_equal(strlen(cfg.table), SL_FIREWALL_TABLE_CAP - 1);
    {
        int rc;

        (void)render(&cfg, &rc);
        assert_int_equal(rc, 0);
    }
}

static void bad_bridge_names_are_refused(void **state)
{
    static const char *const bad[] = {
        NULL,     "",       ".",       "..",  "sl-br0\"", "sl br0",          "sl;br0",
        "sl{br0", "sl/br0", "sl\nbr0", "sl*", "sl\\br0",  "0123456789abcdef"
    };
    struct sl_firewall_config cfg = good;

    (void)state;
    for (size_t i = 0; i < SL_ARRAY_LEN(bad); i++) {
        cfg.bridge = bad[i];
        expect_refused(&cfg, "bridge name");
    }
    cfg.bridge = "0123456789ab.-_"; /* 15 characters, every kind allowed */
    {
        int rc;

        (void)render(&cfg, &rc);
        assert_int_equal(rc, 0);
    }
}

static const char *const bad_gateways[] = {
    NULL,          "",          "10.0.0",  "10.0.0.256", "10.0.0.1 ",
    "10.0.0.1/24", "::1",       "fd00::1", "localhost",  "10.0.0.1; flush ruleset",
    "010.0.0.1",   "0x0a.0.0.1"
};

static void bad_gateways_and_ports_are_refused(void **state)
{
    static const uint16_t zero[] = { 8443, 0 };
    struct sl_firewall_config cfg = good;
    char err[128] = "";

    (void)state;
    for (size_t i = 0; i < SL_ARRAY_LEN(bad_gateways); i++) {
        cfg.gateway = bad_gateways[i];
        expect_refused(&cfg, "gateway");
    }
    cfg = good;
    cfg.proxy_port = 0;
    expect_refused(&cfg, "proxy port");
    cfg.proxy_port = 65536;
    expect_refused(&cfg, "proxy port");
    cfg.proxy_port = 4294967295U;
    expect_refused(&cfg, "proxy port");
    cfg = good;
    cfg.redirect_port = 0;
    expect_refused(&cfg, "redirect port");
    cfg.redirect_port = 65536;
    expect_refused(&cfg, "redirect port");
    expect_refused(NULL, "configuration");
    /* Checked before anything goes to the kernel (no root needed). */
    assert_int_equal(sl_firewall_set_redirect_ports(TABLE, zero, 2, err, sizeof(err)), SL_EINVAL);
    assert_non_null(strstr(err, "1-65535"));
    assert_int_equal(sl_firewall_set_redirect_ports(TABLE, NULL, 1, err, sizeof(err)), SL_EINVAL);
}

static void table_names_map_network_names(void **state)
{
    char out[SL_FIREWALL_TABLE_CAP];
    char small[10];
    char big[200];
    char longname[150];

    (void)state;
    sl_firewall_table_name("sluice0", out, sizeof(out));
    assert_string_equal(out, "sluice_sluice0");
    sl_firewall_table_name("my-net.v2 x/é", out, sizeof(out));
    assert_string_equal(out, "sluice_my_net_v2_x___");
    sl_firewall_table_name("", out, sizeof(out));
    assert_string_equal(out, "sluice_");
    sl_firewall_table_name(NULL, out, sizeof(out));
    assert_string_equal(out, "sluice_");
    sl_firewall_table_name("abcdef", small, sizeof(small));
    assert_string_equal(small, "sluice_ab");
    sl_firewall_table_name("abcdef", small, 1);
    assert_string_equal(small, "");
    sl_firewall_table_name("abcdef", small, 0); /* writes nothing */
    memset(longname, 'n', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    sl_firewall_table_name(longname, big, sizeof(big));
    assert_int_equal(strlen(big), SL_FIREWALL_TABLE_CAP - 1);
    {
        struct sl_firewall_config cfg = good;
        int rc;

        cfg.table = big;
        (void)render(&cfg, &rc);
        assert_int_equal(rc, 0);
    }
}

/* ---- the inner wall's text ---------------------------------------------------------------- */

static void
wall_rejects_docker_dns_then_allows_loopback_replies_and_the_gateways_ports(void **state)
{
    int rc;
    const char *t = render_wall(&good_wall, &rc);

    (void)state;
    assert_int_equal(rc, 0);
    assert_string_equal(t, "table inet sluice_wall {\n"
                           "\tchain output {\n"
                           "\t\ttype filter hook output priority filter - 10; policy drop;\n"
                           "\t\tip daddr 127.0.0.11 meta l4proto tcp reject with tcp reset\n"
                           "\t\tip daddr 127.0.0.11 reject with icmpx admin-prohibited\n"
                           "\t\toifname \"lo\" accept\n"
                           "\t\tct state established,related accept\n"
                           "\t\tip daddr 10.213.0.1 tcp dport { 53, 80, 443, 3128, 3129 } accept\n"
                           "\t\tip daddr 10.213.0.1 udp dport { 53 } accept\n"
                           "\t\tmeta l4proto tcp reject with tcp reset\n"
                           "\t\treject with icmpx admin-prohibited\n"
                           "\t}\n"
                           "\tchain input {\n"
                           "\t\ttype filter hook input priority filter - 10; policy drop;\n"
                           "\t\tiifname \"lo\" accept\n"
                           "\t\tct state established,related accept\n"
                           "\t\tmeta l4proto tcp reject with tcp reset\n"
                           "\t\treject with icmpx admin-prohibited\n"
                           "\t}\n"
                           "}\n");
}

static void wall_without_ports_of_a_protocol_has_no_rule_for_it(void **state)
{
    struct sl_firewall_wall w = good_wall;
    int rc;
    const char *t;

    (void)state;
    w.n_udp_ports = 0;
    w.udp_ports = NULL;
    t = render_wall(&w, &rc);
    assert_int_equal(rc, 0);
    assert_null(strstr(t, "udp dport"));
    assert_non_null(strstr(t, "tcp dport { 53, 80, 443, 3128, 3129 } accept\n"));
    w.n_tcp_ports = 0;
    t = render_wall(&w, &rc);
    assert_int_equal(rc, 0);
    assert_null(strstr(t, "dport"));
    assert_non_null(strstr(t, "\t\tmeta l4proto tcp reject with tcp reset\n"));
}

static void bad_walls_are_refused_before_the_kernel(void **state)
{
    static const uint16_t zero[] = { 80, 0 };
    struct sl_firewall_wall w = good_wall;
    struct sl_buf b;
    char err[256] = "";

    (void)state;
    sl_buf_init(&b, 1 << 16);
    assert_int_equal(sl_firewall_wall_render(NULL, &b), SL_EINVAL);
    for (size_t i = 0; i < SL_ARRAY_LEN(bad_gateways); i++) {
        w.gateway = bad_gateways[i];
        assert_int_equal(sl_firewall_wall_render(&w, &b), SL_EINVAL);
        assert_int_equal(sl_firewall_wall_install("/run/netns/" NETNS, &w, err, sizeof(err)),
                         SL_EINVAL);
        assert_non_null(strstr(err, "gateway"));
    }
    w = good_wall;
    w.tcp_ports = zero;
    w.n_tcp_ports = 2;
    assert_int_equal(sl_firewall_wall_render(&w, &b), SL_EINVAL);
    assert_int_equal(sl_firewall_wall_install("/run/netns/" NETNS, &w, err, sizeof(err)),
                     SL_EINVAL);
    assert_non_null(strstr(err, "1-65535"));
    w = good_wall;
    w.udp_ports = NULL;
    assert_int_equal(sl_firewall_wall_render(&w, &b), SL_EINVAL);
    assert_int_equal(b.len, 0);
    sl_buf_finish(&b);
}

/* Neither a relative path, nor a file that is no namespace, nor the caller's own namespace: the
 * wall there would cut the control plane off. None of it needs root. */
static void wall_goes_only_into_another_network_namespace(void **state)
{
    char err[512] = "";

    (void)state;
    assert_int_equal(sl_firewall_wall_install("run/netns/x", &good_wall, err, sizeof(err)),
                     SL_EINVAL);
    assert_non_null(strstr(err, "absolute path"));
    assert_int_equal(sl_firewall_wall_install("/etc/hostname", &good_wall, err, sizeof(err)),
                     SL_EINVAL);
    assert_non_null(strstr(err, "not a network namespace"));
    assert_int_equal(sl_firewall_wall_install("/proc/self/ns/uts", &good_wall, err, sizeof(err)),
                     SL_EINVAL);
    assert_non_null(strstr(err, "not a network namespace"));
    assert_int_equal(sl_firewall_wall_install("/proc/self/ns/net", &good_wall, err, sizeof(err)),
                     SL_EINVAL);
    assert_non_null(strstr(err, "own network namespace"));
    assert_int_equal(sl_firewall_wall_install("/nonexistent/sl-t-fw", &good_wall, err, sizeof(err)),
                     SL_EIO);
    assert_non_null(strstr(err, "cannot open"));
}

/* ---- on the real kernel (root) ------------------------------------------------------------ */

static void require_root(void)
{
    if (geteuid() != 0) {
        fail_msg("this test installs nftables tables and a network namespace: run it as root "
                 "(CI does); the tests above it need no rights");
    }
}

/* Runs an nft command with its output buffered, in the network namespace `ns` (a path; NULL:
 * this one, from a forked child otherwise); returns its status, the output in `out`. */
static int nft_list_in(const char *ns, const char *cmd, char *out, size_t cap)
{
    int fds[2];
    pid_t pid;
    int status = 0;
    ssize_t n;
    size_t got = 0;

    assert_int_equal(pipe(fds), 0);
    pid = fork();
    assert_int_not_equal(pid, -1);
    if (pid == 0) {
        struct nft_ctx *nft;
        const char *text;
        int nsfd = ns != NULL ? open(ns, O_RDONLY | O_CLOEXEC) : -1;
        int rc;

        if (ns != NULL && (nsfd == -1 || setns(nsfd, CLONE_NEWNET) == -1)) {
            _exit(250);
        }
        nft = nft_ctx_new(NFT_CTX_DEFAULT);
        if (nft == NULL || nft_ctx_buffer_output(nft) != 0 || nft_ctx_buffer_error(nft) != 0) {
            _exit(251);
        }
        rc = nft_run_cmd_from_buffer(nft, cmd);
        /* Asked once: the call rewinds the buffer. */
        text = nft_ctx_get_output_buffer(nft);
        (void)!write(fds[1], text, strlen(text));
        _exit(rc == 0 ? 0 : 1);
    }
    (void)close(fds[1]);
    while (got + 1 < cap && (n = read(fds[0], out + got, cap - got - 1)) > 0) {
        got += (size_t)n;
    }
    out[got] = '\0';
    (void)close(fds[0]);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) < 250);
    return WEXITSTATUS(status);
}

static int nft_list(const char *cmd, char *out, size_t cap)
{
    return nft_list_in(NULL, cmd, out, cap);
}

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;

    for (const char *p = strstr(hay, needle); p != NULL; p = strstr(p + 1, needle)) {
        n++;
    }
    return n;
}

static void expect_line(const char *listing, const char *line)
{
    if (count(listing, line) != 1) {
        fail_msg("the listing holds \"%s\" %zu times, not once:\n%s", line, count(listing, line),
                 listing);
    }
}

static void installs_idempotently_lists_updates_the_set_and_removes(void **state)
{
    const struct sl_firewall_config cfg = { .table = TABLE,
                                            .bridge = "sl-t-nobr",
                                            .gateway = "10.213.250.1",
                                            .proxy_port = 3128,
                                            .redirect_port = 3129 };
    static const uint16_t named[] = { 9000, 8443, 9000 };
    char err[512] = "";
    char out[8192];

    (void)state;
    require_root();
    for (int i = 0; i < 2; i++) {
        if (sl_firewall_install(&cfg, err, sizeof(err)) != 0) {
            fail_msg("install %d: %s", i + 1, err);
        }
    }
    assert_int_equal(nft_list("list table inet " TABLE, out, sizeof(out)), 0);
    expect_line(out, "table inet " TABLE " {");
    expect_line(out, "set redirect_ports {");
    expect_line(out, "type inet_service");
    expect_line(out, "chain prerouting {");
    expect_line(out, "type nat hook prerouting priority dstnat - 10; policy accept;");
    expect_line(out, "iifname \"sl-t-nobr\" ip daddr 10.213.250.1 tcp dport @redirect_ports "
                     "redirect to :3129");
    expect_line(out, "chain input {");
    expect_line(out, "type filter hook input priority filter - 10; policy accept;");
    expect_line(out, "chain forward {");
    expect_line(out, "type filter hook forward priority filter - 10; policy accept;");
    expect_line(out, "iifname \"sl-t-nobr\" ip daddr 10.213.250.1 tcp dport { 53, 80, 443, 3128, "
                     "3129 } accept");
    expect_line(out, "iifname \"sl-t-nobr\" ip daddr 10.213.250.1 udp dport 53 accept");
    expect_line(out, "iifname \"sl-t-nobr\" ct state established,related accept");
    expect_line(out, "oifname \"sl-t-nobr\" ct state established,related accept");
    assert_int_equal(count(out, "iifname \"sl-t-nobr\" meta l4proto tcp reject with tcp reset"), 2);
    assert_int_equal(count(out, "reject with icmpx admin-prohibited"), 3);
    assert_int_equal(count(out, "reject with tcp reset"), 3);
    assert_int_equal(count(out, "elements"), 0);

    if (sl_firewall_set_redirect_ports(TABLE, named, SL_ARRAY_LEN(named), err, sizeof(err)) != 0) {
        fail_msg("set the redirected ports: %s", err);
    }
    assert_int_equal(nft_list("list set inet " TABLE " redirect_ports", out, sizeof(out)), 0);
    expect_line(out, "elements = { 8443, 9000 }");
    if (sl_firewall_set_redirect_ports(TABLE, NULL, 0, err, sizeof(err)) != 0) {
        fail_msg("empty the redirected ports: %s", err);
    }
    assert_int_equal(nft_list("list set inet " TABLE " redirect_ports", out, sizeof(out)), 0);
    assert_int_equal(count(out, "elements"), 0);

    if (sl_firewall_remove(TABLE, err, sizeof(err)) != 0) {
        fail_msg("remove: %s", err);
    }
    assert_int_not_equal(nft_list("list table inet " TABLE, out, sizeof(out)), 0);
    if (sl_firewall_remove(TABLE, err, sizeof(err)) != 0) {
        fail_msg("removing an absent table: %s", err);
    }
    /* The set of a table that is not there cannot be updated. */
    assert_int_equal(sl_firewall_set_redirect_ports(TABLE, named, 1, err, sizeof(err)), SL_EIO);
    assert_non_null(strstr(err, "updating the redirected ports"));
}

/* ---- real traffic from a namespace -------------------------------------------------------- */

static void sh(const char *cmd)
{
    int rc = system(cmd);

    if (rc != 0) {
        fail_msg("`%s` exited %d", cmd, rc);
    }
}

static void cleanup_kernel_objects(void)
{
    char err[256];
    int rc;

    /* Deleting one end of a veth pair deletes both; missing ones are fine. */
    rc = system("ip link del " HOST_IF " 2>/dev/null; ip netns del " NETNS " 2>/dev/null");
    (void)rc;
    rc = sl_firewall_remove(TABLE, err, sizeof(err));
    (void)rc;
}

static int net_setup(void **state)
{
    (void)state;
    if (geteuid() != 0) {
        return 0; /* the test itself fails with the reason */
    }
    cleanup_kernel_objects();
    sh("ip netns add " NETNS);
    sh("ip link add " HOST_IF " type veth peer name " NS_IF " netns " NETNS);
    sh("ip addr add " HOST_IP "/24 dev " HOST_IF " && ip link set " HOST_IF " up");
    sh("ip -n " NETNS " addr add " NS_IP "/24 dev " NS_IF " && ip -n " NETNS " link set " NS_IF
       " up && ip -n " NETNS " link set lo up");
    return 0;
}

/* The peers (forked children) alive: a test that fails leaves its own, and the teardown ends
 * them. */
static pid_t live_peers[16];
static size_t n_live_peers;

static void stop_peer(pid_t pid)
{
    int status;

    (void)kill(pid, SIGKILL);
    (void)waitpid(pid, &status, 0);
    for (size_t i = 0; i < n_live_peers; i++) {
        if (live_peers[i] == pid) {
            live_peers[i] = live_peers[--n_live_peers];
            break;
        }
    }
}

static int net_teardown(void **state)
{
    (void)state;
    while (n_live_peers > 0) {
        stop_peer(live_peers[0]);
    }
    if (geteuid() == 0) {
        cleanup_kernel_objects();
    }
    return 0;
}

static int64_t now_ms(void)
{
    struct timespec ts;

    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void enter_ns_or_exit(void)
{
    int nsfd = open("/run/netns/" NETNS, O_RDONLY | O_CLOEXEC);

    if (nsfd == -1 || setns(nsfd, CLONE_NEWNET) == -1) {
        _exit(250);
    }
    (void)close(nsfd);
}

/* A socket of `type` bound to ip:port (0: an ephemeral one, written back); a TCP one
 * listens. */
static int bound_socket(int type, const char *ip, unsigned *port)
{
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)*port) };
    socklen_t len = sizeof(sa);
    int one = 1;
    int fd = socket(AF_INET, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

    assert_int_not_equal(fd, -1);
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)), 0);
    assert_int_equal(inet_pton(AF_INET, ip, &sa.sin_addr), 1);
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        fail_msg("bind %s:%u: %s", ip, *port, strerror(errno));
    }
    if (type == SOCK_STREAM) {
        assert_int_equal(listen(fd, 8), 0);
    }
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    *port = ntohs(sa.sin_port);
    return fd;
}

static int host_socket(int type, unsigned *port)
{
    *port = 0;
    return bound_socket(type, HOST_IP, port);
}

/* A peer in a forked child that answers on the socket `fd` (TCP: accepts and closes; UDP: echoes
 * every datagram) until it is killed; in the namespace when `in_ns` (then it binds ip:port itself
 * and `fd` is ignored). Returns its pid. */
static pid_t peer(int fd, bool in_ns, int type, const char *ip, unsigned port)
{
    int ready[2];
    char c = 0;
    pid_t pid;

    assert_int_equal(pipe(ready), 0);
    pid = fork();
    assert_int_not_equal(pid, -1);
    if (pid == 0) {
        char buf[512];

        if (in_ns) {
            struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };

            enter_ns_or_exit();
            fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
            if (fd == -1 || inet_pton(AF_INET, ip, &sa.sin_addr) != 1
                || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == -1
                || (type == SOCK_STREAM && listen(fd, 8) == -1)) {
                _exit(251);
            }
        } else {
            int fl = fcntl(fd, F_GETFL);

            (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
        }
        (void)!write(ready[1], "r", 1);
        for (;;) {
            if (type == SOCK_STREAM) {
                int c2 = accept(fd, NULL, NULL);

                if (c2 != -1) {
                    (void)close(c2);
                }
            } else {
                struct sockaddr_in from;
                socklen_t flen = sizeof(from);
                ssize_t n = recvfrom(fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &flen);

                if (n > 0) {
                    (void)sendto(fd, buf, (size_t)n, 0, (struct sockaddr *)&from, flen);
                }
            }
        }
    }
    (void)close(ready[1]);
    SL_BUG_ON(n_live_peers == SL_ARRAY_LEN(live_peers));
    live_peers[n_live_peers++] = pid;
    assert_int_equal(read(ready[0], &c, 1), 1);
    (void)close(ready[0]);
    return pid;
}

/* From inside the namespace (when `from_ns`) or from the host: sends one datagram to, or connects
 * a TCP socket to, ip:port and waits at most 2 s for the outcome. Returns 0 on a connect (TCP) or
 * an answer (UDP), the errno of a failure, or ETIMEDOUT; *ms is how long it took. */
static int probe(bool from_ns, int type, const char *ip, unsigned port, int64_t *ms)
{
    int64_t t0 = now_ms();
    int status = 0;
    pid_t pid = fork();

    assert_int_not_equal(pid, -1);
    if (pid == 0) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
        struct pollfd p = { .events = POLLIN | POLLOUT };
        int e = 0;
        socklen_t elen = sizeof(e);

        if (from_ns) {
            enter_ns_or_exit();
        }
        p.fd = socket(AF_INET, type | SOCK_NONBLOCK, 0);
        if (p.fd == -1 || inet_pton(AF_INET, ip, &sa.sin_addr) != 1) {
            _exit(251);
        }
        if (connect(p.fd, (struct sockaddr *)&sa, sizeof(sa)) == -1 && errno != EINPROGRESS) {
            _exit(errno);
        }
        if (type == SOCK_DGRAM) {
            p.events = POLLIN;
            if (send(p.fd, "x", 1, 0) == -1) {
                _exit(errno);
            }
        }
        if (poll(&p, 1, 2000) != 1) {
            _exit(ETIMEDOUT);
        }
        if (getsockopt(p.fd, SOL_SOCKET, SO_ERROR, &e, &elen) == -1) {
            _exit(252);
        }
        _exit(e);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    *ms = now_ms() - t0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) >= 250) {
        fail_msg("the probe could not run (status 0x%x)", status);
    }
    return WEXITSTATUS(status);
}

static int probe_from_ns(int type, const char *ip, unsigned port, int64_t *ms)
{
    return probe(true, type, ip, port, ms);
}

static void expect_reached(int type, const char *ip, unsigned port, const char *what)
{
    int64_t ms;
    int rc = probe_from_ns(type, ip, port, &ms);

    if (rc != 0) {
        fail_msg("%s (%s %s:%u): %s after %lld ms, expected it reached", what,
                 type == SOCK_STREAM ? "TCP" : "UDP", ip, port, strerror(rc), (long long)ms);
    }
}

/* Refused within a second: TCP by a reset (ECONNREFUSED), UDP by ICMP admin-prohibited, which
 * Linux reports as EHOSTUNREACH (no listener at all would be ECONNREFUSED), or, when the
 * sender's own namespace rejects the datagram on its way out, by send() failing with EPERM. */
static void expect_refused_fast(bool from_ns, int type, const char *ip, unsigned port,
                                const char *what)
{
    int64_t ms;
    int want = type == SOCK_STREAM ? ECONNREFUSED : EHOSTUNREACH;
    int rc = probe(from_ns, type, ip, port, &ms);

    if (type == SOCK_DGRAM && rc == EPERM) {
        rc = want;
    }
    if (rc != want || ms > 1000) {
        fail_msg("%s (%s %s:%u): %s after %lld ms, expected %s within 1 s", what,
                 type == SOCK_STREAM ? "TCP" : "UDP", ip, port, rc == 0 ? "reached" : strerror(rc),
                 (long long)ms, strerror(want));
    }
}

/* Accepts the connection waiting on the listener `fd` and returns its original destination
 * port (what the proxy's transparent listener reads), checking the address is the gateway. */
static unsigned accept_original_port(int fd)
{
    struct sockaddr_in dst;
    socklen_t len = sizeof(dst);
    char ip[INET_ADDRSTRLEN];
    int c = accept(fd, NULL, NULL);

    if (c == -1) {
        fail_msg("the redirect listener has no connection: %s", strerror(errno));
    }
    if (getsockopt(c, SOL_IP, ORIGINAL_DST, &dst, &len) != 0) {
        fail_msg("SO_ORIGINAL_DST: %s", strerror(errno));
    }
    assert_non_null(inet_ntop(AF_INET, &dst.sin_addr, ip, sizeof(ip)));
    assert_string_equal(ip, HOST_IP);
    (void)close(c);
    return ntohs(dst.sin_port);
}

static void sluices_ports_are_reachable_from_the_bridge_and_nothing_else(void **state)
{
    struct sl_firewall_config cfg = { .table = TABLE, .bridge = HOST_IF, .gateway = HOST_IP };
    static const unsigned fixed[] = { 53, 80, 443 };
    const uint16_t named[] = { NAMED_PORT };
    unsigned proxy_port;
    unsigned redirect_port;
    unsigned other_port;
    unsigned udp_port;
    unsigned port;
    int proxy_fd;
    int redirect_fd;
    int other_fd;
    int udp_fd;
    int fixed_fd[SL_ARRAY_LEN(fixed)];
    int dns_fd;
    pid_t dns_peer;
    char err[512] = "";
    char buf[8];

    (void)state;
    require_root();
    proxy_fd = host_socket(SOCK_STREAM, &proxy_port);
    redirect_fd = host_socket(SOCK_STREAM, &redirect_port);
    other_fd = host_socket(SOCK_STREAM, &other_port);
    udp_fd = host_socket(SOCK_DGRAM, &udp_port);
    for (size_t i = 0; i < SL_ARRAY_LEN(fixed); i++) {
        port = fixed[i];
        fixed_fd[i] = bound_socket(SOCK_STREAM, HOST_IP, &port);
    }
    port = 53;
    dns_fd = bound_socket(SOCK_DGRAM, HOST_IP, &port);
    dns_peer = peer(dns_fd, false, SOCK_DGRAM, HOST_IP, 53);

    /* Without the table everything on the host answers: the test path is real. */
    expect_reached(SOCK_STREAM, HOST_IP, other_port, "without the table, another host port");

    cfg.proxy_port = proxy_port;
    cfg.redirect_port = redirect_port;
    if (sl_firewall_install(&cfg, err, sizeof(err)) != 0) {
        fail_msg("install: %s", err);
    }
    expect_reached(SOCK_STREAM, HOST_IP, proxy_port, "the proxy port");
    expect_reached(SOCK_STREAM, HOST_IP, redirect_port, "the redirect port");
    assert_int_equal(accept_original_port(redirect_fd), redirect_port);
    for (size_t i = 0; i < SL_ARRAY_LEN(fixed); i++) {
        expect_reached(SOCK_STREAM, HOST_IP, fixed[i], "a fixed port (DNS, HTTP, TLS)");
    }
    expect_reached(SOCK_DGRAM, HOST_IP, 53, "DNS over UDP");

    /* Not named yet: refused like any other port. */
    expect_refused_fast(true, SOCK_STREAM, HOST_IP, NAMED_PORT, "a port no rule names");
    if (sl_firewall_set_redirect_ports(TABLE, named, 1, err, sizeof(err)) != 0) {
        fail_msg("set the redirected ports: %s", err);
    }
    expect_reached(SOCK_STREAM, HOST_IP, NAMED_PORT, "a port a rule names (redirected)");
    assert_int_equal(accept_original_port(redirect_fd), NAMED_PORT);
    if (sl_firewall_set_redirect_ports(TABLE, NULL, 0, err, sizeof(err)) != 0) {
        fail_msg("empty the redirected ports: %s", err);
    }
    expect_refused_fast(true, SOCK_STREAM, HOST_IP, NAMED_PORT, "a port no rule names any more");

    expect_refused_fast(true, SOCK_STREAM, HOST_IP, other_port, "another host port");
    expect_refused_fast(true, SOCK_DGRAM, HOST_IP, udp_port, "UDP to another host port");
    assert_int_equal(recv(udp_fd, buf, sizeof(buf), 0), -1);
    assert_true(errno == EAGAIN || errno == EWOULDBLOCK);

    if (sl_firewall_remove(TABLE, err, sizeof(err)) != 0) {
        fail_msg("remove: %s", err);
    }
    expect_reached(SOCK_STREAM, HOST_IP, other_port, "without the table again, another port");
    stop_peer(dns_peer);
    assert_int_equal(close(dns_fd), 0);
    for (size_t i = 0; i < SL_ARRAY_LEN(fixed); i++) {
        assert_int_equal(close(fixed_fd[i]), 0);
    }
    assert_int_equal(close(udp_fd), 0);
    assert_int_equal(close(other_fd), 0);
    assert_int_equal(close(redirect_fd), 0);
    assert_int_equal(close(proxy_fd), 0);
}

/* The inner wall alone (no host table): installed from a thread that enters the namespace, it
 * lets the namespace reach its loopback and the gateway's listed ports, and nothing else. */
static void the_inner_wall_holds_alone(void **state)
{
    unsigned allowed_port;
    unsigned other_port;
    unsigned udp_port;
    unsigned port;
    int allowed_fd;
    int other_fd;
    int udp_fd;
    int dns_fd;
    pid_t peers[6];
    int64_t ms;
    char err[512] = "";
    char out[8192];

    (void)state;
    require_root();
    allowed_fd = host_socket(SOCK_STREAM, &allowed_port);
    other_fd = host_socket(SOCK_STREAM, &other_port);
    udp_fd = host_socket(SOCK_DGRAM, &udp_port);
    port = 53;
    dns_fd = bound_socket(SOCK_DGRAM, HOST_IP, &port);
    peers[0] = peer(dns_fd, false, SOCK_DGRAM, HOST_IP, 53);
    peers[1] = peer(udp_fd, false, SOCK_DGRAM, HOST_IP, udp_port);
    /* Docker's embedded DNS stands on 127.0.0.11 in a container's namespace: this one gets
     * listeners there (TCP and UDP), one on another loopback address, and one on its own address
     * for connections into the namespace. */
    peers[2] = peer(-1, true, SOCK_STREAM, "127.0.0.11", 53);
    peers[3] = peer(-1, true, SOCK_DGRAM, "127.0.0.11", 53);
    peers[4] = peer(-1, true, SOCK_STREAM, "127.0.0.1", 5353);
    peers[5] = peer(-1, true, SOCK_STREAM, NS_IP, 5353);

    /* Without any wall all of it is reachable, so the refusals below mean something. */
    expect_reached(SOCK_STREAM, "127.0.0.11", 53, "without a wall, 127.0.0.11 over TCP");
    expect_reached(SOCK_DGRAM, "127.0.0.11", 53, "without a wall, 127.0.0.11 over UDP");
    expect_reached(SOCK_STREAM, HOST_IP, other_port, "without a wall, another host port");
    expect_reached(SOCK_DGRAM, HOST_IP, udp_port, "without a wall, UDP to another port");
    assert_int_equal(probe(false, SOCK_STREAM, NS_IP, 5353, &ms), 0);

    {
        const uint16_t tcp[] = { (uint16_t)allowed_port, 53 };
        const uint16_t udp[] = { 53 };
        const struct sl_firewall_wall w = { .gateway = HOST_IP,
                                            .tcp_ports = tcp,
                                            .n_tcp_ports = SL_ARRAY_LEN(tcp),
                                            .udp_ports = udp,
                                            .n_udp_ports = SL_ARRAY_LEN(udp) };

        for (int i = 0; i < 2; i++) {
            if (sl_firewall_wall_install("/run/netns/" NETNS, &w, err, sizeof(err)) != 0) {
                fail_msg("install the inner wall (%d): %s", i + 1, err);
            }
        }
    }
    assert_int_equal(
            nft_list_in("/run/netns/" NETNS, "list table inet sluice_wall", out, sizeof(out)), 0);
    expect_line(out, "type filter hook output priority filter - 10; policy drop;");
    expect_line(out, "ip daddr 127.0.0.11 meta l4proto tcp reject with tcp reset");
    /* Nothing of it in the host's own namespace. */
    assert_int_not_equal(nft_list("list table inet sluice_wall", out, sizeof(out)), 0);

    expect_reached(SOCK_STREAM, HOST_IP, allowed_port, "a listed gateway port");
    expect_reached(SOCK_DGRAM, HOST_IP, 53, "DNS over UDP on the gateway");
    expect_reached(SOCK_STREAM, "127.0.0.1", 5353, "the namespace's own loopback");
    expect_refused_fast(true, SOCK_STREAM, "127.0.0.11", 53, "127.0.0.11 over TCP");
    expect_refused_fast(true, SOCK_DGRAM, "127.0.0.11", 53, "127.0.0.11 over UDP");
    expect_refused_fast(true, SOCK_STREAM, HOST_IP, other_port, "another gateway port");
    expect_refused_fast(true, SOCK_DGRAM, HOST_IP, udp_port, "UDP to another gateway port");
    expect_refused_fast(false, SOCK_STREAM, NS_IP, 5353, "a new connection into it");

    for (size_t i = 0; i < SL_ARRAY_LEN(peers); i++) {
        stop_peer(peers[i]);
    }
    assert_int_equal(close(dns_fd), 0);
    assert_int_equal(close(udp_fd), 0);
    assert_int_equal(close(other_fd), 0);
    assert_int_equal(close(allowed_fd), 0);
}

int main(void)
{
    const struct CMUnitTest pure[] = {
        cmocka_unit_test(ruleset_names_the_table_the_set_and_the_three_hooks),
        cmocka_unit_test(prerouting_redirects_the_named_ports_to_the_redirect_port),
        cmocka_unit_test(input_accepts_replies_and_sluices_ports_then_rejects_the_rest),
        cmocka_unit_test(forward_rejects_from_the_bridge_and_new_connections_to_it),
        cmocka_unit_test(render_appends_after_existing_text),
        cmocka_unit_test(gateway_is_canonical_and_ports_sorted_once),
        cmocka_unit_test(bad_table_names_are_refused),
        cmocka_unit_test(bad_bridge_names_are_refused),
        cmocka_unit_test(bad_gateways_and_ports_are_refused),
        cmocka_unit_test(table_names_map_network_names),
        cmocka_unit_test(
                wall_rejects_docker_dns_then_allows_loopback_replies_and_the_gateways_ports),
        cmocka_unit_test(wall_without_ports_of_a_protocol_has_no_rule_for_it),
        cmocka_unit_test(bad_walls_are_refused_before_the_kernel),
        cmocka_unit_test(wall_goes_only_into_another_network_namespace),
    };
    const struct CMUnitTest kernel[] = {
        cmocka_unit_test(installs_idempotently_lists_updates_the_set_and_removes),
        cmocka_unit_test(sluices_ports_are_reachable_from_the_bridge_and_nothing_else),
        cmocka_unit_test(the_inner_wall_holds_alone),
    };
    int failed = cmocka_run_group_tests_name("firewall", pure, NULL, NULL);

    failed += cmocka_run_group_tests_name("firewall.kernel", kernel, net_setup, net_teardown);
    return failed == 0 ? 0 : 1;
}
