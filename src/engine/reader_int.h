/*
 * reader_int.h - what the parts of the reader share: the thread and its
 * reading (reader.c), the input's connection to a weir sender: admitting
 * it, taking it back, dialling it again (admission.c), and the answer and
 * its way home (answer.c).
 */
#ifndef WEIR_READER_INT_H
#define WEIR_READER_INT_H

#include <xxhash.h>

#include "engine/pipeline_int.h"
#include "format/sparse.h"
#include "format/stream.h"

#define READ_MAX (1u << 20)    /* largest single read(); keeps publishing frequent */
#define IDLE_FLUSH_MS 10       /* -z: compress a partial block after this much quiet */
#define SCAN_BUFFER (1u << 20) /* --sparse: what is read at a time to be scanned */
/* resuming: the stream is confirmed to the sender at least every this many
 * bytes, and whenever the connection has nothing more to read for now (the
 * sender may be waiting for the confirmation to free its buffer) */
#define CONFIRM_IDLE_MS 2   /* an idle connection's bytes are confirmed after this */
/* and a connection silent this long while another knocks is taken for dead */
#define RESUME_SILENCE_SECS 10.0

struct reader {
    struct pipeline *p;
    int timeout_ms;
    bool timed_out;      /* the last read failed for lack of progress */
    int sealed_errno;    /* an encrypted record that did not open, or a cut */
    unsigned char *big_in, *big_out;   /* oversize blocks (oversize_block) */
    void *zstd;          /* their zstd context, when they are zstd frames */
    bool legacy_told;    /* the user was told that legacy LZ4 has no checksums */
    bool unsummed_told;  /* ... that an LZ4 frame has none */
    /* -z: */
    XXH32_state_t content;   /* the LZ4 frame's content checksum, as read */
    uint64_t pieces;         /* pieces queued: the weir stream's blocks (and holes) */
    /* holes in what is read as it is (pass-through, -z): */
    struct stream_decoder *staged;   /* bytes read while sniffing, handed on first */
    bool extents;            /* a regular file, read by its data extents */
    struct sparse_extents ext;
    bool seek_failed;        /* the last failure was lseek's, not read's */
    uint64_t at;             /* offset in the data of the next byte handed on */
    unsigned char *scan;     /* --sparse: bytes read, not yet judged or handed on */
    size_t scan_pos, scan_end;
    uint64_t scan_hole;      /* --sparse: a hole (of the file) after the scanned bytes */
    bool scan_final;         /* the scanned bytes end at that hole or at the end */
    bool scan_eof;           /* the input ended after them */
    struct weir_error gone;  /* resuming: the sender did not come back (msg "" until then) */
    double next_knock;       /* resuming: when to look for other connections next */
    bool owe_confirm;        /* resuming: the last read drained the connection, with
                                bytes unconfirmed */
    bool broke_whole;        /* resuming: the connection broke after the whole stream */
};

/* ---- admission.c ---- */
/* Admit the first sender that proves itself (listener.c).  One that may
 * resume is told the session's token: a random 128-bit name that only it
 * (and, without a key, whoever reads the connection) learns. */
int admit_sender(struct pipeline *p, struct weir_error *e);
/* Let the broken connection go and take the session's sender back: on
 * the listening socket (refusing any other, listener.c) for up to window
 * seconds, or by dialling it again.  stop ends the wait early; the dialling
 * follows the engine's own.  0 with the new connection as the input and
 * the sender told how much of the stream this end holds (where it resumes),
 * or -1 with errno and e. */
int readmit(struct pipeline *p, double since, double window, atomic_bool *stop,
                   struct weir_error *e);
/* The connection of a session that may resume broke (cause): close it,
 * keep everything else as it is, and wait up to --reconnect for its sender
 * on the listening socket, refusing any other (listener.c).  Once it is
 * back, tell it how much of the stream this end holds: it sends the rest
 * from there.  0, or -1 (r->gone says why, or the engine is stopping). */
int resume_input(struct reader *r, const char *cause);

/* ---- answer.c ---- */
/* The connection broke once the whole stream was in, and the outputs (a
 * consumer committing it) may take longer than the sender's --reconnect:
 * take the sender back now, on the reader's thread, with the ring already
 * finished, so that it is greeted, told the whole stream is held, and kept
 * informed by the keepalives until the answer.  A sender that does not
 * come back gets no answer: the outputs are whole all the same. */
void take_back_for_answer(struct pipeline *p);

#endif
