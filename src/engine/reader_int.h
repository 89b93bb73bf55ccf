/*
 * reader_int.h - what the parts of the reader share: the thread and its
 * reading (reader.c), and its registration with a weir sender's session
 * (link/receiver.h) and what a break costs the engine (admission.c).
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

struct reader {
    struct pipeline *p;
    int timeout_ms;
    bool timed_out;      /* the last read failed for lack of progress */
    int sealed_errno;    /* an encrypted record that did not open, or a cut */
    int stripe_errno;           /* a spread input's failure (link/stripe.h says which) */
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
/* Register the engine with its receiver (link/receiver.h): its lock, the
 * input's slot and counters, the listener's settings, the redial.  Before
 * anything else the reader does. */
void register_receiver(struct pipeline *p);
/* Admit the first sender that proves itself (receiver_admit). */
int admit_sender(struct pipeline *p, struct weir_error *e);
/* The connection of a session that may resume broke (cause): close it,
 * keep everything else as it is, and wait up to --reconnect for its sender
 * on the listening socket, refusing any other (listener.c).  Once it is
 * back, tell it how much of the stream this end holds: it sends the rest
 * from there.  0, or -1 (r->gone says why, or the engine is stopping). */
int resume_input(struct reader *r, const char *cause);

#endif
