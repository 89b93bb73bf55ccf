/*
 * impostor.c - a peer that greets as a keyed weir but does not hold the
 * key, for the tests that keep the keyed handshake honest
 * (tests/cli/key_impostor.sh).  It uses weir's own codec for the greeting
 * and OpenSSL for everything else, and reports on standard output what the
 * weir it faced let it do.
 *
 *   impostor listen [sender]
 *       Listen on 127.0.0.1, port 0, and print "port N".  Take one
 *       connection, greet it as a keyed receiver (with the link-test bit),
 *       read its greeting, then finish TLS 1.3 as a server with a
 *       self-signed certificate made on the spot and no pre-shared key.
 *       Prints "peer ROLE", then "handshake complete" or
 *       "handshake failed: REASON", then (when complete) "received N bytes"
 *       of what the peer sent after the handshake.  With "sender": greet
 *       the connection as a keyed sender instead (a weir that dialled to
 *       receive, as a pull over ssh does) and run TLS as a client that
 *       offers no key and takes any certificate.
 *   impostor dial HOST PORT
 *       Connect, read the receiver's greeting, greet as a keyed sender and
 *       run TLS 1.3 as a client that offers no key and takes any
 *       certificate.  Prints "handshake complete" or "handshake failed".
 *   impostor probe HOST PORT IDENTITY HEX
 *       Connect as a keyed sender and offer the external PSK IDENTITY with
 *       the 32-byte key HEX (64 hex digits), as weir does.  Prints
 *       "handshake complete" or "alert DESCRIPTION" (the alert the
 *       listener sent), so that a test can compare what a stranger learns.
 *
 * Every wait is bounded (10 s); any failure to do its own part exits 2.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "format/codec.h"

#define WAIT_MS 10000

static void die(const char *what)
{
    fprintf(stderr, "impostor: %s: %s\n", what, errno ? strerror(errno) : "failed");
    ERR_print_errors_fp(stderr);
    exit(2);
}

/* Read exactly n bytes within WAIT_MS; 0, or -1 (the peer closed or was
 * silent). */
static int read_exact(int fd, unsigned char *buf, size_t n)
{
    size_t have = 0;
    while (have < n) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, WAIT_MS) <= 0)
            return -1;
        ssize_t got = read(fd, buf + have, n - have);
        if (got <= 0)
            return -1;
        have += (size_t)got;
    }
    return 0;
}

static void write_exact(int fd, const unsigned char *buf, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, buf, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            die("write");
        buf += w;
        n -= (size_t)w;
    }
}

static void greet(int fd, enum codec_role role)
{
    unsigned char g[CODEC_GREETING_SIZE];
    uint32_t features = CODEC_FEATURES | CODEC_FEATURES_KEYED;
    if (role == CODEC_ROLE_RECEIVER)
        features |= CODEC_FEATURE_LINKTEST;
    codec_greeting(g, role, features);
    write_exact(fd, g, sizeof g);
}

/* The peer's greeting: its role, or 0 when it sent none. */
static int hear_greeting(int fd)
{
    unsigned char g[CODEC_GREETING_SIZE];
    struct codec_record r;
    char why[96];
    if (read_exact(fd, g, sizeof g) != 0 ||
        codec_parse_record(g, sizeof g, &r, why, sizeof why) != 0 || r.type != 'G')
        return 0;
    return r.role;
}

/* A self-signed certificate for a key made on the spot: what an impostor
 * that holds no weir key has instead. */
static void self_signed(SSL_CTX *ctx)
{
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *x = X509_new();
    if (!key || !x)
        die("a key for the certificate");
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), 0);
    X509_gmtime_adj(X509_getm_notAfter(x), 3600);
    X509_set_pubkey(x, key);
    X509_NAME *name = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"weir", -1,
                               -1, 0);
    X509_set_issuer_name(x, name);
    if (!X509_sign(x, key, EVP_sha256()) || SSL_CTX_use_certificate(ctx, x) != 1 ||
        SSL_CTX_use_PrivateKey(ctx, key) != 1)
        die("the self-signed certificate");
    X509_free(x);
    EVP_PKEY_free(key);
}

static SSL_CTX *context(int server)
{
    SSL_CTX *ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
    if (!ctx || !SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) ||
        !SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256"))
        die("TLS context");
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    return ctx;
}

/* The alert received, as the info callback saw it. */
static char alert_seen[64];

static void watch_alerts(const SSL *ssl, int where, int ret)
{
    (void)ssl;
    if ((where & SSL_CB_READ_ALERT) && !alert_seen[0])
        snprintf(alert_seen, sizeof alert_seen, "%s", SSL_alert_desc_string_long(ret));
}

/* Run the handshake on fd; true when it completed. */
static int shake(SSL *ssl, int fd, int server)
{
    SSL_set_fd(ssl, fd);
    SSL_set_info_callback(ssl, watch_alerts);
    int rc = server ? SSL_accept(ssl) : SSL_connect(ssl);
    if (rc == 1) {
        printf("handshake complete\n");
        return 1;
    }
    unsigned long e = ERR_peek_last_error();
    char reason[160];
    ERR_error_string_n(e, reason, sizeof reason);
    if (alert_seen[0])
        printf("alert %s\n", alert_seen);
    printf("handshake failed: %s\n", e ? reason : "the peer closed");
    ERR_clear_error();
    return 0;
}

static int connect_to(const char *host, const char *port)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai;
    if (getaddrinfo(host, port, &hints, &ai) != 0)
        die("getaddrinfo");
    int fd = socket(ai->ai_family, ai->ai_socktype, 0);
    if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen) != 0)
        die("connect");
    freeaddrinfo(ai);
    return fd;
}

static int serve(int as_sender)
{
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(l, 4) != 0 ||
        getsockname(l, (struct sockaddr *)&sa, &len) != 0)
        die("listen");
    printf("port %d\n", ntohs(sa.sin_port));
    fflush(stdout);
    struct pollfd p = {.fd = l, .events = POLLIN};
    if (poll(&p, 1, 60000) <= 0)
        die("nobody came");
    int fd = accept(l, NULL, NULL);
    if (fd < 0)
        die("accept");
    greet(fd, as_sender ? CODEC_ROLE_SENDER : CODEC_ROLE_RECEIVER);
    int role = hear_greeting(fd);
    printf("peer %c\n", role ? role : '-');
    SSL_CTX *ctx = context(!as_sender);
    if (!as_sender)
        self_signed(ctx);
    SSL *ssl = SSL_new(ctx);
    if (!ssl)
        die("SSL_new");
    if (shake(ssl, fd, !as_sender)) {
        /* what the peer sends next: weir's sealed records, if it trusted us */
        unsigned long long total = 0;
        unsigned char buf[65536];
        struct pollfd q = {.fd = fd, .events = POLLIN};
        while (poll(&q, 1, 3000) > 0) {
            ssize_t got = read(fd, buf, sizeof buf);
            if (got <= 0)
                break;
            total += (unsigned long long)got;
        }
        printf("received %llu bytes\n", total);
    }
    fflush(stdout);
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    close(fd);
    close(l);
    return 0;
}

static int dial(const char *host, const char *port)
{
    int fd = connect_to(host, port);
    int role = hear_greeting(fd);
    printf("peer %c\n", role ? role : '-');
    greet(fd, CODEC_ROLE_SENDER);
    SSL_CTX *ctx = context(0);
    SSL *ssl = SSL_new(ctx);
    if (!ssl)
        die("SSL_new");
    shake(ssl, fd, 0);
    fflush(stdout);
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    close(fd);
    return 0;
}

/* probe: the key and identity weir's own client would offer */
static unsigned char probe_key[32];
static const char *probe_id;

static int probe_psk(SSL *ssl, const EVP_MD *md, const unsigned char **id, size_t *idlen,
                     SSL_SESSION **sess)
{
    static const unsigned char aes128gcm[2] = {0x13, 0x01};
    *sess = NULL;
    if (md && !EVP_MD_is_a(md, "SHA256"))
        return 1;
    SSL_SESSION *s = SSL_SESSION_new();
    const SSL_CIPHER *cipher = SSL_CIPHER_find(ssl, aes128gcm);
    if (!s || !cipher || !SSL_SESSION_set1_master_key(s, probe_key, sizeof probe_key) ||
        !SSL_SESSION_set_cipher(s, cipher) ||
        !SSL_SESSION_set_protocol_version(s, TLS1_3_VERSION)) {
        SSL_SESSION_free(s);
        return 0;
    }
    *sess = s;
    *id = (const unsigned char *)probe_id;
    *idlen = strlen(probe_id);
    return 1;
}

static int probe(const char *host, const char *port, const char *id, const char *hex)
{
    if (strlen(hex) != 64)
        die("the key must be 64 hex digits");
    for (int i = 0; i < 32; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1)
            die("the key must be 64 hex digits");
        probe_key[i] = (unsigned char)v;
    }
    probe_id = id;
    int fd = connect_to(host, port);
    hear_greeting(fd);
    greet(fd, CODEC_ROLE_SENDER);
    SSL_CTX *ctx = context(0);
    SSL *ssl = SSL_new(ctx);
    if (!ssl)
        die("SSL_new");
    SSL_set_psk_use_session_callback(ssl, probe_psk);
    shake(ssl, fd, 0);
    fflush(stdout);
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    close(fd);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc >= 2 && strcmp(argv[1], "listen") == 0)
        return serve(argc == 3 && strcmp(argv[2], "sender") == 0);
    if (argc == 4 && strcmp(argv[1], "dial") == 0)
        return dial(argv[2], argv[3]);
    if (argc == 6 && strcmp(argv[1], "probe") == 0)
        return probe(argv[2], argv[3], argv[4], argv[5]);
    fprintf(stderr, "usage: impostor listen [sender] | dial HOST PORT | probe HOST PORT ID HEX\n");
    return 2;
}
