/*
 * decode.h - the loops that turn a weir stream, LZ4 or zstd data into blocks: the
 * one decoder that the engine's reader runs and that the fuzz target and
 * the unit tests drive.
 *
 * Contract: decode_stream() runs on one thread (the reader's).  It parses
 * with stream.c and hands every piece to a sink: where a block's payload
 * goes and who decodes and verifies it (the engine's workers, or the test
 * harness inline) is the sink's business.  Each callback returns a
 * weir_step; STEP_FAIL carries a weir_error, and decode_stream() returns
 * the first step that is not STEP_OK.
 */
#ifndef WEIR_DECODE_H
#define WEIR_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "format/stream.h"
#include "weir/error.h"

struct decode_sink {
    void *ctx;
    /* Blocks of at most block bytes are coming: the first stream's or
     * frame's block maximum, said once, before the first block (later ones
     * may declare larger blocks). */
    int (*start)(void *ctx, size_t block, struct weir_error *err);
    /* A block whose payload follows: read it with stream_payload() and
     * stream_block_end(), decode it, verify it (stream_verify_block). */
    int (*block)(void *ctx, struct stream_decoder *d, struct stream_block *b,
                 struct weir_error *err);
    /* A plain LZ4 frame of independent blocks begins (d->frame) and ends:
     * its content checksum and size are checked over its blocks in order. */
    int (*frame_start)(void *ctx, struct stream_decoder *d, struct weir_error *err);
    int (*frame_end)(void *ctx, struct stream_decoder *d, struct weir_error *err);
    /* A plain LZ4 frame of linked blocks: decode it in order with
     * stream_lz4_read() until d->lz4_linked is false.  A frame of plain
     * zstd data (d->kind STREAM_ZSTD) that is not whole comes here too:
     * stream_zstd_read() until it gives no more bytes or the frame ends
     * (d->zstd_in_frame false). */
    int (*linked)(void *ctx, struct stream_decoder *d, struct weir_error *err);
    /* A plain zstd frame that declares its content, raw bytes (at most
     * CODEC_BLOCK_MAX): copy it with stream_zstd_frame(), decode it
     * (stream_decode_block, a block with zstd and unsummed set, raw_len raw)
     * and verify it (stream_verify_block). */
    int (*zstd_frame)(void *ctx, struct stream_decoder *d, uint64_t raw,
                      struct weir_error *err);
    /* A legacy LZ4 stream begins; its blocks follow as blocks (b->legacy).
     * It has no checksums: only what its blocks decode to is checked. */
    int (*legacy)(void *ctx, struct stream_decoder *d, struct weir_error *err);
    /* A weir stream's hole (version 2): len bytes of zeros, checked and
     * chained already; nothing to read. */
    int (*hole)(void *ctx, uint64_t len, struct weir_error *err);
};

/* Decode everything after stream_sniff() said STREAM_WEIR or STREAM_LZ4. */
int decode_stream(struct stream_decoder *d, const struct decode_sink *s,
                  struct weir_error *err);

#endif
