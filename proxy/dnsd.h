/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proxy/dnsd.h - the DNS responder of `sluice proxy --dns-listen` (docs/reference/proxy.md
 * §4.12): sandboxes' names all lead to the proxy. Not to be confused with proxy/dns.h, the
 * resolver the proxy itself uses for upstreams.
 *
 * Every `A` query (one question, class IN) is answered with the IPv4 address it arrived on (the
 * listener's own), TTL 5 s; `AAAA` with NOERROR and no answer; any other type REFUSED, any
 * other opcode NOTIMP, a malformed query FORMERR when a header can be echoed, else nothing. It
 * never forwards a query, never resolves anything, and answers from what the query holds
 * alone: the answer is at most 512 bytes (no EDNS, never truncated). Each query answered has one
 * audit line (`"decision":"dns"`) naming its client, found by source address in the current
 * snapshot as transparent connections are (sl_policy_identify_address()), and marking a name no
 * rule of the client's environment allows.
 *
 * Two parts:
 *   - pure functions (sl_dnsd_parse(), sl_dnsd_answer(), the names): no I/O, no allocation, a
 *     query's bytes in, an answer's bytes out; fuzzed as they are (tests/fuzz/fuzz_dnsd.c);
 *   - the responder (sl_dnsd_start() ... sl_dnsd_close()) on one libuv loop, the proxy's main
 *     thread: a UDP socket and a TCP listener per address. UDP: one datagram in, one out, from
 *     buffers of the responder's own (nothing allocated per query); an answer the socket cannot
 *     take at once is dropped. TCP (RFC 7766): two-byte length prefixes, a query of at most
 *     SL_DNSD_QUERY_MAX bytes, queries answered in turn, at most DNSD_TCP_MAX connections (and
 *     DNSD_TCP_PER_CLIENT from one address), each closed after 5 s without a complete query.
 *
 * Lifecycle: sl_dnsd_start() (binds everything or nothing) -> sl_dnsd_set_snapshot() whenever
 * the proxy loads one -> sl_dnsd_close() (the handles close; the memory goes with the last close
 * callback, on a later turn of the loop). Loop thread only.
 */
#ifndef SL_PROXY_DNSD_H
#define SL_PROXY_DNSD_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "base/err.h"

struct sl_audit;
struct sl_snapshot;

/* Largest answer written (RFC 1035 §4.2.1: the UDP limit without EDNS; every answer fits). */
#define SL_DNSD_ANSWER_MAX 512
/* Largest query taken, over UDP or TCP (RFC 8914's EDNS buffer size; a query is much smaller). */
#define SL_DNSD_QUERY_MAX 1232
/* The TTL of an A answer, in seconds. */
#define SL_DNSD_TTL_S 5
/* Longest name as text: 255 bytes of wire form make at most 253 characters. */
#define SL_DNSD_NAME_MAX 255

/* Response codes (RFC 1035 §4.1.1, RFC 6895). */
enum sl_dnsd_rcode {
    SL_DNSD_NOERROR = 0,
    SL_DNSD_FORMERR = 1,
    SL_DNSD_NOTIMP = 4,
    SL_DNSD_REFUSED = 5,
};

/* Record types and the class answered. */
#define SL_DNSD_TYPE_A    1
#define SL_DNSD_TYPE_AAAA 28
#define SL_DNSD_CLASS_IN  1

/* A query as sl_dnsd_parse() read it, and the answer it gets. */
struct sl_dnsd_query {
    /* The header's fields echoed: the id, the opcode, recursion desired. */
    uint16_t id;
    uint8_t opcode;
    bool rd;
    /* The answer's response code. */
    enum sl_dnsd_rcode rcode;
    /* The question was read whole (its bytes are echoed in the answer): `qtype`, `qclass`,
     * `question` and the name below are valid. */
    bool has_question;
    uint16_t qtype;
    uint16_t qclass;
    /* The question as sent (name, type, class), borrowed from the query's bytes. */
    const uint8_t *question;
    size_t question_len;
    /* The name as text: labels joined by '.', "." for the root; a byte outside `!`..`~` or a
     * '.' inside a label is written '?' and clears `name_plain`. NUL-terminated. */
    char name[SL_DNSD_NAME_MAX + 1];
    size_t name_len;
    bool name_plain;
    /* An A answer goes with it (type A, class IN, NOERROR). */
    bool answer_a;
};

/* Reads the DNS message `p`/`n` (borrowed; `q` borrows from it) as a query. Returns true when it
 * gets an answer, described in `q`: NOERROR (A: with the address; AAAA: without), REFUSED (a
 * class other than IN, a type other than A and AAAA), NOTIMP (an opcode other than QUERY),
 * FORMERR (not one question, answer or authority records, a name that is malformed or
 * compressed, a question cut short). Returns false for what gets no answer at all: fewer than
 * 12 bytes (no header to echo), or a response (QR set: the responder answers no answer). The
 * additional section (an EDNS OPT record) is not looked at. Never fails otherwise. */
bool sl_dnsd_parse(const uint8_t *p, size_t n, struct sl_dnsd_query *q);

/* Writes the answer to `q` (from sl_dnsd_parse() returning true) into `out`: the header (the
 * id, the opcode and RD echoed; QR, AA and RA set; the rcode), the question when it was read,
 * and for an A answer one record `A addr` with TTL SL_DNSD_TTL_S (the name a pointer to the
 * question's). Returns the length (at most SL_DNSD_ANSWER_MAX), or SL_ETOOBIG when `cap` is too
 * small. */
SL_MUST_CHECK int sl_dnsd_answer(const struct sl_dnsd_query *q, const uint8_t addr[4], uint8_t *out,
                                 size_t cap);

/* The audit line's name of a type: "A", "AAAA", "MX", ... (the common ones), else "TYPEnnn" (RFC
 * 3597 §5) written into `buf`. Returns a static string or `buf`. */
const char *sl_dnsd_type_name(uint16_t type, char buf[16]);

/* "NOERROR", "FORMERR", "NOTIMP", "REFUSED". Static. */
const char *sl_dnsd_rcode_name(enum sl_dnsd_rcode rcode);

/*
 * The responder.
 */

struct sl_dnsd;

/* What the responder counted since its start (for /metrics). */
struct sl_dnsd_stats {
    /* Queries answered, by the answer's rcode (index: enum sl_dnsd_rcode; the others stay 0). */
    uint64_t answered[SL_DNSD_REFUSED + 1];
    /* Datagrams and TCP messages that got no answer (no header, a response, a socket that
     * took no more), and TCP connections refused beyond the bounds or closed to make room. */
    uint64_t dropped;
};

/* Binds UDP and TCP on each of the `n` IPv4 addresses (specific ones, each with its port) and
 * starts answering on `loop`. `audit` (borrowed; NULL: no audit log) gets a line per answered
 * query. On failure nothing is left bound (the handles close on the loop's next run) and `err`
 * names the address. */
SL_MUST_CHECK int sl_dnsd_start(uv_loop_t *loop, const struct sockaddr_in *addrs, size_t n,
                                struct sl_audit *audit, struct sl_dnsd **out, char *err,
                                size_t errlen);

/* The snapshot queries are identified and marked with from now on (a new reference is taken;
 * the previous one is released). NULL is allowed. */
void sl_dnsd_set_snapshot(struct sl_dnsd *d, struct sl_snapshot *s);

/* Fills `out`. */
void sl_dnsd_stats(const struct sl_dnsd *d, struct sl_dnsd_stats *out);

/* Stops answering and closes every socket and connection; the memory goes once the loop has run
 * their close callbacks. NULL is a no-op. */
void sl_dnsd_close(struct sl_dnsd *d);

#endif
