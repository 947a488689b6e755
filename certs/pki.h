/* SPDX-License-Identifier: Apache-2.0 */
/*
 * certs/pki.h - the small PKI of the control channel (`sluice pki`, docs/reference/cli.md): the
 * CA that signs the certificates with which the control plane and the proxies authenticate each
 * other over the network (mutual TLS, docs/reference/proxy.md §4.9), the leaves it issues, and
 * the certificate revocation list both sides check.
 *
 * A PKI lives in one directory (docs/reference/data.md):
 *   ca.pem, ca.key       the CA (ECDSA P-256, ten years; key 0600), made as certs/ca.h makes the
 *                        interception CA, with the subject "O=sluice, CN=sluice control channel
 *                        CA <8 hex digits>" — a different CA: trusting one never trusts the other
 *   crl.pem              the CRL (version 2, a CRL number, the CA's key identifier), signed again
 *                        at every revocation; its nextUpdate is the CA's notAfter, so that it
 *                        never goes stale between revocations
 *   proxy-NAME.pem/.key  a proxy's leaf and key (key 0600): serverAuth, its addresses and names
 *                        in the subjectAltName
 *   control-NAME.pem/.key  the control plane's leaf and key: clientAuth
 *   engine-NAME.pem/.key   a container engine's leaf and key (a Swarm node's Docker daemon,
 *                        docs/scale-lab.md): serverAuth, its addresses in the subjectAltName
 *   issued/SERIAL.pem    a copy of every leaf issued (what `sluice pki list` reads, and how a
 *                        serial is known to be this CA's)
 * Leaves are "O=sluice, OU=proxy|control|engine, CN=NAME", ECDSA P-256 keys of their own,
 * basicConstraints critical CA:FALSE, keyUsage critical digitalSignature, subject and authority
 * key identifiers, a random 128-bit serial, valid from one day back for `days` days (clamped
 * inside the CA's validity). Every file is written whole (temporary, sync, rename).
 *
 * Blocking file I/O: for the command line, never on a loop thread. Errors are one line for a
 * person in `err` (`errlen` bytes, may be 0), naming the file or the argument at fault.
 */
#ifndef SL_CERTS_PKI_H
#define SL_CERTS_PKI_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "base/err.h"

#define SL_PKI_CRL_FILE   "crl.pem"
#define SL_PKI_ISSUED_DIR "issued"
/* Most --ip plus --dns entries of one leaf. */
#define SL_PKI_SAN_MAX 16
/* Longest NAME, in characters. */
#define SL_PKI_NAME_MAX 64
/* Default and largest validity of a leaf, in days. */
#define SL_PKI_DAYS_DEFAULT 365
#define SL_PKI_DAYS_MAX     3650
/* A serial in hex: 128 bits at most, so 32 digits (leading zeros dropped). */
#define SL_PKI_SERIAL_HEX_MAX 40

enum sl_pki_kind {
    /* A proxy's admin listener: serverAuth. */
    SL_PKI_PROXY = 0,
    /* The control plane as the proxies' (and the engines') client: clientAuth. */
    SL_PKI_CONTROL,
    /* A container engine's API on another host (a Swarm node's dockerd --tlsverify, which
     * requires a client certificate of this CA: the control plane's): serverAuth. */
    SL_PKI_ENGINE,
};

/* What to issue. */
struct sl_pki_request {
    enum sl_pki_kind kind;
    /* 1-SL_PKI_NAME_MAX of A-Z a-z 0-9 '.' '_' '-', not starting with '.' or '-'. */
    const char *name;
    /* IP literals (IPv4 or IPv6 without brackets) and DNS names for the subjectAltName (proxy
     * and engine only; they need at least one of either). */
    const char *const *ips;
    size_t n_ips;
    const char *const *dns;
    size_t n_dns;
    /* Validity in days, 1 ... SL_PKI_DAYS_MAX; 0 takes SL_PKI_DAYS_DEFAULT. */
    unsigned days;
    /* Replace existing files of the same kind and name (the old leaf stays valid until it is
     * revoked or expires). */
    bool force;
};

/* One issued leaf, as `sluice pki list` shows it. */
struct sl_pki_entry {
    /* Uppercase hex, no leading zeros (as `openssl x509 -serial` prints it). */
    char serial[SL_PKI_SERIAL_HEX_MAX + 1];
    /* "proxy", "control" or "engine" (the OU). */
    char kind[16];
    char name[SL_PKI_NAME_MAX + 1];
    time_t not_after;
    bool revoked;
};

/* Creates the PKI in `dir` (made 0700 when missing; its parent must exist): the CA, an empty
 * CRL and the issued/ directory. Refuses (SL_EEXIST) when `dir` holds a CA already. Returns 0,
 * SL_EEXIST, SL_EIO, SL_ETOOBIG (path), SL_ENOMEM or SL_ECRYPTO. */
SL_MUST_CHECK int sl_pki_init(const char *dir, char *err, size_t errlen);

/* Issues a leaf with the CA of `dir` and writes `dir`/KIND-NAME.pem (0644), KIND-NAME.key
 * (0600) and issued/SERIAL.pem. `out_cert` (NULL for none, `cert_len` bytes) receives the path
 * of the certificate, `serial` (SL_PKI_SERIAL_HEX_MAX + 1 bytes, or NULL) its serial. Returns 0,
 * SL_EINVAL (a bad name, address, name list or number of days), SL_EEXIST (the files exist and
 * not `force`), SL_EIO, SL_ETOOBIG, SL_ENOMEM or SL_ECRYPTO. */
SL_MUST_CHECK int sl_pki_issue(const char *dir, const struct sl_pki_request *req, char *out_cert,
                               size_t cert_len, char *serial, char *err, size_t errlen);

/* Revokes `what`, a certificate file issued by the CA of `dir` or a serial in hex (as `pki list`
 * prints it, any case, colons allowed) of a leaf in issued/, and signs crl.pem again. `serial`
 * (SL_PKI_SERIAL_HEX_MAX + 1 bytes, or NULL) receives the serial revoked. Returns 0, SL_EINVAL
 * (not a certificate of this CA, not a serial), SL_ENOTFOUND (no leaf with that serial),
 * SL_EEXIST (revoked already), SL_EIO, SL_ENOMEM or SL_ECRYPTO. */
SL_MUST_CHECK int sl_pki_revoke(const char *dir, const char *what, char *serial, char *err,
                                size_t errlen);

/* Every leaf in issued/, sorted by kind, name and notAfter, in `*out` (sl_free() it; NULL when
 * there is none) and its count in `*n`. Returns 0, SL_EIO, SL_EINVAL (a file that is not a
 * certificate), SL_ENOMEM or SL_ECRYPTO. */
SL_MUST_CHECK int sl_pki_list(const char *dir, struct sl_pki_entry **out, size_t *n, char *err,
                              size_t errlen);

#endif
