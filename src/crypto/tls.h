/*
 * tls.h - the handshake of an encrypted connection: TLS 1.3 with an
 * external pre-shared key (the key file's) in PSK-with-(EC)DHE mode, from
 * OpenSSL.  It authenticates both ends by the key, gives forward secrecy,
 * and yields the keys of weir's own record layer (seal.h) through the
 * exporter; then the connection leaves TLS at one explicit point.
 *
 * Contract: a struct tls_context is made once per engine, from the loaded
 * keys, and is read-only afterwards.  A struct tls_handshake belongs to the
 * one thread that drives it (a writer for the sender, the reader while it
 * admits for the receiver).  The handshake runs on memory buffers: the
 * caller moves bytes between the socket and tls_step(), so a listener can
 * run many at once without blocking on any.  When tls_step() says
 * TLS_DONE, the bytes the peer sent after its last handshake message are
 * the first of weir's records: tls_leftover() hands them over, and TLS is
 * not used again on the connection.
 *
 * Pinned: TLS 1.3 only, TLS_AES_128_GCM_SHA256 only, (EC)DHE always (no
 * psk_ke), no session tickets, no certificates, no early data.
 */
#ifndef WEIR_TLS_H
#define WEIR_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "crypto/keyfile.h"
#include "crypto/seal.h"
#include "weir/error.h"

struct tls_context;
struct tls_handshake;

/* The sender (client) uses key; the receiver (server) accepts any key of
 * the ring, or only key when it is not NULL (--key-id).  Both stay owned
 * by the caller and must outlive the context. */
int tls_context_new(struct tls_context **out, const struct keyring *ring, const struct key *key,
                    bool server, struct weir_error *err);
void tls_context_free(struct tls_context *c);

int tls_handshake_new(struct tls_handshake **out, struct tls_context *c,
                      struct weir_error *err);
void tls_handshake_free(struct tls_handshake *h);

enum { TLS_WANT = 0, TLS_DONE = 1, TLS_FAILED = -1 };
/* Feed what arrived (in, n; may be 0 bytes), advance the handshake, and
 * append what must be sent to out (at most *outlen bytes, updated).
 * TLS_FAILED fills *err with why ("the keys do not match"). */
int tls_step(struct tls_handshake *h, const unsigned char *in, size_t n, unsigned char *out,
             size_t *outlen, struct weir_error *err);
/* After TLS_DONE: the bytes that arrived after the handshake, moved into
 * buf; their number, or -1 when there are more than cap (a part of them
 * would leave a record cut short: the caller reads no more than it keeps). */
ssize_t tls_leftover(struct tls_handshake *h, unsigned char *buf, size_t cap);
/* After TLS_DONE: the identity of the key used. */
const char *tls_identity(const struct tls_handshake *h);
/* After TLS_DONE: the record keys of both directions, from the exporter. */
int tls_export(struct tls_handshake *h, struct seal_session *s, bool server,
               struct weir_error *err);
/* After TLS_DONE: len bytes from the exporter under a label of the
 * caller's (a link test's secret: linktest.h), which both ends compute
 * alike and which are independent of the record keys. */
int tls_export_bytes(struct tls_handshake *h, const char *label, unsigned char *out,
                     size_t len, struct weir_error *err);

#endif
