/*
 * joiner.c - a fake weir sender (without a key) that spreads a transfer
 * over several connections (--streams) and does not follow the script,
 * for tests/cli/streams_hostile.sh.  It uses weir's own codec for every
 * record and chunk header, and says on standard output what the receiver
 * it faced did.
 *
 *   joiner lead HOST PORT [HOLD]
 *       Greet as a sender that spreads (CODEC_FEATURE_STREAMS), send a
 *       stream header, read the receiver's 'N' and print "token HEX".
 *       Then hold the connection up to HOLD seconds (default 10), reading
 *       what the receiver says, and print "answer CODE MSG" for an 'S',
 *       or "closed" when it ends the connection.
 *   joiner join HOST PORT TOKENHEX INDEX COUNT [VARIANT]
 *       Greet as a spreading sender and send 'J' (TOKENHEX, INDEX, COUNT:
 *       the bytes as given, even where the format forbids them).  Prints
 *       "joined" (the same 'J' came back), "refused: MSG" (an 'S'),
 *       "closed", or "other X".  VARIANT: "nofeature" greets without the
 *       streams bit; "badsum" spoils the record's checksum; "header"
 *       sends a stream header instead of the 'J'.
 *   joiner run HOST PORT STREAM COUNT PLAN [CHUNK]
 *       The whole sender: STREAM is a weir stream (its header first, as
 *       "weir --streams 1" sends it after its greeting).  The lead sends
 *       the header, prints "token HEX", and (when the environment's
 *       JOINER_GO names a file) waits up to 20 s for that file before the
 *       COUNT - 1 others join.  The rest of the stream goes as chunks of
 *       CHUNK bytes (default 65536), chunk i on connection i % COUNT, as
 *       PLAN says:
 *         honest    every chunk, in order
 *         gapclose  chunk 1 never sent; every connection then ends
 *         gaphold   chunk 1 never sent; every connection stays open
 *         stall     each connection sends one chunk far beyond any window
 *                   and none sends chunk 0; they stay open
 *         huge      after chunk 0, connection 1 sends a chunk header whose
 *                   length is 0xffffffff
 *         zero      the same with a length of 0
 *         backward  connection 1 sends chunk 3 and then chunk 1
 *         dup       chunk 1 goes on connection 0 as well as on 1
 *         cut       connection 1 ends in the middle of its first chunk
 *         tailjunk  every chunk, then one more (the next number) of junk
 *         gapjunk   every chunk, then a junk chunk two numbers on (a gap
 *                   that no chunk fills) before every connection ends
 *       Then every connection half-closes (not gaphold nor stall, which
 *       hold them up to 20 s) and the lead waits for the answer: "answer
 *       CODE MSG", or "closed".  Prints "joined N" once the others are in.
 *
 * Every wait is bounded (20 s).  Exit status: 0 once it did its part and
 * printed what it saw; 2 when it could not (a connect, a refused join); 3
 * when the listener refused it in place of a greeting ("refused: MSG").
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "format/codec.h"

#define WAIT_MS 20000
#define WEIR_MARK 0x04   /* the class of a weir's SYN (transport/tcp.h) */
#define MAX_CONNS CODEC_STREAMS_MAX

static void die(const char *what)
{
    printf("failed: %s: %s\n", what, errno ? strerror(errno) : "no");
    fflush(stdout);
    exit(2);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Read exactly n bytes within ms; 1, 0 the peer ended, -1 silence or an
 * error. */
static int read_exact(int fd, unsigned char *buf, size_t n, int ms)
{
    size_t have = 0;
    double until = now() + ms / 1000.0;
    while (have < n) {
        int left = (int)((until - now()) * 1000);
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, left) <= 0)
            return -1;
        ssize_t got = read(fd, buf + have, n - have);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return -1;
        if (got == 0)
            return 0;
        have += (size_t)got;
    }
    return 1;
}

/* Write all of buf: 0, or -1 (the receiver reset or closed it). */
static int write_all(int fd, const void *buf, size_t n)
{
    const unsigned char *p = buf;
    while (n > 0) {
        struct pollfd pf = {.fd = fd, .events = POLLOUT};
        if (poll(&pf, 1, WAIT_MS) <= 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Connect with the SYN marked as a weir's (a listener that also takes
 * plain bytes greets only such a connection). */
static int connect_to(const char *host, const char *port)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai;
    if (getaddrinfo(host, port, &hints, &ai) != 0)
        die("getaddrinfo");
    int fd = socket(ai->ai_family, ai->ai_socktype, 0);
    if (fd < 0)
        die("socket");
    int mark = WEIR_MARK, zero = 0;
    if (ai->ai_family == AF_INET)
        (void)setsockopt(fd, IPPROTO_IP, IP_TOS, &mark, sizeof mark);
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0)
        die("connect");
    if (ai->ai_family == AF_INET)
        (void)setsockopt(fd, IPPROTO_IP, IP_TOS, &zero, sizeof zero);
    freeaddrinfo(ai);
    return fd;
}

/* One record from the receiver: 1 with r (and raw), 0 the end, -1 none
 * within ms or not a record. */
static int read_record(int fd, struct codec_record *r, int ms)
{
    unsigned char raw[CODEC_RECORD_MAX];
    int k = read_exact(fd, raw, 8, ms);
    if (k <= 0)
        return k;
    size_t len = codec_record_length(raw);
    if (len < 8 || len > sizeof raw)
        return -1;
    if ((k = read_exact(fd, raw + 8, len - 8, ms)) <= 0)
        return k < 0 ? -1 : 0;
    char why[96];
    if (codec_parse_record(raw, len, r, why, sizeof why) != 0) {
        printf("bad record from the receiver: %s\n", why);
        return -1;
    }
    return 1;
}

/* The receiver's greeting, and ours back. */
static void greet(int fd, bool streams)
{
    struct codec_record r;
    int k = read_record(fd, &r, WAIT_MS);
    if (k == 1 && r.type == 'S') {
        /* refused before the greeting: a busy listener's answer */
        printf("refused: %s\n", r.msg);
        fflush(stdout);
        exit(3);
    }
    if (k != 1 || r.type != 'G')
        die("no greeting from the receiver");
    if (!(r.features & CODEC_FEATURE_STREAMS))
        printf("the receiver does not offer streams\n");
    unsigned char g[CODEC_GREETING_SIZE];
    codec_greeting(g, CODEC_ROLE_SENDER, CODEC_FEATURES | (streams ? CODEC_FEATURE_STREAMS : 0));
    if (write_all(fd, g, sizeof g))
        die("write the greeting");
}

static void print_hex(const char *label, const unsigned char *b, size_t n)
{
    printf("%s ", label);
    for (size_t i = 0; i < n; i++)
        printf("%02x", b[i]);
    printf("\n");
    fflush(stdout);
}

static int parse_hex(const char *hex, unsigned char *out, size_t n)
{
    if (strlen(hex) != 2 * n)
        return -1;
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1)
            return -1;
        out[i] = (unsigned char)v;
    }
    return 0;
}

/* The lead: greeting, header, and the session's token from 'N'. */
static int lead(const char *host, const char *port, const unsigned char *header,
                unsigned char token[CODEC_TOKEN_SIZE])
{
    int fd = connect_to(host, port);
    greet(fd, true);
    if (write_all(fd, header, CODEC_HEADER_SIZE))
        die("write the header");
    struct codec_record r;
    int k;
    while ((k = read_record(fd, &r, WAIT_MS)) == 1 && r.type == 'K')
        ;
    if (k == 1 && r.type == 'S') {
        printf("refused: %s\n", r.msg);
        fflush(stdout);
        exit(2);
    }
    if (k != 1 || r.type != 'N')
        die("no 'N' from the receiver");
    memcpy(token, r.token, CODEC_TOKEN_SIZE);
    print_hex("token", token, CODEC_TOKEN_SIZE);
    return fd;
}

/* What the receiver says last on the lead: its answer, or its end. */
static void await_answer(int fd, int ms)
{
    struct codec_record r;
    int k;
    double until = now() + ms / 1000.0;
    do {
        int left = (int)((until - now()) * 1000);
        k = read_record(fd, &r, left > 0 ? left : 1);
    } while (k == 1 && r.type != 'S');
    if (k == 1)
        printf("answer %d %s\n", r.code, r.msg);
    else
        printf(k == 0 ? "closed\n" : "no answer\n");
    fflush(stdout);
}

/* A join: "joined", "refused: MSG", "closed" or "other X". */
static int join(const char *host, const char *port, const unsigned char *token, unsigned index,
                unsigned count, const char *variant, bool quiet)
{
    int fd = connect_to(host, port);
    greet(fd, strcmp(variant, "nofeature") != 0);
    unsigned char rec[CODEC_RECORD_MAX];
    size_t n;
    if (strcmp(variant, "header") == 0) {
        n = codec_header(rec, 1u << 20, 0, CODEC_VERSION);
    } else {
        n = codec_join(rec, token, index, count);
        if (strcmp(variant, "badsum") == 0)
            rec[n - 1] ^= 0x5a;
    }
    if (write_all(fd, rec, n))
        die("write the join");
    struct codec_record r;
    int k;
    while ((k = read_record(fd, &r, WAIT_MS)) == 1 && r.type == 'K')
        ;
    if (k == 1 && r.type == 'J' && r.join_index == index && r.join_count == count &&
        memcmp(r.token, token, CODEC_TOKEN_SIZE) == 0) {
        if (!quiet)
            printf("joined\n");
        fflush(stdout);
        return fd;
    }
    if (k == 1 && r.type == 'S')
        printf("refused: %s\n", r.msg);
    else if (k == 1)
        printf("other %c\n", r.type);
    else
        printf(k == 0 ? "closed\n" : "no answer\n");
    fflush(stdout);
    close(fd);
    return -1;
}

/* Wait (bounded) for the file the environment's JOINER_GO names. */
static void wait_go(void)
{
    const char *go = getenv("JOINER_GO");
    if (!go)
        return;
    struct stat st;
    for (double until = now() + WAIT_MS / 1000.0; stat(go, &st) != 0;) {
        if (now() > until)
            die("JOINER_GO never appeared");
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

struct spread {
    int fd[MAX_CONNS];
    int n;
    const unsigned char *data;   /* the stream after its header */
    size_t len, chunk;
    uint64_t chunks;
    bool broken;
};

/* Chunk seq of the stream (its bytes, or junk past the end) on
 * connection c, its header saying len bytes (0: its true length). */
static void send_chunk(struct spread *s, int c, uint64_t seq, uint32_t claim)
{
    size_t off = (size_t)seq * s->chunk;
    size_t len = off < s->len ? (s->len - off < s->chunk ? s->len - off : s->chunk) : s->chunk;
    unsigned char hdr[CODEC_CHUNK_HEADER];
    static unsigned char junk[1 << 20];
    memset(junk, 0xa5, sizeof junk);
    const unsigned char *body = off < s->len ? s->data + off : junk;
    codec_chunk(hdr, seq, claim ? claim : (uint32_t)len);
    if (s->broken)
        return;
    if (write_all(s->fd[c], hdr, sizeof hdr) ||
        (claim == 0 && write_all(s->fd[c], body, len))) {
        printf("write failed on connection %d: %s\n", c + 1, strerror(errno));
        s->broken = true;
    }
}

/* Every chunk from..to-1 on its connection (i % n), but skip. */
static void send_range(struct spread *s, uint64_t from, uint64_t to, uint64_t skip)
{
    for (uint64_t i = from; i < to; i++)
        if (i != skip)
            send_chunk(s, (int)(i % (uint64_t)s->n), i, 0);
}

static void play(struct spread *s, const char *plan, bool *hold)
{
    uint64_t all = s->chunks, none = UINT64_MAX;
    *hold = false;
    if (strcmp(plan, "honest") == 0) {
        send_range(s, 0, all, none);
    } else if (strcmp(plan, "gapclose") == 0 || strcmp(plan, "gaphold") == 0) {
        send_range(s, 0, all, 1);
        *hold = strcmp(plan, "gaphold") == 0;
    } else if (strcmp(plan, "stall") == 0) {
        for (int c = 0; c < s->n; c++)
            send_chunk(s, c, 1000000 + (uint64_t)c, 0);
        *hold = true;
    } else if (strcmp(plan, "huge") == 0 || strcmp(plan, "zero") == 0) {
        send_chunk(s, 0, 0, 0);
        unsigned char hdr[CODEC_CHUNK_HEADER];
        codec_chunk(hdr, 1, strcmp(plan, "huge") == 0 ? 0xffffffffu : 0);
        if (write_all(s->fd[1], hdr, sizeof hdr))
            printf("write failed on connection 2\n");
        *hold = true;   /* the receiver must fail without more */
    } else if (strcmp(plan, "backward") == 0) {
        send_chunk(s, 0, 0, 0);
        send_chunk(s, 1, 3, 0);
        send_chunk(s, 1, 1, 0);
        *hold = true;
    } else if (strcmp(plan, "dup") == 0) {
        send_chunk(s, 0, 0, 0);
        send_chunk(s, 0, 1, 0);
        send_chunk(s, 1, 1, 0);
        *hold = true;
    } else if (strcmp(plan, "cut") == 0) {
        send_chunk(s, 0, 0, 0);
        unsigned char hdr[CODEC_CHUNK_HEADER];
        codec_chunk(hdr, 1, 1000);
        if (write_all(s->fd[1], hdr, sizeof hdr) || write_all(s->fd[1], s->data, 10))
            printf("write failed on connection 2\n");
        shutdown(s->fd[1], SHUT_WR);
        *hold = true;
    } else if (strcmp(plan, "tailjunk") == 0) {
        send_range(s, 0, all, none);
        send_chunk(s, (int)(all % (uint64_t)s->n), all, 0);
    } else if (strcmp(plan, "gapjunk") == 0) {
        send_range(s, 0, all, none);
        send_chunk(s, (int)((all + 1) % (uint64_t)s->n), all + 1, 0);
    } else {
        fprintf(stderr, "joiner: unknown plan %s\n", plan);
        exit(2);
    }
}

static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        die(path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(n > 0 ? (size_t)n : 1);
    if (!b || fread(b, 1, (size_t)n, f) != (size_t)n)
        die(path);
    fclose(f);
    *len = (size_t)n;
    return b;
}

static int run(const char *host, const char *port, const char *path, int count,
               const char *plan, size_t chunk)
{
    size_t len;
    unsigned char *stream = slurp(path, &len);
    if (len < CODEC_HEADER_SIZE || stream[8] != 'H')
        die("the stream does not begin with a header");
    if (count < 2 || count > MAX_CONNS || chunk == 0 || chunk > CODEC_CHUNK_MAX) {
        fprintf(stderr, "joiner: bad count or chunk size\n");
        return 2;
    }
    struct spread s = {.n = count, .data = stream + CODEC_HEADER_SIZE,
                       .len = len - CODEC_HEADER_SIZE, .chunk = chunk};
    s.chunks = (s.len + chunk - 1) / chunk;
    unsigned char token[CODEC_TOKEN_SIZE];
    s.fd[0] = lead(host, port, stream, token);
    wait_go();
    for (int i = 1; i < count; i++)
        if ((s.fd[i] = join(host, port, token, (unsigned)i, (unsigned)count, "", true)) < 0)
            return 2;
    printf("joined %d\n", count - 1);
    fflush(stdout);
    bool hold;
    play(&s, plan, &hold);
    if (!hold)
        for (int i = 0; i < count; i++)
            shutdown(s.fd[i], SHUT_WR);
    await_answer(s.fd[0], WAIT_MS);
    for (int i = 0; i < count; i++)
        close(s.fd[i]);
    free(stream);
    return 0;
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc >= 4 && strcmp(argv[1], "lead") == 0) {
        unsigned char header[CODEC_HEADER_SIZE], token[CODEC_TOKEN_SIZE];
        codec_header(header, 1u << 20, 0, CODEC_VERSION);
        int fd = lead(argv[2], argv[3], header, token);
        await_answer(fd, (argc > 4 ? atoi(argv[4]) : 10) * 1000);
        close(fd);
        return 0;
    }
    if (argc >= 7 && strcmp(argv[1], "join") == 0) {
        unsigned char token[CODEC_TOKEN_SIZE];
        if (parse_hex(argv[4], token, sizeof token)) {
            fprintf(stderr, "joiner: the token is 32 hex digits\n");
            return 2;
        }
        int fd = join(argv[2], argv[3], token, (unsigned)atoi(argv[5]), (unsigned)atoi(argv[6]),
                      argc > 7 ? argv[7] : "", false);
        if (fd >= 0)
            close(fd);
        return 0;
    }
    if (argc >= 7 && strcmp(argv[1], "run") == 0)
        return run(argv[2], argv[3], argv[4], atoi(argv[5]), argv[6],
                   argc > 7 ? (size_t)strtoul(argv[7], NULL, 10) : 65536);
    fprintf(stderr, "usage: joiner lead HOST PORT [HOLD] | join HOST PORT TOKENHEX INDEX COUNT "
                    "[VARIANT] | run HOST PORT STREAM COUNT PLAN [CHUNK]\n");
    return 2;
}
