/*
 * placer.c - a keyed sender that writes its own first sealed record, for
 * the tests that hold a service (weir --serve) to its target record ('P')
 * (tests/cli/serve_hostile.sh).  It uses weir's own greeting, handshake
 * and record layer, so the record it sends opens, and only what is inside
 * it is wrong.
 *
 *   placer PORT KEYFILE MODE [NAME]
 *       Connect to 127.0.0.1:PORT, read the receiver's greeting (print
 *       "serve" or "not serve" from its bit 9), greet as a keyed sender,
 *       finish the handshake with the first key of KEYFILE, then send one
 *       sealed record: a stream header followed by what MODE says, with
 *       NAME (default "one") as the target's name:
 *         name       a 'P' record holding NAME as it is (any bytes, and a
 *                    length byte of strlen(NAME), even past 63)
 *         len N      a 'P' record holding NAME whose length byte says N
 *         pad        NAME, and a non-zero byte after it
 *         reserved   NAME, and a non-zero byte among bytes 10 to 15
 *         nul        NAME, a NUL, then "x", the length counting all of it
 *         sum        NAME with a checksum that does not match
 *         twice      two 'P' records holding NAME
 *         before     the 'P' record before the header instead of after it
 *         split      the header alone in the first record, the 'P' record
 *                    in a second one
 *         none       the header alone
 *       Then wait (10 s at most) for what the receiver does, and print
 *       "refused: MESSAGE" (an 'S' record), "closed" or "silent"; any other
 *       record is printed as "record T".
 *
 * Every wait is bounded; a failure of its own part exits 2.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "crypto/keyfile.h"
#include "crypto/tls.h"
#include "format/codec.h"
#include "link/session.h"
#include "transport/transport.h"
#include "xxhash.h"

#define WAIT_MS 10000

static void die(const char *what, const char *why)
{
    fprintf(stderr, "placer: %s: %s\n", what, why);
    exit(2);
}

/* A 'P' record holding name (n bytes), its length byte len, resealed. */
static size_t place(unsigned char *dst, const char *name, size_t n, unsigned len)
{
    memset(dst, 0, CODEC_PLACE_SIZE);
    codec_place(dst, "");
    dst[9] = (unsigned char)len;
    memcpy(dst + 16, name, n > 64 ? 64 : n);
    codec_put64(dst + CODEC_PLACE_SIZE - 8, XXH3_64bits(dst, CODEC_PLACE_SIZE - 8));
    return CODEC_PLACE_SIZE;
}

int main(int argc, char **argv)
{
    if (argc < 4)
        die("usage", "placer PORT KEYFILE MODE [NAME]");
    const char *mode = argv[3];
    const char *name = argc > 4 && strcmp(mode, "len") != 0 ? argv[4]
                       : argc > 5                           ? argv[5]
                                                            : "one";
    size_t n = strlen(name);
    struct weir_error err;
    struct keyring ring;
    const struct key *key;
    struct tls_context *ctx;
    if (keyfile_load(&ring, argv[2], NULL, &key, &err) ||
        tls_context_new(&ctx, &ring, key, false, &err))
        die("key", err.msg);

    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1]))};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sin, sizeof sin) != 0)
        die("connect", strerror(errno));
    struct transport t;
    transport_tcp(&t, fd, "service");
    atomic_bool stop = false;
    struct session_out s;
    session_out_init(&s, &t, true, true, false, 1 << 20);
    if (session_read_greeting(&s, WAIT_MS / 1000.0, &stop, &err))
        die("greeting", err.msg);
    printf("%s\n", s.peer_features & CODEC_FEATURE_SERVE ? "serve" : "not serve");
    fflush(stdout);
    if (session_greet_keyed(&s, WAIT_MS, &stop, &err) ||
        session_handshake(&t, ctx, WAIT_MS / 1000.0, 0, &stop, NULL, NULL, 0, &err) != 0)
        die("handshake", err.msg);

    unsigned char rec[CODEC_HEADER_SIZE + 2 * CODEC_PLACE_SIZE], p[CODEC_PLACE_SIZE];
    size_t len = 0, second = 0;
    size_t h = codec_header(rec, 1 << 20, CODEC_HEADER_SEALED, CODEC_VERSION);
    if (strcmp(mode, "len") == 0) {
        len = h + place(rec + h, name, n, (unsigned)atoi(argc > 4 ? argv[4] : "0"));
    } else if (strcmp(mode, "name") == 0) {
        len = h + place(rec + h, name, n, (unsigned)n);
    } else if (strcmp(mode, "pad") == 0) {
        place(p, name, n, (unsigned)n);
        p[16 + n] = 'x';
        codec_put64(p + CODEC_PLACE_SIZE - 8, XXH3_64bits(p, CODEC_PLACE_SIZE - 8));
        memcpy(rec + h, p, sizeof p);
        len = h + sizeof p;
    } else if (strcmp(mode, "reserved") == 0) {
        place(p, name, n, (unsigned)n);
        p[12] = 1;
        codec_put64(p + CODEC_PLACE_SIZE - 8, XXH3_64bits(p, CODEC_PLACE_SIZE - 8));
        memcpy(rec + h, p, sizeof p);
        len = h + sizeof p;
    } else if (strcmp(mode, "nul") == 0) {
        char with[80];
        snprintf(with, sizeof with, "%s", name);
        size_t m = strlen(with);
        with[m] = 0;
        with[m + 1] = 'x';
        len = h + place(rec + h, with, m + 2, (unsigned)(m + 2));
    } else if (strcmp(mode, "sum") == 0) {
        len = h + place(rec + h, name, n, (unsigned)n);
        rec[len - 1] ^= 1;
    } else if (strcmp(mode, "twice") == 0) {
        len = h + place(rec + h, name, n, (unsigned)n);
        len += place(rec + len, name, n, (unsigned)n);
    } else if (strcmp(mode, "before") == 0) {
        memmove(rec + CODEC_PLACE_SIZE, rec, h);
        place(rec, name, n, (unsigned)n);
        len = h + CODEC_PLACE_SIZE;
    } else if (strcmp(mode, "split") == 0) {
        len = h;
        second = place(p, name, n, (unsigned)n);
    } else if (strcmp(mode, "none") == 0) {
        len = h;
    } else {
        die("mode", mode);
    }
    if (transport_write_all(&t, rec, len, WAIT_MS, &stop) ||
        (second && transport_write_all(&t, p, second, WAIT_MS, &stop)))
        die("write", strerror(errno));

    struct codec_record r;
    unsigned char raw[CODEC_RECORD_MAX];
    size_t got;
    bool eof;
    if (session_read_record(&t, WAIT_MS, &stop, &r, raw, &got, &eof, &err) == 0) {
        if (r.type == 'S')
            printf("refused: %s\n", r.msg);
        else
            printf("record %c\n", r.type);
    } else {
        int e = errno;
        fprintf(stderr, "placer: %s\n", eof ? "end of connection" : err.msg);
        printf("%s\n", !eof && e == ETIMEDOUT ? "silent" : "closed");
    }
    transport_close(&t, false, NULL, &err);
    tls_context_free(ctx);
    keyfile_free(&ring);
    return 0;
}
