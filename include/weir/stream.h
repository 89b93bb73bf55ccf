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
};

enum stream_kind { STREAM_WEIR, STREAM_LZ4, STREAM_RAW };

struct stream_block {
    bool stored;          /* payload is the raw data */
    uint32_t wire_len;    /* payload bytes */
    uint64_t wire_off;    /* stream offset of the payload */
    /* from the block's record, after stream_block_end(): */
    uint64_t seq;
    uint32_t raw_len;
    uint64_t hash;
};

struct stream_decoder {
    struct stream_source src;
    unsigned char *stage;
    size_t cap, pos, end;   /* stage[pos..end) is read but not consumed */
    uint64_t offset;        /* stream offset of stage[pos] */
    bool eof;
    enum stream_kind kind;
    bool in_stream;         /* WEIR: a header was read and no trailer yet */
    uint32_t block_max;
    uint64_t seq, total, chain, streams;
    void *lz4;              /* LZ4F_dctx, for STREAM_LZ4 */
    size_t lz4_hint;        /* LZ4F's "bytes expected"; 0 at a frame boundary */
    uint64_t lz4_frames;
};

int stream_init(struct stream_decoder *d, const struct stream_source *src,
                struct weir_error *err);
void stream_free(struct stream_decoder *d);

/* Decide what the input is.  A weir header means STREAM_WEIR.  LZ4 data (a
 * frame or a skippable frame) means STREAM_LZ4 when allow_lz4.  Anything
 * else is STREAM_RAW when allow_raw (its first bytes stay staged: drain them
 * with stream_take_staged), or an error.  Empty input is an error unless
 * allow_raw. */
int stream_sniff(struct stream_decoder *d, bool allow_lz4, bool allow_raw,
                 struct weir_error *err);
size_t stream_take_staged(struct stream_decoder *d, void *dst, size_t cap);

/* STREAM_WEIR: 1 and *b describes the next block, whose payload follows;
 * 0 at the verified end of the input; -1 on error. */
int stream_next(struct stream_decoder *d, struct stream_block *b, struct weir_error *err);
/* Read n bytes of the current payload into dst. */
int stream_payload(struct stream_decoder *d, void *dst, size_t n, struct weir_error *err);
/* After the payload: read the EndMark and the block's record into *b. */
int stream_block_end(struct stream_decoder *d, struct stream_block *b, struct weir_error *err);
/* Compare a decoded block (and, when compressed, its payload) with its
 * record; INTEGRITY error on mismatch.  len < 0 means it did not decode. */
int stream_verify_block(const struct stream_block *b, const void *payload, const void *data,
                        long len, const char *name, struct weir_error *err);

/* STREAM_LZ4: decode into dst; *n = 0 at the verified end. */
int stream_lz4_read(struct stream_decoder *d, void *dst, size_t cap, size_t *n,
                    struct weir_error *err);

#endif
