/*
 * resume.c - resuming (--reconnect) on the sender's side: what the receiver
 * may lack (the marks of what went out, what it confirmed, where a resumed
 * connection begins), and sending it again from the input when the input
 * can be read again.  See writer_int.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <stdio.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <openssl/crypto.h>

#include "base/io.h"
#include "base/sync.h"
#include "crypto/secret.h"
#include "format/codec.h"
#include "format/sparse.h"

#include "engine/writer_int.h"

/* ---- resuming: what the receiver may lack ---------------------------------- */

/* Stop keeping what the receiver has not confirmed: it cannot resume (it
 * never named the session).  Lock held. */
void give_up_resuming_locked(struct output *o)
{
    o->may_resume = false;
    o->marks_count = 0;
    if (o->hold.live)
        ring_drop_locked(&o->p->ring, &o->hold);
}

/* Note that a record begins here (the writer's cursor, the session's
 * counts), or update the note already there.  False: the notes are full.
 * Lock held. */
static bool note_locked(struct output *o, enum mark_kind kind, uint64_t exact)
{
    if (o->marks_count > 0) {
        struct resume_mark *last =
            &o->marks[(o->marks_head + o->marks_count - 1) % o->marks_cap];
        if (last->at == o->session.sent) {
            last->kind = kind;
            last->exact = exact;
            return true;
        }
    }
    if (o->marks_count == o->marks_cap)
        return false;
    /* a record sent again from the input begins where the recipe says; the
     * cursor waits further on, where the buffer takes over */
    o->marks[(o->marks_head + o->marks_count) % o->marks_cap] = (struct resume_mark){
        .at = o->session.sent, .seq = o->cur.seq, .off = o->cur.off,
        .bytes = o->replaying ? o->rp_bytes : o->cur.bytes,
        .holes = o->replaying ? o->rp_holes : o->cur.holes, .sseq = o->session.seq,
        .total = o->session.total, .chain = o->session.chain, .exact = exact, .kind = kind};
    o->marks_count++;
    return true;
}

/* A record of the stream begins here: note it, so that the stream can be
 * sent again from any byte from here on.  exact: a stored block's data
 * bytes.  Waits while the receiver has confirmed too little for the notes
 * to hold another. */
int mark(struct output *o, enum mark_kind kind, uint64_t exact)
{
    struct pipeline *p = o->p;
    sync_lock(&p->lock);
    while (o->may_resume && !note_locked(o, kind, exact)) {
        if (!o->bc.resumable) {
            give_up_resuming_locked(o);
            break;
        }
        if (atomic_load(&o->halt) || o->bc.broken) {
            sync_unlock(&p->lock);
            errno = o->bc.broken ? EPIPE : ECANCELED;
            return -1;
        }
        if (!o->told_waiting) {
            o->told_waiting = true;
            log_msg(p->log, LOG_INFO, "%s: waiting for the receiver to confirm what it holds",
                    o->t.name);
        }
        sync_wait(&p->ring.data_cv, &p->lock);
    }
    sync_unlock(&p->lock);
    return 0;
}

/* Let go of the records before the one the receiver's confirmed byte is
 * in: the hold moves up to that record's start.  Lock held. */
static void release_confirmed_locked(struct output *o)
{
    if (o->marks_count == o->marks_cap)
        sync_broadcast(&o->p->ring.data_cv);   /* mark() waits for room there */
    while (o->marks_count >= 2 &&
           o->marks[(o->marks_head + 1) % o->marks_cap].at <= o->confirmed) {
        o->marks_head = (o->marks_head + 1) % o->marks_cap;
        o->marks_count--;
    }
    if (o->marks_count == 0 || o->reread)
        return;
    const struct resume_mark *m = &o->marks[o->marks_head];
    if (m->seq != o->hold.seq || m->off != o->hold.off)
        ring_cursor_place_locked(&o->p->ring, &o->hold, m->seq, m->off, m->bytes, m->holes,
                                 true);
}

/* A record was sent whole: the next one begins here.  Noting it now lets
 * the receiver's confirmation of everything sent free everything (the
 * hold moves up to the writer), whether it comes after this or came
 * already.  When the notes are full the next record's own note waits
 * instead.  Lock held. */
void boundary_locked(struct output *o)
{
    if (o->may_resume && o->piece_at == 0 && note_locked(o, MARK_RECORD, 0))
        release_confirmed_locked(o);
}

/* The receiver holds the stream's first `held` bytes.  Lock held. */
void confirmed_locked(struct output *o, uint64_t held)
{
    if (!o->may_resume || held <= o->confirmed)
        return;
    o->confirmed = held;
    release_confirmed_locked(o);
}

/* A new connection of the session: the receiver holds the stream's first
 * `at` bytes.  Put the cursor and the session's counts back where the
 * record holding that byte began, and skip what the receiver has of it;
 * what follows is sent as before.  A header resent at once. */
/* The note of the record that byte `at` of the stream is in, checked
 * against what the receiver confirmed and what was sent (lock held): its
 * index, or -1 with *e. */
static long find_mark_locked(struct output *o, uint64_t at, struct weir_error *e)
{
    uint64_t sent = o->session.sent;
    for (size_t i = o->marks_count; i-- > 0;) {
        if (o->marks[(o->marks_head + i) % o->marks_cap].at > at)
            continue;
        if (at < o->confirmed || at > sent)
            return error_set(e, WEIR_EXIT_NETWORK, "%s: the receiver asked to resume at byte "
                             "%llu of the stream, which is not between the %llu it confirmed "
                             "and the %llu sent", o->t.name, (unsigned long long)at,
                             (unsigned long long)o->confirmed, (unsigned long long)sent), -1;
        return (long)i;
    }
    return error_set(e, WEIR_EXIT_INTERNAL, "%s: no note of the record that byte %llu of the "
                     "stream is in", o->t.name, (unsigned long long)at), -1;
}

/* A break while a recipe was being sent again leaves the notes ending at
 * the record being sent again: the rest of that recipe follows them (lock
 * held).  How many recipe entries follow, or -1 with *e. */
static long recipe_tail_locked(struct output *o, size_t noted, struct weir_error *e)
{
    if (!o->replaying)
        return 0;
    const struct resume_mark *now = &o->recipe[o->recipe_at];
    const struct resume_mark *lastnote =
        &o->marks[(o->marks_head + o->marks_count - 1) % o->marks_cap];
    size_t tail = o->recipe_n - o->recipe_at - 1;
    if (lastnote->bytes != now->bytes || lastnote->holes != now->holes ||
        noted + tail > RESUME_MARKS)
        return error_set(e, WEIR_EXIT_INTERNAL, "%s: the notes of what was sent again end at "
                         "byte %llu of the input, not at %llu", o->t.name,
                         (unsigned long long)(lastnote->bytes + lastnote->holes),
                         (unsigned long long)(now->bytes + now->holes)), -1;
    memmove(o->recipe + noted, o->recipe + o->recipe_at + 1, tail * sizeof *o->recipe);
    return (long)tail;
}

/* Re-reading: the records from note `found` to the cursor's are read again
 * from the input; the cursor stays, and the buffer goes on from there
 * (lock held).  0, or -1 with *e. */
static int plan_reread_locked(struct output *o, size_t found, struct weir_error *e)
{
    size_t noted = o->marks_count - found;
    long tail = recipe_tail_locked(o, noted, e);
    if (tail < 0)
        return -1;
    for (size_t i = 0; i < noted; i++)
        o->recipe[i] = o->marks[(o->marks_head + found + i) % o->marks_cap];
    o->recipe_n = noted + (size_t)tail;
    for (size_t i = 0; i < o->recipe_n; i++)
        if (o->recipe[i].kind == MARK_TRAILER) {
            o->recipe_n = i + 1;   /* the end: writer_end sends the trailer again */
            break;
        }
    o->recipe_at = o->recipe[0].kind == MARK_HEADER ? 1 : 0;
    const struct resume_mark *last = &o->recipe[o->recipe_n - 1];
    if (last->bytes != o->cur.bytes || last->holes != o->cur.holes)
        return error_set(e, WEIR_EXIT_INTERNAL, "%s: the notes of what was sent end at byte "
                         "%llu of the input, the buffer's cursor at %llu", o->t.name,
                         (unsigned long long)(last->bytes + last->holes),
                         (unsigned long long)(o->cur.bytes + o->cur.holes)), -1;
    o->replaying = o->recipe_at + 1 < o->recipe_n;
    if (o->replaying) {
        o->rp_bytes = o->recipe[o->recipe_at].bytes;
        o->rp_holes = o->recipe[o->recipe_at].holes;
    }
    return 0;
}

/* The session's counts back where note m's record began; `at` is what the
 * receiver holds, so what it has of that record is skipped. */
static void session_back_to(struct output *o, const struct resume_mark *m, uint64_t at,
                            bool replaying)
{
    o->session.seq = m->sseq;
    o->session.total = m->total;
    o->session.chain = m->chain;
    o->session.sent = m->at;
    o->session.skip = at - m->at;
    o->session.npending = 0;
    o->piece_at = 0;
    /* a stored block the receiver has part of is cut as before; one it
     * lacks whole may be cut anew */
    o->exact = m->kind == MARK_RECORD && at > m->at && !replaying ? m->exact : 0;
}

int resume_at(struct output *o, uint64_t at, struct weir_error *e)
{
    struct pipeline *p = o->p;
    sync_lock(&p->lock);
    long found = find_mark_locked(o, at, e);
    if (found < 0 || (o->reread && plan_reread_locked(o, (size_t)found, e))) {
        sync_unlock(&p->lock);
        return STEP_FAIL;
    }
    struct resume_mark m = o->marks[(o->marks_head + (size_t)found) % o->marks_cap];
    /* what is sent again is noted again; the note of the record resumed at
     * stays (sending it updates it in place), so that a break before it
     * goes out again still finds where to resume */
    o->marks_count = (size_t)found + 1;
    if (o->cur.bytes > o->bytes_peak)
        o->bytes_peak = o->cur.bytes;
    if (!o->reread)
        ring_cursor_place_locked(&p->ring, &o->cur, m.seq, m.off, m.bytes, m.holes, true);
    bool replaying = o->replaying;
    uint64_t again = replaying ? o->cur.bytes + o->cur.holes - o->rp_bytes - o->rp_holes : 0;
    sync_unlock(&p->lock);
    if (replaying)
        log_msg(p->log, LOG_INFO, "%s: reading %llu bytes of %s again to send them",
                o->name, (unsigned long long)again, p->in.name);
    session_back_to(o, &m, at, replaying);
    if (m.kind == MARK_HEADER) {
        if (mark(o, MARK_HEADER, 0) ||
            session_resend_header(&o->session, io_timeout_ms(p, &o->t), &o->halt, e))
            return errno == ECANCELED ? STEP_STOP : write_error(o, e, "write");
        sync_lock(&p->lock);
        boundary_locked(o);
        sync_unlock(&p->lock);
    }
    return STEP_OK;
}

/* ---- resuming: sending again from the input -------------------------------- */

/* len bytes of the input from byte `at` of what was read, into buf. */
static int reread_bytes(struct output *o, unsigned char *buf, size_t len, uint64_t at,
                        struct weir_error *e)
{
    struct pipeline *p = o->p;
    for (size_t got = 0; got < len;) {
        ssize_t r = pread(p->reread_fd, buf + got, len - got,
                          (off_t)(p->reread_base + at + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return error_sys(e, p->in.status, errno, "%s: reading it again for %s", p->in.name,
                             o->name);
        if (r == 0)
            return error_set(e, WEIR_EXIT_INPUT, "%s: shorter than when it was sent: %s cannot "
                             "be sent what its receiver lacks (from byte %llu of it)",
                             p->in.name, o->name, (unsigned long long)(at + got));
        got += (size_t)r;
    }
    return 0;
}

/* The input's bytes [at, at + len) that were sent as a hole still hold
 * only zeros: a hole still, or data of zeros (--sparse). */
static int still_zeros(struct output *o, uint64_t at, uint64_t len, struct weir_error *e)
{
    struct pipeline *p = o->p;
    off_t d = lseek(p->reread_fd, (off_t)(p->reread_base + at), SEEK_DATA);
    if (d < 0 && errno == ENXIO)
        return 0;   /* no data from there to the end */
    uint64_t from = d < 0 ? at : (uint64_t)d - p->reread_base;
    while (from < at + len) {
        size_t n = at + len - from < o->session.block_max ? (size_t)(at + len - from)
                                                          : o->session.block_max;
        if (reread_bytes(o, o->replay_buf, n, from, e))
            return -1;
        if (!sparse_all_zero(o->replay_buf, n)) {
            size_t i = 0;
            while (!o->replay_buf[i])
                i++;
            return error_set(e, WEIR_EXIT_INPUT, "%s: changed since it was sent (byte %llu, a "
                             "hole then): %s cannot be sent what its receiver lacks",
                             p->in.name, (unsigned long long)(from + i), o->name);
        }
        from += n;
    }
    return 0;
}

/* Send the recipe's next record again, read from the input: the same cut
 * and the same bytes as the first time.  The next note's chain proves the
 * bytes before any is sent, so a file changed since fails the stream
 * rather than send what was never there (the chain folds in each record's
 * sum: this is why a sealed stream, whose records carry none, holds). */
int reread_record(struct output *o, int tmo, struct weir_error *e)
{
    struct pipeline *p = o->p;
    const struct resume_mark a = o->recipe[o->recipe_at], b = o->recipe[o->recipe_at + 1];
    uint64_t from = a.bytes + a.holes, data = b.bytes - a.bytes, hole = b.holes - a.holes;
    if (b.bytes < a.bytes || b.holes < a.holes || (data > 0) == (hole > 0) ||
        data > o->session.block_max || o->session.seq != a.sseq ||
        o->session.chain != a.chain)
        return error_set(e, WEIR_EXIT_INTERNAL, "%s: the notes of what was sent do not make "
                         "a record at byte %llu of the input", o->t.name,
                         (unsigned long long)from), STEP_FAIL;
    ssize_t w = 0;
    if (data > 0) {
        if (reread_bytes(o, o->replay_buf, (size_t)data, from, e))
            return STEP_FAIL;
        uint64_t sum = codec_block_hash(o->replay_buf, (size_t)data, a.sseq);
        if (codec_chain(a.chain, sum, (uint32_t)data) != b.chain)
            return error_set(e, WEIR_EXIT_INPUT, "%s: changed since it was sent (bytes %llu "
                             "to %llu): %s cannot be sent what its receiver lacks",
                             p->in.name, (unsigned long long)from,
                             (unsigned long long)(from + data), o->name), STEP_FAIL;
        if (mark(o, a.kind, a.exact))
            return write_error(o, e, "write");
        w = session_frame(&o->session, o->replay_buf, (size_t)data, tmo, &o->halt);
    } else {
        if (still_zeros(o, from, hole, e))
            return STEP_FAIL;
        if (mark(o, a.kind, a.exact))
            return write_error(o, e, "write");
        if (o->holes == HOLES_RECORD)
            w = session_hole(&o->session, 0, hole, tmo, &o->halt) ? -1 : (ssize_t)hole;
        else if (hole <= SPARSE_ZEROS_SIZE)
            w = session_frame(&o->session, sparse_zeros(), (size_t)hole, tmo, &o->halt);
        else
            return error_set(e, WEIR_EXIT_INTERNAL, "%s: a hole of %llu bytes was sent as "
                             "one record of zeros", o->t.name, (unsigned long long)hole),
                   STEP_FAIL;
    }
    if (w < 0)
        return write_error(o, e, "write");
    if (o->session.chain != b.chain || o->session.seq != b.sseq)
        return error_set(e, WEIR_EXIT_INTERNAL, "%s: the record sent again at byte %llu of "
                         "the input is not the one sent first", o->t.name,
                         (unsigned long long)from), STEP_FAIL;
    sync_lock(&p->lock);
    o->recipe_at++;
    o->rp_bytes = b.bytes;
    o->rp_holes = b.holes;
    o->replaying = o->recipe_at + 1 < o->recipe_n;
    boundary_locked(o);
    sync_unlock(&p->lock);
    return ratelimit_take(&o->rl, (size_t)w, &o->halt) ? STEP_STOP : STEP_OK;
}
