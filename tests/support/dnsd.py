#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""tests/support/dnsd.py - a scripted DNS responder for the proxy's DNS tests (stdlib only).

    dnsd.py --script FILE --log FILE --ready FILE [--addr 127.0.0.1] [--port 53]

Answers A and AAAA questions over UDP from a script, a JSON file re-read on every query (so a
test can change it between queries):

    { "NAME": { "A": [ ["192.0.2.10"], ["127.0.0.1"] ], "AAAA": [ [] ] }, ... }

Each NAME (lowercase, no trailing dot) maps a question type to a list of answer sets. The k-th
question of that type for that name gets set k; the last set repeats once the list is used up.
An empty set is an answer with no records (NOERROR/NODATA). A type the name does not list gets
NODATA; a name the script does not list gets NXDOMAIN; other question types get NODATA. Records
carry TTL 0.

Every question is logged as one JSON line: {"name": ..., "type": "A", "n": k (1-based), "answer":
[...], "rcode": 0}. The responder writes "ready" to the --ready file once it is bound.

Bounded: datagrams over 512 bytes and malformed questions are dropped (never answered).
"""

import ipaddress
import json
import os
import socket
import struct
import sys

TYPES = {1: "A", 28: "AAAA"}
MAX_QUERY = 512


def parse_question(data):
    """Returns (id, flags, name, qtype, qclass, end of question) or None."""
    if len(data) < 12:
        return None
    qid, flags, qdcount = struct.unpack("!HHH", data[:6])
    if flags & 0x8000 or qdcount != 1:
        return None
    labels, i = [], 12
    while True:
        if i >= len(data):
            return None
        n = data[i]
        i += 1
        if n == 0:
            break
        if n > 63 or i + n > len(data):
            return None  # compression pointers never appear in a question we ask
        labels.append(data[i:i + n].decode("ascii", "replace").lower())
        i += n
    if i + 4 > len(data):
        return None
    qtype, qclass = struct.unpack("!HH", data[i:i + 4])
    return qid, flags, ".".join(labels), qtype, qclass, i + 4


def answer(data, script, counts):
    q = parse_question(data)
    if q is None:
        return None, None
    qid, flags, name, qtype, qclass, end = q
    tname = TYPES.get(qtype, str(qtype))
    rcode, addrs = 0, []
    entry = script.get(name)
    if entry is None:
        rcode = 3  # NXDOMAIN
    elif qtype in TYPES and tname in entry and entry[tname]:
        sets = entry[tname]
        k = counts.get((name, tname), 0)
        counts[(name, tname)] = k + 1
        addrs = sets[min(k, len(sets) - 1)]
    records, ancount = b"", 0
    for a in addrs:
        ip = ipaddress.ip_address(a)
        rtype = 1 if ip.version == 4 else 28
        if rtype != qtype:
            continue
        rdata = ip.packed
        # The owner name is a pointer to the question (offset 12).
        records += struct.pack("!HHHIH", 0xC00C, rtype, qclass, 0, len(rdata)) + rdata
        ancount += 1
    rflags = 0x8000 | (flags & 0x7900) | 0x0400 | 0x0080 | rcode  # QR, opcode+RD, AA, RA
    head = struct.pack("!HHHHHH", qid, rflags, 1, ancount, 0, 0)
    log = {"name": name, "type": tname, "n": counts.get((name, tname), 0), "answer": addrs,
           "rcode": rcode}
    return head + data[12:end] + records, log


def main():
    opts = {"--addr": "127.0.0.1", "--port": "53"}
    it = iter(sys.argv[1:])
    for a in it:
        if a in ("--script", "--log", "--ready", "--addr", "--port"):
            opts[a] = next(it)
        else:
            sys.exit(f"dnsd.py: unknown option {a}")
    for need in ("--script", "--log", "--ready"):
        if need not in opts:
            sys.exit(f"dnsd.py: {need} is required")
    family = socket.AF_INET6 if ":" in opts["--addr"] else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_DGRAM)
    sock.bind((opts["--addr"], int(opts["--port"])))
    counts = {}
    log = open(opts["--log"], "a", encoding="utf-8")
    tmp = opts["--ready"] + ".tmp"
    with open(tmp, "w") as f:
        f.write("ready\n")
    os.replace(tmp, opts["--ready"])
    while True:
        data, peer = sock.recvfrom(MAX_QUERY + 1)
        if len(data) > MAX_QUERY:
            continue
        try:
            with open(opts["--script"], encoding="utf-8") as f:
                script = json.load(f)
        except (OSError, ValueError) as e:
            print(f"dnsd.py: cannot read the script: {e}", file=sys.stderr, flush=True)
            continue
        try:
            reply, entry = answer(data, script, counts)
        except (ValueError, TypeError) as e:
            print(f"dnsd.py: bad script entry: {e}", file=sys.stderr, flush=True)
            continue
        if reply is None:
            continue
        log.write(json.dumps(entry) + "\n")
        log.flush()
        sock.sendto(reply, peer)


if __name__ == "__main__":
    main()
