/*
 * receiver.h - a weir receiver's side of a session: admitting its sender
 * (through listener.h) and naming the session, what it tells the sender
 * while the stream arrives (keepalives, confirmations), taking a sender
 * back after a break (on the listening socket, or by dialling it again: a
 * pull through ssh), and the answer with its way home: waiting for the
 * sender's word that it read it, taking back a sender that lost it, giving
 * it again.  Everything a receiver says to its sender, and every way it
 * takes one back, is here; the engine's reader only reads the stream.
 *
 * Contract: the engine owns one struct receiver and registers, once,
 * before the first admission (struct receiver_owner): the lock that guards
 * the fields marked "lock", the slot its input lives in (an admitted
 * connection is put there, under the lock), the counters of the input's
 * bytes on the wire and of the stream this end holds, the listener's
 * settings, and the callback that dials the sender again (NULL: it comes
 * back to the listening socket).  The receiver never takes the engine's
 * other state, and calls up only through the dial.  The engine opens the
 * listening socket (r->listener) and closes it at the end; the receiver
 * closes it once no sender can come back (or, when the transfer is spread
 * over several connections and cannot resume, once they all joined).  A
 * sender that spreads its transfer (CODEC_FEATURE_STREAMS) is named even
 * when it cannot resume, and its other connections join on the listening
 * socket before the stream goes on (listener_gather); the input is then
 * all of them (stripe.h), and what this end says to the sender goes on the
 * first (stripe_first).  The reader thread admits,
 * confirms and takes back; the main thread sends keepalives and, once the
 * reader is over, the answer.  Failures are -1 with errno and a
 * weir_error, or a step's STEP_*; stop (or halt) ends every wait.
 */
#ifndef WEIR_RECEIVER_H
#define WEIR_RECEIVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "crypto/keyfile.h"
#include "format/codec.h"
#include "link/listener.h"
#include "link/session.h"
#include "transport/transport.h"
#include "weir/error.h"
#include "weir/log.h"

#define RECEIVER_ACK_MS 5000      /* for the sender's host to acknowledge the answer */
#define RECEIVER_HOME_SECS 30.0   /* for a sender to come back for the answer, at most */
#define RECEIVER_CAUSE_MAX 120    /* a break's cause, in words */

/* A receiver that dials its sender (weir_config.input_redial). */
typedef int (*receiver_dial_fn)(void *ctx, double timeout, atomic_bool *stop, int *fd,
                                struct weir_error *why);

struct receiver_owner {
    pthread_mutex_t *lock;
    struct transport *in;       /* lock: the input; an admitted connection goes here */
    _Atomic uint64_t *wire_rx;  /* the input's bytes on the wire (snapshots) */
    _Atomic uint64_t *held;     /* the stream's bytes this end holds (where it resumes) */
    atomic_bool *stop;          /* the engine is stopping: every read ends */
    double *gap_since;          /* lock: when the input broke (snapshots' gap) */
    struct listener_config cfg; /* admission's settings; the resume fields, channel_fd and
                                   accept_timeout of a taking back are set here */
    receiver_dial_fn dial;      /* NULL: the sender comes back to the listening socket */
    void *dial_ctx;
    uint32_t route;             /* a service's route to this session, for a placed sender */
    double reconnect;           /* --reconnect: bounds the wait for the answer's way home */
    unsigned stripe_window;     /* a spread transfer: chunks held out of order, at most */
    unsigned *streams;          /* lock: how many connections the transfer came over */
    struct weir_log *log;
};

struct receiver {
    struct receiver_owner own;        /* receiver_register */
    struct tcp_listener listener;     /* opened by the engine (fd -1: none) */
    struct session_in back;           /* lock: what this end says to the sender */
    unsigned char ahead[LISTENER_AHEAD_MAX];   /* read while admitting, handed on first */
    size_t nahead, ahead_pos;
    bool plain;                       /* admitted as plain bytes (plain_too) */
    char identity[KEY_ID_MAX + 1];    /* with a key, the session's key's */
    unsigned char token[CODEC_TOKEN_SIZE];   /* the session's name */
    bool resumable;                   /* lock: the sender was told the session's token */
    uint64_t confirmed;               /* lock: what the last confirmation said */
    uint64_t confirm_every;           /* CODEC_CONFIRM_BYTES, or _REREAD_BYTES */
    bool answer_word;                 /* the sender says when it has read the answer */
    bool answer_home;                 /* lock while the reader runs, then the main
                                         thread's: the stream ended whole; the listener
                                         and token stay until the sender has the answer */
    double answer_until;              /* the end of the wait for the sender's word */
    /* a transfer that grows while it runs (listener_peer.grow): the thread
     * that takes its joins (joins.h), and the sender it took back */
    bool grows;                       /* the listening socket stays for joins */
    pthread_t joins;
    bool joins_running;
    atomic_bool joins_stop;
    atomic_bool joins_over;     /* the joins thread returned: it no longer
                                 * answers on the listening socket */
    struct listener_config joins_cfg;
    struct listener_admitted returned;
    bool has_returned;                /* lock */
};

/* Before anything else: no listener, no connection, nothing said. */
void receiver_init(struct receiver *r);
/* Once, before the first admission. */
void receiver_register(struct receiver *r, const struct receiver_owner *own);

/* Admit the first sender that proves itself (listener.c), or take the one
 * a service admitted (given; NULL: none), hearing channel_fd (weir.h; -1:
 * none) beside the listening socket.  A sender that may resume is told the
 * session's token: a random 128-bit name that only it (and, without a key,
 * whoever reads the connection) learns.  STEP_OK, STEP_STOP (stop), or
 * STEP_FAIL with *e. */
int receiver_admit(struct receiver *r, int channel_fd, struct listener_admitted *given,
                   atomic_bool *stop, struct weir_error *e);

/* Let the broken connection go (reset, so that its sender knows; since > 0:
 * the break's time, which starts the engine's gap in the same lock and the
 * window of a redial; 0: no gap is counted) and take
 * the session's sender back: on the listening socket (refusing any other)
 * for up to window seconds, or by dialling it again.  0 with the new
 * connection as the input and the sender told how much of the stream this
 * end holds (where it resumes); -1 with errno ECONNREFUSED (the sender is
 * gone), ETIMEDOUT, ECANCELED (stop) or another, and *e. */
int receiver_readmit(struct receiver *r, double since, double window, atomic_bool *stop,
                     struct weir_error *e);

/* The reader's source: one read of the input (timeout_ms: -1 for none),
 * as its transport reads, and what the read means for the session.  ended:
 * the stream's trailer was read.  While a session may resume, a connection
 * silent for session_silence(--timeout) while someone knocks is taken for
 * dead.
 * *how: RECEIVER_BROKE, the read broke a session that may resume before
 * its end (a reset, a cut, a timeout, an encrypted stream cut short, the
 * sender's end closing it): cause says how, and receiver_readmit takes the
 * sender back; RECEIVER_BROKE_WHOLE, the connection broke after the whole
 * stream arrived, which ends the stream as the end of file does (the
 * sender comes back for its answer); else RECEIVER_READ, the read as it
 * is. */
enum receiver_read { RECEIVER_READ, RECEIVER_BROKE, RECEIVER_BROKE_WHOLE };
ssize_t receiver_read(struct receiver *r, void *buf, size_t n, int timeout_ms, bool ended,
                      char cause[RECEIVER_CAUSE_MAX], enum receiver_read *how);

/* Whether the session may resume (the lock is taken here). */
bool receiver_resumable(struct receiver *r);
/* The reader holds `held` bytes of the stream: tell a sender that may
 * resume, once confirm_every bytes went unconfirmed, or now (force).
 * Whether some of them are still unconfirmed (a confirmation that cannot
 * go now is left for a later one, which says more). */
bool receiver_confirm(struct receiver *r, uint64_t held, bool force);
/* The main thread's records, lock held: a keepalive (how far the outputs
 * wrote, what this end is doing), and what the reader has not confirmed. */
void receiver_inform_locked(struct receiver *r, uint64_t written, enum session_phase phase,
                            double now);
/* Whether someone waits on the listening socket of a session that may
 * resume (its sender, come back, finds the connection dead). */
bool receiver_knocked(struct receiver *r);
/* While the session's connection brings data, anyone else who connects is
 * refused at once: told a transfer is under way. */
void receiver_refuse_others(struct receiver *r);
/* What the listener read while the sender proved itself, handed on first:
 * the bytes taken into buf, 0 when none is left. */
size_t receiver_take_ahead(struct receiver *r, void *buf, size_t n);
bool receiver_ahead_left(const struct receiver *r);

/* No more connections join the transfer while it runs (joins.h): the
 * thread that takes them is stopped.  Before the listening socket closes;
 * nothing when it does not run. */
void receiver_stop_joins(struct receiver *r);

/* The stream is over (whole: ended whole and verified): nothing more is
 * confirmed or resumed.  Whether the sender may still come back for the
 * answer (answer_home); when not, the listener and the token go now. */
bool receiver_stream_over(struct receiver *r, bool whole);

/* The answer the main thread gives the sender once every output is done. */
struct receiver_verdict {
    int code;               /* 0: success; else the exit status */
    const char *msg;        /* the failure's message; NULL on success */
    uint64_t bytes, chain;  /* the stream received, and its chain */
    bool whole;             /* a success of the whole stream (a sender's word counts) */
    bool wanted;            /* the sender can still want it: not a stop of this end */
};

/* Send the answer: true when it went (the main thread's, once the reader
 * is over: nothing else writes to the sender then).  A sender
 * that will say it read a whole stream's success gets one window from the
 * first answer for that word, also on a connection it comes back on. */
bool receiver_answer(struct receiver *r, const struct receiver_verdict *v, atomic_bool *halt);
/* The connection broke once the whole stream was in, and the outputs may
 * take longer than the sender's --reconnect: take the sender back now (on
 * the reader's thread), so that it is told the whole stream is held and
 * kept informed until the answer.  One that does not come back gets none. */
void receiver_hold_for_answer(struct receiver *r, atomic_bool *stop);
/* After receiver_answer (sent: it went), for a session whose stream ended
 * whole: until the answer reached the sender, take back each connection it
 * comes back on and give it the answer again, within one window; then the
 * listener and the token go. */
void receiver_answer_home(struct receiver *r, bool sent, const struct receiver_verdict *v,
                          atomic_bool *halt);

/* Whether the answer just written on `in` reached an older sender: every
 * byte written on the connection, the answer last, acknowledged by the
 * sender's TCP within RECEIVER_ACK_MS (its end of file proves nothing: it
 * half-closed after its trailer, long before the answer).  A connection
 * that is not a socket (a relay) counts once its other end closes.  halt
 * ends the wait. */
bool receiver_answer_acked(struct transport *in, atomic_bool *halt);

#endif
