/* stream.c - see stream.h and doc/stream-format.md. */
#include "format/stream.h"

#include <errno.h>
#include <lz4frame.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include <zstd.h>

#include "format/codec.h"

#define STAGE_SIZE (256u << 10)

int stream_init(struct stream_decoder *d, const struct stream_source *src,
                struct weir_error *err)
{
    memset(d, 0, sizeof *d);
    d->src = *src;
    d->cap = STAGE_SIZE;
    d->stage = malloc(d->cap);
    if (!d->stage)
        return error_sys(err, WEIR_EXIT_INTERNAL, ENOMEM, "%s: decoder", src->name);
    return 0;
}

void stream_free(struct stream_decoder *d)
{
    free(d->stage);
    d->stage = NULL;
    if (d->lz4)
        LZ4F_freeDecompressionContext(d->lz4);
    d->lz4 = NULL;
    ZSTD_freeDStream(d->zstd_ds);   /* plain zstd data's decoder (stream_zstd.c) */
    d->zstd_ds = NULL;
}

static int corrupt(struct stream_decoder *d, struct weir_error *err, uint64_t at,
                   const char *what)
{
    return error_set(err, WEIR_EXIT_INTEGRITY, "%s: %s at byte %llu", d->src.name, what,
                     (unsigned long long)at);
}

/* Read more into the stage; 1 read, 0 end of input, -1 error. */
int stream_fill(struct stream_decoder *d, struct weir_error *err)
{
    if (d->eof)
        return 0;
    if (d->pos > 0 && d->pos == d->end) {
        d->pos = d->end = 0;
    } else if (d->pos > 0 && d->end == d->cap) {
        memmove(d->stage, d->stage + d->pos, d->end - d->pos);
        d->end -= d->pos;
        d->pos = 0;
    }
    ssize_t n = d->src.read(d->src.ctx, d->stage + d->end, d->cap - d->end);
    if (n < 0)
        return error_sys(err, d->src.error_status, errno, "%s: read", d->src.name);
    if (n == 0) {
        d->eof = true;
        return 0;
    }
    d->end += (size_t)n;
    return 1;
}

int stream_need(struct stream_decoder *d, size_t n, struct weir_error *err)
{
    while (d->end - d->pos < n) {
        int r = stream_fill(d, err);
        if (r <= 0)
            return r;
    }
    return 1;
}

void stream_consume(struct stream_decoder *d, size_t n)
{
    d->pos += n;
    d->offset += n;
}

/* Reserved bytes must be zero: then every byte of a stream is checked. */
static bool all_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

static bool is_weir_record(const unsigned char *p)
{
    return codec_get32(p) == CODEC_WEIR_MAGIC;
}

/* A magic number that starts LZ4 data: a frame, a legacy stream, a
 * skippable frame.  It also ends a legacy stream. */
static bool is_lz4_magic(uint32_t magic)
{
    return magic == CODEC_LZ4_MAGIC || magic == CODEC_LEGACY_MAGIC ||
           (magic >= CODEC_SKIP_MAGIC_MIN && magic <= CODEC_SKIP_MAGIC_MAX);
}

/* Whether the n (< 4) bytes at p begin such a magic number: an input that
 * ends there is LZ4 data cut short, not other data. */
static bool lz4_magic_prefix(const unsigned char *p, size_t n)
{
    static const unsigned char frame[3] = {0x04, 0x22, 0x4D}, legacy[3] = {0x02, 0x21, 0x4C},
                               skip[3] = {0x50, 0x2A, 0x4D};
    bool f = true, l = true, k = true;
    for (size_t i = 0; i < n; i++) {
        f &= p[i] == frame[i];
        l &= p[i] == legacy[i];
        k &= i == 0 ? (p[i] & 0xF0) == skip[0] : p[i] == skip[i];
    }
    return f || l || k;
}

/* The input ended early; "where" (inside what) is said for weir streams. */
static int truncated(struct stream_decoder *d, struct weir_error *err, const char *where)
{
    uint64_t at = d->offset + (d->end - d->pos);
    if (d->kind == STREAM_LZ4 || d->kind == STREAM_ZSTD)
        return error_set(err, WEIR_EXIT_INTEGRITY, "%s: truncated %s data at byte %llu",
                         d->src.name, d->kind == STREAM_LZ4 ? "LZ4" : "zstd",
                         (unsigned long long)at);
    return error_set(err, WEIR_EXIT_INTEGRITY, "%s: truncated weir stream at byte %llu (%s)",
                     d->src.name, (unsigned long long)at, where);
}

/* Make n bytes available at stage[pos], or report the input truncated. */
static int require(struct stream_decoder *d, size_t n, const char *where,
                   struct weir_error *err)
{
    int r = stream_need(d, n, err);
    return r < 0 ? -1 : r == 0 ? truncated(d, err, where) : 0;
}

static int parse_header(struct stream_decoder *d, struct weir_error *err);

static const unsigned char weir_magic[4] = {0x57, 0x2A, 0x4D, 0x18};

/* Bytes among the first four that differ from the weir magic. */
static int magic_misses(const unsigned char *b, size_t have)
{
    int miss = 0;
    for (size_t i = 0; i < have && i < 4; i++)
        miss += b[i] != weir_magic[i];
    return miss;
}

/* Whether the record with weir's magic at p, of which have bytes are
 * staged, is weir's header as far as they go: a payload of 16 bytes that
 * begins "HWEIR", give or take one byte of the five (a flipped byte there is
 * a corrupt header, as a flipped magic byte is).  To an LZ4 reader any other
 * frame with that magic is an ordinary skippable frame. */
static bool weir_header_like(const unsigned char *p, size_t have)
{
    if (have >= 8 && codec_get32(p + 4) != CODEC_HEADER_SIZE - 8)
        return false;
    static const char tag[5] = {'H', 'W', 'E', 'I', 'R'};
    int miss = 0;
    for (size_t i = 8; i < 13 && i < have; i++)
        miss += p[i] != (unsigned char)tag[i - 8];
    return miss <= 1;
}

/* Whether the 24 bytes at p, a skippable frame with weir's magic, are one of
 * the records inside a weir stream, by its length and its reserved bytes:
 * a block record, a trailer, an answer or an abort. */
static bool weir_record_like(const unsigned char *p)
{
    uint32_t len = codec_get32(p + 4), msg = codec_get32(p + 12);
    switch (p[8]) {
    case 'B':
        return len == 24 && all_zero(p + 9, 3);
    case 'T':
    case 'Z':
        return len == 32 && all_zero(p + 9, 7);
    case 'S':
    case 'A':
        return msg <= CODEC_STATUS_MAX && len == 32 + msg && all_zero(p + 10, 2);
    default:
        return false;
    }
}

/* How many bytes sniffing needs before it can decide.  A header one byte off
 * the magic is still a (corrupt) weir stream when "HWEIR" follows, so that
 * a flipped magic byte is reported rather than taken for other data.  When
 * LZ4 data is allowed, weir's magic alone is not enough: a skippable frame
 * may bear it (weir_header_like). */
static size_t sniff_need(const unsigned char *b, size_t have, bool allow_lz4)
{
    int miss = magic_misses(b, have);
    if (miss == 0)
        return allow_lz4 ? 13 : 4;
    if (miss == 1)
        return 13;
    return allow_lz4 ? 4 : 0;
}

/* Skippable frames are LZ4's and zstd's alike (pzstd begins every frame
 * with one): look past those that fit in the stage to the magic that says
 * which.  *b and *have move to it; nothing is consumed. */
static int past_skippable(struct stream_decoder *d, const unsigned char **b, size_t *have,
                          struct weir_error *err)
{
    size_t at = 0;
    for (;;) {
        uint32_t magic = codec_get32(d->stage + d->pos + at);
        if (magic < CODEC_SKIP_MAGIC_MIN || magic > CODEC_SKIP_MAGIC_MAX)
            break;
        int r = stream_need(d, at + 8, err);
        if (r <= 0) {
            if (r < 0)
                return -1;
            break;
        }
        uint64_t next = at + 8 + (uint64_t)codec_get32(d->stage + d->pos + at + 4);
        if (next + 4 > d->cap)   /* the stage cannot hold it: LZ4's parser skips it */
            break;
        r = stream_need(d, (size_t)next + 4, err);
        if (r <= 0) {
            if (r < 0)
                return -1;
            break;
        }
        at = (size_t)next;
    }
    /* stream_need() may have moved the stage's bytes */
    *b = d->stage + d->pos + at;
    *have = d->end - d->pos - at;
    return 0;
}

int stream_sniff(struct stream_decoder *d, bool allow_lz4, bool allow_raw,
                 struct weir_error *err)
{
    /* read only while the answer is open, so a raw sender's first bytes
     * are passed on at once */
    while (d->end - d->pos < sniff_need(d->stage + d->pos, d->end - d->pos, allow_lz4)) {
        int r = stream_fill(d, err);
        if (r < 0)
            return -1;
        if (r == 0)
            break;
    }
    const unsigned char *b = d->stage + d->pos;
    size_t have = d->end - d->pos;
    int miss = magic_misses(b, have);
    if (have >= 4 && miss == 0 && (!allow_lz4 || weir_header_like(b, have))) {
        /* a weir stream proves itself by a whole, valid header */
        d->kind = STREAM_WEIR;
        return parse_header(d, err);
    }
    if (have >= 13 && miss == 1 && memcmp(b + 8, "HWEIR", 5) == 0)
        return corrupt(d, err, d->offset, "malformed weir header (bad magic)");
    if (allow_lz4 && have >= 4) {
        uint32_t first = codec_get32(b);
        if (past_skippable(d, &b, &have, err))
            return -1;
        if (have >= 4 && codec_get32(b) == CODEC_ZSTD_MAGIC) {
            d->kind = STREAM_ZSTD;
            return 0;
        }
        if (is_lz4_magic(first)) {
            d->kind = STREAM_LZ4;
            return 0;
        }
    }
    if (allow_raw) {
        d->kind = STREAM_RAW;
        return 0;
    }
    if (have == 0)
        return error_set(err, WEIR_EXIT_INTEGRITY, "%s: empty input: no weir stream%s",
                         d->src.name, allow_lz4 ? ", LZ4 or zstd data" : "");
    if (have < 4 && miss == 0)
        return truncated(d, err, "inside the header");
    if (have < 4 && allow_lz4 && lz4_magic_prefix(b, have)) {
        d->kind = STREAM_LZ4;
        return truncated(d, err, "");
    }
    return corrupt(d, err, d->offset,
                   allow_lz4 ? "not a weir stream, LZ4 or zstd data" : "not a weir stream");
}

size_t stream_take_staged(struct stream_decoder *d, void *dst, size_t cap)
{
    size_t n = d->end - d->pos;
    if (n > cap)
        n = cap;
    memcpy(dst, d->stage + d->pos, n);
    stream_consume(d, n);
    return n;
}

/* Read a record's 8-byte frame header and payload into the stage. */
static int read_record(struct stream_decoder *d, uint32_t *len, const char *where,
                       struct weir_error *err)
{
    if (require(d, 8, where, err))
        return -1;
    *len = codec_get32(d->stage + d->pos + 4);
    if (*len < 16 || *len > CODEC_PAYLOAD_MAX)
        return corrupt(d, err, d->offset, "malformed weir record (bad length)");
    return require(d, 8 + *len, where, err);
}

static int parse_header(struct stream_decoder *d, struct weir_error *err)
{
    uint32_t len;
    if (read_record(d, &len, "inside the header", err))
        return -1;
    const unsigned char *p = d->stage + d->pos;
    struct codec_record r;
    char why[96];
    if (p[8] != 'H')
        return corrupt(d, err, d->offset, "malformed weir header");
    if (codec_parse_record(p, 8 + len, &r, why, sizeof why))
        return corrupt(d, err, d->offset, why);
    d->block_max = r.block_max;
    d->version = r.version;
    d->compressed = (r.flags & CODEC_HEADER_COMPRESSED) != 0;
    d->zstd = (r.flags & CODEC_HEADER_ZSTD) != 0;
    d->unsummed = (r.flags & CODEC_HEADER_SEALED) != 0;
    if (d->unsummed && !d->src.sealed)
        return corrupt(d, err, d->offset, "a stream without block checksums, which only an "
                       "encrypted connection may carry");
    d->in_stream = true;
    d->seq = d->total = 0;
    d->chain = codec_chain_start(p);
    d->streams++;
    stream_consume(d, 8 + len);
    return 0;
}

static int parse_trailer(struct stream_decoder *d, uint32_t len, struct weir_error *err)
{
    const unsigned char *p = d->stage + d->pos;
    if (len != 32 || !all_zero(p + 9, 7))
        return corrupt(d, err, d->offset, "malformed weir trailer");
    uint64_t total = codec_get64(p + 16), nblocks = codec_get64(p + 24);
    uint64_t chain = codec_get64(p + 32);
    if (d->src.settle && d->src.settle(d->src.ctx))
        return error_sys(err, d->src.error_status, errno, "%s", d->src.name);
    if (total != d->total || nblocks != d->seq || chain != d->chain) {
        char what[160];
        snprintf(what, sizeof what,
                 "trailer does not match the data (it says %llu bytes in %llu blocks, "
                 "%llu bytes in %llu blocks arrived)",
                 (unsigned long long)total, (unsigned long long)nblocks,
                 (unsigned long long)d->total, (unsigned long long)d->seq);
        return corrupt(d, err, d->offset, what);
    }
    stream_consume(d, 8 + len);
    d->in_stream = false;
    return 0;
}

static int parse_abort(struct stream_decoder *d, uint32_t len, struct weir_error *err)
{
    struct codec_record r;
    char why[96];
    if (codec_parse_record(d->stage + d->pos, 8 + len, &r, why, sizeof why))
        return corrupt(d, err, d->offset, why);
    /* the sender's input (its producer) failing keeps its meaning here;
     * anything else is, from here, a failure of the far end */
    return error_set(err, r.code == WEIR_EXIT_INPUT ? WEIR_EXIT_INPUT : WEIR_EXIT_NETWORK,
                     "sender: %s", r.msg);
}

/* A hole record (version 2): numbered and chained like a block. */
static int parse_hole(struct stream_decoder *d, uint32_t len, struct stream_block *b,
                      struct weir_error *err)
{
    if (d->version < 2)
        return corrupt(d, err, d->offset, "hole record in a version 1 weir stream");
    struct codec_record r;
    char why[96];
    if (codec_parse_record(d->stage + d->pos, 8 + len, &r, why, sizeof why))
        return corrupt(d, err, d->offset, why);
    if (r.seq != d->seq) {
        char what[96];
        snprintf(what, sizeof what, "hole %llu arrived where block %llu belongs",
                 (unsigned long long)r.seq, (unsigned long long)d->seq);
        return corrupt(d, err, d->offset, what);
    }
    if (r.bytes > CODEC_TOTAL_MAX - d->total)
        return corrupt(d, err, d->offset, "hole beyond the largest file offset");
    memset(b, 0, sizeof *b);
    b->hole = true;
    b->hole_len = r.bytes;
    b->seq = r.seq;
    b->wire_off = d->offset;
    stream_consume(d, 8 + len);
    d->seq++;
    d->total += r.bytes;
    d->chain = codec_chain_hole(d->chain, r.sum, r.bytes);
    return 1;
}

/* Read and drop n bytes of the input. */
static int skip_bytes(struct stream_decoder *d, uint64_t n, const char *where,
                      struct weir_error *err)
{
    while (n > 0) {
        if (d->pos == d->end) {
            int r = stream_fill(d, err);
            if (r <= 0)
                return r < 0 ? -1 : truncated(d, err, where);
        }
        size_t take = d->end - d->pos;
        if (take > n)
            take = (size_t)n;
        stream_consume(d, take);
        n -= take;
    }
    return 0;
}

/* The most a zstd frame of one block may take on the wire. */
static uint32_t zstd_wire_max(const struct stream_decoder *d)
{
    return CODEC_ZSTD_BOUND(d->block_max);
}

/* 'Y' (a zstd stream's block: its frame follows, then its 'B' record) or
 * 'z' (a frame of a hole's zeros, for zstd decoders: skipped).  1: a block
 * in *b; 2: skipped. */
static int parse_announce(struct stream_decoder *d, uint32_t len, struct stream_block *b,
                          struct weir_error *err)
{
    const unsigned char *p = d->stage + d->pos;
    uint32_t size = codec_get32(p + 12);
    if (!d->zstd)
        return corrupt(d, err, d->offset, "zstd frame in a stream whose header says LZ4");
    if (len != 16 || !all_zero(p + 9, 3) || !all_zero(p + 16, 8) || size == 0)
        return corrupt(d, err, d->offset, "malformed weir zstd record");
    if (size > zstd_wire_max(d)) {
        char what[96];
        snprintf(what, sizeof what, "zstd frame of %u bytes exceeds the maximum of %u", size,
                 zstd_wire_max(d));
        return corrupt(d, err, d->offset, what);
    }
    bool block = p[8] == 'Y';
    stream_consume(d, 8 + len);
    if (!block)
        return skip_bytes(d, size, "a hole's zstd frame", err) ? -1 : 2;
    memset(b, 0, sizeof *b);
    b->zstd = true;
    b->wire_len = size;
    b->wire_off = d->offset;
    return 1;
}

/* A weir record where a block or the trailer may stand. 0: trailer read;
 * 1: a hole or a zstd block in *b; 2: a record that says nothing here. */
static int parse_record(struct stream_decoder *d, struct stream_block *b,
                        struct weir_error *err)
{
    uint32_t len;
    if (read_record(d, &len, "inside a record", err))
        return -1;
    unsigned char type = d->stage[d->pos + 8];
    if (type == 'T')
        return parse_trailer(d, len, err);
    if (type == 'A')
        return parse_abort(d, len, err);
    if (type == 'Z')
        return parse_hole(d, len, b, err);
    if (type == 'Y' || type == 'z')
        return parse_announce(d, len, b, err);
    return corrupt(d, err, d->offset, "unexpected weir record");
}

static int parse_frame_start(struct stream_decoder *d, struct stream_block *b,
                             struct weir_error *err)
{
    if (require(d, CODEC_FRAME_PREFIX, "inside a block header", err))
        return -1;
    const unsigned char *p = d->stage + d->pos;
    if (p[4] != 0x60 || (p[5] & 0x8F) != 0 || p[5] < 0x40)
        return corrupt(d, err, d->offset, "unexpected LZ4 frame options in a weir stream");
    unsigned code = p[5] >> 4;
    if (code < 4 || ((XXH32(p + 4, 2, 0) >> 8) & 0xFF) != p[6])
        return corrupt(d, err, d->offset, "corrupt LZ4 frame header");
    /* one encoding per block: the frame declares the stream's block maximum */
    if (code != codec_bd_code(d->block_max))
        return corrupt(d, err, d->offset,
                       "block frame's maximum size differs from the stream header's");
    uint32_t word = codec_get32(p + 7);
    if (!(word & 0x80000000u) && !d->compressed)
        return corrupt(d, err, d->offset,
                       "compressed block in a stream whose header says its blocks are stored");
    uint32_t size = word & 0x7FFFFFFFu;
    uint32_t limit = codec_bd_size(code) < d->block_max ? codec_bd_size(code) : d->block_max;
    if (size == 0)
        return corrupt(d, err, d->offset, "empty block frame");
    if (size > limit) {
        char what[96];
        snprintf(what, sizeof what, "block of %u bytes exceeds the maximum of %u", size,
                 limit);
        return corrupt(d, err, d->offset, what);
    }
    stream_consume(d, CODEC_FRAME_PREFIX);
    memset(b, 0, sizeof *b);
    b->stored = (word & 0x80000000u) != 0;
    b->wire_len = size;
    b->wire_off = d->offset;
    return 1;
}

/* At the end of a stream: the input must end, or another stream begin. */
static int after_trailer(struct stream_decoder *d, struct weir_error *err)
{
    if (d->src.one_stream)
        return 0;
    int r = stream_need(d, 1, err);
    if (r < 0)
        return -1;
    if (r == 0)
        return 0;
    r = stream_need(d, 4, err);
    if (r < 0)
        return -1;
    if (r == 0 || !is_weir_record(d->stage + d->pos))
        return corrupt(d, err, d->offset, "junk after the end of the weir stream");
    return 1;
}

int stream_next(struct stream_decoder *d, struct stream_block *b, struct weir_error *err)
{
    for (;;) {
        if (!d->in_stream) {
            if (d->streams > 0) {
                int r = after_trailer(d, err);
                if (r <= 0)
                    return r;
            }
            if (parse_header(d, err))
                return -1;
            continue;
        }
        int r = stream_need(d, 4, err);
        if (r < 0)
            return -1;
        if (r == 0) {
            char where[96];
            snprintf(where, sizeof where, "no trailer; %llu blocks, %llu bytes arrived",
                     (unsigned long long)d->seq, (unsigned long long)d->total);
            return truncated(d, err, where);
        }
        uint32_t magic = codec_get32(d->stage + d->pos);
        if (magic == CODEC_LZ4_MAGIC && d->zstd)
            return corrupt(d, err, d->offset, "LZ4 frame in a stream whose header says zstd");
        if (magic == CODEC_LZ4_MAGIC)
            return parse_frame_start(d, b, err);
        if (magic != CODEC_WEIR_MAGIC)
            return corrupt(d, err, d->offset, "corrupt weir stream: no frame starts here");
        r = parse_record(d, b, err);
        if (r == 2)
            continue;
        if (r != 0)
            return r;
    }
}

int stream_payload(struct stream_decoder *d, void *dst, size_t n, struct weir_error *err)
{
    unsigned char *out = dst;
    size_t staged = d->end - d->pos;
    size_t take = staged < n ? staged : n;
    memcpy(out, d->stage + d->pos, take);
    stream_consume(d, take);
    out += take;
    n -= take;
    while (n > 0) {
        /* large remainders go straight to the caller's memory */
        if (d->eof)
            return truncated(d, err, "inside a block");
        ssize_t r = d->src.read(d->src.ctx, out, n);
        if (r < 0)
            return error_sys(err, d->src.error_status, errno, "%s: read", d->src.name);
        if (r == 0) {
            d->eof = true;
            return truncated(d, err, "inside a block");
        }
        out += r;
        n -= (size_t)r;
        d->offset += (uint64_t)r;
    }
    return 0;
}

int stream_block_end(struct stream_decoder *d, struct stream_block *b, struct weir_error *err)
{
    if (b->legacy) {
        /* only what follows tells whether this block may be short: the end
         * of the input (or a cut, reported next) or another magic number */
        int r = stream_need(d, 4, err);
        if (r < 0)
            return -1;
        b->last = r == 0 || is_lz4_magic(codec_get32(d->stage + d->pos));
        return 0;
    }
    if (b->lz4) {
        if (b->has_sum) {
            if (require(d, 4, "LZ4 data", err))
                return -1;
            b->hash = codec_get32(d->stage + d->pos);
            stream_consume(d, 4);
        }
        return 0;
    }
    if (!b->zstd) {
        if (require(d, 4, "after a block", err))
            return -1;
        if (codec_get32(d->stage + d->pos) != 0)
            return corrupt(d, err, d->offset, "block frame holds more than one block");
        stream_consume(d, 4);
    }
    uint32_t len;
    if (read_record(d, &len, "inside a block checksum", err))
        return -1;
    const unsigned char *p = d->stage + d->pos;
    if (!is_weir_record(p) || len != 24 || p[8] != 'B' || !all_zero(p + 9, 3))
        return corrupt(d, err, d->offset, "missing block checksum record");
    b->raw_len = codec_get32(p + 12);
    b->seq = codec_get64(p + 16);
    b->hash = codec_get64(p + 24);
    b->unsummed = d->unsummed;
    if (b->unsummed && b->hash != 0)
        return corrupt(d, err, b->wire_off, "block record of a stream without checksums "
                       "holds one");
    if (b->seq != d->seq) {
        char what[96];
        snprintf(what, sizeof what, "block %llu arrived where block %llu belongs",
                 (unsigned long long)b->seq, (unsigned long long)d->seq);
        return corrupt(d, err, b->wire_off, what);
    }
    if (b->raw_len > d->block_max || b->raw_len == 0 ||
        (b->stored && b->raw_len != b->wire_len))
        return corrupt(d, err, b->wire_off, "block record does not fit its block");
    if (b->raw_len > CODEC_TOTAL_MAX - d->total)
        return corrupt(d, err, b->wire_off, "block beyond the largest file offset");
    stream_consume(d, 8 + len);
    d->seq++;
    d->total += b->raw_len;
    d->chain = codec_chain(d->chain, b->hash, b->raw_len);
    return 0;
}

long stream_decode_block(const struct stream_block *b, void **zstd, const void *payload,
                         void *dst, size_t cap)
{
    if (!b->zstd)
        return codec_decode_block(payload, b->wire_len, b->stored, dst, cap);
    void *dctx = codec_zstd_dctx(zstd);
    return dctx ? codec_decode_zstd(dctx, payload, b->wire_len, dst, cap)
                : STREAM_DECODE_NOMEM;
}

static int verify_legacy_block(const struct stream_block *b, long len, const char *name,
                               struct weir_error *err)
{
    if (len < 0)
        return error_set(err, WEIR_EXIT_INTEGRITY,
                         "%s: LZ4 legacy block %llu at byte %llu does not decode (corrupt data)",
                         name, (unsigned long long)b->seq, (unsigned long long)b->wire_off);
    if (!b->last && len != CODEC_LEGACY_BLOCK)
        return error_set(err, WEIR_EXIT_INTEGRITY,
                         "%s: LZ4 legacy block %llu at byte %llu decodes to %ld bytes, not the "
                         "8 MiB every block but the last holds (corrupt data)", name,
                         (unsigned long long)b->seq, (unsigned long long)b->wire_off, len);
    return 0;
}

static int verify_lz4_block(const struct stream_block *b, const void *payload, long len,
                            const char *name, struct weir_error *err)
{
    if (b->legacy)
        return verify_legacy_block(b, len, name, err);
    /* the checksum first: a flipped payload byte is named as such, even
     * when the block no longer decodes */
    if (b->has_sum && XXH32(payload, b->wire_len, 0) != (uint32_t)b->hash)
        return error_set(err, WEIR_EXIT_INTEGRITY,
                         "%s: LZ4 block %llu at byte %llu: checksum mismatch (corrupt data)",
                         name, (unsigned long long)b->seq, (unsigned long long)b->wire_off);
    if (len < 0)
        return error_set(err, WEIR_EXIT_INTEGRITY,
                         "%s: LZ4 block %llu at byte %llu does not decode (corrupt data)", name,
                         (unsigned long long)b->seq, (unsigned long long)b->wire_off);
    return 0;
}

int stream_verify_block(const struct stream_block *b, const void *payload, const void *data,
                        long len, const char *name, struct weir_error *err)
{
    if (len == STREAM_DECODE_NOMEM)
        return error_sys(err, WEIR_EXIT_INTERNAL, ENOMEM, "%s: block %llu: a zstd decoder",
                         name, (unsigned long long)b->seq);
    if (b->lz4)
        return verify_lz4_block(b, payload, len, name, err);
    if (b->plain && (len < 0 || (uint64_t)len != b->raw_len))
        return error_set(err, WEIR_EXIT_INTEGRITY,
                         "%s: corrupt zstd data: the frame at byte %llu does not decode to "
                         "the %u bytes it declares", name, (unsigned long long)b->wire_off,
                         b->raw_len);
    if (len < 0 || (uint64_t)len != b->raw_len)
        return error_set(err, WEIR_EXIT_INTEGRITY,
                         "%s: block %llu at byte %llu does not decode (corrupt data)", name,
                         (unsigned long long)b->seq, (unsigned long long)b->wire_off);
    if (b->unsummed)
        return 0;   /* its record's AEAD tag vouched for it (CODEC_HEADER_SEALED) */
    uint64_t hash = codec_block_hash(data, (size_t)len, b->seq);
    if (!b->stored)
        hash = codec_wire_hash(hash, payload, b->wire_len);
    if (hash != b->hash)
        return error_set(err, WEIR_EXIT_INTEGRITY,
                         "%s: block %llu at byte %llu: checksum mismatch (corrupt data)",
                         name, (unsigned long long)b->seq, (unsigned long long)b->wire_off);
    return 0;
}

/* ---- plain LZ4 frames ------------------------------------------------------ */


/* A frame header at stage[pos]: STREAM_LZ4_FRAME (consumed) or
 * STREAM_LZ4_LINKED (left staged for liblz4). */
static int lz4_frame_header(struct stream_decoder *d, struct weir_error *err)
{
    if (require(d, 7, "LZ4 data", err))
        return -1;
    const unsigned char *p = d->stage + d->pos;
    unsigned flg = p[4], bd = p[5];
    if ((flg >> 6) != 1)
        return corrupt(d, err, d->offset, "unsupported LZ4 frame version");
    if ((flg & 0x02) || (bd & 0x8F) || (bd >> 4) < 4)
        return corrupt(d, err, d->offset, "corrupt LZ4 frame header (reserved bits set)");
    size_t len = 7 + ((flg & 0x08) ? 8 : 0) + ((flg & 0x01) ? 4 : 0);
    if (require(d, len, "LZ4 data", err))
        return -1;
    p = d->stage + d->pos;
    if (((XXH32(p + 4, len - 5, 0) >> 8) & 0xFF) != p[len - 1])
        return corrupt(d, err, d->offset, "corrupt LZ4 frame header (checksum)");
    if (!(flg & 0x20) || (flg & 0x01)) {
        d->lz4_linked = true;
        d->frame = (struct stream_lz4_frame){.start = d->offset,
                                             .block_max = codec_bd_size(bd >> 4),
                                             .block_sums = (flg & 0x10) != 0,
                                             .content_sum = (flg & 0x04) != 0};
        return STREAM_LZ4_LINKED;
    }
    d->frame = (struct stream_lz4_frame){
        .start = d->offset,
        .block_max = codec_bd_size(bd >> 4),
        .block_sums = (flg & 0x10) != 0,
        .content_sum = (flg & 0x04) != 0,
        .has_size = (flg & 0x08) != 0,
        .size = (flg & 0x08) ? codec_get64(p + 6) : 0,
    };
    stream_consume(d, len);
    d->lz4_in_frame = true;
    return STREAM_LZ4_FRAME;
}

/* Between frames: skip skippable frames, then 0 at the end or a header. */
static int lz4_between_frames(struct stream_decoder *d, struct weir_error *err)
{
    for (;;) {
        int r = stream_need(d, 1, err);
        if (r <= 0)
            return r;
        if (require(d, 4, "LZ4 data", err))
            return -1;
        uint32_t magic = codec_get32(d->stage + d->pos);
        if (magic == CODEC_LZ4_MAGIC)
            return lz4_frame_header(d, err);
        if (magic == CODEC_LEGACY_MAGIC) {
            d->frame = (struct stream_lz4_frame){.start = d->offset, .legacy = true,
                                                 .block_max = CODEC_LEGACY_BLOCK};
            stream_consume(d, 4);
            d->lz4_legacy = true;
            return STREAM_LZ4_LEGACY;
        }
        if (magic < CODEC_SKIP_MAGIC_MIN || magic > CODEC_SKIP_MAGIC_MAX)
            return corrupt(d, err, d->offset, "corrupt LZ4 data: no frame starts here");
        if (require(d, 8, "LZ4 data", err))
            return -1;
        uint32_t len = codec_get32(d->stage + d->pos + 4);
        if (magic == CODEC_WEIR_MAGIC && len >= 16) {
            /* weir's records are skippable frames to lz4, but skipping them
             * here would decode a weir stream without its checks; a frame
             * of anyone else's that bears the magic is skipped */
            if (require(d, 24, "LZ4 data", err))
                return -1;
            const unsigned char *p = d->stage + d->pos;
            if (weir_header_like(p, 24))
                return corrupt(d, err, d->offset,
                               "a weir stream follows LZ4 data (decode them one at a time)");
            if (weir_record_like(p))
                return corrupt(d, err, d->offset,
                               "weir stream data without its header inside LZ4 data");
        }
        stream_consume(d, 8);
        if (skip_bytes(d, len, "LZ4 data", err))
            return -1;
    }
}

/* Inside a legacy stream: its next block, or its end (the input's end or
 * another magic number, which is read next). */
static int legacy_next(struct stream_decoder *d, struct stream_block *b, struct weir_error *err)
{
    int r = stream_need(d, 1, err);
    if (r < 0)
        return -1;
    if (r == 0) {
        d->lz4_legacy = false;
        return 0;
    }
    if (require(d, 4, "LZ4 data", err))
        return -1;
    uint32_t size = codec_get32(d->stage + d->pos);
    if (is_lz4_magic(size)) {
        d->lz4_legacy = false;
        return lz4_between_frames(d, err);
    }
    if (size == 0 || size > CODEC_LEGACY_WIRE_MAX) {
        char what[112];
        snprintf(what, sizeof what, "LZ4 legacy block of %u bytes (a block holds 1 to %u)",
                 size, CODEC_LEGACY_WIRE_MAX);
        return corrupt(d, err, d->offset, what);
    }
    stream_consume(d, 4);
    memset(b, 0, sizeof *b);
    b->lz4 = true;
    b->legacy = true;
    b->wire_len = size;
    b->wire_off = d->offset;
    b->raw_max = CODEC_LEGACY_BLOCK;
    b->seq = d->lz4_blocks++;
    return STREAM_LZ4_BLOCK;
}

int stream_lz4_next(struct stream_decoder *d, struct stream_block *b, struct weir_error *err)
{
    if (d->lz4_legacy)
        return legacy_next(d, b, err);
    if (!d->lz4_in_frame)
        return lz4_between_frames(d, err);
    for (;;) {
        if (require(d, 4, "LZ4 data", err))
            return -1;
        uint32_t word = codec_get32(d->stage + d->pos);
        uint64_t at = d->offset;
        stream_consume(d, 4);
        if (word == 0) {
            if (d->frame.content_sum) {
                if (require(d, 4, "LZ4 data", err))
                    return -1;
                d->frame.sum = codec_get32(d->stage + d->pos);
                stream_consume(d, 4);
            }
            d->lz4_in_frame = false;
            return STREAM_LZ4_FRAME_END;
        }
        uint32_t size = word & 0x7FFFFFFFu;
        if (size > d->frame.block_max) {
            char what[96];
            snprintf(what, sizeof what, "LZ4 block of %u bytes exceeds the frame's maximum of %u",
                     size, d->frame.block_max);
            return corrupt(d, err, at, what);
        }
        memset(b, 0, sizeof *b);
        b->lz4 = true;
        b->stored = (word & 0x80000000u) != 0;
        b->wire_len = size;
        b->wire_off = d->offset;
        b->raw_max = d->frame.block_max;
        b->has_sum = d->frame.block_sums;
        b->seq = d->lz4_blocks++;
        if (size > 0)
            return STREAM_LZ4_BLOCK;
        /* an empty stored block: nothing to decode, only its checksum */
        if (stream_block_end(d, b, err) || stream_verify_block(b, "", "", 0, d->src.name, err))
            return -1;
    }
}

int stream_lz4_read(struct stream_decoder *d, void *dst, size_t cap, size_t *n,
                    struct weir_error *err)
{
    *n = 0;
    if (!d->lz4_linked)
        return 0;
    if (!d->lz4) {
        LZ4F_dctx *ctx;
        if (LZ4F_isError(LZ4F_createDecompressionContext(&ctx, LZ4F_VERSION)))
            return error_set(err, WEIR_EXIT_INTERNAL, "%s: LZ4 decoder", d->src.name);
        d->lz4 = ctx;
    }
    for (;;) {
        if (d->pos == d->end) {
            int r = stream_fill(d, err);
            if (r < 0)
                return -1;
            if (r == 0)
                return truncated(d, err, "LZ4 data");
        }
        size_t out = cap, in = d->end - d->pos;
        size_t hint = LZ4F_decompress(d->lz4, dst, &out, d->stage + d->pos, &in, NULL);
        if (LZ4F_isError(hint))
            return error_set(err, WEIR_EXIT_INTEGRITY, "%s: corrupt LZ4 data near byte %llu: %s",
                             d->src.name, (unsigned long long)d->offset,
                             LZ4F_getErrorName(hint));
        stream_consume(d, in);
        if (hint == 0)
            d->lz4_linked = false;   /* the frame ended, verified */
        if (out > 0 || hint == 0) {
            *n = out;
            return 0;
        }
    }
}

void stream_content_begin(struct stream_content *c, const struct stream_lz4_frame *f)
{
    XXH32_reset(&c->hash, 0);
    c->hashing = f->content_sum;
    c->bytes = 0;
}

void stream_content_add(struct stream_content *c, const void *data, size_t len)
{
    if (c->hashing)
        XXH32_update(&c->hash, data, len);
    c->bytes += len;
}

int stream_content_end(const struct stream_content *c, const struct stream_lz4_frame *f,
                       const char *name, struct weir_error *err)
{
    if (f->has_size && c->bytes != f->size)
        return error_set(err, WEIR_EXIT_INTEGRITY,
                         "%s: LZ4 frame at byte %llu holds %llu bytes, its header says %llu "
                         "(corrupt data)", name, (unsigned long long)f->start,
                         (unsigned long long)c->bytes, (unsigned long long)f->size);
    if (c->hashing && XXH32_digest(&c->hash) != f->sum)
        return error_set(err, WEIR_EXIT_INTEGRITY,
                         "%s: LZ4 frame at byte %llu: content checksum mismatch (corrupt data)",
                         name, (unsigned long long)f->start);
    return 0;
}
