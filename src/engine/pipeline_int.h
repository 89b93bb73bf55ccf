/*
 * pipeline_int.h - the engine's shared state, private to pipeline.c,
 * reader.c, writer.c and worker.c.  The essay at the top of pipeline.c
 * explains the threads; this header says which lock guards what.
 *
 * Everything marked "lock" is guarded by p->lock (so is the ring, ring.h).
 * Fields without a mark are set before the threads start and then only
 * read, or are owned by the one thread named beside them.
 */
#ifndef WEIR_PIPELINE_INT_H
#define WEIR_PIPELINE_INT_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "base/sync.h"
#include "crypto/keyfile.h"
#include "crypto/tls.h"
#include "engine/adapt.h"
#include "engine/ratelimit.h"
#include "engine/growth.h"
#include "engine/ring.h"
#include "format/codec.h"
#include "format/stream.h"
#include "link/backchannel.h"
#include "link/listener.h"
#include "link/receiver.h"
#include "link/session.h"
#include "os/os.h"
#include "transport/child.h"
#include "transport/tcp.h"
#include "transport/transport.h"
#include "weir/error.h"
#include "weir/log.h"
#include "weir/weir.h"

#define WAKE_SIGNAL SYNC_WAKE_SIGNAL

struct job {
    uint64_t seq;              /* the slot the result goes to */
    uint32_t src;              /* pool block holding the input */
    size_t len;                /* bytes of input */
    struct stream_block blk;   /* decode: the block's record */
};

/* A record an encrypted output has a worker seal ahead of its writer. */
#define SEAL_AHEAD 4
struct seal_job {
    bool hole;                 /* a hole record (rec), hole_len bytes of the ring */
    uint64_t hole_len;
    unsigned char rec[CODEC_HOLE_SIZE];
    struct output *o;
    uint64_t seq;              /* the ring range it seals */
    size_t off, len;
    size_t step;               /* bytes of the ring it covers (-z: its whole piece) */
    const unsigned char *src;
    uint64_t num;              /* its first record number (framed: three records) */
    unsigned flags;            /* SEAL_END on the last record of -z */
    uint64_t frame_seq;        /* framed: the stored block's sequence number */
    uint64_t hash;             /* framed: the block's checksum (the worker's) */
    unsigned char *out;        /* the sealed records (owned by the output) */
    size_t out_len;            /* 0 until done; a failure leaves 0 */
    bool done;                 /* lock */
};

/* How an output passes the holes in the data (sparse.h), decided once it
 * is open: each is correct for its kind, and only skipping costs nothing. */
enum output_holes {
    HOLES_ZEROS,      /* zeros are written (a pipe, a device, a command, a digest,
                         a socket; stored blocks to a weir that takes no holes) */
    HOLES_SKIP,       /* a regular file: skipped over, its size set at the end */
    HOLES_RECORD,     /* a weir receiver that takes holes: one record each */
    HOLES_FRAME,      /* -z, one LZ4 frame: blocks of compressed zeros */
    HOLES_REFUSED,    /* -z to a weir that takes no holes: its stream cannot carry one */
    HOLES_ZSTD,       /* --zstd, a zstd file: the hole's record, then frames of zeros
                         that zstd decoders write and a weir skips */
};

/* Resuming: where one record of the stream began, so that the stream can be
 * sent again from any byte the receiver may hold.  A resent record is the
 * same bytes as the first time: the buffer still holds its data (the hold
 * cursor keeps it), and a stored block is cut to its first length. */
enum mark_kind { MARK_HEADER, MARK_RECORD, MARK_TRAILER };
struct resume_mark {
    uint64_t at;               /* the stream's byte it begins at */
    uint64_t seq, bytes, holes;   /* the writer's cursor there */
    size_t off;
    uint64_t sseq, total, chain;  /* framed: the session's counts before it */
    uint64_t exact;            /* a stored block: its data bytes */
    enum mark_kind kind;
};

struct output {
    struct pipeline *p;
    const struct weir_output *spec;
    struct transport t;        /* owned by this writer */
    struct child child;        /* a consumer command */
    bool has_child;
    struct session_out session;   /* owned by the writer; the back channel reads */
    struct backchannel bc;     /* what the receiver says (weir over TCP): its thread, the
                                  answer, a break, whether the session may resume
                                  (link/backchannel.h; its lock is the pipeline's) */
    pthread_t thread;
    bool plain_fallback;       /* owned by the writer: the receiver did not greet, so it
                                  gets plain bytes (cfg->plain_after) */
    struct ratelimit rl;       /* owned by the writer */
    struct ring_cursor cur;    /* lock: where this output is in the buffer */
    enum codec_form form;      /* -z: what it writes of each piece (codec.h) */
    size_t piece_at;           /* -z: the cursor's offset into its piece (the writer's) */
    enum output_holes holes;   /* the writer's */
    bool skipped;              /* the writer's: a hole was skipped, the size is set at the end */
    unsigned char *zero_frame; /* the writer's, HOLES_FRAME: a whole block of zeros, and room
                                  for a shorter one */
    size_t zero_frame_len;
    bool hole_said;            /* the writer's, HOLES_ZSTD: the hole at the cursor has its
                                  record out; its frames of zeros follow */
    void *zc;                  /* the writer's, HOLES_ZSTD: its zstd context */
    bool hole_refused;         /* lock: sealing ahead met a hole it cannot send */
    atomic_bool halt;          /* this output must stop (it failed, or all stop) */
    /* lock: */
    bool started;              /* its thread was created */
    bool running;
    bool dead;                 /* failed */
    bool awaiting;             /* the writer waits for the answer or its consumer */
    /* sealing ahead (an encrypted output, when there are workers), lock: */
    struct seal_job ahead[SEAL_AHEAD];
    unsigned ahead_head, ahead_count;
    uint64_t q_seq;            /* the next range to queue */
    size_t q_off;
    uint64_t next_frame_seq;   /* framed: the next stored block's number */
    struct seal_direction *tx_dir;   /* the connection's keys, set before its first job:
                                      * secret memory the output owns, so that a worker
                                      * still sealing when the connection goes reads
                                      * nothing freed (weir_destroy frees it) */
    uint64_t epoch_records;
    /* for snapshots: */
    char name[300];            /* as messages name it; set before the threads start */
    const char *kind;          /* "file", "stdout", "connection", "command" */
    /* a resumable session, sending (--reconnect; writer.c): */
    bool may_resume;           /* lock: both ends offered it; marks are kept (set by the
                                  writer, cleared by the back channel too) */
    struct resume_mark *marks; /* lock: where each unconfirmed record began, a ring */
    size_t marks_cap, marks_head, marks_count;
    struct ring_cursor hold;   /* lock: the oldest record the receiver may lack */
    bool reread;               /* the writer's: what the receiver lacks is read again from
                                  the input (p->reread_fd), and no hold is kept */
    struct resume_mark *recipe;   /* the writer's: the records to send again from the
                                     input, as marks (the last: where the cursor is) */
    size_t recipe_n, recipe_at;
    bool replaying;            /* lock: recipe_at < recipe_n - 1; marks note rp_* */
    uint64_t rp_bytes, rp_holes;   /* lock: where the record sent again begins */
    unsigned char *replay_buf; /* the writer's: a record's bytes, read again */
    uint64_t confirmed;        /* lock: the stream's bytes the receiver confirmed */
    bool told_waiting;         /* the writer's: it said it waits for confirmations */
    uint64_t exact;            /* the writer's: a resent stored block is this long */
    unsigned tx_gen;           /* lock: bumped with every new connection's keys */
    struct sockaddr_storage peer_addr;   /* the writer's: where the receiver was reached */
    socklen_t peer_len;
    unsigned reconnections;    /* lock */
    double gap_secs, gap_since;   /* lock: time without the connection, gaps over; > 0:
                                     in a gap since then */
    uint64_t bytes_peak;       /* lock: the most its cursor had read before a resend took
                                  it back (its count never goes back in snapshots) */
    _Atomic uint64_t net;      /* bytes sent on its connection (transport wire_tx) */
    enum stats_output_state state;   /* lock; a dead output is failed whatever this says */
    struct os_tcp_stats path[CODEC_STREAMS_MAX];   /* lock: its connections' paths, as
                                                      the writer sampled them */
    bool path_known[CODEC_STREAMS_MAX];            /* lock: that one was sampled */
    int npaths;                /* lock: how many connections carry it (--streams) */
    int nstreams;              /* the writer's: how many it spreads the transfer over */
    struct growth growth;      /* the writer's, --streams auto: when it takes more (grow.c) */
    struct grow_job *grow_job; /* the writer's: connections joining now; NULL: none */
    double path_at;            /* the writer's: when it last sampled it */
};

struct worker {
    struct pipeline *p;
    pthread_t thread;
    bool started;
    bool running;              /* lock */
    /* owned by the worker: its cipher state for each encrypted output */
    struct sealer seal[WEIR_MAX_OUTPUTS];
    bool seal_ready[WEIR_MAX_OUTPUTS];
    unsigned seal_gen[WEIR_MAX_OUTPUTS];   /* the output's tx_gen they were made for */
    void *zc, *zd;             /* owned by the worker: its zstd contexts (--zstd, and
                                  decoding zstd blocks) */
    unsigned store_left, store_run;   /* the worker's, --adapt: blocks still to store,
                                         and how many the last poor one stored */
};

struct pipeline {
    const struct weir_config *cfg;
    struct weir_log *log;
    pthread_t main_thread;

    pthread_mutex_t lock;
    pthread_cond_t job_cv;     /* workers: a job queued, end, stop */
    atomic_bool stop;          /* written under lock; read anywhere */
    struct ring ring;          /* the buffer; lock */

    bool encode;               /* -z or --zstd */
    bool zstd;                 /* --zstd: the pieces are zstd frames, every output gets the
                                  weir stream (codec.h) */
    struct adapt adapt;        /* --adapt: the level, moved by the main thread */
    double encode_secs;        /* lock: the workers' time compressing, summed */
    bool may_decode;           /* -d, or -I without --raw */
    uint32_t wire_block_max;   /* block size a framing output declares */
    uint32_t piece_max;        /* -z: the most raw bytes of a piece (codec.h) */
    unsigned sums;             /* -z: the checksums its outputs' forms need */
    bool sized;                /* a regular file input's size is known in advance */
    uint64_t content_size;     /*     and is this (the reader checks it at the end) */
    uint64_t chain;            /* lock: -z trailer chain over ready slots */
    uint64_t chain_total;      /* lock: -z raw bytes over ready slots */

    struct job *jobs;          /* lock: FIFO of nblocks entries */
    uint64_t job_head, job_tail;
    bool jobs_done;            /* lock: the reader queues no more jobs */
    int transforming;          /* lock: workers inside a job (-W: busy, not stalled) */
    struct seal_job **sealq;   /* lock: FIFO of records to seal, nout * SEAL_AHEAD */
    uint64_t seal_head, seal_tail;
    int sealing_writers;       /* lock: writers that may still queue records to seal */
    int nworkers;
    struct worker *workers;

    /* -d of a plain LZ4 frame split into blocks: its content checksum is
     * sequential, so a cursor hashes the decoded slots in order behind the
     * workers (content_catch_up_locked) */
    struct ring_cursor content_cur;   /* lock */
    bool content_busy;         /* lock: a thread is hashing; it owns p->content */
    struct stream_content content;

    /* statistics, lock */
    _Atomic uint64_t in_bytes; /* read from the input (atomic, no lock) */
    _Atomic uint64_t net_in;   /* read from the -I connection at its socket (atomic) */
    uint64_t input_size;       /* a regular-file input's size when opened, or 0 */
    int reread_fd;             /* a regular-file input opened once more, to send again
                                  from it (a connection that resumes); -1: none */
    uint64_t reread_base;      /* the input's offset where reading began */
    bool finished;             /* weir_run has joined every thread */
    uint64_t data_bytes;       /* user data: read (-z) or decoded, holes included */
    uint64_t hole_bytes;       /* of which holes (lock) */
    bool decoding;             /* the input turned out to be a stream to decode */
    bool decoding_zstd;        /* lock: and its blocks are zstd frames */

    /* errors, lock */
    bool failed;
    bool signalled;            /* lock: SIGINT, SIGTERM or SIGHUP came (the first error
                                  may still be another's): nothing more is attempted */
    struct weir_error first;
    int running;               /* threads not yet returned */

    /* the input, owned by the reader (the main thread answers a sender) */
    struct transport in;
    struct child producer;     /* a producer command */
    bool has_producer;
    bool answer_sender;        /* lock: the input is a weir stream over TCP */
    uint64_t stream_chain;     /* lock: the received stream's chain, once verified */
    bool stream_whole;         /* lock: the received stream ended, whole and verified */
    bool input_closed;         /* lock: the reader closed the input */
    /* a weir sender's session (link/receiver.h): its listener, admission,
     * confirmations, taking it back, and the answer; registered with the
     * pipeline's lock and the input's slot */
    struct receiver rx;
    _Atomic uint64_t held;     /* bytes of the stream handed to the decoder (the reader's) */
    struct stream_decoder *decoder;   /* the reader's: whether the stream has ended */
    unsigned in_streams;       /* lock: the connections the input came over (--streams) */
    /* reconnections, lock: this end's (an input's, or its outputs' summed in
     * snapshots) */
    unsigned reconnections;
    double gap_secs;           /* time spent without the connection, gaps over */
    double gap_since;          /* > 0: in a gap since then */
    int channel_fd;            /* weir.h: a connection given, until the reader admits it */
    int listen_fd;             /* weir.h: a listening socket given, until open_input takes it */
    pthread_t reader;
    bool reader_started;
    bool reader_running;       /* lock */
    /* lock: the reader watches a sender's connection until the outputs are
     * done (after the trailer); a thread that ends wakes it to look */
    bool reader_watching;
    struct ratelimit read_rl;  /* owned by the reader */

    struct output out[WEIR_MAX_OUTPUTS];
    int nout;

    /* --key-file: read-only once created */
    bool keyed;
    struct keyring keys;
    const struct key *key;            /* the sender's */
    struct tls_context *tls_client;   /* for -O */
    struct tls_context *tls_server;   /* for -I */
};

/* shared.c: what every thread does to the shared state */
void pipeline_fail(struct pipeline *p, const struct weir_error *e);
void stop_locked(struct pipeline *p);
/* Hash the present data of a split LZ4 frame in order, up to the ring's
 * ready slot.  Any thread that makes data present calls it; one hashes at a
 * time (the others return at once) and it drops the lock while hashing. */
void content_catch_up_locked(struct pipeline *p);
void output_fail(struct output *o, const struct weir_error *e);
/* Register the output's back channel with the engine (connection.c). */
void connection_init(struct output *o);
void thread_done(struct pipeline *p, bool *running_flag);
void thread_unblock_wake(void);
/* --timeout in milliseconds for a transport that can stall (a socket). */
int io_timeout_ms(const struct pipeline *p, const struct transport *t);

/* geometry.c: the buffer's blocks.  Give a decoding engine's buffer blocks
 * of `block` bytes, once: the reader calls it when the stream says how
 * large its blocks are. */
int pipeline_carve(struct pipeline *p, size_t block, struct weir_error *err);
/* At creation (pipeline.c): the blocks and the job queue, the content size
 * a split LZ4 frame needs, which outputs re-read the input; and, lock held,
 * the readahead a file input may ask for. */
int plan_buffer(struct pipeline *p, struct weir_error *err);
int plan_content_size(struct pipeline *p, struct weir_error *err);
void plan_reread(struct pipeline *p);
void plan_readahead_locked(struct pipeline *p);

/* reader.c, writer.c, worker.c: thread bodies */
void *reader_main(void *arg);
void *writer_main(void *arg);
void *worker_main(void *arg);
/* worker.c: queue a job (lock held); its result goes to a new pending slot
 * (j->seq is set here). */
void job_queue_locked(struct pipeline *p, struct job *j);
/* worker.c: queue a record to seal (lock held). */
void seal_queue_locked(struct pipeline *p, struct seal_job *j);

#endif
