/*
 * writer.c - one writer thread per output, and the back channel of an
 * output that sends a weir stream to another weir.  See the essay at the
 * top of pipeline.c.
 *
 * A writer opens its transport (connecting for -O, after which the
 * receiver must greet it before it writes a byte), begins the stream
 * (session.c: greeting and header), then copies published bytes from its
 * cursor to the transport.  A TCP output that is not --raw frames raw data
 * as a weir stream of stored blocks, each write one verified block sent
 * with writev(), so the data is not copied.  With -z the buffer holds the
 * compressed pieces and the end of the data (codec.h), which serve two
 * forms: a connection to another weir writes the weir stream's spans of
 * each, anything else one LZ4 frame (its header first, then the data blocks
 * with their checksums, then the EndMark and the content checksum), from
 * the same bytes, compressed once.  At the end a weir sender
 * half-closes the connection and waits for the receiver's answer, which the
 * back-channel thread reads along with its keepalives; only a success
 * answer makes the output complete.  That thread also hears an early
 * failure while data is still flowing, and then stops this output at once.
 * A file is flushed to stable storage before it counts as complete; a
 * consumer command counts once it has exited 0.
 *
 * Holes in the data (a slot of the buffer each) leave as the output can
 * take them (enum output_holes): a regular file skips them with lseek and
 * sets its size at the end, so that a trailing hole is kept; a weir
 * receiver that takes holes gets one record each; an LZ4 frame (-z to a
 * file or pipe), which has no holes, gets blocks of compressed zeros;
 * anything else is written the zeros.
 *
 * Every step returns a weir_step (error.h).
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
#include "engine/pipeline_int.h"
#include "format/codec.h"
#include "format/sparse.h"

#define CONSUMER_PATIENCE 2.0   /* seconds a consumer that closed its input has to exit */
#define RAW_CONFIRM_SECS 5.0    /* how long a --raw sender waits for its peer to close */

/* resuming (--reconnect): */
#define RESUME_MARKS 65536      /* records the receiver may not have confirmed yet */
#define RESUME_SILENCE_SECS 10.0   /* a receiver that says nothing for this long is cut off
                                      (it sends keepalives every CODEC_KEEPALIVE_SECS) */
#define RESUME_BACKOFF_MAX 1.0  /* the longest pause between two attempts to reconnect */
/* the smallest buffer that offers resuming: what travels unconfirmed stays
 * in it, and the receiver confirms every CODEC_CONFIRM_BYTES, so a smaller
 * one would wait for the receiver's connection to go idle before each
 * confirmation (-m 1M -s 64k: 5 times slower) */
#define RESUME_MIN_BUFFER (2u * CODEC_CONFIRM_BYTES)
#define RESUME_MIN_BLOCKS 4
#define STEP_AGAIN 3            /* writer_loop: the record a resumed connection began with is
                                   out; the workers may seal the rest again */

/* Whether a failed socket operation (err) broke the connection, which a
 * resumable session survives. */
static bool breaks_connection(int err)
{
    return err == EPIPE || err == ECONNRESET || err == ETIMEDOUT || err == ENOTCONN ||
           err == ECONNABORTED || err == EHOSTUNREACH || err == ENETUNREACH ||
           err == ENETDOWN || err == EHOSTDOWN;
}

static int write_error(struct output *o, struct weir_error *e, const char *what)
{
    if (errno == ECANCELED)
        return STEP_STOP;
    if (o->t.is_socket && breaks_connection(errno)) {
        sync_lock(&o->p->lock);
        if (!o->broken) {
            o->broken = true;
            snprintf(o->broken_why, sizeof o->broken_why, "%s",
                     errno == ETIMEDOUT ? "no progress" : strerror(errno));
        }
        sync_unlock(&o->p->lock);
    }
    if (errno == ETIMEDOUT)
        error_set(e, o->t.status, "%s: no progress for %g s", o->t.name,
                  o->p->cfg->tcp.io_timeout);
    else if (errno == EPIPE && !o->t.is_socket)
        error_set(e, o->t.status, "%s: %s: Broken pipe (the reader closed it early)", o->t.name,
                  what);
    else
        error_sys(e, o->t.status, errno, "%s: %s", o->t.name, what);
    return STEP_FAIL;
}

/* A consumer that stopped reading: what it ended with says more than EPIPE. */
static int consumer_quit(struct output *o, struct weir_error *e)
{
    struct weir_error verdict;
    child_exited_within(&o->child, CONSUMER_PATIENCE);
    if (transport_close(&o->t, false, &o->halt, &verdict) != 0)
        *e = verdict;
    else
        error_set(e, WEIR_EXIT_OUTPUT, "%s exited with status 0 before it read all its input",
                  o->child.name);
    return STEP_FAIL;
}

/* -z: write at most limit bytes of this output's form of the piece at the
 * cursor (src), from where the writer is in it.  Returns the bytes
 * written, or -1 with errno; *step is how far the cursor moves, the
 * other form's bytes included. */
static ssize_t write_piece(struct output *o, const unsigned char *src, size_t limit, int tmo,
                           size_t *step)
{
    const unsigned char *piece = src - o->piece_at;
    struct codec_span sp[2];
    size_t total;
    int k = codec_spans(piece, o->form, sp, &total);
    struct iovec iov[2];
    int cnt = 0;
    for (int i = 0; i < k && limit > 0; i++) {
        size_t end = sp[i].off + sp[i].len;
        if (end <= o->piece_at)
            continue;
        size_t from = sp[i].off > o->piece_at ? sp[i].off : o->piece_at;
        size_t len = end - from < limit ? end - from : limit;
        iov[cnt++] = (struct iovec){(void *)(piece + from), len};
        limit -= len;
    }
    ssize_t w = session_writev(&o->session, iov, cnt, tmo, &o->halt);
    if (w < 0)
        return -1;
    /* where the writer is now: the bytes between spans are stepped over */
    size_t at = o->piece_at, left = (size_t)w;
    for (int i = 0; i < k; i++) {
        size_t end = sp[i].off + sp[i].len;
        if (end <= at)
            continue;
        if (at < sp[i].off)
            at = sp[i].off;
        size_t take = end - at < left ? end - at : left;
        at += take;
        left -= take;
        if (at < end)
            break;
        at = i + 1 < k ? sp[i + 1].off : total;
    }
    *step = at - o->piece_at;
    o->piece_at = at == total ? 0 : at;
    return w;
}

static int mark(struct output *o, enum mark_kind kind, uint64_t exact);

/* The back channel found the connection broken while this writer waited
 * for data: a failure the writer reconnects for. */
static int broke_while_idle(struct output *o, struct weir_error *e)
{
    sync_lock(&o->p->lock);
    error_set(e, WEIR_EXIT_NETWORK, "%s: %s", o->t.name, o->broken_why);
    sync_unlock(&o->p->lock);
    return STEP_FAIL;
}

/* Whether the receiver waits for this sender's word that it read the
 * answer: both offer CODEC_FEATURE_ANSWER_READ (this end always does), and
 * the session may resume (the receiver named it), since only then can a
 * receiver give an answer lost on the way again.  Lock held, or the
 * writer's own thread (the session is named long before the end). */
static bool says_read(const struct output *o)
{
    return (o->session.peer_features & CODEC_FEATURE_ANSWER_READ) && o->resumable;
}

/* ---- holes ---------------------------------------------------------------- */

#define ZERO_BLOCKS_AT_ONCE 64   /* HOLES_FRAME: whole blocks of zeros per write */

static int refuse_hole(struct output *o, struct weir_error *e)
{
    return error_set(e, WEIR_EXIT_NETWORK, "%s: the data has holes, and the receiver (an "
                     "older weir) cannot take them in a compressed stream: upgrade it, or "
                     "send without -z", o->t.name), STEP_FAIL;
}

static int hole_write_failed(struct output *o, struct weir_error *e)
{
    if (errno == EPIPE && o->has_child)
        return consumer_quit(o, e);
    return write_error(o, e, "write");
}

/* HOLES_FRAME: blocks of compressed zeros (codec_zero_block), the whole
 * ones from one buffer made once; *done is the raw bytes they hold. */
static int write_zero_blocks(struct output *o, size_t n, int tmo, size_t *done,
                             struct weir_error *e)
{
    struct pipeline *p = o->p;
    size_t full = p->piece_max, cap = full / 255 + 72;
    if (!o->zero_frame) {
        o->zero_frame = malloc(2 * cap);
        if (!o->zero_frame)
            return error_sys(e, WEIR_EXIT_INTERNAL, ENOMEM, "%s", o->t.name), STEP_FAIL;
        o->zero_frame_len = codec_zero_block(o->zero_frame, cap, sparse_zeros(), full);
    }
    struct iovec iov[ZERO_BLOCKS_AT_ONCE];
    int cnt = 0;
    size_t raw = 0, bytes = 0;
    if (n >= full) {
        for (; cnt < ZERO_BLOCKS_AT_ONCE && raw + full <= n; cnt++, raw += full)
            iov[cnt] = (struct iovec){o->zero_frame, o->zero_frame_len};
        bytes = (size_t)cnt * o->zero_frame_len;
    } else {
        unsigned char *tail = o->zero_frame + cap;
        bytes = codec_zero_block(tail, cap, sparse_zeros(), n);
        iov[cnt++] = (struct iovec){tail, bytes};
        raw = n;
    }
    if (o->zero_frame_len == 0 || iov[0].iov_len == 0)
        return error_set(e, WEIR_EXIT_INTERNAL, "%s: zeros did not compress", o->t.name),
               STEP_FAIL;
    if (transport_writev_all(&o->t, iov, cnt, tmo, &o->halt))
        return hole_write_failed(o, e);
    *done = raw;
    return ratelimit_take(&o->rl, bytes, &o->halt) ? STEP_STOP : STEP_OK;
}

/* A hole at the cursor, n bytes of it left: skip it, send its record, or
 * write (some of) its zeros.  *done: how much of it is behind. */
static int write_hole(struct output *o, size_t n, int tmo, size_t *done, struct weir_error *e)
{
    *done = 0;
    switch (o->holes) {
    case HOLES_SKIP:
        if (transport_skip(&o->t, n, e))
            return STEP_FAIL;
        o->skipped = true;
        *done = n;
        return STEP_OK;
    case HOLES_RECORD:
        if (mark(o, MARK_RECORD, 0) ||
            session_hole(&o->session, o->cur.hole_seq, n, tmo, &o->halt))
            return write_error(o, e, "write");
        *done = n;
        return STEP_OK;
    case HOLES_REFUSED:
        return refuse_hole(o, e);
    case HOLES_FRAME:
        return write_zero_blocks(o, n, tmo, done, e);
    case HOLES_ZEROS:
        break;
    }
    size_t chunk = ratelimit_chunk(&o->rl, n < SPARSE_ZEROS_SIZE ? n : SPARSE_ZEROS_SIZE);
    ssize_t w;
    if (o->session.frame) {
        if (chunk > o->session.block_max)
            chunk = o->session.block_max;
        if (o->exact > 0) {
            /* cut as the first time (see writer_loop) */
            if (n < o->exact || o->exact > SPARSE_ZEROS_SIZE)
                return error_set(e, WEIR_EXIT_INTERNAL, "%s: the zeros to send again are "
                                 "not the %llu bytes first sent", o->t.name,
                                 (unsigned long long)o->exact), STEP_FAIL;
            chunk = (size_t)o->exact;
            o->exact = 0;
        }
        if (mark(o, MARK_RECORD, chunk))
            return write_error(o, e, "write");
        w = session_frame(&o->session, sparse_zeros(), chunk, tmo, &o->halt);
    } else {
        struct iovec iov = {(void *)sparse_zeros(), chunk};
        w = o->t.ops->writev(&o->t, &iov, 1, tmo, &o->halt);
    }
    if (w < 0)
        return hole_write_failed(o, e);
    *done = (size_t)w;
    return ratelimit_take(&o->rl, (size_t)w, &o->halt) ? STEP_STOP : STEP_OK;
}

/* Decide how this output passes holes, once it is open and greeted. */
static void plan_holes(struct output *o)
{
    struct pipeline *p = o->p;
    if (p->encode)
        o->holes = o->form == CODEC_FORM_FRAME ? HOLES_FRAME
                   : session_holes(&o->session) ? HOLES_RECORD : HOLES_REFUSED;
    else if (o->session.frame)
        o->holes = session_holes(&o->session) ? HOLES_RECORD : HOLES_ZEROS;
    else
        o->holes = transport_skips_holes(&o->t) ? HOLES_SKIP : HOLES_ZEROS;
}

/* ---- resuming: what the receiver may lack ---------------------------------- */

/* Stop keeping what the receiver has not confirmed: it cannot resume (it
 * never named the session).  Lock held. */
static void give_up_resuming_locked(struct output *o)
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
static int mark(struct output *o, enum mark_kind kind, uint64_t exact)
{
    struct pipeline *p = o->p;
    sync_lock(&p->lock);
    while (o->may_resume && !note_locked(o, kind, exact)) {
        if (!o->resumable) {
            give_up_resuming_locked(o);
            break;
        }
        if (atomic_load(&o->halt) || o->broken) {
            sync_unlock(&p->lock);
            errno = o->broken ? EPIPE : ECANCELED;
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
static void boundary_locked(struct output *o)
{
    if (o->may_resume && o->piece_at == 0 && note_locked(o, MARK_RECORD, 0))
        release_confirmed_locked(o);
}

/* The receiver holds the stream's first `held` bytes.  Lock held. */
static void confirmed_locked(struct output *o, uint64_t held)
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
static int resume_at(struct output *o, uint64_t at, struct weir_error *e)
{
    struct pipeline *p = o->p;
    sync_lock(&p->lock);
    uint64_t sent = o->session.sent;
    size_t found = o->marks_count;
    for (size_t i = o->marks_count; i-- > 0;)
        if (o->marks[(o->marks_head + i) % o->marks_cap].at <= at) {
            found = i;
            break;
        }
    if (found == o->marks_count) {
        sync_unlock(&p->lock);
        return error_set(e, WEIR_EXIT_INTERNAL, "%s: no note of the record that byte %llu of "
                         "the stream is in", o->t.name, (unsigned long long)at), STEP_FAIL;
    }
    if (at < o->confirmed || at > sent) {
        uint64_t confirmed = o->confirmed;
        sync_unlock(&p->lock);
        return error_set(e, WEIR_EXIT_NETWORK, "%s: the receiver asked to resume at byte %llu "
                         "of the stream, which is not between the %llu it confirmed and the "
                         "%llu sent", o->t.name, (unsigned long long)at,
                         (unsigned long long)confirmed, (unsigned long long)sent), STEP_FAIL;
    }
    struct resume_mark m = o->marks[(o->marks_head + found) % o->marks_cap];
    if (o->reread) {
        /* the records from this one to the cursor's are read again from
         * the input; the cursor stays, and the buffer goes on from there.
         * A break while that was under way leaves the notes ending at the
         * record being sent again: the rest of that recipe follows them. */
        size_t noted = o->marks_count - found, tail = 0;
        if (o->replaying) {
            const struct resume_mark *now = &o->recipe[o->recipe_at];
            const struct resume_mark *lastnote =
                &o->marks[(o->marks_head + o->marks_count - 1) % o->marks_cap];
            tail = o->recipe_n - o->recipe_at - 1;
            if (lastnote->bytes != now->bytes || lastnote->holes != now->holes ||
                noted + tail > RESUME_MARKS) {
                sync_unlock(&p->lock);
                return error_set(e, WEIR_EXIT_INTERNAL, "%s: the notes of what was sent "
                                 "again end at byte %llu of the input, not at %llu",
                                 o->t.name,
                                 (unsigned long long)(lastnote->bytes + lastnote->holes),
                                 (unsigned long long)(now->bytes + now->holes)), STEP_FAIL;
            }
            memmove(o->recipe + noted, o->recipe + o->recipe_at + 1,
                    tail * sizeof *o->recipe);
        }
        for (size_t i = 0; i < noted; i++)
            o->recipe[i] = o->marks[(o->marks_head + found + i) % o->marks_cap];
        o->recipe_n = noted + tail;
        for (size_t i = 0; i < o->recipe_n; i++)
            if (o->recipe[i].kind == MARK_TRAILER) {
                o->recipe_n = i + 1;   /* the end: writer_end sends the trailer again */
                break;
            }
        o->recipe_at = m.kind == MARK_HEADER ? 1 : 0;
        const struct resume_mark *last = &o->recipe[o->recipe_n - 1];
        if (last->bytes != o->cur.bytes || last->holes != o->cur.holes) {
            sync_unlock(&p->lock);
            return error_set(e, WEIR_EXIT_INTERNAL, "%s: the notes of what was sent end at "
                             "byte %llu of the input, the buffer's cursor at %llu", o->t.name,
                             (unsigned long long)(last->bytes + last->holes),
                             (unsigned long long)(o->cur.bytes + o->cur.holes)), STEP_FAIL;
        }
        o->replaying = o->recipe_at + 1 < o->recipe_n;
        if (o->replaying) {
            o->rp_bytes = o->recipe[o->recipe_at].bytes;
            o->rp_holes = o->recipe[o->recipe_at].holes;
        }
    }
    /* what is sent again is noted again; the note of the record resumed at
     * stays (sending it updates it in place), so that a break before it
     * goes out again still finds where to resume */
    o->marks_count = found + 1;
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
    o->session.seq = m.sseq;
    o->session.total = m.total;
    o->session.chain = m.chain;
    o->session.sent = m.at;
    o->session.skip = at - m.at;
    o->session.npending = 0;
    o->piece_at = 0;
    /* a stored block the receiver has part of is cut as before; one it
     * lacks whole may be cut anew */
    o->exact = m.kind == MARK_RECORD && at > m.at && !replaying ? m.exact : 0;
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
static int reread_record(struct output *o, int tmo, struct weir_error *e)
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

/* ---- the data --------------------------------------------------------------- */

static int writer_loop(struct output *o, struct weir_error *e)
{
    struct pipeline *p = o->p;
    int tmo = io_timeout_ms(p, &o->t);
    for (;;) {
        const unsigned char *src;
        size_t n;
        if (o->replaying) {
            int rc = reread_record(o, tmo, e);
            if (rc != STEP_OK)
                return rc;
            continue;
        }
        int r = ring_next(&p->ring, &o->cur, &src, &n);
        if (r == RING_END)
            return STEP_OK;
        if (r == RING_STOP)
            return STEP_STOP;
        if (r == RING_BROKEN)
            return broke_while_idle(o, e);
        if (r == RING_HOLE) {
            size_t done;
            int rc = write_hole(o, n, tmo, &done, e);
            if (rc != STEP_OK)
                return rc;
            sync_lock(&p->lock);
            ring_advance_locked(&p->ring, &o->cur, done);
            if (o->holes == HOLES_RECORD || o->session.frame)
                boundary_locked(o);
            sync_unlock(&p->lock);
            continue;
        }
        if (o->exact > 0 && o->session.frame) {
            /* a resent stored block is cut as it was the first time, by
             * whichever rule cut it then (-R's bursts, or a sealed
             * stream's whole blocks): the receiver holds its start */
            if (n < o->exact)
                return error_set(e, WEIR_EXIT_INTERNAL, "%s: the block to send again holds "
                                 "%zu bytes of the %llu it was sent with", o->t.name, n,
                                 (unsigned long long)o->exact), STEP_FAIL;
            n = (size_t)o->exact;
            o->exact = 0;
        } else {
            n = ratelimit_chunk(&o->rl, n);
            if (o->session.frame && n > o->session.block_max)
                n = o->session.block_max;
        }
        if ((o->session.frame || (p->encode && o->piece_at == 0 && o->session.greet)) &&
            mark(o, MARK_RECORD, o->session.frame ? n : 0))
            return write_error(o, e, "write");
        if (o->session.compressed && o->session.greet) {
            /* -z: the last bytes carry the trailer; a success answer may
             * come as soon as they are out */
            sync_lock(&p->lock);
            if (ring_last_locked(&p->ring, &o->cur, n))
                o->ended = true;
            bool last = o->ended;
            sync_unlock(&p->lock);
            if (last && o->t.sealed && !says_read(o))
                transport_sealed_last(&o->t);
        }
        ssize_t w;
        size_t step;
        if (p->encode) {
            w = write_piece(o, src, n, tmo, &step);
        } else if (o->session.frame) {
            w = session_frame(&o->session, src, n, tmo, &o->halt);
            step = (size_t)w;
        } else {
            struct iovec iov = {(void *)src, n};
            w = o->t.ops->writev(&o->t, &iov, 1, tmo, &o->halt);
            step = (size_t)w;
        }
        if (w < 0) {
            if (errno == EPIPE && o->has_child)
                return consumer_quit(o, e);
            return write_error(o, e, "write");
        }
        sync_lock(&p->lock);
        ring_advance_locked(&p->ring, &o->cur, step);
        if (o->session.greet)
            boundary_locked(o);
        sync_unlock(&p->lock);
        if (ratelimit_take(&o->rl, (size_t)w, &o->halt))
            return STEP_STOP;
        /* a resumed connection's first record is out: the workers take over */
        if (o->t.sealed && p->nworkers > 0 && o->session.skip == 0 && o->piece_at == 0)
            return STEP_AGAIN;
    }
}

/* ---- an encrypted output: records sealed ahead by the workers -------------- */

/* a job's records: a framed block is sealed as three (see seal_one) */
#define SEALED_JOB_MAX (SEAL_MAX_PLAIN + 3 * SEAL_OVERHEAD)

/* Queue what the buffer holds beyond the records already queued, up to
 * SEAL_AHEAD records.  Lock held. */
static void queue_seals_locked(struct output *o)
{
    struct pipeline *p = o->p;
    while (o->ahead_count < SEAL_AHEAD && !o->hole_refused) {
        const unsigned char *src;
        size_t n;
        int got = ring_range_locked(&p->ring, &o->q_seq, &o->q_off, &src, &n);
        if (got == RING_END)
            return;
        struct seal_job *j = &o->ahead[(o->ahead_head + o->ahead_count) % SEAL_AHEAD];
        j->hole = false;
        if (got == RING_HOLE && o->holes == HOLES_REFUSED) {
            o->hole_refused = true;   /* its writer says so */
            return;
        }
        if (got == RING_HOLE && o->holes == HOLES_RECORD) {
            /* one record: numbered in order here when framed, by the reader for -z */
            uint64_t num = o->session.frame ? o->next_frame_seq++
                                            : ring_hole_seq_locked(&p->ring, o->q_seq);
            codec_hole(j->rec, num, n);
            j->hole = true;
            j->hole_len = n;
            j->seq = o->q_seq;
            j->off = o->q_off;
            j->src = j->rec;
            j->len = CODEC_HOLE_SIZE;
            j->step = n;
            j->flags = 0;
            j->num = transport_sealed_numbers(&o->t, 1);
            j->frame_seq = 0;
            j->out_len = 0;
            j->done = false;
            o->ahead_count++;
            o->q_off += j->step;
            seal_queue_locked(p, j);
            continue;
        }
        if (got == RING_HOLE) {
            /* framed, to a weir that takes no holes: stored blocks of zeros */
            src = sparse_zeros();
            if (n > SPARSE_ZEROS_SIZE)
                n = SPARSE_ZEROS_SIZE;
        }
        if (o->session.frame && n > o->session.block_max)
            n = o->session.block_max;
        j->seq = o->q_seq;
        j->off = o->q_off;
        j->len = j->step = n;
        j->src = src;
        j->flags = 0;
        if (o->session.compressed) {
            /* -z: a record is the weir form of one piece (or of the end) */
            struct codec_span sp[2];
            codec_spans(src, CODEC_FORM_WEIR, sp, &j->step);
            j->len = sp[0].len;
        }
        if (!o->session.frame && ring_range_last_locked(&p->ring, o->q_seq, o->q_off, j->step)) {
            /* -z: the trailer's record ends the direction (or the 'D' will) */
            j->flags = says_read(o) ? 0 : SEAL_END;
            o->ended = true;       /* and a success answer may come once it is out */
        }
        j->num = transport_sealed_numbers(&o->t, o->session.frame ? 3 : 1);
        j->frame_seq = o->session.frame ? o->next_frame_seq++ : 0;
        j->out_len = 0;
        j->done = false;
        o->ahead_count++;
        o->q_off += j->step;
        seal_queue_locked(p, j);
    }
}

/* Write the oldest sealed record; fold a framed block into the trailer's
 * chain in order. */
static int write_sealed(struct output *o, struct seal_job *j, int tmo, struct weir_error *e)
{
    if (j->out_len == 0)
        return error_set(e, WEIR_EXIT_INTERNAL, "%s: a record could not be sealed",
                         o->t.name), STEP_FAIL;
    bool data = o->session.frame && !j->hole;   /* three records (queue_seals_locked) */
    if (mark(o, MARK_RECORD, data ? j->len : 0))
        return write_error(o, e, "write");
    struct iovec iov = {j->out, j->out_len}, *v = &iov;
    int left = 1;
    size_t sent = 0;
    while (left > 0) {
        ssize_t w = io_writev(o->t.fd, v, left, tmo, &o->halt);
        transport_count(o->t.wire_tx, w);
        if (w < 0) {
            if (sent > 0)
                transport_sealed_broken(&o->t);   /* no abort after half a record */
            return write_error(o, e, "write");
        }
        sent += (size_t)w;
        io_iov_advance(&v, &left, (size_t)w);
    }
    transport_sealed_sent(&o->t, j->num + (data ? 3 : 1));
    o->session.sent += data ? CODEC_FRAME_PREFIX + j->len + CODEC_FRAME_SUFFIX : j->len;
    if (o->session.frame && j->hole) {
        o->session.seq++;
        o->session.total += j->hole_len;
        o->session.chain = codec_chain_hole(o->session.chain,
                                            codec_get64(j->rec + CODEC_HOLE_SIZE - 8),
                                            j->hole_len);
    } else if (o->session.frame) {
        o->session.seq++;
        o->session.total += j->len;
        o->session.chain = codec_chain(o->session.chain, j->hash, (uint32_t)j->len);
    }
    return STEP_OK;
}

/* The writer of an encrypted output, with workers: it keeps up to
 * SEAL_AHEAD records queued for them, and sends them in order as they come
 * back, so the sealing runs on -T threads while this one only writes. */
static int sealed_loop(struct output *o, struct weir_error *e)
{
    struct pipeline *p = o->p;
    int tmo = io_timeout_ms(p, &o->t);
    /* the buffers outlive this thread (a worker may still be sealing into
     * one when it stops): weir_destroy frees them */
    for (int i = 0; i < SEAL_AHEAD; i++) {
        o->ahead[i].o = o;
        if (!o->ahead[i].out)
            o->ahead[i].out = malloc(SEALED_JOB_MAX);
        if (!o->ahead[i].out)
            return error_sys(e, WEIR_EXIT_INTERNAL, ENOMEM, "%s", o->t.name), STEP_FAIL;
    }
    if (!o->tx_dir && !(o->tx_dir = secret_alloc(sizeof *o->tx_dir)))
        return error_sys(e, WEIR_EXIT_INTERNAL, errno, "%s", o->t.name), STEP_FAIL;
    sync_lock(&p->lock);
    transport_sealed_tx(&o->t, o->tx_dir, &o->epoch_records);
    o->q_seq = o->cur.seq;
    o->q_off = o->cur.off;
    o->next_frame_seq = o->session.seq;   /* a resumed connection's records go on from here */
    o->ahead_head = o->ahead_count = 0;
    for (;;) {
        if (atomic_load(&o->halt)) {
            sync_unlock(&p->lock);
            return STEP_STOP;
        }
        queue_seals_locked(o);
        struct seal_job *j = &o->ahead[o->ahead_head];
        if (o->hole_refused && o->ahead_count == 0) {
            sync_unlock(&p->lock);
            return refuse_hole(o, e);
        }
        if (o->ahead_count > 0 && j->done) {
            sync_unlock(&p->lock);
            int rc = write_sealed(o, j, tmo, e);
            if (rc != STEP_OK)
                return rc;
            sync_lock(&p->lock);
            ring_advance_locked(&p->ring, &o->cur, j->step);
            boundary_locked(o);
            o->ahead_head = (o->ahead_head + 1) % SEAL_AHEAD;
            o->ahead_count--;
            sync_unlock(&p->lock);
            if (ratelimit_take(&o->rl, j->len, &o->halt))
                return STEP_STOP;
            sync_lock(&p->lock);
            continue;
        }
        if (o->ahead_count == 0 && ring_ended_at_locked(&p->ring, o->q_seq)) {
            sync_unlock(&p->lock);
            return STEP_OK;
        }
        if (o->broken) {
            sync_unlock(&p->lock);
            return broke_while_idle(o, e);
        }
        ring_wait_locked(&p->ring, &o->cur);
    }
}

/* ---- the receiver's keepalives and answer ---------------------------------- */

static int map_receiver_status(int code)
{
    /* its output failing or the data arriving corrupt keep their meaning;
     * anything else is, from here, a failure of the far end */
    return code == WEIR_EXIT_OUTPUT || code == WEIR_EXIT_INTEGRITY ? code : WEIR_EXIT_NETWORK;
}

/* The receiver's failure, in its own words: "receiver: ...", or with
 * several -O "receiver HOST:PORT: ...", so that one can tell which.
 * STEP_FAIL. */
static int receiver_failed(struct output *o, int code, const char *msg, struct weir_error *e)
{
    int tcp = 0;
    for (int i = 0; i < o->p->nout; i++)
        tcp += o->p->out[i].spec->kind == WEIR_OUT_TCP;
    const char *who = strncmp(o->t.name, "output ", 7) == 0 ? o->t.name + 7 : o->t.name;
    if (tcp > 1)
        error_set(e, map_receiver_status(code), "receiver %s: %s", who, msg);
    else
        error_set(e, map_receiver_status(code), "receiver: %s", msg);
    return STEP_FAIL;
}

/* Take in one record from the receiver; STEP_OK to read on. */
static int heard(struct output *o, const struct codec_record *r, struct weir_error *e)
{
    struct pipeline *p = o->p;
    sync_lock(&p->lock);
    o->last_heard = clock_now();
    if (r->type == 'C' && o->resumable) {
        confirmed_locked(o, r->bytes);
    } else if (r->type == 'K') {
        /* a receiver that can resume names the session before anything else */
        if (o->may_resume && !o->resumable)
            give_up_resuming_locked(o);
        o->peer_written = r->bytes;
        o->peer_phase = r->phase;
    } else if (r->type == 'S' && r->code == 0 && !o->ended) {
        /* success before the trailer was sent cannot be true */
        sync_unlock(&p->lock);
        return error_set(e, WEIR_EXIT_NETWORK, "%s: the receiver answered success before the "
                         "stream ended", o->t.name), STEP_FAIL;
    } else if (r->type == 'S') {
        o->status_code = r->code;
        o->status_bytes = r->bytes;
        o->status_chain = r->chain;
        snprintf(o->status_msg, sizeof o->status_msg, "%s", r->msg);
        o->status_received = true;
        sync_broadcast(&p->ring.data_cv);
    }
    bool session_record = r->type == 'C' && o->resumable;
    sync_unlock(&p->lock);
    if (r->type == 'K' || session_record)
        return STEP_OK;
    if (r->type != 'S')
        return error_set(e, WEIR_EXIT_NETWORK, "%s: unexpected '%c' record from the receiver",
                         o->t.name, r->type), STEP_FAIL;
    if (r->code != 0)
        return receiver_failed(o, r->code, r->msg, e);
    return STEP_STOP;   /* the answer is in: nothing more to read */
}

void *backchannel_main(void *arg)
{
    struct output *o = arg;
    struct pipeline *p = o->p;
    struct weir_error e;
    thread_unblock_wake();
    int rc;
    bool lost = false;   /* the connection broke under a session that may resume */
    do {
        unsigned char raw[CODEC_RECORD_MAX];
        struct codec_record r;
        size_t got;
        bool eof;
        sync_lock(&p->lock);
        bool resumable = o->resumable;
        sync_unlock(&p->lock);
        /* a receiver that may resume keeps talking; its silence is a break */
        int limit = resumable ? (int)(RESUME_SILENCE_SECS * 1000) : -1;
        if (session_read_record(&o->t, limit, &o->halt, &r, raw, &got, &eof, &e) == 0) {
            rc = heard(o, &r, &e);
            continue;
        }
        rc = STEP_FAIL;
        int err = errno;
        lost = resumable && !atomic_load(&o->halt) &&
               (eof || (got < 8 && breaks_connection(err)));
        if (lost) {
            sync_lock(&p->lock);
            if (!o->broken) {
                o->broken = true;
                if (eof)
                    snprintf(o->broken_why, sizeof o->broken_why, "the receiver's end closed it");
                else if (err == ETIMEDOUT)
                    snprintf(o->broken_why, sizeof o->broken_why, "the receiver said nothing "
                             "for %g s", RESUME_SILENCE_SECS);
                else
                    snprintf(o->broken_why, sizeof o->broken_why, "%s", strerror(err));
            }
            sync_unlock(&p->lock);
        }
    } while (rc == STEP_OK);
    sync_lock(&p->lock);
    bool answered = o->status_received && o->status_code == 0;
    sync_unlock(&p->lock);
    if (rc == STEP_FAIL && atomic_load(&o->halt) && !o->status_received)
        rc = STEP_STOP;   /* this side is stopping anyway */
    if (lost) {
        shutdown(o->t.fd, SHUT_RDWR);   /* wakes the writer, which reconnects */
    } else if (rc == STEP_FAIL && !answered) {
        output_fail(o, &e);
        shutdown(o->t.fd, SHUT_RDWR);   /* wakes the writer out of send() */
    }
    sync_lock(&p->lock);
    o->bc_running = false;
    sync_broadcast(&p->ring.data_cv);
    sync_unlock(&p->lock);
    return NULL;
}

/* Created under the lock: the main thread wakes a running back channel by
 * its thread id (kick_threads), which must be the new thread's from the
 * moment bc_running says so (it used to be set first, and a SIGINT in
 * between had the main thread signal an id not yet written: EINVAL, abort) */
static int start_backchannel(struct output *o, struct weir_error *e)
{
    sync_lock(&o->p->lock);
    o->bc_running = true;
    int rc = sync_create(&o->backchannel, backchannel_main, o, e);
    if (rc)
        o->bc_running = false;
    sync_unlock(&o->p->lock);
    if (rc)
        return STEP_FAIL;
    o->has_backchannel = true;
    return STEP_OK;
}

/* Tell a receiver that waits for it that its answer (bytes, chain) was
 * read, then end this direction: the 'D' is its last record.  A 'D' that
 * cannot go leaves the receiver waiting for this sender to come back, as
 * for an answer lost; this end's verdict stands either way. */
static void say_read(struct output *o, uint64_t bytes, uint64_t chain)
{
    if (!says_read(o))
        return;
    unsigned char d[CODEC_SESSION_SIZE];
    size_t n = codec_done(d, bytes, chain);
    if (o->t.sealed)
        transport_sealed_last(&o->t);
    struct weir_error ignored;
    if (transport_write_all(&o->t, d, n, io_timeout_ms(o->p, &o->t), &o->halt) == 0)
        (void)o->t.ops->half_close(&o->t, &ignored);
}

/* After the last byte: end the stream and wait for the receiver's verdict.
 * --timeout bounds the silence, not the wait: a receiver draining into a
 * slow consumer keeps saying so.  A receiver that waits for this sender's
 * word ('D') gets no end of file before it: the trailer ended the stream. */
static int await_answer(struct output *o, struct weir_error *e)
{
    struct pipeline *p = o->p;
    if (!says_read(o) && o->t.ops->half_close(&o->t, e)) {
        if (breaks_connection(errno))
            (void)write_error(o, e, "shutdown");   /* a break: it may resume */
        return STEP_FAIL;
    }
    double limit = p->cfg->tcp.io_timeout;
    if (limit > 0 && limit < CODEC_SILENCE_MIN)
        limit = CODEC_SILENCE_MIN;
    sync_lock(&p->lock);
    o->awaiting = true;
    if (!(o->session.peer_features & CODEC_FEATURE_KEEPALIVE))
        o->last_heard = clock_now();   /* a receiver without keepalives: bound the wait */
    bool timed_out = false;
    while (!o->status_received && !o->dead && !atomic_load(&o->halt) && o->bc_running) {
        if (limit <= 0) {
            sync_wait(&p->ring.data_cv, &p->lock);
            continue;
        }
        double left = o->last_heard + limit - clock_now();
        if (left <= 0) {
            timed_out = true;
            break;
        }
        struct timespec deadline = clock_deadline(left);
        sync_wait_until(&p->ring.data_cv, &p->lock, &deadline);
    }
    o->awaiting = false;
    if (timed_out && !o->status_received && o->resumable && !o->broken) {
        /* a receiver that may resume keeps talking: its silence is a
         * break (a black hole that swallowed the end of the stream), as the
         * back channel takes it, not its answer lost */
        o->broken = true;
        snprintf(o->broken_why, sizeof o->broken_why, "the receiver said nothing for %g s "
                 "after the stream's end", limit);
    }
    bool received = o->status_received, broken = o->broken;
    int code = o->status_code;
    uint64_t acked = o->status_bytes, chain = o->status_chain;
    sync_unlock(&p->lock);
    if (received)
        say_read(o, acked, chain);
    if (!received && broken)
        return error_set(e, WEIR_EXIT_NETWORK, "%s: the connection broke before the receiver "
                         "answered (%s)", o->t.name, o->broken_why), STEP_FAIL;
    if (received && code != 0)
        return receiver_failed(o, code, o->status_msg, e);
    if (!received && timed_out)
        return error_set(e, WEIR_EXIT_NETWORK, "%s: the receiver fell silent for %g s "
                         "before it answered", o->t.name, limit), STEP_FAIL;
    if (!received)
        return STEP_STOP;   /* stopping, or the back channel has reported the failure */
    uint64_t sent = o->session.frame ? session_framed_bytes(&o->session) : p->data_bytes;
    sync_lock(&p->lock);
    uint64_t mine = o->session.frame ? session_framed_chain(&o->session) : p->chain;
    sync_unlock(&p->lock);
    /* the chain binds the answer to this stream: a receiver that did not
     * verify it (or an answer sent before it arrived) cannot know it */
    if (chain != mine)
        return error_set(e, WEIR_EXIT_NETWORK, "%s: the receiver's answer is for another "
                         "stream (its chain differs)", o->t.name), STEP_FAIL;
    if (acked != sent)
        return error_set(e, WEIR_EXIT_NETWORK,
                         "%s: the receiver confirmed %llu bytes, but %llu were sent",
                         o->t.name, (unsigned long long)acked, (unsigned long long)sent),
               STEP_FAIL;
    return STEP_OK;
}

/* A --raw sender cannot know that its data arrived, but it can know that
 * it did not: a weir listener (which greets, then refuses plain bytes) or
 * a reset.  It reads until the peer closes, for a few seconds at most;
 * nc -l, socat and mbuffer close once they have read everything. */
static int raw_confirm(struct output *o, struct weir_error *e)
{
    double deadline = clock_now() + RAW_CONFIRM_SECS;
    unsigned char buf[4096], head[4];
    size_t seen = 0, total = 0;
    for (;;) {
        double left = deadline - clock_now();
        if (left <= 0)
            return STEP_OK;   /* still open: nothing more to learn */
        ssize_t r = o->t.ops->read(&o->t, buf, sizeof buf, (int)(left * 1000) + 1, &o->halt);
        if (r == 0)
            return STEP_OK;
        if (r < 0 && errno == ETIMEDOUT)
            return STEP_OK;
        if (r < 0 && errno == ECANCELED)
            return STEP_STOP;
        if (r < 0 && errno == ECONNRESET)
            return error_set(e, WEIR_EXIT_NETWORK, "%s: the peer reset the connection: the "
                             "data may not all have arrived", o->t.name), STEP_FAIL;
        if (r < 0)
            return error_sys(e, WEIR_EXIT_NETWORK, errno, "%s", o->t.name), STEP_FAIL;
        for (ssize_t i = 0; i < r && seen < sizeof head; i++)
            head[seen++] = buf[i];
        total += (size_t)r;
        /* a weir that takes plain bytes as well (under the name mbuffer)
         * may have greeted after this sender stopped waiting, and then says
         * nothing more; anything after its greeting is a refusal */
        if (seen == sizeof head && codec_get32(head) == CODEC_WEIR_MAGIC && o->plain_fallback &&
            total > CODEC_GREETING_SIZE)
            return error_set(e, WEIR_EXIT_NETWORK, "%s: the peer is a weir listener that refused "
                             "the plain bytes (it greeted late): run it under the name mbuffer "
                             "or with --raw", o->t.name), STEP_FAIL;
        if (seen == sizeof head && codec_get32(head) == CODEC_WEIR_MAGIC && !o->plain_fallback)
            return error_set(e, WEIR_EXIT_NETWORK, "%s: the peer is a weir listener, which "
                             "takes plain bytes only with --raw: send without --raw",
                             o->t.name), STEP_FAIL;
    }
}

/* Whether the two ends agree on encryption: a sender with a key never
 * sends in clear, and one without cannot talk to a receiver that has one. */
static int check_keys(struct output *o, struct weir_error *e)
{
    bool theirs = o->session.peer_features & CODEC_FEATURE_KEY;
    if (o->p->keyed && !theirs)
        return error_set(e, WEIR_EXIT_NETWORK, "%s: the receiver has no key: refusing to send "
                         "in clear (give it --key-file as well)", o->t.name), STEP_FAIL;
    if (!o->p->keyed && theirs)
        return error_set(e, WEIR_EXIT_NETWORK, "%s: the receiver takes only encrypted "
                         "connections: give this weir its key (--key-file)", o->t.name),
               STEP_FAIL;
    if (codec_keyed_older(o->session.peer_features))
        return error_set(e, WEIR_EXIT_NETWORK, "%s: the receiver has a key, but "
                         CODEC_OLDER_KEYED, o->t.name), STEP_FAIL;
    return STEP_OK;
}

/* The sender's half of the TLS handshake, by a deadline; then the
 * connection carries sealed records. */
static int client_handshake(struct output *o, double limit, struct weir_error *e)
{
    struct pipeline *p = o->p;
    return session_handshake(&o->t, p->tls_client, limit, p->cfg->epoch_records, &o->halt,
                             NULL, NULL, 0, e);
}

/* Both ends may resume: from the stream's first byte on, what the
 * receiver has not confirmed stays in the buffer (the hold cursor) and
 * the records' starts are noted; where the receiver was reached is kept,
 * to reach it there again. */
static int keep_for_resuming(struct output *o, struct weir_error *e)
{
    struct pipeline *p = o->p;
    o->peer_len = sizeof o->peer_addr;
    if (getpeername(o->t.fd, (struct sockaddr *)&o->peer_addr, &o->peer_len) != 0)
        return error_sys(e, WEIR_EXIT_NETWORK, errno, "%s: getpeername", o->t.name), STEP_FAIL;
    if (!o->marks) {
        o->marks = calloc(RESUME_MARKS, sizeof *o->marks);
        if (!o->marks)
            return error_sys(e, WEIR_EXIT_INTERNAL, ENOMEM, "%s", o->t.name), STEP_FAIL;
    }
    /* a plain stream of a regular file is sent again from the file (a
     * sealed one keeps the hold: its records carry no sums to check the
     * file against, see reread_record) */
    o->reread = p->reread_fd >= 0 && o->session.frame && !o->t.sealed;
    /* and its receiver may then confirm rarely, if the notes can hold
     * twice what travels between two confirmations (-s under 1 KiB keeps
     * the usual confirmations) */
    o->session.reread = o->reread &&
                        p->cfg->block >= 2ull * CODEC_CONFIRM_REREAD_BYTES / RESUME_MARKS;
    if (o->reread && !o->recipe) {
        o->recipe = calloc(RESUME_MARKS, sizeof *o->recipe);
        o->replay_buf = malloc(o->session.block_max);
        if (!o->recipe || !o->replay_buf)
            return error_sys(e, WEIR_EXIT_INTERNAL, ENOMEM, "%s", o->t.name), STEP_FAIL;
    }
    sync_lock(&p->lock);
    o->marks_cap = RESUME_MARKS;
    o->marks_head = o->marks_count = 0;
    o->may_resume = true;
    if (!o->reread)
        ring_cursor_place_locked(&p->ring, &o->hold, o->cur.seq, o->cur.off, o->cur.bytes,
                                 o->cur.holes, true);
    sync_unlock(&p->lock);
    return STEP_OK;
}

/* The receiver's first record after the stream header: the session's
 * name ('N'), or why it refused the stream ('S'). */
static int hear_session_name(struct output *o, double limit, struct weir_error *e)
{
    unsigned char raw[CODEC_RECORD_MAX];
    struct codec_record r;
    size_t got;
    bool eof;
    if (session_read_record(&o->t, (int)(limit * 1000) + 1, &o->halt, &r, raw, &got, &eof, e)) {
        if (atomic_load(&o->halt))
            return STEP_STOP;
        if (errno == ETIMEDOUT)
            error_set(e, WEIR_EXIT_NETWORK, "%s: the receiver did not name the session within "
                      "%g s of the stream's header (a break this early cannot be resumed)",
                      o->t.name, limit);
        else if (!eof && got == 0 && breaks_connection(errno))
            error_set(e, WEIR_EXIT_NETWORK, "%s: the connection broke before the receiver "
                      "named the session (%s; a break this early cannot be resumed)", o->t.name,
                      strerror(errno));
        return STEP_FAIL;
    }
    if (r.type == 'S' && r.code != 0)
        return receiver_failed(o, r.code, r.msg, e);
    if (r.type != 'N')
        return error_set(e, WEIR_EXIT_NETWORK, "%s: unexpected '%c' record from the receiver "
                         "(it did not name the session)", o->t.name, r.type), STEP_FAIL;
    sync_lock(&o->p->lock);
    memcpy(o->token, r.token, sizeof o->token);
    o->resumable = true;
    sync_unlock(&o->p->lock);
    OPENSSL_cleanse(raw, sizeof raw);
    return STEP_OK;
}

/* Connect (for -O), hear the receiver's greeting, begin the stream. */
static int writer_open(struct output *o, bool once, struct weir_error *e)
{
    struct pipeline *p = o->p;
    const struct weir_config *c = p->cfg;
    bool tcp = o->spec->kind == WEIR_OUT_TCP;
    bool greet = tcp && !c->tcp.raw;
    if (tcp) {
        int fd = o->spec->fd;   /* connected: the engine takes it over */
        struct tcp_settings settings = c->tcp;
        if (once)
            settings.connect_timeout = 0;
        if (!o->spec->connected &&
            tcp_connect(o->spec->host, o->spec->port, &settings, &o->halt, p->log, o->name, &fd,
                        e))
            return atomic_load(&o->halt) ? STEP_STOP : STEP_FAIL;
        transport_tcp(&o->t, fd, o->name);
        o->t.wire_tx = &o->net;   /* what it sends, at the socket, for snapshots */
    }
    if (c->watchdog > 0)
        transport_pace_writes(&o->t);   /* -W sees a slow pipe or disk take a block */
    uint32_t block_max = p->encode ? p->piece_max : p->wire_block_max;
    session_out_init(&o->session, &o->t, greet, greet && !p->encode,
                     p->encode && o->form == CODEC_FORM_WEIR, block_max);
    o->session.resume = greet && c->reconnect > 0 && c->mem >= RESUME_MIN_BUFFER &&
                        c->block > 0 && c->mem / c->block >= RESUME_MIN_BLOCKS;
    if (greet && c->reconnect > 0 && !o->session.resume && !once)
        log_msg(p->log, LOG_INFO, "%s: a break will not be resumed: the buffer (%llu KiB, "
                "%llu blocks) is under the %u MiB and %u blocks resuming needs (-m, -s)", o->name,
                (unsigned long long)(c->mem >> 10),
                (unsigned long long)(c->block ? c->mem / c->block : 0),
                RESUME_MIN_BUFFER >> 20, RESUME_MIN_BLOCKS);
    double limit = LISTENER_HANDSHAKE_SECS;
    if (c->tcp.io_timeout > 0 && c->tcp.io_timeout < limit)
        limit = c->tcp.io_timeout;
    if (greet) {
        double wait = c->plain_after > 0 && c->plain_after < limit ? c->plain_after : limit;
        if (session_read_greeting(&o->session, wait, &o->halt, e)) {
            if (atomic_load(&o->halt))
                return STEP_STOP;
            if (!(c->plain_after > 0 && o->session.peer_silent))
                return STEP_FAIL;
            /* mbuffer, nc or socat: they never greet, and take plain bytes */
            log_msg(p->log, LOG_INFO, "%s: no weir greeting within %g s: sending plain bytes, "
                    "as mbuffer does (the end cannot be verified)", o->t.name, wait);
            o->plain_fallback = true;
            greet = false;
            session_out_init(&o->session, &o->t, false, false, false, block_max);
        }
    }
    if (greet) {
        int rc = check_keys(o, e);
        if (rc == STEP_OK && p->keyed &&
            session_greet_keyed(&o->session, io_timeout_ms(p, &o->t), &o->halt, e))
            rc = errno == ECANCELED ? STEP_STOP : STEP_FAIL;
        if (rc == STEP_OK && p->keyed)
            rc = client_handshake(o, limit, e);
        if (rc != STEP_OK)
            return rc;
        if (rc == STEP_OK && o->session.resume &&
            (o->session.peer_features & CODEC_FEATURE_RESUME))
            rc = keep_for_resuming(o, e);
        if (rc != STEP_OK)
            return rc;
        sync_lock(&p->lock);
        o->last_heard = clock_now();
        sync_unlock(&p->lock);
        if (!o->may_resume && start_backchannel(o, e))
            return STEP_FAIL;
    }
    if (mark(o, MARK_HEADER, 0))
        return write_error(o, e, "write");
    if (session_begin(&o->session, io_timeout_ms(p, &o->t), &o->halt, e))
        return errno == ECANCELED ? STEP_STOP : STEP_FAIL;
    sync_lock(&p->lock);
    boundary_locked(o);   /* the data begins after the header */
    sync_unlock(&p->lock);
    if (o->may_resume) {
        /* the receiver names the session as it admits the stream: known
         * before a byte of data goes, a break can always be resumed */
        int rc = hear_session_name(o, limit, e);
        if (rc != STEP_OK)
            return rc;
        if (start_backchannel(o, e))
            return STEP_FAIL;
    }
    plan_holes(o);
    if (p->encode && o->form == CODEC_FORM_FRAME) {
        /* the header of the one LZ4 frame; the pieces follow, the end
         * comes from the buffer's last slot */
        unsigned char hdr[CODEC_LZ4_HEADER_MAX];
        size_t n = codec_lz4_header(hdr, p->piece_max, p->sized, p->content_size);
        if (transport_write_all(&o->t, hdr, n, io_timeout_ms(p, &o->t), &o->halt))
            return errno == EPIPE && o->has_child ? consumer_quit(o, e)
                                                  : write_error(o, e, "write");
    }
    sync_lock(&p->lock);
    o->state = STATS_OUT_WRITING;
    sync_unlock(&p->lock);
    return STEP_OK;
}

/* ---- reconnecting ------------------------------------------------------------ */

/* Whether the connection broke under a session that may resume. */
static bool connection_broke(struct output *o)
{
    struct pipeline *p = o->p;
    sync_lock(&p->lock);
    bool broke = o->resumable && o->broken && !o->dead && !o->status_received &&
                 !atomic_load(&o->halt) && p->cfg->reconnect > 0;
    sync_unlock(&p->lock);
    return broke;
}

/* Let go of the broken connection: its back channel, the records the
 * workers sealed for it (under its keys, which go with it), the socket. */
static void let_go(struct output *o)
{
    struct pipeline *p = o->p;
    /* a connection given up on is reset, not closed: a receiver that had
     * the whole stream must not take its end for the sender having the
     * answer (reader_answer_home) */
    o->t.ops->abort(&o->t);
    if (o->has_backchannel) {
        if (o->t.fd >= 0)
            shutdown(o->t.fd, SHUT_RD);   /* wakes the back channel, sends nothing */
        sync_join(o->backchannel);
        o->has_backchannel = false;
    }
    sync_lock(&p->lock);
    for (;;) {
        bool sealing = false;
        for (unsigned i = 0; i < o->ahead_count; i++)
            sealing |= !o->ahead[(o->ahead_head + i) % SEAL_AHEAD].done;
        if (!sealing || atomic_load(&p->stop))
            break;
        sync_wait(&p->ring.data_cv, &p->lock);
    }
    o->ahead_head = o->ahead_count = 0;
    sync_unlock(&p->lock);
    struct weir_error ignored;
    transport_close(&o->t, false, &o->halt, &ignored);
    transport_none(&o->t);
}

/* One attempt on a new connection (o->t): the receiver's greeting, ours
 * (with a key, the handshake), the request to resume the session; *at is
 * where the receiver stopped.  *refused: the receiver said no, and will
 * not say yes later. */
static int rejoin(struct output *o, double limit, uint64_t *at, bool *refused,
                  struct weir_error *e)
{
    struct pipeline *p = o->p;
    *refused = false;
    o->session.greeted = false;
    o->session.rejoining = true;
    if (session_read_greeting(&o->session, limit, &o->halt, e))
        return atomic_load(&o->halt) ? STEP_STOP : STEP_FAIL;   /* busy: tried again */
    if (!(o->session.peer_features & CODEC_FEATURE_RESUME)) {
        *refused = true;
        return error_set(e, WEIR_EXIT_NETWORK, "%s: another receiver answers there now (it "
                         "does not resume)", o->t.name), STEP_FAIL;
    }
    if (check_keys(o, e) != STEP_OK) {
        *refused = true;   /* e says how its keys differ: another receiver too */
        return STEP_FAIL;
    }
    int ms = (int)(limit * 1000) + 1;
    if (p->keyed) {
        if (session_greet_keyed(&o->session, ms, &o->halt, e))
            return errno == ECANCELED ? STEP_STOP : STEP_FAIL;
        int rc = client_handshake(o, limit, e);
        if (rc != STEP_OK)
            return rc;
    } else {
        unsigned char g[CODEC_GREETING_SIZE];
        codec_greeting(g, CODEC_ROLE_SENDER, CODEC_FEATURES | CODEC_FEATURE_RESUME);
        if (transport_write_all(&o->t, g, sizeof g, ms, &o->halt))
            return errno == ECANCELED ? STEP_STOP
                   : (error_sys(e, WEIR_EXIT_NETWORK, errno, "%s: write", o->t.name), STEP_FAIL);
    }
    unsigned char token[CODEC_TOKEN_SIZE];
    sync_lock(&p->lock);
    memcpy(token, o->token, sizeof token);
    sync_unlock(&p->lock);
    int rc = session_rejoin(&o->session, token, limit, &o->halt, at, refused, e);
    OPENSSL_cleanse(token, sizeof token);
    if (rc && *refused && strstr(e->msg, LISTENER_BUSY))
        *refused = false;   /* it had not seen the break yet: try again */
    if (rc)
        return errno == ECANCELED && atomic_load(&o->halt) ? STEP_STOP : STEP_FAIL;
    return STEP_OK;
}

/* Sleep up to secs, or until this output must stop. */
static void pause_for(struct output *o, double secs)
{
    struct timespec deadline = clock_deadline(secs);
    sync_lock(&o->p->lock);
    while (!atomic_load(&o->halt) && sync_wait_until(&o->p->ring.data_cv, &o->p->lock,
                                                     &deadline)) {
    }
    sync_unlock(&o->p->lock);
}

/* The connection broke (a reset, a cut, --timeout, the receiver's
 * silence): connect again to where the receiver was, for up to
 * --reconnect seconds, and go on from where it stopped.  A refused
 * connection ends the wait at once: nothing listens there any more, so the
 * receiver and its session are gone. */
static int reconnect(struct output *o, struct weir_error *e)
{
    struct pipeline *p = o->p;
    const struct weir_config *c = p->cfg;
    char cause[200];
    sync_lock(&p->lock);
    snprintf(cause, sizeof cause, "%s", o->broken_why);
    uint64_t confirmed = o->confirmed;
    double since = clock_now();
    o->gap_since = since;
    o->state = STATS_OUT_CONNECTING;
    sync_unlock(&p->lock);
    log_msg(p->log, LOG_WARN, "%s: the connection broke (%s); reconnecting for up to %g s",
            o->name, cause, c->reconnect);
    let_go(o);
    double deadline = since + c->reconnect, backoff = 0.05;
    char last[WEIR_ERROR_MAX] = "";
    uint64_t at = 0;
    int rc = STEP_FAIL;
    for (;;) {
        if (atomic_load(&o->halt)) {
            rc = STEP_STOP;
            break;
        }
        double left = deadline - clock_now();
        if (left <= 0) {
            error_set(e, WEIR_EXIT_NETWORK, "%s: the connection broke (%s), and no new one "
                      "could be made within %g s%s%s; the receiver had confirmed %llu bytes of "
                      "the stream", o->name, cause, c->reconnect, last[0] ? ": " : "", last,
                      (unsigned long long)confirmed);
            break;
        }
        double limit = left < LISTENER_HANDSHAKE_SECS ? left : LISTENER_HANDSHAKE_SECS;
        int fd;
        struct weir_error dial;
        dial.msg[0] = '\0';
        int dialled = o->spec->redial
                          ? o->spec->redial(o->spec->redial_ctx, limit, &o->halt, &fd, &dial)
                          : tcp_connect_addr((struct sockaddr *)&o->peer_addr, o->peer_len,
                                             limit, c->tcp.io_timeout, &o->halt, &fd);
        if (dialled != 0) {
            int err = errno;
            if (err == ECANCELED) {
                rc = STEP_STOP;
                break;
            }
            if (err == ECONNREFUSED) {
                bool all = o->ended && confirmed >= o->session.sent;
                error_set(e, WEIR_EXIT_NETWORK, "%s: the connection broke (%s), and the "
                          "receiver refuses a new one: it is gone; it had confirmed %llu bytes "
                          "of the stream%s", o->name, cause, (unsigned long long)confirmed,
                          all ? " (all of it, but its answer was lost)" : "");
                break;
            }
            if (dial.msg[0])
                snprintf(last, sizeof last, "%s", dial.msg);
            else
                snprintf(last, sizeof last, "connect: %s", strerror(err));
        } else {
            transport_tcp(&o->t, fd, o->name);
            o->t.wire_tx = &o->net;
            sync_lock(&p->lock);
            o->tx_gen++;   /* the workers seal for the new connection's keys */
            sync_unlock(&p->lock);
            bool refused;
            struct weir_error why;
            rc = rejoin(o, limit, &at, &refused, &why);
            if (rc == STEP_OK)
                break;
            struct weir_error ignored;
            o->t.ops->abort(&o->t);
            transport_close(&o->t, false, &o->halt, &ignored);
            transport_none(&o->t);
            if (rc == STEP_STOP)
                break;
            if (refused) {
                error_set(e, WEIR_EXIT_NETWORK, "%s: the connection broke (%s), and the "
                          "session could not resume: %s", o->name, cause, why.msg);
                break;
            }
            snprintf(last, sizeof last, "%s", why.msg);
        }
        pause_for(o, backoff);
        backoff = backoff * 2 > RESUME_BACKOFF_MAX ? RESUME_BACKOFF_MAX : backoff * 2;
    }
    if (rc == STEP_STOP)
        /* the stream failed (a producer, a signal) while the connection was
         * down: an abort record needs one, so the receiver is not told */
        log_msg(p->log, LOG_WARN, "%s: the stream stopped during a break: the receiver cannot "
                "be told, and fails only once its --reconnect has passed", o->name);
    sync_lock(&p->lock);
    o->gap_secs += clock_now() - since;
    o->gap_since = 0;
    if (rc == STEP_OK) {
        o->reconnections++;
        o->broken = false;
        o->state = STATS_OUT_WRITING;
        o->last_heard = clock_now();
    }
    sync_unlock(&p->lock);
    if (rc != STEP_OK)
        return rc;
    log_msg(p->log, LOG_WARN, "%s: reconnected after %.1f s; resuming at byte %llu of the "
            "stream", o->name, clock_now() - since, (unsigned long long)at);
    if (start_backchannel(o, e))
        return STEP_FAIL;
    return resume_at(o, at, e);
}

/* Finish a complete output: trailer and answer, or the end of a plain
 * connection, or a flush to stable storage. */
static int writer_end(struct output *o, struct weir_error *e)
{
    struct pipeline *p = o->p;
    if (o->session.frame) {
        sync_lock(&p->lock);
        o->ended = true;   /* a success answer may come once the trailer is out */
        sync_unlock(&p->lock);
        if (o->t.sealed && !says_read(o))
            transport_sealed_last(&o->t);
        if (mark(o, MARK_TRAILER, 0) ||
            session_trailer(&o->session, io_timeout_ms(p, &o->t), &o->halt))
            return write_error(o, e, "write");
        sync_lock(&p->lock);
        boundary_locked(o);   /* the end: a confirmation of it frees everything */
        sync_unlock(&p->lock);
    }
    if (o->session.greet)
        return await_answer(o, e);
    if (o->t.is_socket) {
        if (o->t.ops->half_close(&o->t, e) == 0)
            return raw_confirm(o, e);
        if (errno == ENOTCONN || errno == ECONNRESET)
            return error_set(e, WEIR_EXIT_NETWORK, "%s: the peer reset the connection: the data "
                             "may not all have arrived", o->t.name), STEP_FAIL;
        return STEP_FAIL;
    }
    /* the size first: a trailing hole is part of the file */
    if (o->skipped && transport_end_holes(&o->t, p->cfg->dsync, e))
        return STEP_FAIL;
    /* success is only reported for data a crash cannot take back */
    if (!p->cfg->no_sync && (o->t.regular || o->t.blockdev)) {
        sync_lock(&p->lock);
        o->state = STATS_OUT_FLUSHING;
        sync_unlock(&p->lock);
        if (transport_sync(&o->t, e))
            return STEP_FAIL;
    }
    return STEP_OK;
}

/* An unfinished stream must not look like a clean end to the far side: a
 * weir receiver is told why in an abort record (after the frame in flight
 * is finished, so that it can read it), any other connection is reset, a
 * consumer gets SIGTERM before its input closes (transport_close without
 * success).  True when a weir receiver was told. */
static bool writer_abort(struct output *o)
{
    struct pipeline *p = o->p;
    sync_lock(&p->lock);
    struct weir_error why = p->first;
    bool failed = p->failed;
    const unsigned char *rest = NULL;
    size_t restlen = 0;
    /* -z: the rest of the piece being written, which the cursor still holds */
    if (o->session.compressed && o->piece_at > 0 && !o->dead &&
        ring_peek_locked(&p->ring, &o->cur, &rest, &restlen) == RING_DATA) {
        struct codec_span sp[2];
        size_t total;
        codec_spans(rest - o->piece_at, CODEC_FORM_WEIR, sp, &total);
        restlen = sp[0].off + sp[0].len - o->piece_at;
    } else {
        restlen = 0;
    }
    sync_unlock(&p->lock);
    bool told = session_abort(&o->session, failed ? why.status : WEIR_EXIT_NETWORK,
                              failed ? why.msg : "sender stopped", rest, restlen);
    if (!told && o->spec->kind == WEIR_OUT_TCP)
        log_msg(p->log, LOG_DEBUG, "%s: the receiver could not be told why (%s); resetting "
                "the connection", o->name, o->session.spoke ? strerror(errno) : "nothing sent");
    if (!told) {
        o->t.ops->abort(&o->t);
    }
    return told;
}

/* Close: for a consumer this waits for it to exit, and its exit status
 * decides whether the output is complete.  told: a weir receiver was sent
 * an abort record; it gets a moment to read it before the connection goes
 * (closing with its records unread would reset the connection). */
static int writer_close(struct output *o, int rc, bool told, struct weir_error *e)
{
    struct pipeline *p = o->p;
    if (o->has_backchannel) {
        if (told) {
            struct timespec deadline = clock_deadline(SESSION_ABORT_SECS);
            sync_lock(&p->lock);
            while (o->bc_running && sync_wait_until(&p->ring.data_cv, &p->lock, &deadline)) {
            }
            sync_unlock(&p->lock);
        }
        sync_lock(&p->lock);
        bool reading = o->bc_running;
        sync_unlock(&p->lock);
        if (o->t.fd >= 0 && (reading || !told))
            shutdown(o->t.fd, SHUT_RDWR);   /* ends the back channel's read */
        sync_join(o->backchannel);
        o->has_backchannel = false;
        if (told && !reading && o->t.fd >= 0)
            io_drain(o->t.fd, SESSION_ABORT_SECS);
    }
    sync_lock(&p->lock);
    o->awaiting = rc == STEP_OK && o->has_child;
    sync_unlock(&p->lock);
    struct weir_error why;
    int closed = transport_close(&o->t, rc == STEP_OK || told, &o->halt, &why);
    sync_lock(&p->lock);
    o->awaiting = false;
    sync_unlock(&p->lock);
    if (closed != 0 && rc == STEP_OK) {
        if (atomic_load(&o->halt) && !o->has_child)
            return STEP_STOP;
        *e = why;
        return STEP_FAIL;
    }
    return rc;
}

/* The stream failed before this connection's header went (a producer
 * that failed within milliseconds, before the connection was made or the
 * receiver's greeting read): the receiver has seen nothing it trusts and
 * would go on listening for a sender.  Connect once more, one attempt, and
 * tell it why: greeting, handshake, header, then the abort record
 * (writer_abort).  Only a signal skips this (it sets halt again, as does
 * any later stop); the opening's own limits bound it.  A connection the
 * engine was handed (--connect-back) cannot be made again. */
static int tell_early(struct output *o, struct weir_error *e)
{
    struct pipeline *p = o->p;
    const struct weir_config *c = p->cfg;
    if (o->spec->kind != WEIR_OUT_TCP || c->tcp.raw || o->spec->connected ||
        o->session.spoke || o->has_backchannel || o->plain_fallback)
        return STEP_STOP;
    sync_lock(&p->lock);
    /* a signal may come after the producer's death was the first error */
    bool tell = p->failed && p->first.status < WEIR_EXIT_SIGNAL && !p->signalled && !o->dead;
    if (tell)
        atomic_store(&o->halt, false);
    sync_unlock(&p->lock);
    if (!tell)
        return STEP_STOP;
    if (o->t.fd >= 0)
        let_go(o);   /* reset: the receiver drops it as unproven */
    log_msg(p->log, LOG_INFO, "%s: the stream failed before it began: connecting once more "
            "to tell the receiver", o->name);
    int rc = writer_open(o, true, e);
    atomic_store(&o->halt, true);   /* the stream is over: what follows is the abort */
    if (rc == STEP_FAIL)
        log_msg(p->log, LOG_INFO, "%s (the receiver could not be told)", e->msg);
    return rc == STEP_OK ? STEP_STOP : rc;
}

void *writer_main(void *arg)
{
    struct output *o = arg;
    struct pipeline *p = o->p;
    struct weir_error e;
    thread_unblock_wake();
    int rc = writer_open(o, false, &e);
    if (rc == STEP_STOP)
        rc = tell_early(o, &e);
    for (bool done = false; rc == STEP_OK && !done;) {
        do
            rc = o->t.sealed && p->nworkers > 0 && o->session.skip == 0 ? sealed_loop(o, &e)
                                                                       : writer_loop(o, &e);
        while (rc == STEP_AGAIN);
        if (rc == STEP_OK) {
            rc = writer_end(o, &e);
            done = rc == STEP_OK;
        }
        /* a session that may resume outlives its connection */
        if (rc != STEP_OK && connection_broke(o))
            rc = reconnect(o, &e);
    }
    /* the first error is this writer's, not what the back channel hears
     * when the connection is shut down below */
    if (rc == STEP_FAIL)
        output_fail(o, &e);
    /* a receiver that answered (a failure of its own) is closed on in
     * order: a reset would take back the acknowledgement of its answer,
     * which is how it knows the answer arrived (reader.c, answer_delivered) */
    sync_lock(&p->lock);
    bool answered = o->status_received;
    sync_unlock(&p->lock);
    bool told = rc != STEP_OK && (answered || writer_abort(o));
    int closed = writer_close(o, rc, told, &e);
    if (closed == STEP_FAIL && rc == STEP_OK)
        output_fail(o, &e);
    sync_lock(&p->lock);
    o->state = closed == STEP_OK ? STATS_OUT_DONE : STATS_OUT_STOPPED;
    sync_unlock(&p->lock);
    free(o->zero_frame);
    o->zero_frame = NULL;
    if (p->tls_client && o->spec->kind == WEIR_OUT_TCP) {
        sync_lock(&p->lock);
        p->sealing_writers--;   /* the workers may go once the reader is done too */
        sync_broadcast(&p->job_cv);
        sync_unlock(&p->lock);
    }
    thread_done(p, &o->running);
    return NULL;
}
