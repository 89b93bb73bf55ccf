/*
 * writer_int.h - what the parts of an output's writer share: the thread
 * and its data (writer.c, the top), records sealed ahead by the workers
 * (sealing.c), the connection to a weir receiver as the engine drives it:
 * opening it, the answer and reconnecting, over the link layer's sender
 * and back channel (connection.c), what a receiver may
 * lack and sending it again (resume.c), and what all of them use
 * (output.c, the bottom).  All run on the output's writer thread unless
 * they say otherwise (the back channel's, or with the lock held).
 */
#ifndef WEIR_WRITER_INT_H
#define WEIR_WRITER_INT_H

#include "engine/pipeline_int.h"
#include "format/codec.h"

#define CONSUMER_PATIENCE 2.0   /* seconds a consumer that closed its input has to exit */

/* resuming (--reconnect): */
#define RESUME_MARKS 65536      /* records the receiver may not have confirmed yet */
/* the smallest buffer that offers resuming: what travels unconfirmed stays
 * in it, and the receiver confirms every CODEC_CONFIRM_BYTES, so a smaller
 * one would wait for the receiver's connection to go idle before each
 * confirmation (-m 1M -s 64k: 5 times slower) */
#define RESUME_MIN_BUFFER (2u * CODEC_CONFIRM_BYTES)
#define RESUME_MIN_BLOCKS 4
#define STEP_AGAIN 3            /* writer_loop: the record a resumed connection began with is
                                   out; the workers may seal the rest again */

/* ---- output.c ---- */
/* A failed write (what: the operation): the output's error, named. */
int write_error(struct output *o, struct weir_error *e, const char *what);
/* A consumer that stopped reading: what it ended with says more than EPIPE. */
int consumer_quit(struct output *o, struct weir_error *e);
/* The back channel found the connection broken while this writer waited
 * for data: a failure the writer reconnects for. */
int broke_while_idle(struct output *o, struct weir_error *e);
/* Whether the receiver waits for this sender's word that it read the
 * answer: both offer CODEC_FEATURE_ANSWER_READ (this end always does), and
 * the session may resume (the receiver named it), since only then can a
 * receiver give an answer lost on the way again.  Lock held, or the
 * writer's own thread (the session is named long before the end). */
bool says_read(const struct output *o);
/* A hole this output cannot pass (a -z stream to an older receiver). */
int refuse_hole(struct output *o, struct weir_error *e);
/* Decide how this output passes holes, once it is open and greeted. */
void plan_holes(struct output *o);
/* Sample its connection's path for snapshots (os.h, os_tcp_stats), when
 * it is one and the last sample is old enough: whether it did. */
bool sample_path(struct output *o);

/* ---- resume.c ---- */
/* Stop keeping what the receiver has not confirmed: it cannot resume (it
 * never named the session).  Lock held. */
void give_up_resuming_locked(struct output *o);
/* A record of the stream begins here: note it, so that the stream can be
 * sent again from any byte from here on.  exact: a stored block's data
 * bytes.  Waits while the receiver has confirmed too little for the notes
 * to hold another. */
int mark(struct output *o, enum mark_kind kind, uint64_t exact);
/* A record was sent whole: the next one begins here.  Noting it now lets
 * the receiver's confirmation of everything sent free everything (the
 * hold moves up to the writer), whether it comes after this or came
 * already.  When the notes are full the next record's own note waits
 * instead.  Lock held. */
void boundary_locked(struct output *o);
/* The receiver holds the stream's first `held` bytes.  Lock held. */
void confirmed_locked(struct output *o, uint64_t held);
/* A new connection of the session: the receiver holds the stream's first
 * `at` bytes.  Put the cursor and the session's counts back where the
 * record holding that byte began, and skip what the receiver has of it;
 * what follows is sent as before.  A header resent at once. */
int resume_at(struct output *o, uint64_t at, struct weir_error *e);
/* Send the recipe's next record again, read from the input: the same cut
 * and the same bytes as the first time.  The next note's chain proves the
 * bytes before any is sent, so a file changed since fails the stream
 * rather than send what was never there (the chain folds in each record's
 * sum: this is why a sealed stream, whose records carry none, holds). */
int reread_record(struct output *o, int tmo, struct weir_error *e);

/* ---- sealing.c ---- */
/* The writer of an encrypted output, with workers: it keeps up to
 * SEAL_AHEAD records queued for them, and sends them in order as they come
 * back, so the sealing runs on -T threads while this one only writes. */
int sealed_loop(struct output *o, struct weir_error *e);

/* ---- grow.c ---- */
/* --streams auto (the session's grow): the spread session begins with one
 * connection, and the writer, with each new sample of its paths
 * (grow_tick after sample_path took one), asks the rule (growth.h) whether
 * to take more.  They join on a thread of their
 * own while the stream goes on, and are added to the stripe once joined.
 * Writer's thread. */
void grow_begin(struct output *o);
void grow_tick(struct output *o);
/* Wait for connections joining now and add them (or let them go): before
 * the stream's end, a break, or the close.  No more join after it until
 * grow_begin. */
void grow_end(struct output *o);

/* ---- connection.c ---- */
/* After the last byte: end the stream and wait for the receiver's verdict.
 * --timeout bounds the silence, not the wait: a receiver draining into a
 * slow consumer keeps saying so.  A receiver that waits for this sender's
 * word ('D') gets no end of file before it: the trailer ended the stream. */
int await_answer(struct output *o, struct weir_error *e);
/* A --raw sender cannot know that its data arrived, but it can know that
 * it did not: a weir listener (which greets, then refuses plain bytes) or
 * a reset.  It reads until the peer closes, for a few seconds at most;
 * nc -l, socat and mbuffer close once they have read everything. */
int raw_confirm(struct output *o, struct weir_error *e);
/* Connect (for -O), hear the receiver's greeting, begin the stream. */
int writer_open(struct output *o, bool once, struct weir_error *e);
/* Whether the connection broke under a session that may resume. */
bool connection_broke(struct output *o);
/* ---- joining.c ---- */
/* What this sender asks of its receiver (link/sender.h). */
struct sender_terms output_terms(const struct output *o);
/* Join connections from .. count - 1 (conns[i], each as connection i of
 * count) to the spread session in parallel (link/sender.h), each on a
 * thread of its own, so that all take one round of handshakes; rcs[i] says
 * how each went.  STEP_OK when all joined, else the first failure's step
 * with *e.  The connections go to the first one's peer: the same receiver.
 * Any thread. */
int connection_join(struct output *o, double limit, struct transport *conns, int from,
                    int count, int *rcs, struct weir_error *e);
/* Let go of the broken connection: its back channel, the records the
 * workers sealed for it (under its keys, which go with it), the socket. */
void let_go(struct output *o);
/* The connection broke (a reset, a cut, --timeout, the receiver's
 * silence): connect again to where the receiver was, for up to
 * --reconnect seconds, and go on from where it stopped.  A refused
 * connection ends the wait at once: nothing listens there any more, so the
 * receiver and its session are gone. */
int reconnect(struct output *o, struct weir_error *e);

#endif
