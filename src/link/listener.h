/*
 * listener.h - admitting the sender on a listening socket (-I).
 *
 * Contract: listener_admit() runs on the reader thread.  It accepts every
 * connection as it arrives and keeps those that have not yet proven
 * themselves in a bounded set, watched together with poll(), so that no
 * stray, silent, slow or junk peer can delay or displace the real sender:
 *
 *   - a peer outside the allow-list (-I HOST:PORT) is refused at once;
 *   - a weir listener greets every connection (a 'G' record) and admits the
 *     first that answers with a compatible greeting and a whole, valid
 *     stream header within the handshake time; plain bytes, an older weir,
 *     a closed or a silent connection are refused;
 *   - with a key (--key-file), the greeting must say the sender has one,
 *     the TLS handshake must succeed (tls.h: the sender holds a key of the
 *     file), and the first sealed record must open and hold the header;
 *     the handshakes of all waiting connections run side by side;
 *   - a --raw listener sends nothing and admits the first connection that
 *     sends a byte (nc and mbuffer do not greet);
 *   - a listener for plain bytes too (weir under the name mbuffer) greets
 *     only a connection whose SYN bore weir's mark (tcp.h) and admits it as
 *     above; any other connection is never greeted (mbuffer, nc and socat
 *     never read, and a greeting left unread would turn their close into a
 *     reset that can discard their last bytes), and what it sends is plain
 *     bytes;
 *   - at most LISTENER_PENDING connections wait at once, and at most
 *     LISTENER_PER_ADDRESS from one address; when a new one does not fit,
 *     a waiting one is dropped (from that address first): the one quiet
 *     the longest, since its last byte or, when it sent none, since a
 *     second after it came (a sender speaks only once the greeting reached
 *     it, a keyless joiner at once, so a new connection is not quiet
 *     yet).  The one that goes is
 *     heard once more first; when that admits it, the newcomer waits one
 *     place beyond the cap until it is admitted, and is never closed for it.
 *
 *   - a link tester (weir --link-test, role 'T') is admitted the same way
 *     (with a key: greeting, handshake, its request in the first sealed
 *     record; without one: greeting and request, only with
 *     allow_link_test) and handed to the link test service the listener was given (cfg->tests) that
 *     runs the test beside this loop; its data connections join that test
 *     by token.  The test stops, and its threads are joined, before this
 *     function returns: when the sender is admitted and when it fails.
 *
 * Every refusal is logged with the peer's address (at most ten lines a
 * second; the rest are counted), a peer that may be a weir sender is told
 * why in an 'S' record (a --raw listener writes nothing), and the listener
 * keeps listening.  On success every other waiting connection is closed,
 * and so is the listening socket unless the session may resume, *t is the connection (non-blocking, tuned), and
 * the bytes read past the greeting (the stream header) are in `ahead` for
 * the stream decoder.  It fails with WEIR_EXIT_NETWORK for --accept-timeout
 * and errors of the listening socket, and with errno ECANCELED once *stop
 * is set (the reader is woken by the pipeline's signal).
 */
#ifndef WEIR_LISTENER_H
#define WEIR_LISTENER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "crypto/keyfile.h"
#include "crypto/seal.h"
#include "crypto/tls.h"
#include "format/codec.h"
#include "transport/tcp.h"
#include "transport/transport.h"
#include "weir/error.h"
#include "weir/log.h"

#define LISTENER_PENDING 256
#define LISTENER_PER_ADDRESS 32
#define LISTENER_HANDSHAKE_SECS 10.0
#define LISTENER_AHEAD_MAX 512   /* the stream header, opened from its record */

/* A keyed link test's secret: exported from its control connection's
 * handshake under this label (the tester's end does the same) */
#define LINKTEST_SECRET_SIZE 32
#define LINKTEST_EXPORT_LABEL "EXPORTER-weir-link-test-1"

/* Link tests, served beside admission by the layer above (linktest.h,
 * linktest_server_service()): the listener admits a tester's connections
 * and hands them over through these, and never calls that layer itself.
 * server is the service's own state, made at the first test. */
struct listener_tests {
    int (*create)(void **server, struct weir_log *log, struct weir_error *err);
    /* the control connection (taken in every case); -1 with why: refused */
    int (*start)(void *server, struct transport *control, const struct codec_link *hello,
                 const unsigned char *secret, const struct sockaddr_storage *peer,
                 const char *peer_name, const char *key_id, char *why, size_t whylen);
    /* a data connection: 0 when joined (fd is the server's), -1 with why */
    int (*join)(void *server, int fd, const struct codec_link *join,
                const struct sockaddr_storage *peer, char *why, size_t whylen);
    void (*reap)(void *server);                  /* join a test that has ended */
    void (*destroy)(void *server, const char *why);   /* stop, join, free */
};

struct listener_config {
    bool raw;                  /* --raw: plain bytes, no greeting */
    bool plain_too;            /* greet, and admit plain bytes as well (as mbuffer) */
    struct tls_context *tls;   /* --key-file: the handshake every sender must pass */
    uint64_t epoch_records;    /* records per key epoch (seal.h) */
    double accept_timeout;     /* --accept-timeout; 0: wait for ever */
    double io_timeout;         /* --timeout: socket tuning, and a raw peer's first byte */
    double handshake_timeout;  /* a weir peer's greeting and header */
    /* a connection already made, heard beside the listening socket (whose
     * fd may be -1: none); trusted: ssh's channel, whose sender has no key
     * (weir.h, channel_fd).  -1: none. */
    int channel_fd;
    bool channel_trusted;
    const char *channel_name;
    bool allow_link_test;      /* --allow-link-test: serve link tests without a key */
    const struct listener_tests *tests;   /* who serves link tests; NULL: nobody */
    /* resuming (--reconnect): this receiver offers it in its greeting, and
     * keeps listening after it admits a sender that offers it too (for
     * that sender's return); resume_token: the session under way, whose
     * sender alone is admitted now ('R' with this token after its
     * greeting, or in its first sealed record), every other is refused */
    bool resume;
    const unsigned char *resume_token;
    /* with a key: the identity of the key the session began under; a
     * sender coming back under another key is refused, token or not */
    const char *resume_identity;
    /* resuming: this receiver reaches its sender again itself (it dialled
     * the connection; weir.h, input_redial), so it offers resuming without
     * a listening socket */
    bool redials;
    /* a service (weir --serve, with a key): its greeting says so, and a
     * sender's first sealed record may hold a target record ('P') after its
     * header (listener_peer.target) */
    bool serve;
    /* the given connection (channel_fd) was greeted already (a service's:
     * listener_serve_greeting) */
    bool channel_greeted;
    /* several connections a transfer (--streams): this receiver offers it
     * when it has a listening socket, and keeps that socket after it admits
     * a sender that spreads, for its other connections; join_token: the
     * session under way, which connections join ('J' with this token after
     * their greeting, or in their first sealed record) while every other
     * is refused; join_identity: with a key, the key it began under */
    bool streams;
    const unsigned char *join_token;
    const char *join_identity;
};

/* The greeting a service sends every connection it accepts, before it
 * reads the sender's greeting to route it (serve.h): a keyed receiver that
 * resumes and runs targets.  CODEC_GREETING_SIZE bytes. */
size_t listener_serve_greeting(unsigned char *out);

/* How a receiver busy with a transfer refuses a connection (in an 'S'
 * record, in place of its greeting); a sender coming back to resume takes
 * it as "not yet" and tries again. */
#define LISTENER_BUSY "busy: a transfer is under way here"

/* Refuse what waits on the listening socket of a receiver busy with a
 * transfer: each connection gets an 'S' record saying LISTENER_BUSY and is
 * closed, at most a few at a time; a --raw listener's are closed. */
void listener_refuse_waiting(struct tcp_listener *l, bool raw, struct weir_log *log);

/* What listener_admit() learnt of the connection it admitted. */
struct listener_peer {
    bool plain;                /* admitted as plain bytes (plain_too), to be taken as they
                                  are, never decoded */
    uint32_t features;         /* what its greeting offers (a weir sender's) */
    bool rejoined;             /* it resumed the session of resume_token */
    char identity[KEY_ID_MAX + 1];   /* with a key: the key it proved; else "" */
    bool listening;            /* the listening socket stays open (resuming, or joins) */
    bool resuming;             /* both ends offered resuming */
    bool spread;               /* the sender spreads the transfer: its other connections join */
    bool grow;                 /* and begins with one: the others join while it runs */
    bool joined;               /* it joined the session of join_token ('J') */
    unsigned join_index, join_count;   /* as which connection, of how many */
    char target[CODEC_TARGET_MAX + 1];   /* serve: the target it asked for; "": none */
    bool placed;               /* serve: it sent a target record (it reads a route in 'N') */
};

/* A connection admitted by one who runs the engine after it (weir --serve
 * admits its sender, then picks what the engine writes to): what
 * listener_admit() gave, handed to the engine whole (weir_config.admitted). */
struct listener_admitted {
    struct transport t;
    unsigned char ahead[LISTENER_AHEAD_MAX];
    size_t nahead;
    struct listener_peer peer;
};

/* 0 with t the admitted connection, or -1 with *err and errno: ECANCELED
 * (stop), ETIMEDOUT (cfg->accept_timeout passed), ENOTCONN (only the given
 * channel was to be heard, and it proved nothing), or a system call's. */
int listener_admit(struct tcp_listener *l, const struct listener_config *cfg, atomic_bool *stop,
                   struct weir_log *log, struct transport *t, unsigned char *ahead,
                   size_t *nahead, struct listener_peer *peer, struct weir_error *err);

/* The other connections of a spread transfer (peer->spread): on the
 * listening socket, with cfg->join_token (and join_identity) set and
 * accept_timeout the time they have, admit the connections that join it,
 * each into conns[its index] (conns[1 .. count-1], whose fd is -1 until
 * then) and told so, until all count - 1 are in; *count (0 at first) is
 * what the first said.  Any other connection is refused as listener_admit
 * refuses it, except, with cfg->resume_token set, the sender coming back
 * to resume the session ('R': it gave up on these connections while they
 * gathered).  0; 1 with *back that sender's new connection (the others
 * are the caller's to close); or -1 with *err and errno (ETIMEDOUT: not
 * all came). */
int listener_gather(struct tcp_listener *l, const struct listener_config *cfg,
                    atomic_bool *stop, struct weir_log *log, struct transport *conns,
                    unsigned *count, struct listener_admitted *back, struct weir_error *err);

/* The connections that join a spread transfer while it runs (peer->grow):
 * as listener_gather, but for as long as it runs (until *stop, looked at
 * every LISTENER_LATE_TICK_MS), each 'J' with join_token is asked about
 * (room(ctx): why the transfer cannot take it, or NULL), refused with that
 * reason, or answered and handed to place(ctx, t), which takes it (moved
 * out of *t) or closes it.
 * Several may be in their handshakes at once.  1 with *got the sender
 * coming back to resume (resume_token); -1 with *err and errno
 * (ECANCELED: stop). */
#define LISTENER_LATE_TICK_MS 100
typedef const char *(*listener_room_fn)(void *ctx);
typedef void (*listener_place_fn)(void *ctx, struct transport *t);
int listener_join_late(struct tcp_listener *l, const struct listener_config *cfg,
                       atomic_bool *stop, struct weir_log *log, listener_room_fn room,
                       listener_place_fn place, void *ctx, struct listener_admitted *got,
                       struct weir_error *err);

#endif
