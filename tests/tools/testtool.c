/*
 * testtool.c - helpers for weir's shell tests, so they need no python.
 *
 *   testtool freeport                 print a port the kernel says is free
 *   testtool waitlisten PORT SECS     wait (bounded) until PORT is listening
 *   testtool proxy TARGET_PORT MODE AT [ARG]
 *       listen on 127.0.0.1:0, print "proxy listening on PORT", accept one
 *       connection, connect to 127.0.0.1:TARGET_PORT and relay both ways,
 *       injecting one fault into the client-to-server direction:
 *         pass                 relay faithfully (control case)
 *         cut    N             forward N bytes, then FIN to the server
 *         reset  N             forward N bytes, then RST both ways
 *         stall  N SECS        stop forwarding at byte N for SECS seconds
 *         gather N BYTES       forward up to byte N, then hold the client's
 *                              bytes until BYTES more have come (or its end)
 *                              and send them in one write, so the server
 *                              reads them at once
 *         flip   N             flip the lowest bit of byte N
 *         sealdrop K           (a keyed stream) after the greeting and the
 *                              client's TLS handshake, pass its first K
 *                              sealed data records, then drop every data
 *                              record and pass only control records (an
 *                              abort): an attacker on the path who would
 *                              have the abort stand for what it dropped
 *         drop   K             leave out data block K of a weir stream
 *         dup    K             send data block K of a weir stream twice
 *         swap   K             send data blocks K and K+1 in swapped order
 *         zerostatus 0         (the other way) set the code of every 'S'
 *                              record the server sends to 0
 *         record 0 0 FILE [BACK]  relay faithfully, and write the client's
 *                              bytes to FILE too (for replaying them), and
 *                              the server's to BACK if given
 *   testtool cutproxy TARGET_PORT CUTS EVERY MODE [GAP_SECS] [OPTIONS...]
 *       listen on 127.0.0.1:0, print "proxy listening on PORT", then accept
 *       connections until killed, all relayed at once to 127.0.0.1:TARGET_PORT;
 *       the first CUTS connections whose client sends EVERY bytes (k, M, G:
 *       binary units) are cut there, after exactly EVERY bytes reached the
 *       server, printing "cut N at BYTES":
 *         reset                RST both ways
 *         cut                  FIN both ways
 *         silent               nothing more passes, not even a close: both
 *                              sides are read and ignored, and their sockets
 *                              stay open until the proxy exits
 *       after a cut nothing is accepted for GAP_SECS (default 0), then "gap
 *       over" is printed. OPTIONS:
 *         --mute-back BYTES    on a connection to be cut, drop what the
 *                              server sends from EVERY - BYTES to the cut
 *         --refuse-after N     close the listener at the Nth cut; exit when
 *                              no connection is left
 *         --hold SECS          leave each new connection alone for SECS
 *                              before connecting it to the target
 *         --at-trailer         cut a connection once its client's bytes so
 *                              far end in a weir stream's trailer (a plain
 *                              stream: all of it reached the server), with
 *                              EVERY 0
 *         --at-end             cut a connection when its client half-closes
 *                              (its last byte reached the server), with
 *                              EVERY 0
 *         --hold-back MS       on a connection still to be cut, the server's
 *                              bytes reach the client MS ms after they came;
 *                              when the server's side ends with bytes still
 *                              held, they are lost and the connection is cut
 *                              there (a relay that acknowledged the
 *                              receiver's last words, its answer, and lost
 *                              them); with CUTS and EVERY 0 for "when"
 *         --down               count the server's bytes instead, and cut
 *                              once EVERY of them reached the client (what
 *                              is in flight then is lost)
 *       the target refusing resets the client ("connect to target failed");
 *       TARGET_PORT @FILE: the port is read from FILE when a connection
 *       comes, waiting up to 10 s for FILE to hold it
 *   testtool crowd PORT N BYTES [SRC]  open N connections to 127.0.0.1:PORT
 *       (from address SRC if given), send BYTES bytes of junk on each, print
 *       "crowd ready", then hold them open until stdin closes
 *   testtool status CODE BYTES MSG    write a weir answer record ('S')
 *   testtool flood PORT SECS          keep opening connections to PORT for SECS,
 *       at most 8 open at once, the oldest closed first
 *   testtool greet VERSION OLDEST ROLE [FEATURES]   write a weir greeting
 *       record (role S, R or T) with its checksum, for tests that play a peer
 *       by hand; FEATURES (default 1: keepalives) as a number
 *   testtool join DIR INDEX TEST      write a link test's JOIN record (DIR O or
 *       I) for the test numbered TEST, with a token of zeros
 *   testtool hello N MICROSECONDS MAXSIZE SIZES   write a link test's HELLO
 *       record: N connections each way, the duration, the largest write size
 *       and the number of sizes
 *   testtool records FILE             list the weir records of FILE (the
 *       bytes one end sent, from `proxy ... record`), one a line: the type
 *       letter, and for a 'C' record the count it confirms
 *   testtool slowread BYTES_PER_SEC   copy stdin to stdout slowly
 *   testtool nonblock CMD [ARGS...]   run CMD with O_NONBLOCK set on its stdin
 *       and stdout, so that it meets EAGAIN
 *   testtool latency N CMD [ARGS...]  run CMD with pipes on stdin and stdout,
 *       send N single lines 20 ms apart, print the median microseconds from
 *       writing a line to reading it back
 *   testtool lz4size FILE SIZE        make the content size in the header of
 *       the LZ4 frame that starts FILE say SIZE, with a valid header checksum
 *
 * It exits 0 when it did what it was asked, 1 otherwise.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>
#ifdef __linux__
#include <linux/sockios.h>   /* SIOCOUTQ */
#endif

static void die(const char *what)
{
    fprintf(stderr, "testtool: %s: %s\n", what, strerror(errno));
    exit(1);
}

static int listen_any(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        die("socket");
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) || listen(fd, 4) ||
        getsockname(fd, (struct sockaddr *)&sa, &len))
        die("bind");
    *port = ntohs(sa.sin_port);
    return fd;
}

static int cmd_freeport(void)
{
    int port, fd = listen_any(&port);
    close(fd);
    printf("%d\n", port);
    return 0;
}

static int port_listening(int port)
{
    const char *files[] = {"/proc/net/tcp", "/proc/net/tcp6"};
    for (int f = 0; f < 2; f++) {
        FILE *fp = fopen(files[f], "r");
        if (!fp)
            continue;
        char line[512];
        while (fgets(line, sizeof line, fp)) {
            char local[128];
            unsigned st;
            if (sscanf(line, " %*d: %127s %*s %x", local, &st) != 2)
                continue;
            char *colon = strrchr(local, ':');
            if (colon && (int)strtol(colon + 1, NULL, 16) == port && st == 0x0A) {
                fclose(fp);
                return 1;
            }
        }
        fclose(fp);
    }
    return 0;
}

static int cmd_waitlisten(int port, double secs)
{
    for (double waited = 0; waited < secs; waited += 0.02) {
        if (port_listening(port))
            return 0;
        struct timespec ts = {0, 20000000};
        nanosleep(&ts, NULL);
    }
    fprintf(stderr, "testtool: port %d not listening after %g s\n", port, secs);
    return 1;
}

static int write_all(int fd, const unsigned char *p, size_t n)
{
    while (n > 0) {
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

static uint32_t get32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

enum mode { PASS, CUT, RESET, STALL, FLIP, ZEROSTATUS, RECORD, GATHER, DROP, DUP, SWAP,
            SEALDROP };

struct fault {
    enum mode mode;
    unsigned long long at;     /* byte offset or block number */
    double secs;
    size_t gather;             /* gather: the bytes held back before one write */
    unsigned long long sent;   /* client-to-server bytes handled so far */
    int done;
    /* block modes: the stream is collected whole, rearranged, then sent */
    unsigned char *buf;
    size_t len, cap;
    FILE *record;              /* record: the client's bytes go here too */
    FILE *back;                /* record: and the server's here, if given */
};

static void collect(struct fault *f, const unsigned char *data, size_t n)
{
    if (f->len + n > f->cap) {
        f->cap = (f->len + n) * 2;
        f->buf = realloc(f->buf, f->cap);
        if (!f->buf)
            die("realloc");
    }
    memcpy(f->buf + f->len, data, n);
    f->len += n;
}

/* gather: what was held back goes to the server in one write */
static int release(struct fault *f, int server)
{
    int rc = write_all(server, f->buf, f->len);
    f->sent += f->len;
    f->len = 0;
    f->done = 2;
    return rc;
}

/* gather: hold n more bytes back; 1 to keep relaying, 0 when the write failed */
static int hold(struct fault *f, int server, const unsigned char *data, size_t n)
{
    collect(f, data, n);
    return f->len < f->gather || release(f, server) == 0;
}

static void hard_close(int fd)
{
    struct linger lg = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
}

/* sealdrop: the client's bytes in whole units: its greeting (a weir
 * record), its TLS records up to the first application-data one (its
 * Finished), then sealed records (a little-endian body length, 'R', the
 * flags).  f->done is the phase, f->sent the sealed data records passed. */
static int seal_drop(struct fault *f, int server, const unsigned char *data, size_t n)
{
    collect(f, data, n);
    size_t off = 0;
    for (;;) {
        size_t left = f->len - off, unit;
        const unsigned char *u = f->buf + off;
        if (f->done == 0 && left >= 8)
            unit = 8 + get32(u + 4);
        else if (f->done == 1 && left >= 5)
            unit = 5 + ((size_t)u[3] << 8 | u[4]);
        else if (f->done == 2 && left >= 8)
            unit = 8 + get32(u);
        else
            break;
        if (left < unit)
            break;
        int pass = 1;
        if (f->done == 2 && !(u[5] & 0x02))   /* a data record */
            pass = f->sent++ < f->at;
        if (pass && write_all(server, u, unit))
            return 0;
        if (f->done == 0)
            f->done = 1;
        else if (f->done == 1 && u[0] == 0x17)
            f->done = 2;
        off += unit;
    }
    memmove(f->buf, f->buf + off, f->len - off);
    f->len -= off;
    return 1;
}

/* After a cut's FIN, read what the server still says until it closes (at
 * most 30 s): closing with its bytes unread would send a reset, which it
 * could read before the FIN on a busy machine, and a cut is a clean end. */
static void drain_after_fin(int fd)
{
    static unsigned char sink[1 << 16];
    struct pollfd pfd = {fd, POLLIN, 0};
    for (int waited = 0; waited < 300;) {
        int r = poll(&pfd, 1, 100);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return;
        if (r == 0) {
            waited++;
            continue;
        }
        if (read(fd, sink, sizeof sink) <= 0)
            return;
    }
}

/* Returns 1 to keep relaying, 0 when the fault ended the connection. */
static int forward(struct fault *f, int client, int server, unsigned char *data, size_t n)
{
    if (f->mode == SEALDROP)
        return seal_drop(f, server, data, n);
    if (f->mode >= DROP) {
        collect(f, data, n);
        return 1;
    }
    if (f->record && fwrite(data, 1, n, f->record) != n)
        die("record");
    if (f->mode == GATHER && f->done == 1)
        return hold(f, server, data, n);
    unsigned long long start = f->sent;
    if (!f->done && f->at >= start && f->at < start + n) {
        size_t k = (size_t)(f->at - start);
        if (f->mode == FLIP) {
            data[k] ^= 1;
            f->done = 1;
        } else if (f->mode == CUT || f->mode == RESET || f->mode == STALL ||
                   f->mode == GATHER) {
            if (write_all(server, data, k))
                return 0;
            f->sent += k;
            f->done = 1;
            if (f->mode == GATHER)
                return hold(f, server, data + k, n - k);
            if (f->mode == CUT) {
                shutdown(server, SHUT_WR);
                close(client);
                drain_after_fin(server);
                return 0;
            }
            if (f->mode == RESET) {
                hard_close(server);
                hard_close(client);
                return 0;
            }
            struct timespec ts = {(time_t)f->secs,
                                  (long)((f->secs - (double)(time_t)f->secs) * 1e9)};
            nanosleep(&ts, NULL);
            data += k;
            n -= k;
        }
    }
    if (write_all(server, data, n))
        return 0;
    f->sent += n;
    return 1;
}

/* Split a collected weir stream into header, blocks and trailer, then send it
 * with one block dropped, duplicated or swapped with the next. */
static void send_rearranged(struct fault *f, int server)
{
    const unsigned char *p = f->buf;
    size_t off = 0, nb = 0, starts[65536], lens[65536];
    /* the greeting and the header: weir records before the first block */
    while (off + 8 <= f->len && get32(p + off) == 0x184D2A57u)
        off += 8 + get32(p + off + 4);
    size_t head = off;
    while (off + 11 <= f->len && get32(p + off) == 0x184D2204u && nb < 65536) {
        size_t unit = 11 + (get32(p + off + 7) & 0x7FFFFFFFu) + 36;
        starts[nb] = off;
        lens[nb++] = unit;
        off += unit;
    }
    write_all(server, p, head);
    for (size_t i = 0; i < nb; i++) {
        size_t j = i;
        if (i == f->at && f->mode == DROP)
            continue;
        if (f->mode == SWAP && i == f->at && i + 1 < nb)
            j = i + 1;
        else if (f->mode == SWAP && i == f->at + 1)
            j = i - 1;
        write_all(server, p + starts[j], lens[j]);
        if (i == f->at && f->mode == DUP)
            write_all(server, p + starts[j], lens[j]);
    }
    if (off < f->len)
        write_all(server, p + off, f->len - off);
    shutdown(server, SHUT_WR);
}

static int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa))
        die("connect to target");
    return fd;
}

/* zerostatus: the receiver's records pass with every 'S' record's code
 * byte set to 0 (a failure made to look like success); whole records only. */
static int zero_status(struct fault *f, int client, const unsigned char *data, size_t n)
{
    collect(f, data, n);
    size_t off = 0;
    while (f->len - off >= 8) {
        size_t rec = 8 + get32(f->buf + off + 4);
        if (f->len - off < rec)
            break;
        if (rec > 9 && f->buf[off + 8] == 'S')
            f->buf[off + 9] = 0;
        off += rec;
    }
    int rc = write_all(client, f->buf, off);
    memmove(f->buf, f->buf + off, f->len - off);
    f->len -= off;
    return rc;
}

static int relay(struct fault *f, int client, int server)
{
    static unsigned char data[1 << 16];
    int up_open = 1, down_open = 1;
    while (up_open || down_open) {
        struct pollfd pfd[2] = {{up_open ? client : -1, POLLIN, 0},
                                {down_open ? server : -1, POLLIN, 0}};
        if (poll(pfd, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            die("poll");
        }
        if (pfd[0].revents) {
            ssize_t n = read(client, data, sizeof data);
            if (n <= 0) {
                up_open = 0;
                if (f->mode >= DROP && f->mode != SEALDROP) {
                    send_rearranged(f, server);
                } else {
                    if (f->mode == GATHER && f->done == 1)
                        release(f, server);   /* the client ended first */
                    shutdown(server, SHUT_WR);
                }
            } else if (!forward(f, client, server, data, (size_t)n)) {
                return 0;
            }
        }
        if (pfd[1].revents) {
            ssize_t n = read(server, data, sizeof data);
            if (n <= 0) {
                down_open = 0;
                shutdown(client, SHUT_WR);
            } else if (f->mode == ZEROSTATUS) {
                if (zero_status(f, client, data, (size_t)n))
                    down_open = 0;
            } else if (f->back && fwrite(data, 1, (size_t)n, f->back) != (size_t)n) {
                die("record: the server's bytes");
            } else if (write_all(client, data, (size_t)n)) {
                down_open = 0;
            }
        }
    }
    return 0;
}

static int cmd_proxy(int argc, char **argv)
{
    static const char *names[] = {"pass", "cut", "reset", "stall", "flip", "zerostatus",
                                  "record", "gather", "drop", "dup", "swap", "sealdrop"};
    struct fault f = {0};
    int target = atoi(argv[2]);
    int m = -1;
    for (int i = 0; i < (int)(sizeof names / sizeof *names); i++)
        if (strcmp(argv[3], names[i]) == 0)
            m = i;
    if (m < 0) {
        fprintf(stderr, "testtool: unknown proxy mode %s\n", argv[3]);
        return 1;
    }
    f.mode = (enum mode)m;
    f.at = argc > 4 ? strtoull(argv[4], NULL, 10) : 0;
    f.secs = argc > 5 ? atof(argv[5]) : 0;
    f.gather = argc > 5 ? (size_t)strtoull(argv[5], NULL, 10) : 0;
    if (f.mode == RECORD) {
        f.record = argc > 6 ? fopen(argv[6], "w") : NULL;
        if (!f.record)
            die("record: the file to record into");
        f.back = argc > 7 ? fopen(argv[7], "w") : NULL;
        if (argc > 7 && !f.back)
            die("record: the file to record the server's bytes into");
    }
    int port, lfd = listen_any(&port);
    printf("proxy listening on %d\n", port);
    fflush(stdout);
    int client = accept(lfd, NULL, NULL);
    if (client < 0)
        die("accept");
    close(lfd);
    int server = connect_to(target);
    relay(&f, client, server);
    if (f.record && fclose(f.record) != 0)
        die("record");
    if (f.back && fclose(f.back) != 0)
        die("record: the server's bytes");
    free(f.buf);
    return 0;
}

static double now_us(void);

/* cutproxy: one poll loop relays every connection without blocking on any
 * of them; the first CUTS that carry data are cut at EVERY bytes each. */
enum cutmode { CM_RESET, CM_FIN, CM_SILENT };

enum linkstate {
    HELD,        /* accepted, left alone until the hold ends */
    CONNECTING,  /* the connection to the target is under way */
    RELAYING,
    FLUSHING,    /* cut: the last bytes before the cut still go to the server */
    DRAINING,    /* cut: waiting until the server acknowledged all of them */
    BLACKHOLE,   /* silent cut: both sides read and ignored until they close */
    GONE
};

struct flow {                   /* one direction of a connection */
    unsigned char buf[1 << 16];
    size_t off, len;            /* read from the source, not written yet */
    int ended;                  /* the source ended (or failed) */
    int done;                   /* nothing more goes this way */
    double first_at;            /* --hold-back: when the oldest held byte came (us) */
};

struct link {                   /* one client's connection and its server's */
    enum linkstate state;
    int fd[2];                  /* the client, the server; -1 when closed */
    int slot[2];                /* their places in the poll set, -1 if none */
    double until;               /* held: when the hold ends (microseconds) */
    double born;                /* when it was accepted (microseconds) */
    unsigned long long up;      /* client-to-server bytes taken */
    unsigned char tail[44];     /* --at-trailer: the client's last bytes */
    size_t tail_len;
    struct flow flow[2];        /* flow d goes from fd[d] to fd[!d] */
    struct link *next;
};

struct cutproxy {
    int target, lfd;
    const char *target_file;    /* @FILE: the target's port, once FILE holds it */
    int down;                   /* --down: count (and cut at) the server's bytes */
    int at_end;                 /* --at-end: cut when the client half-closes instead */
    int at_trailer;             /* --at-trailer: cut once the client sent a trailer */
    int cuts, made, refuse;     /* cuts to make, cuts made, --refuse-after */
    enum cutmode mode;
    unsigned long long every, mute;
    int muting;                 /* --mute-back was given */
    double gap, hold;           /* seconds */
    double hold_back;           /* --hold-back, microseconds (0: none) */
    double gap_end, retry;      /* microseconds: the gap's end, the next accept */
    int in_gap;
    struct link *links;
};

/* A byte count with an optional k, M or G suffix (binary units). */
static int parse_size(const char *s, unsigned long long *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || errno || *s == '-')
        return -1;
    int shift = 0;
    if (*end == 'k' || *end == 'K')
        shift = 10;
    else if (*end == 'M' || *end == 'm')
        shift = 20;
    else if (*end == 'G' || *end == 'g')
        shift = 30;
    if (shift)
        end++;
    if (*end || v > ULLONG_MAX >> shift)
        return -1;
    *out = v << shift;
    return 0;
}

static void set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
        die("fcntl");
}

/* 1 when the peer has acknowledged everything written to fd. */
static int delivered(int fd)
{
#ifdef SIOCOUTQ
    int queued = 0;
    return ioctl(fd, SIOCOUTQ, &queued) < 0 || queued == 0;
#else
    (void)fd;
    return 1;
#endif
}

static void end_link(struct link *c, int reset)
{
    for (int d = 0; d < 2; d++) {
        if (c->fd[d] >= 0 && reset)
            hard_close(c->fd[d]);
        else if (c->fd[d] >= 0)
            close(c->fd[d]);
        c->fd[d] = -1;
    }
    c->state = GONE;
}

/* The target could not be reached: the client is reset, the rest go on. */
static void give_up(struct link *c)
{
    fprintf(stderr, "connect to target failed\n");
    end_link(c, 1);
}

/* Start connecting to the target without waiting for it. */
static void dial(struct cutproxy *p, struct link *c)
{
    if (p->target <= 0) {   /* @FILE: the port is not known yet */
        FILE *f = fopen(p->target_file, "r");
        if (!f || fscanf(f, "%d", &p->target) != 1)
            p->target = 0;
        if (f)
            fclose(f);
        if (p->target <= 0) {
            if (now_us() - c->born > 10e6) {
                give_up(c);
                return;
            }
            c->state = HELD;
            c->until = now_us() + 20e3;
            return;
        }
    }
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)p->target),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    c->fd[1] = socket(AF_INET, SOCK_STREAM, 0);
    if (c->fd[1] < 0) {
        give_up(c);
        return;
    }
    set_nonblock(c->fd[1]);
    if (connect(c->fd[1], (struct sockaddr *)&sa, sizeof sa) == 0)
        c->state = RELAYING;
    else if (errno == EINPROGRESS || errno == EINTR)
        c->state = CONNECTING;
    else
        give_up(c);
}

/* The connection under way has finished: relay on it, or give it up. */
static void connected(struct link *c)
{
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(c->fd[1], SOL_SOCKET, SO_ERROR, &err, &len) || err)
        give_up(c);
    else
        c->state = RELAYING;
}

static void admit(struct cutproxy *p)
{
    int fd = accept(p->lfd, NULL, NULL);
    if (fd < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR &&
            errno != ECONNABORTED) {
            fprintf(stderr, "testtool: accept: %s\n", strerror(errno));
            p->retry = now_us() + 1e5;   /* out of descriptors, say: wait a little */
        }
        return;
    }
    struct link *c = calloc(1, sizeof *c);
    if (!c) {
        hard_close(fd);
        return;
    }
    set_nonblock(fd);
    c->fd[0] = fd;
    c->fd[1] = -1;
    c->slot[0] = c->slot[1] = -1;
    c->state = HELD;
    c->born = now_us();
    c->until = c->born + p->hold * 1e6;
    c->next = p->links;
    p->links = c;
    if (p->hold <= 0)
        dial(p, c);
}

/* --mute-back: the server's bytes are thrown away on a connection still to
 * be cut once the client sent EVERY - BYTES. */
static int muted(const struct cutproxy *p, const struct link *c)
{
    return p->muting && p->made < p->cuts && !c->flow[0].ended && c->up <= p->every &&
           c->up + p->mute >= p->every;
}

/* Cut c at EVERY: the client's bytes beyond it and the server's bytes not
 * yet passed on are lost; the gap, or the refusal, starts now. */
static void cut_link(struct cutproxy *p, struct link *c)
{
    p->made++;
    printf("cut %d at %llu\n", p->made, c->up);
    fflush(stdout);
    c->flow[1].len = 0;
    c->flow[1].off = 0;
    c->state = FLUSHING;
    if (p->refuse > 0 && p->made == p->refuse && p->lfd >= 0) {
        close(p->lfd);
        p->lfd = -1;
        p->in_gap = 0;
    } else if (p->gap > 0 && p->lfd >= 0) {
        p->gap_end = now_us() + p->gap * 1e6;
        p->in_gap = 1;
    }
}

/* --at-trailer: keep the client's last bytes; 1 when they end in a weir
 * trailer record (magic, length 32, 'T'), or in one and an LZ4 end mark. */
static int ends_in_trailer(struct link *c, const unsigned char *data, size_t n)
{
    static const unsigned char head[9] = {0x57, 0x2A, 0x4D, 0x18, 32, 0, 0, 0, 'T'};
    size_t keep = sizeof c->tail;
    if (n >= keep) {
        memcpy(c->tail, data + n - keep, keep);
        c->tail_len = keep;
    } else {
        size_t old = c->tail_len + n > keep ? keep - n : c->tail_len;
        memmove(c->tail, c->tail + c->tail_len - old, old);
        memcpy(c->tail + old, data, n);
        c->tail_len = old + n;
    }
    for (size_t back = 40; back <= 44 && back <= c->tail_len; back += 4)
        if (memcmp(c->tail + c->tail_len - back, head, sizeof head) == 0)
            return 1;
    return 0;
}

/* n bytes were read into flow d; the one that reaches EVERY cuts. */
static void take(struct cutproxy *p, struct link *c, int d, size_t n)
{
    struct flow *f = &c->flow[d];
    if (d == 1 && muted(p, c))
        return;
    f->off = 0;
    f->len = n;
    if (d == 0 && p->at_trailer && p->made < p->cuts) {
        c->up += n;
        if (ends_in_trailer(c, f->buf, n))
            cut_link(p, c);   /* all it sent reaches the server; nothing comes back */
        return;
    }
    if (d != p->down)
        return;
    if (p->at_end) {
        c->up += n;
        return;
    }
    if (p->made < p->cuts && c->up <= p->every && c->up + n >= p->every) {
        f->len = (size_t)(p->every - c->up);
        c->up = p->every;
        cut_link(p, c);
        return;
    }
    c->up += n;
}

/* Write what f holds to fd without blocking: 0 when it all went or the
 * socket is full for now, -1 when writing failed. */
static int put(struct flow *f, int fd)
{
    while (f->len > 0) {
        ssize_t w = write(fd, f->buf + f->off, f->len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (w <= 0)
            return -1;
        f->off += (size_t)w;
        f->len -= (size_t)w;
    }
    f->off = 0;
    return 0;
}

/* 1 when a read's result says the source ended or failed. */
static int read_ended(ssize_t n)
{
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* --hold-back applies to c: a cut is still to be made. */
static int holding(const struct cutproxy *p)
{
    return p->hold_back > 0 && p->made < p->cuts;
}

/* --hold-back: the server's bytes gather (read at once, so the proxy's
 * host acknowledges them) and go to the client HOLD after the oldest came;
 * the server's end with bytes still held loses them and cuts. */
static void pump_held(struct cutproxy *p, struct link *c)
{
    struct flow *f = &c->flow[1];
    size_t room = sizeof f->buf - f->off - f->len;
    if (!f->ended && room > 0) {
        ssize_t n = read(c->fd[1], f->buf + f->off + f->len, room);
        if (read_ended(n)) {
            f->ended = 1;
        } else if (n > 0) {
            if (f->len == 0)
                f->first_at = now_us();
            f->len += (size_t)n;
        }
    }
    if (f->ended && f->len > 0) {
        printf("lost %zu bytes before the server's end\n", f->len);
        fflush(stdout);
        f->len = f->off = 0;
        cut_link(p, c);
        return;
    }
    if (f->len > 0 && now_us() >= f->first_at + p->hold_back && put(f, c->fd[0]) < 0) {
        f->len = f->off = 0;
        f->done = 1;
    }
    if (f->ended && f->len == 0 && !f->done) {
        shutdown(c->fd[0], SHUT_WR);
        f->done = 1;
    }
}

/* Move what flow d can: read its source when nothing waits to be written,
 * write what does; once the source ended and all went, shut down writing
 * to the other side, so that a half-close passes through. */
static void pump(struct cutproxy *p, struct link *c, int d)
{
    struct flow *f = &c->flow[d];
    if (f->len == 0 && !f->ended && !f->done) {
        ssize_t n = read(c->fd[d], f->buf, sizeof f->buf);
        if (read_ended(n))
            f->ended = 1;
        else if (n > 0)
            take(p, c, d, (size_t)n);
        if (c->state != RELAYING)
            return;
    }
    if (f->len > 0 && put(f, c->fd[!d]) < 0) {
        f->len = f->off = 0;
        f->done = 1;
    }
    if (f->ended && f->len == 0 && !f->done && d == 0 && p->at_end && p->made < p->cuts) {
        f->done = 1;
        cut_link(p, c);   /* all it sent reaches the server; nothing comes back */
        return;
    }
    if (f->ended && f->len == 0 && !f->done) {
        shutdown(c->fd[!d], SHUT_WR);
        f->done = 1;
    }
}

/* After a cut: what either side sends is read and thrown away; the last
 * bytes before the cut go to the server, then the mode ends the connection. */
static void after_cut(struct cutproxy *p, struct link *c)
{
    static unsigned char sink[1 << 16];
    for (int d = 0; d < 2; d++)
        if (c->fd[d] >= 0 && !c->flow[d].ended && read_ended(read(c->fd[d], sink, sizeof sink)))
            c->flow[d].ended = 1;
    if (c->state == FLUSHING) {
        struct flow *f = &c->flow[0];
        if (put(f, c->fd[1]) < 0)
            f->len = f->off = 0;
        if (f->len > 0)
            return;
        if (p->mode == CM_SILENT) {
            c->state = BLACKHOLE;
        } else {
            if (p->mode == CM_FIN) {
                shutdown(c->fd[1], SHUT_WR);
                shutdown(c->fd[0], SHUT_WR);
            }
            c->state = DRAINING;
        }
    }
    /* a black hole passes on no close either: once both peers have ended,
     * the link leaves with its sockets still open (the proxy exiting closes
     * them), so that neither peer ever hears of the other's close */
    if (c->state == BLACKHOLE && c->flow[0].ended && c->flow[1].ended)
        c->state = GONE;
}

/* Draining: once the server has all the bytes, close (reset or FIN). */
static void settle(struct cutproxy *p, struct link *c)
{
    if (delivered(c->fd[1]))
        end_link(c, p->mode == CM_RESET);
}

static void serve(struct cutproxy *p, struct link *c)
{
    if (c->state == CONNECTING) {
        connected(c);
        return;
    }
    if (c->state == RELAYING) {
        pump(p, c, 0);
        if (c->state == RELAYING && holding(p))
            pump_held(p, c);
        else if (c->state == RELAYING)
            pump(p, c, 1);
        if (c->state == RELAYING && c->flow[0].done && c->flow[1].done)
            end_link(c, 0);
    }
    if (c->state == FLUSHING || c->state == DRAINING || c->state == BLACKHOLE)
        after_cut(p, c);
}

/* What to wait for on a connection's two sockets. */
static void wants(const struct cutproxy *p, const struct link *c, short ev[2])
{
    ev[0] = ev[1] = 0;
    if (c->state == CONNECTING)
        ev[1] = POLLOUT;
    if (c->state == RELAYING)
        for (int d = 0; d < 2; d++) {
            const struct flow *f = &c->flow[d];
            if (d == 1 && holding(p)) {
                /* read all the time; write once the hold is over (a timer) */
                if (!f->ended && f->off + f->len < sizeof f->buf)
                    ev[1] |= POLLIN;
                if (f->len > 0 && now_us() >= f->first_at + p->hold_back)
                    ev[0] |= POLLOUT;
                continue;
            }
            if (f->len == 0 && !f->ended && !f->done)
                ev[d] |= POLLIN;
            if (f->len > 0)
                ev[!d] |= POLLOUT;
        }
    if (c->state == FLUSHING && c->flow[0].len > 0)
        ev[1] |= POLLOUT;
    if (c->state == FLUSHING || c->state == DRAINING || c->state == BLACKHOLE)
        for (int d = 0; d < 2; d++)
            if (c->fd[d] >= 0 && !c->flow[d].ended)
                ev[d] |= POLLIN;
}

static void sooner(double *wait, double us)
{
    if (us < 0)
        us = 0;
    if (*wait < 0 || us < *wait)
        *wait = us;
}

static int cmd_cutproxy(int argc, char **argv)
{
    static const char *modes[] = {"reset", "cut", "silent"};
    struct cutproxy p = {.target = atoi(argv[2]), .cuts = atoi(argv[3]), .lfd = -1};
    if (argv[2][0] == '@') {
        p.target_file = argv[2] + 1;
        p.target = 0;
    }
    int m = -1;
    for (int i = 0; i < 3; i++)
        if (strcmp(argv[5], modes[i]) == 0)
            m = i;
    if ((p.target <= 0 && !p.target_file) || p.cuts < 0 || parse_size(argv[4], &p.every) || m < 0) {
        fprintf(stderr, "testtool: cutproxy TARGET_PORT CUTS EVERY reset|cut|silent "
                        "[GAP_SECS] [--mute-back BYTES] [--refuse-after N] [--hold SECS]\n");
        return 1;
    }
    p.mode = (enum cutmode)m;
    int i = 6;
    if (argc > 6 && strncmp(argv[6], "--", 2) != 0)
        p.gap = atof(argv[i++]);
    for (; i < argc; i += 2) {
        if (strcmp(argv[i], "--down") == 0 || strcmp(argv[i], "--at-end") == 0 ||
            strcmp(argv[i], "--at-trailer") == 0) {
            if (argv[i][2] == 'd')
                p.down = 1;
            else if (argv[i][5] == 'e')
                p.at_end = 1;
            else
                p.at_trailer = 1;
            i--;
            continue;
        }
        int bad = i + 1 >= argc;
        if (!bad && strcmp(argv[i], "--mute-back") == 0) {
            bad = parse_size(argv[i + 1], &p.mute);
            p.muting = 1;
        } else if (!bad && strcmp(argv[i], "--refuse-after") == 0)
            p.refuse = atoi(argv[i + 1]);
        else if (!bad && strcmp(argv[i], "--hold") == 0)
            p.hold = atof(argv[i + 1]);
        else if (!bad && strcmp(argv[i], "--hold-back") == 0)
            p.hold_back = atof(argv[i + 1]) * 1000;
        else
            bad = 1;
        if (bad) {
            fprintf(stderr, "testtool: cutproxy: bad option %s\n", argv[i]);
            return 1;
        }
    }
    signal(SIGPIPE, SIG_IGN);   /* a peer gone is a failed write, not the end */
    int port;
    p.lfd = listen_any(&port);
    set_nonblock(p.lfd);
    printf("proxy listening on %d\n", port);
    fflush(stdout);
    struct pollfd *pfd = NULL;
    size_t cap = 0;
    for (;;) {
        double t = now_us(), wait = -1;
        if (p.in_gap && t >= p.gap_end) {
            p.in_gap = 0;
            printf("gap over\n");
            fflush(stdout);
        }
        /* timers first, then the connections that ended leave */
        size_t n = 0;
        for (struct link **lp = &p.links; *lp;) {
            struct link *c = *lp;
            if (c->state == HELD && t >= c->until)
                dial(&p, c);
            if (c->state == DRAINING)
                settle(&p, c);
            if (c->state == GONE) {
                *lp = c->next;
                free(c);
                continue;
            }
            n++;
            lp = &c->next;
        }
        if (p.lfd < 0 && !p.links)
            break;
        if (cap < 1 + 2 * n) {
            cap = 2 * (1 + 2 * n);
            pfd = realloc(pfd, cap * sizeof *pfd);
            if (!pfd)
                die("realloc");
        }
        nfds_t k = 0;
        int listening = p.lfd >= 0 && !p.in_gap && t >= p.retry;
        if (listening)
            pfd[k++] = (struct pollfd){p.lfd, POLLIN, 0};
        else if (p.in_gap)
            sooner(&wait, p.gap_end - t);
        else if (p.lfd >= 0)
            sooner(&wait, p.retry - t);
        for (struct link *c = p.links; c; c = c->next) {
            short ev[2];
            wants(&p, c, ev);
            if (c->state == RELAYING && holding(&p) && c->flow[1].len > 0)
                sooner(&wait, c->flow[1].first_at + p.hold_back - t);
            for (int d = 0; d < 2; d++) {
                c->slot[d] = -1;
                if (ev[d]) {
                    c->slot[d] = (int)k;
                    pfd[k++] = (struct pollfd){c->fd[d], ev[d], 0};
                }
            }
            if (c->state == HELD)
                sooner(&wait, c->until - t);
            if (c->state == DRAINING)
                sooner(&wait, 10000);   /* the acknowledgement has no event */
        }
        int ms = wait < 0 ? -1 : wait > 3.6e9 ? 3600000 : (int)(wait / 1000) + 1;
        if (poll(pfd, k, ms) < 0) {
            if (errno == EINTR)
                continue;
            die("poll");
        }
        double after = now_us();
        for (struct link *c = p.links; c; c = c->next)
            if ((c->slot[0] >= 0 && pfd[c->slot[0]].revents) ||
                (c->slot[1] >= 0 && pfd[c->slot[1]].revents) ||
                (c->state == RELAYING && holding(&p) && c->flow[1].len > 0 &&
                 after >= c->flow[1].first_at + p.hold_back))
                serve(&p, c);
        /* a cut just made may have started a gap or closed the listener */
        if (listening && p.lfd >= 0 && !p.in_gap && pfd[0].revents)
            admit(&p);
    }
    free(pfd);
    return 0;
}

static int cmd_slowread(double rate)
{
    static unsigned char buf[4096];
    size_t chunk = rate / 20 < sizeof buf ? (size_t)(rate / 20) : sizeof buf;
    if (chunk < 1)
        chunk = 1;
    for (;;) {
        ssize_t n = read(0, buf, chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0;
        if (write_all(1, buf, (size_t)n))
            return 1;
        double secs = (double)n / rate;
        struct timespec ts = {(time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9)};
        nanosleep(&ts, NULL);
    }
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int cmd_latency(int n, char **cmd)
{
    int in[2], out[2];
    if (n < 1 || n > 1000 || pipe(in) || pipe(out))
        return 1;
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[0]); close(in[1]); close(out[0]); close(out[1]);
        execvp(cmd[0], cmd);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    double samples[1000];
    for (int i = 0; i < n; i++) {
        char line[32], got[32];
        int len = snprintf(line, sizeof line, "line %d\n", i);
        double t0 = now_us();
        if (write_all(in[1], (unsigned char *)line, (size_t)len))
            die("write");
        int have = 0;
        while (have < len) {
            ssize_t r = read(out[0], got + have, (size_t)(len - have));
            if (r <= 0)
                die("read");
            have += (int)r;
        }
        samples[i] = now_us() - t0;
        struct timespec ts = {0, 20000000};
        nanosleep(&ts, NULL);
    }
    close(in[1]);
    char sink[256];
    while (read(out[0], sink, sizeof sink) > 0) {
    }
    int status;
    waitpid(pid, &status, 0);
    qsort(samples, (size_t)n, sizeof *samples, cmp_double);
    printf("%.0f\n", samples[n / 2]);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

static int cmd_nonblock(char **cmd)
{
    for (int fd = 0; fd <= 1; fd++) {
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
            die("fcntl");
    }
    execvp(cmd[0], cmd);
    die("exec");
    return 1;
}

static int cmd_crowd(int port, int n, int bytes, const char *src)
{
    static int fds[4096];
    if (n < 1 || n > 4096)
        return 1;
    int opened = 0;
    for (int i = 0; i < n; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0)
            die("socket");
        if (src) {
            struct sockaddr_in me = {.sin_family = AF_INET};
            if (inet_pton(AF_INET, src, &me.sin_addr) != 1 ||
                bind(fd, (struct sockaddr *)&me, sizeof me))
                die("bind the source address");
        }
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
            close(fd);   /* the listener's backlog was full: the crowd is big enough */
            continue;
        }
        for (int b = 0; b < bytes; b++)
            if (write(fd, "x", 1) != 1)
                break;
        fds[opened++] = fd;
    }
    printf("crowd ready: %d connections\n", opened);
    fflush(stdout);
    char sink[64];
    while (read(0, sink, sizeof sink) > 0) {
    }
    for (int i = 0; i < opened; i++)
        close(fds[i]);
    return 0;
}

/* flood PORT SECS: keep opening connections for SECS, at most 8 open at
 * once (the oldest closed first), as fast as the listener accepts them. */
static int cmd_flood(int port, double secs)
{
    int fds[8];
    int n = 0, next = 0;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    unsigned long opened = 0;
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9 >= secs)
            break;
        if (n == 8) {
            close(fds[next]);
            n--;
        }
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (fd < 0)
            die("socket");
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
            close(fd);
            continue;
        }
        fds[next] = fd;
        next = (next + 1) % 8;
        n++;
        opened++;
    }
    printf("flood: %lu connections\n", opened);
    return 0;
}

/* S CODE BYTES MSG: an answer record as doc/stream-format.md describes it. */
static int cmd_status(int code, unsigned long long bytes, const char *msg)
{
    unsigned char r[40 + 400] = {0x57, 0x2A, 0x4D, 0x18};
    size_t m = strlen(msg) > 400 ? 400 : strlen(msg);
    size_t len = 32 + m;   /* payload: fixed fields, message, checksum */
    r[4] = (unsigned char)len;
    r[5] = (unsigned char)(len >> 8);
    r[8] = 'S';
    r[9] = (unsigned char)code;
    r[12] = (unsigned char)m;
    r[13] = (unsigned char)(m >> 8);
    for (int i = 0; i < 8; i++)
        r[16 + i] = (unsigned char)(bytes >> (8 * i));
    /* bytes 24-31: the chain of the stream it claims; this one knows none */
    memcpy(r + 32, msg, m);
    uint64_t sum = XXH3_64bits(r, 32 + m);
    for (int i = 0; i < 8; i++)
        r[32 + m + i] = (unsigned char)(sum >> (8 * i));
    return write_all(1, r, 40 + m) ? 1 : 0;
}

/* A 'G' record as doc/stream-format.md describes it. */
static int cmd_greet(int version, int oldest, const char *role, unsigned features)
{
    unsigned char g[32] = {0x57, 0x2A, 0x4D, 0x18, 24, 0, 0, 0, 'G', 'W', 'E', 'I', 'R'};
    g[13] = (unsigned char)version;
    g[14] = (unsigned char)oldest;
    g[15] = (unsigned char)role[0];
    for (int i = 0; i < 4; i++)
        g[16 + i] = (unsigned char)(features >> (8 * i));
    uint64_t sum = XXH3_64bits(g, 24);
    for (int i = 0; i < 8; i++)
        g[24 + i] = (unsigned char)(sum >> (8 * i));
    return write_all(1, g, sizeof g) ? 1 : 0;
}

/* An 'L' record as doc/stream-format.md describes it: op, direction, n,
 * a, b, c, and a token of zeros. */
static int link_record(char op, char dir, unsigned n, unsigned long long a,
                       unsigned long long b, unsigned long long c)
{
    unsigned char r[64] = {0x57, 0x2A, 0x4D, 0x18, 56, 0, 0, 0, 'L'};
    r[9] = (unsigned char)op;
    r[10] = (unsigned char)dir;
    for (int i = 0; i < 4; i++)
        r[12 + i] = (unsigned char)(n >> (8 * i));
    for (int i = 0; i < 8; i++) {
        r[16 + i] = (unsigned char)(a >> (8 * i));
        r[24 + i] = (unsigned char)(b >> (8 * i));
        r[32 + i] = (unsigned char)(c >> (8 * i));
    }
    uint64_t sum = XXH3_64bits(r, 56);
    for (int i = 0; i < 8; i++)
        r[56 + i] = (unsigned char)(sum >> (8 * i));
    return write_all(1, r, sizeof r) ? 1 : 0;
}

/* A data connection that joins a link test, with a token nobody computed. */
static int cmd_join(const char *dir, unsigned index, unsigned long long test)
{
    return link_record('J', dir[0], index, test, 0, 0);
}

/* The content size of the LZ4 frame at the start of a file, rewritten: a
 * frame whose header lies with a valid header checksum. */
static int cmd_lz4size(const char *path, unsigned long long size)
{
    unsigned char h[15];
    FILE *f = fopen(path, "r+b");
    if (!f)
        die(path);
    if (fread(h, 1, sizeof h, f) != sizeof h || h[0] != 0x04 || h[1] != 0x22 || h[2] != 0x4D ||
        h[3] != 0x18 || !(h[4] & 0x08)) {
        fprintf(stderr, "testtool: %s does not start with an LZ4 frame that gives its size\n",
                path);
        fclose(f);
        return 1;
    }
    for (int i = 0; i < 8; i++)
        h[6 + i] = (unsigned char)(size >> (8 * i));
    h[14] = (unsigned char)(XXH32(h + 4, 10, 0) >> 8);
    if (fseek(f, 0, SEEK_SET) != 0 || fwrite(h, 1, sizeof h, f) != sizeof h)
        die(path);
    if (fclose(f) != 0)
        die(path);
    return 0;
}

/* FILE: the weir records one end sent, one a line (doc/stream-format.md);
 * anything that is not a whole record fails. */
static int cmd_records(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        die(path);
    unsigned char rec[8 + 432];
    for (;;) {
        size_t n = fread(rec, 1, 8, f);
        if (n == 0)
            break;
        uint32_t len = n == 8 ? get32(rec + 4) : 0;
        if (n != 8 || get32(rec) != 0x184D2A57u || len < 1 || len > sizeof rec - 8 ||
            fread(rec + 8, 1, len, f) != len) {
            fprintf(stderr, "testtool: %s: not a whole weir record\n", path);
            return 1;
        }
        if (rec[8] == 'C' && len >= 16)
            printf("C %llu\n", (unsigned long long)get32(rec + 16) |
                                   (unsigned long long)get32(rec + 20) << 32);
        else
            printf("%c\n", rec[8]);
    }
    if (ferror(f) || fclose(f) != 0)
        die(path);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 4 && strcmp(argv[1], "lz4size") == 0)
        return cmd_lz4size(argv[2], strtoull(argv[3], NULL, 10));
    if (argc >= 5 && strcmp(argv[1], "status") == 0)
        return cmd_status(atoi(argv[2]), strtoull(argv[3], NULL, 10), argv[4]);
    if (argc >= 4 && strcmp(argv[1], "flood") == 0)
        return cmd_flood(atoi(argv[2]), atof(argv[3]));
    if (argc >= 5 && strcmp(argv[1], "greet") == 0)
        return cmd_greet(atoi(argv[2]), atoi(argv[3]), argv[4],
                         argc >= 6 ? (unsigned)strtoul(argv[5], NULL, 0) : 1);
    if (argc >= 6 && strcmp(argv[1], "hello") == 0)
        return link_record('H', 0, (unsigned)atoi(argv[2]), strtoull(argv[3], NULL, 10),
                           strtoull(argv[4], NULL, 10), strtoull(argv[5], NULL, 10));
    if (argc >= 5 && strcmp(argv[1], "join") == 0)
        return cmd_join(argv[2], (unsigned)atoi(argv[3]), strtoull(argv[4], NULL, 10));
    if (argc >= 5 && strcmp(argv[1], "crowd") == 0)
        return cmd_crowd(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), argc > 5 ? argv[5] : NULL);
    if (argc >= 3 && strcmp(argv[1], "nonblock") == 0)
        return cmd_nonblock(argv + 2);
    if (argc >= 4 && strcmp(argv[1], "latency") == 0)
        return cmd_latency(atoi(argv[2]), argv + 3);
    if (argc >= 2 && strcmp(argv[1], "freeport") == 0)
        return cmd_freeport();
    if (argc >= 4 && strcmp(argv[1], "waitlisten") == 0)
        return cmd_waitlisten(atoi(argv[2]), atof(argv[3]));
    if (argc >= 4 && strcmp(argv[1], "proxy") == 0)
        return cmd_proxy(argc, argv);
    if (argc >= 6 && strcmp(argv[1], "cutproxy") == 0)
        return cmd_cutproxy(argc, argv);
    if (argc >= 3 && strcmp(argv[1], "records") == 0)
        return cmd_records(argv[2]);
    if (argc >= 3 && strcmp(argv[1], "slowread") == 0)
        return cmd_slowread(atof(argv[2]));
    fprintf(stderr, "usage: testtool freeport | waitlisten PORT SECS | "
                    "proxy TARGET MODE AT [SECS] | "
                    "cutproxy TARGET CUTS EVERY reset|cut|silent [GAP] [--mute-back BYTES] "
                    "[--refuse-after N] [--hold SECS] | records FILE | slowread RATE\n");
    return 2;
}
