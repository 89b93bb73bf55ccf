/*
 * stream.h - reading a weir stream (or plain LZ4 data) from a byte source.
 *
 * Contract: a stream_decoder is a pull parser owned by one thread, the
 * pipeline's reader (or the fuzz target).  It reads from a stream_source
 * through a small staging buffer, so headers cost no extra system calls,
 * while large block payloads are read straight into the caller's memory
 * (stream_payload).  It checks the structure of the stream: the header and
 * its version, every frame and record, the order of blocks, the size limits,
 * the trailer's count and chain, and that nothing follows the end.  It does
 * not check the contents of a block: the caller decodes the payload
 * (codec_decode_block) and compares its checksum (stream_verify_block),
 * possibly on another thread.
 *
 * Plain zstd data (STREAM_ZSTD, from any zstd encoder) is decoded in
 * order on the caller's thread with libzstd's streaming decoder
 * (stream_zstd_read); weir's own zstd files are weir streams, decoded in
 * parallel.
 *
 * Plain LZ4 data (STREAM_LZ4) is parsed the same way, frame by frame: each
 * frame of independent blocks is split into its blocks, so they can be
 * decoded in parallel like a weir stream's; the caller hashes the decoded
 * content in order (stream_content_*) for the frame's content checksum.  A
 * frame whose blocks depend on each other (or on a dictionary) is handed
 * back whole and decoded in order by liblz4's frame decoder
 * (stream_lz4_read).
 *
 * Every failure is a weir_error naming the source and the stream offset:
 * WEIR_EXIT_INTEGRITY for a malformed, corrupt or truncated stream, and the
 * source's own status (input or network) when reading fails.
 */
#ifndef WEIR_STREAM_H
#define WEIR_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define XXH_STATIC_LINKING_ONLY   /* XXH32_state_t as a complete type */
#include <xxhash.h>

#include "weir/error.h"

struct stream_source {
    /* >0 bytes read, 0 at end of input, -1 with errno set. */
    ssize_t (*read)(void *ctx, void *buf, size_t n);
    void *ctx;
    int error_status;     /* exit status for a read error */
    const char *name;     /* "input <stdin>", for messages */
    /* Optional: called before the trailer is judged, so blocks still being
     * verified elsewhere report first.  Returns -1 (errno set) to give up. */
    int (*settle)(void *ctx);
    /* The bytes come out of sealed records (seal.h), authenticated: only
     * then may a stream leave its stored blocks' checksums out. */
    bool sealed;
    /* STREAM_ZSTD: the largest window a frame may ask for (its decoder
     * holds that much); 0: zstd's own default limit */
    uint64_t window_max;
    /* The input is one stream, whose end nothing follows: the ssh channel,
     * whose end of input sshd withholds while the far weir still writes
     * its messages (the trailer ends it; the records' checks still hold). */
    bool one_stream;
};

enum stream_kind { STREAM_WEIR, STREAM_LZ4, STREAM_ZSTD, STREAM_RAW };

struct stream_block {
    bool hole;            /* weir version 2: a hole of hole_len zero bytes, no payload */
    uint64_t hole_len;
    bool stored;          /* payload is the raw data */
    bool lz4;             /* a block of a plain LZ4 frame, not of a weir stream */
    bool zstd;            /* weir: the payload is one zstd frame (CODEC_HEADER_ZSTD) */
    bool plain;           /* with zstd: a whole frame of plain zstd data (no record) */
    uint32_t wire_len;    /* payload bytes */
    uint64_t wire_off;    /* stream offset of the payload */
    uint32_t raw_max;     /* LZ4: the frame's block maximum */
    bool has_sum;         /* LZ4: the frame carries block checksums */
    bool legacy;          /* LZ4: a block of a legacy stream (no checksum) */
    bool last;            /* legacy: its stream's last block, which may be short */
    /* weir: from the block's record, after stream_block_end();
     * LZ4: seq counts blocks from the start of the input, raw_len is unused,
     * hash is the XXH32 block checksum if has_sum */
    uint64_t seq;
    uint32_t raw_len;
    uint64_t hash;
    bool unsummed;        /* weir: a sealed stream's block, checksum 0, not hashed */
};

/* What a plain LZ4 frame's header promises about its content. */
struct stream_lz4_frame {
    uint64_t start;       /* stream offset of the frame */
    bool legacy;          /* a legacy stream: no header fields but its blocks' size */
    uint32_t block_max;
    bool block_sums;      /* each block carries an XXH32 checksum */
    bool content_sum;     /* the frame ends with an XXH32 of its content */
                          /* (both are set for a frame of linked blocks too) */
    bool has_size;        /* the header gives the content size */
    uint64_t size;
    uint32_t sum;         /* after STREAM_LZ4_FRAME_END: the content checksum */
};

/* The in-order check of one frame's content against its header and end. */
struct stream_content {
    XXH32_state_t hash;
    bool hashing;
    uint64_t bytes;
};

struct stream_decoder {
    struct stream_source src;
    unsigned char *stage;
    size_t cap, pos, end;   /* stage[pos..end) is read but not consumed */
    uint64_t offset;        /* stream offset of stage[pos] */
    bool eof;
    enum stream_kind kind;
    bool in_stream;         /* WEIR: a header was read and no trailer yet */
    unsigned version;       /* WEIR: the header's (2 may hold holes) */
    uint32_t block_max;
    bool compressed;        /* WEIR: the header allows compressed blocks */
    bool zstd;              /* WEIR: and they are zstd frames */
    bool unsummed;          /* WEIR: the header says the blocks carry no checksums */
    uint64_t seq, total, chain, streams;
    void *lz4;              /* LZ4F_dctx, for frames handed back whole */
    bool lz4_linked;        /* inside a frame handed back whole */
    bool lz4_in_frame;      /* inside a frame being split into blocks */
    bool lz4_legacy;        /* inside a legacy stream */
    uint64_t lz4_blocks;
    struct stream_lz4_frame frame;
    void *zstd_ds;          /* ZSTD_DStream, for plain zstd data */
    bool zstd_in_frame;     /* inside a zstd frame (its end not yet decoded) */
};

int stream_init(struct stream_decoder *d, const struct stream_source *src,
                struct weir_error *err);
void stream_free(struct stream_decoder *d);

/* Decide what the input is.  A weir header means STREAM_WEIR; the whole
 * header is read and checked, and d->block_max says its block size.  LZ4 data (a
 * frame or a skippable frame) means STREAM_LZ4 when allow_lz4.  Anything
 * else is STREAM_RAW when allow_raw (its first bytes stay staged: drain them
 * with stream_take_staged), or an error.  Empty input is an error unless
 * allow_raw. */
int stream_sniff(struct stream_decoder *d, bool allow_lz4, bool allow_raw,
                 struct weir_error *err);
size_t stream_take_staged(struct stream_decoder *d, void *dst, size_t cap);

/* STREAM_WEIR: 1 and *b describes the next block, whose payload follows,
 * or a hole (b->hole: its record was read and checked, numbered and
 * chained; nothing follows it); 0 at the verified end of the input; -1 on
 * error. */
int stream_next(struct stream_decoder *d, struct stream_block *b, struct weir_error *err);
/* Read n bytes of the current payload into dst. */
int stream_payload(struct stream_decoder *d, void *dst, size_t n, struct weir_error *err);
/* After the payload: read what follows the block into *b (weir: the EndMark
 * and the block's record; LZ4: the block checksum, if the frame has them;
 * legacy: whether the next four bytes end the stream, which sets b->last). */
int stream_block_end(struct stream_decoder *d, struct stream_block *b, struct weir_error *err);
/* Decode one block's payload into dst (at most cap bytes), by its kind:
 * stored, LZ4, or a zstd frame (with the thread's context *zstd, made on
 * first use: codec_zstd_dctx).  Returns the raw length, -1 when it does not
 * decode, or STREAM_DECODE_NOMEM when no zstd decoder could be made, for
 * stream_verify_block. */
#define STREAM_DECODE_NOMEM (-2L)
long stream_decode_block(const struct stream_block *b, void **zstd, const void *payload,
                         void *dst, size_t cap);
/* Compare a decoded block (and, when compressed, its payload) with its
 * record or checksum; INTEGRITY error on mismatch.  len < 0 means it did not
 * decode (STREAM_DECODE_NOMEM: an INTERNAL error, out of memory). */
int stream_verify_block(const struct stream_block *b, const void *payload, const void *data,
                        long len, const char *name, struct weir_error *err);

/* STREAM_LZ4: the next piece of the input.  Skippable frames are skipped.
 *   STREAM_LZ4_FRAME     a frame of independent blocks starts; d->frame
 *                        describes it
 *   STREAM_LZ4_BLOCK     *b describes its next block, whose payload follows
 *                        (stream_payload, then stream_block_end); decode it
 *                        with codec_decode_block into at most b->raw_max bytes
 *   STREAM_LZ4_FRAME_END the frame ended; d->frame.sum holds its checksum
 *   STREAM_LZ4_LINKED    a frame of linked blocks (or one that names a
 *                        dictionary): read it whole with stream_lz4_read;
 *                        d->frame.block_max is its block maximum
 *   STREAM_LZ4_LEGACY    a legacy stream starts (d->frame.legacy); its
 *                        blocks follow as STREAM_LZ4_BLOCK (b->legacy), and
 *                        it ends without a mark, where the input ends or
 *                        another frame's magic number stands
 *   0 at the end of the input, between frames; -1 on error. */
enum {
    STREAM_LZ4_FRAME = 1,
    STREAM_LZ4_BLOCK,
    STREAM_LZ4_FRAME_END,
    STREAM_LZ4_LINKED,
    STREAM_LZ4_LEGACY,
};
int stream_lz4_next(struct stream_decoder *d, struct stream_block *b, struct weir_error *err);
/* Inside a STREAM_LZ4_LINKED frame: decode into dst; *n = 0 at its verified
 * end (liblz4 checks its checksums). */
/* STREAM_ZSTD: decode the next bytes into dst (cap > 0); it returns at the
 * end of each frame (d->zstd_in_frame false), with *n = 0 at the end of the
 * input, which must fall between two frames; every frame's checksum,
 * when it has one, is checked.  A frame whose window exceeds the source's
 * window_max is refused (WEIR_EXIT_INTEGRITY), naming both. */
int stream_zstd_read(struct stream_decoder *d, void *dst, size_t cap, size_t *n,
                     struct weir_error *err);
/* STREAM_ZSTD, between two frames: whether the next one can be decoded on
 * its own into raw_max bytes, because its header declares its content size
 * (1 to raw_max, in *raw): STREAM_ZSTD_WHOLE, then stream_zstd_frame()
 * copies it whole.  STREAM_ZSTD_STREAMED: decode it in order with
 * stream_zstd_read(), which returns at its end.  STREAM_ZSTD_END at the
 * end of the input; -1 on a read error. */
#define STREAM_ZSTD_END 0
#define STREAM_ZSTD_WHOLE 1
#define STREAM_ZSTD_STREAMED 2
int stream_zstd_whole(struct stream_decoder *d, size_t raw_max, uint64_t *raw,
                      struct weir_error *err);
/* Copy that frame, block by block, into dst (cap bytes, for its content
 * size at most ZSTD_compressBound of it); its length in *len.  A frame
 * that is cut or larger than cap is an INTEGRITY error naming the byte;
 * its content is judged when it is decoded (stream_decode_block). */
int stream_zstd_frame(struct stream_decoder *d, void *dst, size_t cap, size_t *len,
                      struct weir_error *err);
/* For the readers of plain data (stream_zstd.c): read more into the stage
 * (1, or 0 at the end of the input, -1 on an error), and take n staged
 * bytes. */
int stream_fill(struct stream_decoder *d, struct weir_error *err);
void stream_consume(struct stream_decoder *d, size_t n);
/* Make n bytes available at stage[pos]: 1, 0 when fewer remain, -1 on an
 * error. */
int stream_need(struct stream_decoder *d, size_t n, struct weir_error *err);

int stream_lz4_read(struct stream_decoder *d, void *dst, size_t cap, size_t *n,
                    struct weir_error *err);

/* Check a split frame's content: begin at STREAM_LZ4_FRAME, add every
 * decoded block in order, end after STREAM_LZ4_FRAME_END (an INTEGRITY
 * error if the checksum or the size differs from what the frame says). */
void stream_content_begin(struct stream_content *c, const struct stream_lz4_frame *f);
void stream_content_add(struct stream_content *c, const void *data, size_t len);
int stream_content_end(const struct stream_content *c, const struct stream_lz4_frame *f,
                       const char *name, struct weir_error *err);

#endif
