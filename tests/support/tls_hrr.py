#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""tests/support/tls_hrr.py - a TLS 1.3 client that forces a HelloRetryRequest, then may change
its SNI in the second ClientHello (RFC 8446 §4.1.2 says it must not).

Opens a tunnel through the proxy (CONNECT TARGET), or with --direct connects straight to ADDR:PORT
(a transparent listener), sends a ClientHello with SNI SNI1 and an empty
key_share list (x25519 and secp256r1 offered in supported_groups), so that any TLS 1.3 server
answers with a HelloRetryRequest; then a second ClientHello with SNI SNI2 (or none, with
--no-sni2) and a key share for the group the HelloRetryRequest selected (x25519: 32 random bytes;
secp256r1: its generator point, a valid public key). Raw bytes, no TLS library: no library lets
the SNI change between the two hellos.

Prints one line per answer: `hrr` when the first answer was a HelloRetryRequest (`no-hrr`
otherwise), then for the second hello `hello` (the handshake went on: a ServerHello),
`alert=N`, `eof`, or `answer=HEX`. Exit 0; exit 2 when the tunnel does not open.

  tls_hrr.py (--proxy PORT --target HOST:PORT | --direct ADDR:PORT) --sni1 NAME
             (--sni2 NAME | --no-sni2) [--ccs] [--split] [--ahead]

--ccs sends a ChangeCipherSpec record before the second hello (middlebox compatibility mode);
--split sends the second hello as two handshake records, in three writes 0.2 s apart; --ahead sends
it with the first, in the same write, before any answer (then with an x25519 share: the server
must select x25519), and prints the answers to both after.
"""
import argparse
import os
import socket
import struct
import sys
import time

from tunnel import open_tunnel

HRR_RANDOM = bytes.fromhex("cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c")
X25519, SECP256R1 = 0x001D, 0x0017
# The generator point of P-256, uncompressed: a valid key share (private key 1).
P256_G = bytes.fromhex(
    "046b17d1f2e12c4247f8bce6e563a440f277037d812deb33a0f4a13945d898c296"
    "4fe342e2fe1a7f9b8ee7eb4a7c0f9e162bce33576b315ececbb6406837bf51f5"
)


def ext(t, body):
    return struct.pack(">HH", t, len(body)) + body


def hello_msg(sni, share):
    """A ClientHello handshake message: TLS 1.3 only, one suite, SNI when not None, the key share
    entries `share` (bytes, already encoded)."""
    exts = b""
    if sni is not None:
        name = b"\x00" + struct.pack(">H", len(sni)) + sni
        exts += ext(0, struct.pack(">H", len(name)) + name)
    exts += ext(10, b"\x00\x04" + struct.pack(">HH", X25519, SECP256R1))
    exts += ext(13, b"\x00\x04\x04\x03\x08\x04")
    exts += ext(43, b"\x02\x03\x04")  # supported_versions: TLS 1.3 only
    exts += ext(51, struct.pack(">H", len(share)) + share)
    body = b"\x03\x03" + os.urandom(32) + b"\x20" + b"\x11" * 32 + b"\x00\x02\x13\x01\x01\x00"
    body += struct.pack(">H", len(exts)) + exts
    return b"\x01" + len(body).to_bytes(3, "big") + body


def records(msg, parts):
    """`msg` as `parts` handshake records (version 3.3), cut at equal lengths."""
    cut = (len(msg) + parts - 1) // parts
    return [
        b"\x16\x03\x03" + struct.pack(">H", len(msg[i : i + cut])) + msg[i : i + cut]
        for i in range(0, len(msg), cut)
    ]


def share_for(group):
    if group == SECP256R1:
        return struct.pack(">HH", SECP256R1, len(P256_G)) + P256_G
    return struct.pack(">HH", X25519, 32) + os.urandom(32)


def read_record(s, buf):
    """The next record (type, body) from s, with `buf` (a bytearray) holding what was read past
    it; None at EOF or on a timeout."""
    try:
        while True:
            if len(buf) >= 5:
                n = struct.unpack(">H", bytes(buf[3:5]))[0]
                if len(buf) >= 5 + n:
                    rec = (buf[0], bytes(buf[5 : 5 + n]))
                    del buf[: 5 + n]
                    return rec
            d = s.recv(4096)
            if not d:
                return None
            buf += d
    except OSError:
        return None


def first_answer(s, buf):
    """`hrr` with the selected group, or `no-hrr`."""
    rec = read_record(s, buf)
    if rec is None or rec[0] != 22 or rec[1][:1] != b"\x02" or rec[1][6:38] != HRR_RANDOM:
        return "no-hrr", None
    body = rec[1][4:]
    # legacy_version, random, session id, suite, compression, then the extensions.
    i = 2 + 32
    i += 1 + body[i] + 2 + 1
    end = i + 2 + struct.unpack(">H", body[i : i + 2])[0]
    i += 2
    group = None
    while i + 4 <= end:
        t, n = struct.unpack(">HH", body[i : i + 4])
        if t == 51 and n == 2:
            group = struct.unpack(">H", body[i + 4 : i + 6])[0]
        i += 4 + n
    return "hrr", group


def second_answer(s, buf):
    while True:
        rec = read_record(s, buf)
        if rec is None:
            return "eof"
        if rec[0] == 20:
            continue  # the server's ChangeCipherSpec (middlebox compatibility)
        if rec[0] == 22 and rec[1][:1] == b"\x02":
            return "hello"
        if rec[0] == 21 and len(rec[1]) >= 2:
            return f"alert={rec[1][1]}"
        return f"answer={bytes([rec[0]]).hex()}{rec[1][:8].hex()}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--proxy", type=int)
    ap.add_argument("--target")
    ap.add_argument("--direct")
    ap.add_argument("--sni1", required=True)
    ap.add_argument("--sni2")
    ap.add_argument("--no-sni2", action="store_true")
    ap.add_argument("--ccs", action="store_true")
    ap.add_argument("--split", action="store_true")
    ap.add_argument("--ahead", action="store_true")
    a = ap.parse_args()
    if (a.direct is None) == (a.proxy is None or a.target is None):
        ap.error("give either --proxy and --target, or --direct")
    sni2 = None if a.no_sni2 else a.sni2.encode()

    if a.direct is not None:
        host, _, port = a.direct.rpartition(":")
        s = socket.create_connection((host, int(port)), timeout=5)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    else:
        s, head = open_tunnel(a.proxy, a.target, 5, nodelay=True)
        if not head.startswith(b"HTTP/1.1 200"):
            print(f"connect={head[:12].decode(errors='replace')}")
            sys.exit(2)
    first = records(hello_msg(a.sni1.encode(), b""), 1)[0]

    def send_second(group, before=b""):
        ccs = b"\x14\x03\x03\x00\x01\x01" if a.ccs else b""
        recs = records(hello_msg(sni2, share_for(group)), 2 if a.split else 1)
        if a.split:
            s.sendall(before + ccs + recs[0][:3])
            time.sleep(0.2)
            s.sendall(recs[0][3:])
            time.sleep(0.2)
            s.sendall(recs[1])
        else:
            s.sendall(before + ccs + recs[0])

    buf = bytearray()
    if a.ahead:
        send_second(X25519, first)
        print(first_answer(s, buf)[0])
    else:
        s.sendall(first)
        word, group = first_answer(s, buf)
        print(word)
        if word == "hrr":
            send_second(group)
    print(second_answer(s, buf), flush=True)


if __name__ == "__main__":
    main()
