/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control/sandbox/firewall.c - the host table and the inner wall, through libnftables.
 *
 * Every string from the configuration ends up inside nft syntax, so each is checked against a
 * grammar with no quotes, spaces, semicolons or braces before any text is built; the gateway is
 * written back from its parsed form, not as given, and ports are written from numbers.
 */
/* setns() and CLONE_NEWNET: the inner wall is installed from inside the container's namespace. */
#define _GNU_SOURCE 1
#include "control/sandbox/firewall.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <netinet/in.h>
#include <nftables/libnftables.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/mem.h"

#define TABLE_PREFIX "sluice_"
/* IFNAMSIZ less the terminator. */
#define BRIDGE_MAX 15
/* Bound on a rendered ruleset and a batch: a few hundred bytes, but a port set may name every
 * port (at most 65535 of "65535, "). */
#define RULESET_MAX (1024u * 1024u)
/* One bit per port. */
#define PORT_BYTES (65536u / 8u)

/* A set of ports, one bit each (port 0 is never in it). */
struct portset {
    uint8_t bits[PORT_BYTES];
};

static void portset_add(struct portset *s, unsigned port)
{
    s->bits[port / 8] = (uint8_t)(s->bits[port / 8] | (1u << (port % 8)));
}

static bool portset_has(const struct portset *s, unsigned port)
{
    return (s->bits[port / 8] & (1u << (port % 8))) != 0;
}

/* Adds `n` ports to `s`; SL_EINVAL for a port 0 (a uint16_t holds no larger one). */
static int portset_add_all(struct portset *s, const uint16_t *ports, size_t n)
{
    if (n > 0 && ports == NULL) {
        return SL_EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        if (ports[i] == 0) {
            return SL_EINVAL;
        }
        portset_add(s, ports[i]);
    }
    return 0;
}

static bool portset_is_empty(const struct portset *s)
{
    for (size_t i = 0; i < PORT_BYTES; i++) {
        if (s->bits[i] != 0) {
            return false;
        }
    }
    return true;
}

/* Appends the ports of `s` in increasing order as nft set elements: "53, 80, 443". */
static int append_ports(struct sl_buf *b, const struct portset *s)
{
    bool first = true;

    for (unsigned p = 1; p < 65536u; p++) {
        if (!portset_has(s, p)) {
            continue;
        }
        SL_TRY(sl_buf_printf(b, "%s%u", first ? "" : ", ", p));
        first = false;
    }
    return 0;
}

static bool is_word_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9')
           || ch == '_';
}

static int check_table(const char *table, char *err, size_t cap)
{
    size_t n;

    if (table == NULL || strncmp(table, TABLE_PREFIX, strlen(TABLE_PREFIX)) != 0) {
        sl_errf(err, cap, "firewall: the table name must start with \"" TABLE_PREFIX "\"");
        return SL_EINVAL;
    }
    n = strlen(table);
    if (n >= SL_FIREWALL_TABLE_CAP) {
        sl_errf(err, cap, "firewall: the table name is longer than %d characters",
                SL_FIREWALL_TABLE_CAP - 1);
        return SL_EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        if (!is_word_char(table[i])) {
            sl_errf(err, cap, "firewall: the table name may hold only A-Z, a-z, 0-9 and _");
            return SL_EINVAL;
        }
    }
    return 0;
}

static int check_bridge(const char *bridge, char *err, size_t cap)
{
    size_t n = bridge == NULL ? 0 : strlen(bridge);

    if (n == 0 || n > BRIDGE_MAX || strcmp(bridge, ".") == 0 || strcmp(bridge, "..") == 0) {
        sl_errf(err, cap, "firewall: the bridge name must be 1-%d characters (not . or ..)",
                BRIDGE_MAX);
        return SL_EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        if (!is_word_char(bridge[i]) && bridge[i] != '.' && bridge[i] != '-') {
            sl_errf(err, cap, "firewall: the bridge name may hold only A-Z, a-z, 0-9, _, . and -");
            return SL_EINVAL;
        }
    }
    return 0;
}

/* Writes the canonical dotted form of the IPv4 address `text` to `gw`. */
static int check_gateway(const char *text, char gw[INET_ADDRSTRLEN], char *err, size_t cap)
{
    struct in_addr a;

    if (text == NULL || inet_pton(AF_INET, text, &a) != 1
        || inet_ntop(AF_INET, &a, gw, INET_ADDRSTRLEN) == NULL) {
        sl_errf(err, cap, "firewall: the gateway must be an IPv4 address in dotted form");
        return SL_EINVAL;
    }
    return 0;
}

/* Checks `cfg` and writes the gateway's canonical dotted form to `gw`. */
static int check_config(const struct sl_firewall_config *cfg, char gw[INET_ADDRSTRLEN], char *err,
                        size_t cap)
{
    if (cfg == NULL) {
        sl_errf(err, cap, "firewall: no configuration");
        return SL_EINVAL;
    }
    SL_TRY(check_table(cfg->table, err, cap));
    SL_TRY(check_bridge(cfg->bridge, err, cap));
    SL_TRY(check_gateway(cfg->gateway, gw, err, cap));
    if (cfg->proxy_port < 1 || cfg->proxy_port > 65535) {
        sl_errf(err, cap, "firewall: the proxy port must be 1-65535");
        return SL_EINVAL;
    }
    if (cfg->redirect_port < 1 || cfg->redirect_port > 65535) {
        sl_errf(err, cap, "firewall: the redirect port must be 1-65535");
        return SL_EINVAL;
    }
    return 0;
}

static int render_checked(const struct sl_firewall_config *cfg, const char *gw, struct sl_buf *out)
{
    const char *br = cfg->bridge;
    struct portset *tcp = sl_calloc(1, sizeof(*tcp));
    int rc;

    if (tcp == NULL) {
        return SL_ENOMEM;
    }
    portset_add(tcp, cfg->proxy_port);
    portset_add(tcp, cfg->redirect_port);
    portset_add(tcp, SL_FIREWALL_DNS_PORT);
    portset_add(tcp, SL_FIREWALL_HTTP_PORT);
    portset_add(tcp, SL_FIREWALL_HTTPS_PORT);
    /* Rejects, never drops: a dropped packet leaves a client waiting for its own timeout, while
     * a TCP reset fails a connect at once (ICMP admin-prohibited took about a second for TCP,
     * measured on Debian 12's kernel). The redirect comes before Docker's nat (dstnat) so that
     * a port Docker publishes cannot take a sandbox's connection elsewhere; the filter chains
     * see the redirected port. */
    rc = sl_buf_printf(out,
                       "table inet %s {\n"
                       "\tset redirect_ports {\n"
                       "\t\ttype inet_service\n"
                       "\t}\n"
                       "\tchain prerouting {\n"
                       "\t\ttype nat hook prerouting priority dstnat - 10; policy accept;\n"
                       "\t\tiifname \"%s\" ip daddr %s tcp dport @redirect_ports redirect to "
                       ":%u\n"
                       "\t}\n"
                       "\tchain input {\n"
                       "\t\ttype filter hook input priority filter - 10; policy accept;\n"
                       "\t\tiifname \"%s\" ct state established,related accept\n"
                       "\t\tiifname \"%s\" ip daddr %s tcp dport { ",
                       cfg->table, br, gw, cfg->redirect_port, br, br, gw);
    rc = rc < 0 ? rc : append_ports(out, tcp);
    sl_free(tcp);
    SL_TRY(rc);
    return sl_buf_printf(out,
                         " } accept\n"
                         "\t\tiifname \"%s\" ip daddr %s udp dport %u accept\n"
                         "\t\tiifname \"%s\" meta l4proto tcp reject with tcp reset\n"
                         "\t\tiifname \"%s\" reject with icmpx admin-prohibited\n"
                         "\t}\n"
                         "\tchain forward {\n"
                         "\t\ttype filter hook forward priority filter - 10; policy accept;\n"
                         "\t\tiifname \"%s\" meta l4proto tcp reject with tcp reset\n"
                         "\t\tiifname \"%s\" reject with icmpx admin-prohibited\n"
                         "\t\toifname \"%s\" ct state established,related accept\n"
                         "\t\toifname \"%s\" meta l4proto tcp reject with tcp reset\n"
                         "\t\toifname \"%s\" reject with icmpx admin-prohibited\n"
                         "\t}\n"
                         "}\n",
                         br, gw, SL_FIREWALL_DNS_PORT, br, br, br, br, br, br, br);
}

int sl_firewall_render(const struct sl_firewall_config *cfg, struct sl_buf *out)
{
    char gw[INET_ADDRSTRLEN];

    SL_TRY(check_config(cfg, gw, NULL, 0));
    return render_checked(cfg, gw, out);
}

/* The first line of nftables' error output, which names the failing command and the reason
 * ("Error: Could not process rule: Operation not permitted"). */
static void copy_nft_error(struct nft_ctx *nft, const char *what, char *err, size_t cap)
{
    const char *msg = nft_ctx_get_error_buffer(nft);
    size_t n = msg == NULL ? 0 : strcspn(msg, "\n");

    if (n == 0) {
        sl_errf(err, cap, "firewall: %s failed (nftables gave no reason)", what);
        return;
    }
    sl_errf(err, cap, "firewall: %s failed: %.*s", what, (int)(n > 400 ? 400 : n), msg);
}

/* libnftables keeps some state outside its contexts (its symbol tables, the parser's scanner
 * setup), and the control plane may install a wall and update the host's set from two threads
 * of the pool at once: one batch at a time in the process. */
static pthread_mutex_t nft_lock = PTHREAD_MUTEX_INITIALIZER;

/* Runs `cmds` as one nftables transaction in the calling thread's network namespace. */
static int run_batch(const char *cmds, const char *what, char *err, size_t cap)
{
    struct nft_ctx *nft;
    int rc = 0;

    SL_BUG_ON(pthread_mutex_lock(&nft_lock) != 0);
    nft = nft_ctx_new(NFT_CTX_DEFAULT);
    if (nft == NULL) {
        sl_errf(err, cap, "firewall: out of memory for the nftables context");
        rc = SL_ENOMEM;
    } else if (nft_ctx_buffer_output(nft) != 0 || nft_ctx_buffer_error(nft) != 0) {
        sl_errf(err, cap, "firewall: cannot buffer nftables output");
        rc = SL_ENOMEM;
    } else if (nft_run_cmd_from_buffer(nft, cmds) != 0) {
        copy_nft_error(nft, what, err, cap);
        rc = SL_EIO;
    }
    if (nft != NULL) {
        nft_ctx_free(nft);
    }
    SL_BUG_ON(pthread_mutex_unlock(&nft_lock) != 0);
    return rc;
}

int sl_firewall_install(const struct sl_firewall_config *cfg, char *err, size_t cap)
{
    char gw[INET_ADDRSTRLEN];
    struct sl_buf b;
    int rc;

    SL_TRY(check_config(cfg, gw, err, cap));
    /* "add" makes the table exist so that "delete" cannot fail; the new table follows in the
     * same batch, so there is no moment without rules. */
    sl_buf_init(&b, RULESET_MAX);
    rc = sl_buf_printf(&b, "add table inet %s\ndelete table inet %s\n", cfg->table, cfg->table);
    if (rc == 0) {
        rc = render_checked(cfg, gw, &b);
    }
    if (rc < 0) {
        sl_errf(err, cap, "firewall: cannot build the ruleset: %s", sl_strerror(rc));
    } else {
        rc = run_batch(sl_buf_cstr(&b), "installing the table", err, cap);
    }
    sl_buf_finish(&b);
    return rc;
}

int sl_firewall_set_redirect_ports(const char *table, const uint16_t *ports, size_t n, char *err,
                                   size_t cap)
{
    struct portset *set;
    struct sl_buf b;
    int rc;

    SL_TRY(check_table(table, err, cap));
    set = sl_calloc(1, sizeof(*set));
    if (set == NULL) {
        sl_errf(err, cap, "firewall: out of memory");
        return SL_ENOMEM;
    }
    if (portset_add_all(set, ports, n) < 0) {
        sl_free(set);
        sl_errf(err, cap, "firewall: a redirected port must be 1-65535");
        return SL_EINVAL;
    }
    /* One transaction: a connection never meets a half-updated set. */
    sl_buf_init(&b, RULESET_MAX);
    rc = sl_buf_printf(&b, "flush set inet %s redirect_ports\n", table);
    if (rc == 0 && !portset_is_empty(set)) {
        rc = sl_buf_printf(&b, "add element inet %s redirect_ports { ", table);
        rc = rc < 0 ? rc : append_ports(&b, set);
        rc = rc < 0 ? rc : sl_buf_append_str(&b, " }\n");
    }
    sl_free(set);
    if (rc < 0) {
        sl_errf(err, cap, "firewall: cannot build the port set: %s", sl_strerror(rc));
    } else {
        rc = run_batch(sl_buf_cstr(&b), "updating the redirected ports", err, cap);
    }
    sl_buf_finish(&b);
    return rc;
}

int sl_firewall_remove(const char *table, char *err, size_t cap)
{
    char cmds[2 * SL_FIREWALL_TABLE_CAP + 64];

    SL_TRY(check_table(table, err, cap));
    /* nft 1.0.6 has no "destroy": add-then-delete in one batch removes a table that may or
     * may not exist. */
    (void)snprintf(cmds, sizeof(cmds), "add table inet %s\ndelete table inet %s\n", table, table);
    return run_batch(cmds, "removing the table", err, cap);
}

void sl_firewall_table_name(const char *network, char *out, size_t cap)
{
    size_t n = 0;

    if (cap == 0) {
        return;
    }
    if (cap > SL_FIREWALL_TABLE_CAP) {
        cap = SL_FIREWALL_TABLE_CAP;
    }
    for (const char *p = TABLE_PREFIX; *p != '\0' && n + 1 < cap; p++) {
        out[n++] = *p;
    }
    for (const char *p = network == NULL ? "" : network; *p != '\0' && n + 1 < cap; p++) {
        if (is_word_char(*p)) {
            out[n++] = *p;
        } else {
            out[n++] = '_';
        }
    }
    out[n] = '\0';
}

/* ---- the inner wall ------------------------------------------------------------------------ */

/* Appends "\t\tip daddr GW PROTO dport { PORTS } accept\n" when `ports` is not empty. */
static int append_gateway_rule(struct sl_buf *b, const char *gw, const char *proto,
                               const uint16_t *ports, size_t n)
{
    struct portset *set;
    int rc;

    if (n == 0) {
        return 0;
    }
    set = sl_calloc(1, sizeof(*set));
    if (set == NULL) {
        return SL_ENOMEM;
    }
    rc = portset_add_all(set, ports, n);
    rc = rc < 0 ? rc : sl_buf_printf(b, "\t\tip daddr %s %s dport { ", gw, proto);
    rc = rc < 0 ? rc : append_ports(b, set);
    rc = rc < 0 ? rc : sl_buf_append_str(b, " } accept\n");
    sl_free(set);
    return rc;
}

/* Renders the wall after `w`'s gateway was checked into `gw`; SL_EINVAL for a bad port. */
static int wall_render_checked(const struct sl_firewall_wall *w, const char *gw, struct sl_buf *out)
{
    /* 127.0.0.11 first: Docker's nat rules in the namespace (priority dstnat, before this
     * chain) only change its port, so the address still shows which packets are for Docker's
     * resolver. Policy drop under the final rejects: a packet no rule names never leaves. */
    SL_TRY(sl_buf_printf(out, "table inet " SL_FIREWALL_WALL_TABLE " {\n"
                              "\tchain output {\n"
                              "\t\ttype filter hook output priority filter - 10; policy drop;\n"
                              "\t\tip daddr 127.0.0.11 meta l4proto tcp reject with tcp reset\n"
                              "\t\tip daddr 127.0.0.11 reject with icmpx admin-prohibited\n"
                              "\t\toifname \"lo\" accept\n"
                              "\t\tct state established,related accept\n"));
    SL_TRY(append_gateway_rule(out, gw, "tcp", w->tcp_ports, w->n_tcp_ports));
    SL_TRY(append_gateway_rule(out, gw, "udp", w->udp_ports, w->n_udp_ports));
    return sl_buf_append_str(out, "\t\tmeta l4proto tcp reject with tcp reset\n"
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

/* Builds the wall's text into `out` (initialised by the caller), after `prefix`. Nothing is
 * left in `out` on failure. */
static int wall_text(const struct sl_firewall_wall *w, const char *prefix, struct sl_buf *out,
                     char *err, size_t cap)
{
    char gw[INET_ADDRSTRLEN];
    size_t start = out->len;
    int rc;

    if (w == NULL) {
        sl_errf(err, cap, "firewall: no inner wall");
        return SL_EINVAL;
    }
    SL_TRY(check_gateway(w->gateway, gw, err, cap));
    rc = sl_buf_append_str(out, prefix);
    rc = rc < 0 ? rc : wall_render_checked(w, gw, out);
    if (rc == SL_EINVAL) {
        sl_errf(err, cap, "firewall: a port of the inner wall must be 1-65535");
    } else if (rc < 0) {
        sl_errf(err, cap, "firewall: cannot build the inner wall: %s", sl_strerror(rc));
    }
    if (rc < 0) {
        sl_buf_truncate(out, start);
    }
    return rc;
}

int sl_firewall_wall_render(const struct sl_firewall_wall *w, struct sl_buf *out)
{
    return wall_text(w, "", out, NULL, 0);
}

/* The thread that enters the namespace: it ends with the work, so no other code ever runs in
 * the container's namespace by accident. */
struct wall_job {
    int nsfd;
    const char *cmds;
    char *err;
    size_t cap;
    int rc;
};

static void *wall_thread(void *arg)
{
    struct wall_job *j = arg;

    if (setns(j->nsfd, CLONE_NEWNET) == -1) {
        sl_errf(j->err, j->cap,
                "firewall: cannot enter the network namespace for the inner wall: %s",
                strerror(errno));
        j->rc = SL_EIO;
        return NULL;
    }
    j->rc = run_batch(j->cmds, "installing the inner wall", j->err, j->cap);
    return NULL;
}

/* Opens `path` and checks that it is a network namespace other than this thread's own. */
static int open_netns(const char *path, int *out, char *err, size_t cap)
{
    struct stat own;
    struct stat st;
    int fd;
    int type;

    if (path == NULL || path[0] != '/') {
        sl_errf(err, cap, "firewall: the network namespace must be an absolute path");
        return SL_EINVAL;
    }
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd == -1) {
        sl_errf(err, cap, "firewall: cannot open the network namespace %.300s: %s", path,
                strerror(errno));
        return SL_EIO;
    }
    type = ioctl(fd, NS_GET_NSTYPE);
    if (type != CLONE_NEWNET || fstat(fd, &st) == -1) {
        (void)close(fd);
        sl_errf(err, cap, "firewall: %.300s is not a network namespace", path);
        return SL_EINVAL;
    }
    /* The wall in the control plane's own namespace would cut the host off: never. */
    if (stat("/proc/thread-self/ns/net", &own) == -1
        || (own.st_dev == st.st_dev && own.st_ino == st.st_ino)) {
        (void)close(fd);
        sl_errf(err, cap, "firewall: %.300s is the control plane's own network namespace", path);
        return SL_EINVAL;
    }
    *out = fd;
    return 0;
}

int sl_firewall_wall_install(const char *netns, const struct sl_firewall_wall *w, char *err,
                             size_t cap)
{
    struct wall_job job = { .nsfd = -1, .err = err, .cap = cap, .rc = 0 };
    pthread_t t;
    struct sl_buf b;
    int rc;

    sl_buf_init(&b, RULESET_MAX);
    rc = wall_text(w,
                   "add table inet " SL_FIREWALL_WALL_TABLE "\n"
                   "delete table inet " SL_FIREWALL_WALL_TABLE "\n",
                   &b, err, cap);
    if (rc < 0) {
        sl_buf_finish(&b);
        return rc;
    }
    rc = open_netns(netns, &job.nsfd, err, cap);
    if (rc < 0) {
        sl_buf_finish(&b);
        return rc;
    }
    job.cmds = sl_buf_cstr(&b);
    rc = pthread_create(&t, NULL, wall_thread, &job);
    if (rc != 0) {
        sl_errf(err, cap, "firewall: cannot start a thread: %s", strerror(rc));
        rc = rc == EAGAIN ? SL_ENOMEM : SL_EIO;
    } else {
        SL_BUG_ON(pthread_join(t, NULL) != 0);
        rc = job.rc;
    }
    (void)close(job.nsfd);
    sl_buf_finish(&b);
    return rc;
}

int sl_firewall_wall_install_here(const struct sl_firewall_wall *w, char *err, size_t cap)
{
    struct sl_buf b;
    int rc;

    sl_buf_init(&b, RULESET_MAX);
    rc = wall_text(w,
                   "add table inet " SL_FIREWALL_WALL_TABLE "\n"
                   "delete table inet " SL_FIREWALL_WALL_TABLE "\n",
                   &b, err, cap);
    if (rc == 0) {
        rc = run_batch(sl_buf_cstr(&b), "installing the inner wall", err, cap);
    }
    sl_buf_finish(&b);
    return rc;
}
