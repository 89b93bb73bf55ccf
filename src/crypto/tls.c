/* tls.c - see tls.h. */
#include "crypto/tls.h"

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "crypto/secret.h"

#define SUITE "TLS_AES_128_GCM_SHA256"
#define EXPORT_LABEL "EXPORTER-weir-records-1"

struct tls_context {
    SSL_CTX *ctx;
    const struct keyring *ring;   /* the receiver's keys */
    const struct key *key;        /* the sender's key; a receiver's only one (--key-id) */
    struct key *decoy;            /* the receiver's answer to an unknown identity: a
                                   * random key in secret memory, so that an unknown
                                   * identity fails exactly as a wrong key does */
    bool server;
};

struct tls_handshake {
    SSL *ssl;
    BIO *in, *out;                /* memory buffers: what arrived, what to send */
    struct tls_context *c;
    char identity[KEY_ID_MAX + 1];
    bool unknown;                 /* the server did not know the identity */
    bool certificate;             /* the peer offered a certificate (refused) */
    bool excluded;                /* the server: a key of the file, not the one it takes */
    /* the peer's TLS record headers, checked as TLS consumes them
     * (check_records): a copy of what is fed and not yet consumed */
    unsigned char held[65536];
    size_t held_len;
    unsigned char hdr[5];
    size_t hdr_have, body_left;
    unsigned records;
};

/* TLS 1.3 ignores a record header's legacy version, so a changed one would
 * go unnoticed; weir wants every byte to mean one thing.  The peer's first
 * record must say 0x0301 (a ClientHello) or 0x0303, every later one 0x0303,
 * and only handshake, change_cipher_spec, alert and application_data
 * records of at most 2^14 + 256 bytes may come. */
static int check_records(struct tls_handshake *h, const unsigned char *in, size_t n)
{
    for (size_t i = 0; i < n;) {
        if (h->body_left > 0) {
            size_t take = n - i < h->body_left ? n - i : h->body_left;
            h->body_left -= take;
            i += take;
            continue;
        }
        h->hdr[h->hdr_have++] = in[i++];
        if (h->hdr_have < 5)
            continue;
        unsigned type = h->hdr[0], version = (unsigned)h->hdr[1] << 8 | h->hdr[2];
        size_t len = (size_t)h->hdr[3] << 8 | h->hdr[4];
        bool first = h->records++ == 0;
        if ((type < 20 || type > 23) || len == 0 || len > 16384 + 256 ||
            !(version == 0x0303 || (first && h->c->server && version == 0x0301)))
            return -1;
        h->hdr_have = 0;
        h->body_left = len;
    }
    return 0;
}

/* The PSK as an SSL_SESSION, the way TLS 1.3 external PSKs are given to
 * OpenSSL: the key, the suite (whose hash is SHA-256), and TLS 1.3. */
static SSL_SESSION *psk_session(SSL *ssl, const struct key *k)
{
    static const unsigned char aes128gcm[2] = {0x13, 0x01};
    const SSL_CIPHER *cipher = SSL_CIPHER_find(ssl, aes128gcm);
    SSL_SESSION *s = SSL_SESSION_new();
    if (!cipher || !s || !SSL_SESSION_set1_master_key(s, k->secret, KEY_BYTES) ||
        !SSL_SESSION_set_cipher(s, cipher) ||
        !SSL_SESSION_set_protocol_version(s, TLS1_3_VERSION)) {
        SSL_SESSION_free(s);
        return NULL;
    }
    return s;
}

static int client_psk(SSL *ssl, const EVP_MD *md, const unsigned char **id, size_t *idlen,
                      SSL_SESSION **sess)
{
    struct tls_handshake *h = SSL_get_app_data(ssl);
    const struct key *k = h->c->key;
    /* by name: after a HelloRetryRequest OpenSSL passes a fetched digest,
     * not the one EVP_sha256() returns */
    if (md && !EVP_MD_is_a(md, "SHA256")) {
        *sess = NULL;   /* the server picked another hash: no PSK for it */
        return 1;
    }
    *sess = psk_session(ssl, k);
    if (!*sess)
        return 0;
    *id = (const unsigned char *)k->id;
    *idlen = strlen(k->id);
    snprintf(h->identity, sizeof h->identity, "%s", k->id);
    return 1;
}

static int server_psk(SSL *ssl, const unsigned char *id, size_t idlen, SSL_SESSION **sess)
{
    struct tls_handshake *h = SSL_get_app_data(ssl);
    const struct key *k = keyfile_find(h->c->ring, (const char *)id, idlen);
    *sess = NULL;
    if (k && h->c->key && k != h->c->key) {
        h->excluded = true;   /* in the file, but this listener takes only its --key-id */
        k = NULL;
    }
    if (!k) {
        /* an unknown identity: the handshake goes on under the decoy, whose
         * binder cannot verify, so the peer sees the alert a wrong key gets
         * and cannot tell which identities exist; the log names who was
         * refused (only what an identity may contain) */
        h->unknown = true;
        size_t n = 0;
        for (size_t i = 0; i < idlen && n < KEY_ID_MAX; i++)
            h->identity[n++] = keyfile_valid_id((const char *)id + i, 1) ? (char)id[i] : '?';
        h->identity[n] = '\0';
        k = h->c->decoy;
    } else {
        snprintf(h->identity, sizeof h->identity, "%s", k->id);
    }
    *sess = psk_session(ssl, k);
    return *sess ? 1 : 0;
}

/* Only the key authenticates: a certificate, whoever signed it, ends the
 * handshake on the spot (the client would otherwise accept any, since
 * OpenSSL's default is not to verify). */
static int refuse_certificate(int preverified, X509_STORE_CTX *store)
{
    (void)preverified;
    SSL *ssl = X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx());
    struct tls_handshake *h = ssl ? SSL_get_app_data(ssl) : NULL;
    if (h)
        h->certificate = true;
    return 0;
}

/* A finished handshake counts only if the external PSK authenticated it:
 * the session is the PSK's (resumed from it), it names a key this end
 * knows, and no certificate took part. */
static bool proved_by_key(const struct tls_handshake *h)
{
    return SSL_session_reused(h->ssl) == 1 && SSL_get0_peer_certificate(h->ssl) == NULL &&
           !h->certificate && !h->unknown && h->identity[0] != '\0';
}

int tls_context_new(struct tls_context **out, const struct keyring *ring, const struct key *key,
                    bool server, struct weir_error *err)
{
    struct tls_context *c = OPENSSL_zalloc(sizeof *c);
    SSL_CTX *ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
    if (!c || !ctx || !SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) ||
        !SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) ||
        !SSL_CTX_set_ciphersuites(ctx, SUITE) || !SSL_CTX_set_num_tickets(ctx, 0)) {
        SSL_CTX_free(ctx);
        OPENSSL_free(c);
        return error_set(err, WEIR_EXIT_INTERNAL, "encryption: cannot set up TLS 1.3");
    }
    /* no session resumption, no early data, (EC)DHE always: psk_ke stays off */
    SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_max_early_data(ctx, 0);
    if (server) {
        SSL_CTX_set_psk_find_session_callback(ctx, server_psk);
    } else {
        SSL_CTX_set_psk_use_session_callback(ctx, client_psk);
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, refuse_certificate);
    }
    if (server) {
        c->decoy = secret_alloc(sizeof *c->decoy);
        if (!c->decoy || RAND_priv_bytes(c->decoy->secret, KEY_BYTES) != 1) {
            secret_free(c->decoy, sizeof *c->decoy);
            SSL_CTX_free(ctx);
            OPENSSL_free(c);
            return error_set(err, WEIR_EXIT_INTERNAL, "encryption: no random decoy key");
        }
    }
    c->ctx = ctx;
    c->ring = ring;
    c->key = key;
    c->server = server;
    *out = c;
    return 0;
}

void tls_context_free(struct tls_context *c)
{
    if (!c)
        return;
    SSL_CTX_free(c->ctx);
    secret_free(c->decoy, sizeof *c->decoy);
    OPENSSL_free(c);
}

int tls_handshake_new(struct tls_handshake **out, struct tls_context *c,
                      struct weir_error *err)
{
    struct tls_handshake *h = OPENSSL_zalloc(sizeof *h);
    SSL *ssl = SSL_new(c->ctx);
    BIO *in = BIO_new(BIO_s_mem()), *outb = BIO_new(BIO_s_mem());
    if (!h || !ssl || !in || !outb) {
        SSL_free(ssl);
        BIO_free(in);
        BIO_free(outb);
        OPENSSL_free(h);
        return error_set(err, WEIR_EXIT_INTERNAL, "encryption: out of memory");
    }
    SSL_set_bio(ssl, in, outb);
    SSL_set_app_data(ssl, h);
    if (c->server)
        SSL_set_accept_state(ssl);
    else
        SSL_set_connect_state(ssl);
    h->ssl = ssl;
    h->in = in;
    h->out = outb;
    h->c = c;
    *out = h;
    return 0;
}

void tls_handshake_free(struct tls_handshake *h)
{
    if (!h)
        return;
    SSL_free(h->ssl);   /* frees both BIOs */
    OPENSSL_free(h);
}

/* Why a handshake failed, in words a user can act on. */
static int failed(struct tls_handshake *h, struct weir_error *err)
{
    unsigned long e = ERR_peek_last_error();
    int reason = ERR_GET_REASON(e);
    const char *why = ERR_reason_error_string(e);
    ERR_clear_error();
    if (!h->c->server && h->certificate)
        return error_set(err, WEIR_EXIT_NETWORK, "the listener did not prove that it holds the "
                         "key '%s' (it offered a certificate instead): refusing to send",
                         h->c->key->id);
    if (h->c->server && h->excluded)
        return error_set(err, WEIR_EXIT_NETWORK, "the sender's key '%s' is not the one this "
                         "listener takes (--key-id %s)", h->identity, h->c->key->id);
    if (h->c->server && !h->unknown && !h->identity[0])
        return error_set(err, WEIR_EXIT_NETWORK, "it offered no key (a TLS client without "
                         "weir's pre-shared key, not a keyed weir)");
    if (h->c->server && h->unknown)
        return error_set(err, WEIR_EXIT_NETWORK, "the sender's key '%s' is not in the key file",
                         h->identity);
    if (reason == SSL_R_BINDER_DOES_NOT_VERIFY || reason == SSL_R_TLSV1_ALERT_DECRYPT_ERROR ||
        reason == SSL_R_DECRYPTION_FAILED_OR_BAD_RECORD_MAC ||
        reason == SSL_R_TLSV1_ALERT_DECRYPTION_FAILED ||
        reason == SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE || reason == SSL_R_NO_SHARED_CIPHER ||
        reason == SSL_R_SSLV3_ALERT_ILLEGAL_PARAMETER)
        return error_set(err, WEIR_EXIT_NETWORK, "the keys do not match (identity '%s'; a "
                         "wrong key, or one the other end does not have)",
                         h->identity[0] ? h->identity : "?");
    return error_set(err, WEIR_EXIT_NETWORK, "encrypted handshake failed: %s",
                     why ? why : "unknown reason");
}

int tls_step(struct tls_handshake *h, const unsigned char *in, size_t n, unsigned char *out,
             size_t *outlen, struct weir_error *err)
{
    if (h->held_len + n > sizeof h->held)
        return error_set(err, WEIR_EXIT_NETWORK, "handshake messages too long"), TLS_FAILED;
    memcpy(h->held + h->held_len, in, n);
    h->held_len += n;
    if (n > 0 && BIO_write(h->in, in, (int)n) != (int)n)
        return error_set(err, WEIR_EXIT_INTERNAL, "encryption: out of memory"), TLS_FAILED;
    int r = SSL_do_handshake(h->ssl);
    int rc = r == 1 ? TLS_DONE : TLS_WANT;
    if (rc == TLS_DONE && !proved_by_key(h)) {
        ERR_clear_error();
        *outlen = 0;
        return error_set(err, WEIR_EXIT_NETWORK, "the %s did not prove that it holds the key",
                         h->c->server ? "sender" : "listener"), TLS_FAILED;
    }
    if (r != 1) {
        int e = SSL_get_error(h->ssl, r);
        if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
            rc = TLS_FAILED;
    }
    /* only what TLS took is TLS: what is left are weir's records */
    size_t consumed = h->held_len - (size_t)BIO_pending(h->in);
    if (rc != TLS_FAILED && check_records(h, h->held, consumed)) {
        ERR_clear_error();
        return error_set(err, WEIR_EXIT_NETWORK, "malformed handshake record"), TLS_FAILED;
    }
    memmove(h->held, h->held + consumed, h->held_len - consumed);
    h->held_len -= consumed;
    /* what to send, even after a failure: it may be an alert saying why */
    size_t cap = *outlen, got = 0;
    while (BIO_pending(h->out) > 0 && got < cap) {
        int k = BIO_read(h->out, out + got, (int)(cap - got));
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    *outlen = got;
    if (rc == TLS_FAILED)
        return failed(h, err), TLS_FAILED;
    if (BIO_pending(h->out) > 0)
        return error_set(err, WEIR_EXIT_INTERNAL, "encryption: a handshake message too long"),
               TLS_FAILED;
    return rc;
}

ssize_t tls_leftover(struct tls_handshake *h, unsigned char *buf, size_t cap)
{
    if ((size_t)BIO_pending(h->in) > cap)
        return -1;
    size_t got = 0;
    while (BIO_pending(h->in) > 0 && got < cap) {
        int k = BIO_read(h->in, buf + got, (int)(cap - got));
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    return (ssize_t)got;
}

const char *tls_identity(const struct tls_handshake *h)
{
    return h->identity;
}

int tls_export(struct tls_handshake *h, struct seal_session *s, bool server,
               struct weir_error *err)
{
    /* both ends compute the same bytes: the client's half is to_receiver;
     * they land straight in s (secret memory), not on the stack */
    (void)server;
    _Static_assert(sizeof s->to_receiver == SEAL_BASE_BYTES + SEAL_IV_BYTES &&
                   offsetof(struct seal_session, to_sender) == sizeof s->to_receiver,
                   "the exporter's 88 bytes are two seal_directions, back to back");
    if (SSL_export_keying_material(h->ssl, (unsigned char *)&s->to_receiver,
                                   2 * (SEAL_BASE_BYTES + SEAL_IV_BYTES), EXPORT_LABEL,
                                   strlen(EXPORT_LABEL), NULL, 0, 0) != 1) {
        ERR_clear_error();
        return error_set(err, WEIR_EXIT_INTERNAL, "encryption: no keys from the handshake");
    }
    return 0;
}

int tls_export_bytes(struct tls_handshake *h, const char *label, unsigned char *out,
                     size_t len, struct weir_error *err)
{
    if (SSL_export_keying_material(h->ssl, out, len, label, strlen(label), NULL, 0, 0) != 1) {
        ERR_clear_error();
        return error_set(err, WEIR_EXIT_INTERNAL, "encryption: no secret from the handshake");
    }
    return 0;
}
