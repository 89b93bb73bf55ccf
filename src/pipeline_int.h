/*
 * pipeline_int.h - the pipeline's shared state, private to pipeline.c,
 * reader.c, writer.c and worker.c.  The essay at the top of pipeline.c
 * explains the threads; this header says which lock guards what.
 *
 * Everything marked "lock" is guarded by p->lock.  Fields without a mark are
 * set before the threads start and then only read, or are owned by the one
 * thread named beside them.
 */
#ifndef WEIR_PIPELINE_INT_H
#define WEIR_PIPELINE_INT_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "weir/codec.h"
#include "weir/endpoint.h"
#include "weir/error.h"
#include "weir/listener.h"
#include "weir/log.h"
#include "weir/options.h"
#include "weir/pool.h"
#include "weir/ratelimit.h"
#include "weir/stream.h"

#define WAKE_SIGNAL SIGUSR2
#define PIPELINE_MAX_BLOCKS (1u << 18)   /* blocks of a decoding buffer, at most */

struct slot {
    uint32_t block;     /* pool index */
    bool present;       /* the data is there (a worker's slot may be pending) */
    bool sealed;        /* no more bytes will be added */
    size_t len;         /* bytes published */
    uint64_t hash;      /* -z: the block's checksum, folded into the trailer */
    uint32_t raw_len;   /* -z: raw bytes the block holds */
};

struct job {
    uint64_t seq;              /* the slot the result goes to */
    uint32_t src;              /* pool block holding the input */
    size_t len;                /* bytes of input */
    struct stream_block blk;   /* decode: the block's record */
};

enum output_framing {
    FRAME_NONE,     /* write the queue's bytes as they are */
    FRAME_STORED,   /* wrap raw data as a weir stream of stored blocks (TCP) */
    FRAME_ENCODED,  /* -z: the queue holds the stream's blocks and trailer; the
                     * writer sends the header itself, at once, so a listener
                     * sees it however long -P holds the data back */
};

struct output {
    struct pipeline *p;
    const struct output_spec *spec;
    struct endpoint ep;        /* owned by this writer */
    pthread_t thread;
    pthread_t backchannel;     /* reads the receiver's status (weir over TCP) */
    bool has_backchannel;      /* owned by the writer */
    bool spoke;                /* owned by the writer: it began writing the stream */
    enum output_framing framing;
    bool expects_status;       /* a weir receiver will answer */
    struct ratelimit rl;       /* owned by the writer */
    uint64_t frame_seq, frame_total, frame_chain;   /* owned by the writer */
    atomic_bool halt;          /* this output must stop (it failed, or all stop) */
    /* lock: */
    bool running;
    bool bc_running;
    bool dead;                 /* failed; no longer holds blocks back */
    bool waiting;              /* in writer_next's wait */
    uint64_t seq;              /* cursor: the slot being written */
    size_t off;                /*         bytes of it written */
    uint64_t bytes;            /* queue bytes written */
    uint32_t peer_features;    /* owned by the writer: what the receiver's greeting offers */
    double last_heard;         /* when the receiver last said anything */
    uint64_t peer_written;     /* what its keepalives say its outputs wrote */
    bool status_received;      /* the receiver answered */
    int status_code;
    uint64_t status_bytes;
    char status_msg[CODEC_STATUS_MAX + 1];
};

struct worker {
    struct pipeline *p;
    pthread_t thread;
    bool running;              /* lock */
};

struct pipeline {
    const struct weir_options *o;
    struct weir_log *log;
    pthread_t main_thread;

    pthread_mutex_t lock;
    pthread_cond_t data_cv;    /* writers: data, end, gate, status, stop */
    pthread_cond_t space_cv;   /* reader: a block freed, jobs done, stop */
    pthread_cond_t job_cv;     /* workers: a job queued, end, stop */
    atomic_bool stop;          /* written under lock; read anywhere */

    struct pool pool;          /* lock (take/release, carve) */
    bool carved;               /* lock: the pool has its blocks (pipeline_carve) */
    size_t unit;               /* raw bytes per block the reader fills */
    bool encode;               /* -z */
    bool may_decode;           /* -d, or -I without --raw */
    uint32_t wire_block_max;   /* block size a FRAME_STORED output declares */

    struct slot *ring;         /* lock */
    uint64_t mask;
    uint64_t head;             /* lock: next slot to create */
    uint64_t ready;            /* lock: slots before this are all present */
    uint64_t tail;             /* lock: oldest slot still held */
    bool filling;              /* lock: slot head-1 is the reader's, unsealed */
    bool input_done;           /* lock: no slot will be added */
    bool gate_open;            /* lock: -P allows writing */
    bool throttled;            /* lock: -p holds the reader back */
    uint32_t read_window;      /* blocks a regular-file input may hold; 0: all */
    uint64_t chain;            /* lock: -z trailer chain over ready slots */
    uint64_t chain_total;      /* lock: -z raw bytes over ready slots */

    struct job *jobs;          /* lock: FIFO of nblocks entries */
    uint64_t job_head, job_tail;
    uint32_t out_reserved;     /* lock: output blocks promised to queued jobs */
    bool jobs_done;            /* lock: the reader queues no more jobs */

    /* -d of a plain LZ4 frame split into blocks: its content checksum is
     * sequential, so the decoded slots are hashed in order by a cursor that
     * holds them back like an output (content_catch_up_locked) */
    bool content_on;           /* lock: such a frame is being checked */
    bool content_busy;         /* lock: a thread is hashing; it owns p->content */
    uint64_t content_seq;      /* lock: cursor: the slot being hashed */
    size_t content_off;        /* lock:         bytes of it hashed */
    struct stream_content content;
    int nworkers;
    struct worker *workers;

    /* statistics, lock */
    _Atomic uint64_t in_bytes; /* read from the input endpoint (atomic, no lock) */
    uint64_t data_bytes;       /* user data: read (-z) or decoded */
    uint64_t queued_bytes;     /* put into the queue */
    uint64_t staging_bytes;    /* bytes in blocks queued for the workers */
    uint64_t min_out;          /* queue bytes written by the slowest live output */
    bool decoding;             /* the input turned out to be a stream to decode */
    double t_start;            /* 0 until the input is open */
    double empty_since;        /* >= 0 while every live writer waits for data */
    bool empty_on_workers;     /* ... and blocks are still being transformed */
    double t_empty, t_full, t_input_end;
    double t_workers;          /* writers waited on the transform, not the input */

    /* errors, lock */
    bool failed;
    struct weir_error first;
    int running;               /* threads not yet returned */

    struct endpoint in_ep;     /* owned by the reader; main sends the status */
    unsigned char ahead[LISTENER_AHEAD_MAX];   /* reader: read while admitting */
    size_t nahead, ahead_pos;  /* reader */
    bool answer_sender;        /* lock: the input is a weir stream over TCP */
    /* main: the back channel to a weir sender (keepalives, the answer) */
    unsigned char bc_out[CODEC_RECORD_MAX];
    size_t bc_len;             /* bytes of bc_out not yet sent */
    double next_keepalive;
    struct tcp_listener listener;
    pthread_t reader;
    bool reader_running;       /* lock */
    struct ratelimit read_rl;  /* owned by the reader */
    struct output out[WEIR_MAX_OUTPUTS];
    int nout;
    int live;                  /* lock: outputs not dead */
};

/* pipeline.c: shared operations */
/* Give a decoding pipeline's buffer blocks of `block` bytes, once: the
 * reader calls it when the stream says how large its blocks are. */
int pipeline_carve(struct pipeline *p, size_t block, struct weir_error *err);
void pipeline_fail(struct pipeline *p, const struct weir_error *e);
void stop_locked(struct pipeline *p);
void release_locked(struct pipeline *p);
void advance_ready_locked(struct pipeline *p);
/* Wait until every slot created so far is present; false when stopping. */
bool wait_settled_locked(struct pipeline *p);
/* Hash the present data of a split LZ4 frame in order, up to p->ready.  Any
 * thread that makes data present calls it; one hashes at a time (the others
 * return at once) and it drops the lock while hashing. */
void content_catch_up_locked(struct pipeline *p);
/* -P: open the gate once the buffer is full enough. */
void gate_check_locked(struct pipeline *p);
/* The fill: bytes the slowest live output has yet to write, and bytes with
 * the workers.  -P and -p compare it with the capacity, and so does the
 * status line. */
uint64_t fill_locked(const struct pipeline *p);
/* Bytes the buffer may hold: its blocks, or the read-ahead window's. */
uint64_t capacity_locked(const struct pipeline *p);
/* Take a block for the reader, keeping what queued jobs were promised.
 * extra: 1 if the block will feed a job (which needs one more).  Waits while
 * the buffer is full; false when stopping. */
bool reader_take_block(struct pipeline *p, uint32_t extra, uint32_t *idx);
void output_fail(struct output *o, const struct weir_error *e);
void thread_done(struct pipeline *p, bool *running_flag);
void thread_unblock_wake(void);
int io_timeout_ms(const struct pipeline *p, const struct endpoint *ep);

/* reader.c, writer.c, worker.c: thread bodies */
void *reader_main(void *arg);
void *writer_main(void *arg);
void *backchannel_main(void *arg);
void *worker_main(void *arg);
/* worker.c: queue a job (lock held); it gets the next slot, pending until
 * a worker fills it (j->seq is set here). */
void job_queue_locked(struct pipeline *p, struct job *j);

#endif
