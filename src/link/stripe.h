/*
 * stripe.h - one transfer over several TCP connections (--streams).  On a
 * long path one connection moves at most its window each round trip;
 * several together fill the link.  Everything after the stream's header
 * is cut into numbered chunks (codec_chunk), dealt out to whichever
 * connection has room, and put back in order at the other end, so a slow
 * connection carries fewer chunks instead of holding the others back.
 *
 * Contract: stripe_out() and stripe_in() take n connections (moved in;
 * each may be sealed) and make *st a transport of its own kind that the
 * session layer and the engine use as they use one connection:
 *
 *   - a spreading end (the sender's): writev copies what it is given into
 *     chunks, up to CODEC_CHUNK_MAX each, and returns; a thread for each
 *     connection takes the oldest chunk waiting whenever its connection
 *     has room and writes it whole.  At most 2n chunks wait, so the writer
 *     blocks, as it would on one connection, when all are full.
 *     half_close sends every chunk, ends each connection not let go
 *     (stripe_let_go) with its END record when sealed, and half-closes it;
 *   - a gathering end (the receiver's): a thread for each connection reads
 *     its chunks into a window of `window` chunk slots, and read hands out
 *     the stream in order.  A connection whose next chunk lies beyond the
 *     window is not read until the stream catches up, so the reorder memory
 *     is bounded by window chunks and TCP holds the rest back; the chunk
 *     the stream waits for is always at the head of some connection, so
 *     this never stalls.  Chunks out of a connection's order, repeated,
 *     already handed out, or not chunks at all fail the stream (EPROTO);
 *     read returns 0 once every connection ended;
 *   - the first connection also carries the session's records the other
 *     way (the receiver's keepalives and answer): the spreading end's read
 *     and wait read it, the gathering end's writev writes it.
 *
 * A connection that fails fails the transport: the next call returns -1
 * with its errno, and stripe_why() says which connection and how.  abort
 * resets every connection; close stops the threads and closes them all,
 * reporting the first connection's close.
 */
#ifndef WEIR_STRIPE_H
#define WEIR_STRIPE_H

#include <stdatomic.h>
#include <stdbool.h>

#include "format/codec.h"
#include "transport/transport.h"
#include "weir/error.h"

/* halt: the owner's stop (the output's); timeout_ms: how long a connection
 * may make no progress (-1: no limit).  0, or -1 with *err (the
 * connections are closed then). */
int stripe_out(struct transport *st, struct transport *conns, int n, int timeout_ms,
               atomic_bool *halt, struct weir_error *err);
int stripe_in(struct transport *st, struct transport *conns, int n, unsigned window,
              atomic_bool *stop, struct weir_error *err);

/* A connection more for a running stripe (a join while the transfer runs:
 * CODEC_FEATURE_GROW), moved in and started as the others were; from now
 * on chunks go out on it too, or are read from it.  Refused (conn closed)
 * once the stripe failed or ended, at CODEC_STREAMS_MAX connections, and
 * at a gathering end whose window has no two chunks for it.  Safe beside
 * the owner's calls.  0, or -1 with *err. */
int stripe_add(struct transport *st, struct transport *conn, struct weir_error *err);
/* A spreading end carries on over its first `keep` connections (at least
 * one): each later one sends the chunk it holds, then ends as at the
 * stream's end (its END record when sealed, then a half-close), and its
 * peer reads a clean end there while the others go on.  It fails st as
 * any write would if it cannot end.  How many were let go (0 at a
 * gathering end, or when no more than keep carry it).  Safe beside the
 * owner's calls. */
int stripe_let_go(struct transport *st, int keep);
/* Why st could not take a connection more now, in words; NULL: it could. */
const char *stripe_room(struct transport *st);

/* How many connections carry st (1 when it is not spread), and the
 * descriptor of connection i (its path: os_tcp_stats). */
int stripe_count(const struct transport *st);
int stripe_fd(const struct transport *st, int i);
/* The first connection, which carries the session's records the other
 * way: a receiver's keepalives and answer are sealed for it and written
 * to it directly (session.h, struct session_in).  st itself when it is not
 * spread. */
struct transport *stripe_first(struct transport *st);
/* The spreading end's last record, which goes on the first connection
 * alone, after every chunk (a sender's 'D', which its receiver reads
 * there): once the chunks are all sent, rec is written to the first
 * connection as its last record (with its END when sealed).  Not spread:
 * rec is written to st, as its last record.  0, or -1 with errno. */
int stripe_last_record(struct transport *st, const void *rec, size_t n, int timeout_ms,
                       atomic_bool *stop);
/* A gathering end that reads no more (the stream ended, the answer goes
 * out): its threads stop reading, so that the first connection's next
 * bytes are the owner's to read there (stripe_first).  Anything else:
 * nothing. */
void stripe_hush(struct transport *st);
/* What failed it, naming the connection ("connection 3 of 4: ..."); ""
 * while nothing did. */
const char *stripe_why(const struct transport *st);

#endif
