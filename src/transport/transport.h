/*
 * transport.h - one end of the data: a descriptor (standard input or
 * output, a file, a device, a pipe), a TCP connection, or a child process
 * (the producer or consumer command), or a digest of the data (-H).  The reader and the writers move
 * bytes through these operations and never know which kind they have; an
 * encrypted channel is one more kind.
 *
 * Contract: a transport is owned by one thread at a time: the engine sets
 * it up, then hands it to the reader (the input) or to one writer (an
 * output).  read() and write() move at least one byte (read() may return 0
 * at the end), retry EINTR and wait in poll() on EAGAIN for at most
 * timeout_ms without progress (-1: no limit; then errno ETIMEDOUT), and
 * fail with errno ECANCELED once *stop is set (the owner is woken by the
 * engine's signal).  half_close() ends the data in one direction (a TCP
 * FIN); abort() makes the far end see an unfinished stream rather than a
 * clean end (a TCP reset; SIGTERM to a consumer before its input closes);
 * close() releases it and reports what only shows then: an error at close,
 * a child's exit status.  Failures are weir_errors whose message names the
 * transport ("output /mnt/x: ...", "consumer 'zfs recv -F tank': ...") with
 * the transport's exit status (input 3, output 4, network 5).
 */
#ifndef WEIR_TRANSPORT_H
#define WEIR_TRANSPORT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "weir/error.h"

struct transport;
struct child;

struct transport_ops {
    ssize_t (*read)(struct transport *t, void *buf, size_t n, int timeout_ms,
                    atomic_bool *stop);
    ssize_t (*writev)(struct transport *t, const struct iovec *iov, int cnt, int timeout_ms,
                      atomic_bool *stop);
    /* Wait until read (POLLIN) or write (POLLOUT) would not block. */
    int (*wait)(struct transport *t, short events, int timeout_ms, atomic_bool *stop);
    int (*half_close)(struct transport *t, struct weir_error *err);
    void (*abort)(struct transport *t);
    /* success: the data ended as it should (a consumer may then exit 0). */
    int (*close)(struct transport *t, bool success, atomic_bool *stop, struct weir_error *err);
};

enum transport_kind { TRANSPORT_FD, TRANSPORT_TCP, TRANSPORT_CHILD, TRANSPORT_DIGEST };

struct transport {
    const struct transport_ops *ops;
    enum transport_kind kind;
    int fd;                 /* the data's descriptor; -1 when not open */
    int status;             /* exit status for its failures */
    char name[300];         /* "input <stdin>", "output host:port", "consumer 'cmd'" */
    const char *path;       /* a file weir opened by name, or NULL */
    bool owned;             /* weir opened fd and must close it */
    bool is_socket, regular, blockdev;
    bool created;           /* weir created the file (its directory entry is new) */
    bool identified;        /* dev, ino and mode are valid */
    dev_t dev;
    ino_t ino;
    mode_t mode;
    struct child *child;    /* TRANSPORT_CHILD */
    struct sealed *sealed;  /* an encrypted connection's record state */
    struct stripe *stripe;  /* several connections as one (link/stripe.h) */
    bool sealed_below;      /* and each of them carries sealed records */
    const struct transport_ops *plain_ops;   /* beneath the sealed records */
    struct evp_md_ctx_st *digest;   /* TRANSPORT_DIGEST: the running digest */
    char digest_algo[32];           /* its algorithm, as OpenSSL names it */
    char digest_hex[132];           /* its value in hex, once closed after success */
    /* A socket's bytes, counted where they cross it (weir's framing and
     * encryption included) into counters its owner provides, which another
     * thread may read: wire_tx what is written, wire_rx what is read.
     * NULL: not counted.  wire_before: bytes read while the connection was
     * being admitted, before it became a transport. */
    _Atomic uint64_t *wire_tx, *wire_rx;
    uint64_t wire_before;
    /* -W (transport_pace_writes): a pipe's capacity, when its writes are
     * cut to the room in it; the most one write() to a file or block device
     * takes.  0: each write is handed to the kernel whole. */
    int pipe_size;
    size_t write_max;
};

/* Add n bytes to a wire counter, when there is one. */
static inline void transport_count(_Atomic uint64_t *counter, ssize_t n)
{
    if (counter && n > 0)
        atomic_fetch_add(counter, (uint64_t)n);
}

/* Not open: every operation fails, close does nothing. */
void transport_none(struct transport *t);

/* ---- descriptors and files (transport_fd.c) ---- */
/* path NULL or "-": standard input; closed: descriptor 0 was closed at
 * startup (an input error, not an empty input). */
int transport_open_input(struct transport *t, const char *path, bool closed,
                         struct weir_error *err);
/* path NULL or "-": standard output.  dsync: a named file is opened O_DSYNC
 * (every write reaches stable storage before it returns).  An existing regular file is refused
 * unless force; it is not truncated until transport_truncate(), so that a
 * start that fails later leaves it untouched.  reader_wait (-W, seconds; 0:
 * for ever): how long a FIFO may wait for its reader to open it, after which
 * it fails as the watchdog would. */
int transport_open_output(struct transport *t, const char *path, bool force, bool dsync,
                          bool closed, double reader_wait, struct weir_error *err);
int transport_truncate(struct transport *t, struct weir_error *err);
/* One file: writing one destroys the other.  Character devices and sockets
 * never are. */
bool transport_same_file(const struct transport *a, const struct transport *b);
/* Record the identity of a descriptor or a path (the -l file, a path that
 * could not be opened) for transport_same_file. */
void transport_identify_fd(struct transport *t, int fd, const char *name);
void transport_identify_path(struct transport *t, const char *path, const char *name);
/* Flush a regular file or block device to stable storage, and the directory
 * of a file weir created.  Anything else: nothing. */
int transport_sync(struct transport *t, struct weir_error *err);
/* Holes (sparse.h): whether this output can skip a hole rather than be
 * written zeros: a regular file that is not open for appending and holds
 * nothing beyond the offset weir writes at (what a skip passes over then
 * reads as zeros).  Anything else (a pipe, a socket, a device) gets zeros. */
bool transport_skips_holes(const struct transport *t);
/* Skip n bytes: the next write lands n bytes further on. */
int transport_skip(struct transport *t, uint64_t n, struct weir_error *err);
/* After skipping: the file ends where its data does, a trailing hole
 * included (ftruncate, which only ever extends it here); with dsync that
 * reaches stable storage at once, like the writes. */
int transport_end_holes(struct transport *t, bool dsync, struct weir_error *err);
/* Remove a file weir created, after a start that failed. */
void transport_discard(struct transport *t);
/* Descriptor plumbing shared by the kinds. */
void transport_classify(struct transport *t);
ssize_t transport_fd_read(struct transport *t, void *buf, size_t n, int timeout_ms,
                          atomic_bool *stop);
ssize_t transport_fd_writev(struct transport *t, const struct iovec *iov, int cnt,
                            int timeout_ms, atomic_bool *stop);
/* -W: cut each write so that its progress shows as it goes, instead of
 * one write() of a large block blocking until a slow reader or device has
 * taken all of it: a pipe or FIFO is written at most the room it has (a
 * page at least), a file or block device 256 KiB at a time.  Anything else
 * (a socket, a terminal) is left as it is. */
void transport_pace_writes(struct transport *t);
int transport_fd_wait(struct transport *t, short events, int timeout_ms, atomic_bool *stop);

/* ---- TCP (transport_tcp.c) ---- */
/* A connected, tuned socket becomes the transport. */
void transport_tcp(struct transport *t, int fd, const char *name);

/* ---- encrypted connections (transport_sealed.c) ---- */
struct seal_session;
/* After the handshake, a TCP transport carries sealed records (seal.h): a
 * sender seals to_receiver and opens to_sender, a receiver the other way.
 * rx_first: the number of the next record to open (1 when the listener
 * opened the first one itself); leftover: bytes already read after the
 * handshake. */
int transport_sealed(struct transport *t, const struct seal_session *keys, bool sender,
                     uint64_t rx_first, const unsigned char *leftover, size_t nleft,
                     struct weir_error *err);
/* The next record written ends this direction (it carries the END flag). */
void transport_sealed_last(struct transport *t);
/* Seal one record of plain bytes into out (len + SEAL_OVERHEAD) without
 * writing it: for a receiver's main thread, which sends without blocking. */
size_t transport_seal(struct transport *t, const void *plain, size_t len, unsigned char *out);
/* The next record written is a control record (an abort). */
void transport_sealed_control(struct transport *t);
/* Sealing ahead of the writer (the workers): k record numbers, the first
 * returned; a copy of the direction's keys for their sealers, into *dir
 * (which should be secret memory: secret.h). */
uint64_t transport_sealed_numbers(struct transport *t, uint64_t k);
struct seal_direction;
void transport_sealed_tx(const struct transport *t, struct seal_direction *dir,
                         uint64_t *epoch_records);
/* Records sealed elsewhere went out whole, up to number next - 1: an
 * abort after them says so (it carries the count of data records sent). */
void transport_sealed_sent(struct transport *t, uint64_t next);
/* A record sealed elsewhere went out in part: nothing may follow it. */
void transport_sealed_broken(struct transport *t);
bool transport_sealed_intact(const struct transport *t);

/* ---- a digest of the data (transport_digest.c) ---- */
/* Writing updates the digest of algo (an OpenSSL name: md5, sha256...);
 * closing after success leaves its value in digest_hex. */
int transport_digest(struct transport *t, const char *algo, struct weir_error *err);

/* ---- helpers over the operations ---- */
int transport_write_all(struct transport *t, const void *buf, size_t n, int timeout_ms,
                        atomic_bool *stop);
int transport_writev_all(struct transport *t, struct iovec *iov, int cnt, int timeout_ms,
                         atomic_bool *stop);
ssize_t transport_read_full(struct transport *t, void *buf, size_t n, int timeout_ms,
                            atomic_bool *stop);
/* close(), with the error reported only when nothing else was. */
int transport_close(struct transport *t, bool success, atomic_bool *stop,
                    struct weir_error *err);

#endif
