/*
 * test_stream.c - the weir stream survives round trips at awkward sizes, and
 * every truncation and every flipped byte of a stream is rejected.  Plain
 * LZ4 frames of every kind decode to what liblz4 encoded, and truncations,
 * flips, wrong sizes and over-long blocks are caught.  The LZ4 frame weir -z
 * writes to files decodes with liblz4 and with weir, and weir rejects every
 * cut and flip of it.  Legacy LZ4 decodes alone, concatenated and among
 * frames; cuts, short blocks and impossible sizes are caught.  Streams with
 * holes (version 2) round-trip, every cut and flip of them is caught, and a
 * hole where it cannot be (version 1, out of order, too long) is refused.
 */
#include <lz4.h>
#include <lz4frame.h>
#include <stdint.h>
#include <string.h>
#include <xxhash.h>

#include "../fuzz/harness.h"
#include "check.h"
#include "format/codec.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static uint8_t next_byte(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint8_t)rng;
}

static void fill(uint8_t *p, size_t n, int kind)
{
    for (size_t i = 0; i < n; i++)
        p[i] = kind == 0 ? next_byte() : kind == 1 ? 0 : (uint8_t)("weir stream "[i % 12]);
}

static void round_trip(size_t size, size_t block, int level, int kind, size_t chunk)
{
    uint8_t *data = malloc(size + 1);
    fill(data, size, kind);
    size_t len, outlen;
    uint8_t *enc = harness_encode(data, size, block, level, &len), *out;
    struct weir_error err;
    CHECK(enc, "encode");
    CHECK(harness_decode(enc, len, chunk, &out, &outlen, &err) == 0,
          "decode %zu bytes, block %zu, level %d: %s", size, block, level, err.msg);
    CHECK(outlen == size && (size == 0 || memcmp(out, data, size) == 0), "round trip of %zu bytes", size);
    if (kind == 0 && level > 0 && block >= 65536)
        CHECK(len <= size + size / 200 + 128, "random data grew to %zu from %zu", len, size);
    free(out);
    free(enc);
    free(data);
}

/* Every proper prefix of a valid stream must be rejected as corrupt. */
static void every_truncation(void)
{
    uint8_t data[3000];
    fill(data, sizeof data, 2);
    size_t len;
    uint8_t *enc = harness_encode(data, sizeof data, 1024, 1, &len);
    for (size_t cut = 0; cut < len; cut++) {
        uint8_t *out;
        size_t outlen;
        struct weir_error err;
        int rc = harness_decode(enc, cut, 7, &out, &outlen, &err);
        CHECK(rc != 0, "a stream cut at %zu of %zu bytes was accepted", cut, len);
        CHECK(err.status == WEIR_EXIT_INTEGRITY, "cut at %zu: status %d (%s)", cut,
              err.status, err.msg);
    }
    free(enc);
}

/* Flipping bits 0, 3 and 6 of every byte of a weir stream must each be
 * caught (label names the stream in the message). */
static void every_flip_refused(uint8_t *enc, size_t len, const char *label)
{
    for (size_t at = 0; at < len; at++) {
        for (int bit = 0; bit < 8; bit += 3) {
            enc[at] ^= (uint8_t)(1u << bit);
            uint8_t *out;
            size_t outlen;
            struct weir_error err;
            int rc = harness_decode(enc, len, 4096, &out, &outlen, &err);
            enc[at] ^= (uint8_t)(1u << bit);
            if (rc == 0)
                free(out);
            CHECK(rc != 0, "flipping bit %d of byte %zu of %zu of %s went unnoticed", bit, at,
                  len, label);
        }
    }
}

/* Flipping any bit of any byte must be caught. */
static void every_flip(int level)
{
    uint8_t data[2500];
    fill(data, sizeof data, 2);
    fill(data + 1200, 600, 0);
    size_t len;
    uint8_t *enc = harness_encode(data, sizeof data, 1000, level, &len);
    char label[64];
    snprintf(label, sizeof label, "a stream at level %d", level);
    every_flip_refused(enc, len, label);
    free(enc);
}

static void junk_and_concatenation(void)
{
    uint8_t data[100];
    fill(data, sizeof data, 0);
    size_t len;
    uint8_t *enc = harness_encode(data, sizeof data, 64, 1, &len);
    uint8_t *two = malloc(2 * len + 1);
    memcpy(two, enc, len);
    memcpy(two + len, enc, len);
    uint8_t *out;
    size_t outlen;
    struct weir_error err;
    CHECK(harness_decode(two, 2 * len, 13, &out, &outlen, &err) == 0, "concatenated: %s",
          err.msg);
    CHECK(outlen == 200 && memcmp(out, data, 100) == 0 && memcmp(out + 100, data, 100) == 0,
          "concatenated streams decode to both");
    free(out);
    two[len] = 'x';
    CHECK(harness_decode(two, len + 1, 13, &out, &outlen, &err) != 0, "junk accepted");
    CHECK(strstr(err.msg, "junk after the end") != NULL, "junk message: %s", err.msg);
    CHECK(harness_decode(enc + CODEC_HEADER_SIZE, len - CODEC_HEADER_SIZE, 13, &out, &outlen,
                         &err) != 0, "a weir stream without its header was accepted");
    CHECK(strstr(err.msg, "without its header") != NULL, "headless message: %s", err.msg);
    CHECK(harness_decode(two, 0, 13, &out, &outlen, &err) != 0, "empty input accepted");
    CHECK(strstr(err.msg, "empty input") != NULL, "empty message: %s", err.msg);
    free(two);
    free(enc);
}

/* ---- plain LZ4 frames ---------------------------------------------------- */

struct lz4_kind {
    const char *name;
    LZ4F_blockSizeID_t block;
    LZ4F_blockMode_t mode;
    int content_sum, block_sum, content_size;
};

static const struct lz4_kind lz4_kinds[] = {
    {"default", LZ4F_max4MB, LZ4F_blockIndependent, 1, 0, 0},
    {"64k blocks, block checksums", LZ4F_max64KB, LZ4F_blockIndependent, 1, 1, 0},
    {"64k blocks, content size", LZ4F_max64KB, LZ4F_blockIndependent, 1, 0, 1},
    {"no checksums", LZ4F_max256KB, LZ4F_blockIndependent, 0, 0, 0},
    {"linked", LZ4F_max64KB, LZ4F_blockLinked, 1, 1, 1},
};

static uint8_t *lz4_encode(const uint8_t *data, size_t size, const struct lz4_kind *k,
                           size_t *len)
{
    LZ4F_preferences_t prefs;
    memset(&prefs, 0, sizeof prefs);
    prefs.frameInfo.blockSizeID = k->block;
    prefs.frameInfo.blockMode = k->mode;
    prefs.frameInfo.contentChecksumFlag = k->content_sum ? LZ4F_contentChecksumEnabled : 0;
    prefs.frameInfo.blockChecksumFlag = k->block_sum ? LZ4F_blockChecksumEnabled : 0;
    prefs.frameInfo.contentSize = k->content_size ? size : 0;
    size_t cap = LZ4F_compressFrameBound(size, &prefs);
    uint8_t *enc = malloc(cap);
    CHECK(enc, "malloc");
    *len = LZ4F_compressFrame(enc, cap, data, size, &prefs);
    CHECK(!LZ4F_isError(*len), "LZ4F_compressFrame: %s", LZ4F_getErrorName(*len));
    return enc;
}

/* Mixed data: compressible text with random stretches. */
static uint8_t *lz4_data(size_t size)
{
    uint8_t *data = malloc(size + 1);
    fill(data, size, 2);
    for (size_t off = 0; off + 3000 < size; off += 50000)
        fill(data + off, 3000, 0);
    return data;
}

static void lz4_round_trips(void)
{
    size_t sizes[] = {0, 1, 65535, 65536, 65537, 300000};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        uint8_t *data = lz4_data(sizes[i]);
        for (size_t k = 0; k < sizeof lz4_kinds / sizeof *lz4_kinds; k++) {
            size_t len, outlen;
            uint8_t *enc = lz4_encode(data, sizes[i], &lz4_kinds[k], &len), *out;
            struct weir_error err;
            for (size_t chunk = 5; chunk < 1000000; chunk *= 1000) {
                CHECK(harness_decode(enc, len, chunk, &out, &outlen, &err) == 0,
                      "lz4 %s, %zu bytes: %s", lz4_kinds[k].name, sizes[i], err.msg);
                CHECK(outlen == sizes[i] && (outlen == 0 || memcmp(out, data, outlen) == 0),
                      "lz4 %s, %zu bytes: decoded to different data", lz4_kinds[k].name,
                      sizes[i]);
                free(out);
            }
            free(enc);
        }
        free(data);
    }
}

/* Cut anywhere near the frame's header, block boundaries and end, and at
 * every 61st byte: always rejected. */
static void lz4_truncations(void)
{
    size_t size = 200000;
    uint8_t *data = lz4_data(size);
    for (size_t k = 0; k < sizeof lz4_kinds / sizeof *lz4_kinds; k++) {
        size_t len;
        uint8_t *enc = lz4_encode(data, size, &lz4_kinds[k], &len);
        for (size_t cut = 0; cut < len; cut++) {
            if (cut > 40 && cut + 40 < len && cut % 61 != 0)
                continue;
            uint8_t *out;
            size_t outlen;
            struct weir_error err;
            int rc = harness_decode(enc, cut, 4096, &out, &outlen, &err);
            if (rc == 0)
                free(out);
            CHECK(rc != 0, "lz4 %s cut at %zu of %zu was accepted", lz4_kinds[k].name, cut,
                  len);
            CHECK(err.status == WEIR_EXIT_INTEGRITY, "lz4 cut at %zu: status %d (%s)", cut,
                  err.status, err.msg);
        }
        free(enc);
    }
    free(data);
}

/* With a content checksum, any flipped bit is rejected or decodes to the
 * very same data (LZ4 ignores a few bits of a block's last sequence). */
static void lz4_flips(void)
{
    size_t size = 70000;   /* two blocks of 64 KiB frames */
    uint8_t *data = lz4_data(size);
    for (size_t k = 0; k < sizeof lz4_kinds / sizeof *lz4_kinds; k++) {
        if (!lz4_kinds[k].content_sum)
            continue;
        size_t len;
        uint8_t *enc = lz4_encode(data, size, &lz4_kinds[k], &len);
        for (size_t at = 0; at < len; at++) {
            if (at > 64 && at + 64 < len && at % 7 != 0)
                continue;
            for (int bit = 0; bit < 8; bit += 3) {
                enc[at] ^= (uint8_t)(1u << bit);
                uint8_t *out;
                size_t outlen;
                struct weir_error err;
                int rc = harness_decode(enc, len, 3000, &out, &outlen, &err);
                enc[at] ^= (uint8_t)(1u << bit);
                if (rc == 0) {
                    CHECK(outlen == size && memcmp(out, data, size) == 0,
                          "lz4 %s: flipping bit %d of byte %zu of %zu changed the data "
                          "unnoticed", lz4_kinds[k].name, bit, at, len);
                    free(out);
                } else {
                    CHECK(err.status == WEIR_EXIT_INTEGRITY, "lz4 flip: status %d (%s)",
                          err.status, err.msg);
                }
            }
        }
        free(enc);
    }
    free(data);
}

static void expect_lz4_error(const uint8_t *enc, size_t len, const char *what, const char *msg)
{
    uint8_t *out;
    size_t outlen;
    struct weir_error err;
    int rc = harness_decode(enc, len, 100000, &out, &outlen, &err);
    if (rc == 0)
        free(out);
    CHECK(rc != 0, "%s was accepted", what);
    CHECK(err.status == WEIR_EXIT_INTEGRITY && strstr(err.msg, msg) != NULL,
          "%s: status %d, message '%s', want '%s'", what, err.status, err.msg, msg);
}

/* Frames that are well formed but lie: a wrong content size (with a valid
 * header checksum), a block longer than the frame allows, an empty stored
 * block (valid), junk after the frame. */
static void lz4_lies(void)
{
    size_t size = 100000, len;
    uint8_t *data = lz4_data(size);
    struct lz4_kind k = {"sized", LZ4F_max64KB, LZ4F_blockIndependent, 0, 0, 1};
    uint8_t *enc = lz4_encode(data, size, &k, &len);
    CHECK(enc[4] & 0x08, "the frame carries its size");
    codec_put64(enc + 6, size + 1);
    enc[14] = (uint8_t)(XXH32(enc + 4, 10, 0) >> 8);
    expect_lz4_error(enc, len, "a frame one byte short of its size", "its header says 100001");
    free(enc);

    k = (struct lz4_kind){"plain", LZ4F_max64KB, LZ4F_blockIndependent, 1, 0, 0};
    enc = lz4_encode(data, size, &k, &len);
    uint8_t *big = malloc(len + 8);
    memcpy(big, enc, len);
    codec_put32(big + 7, 65537);
    expect_lz4_error(big, len, "a block of 65537 bytes in a 64 KiB frame",
                     "exceeds the frame's maximum of 65536");
    /* an empty stored block after the header changes nothing */
    memcpy(big, enc, 7);
    codec_put32(big + 7, 0x80000000u);
    memcpy(big + 11, enc + 7, len - 7);
    uint8_t *out;
    size_t outlen;
    struct weir_error err;
    CHECK(harness_decode(big, len + 4, 100, &out, &outlen, &err) == 0, "empty block: %s",
          err.msg);
    CHECK(outlen == size && memcmp(out, data, size) == 0, "empty block: decoded data");
    free(out);
    memcpy(big, enc, len);
    memcpy(big + len, "junk", 4);
    expect_lz4_error(big, len + 4, "junk after a frame", "no frame starts here");
    free(big);
    free(enc);
    free(data);
}

/* ---- the LZ4 frame weir -z writes to files --------------------------------- */

/* Decode with liblz4's frame decoder in one call, as one-shot decoders do. */
static void liblz4_decodes(const uint8_t *enc, size_t len, const uint8_t *data, size_t size,
                           const char *what)
{
    LZ4F_dctx *ctx;
    CHECK(!LZ4F_isError(LZ4F_createDecompressionContext(&ctx, LZ4F_VERSION)), "dctx");
    LZ4F_frameInfo_t info;
    size_t in = len;
    size_t hint = LZ4F_getFrameInfo(ctx, &info, enc, &in);
    CHECK(!LZ4F_isError(hint), "%s: frame info: %s", what, LZ4F_getErrorName(hint));
    CHECK(info.blockMode == LZ4F_blockIndependent && info.blockChecksumFlag &&
          info.contentChecksumFlag, "%s: the header says independent blocks and both checksums",
          what);
    uint8_t *out = malloc(size + 1);
    size_t pos = in, outpos = 0;
    while (pos < len && hint != 0) {
        size_t o = size + 1 - outpos, i = len - pos;
        hint = LZ4F_decompress(ctx, out + outpos, &o, enc + pos, &i, NULL);
        CHECK(!LZ4F_isError(hint), "%s: liblz4: %s", what, LZ4F_getErrorName(hint));
        pos += i;
        outpos += o;
    }
    CHECK(hint == 0 && pos == len, "%s: liblz4 ends where the frame ends", what);
    CHECK(outpos == size && (size == 0 || memcmp(out, data, size) == 0),
          "%s: liblz4 decodes the data", what);
    free(out);
    LZ4F_freeDecompressionContext(ctx);
}

static void frame_round_trips(void)
{
    size_t sizes[] = {0, 1, 63, 64, 65, 4095, 4097, 65535, 65536, 65537, 300001};
    size_t blocks[] = {64, 4096, 65536, 1u << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        uint8_t *data = lz4_data(sizes[i]);
        for (size_t b = 0; b < sizeof blocks / sizeof *blocks; b++) {
            for (int level = 0; level <= 9; level += 9) {
                for (int sized = 0; sized < 2; sized++) {
                    char what[96];
                    snprintf(what, sizeof what, "lz4 file of %zu bytes, blocks of %zu, level %d%s",
                             sizes[i], blocks[b], level, sized ? ", sized" : "");
                    size_t len, outlen;
                    uint8_t *enc = harness_encode_lz4(data, sizes[i], blocks[b], level, sized,
                                                      &len), *out;
                    CHECK(enc, "%s: encode", what);
                    CHECK((enc[4] & 0x08) == (sized ? 0x08 : 0), "%s: size flag", what);
                    liblz4_decodes(enc, len, data, sizes[i], what);
                    struct weir_error err;
                    CHECK(harness_decode(enc, len, 777, &out, &outlen, &err) == 0, "%s: %s", what,
                          err.msg);
                    CHECK(outlen == sizes[i] && (outlen == 0 || memcmp(out, data, outlen) == 0),
                          "%s: weir decodes the data", what);
                    free(out);
                    free(enc);
                }
            }
        }
        free(data);
    }
}

/* Every cut of weir's frame is rejected; every flipped bit is rejected or
 * decodes to the very same data. */
static void frame_cuts_and_flips(void)
{
    size_t size = 9000, len;
    uint8_t *data = lz4_data(size);
    uint8_t *enc = harness_encode_lz4(data, size, 4096, 1, true, &len);
    for (size_t cut = 0; cut < len; cut++) {
        uint8_t *out;
        size_t outlen;
        struct weir_error err;
        int rc = harness_decode(enc, cut, 5, &out, &outlen, &err);
        if (rc == 0)
            free(out);
        CHECK(rc != 0 && err.status == WEIR_EXIT_INTEGRITY,
              "weir's frame cut at %zu of %zu: rc %d (%s)", cut, len, rc, rc ? err.msg : "");
    }
    for (size_t at = 0; at < len; at++) {
        for (int bit = 0; bit < 8; bit += 3) {
            enc[at] ^= (uint8_t)(1u << bit);
            uint8_t *out;
            size_t outlen;
            struct weir_error err;
            int rc = harness_decode(enc, len, 4096, &out, &outlen, &err);
            enc[at] ^= (uint8_t)(1u << bit);
            if (rc == 0) {
                CHECK(outlen == size && memcmp(out, data, size) == 0,
                      "weir's frame: flipping bit %d of byte %zu changed the data unnoticed",
                      bit, at);
                free(out);
            } else {
                CHECK(err.status == WEIR_EXIT_INTEGRITY, "weir's frame, flip at %zu: %d (%s)",
                      at, err.status, err.msg);
            }
        }
    }
    free(enc);
    free(data);
}

/* ---- legacy LZ4 ------------------------------------------------------------ */

/* A legacy stream as lz4 -l writes it: 8 MiB blocks, each compressed. */
static uint8_t *legacy_encode(const uint8_t *data, size_t size, size_t *len)
{
    size_t nblocks = size / CODEC_LEGACY_BLOCK + 1;
    uint8_t *buf = malloc(4 + size + nblocks * (4 + CODEC_LEGACY_WIRE_MAX - CODEC_LEGACY_BLOCK));
    CHECK(buf, "malloc");
    codec_put32(buf, CODEC_LEGACY_MAGIC);
    size_t pos = 4;
    for (size_t off = 0; off < size; off += CODEC_LEGACY_BLOCK) {
        size_t n = size - off < CODEC_LEGACY_BLOCK ? size - off : CODEC_LEGACY_BLOCK;
        int c = LZ4_compress_default((const char *)data + off, (char *)buf + pos + 4, (int)n,
                                     LZ4_compressBound((int)n));
        CHECK(c > 0, "LZ4_compress_default");
        codec_put32(buf + pos, (uint32_t)c);
        pos += 4 + (size_t)c;
    }
    *len = pos;
    return buf;
}

static void expect_decodes(const uint8_t *enc, size_t len, const uint8_t *want, size_t wantlen,
                           const char *what)
{
    uint8_t *out;
    size_t outlen;
    struct weir_error err;
    for (size_t chunk = 3; chunk < 10000000; chunk *= 300) {
        CHECK(harness_decode(enc, len, chunk, &out, &outlen, &err) == 0, "%s: %s", what,
              err.msg);
        CHECK(outlen == wantlen && (outlen == 0 || memcmp(out, want, outlen) == 0),
              "%s: decoded data", what);
        free(out);
    }
}

static void legacy(void)
{
    size_t big = CODEC_LEGACY_BLOCK + 70001, small = 5000;
    uint8_t *data = lz4_data(big);
    size_t lb, ls, lf;
    uint8_t *eb = legacy_encode(data, big, &lb), *es = legacy_encode(data, small, &ls);
    uint8_t *ef = harness_encode_lz4(data, small, 4096, 1, false, &lf);
    expect_decodes(eb, lb, data, big, "legacy, two blocks");
    expect_decodes(es, 4, NULL, 0, "an empty legacy stream");
    /* legacy + frame + skippable + legacy + legacy, and the same data twice */
    size_t cat = ls + lf + 12 + lb + ls;
    uint8_t *enc = malloc(cat), *want = malloc(small * 3 + big);
    size_t pos = 0;
    memcpy(enc, es, ls), pos += ls;
    memcpy(enc + pos, ef, lf), pos += lf;
    codec_put32(enc + pos, CODEC_SKIP_MAGIC_MIN + 3), codec_put32(enc + pos + 4, 4);
    memcpy(enc + pos + 8, "skip", 4), pos += 12;
    memcpy(enc + pos, eb, lb), pos += lb;
    memcpy(enc + pos, es, ls), pos += ls;
    memcpy(want, data, small);
    memcpy(want + small, data, small);
    memcpy(want + 2 * small, data, big);
    memcpy(want + 2 * small + big, data, small);
    expect_decodes(enc, pos, want, 3 * small + big, "legacy among frames");
    /* cuts inside a block or its size; a cut between blocks is a valid
     * shorter stream, as the format has no end mark */
    size_t cuts[] = {5, 7, 8, 100, lb / 2, lb - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++)
        expect_lz4_error(eb, cuts[i], "a cut legacy stream", "truncated LZ4 data");
    expect_lz4_error(es, ls - 1, "a legacy stream cut in its last block", "truncated");
    /* a first block that is not full, followed by another */
    uint8_t *two = malloc(2 * ls);
    memcpy(two, es, ls);
    memcpy(two + ls, es + 4, ls - 4);
    expect_lz4_error(two, 2 * ls - 4, "a short legacy block before another",
                     "not the 8 MiB every block but the last holds");
    codec_put32(two + 4, 0);
    expect_lz4_error(two, ls, "a legacy block of 0 bytes", "LZ4 legacy block of 0 bytes");
    codec_put32(two + 4, CODEC_LEGACY_WIRE_MAX + 1);
    expect_lz4_error(two, ls, "a legacy block over LZ4's bound", "a block holds 1 to");
    memcpy(two, es, ls);
    two[20] ^= 0x55;
    uint8_t *out;
    size_t outlen;
    struct weir_error err;
    int rc = harness_decode(two, ls, 100, &out, &outlen, &err);
    if (rc == 0) {
        /* no checksum: a flip may decode to other data, never to more */
        CHECK(outlen <= CODEC_LEGACY_BLOCK, "a flipped legacy block decoded to %zu bytes", outlen);
        free(out);
    } else {
        CHECK(err.status == WEIR_EXIT_INTEGRITY, "a flipped legacy block: %s", err.msg);
    }
    free(two);
    free(enc);
    free(want);
    free(ef);
    free(es);
    free(eb);
    free(data);
}

/* Build a one-block stream by hand, with the header's flags given. */
static size_t one_block_stream(uint8_t *buf, const uint8_t *data, size_t n, unsigned flags,
                               int level)
{
    uint8_t piece[1000 + CODEC_PIECE_OVERHEAD];
    codec_encode(data, n, piece, level, 0, 1000, CODEC_SUMS_WEIR);
    uint32_t raw;
    uint64_t hash;
    codec_piece_record(piece, &raw, &hash);
    struct codec_span sp[2];
    size_t total;
    codec_spans(piece, CODEC_FORM_WEIR, sp, &total);
    size_t pos = codec_header(buf, 1000, flags, CODEC_VERSION_OLDEST);
    uint64_t chain = codec_chain(codec_chain_start(buf), hash, raw);
    memcpy(buf + pos, piece, sp[0].len);
    pos += sp[0].len;
    return pos + codec_trailer(buf + pos, n, 1, chain);
}

static void expect_weir_error(const uint8_t *buf, size_t len, const char *label,
                              const char *msg)
{
    uint8_t *out;
    size_t outlen;
    struct weir_error err;
    int rc = harness_decode(buf, len, 4096, &out, &outlen, &err);
    if (rc == 0)
        free(out);
    CHECK(rc != 0, "%s: accepted", label);
    CHECK(rc != 0 && err.status == WEIR_EXIT_INTEGRITY && strstr(err.msg, msg),
          "%s: status %d, message '%s', want '%s'", label, err.status, err.msg, msg);
}

/* Every bit of the format means one thing: a stream whose header says its
 * blocks are stored may not carry a compressed one, and a block frame
 * declares the stream's own block maximum, not any other. */
static void one_meaning_per_bit(void)
{
    uint8_t data[1000], buf[2000];
    fill(data, sizeof data, 2);
    size_t len = one_block_stream(buf, data, sizeof data, CODEC_HEADER_COMPRESSED, 1);
    uint8_t *out;
    size_t outlen;
    struct weir_error err;
    CHECK(harness_decode(buf, len, 4096, &out, &outlen, &err) == 0, "hand-made stream: %s",
          err.msg);
    free(out);
    len = one_block_stream(buf, data, sizeof data, 0, 1);
    expect_weir_error(buf, len, "compressed block under a stored header",
                      "header says its blocks are stored");
    /* a stored stream with the block's frame declaring 4 MiB blocks, its
     * header checksum recomputed so only the meaning differs */
    len = one_block_stream(buf, data, sizeof data, 0, 0);
    uint8_t *frame = buf + CODEC_HEADER_SIZE;
    frame[5] = 7 << 4;
    frame[6] = (uint8_t)((XXH32(frame + 4, 2, 0) >> 8) & 0xFF);
    expect_weir_error(buf, len, "block frame with another maximum",
                      "differs from the stream header's");
}

/* A stream whose header says its blocks carry no checksums is read only out
 * of sealed records, and there its blocks must carry checksum 0. */
static void sealed_streams(void)
{
    uint8_t data[1000], buf[2000];
    fill(data, sizeof data, 2);
    /* a stored block, its record's checksum zeroed and the chain refolded */
    size_t len = one_block_stream(buf, data, sizeof data, CODEC_HEADER_SEALED, 0);
    uint8_t *rec = buf + CODEC_HEADER_SIZE + CODEC_FRAME_PREFIX + sizeof data + 4;
    CHECK(rec[8] == 'B', "the block record is where expected");
    memset(rec + 24, 0, 8);
    uint64_t chain = codec_chain(codec_chain_start(buf), 0, sizeof data);
    codec_put64(buf + len - 8, chain);
    uint8_t *out;
    size_t outlen;
    struct weir_error err;
    CHECK(harness_decode_from(buf, len, 4096, true, &out, &outlen, &err) == 0,
          "sealed stream: %s", err.msg);
    CHECK(outlen == sizeof data && memcmp(out, data, sizeof data) == 0, "sealed stream: data");
    free(out);
    expect_weir_error(buf, len, "sealed stream outside sealed records",
                      "only an encrypted connection may carry");
    rec[24] = 1;
    codec_put64(buf + len - 8, codec_chain(codec_chain_start(buf), 1, sizeof data));
    CHECK(harness_decode_from(buf, len, 4096, true, &out, &outlen, &err) != 0 &&
          err.status == WEIR_EXIT_INTEGRITY && strstr(err.msg, "without checksums holds one"),
          "sealed stream with a checksum: '%s'", err.msg);
    /* never with compressed blocks */
    len = one_block_stream(buf, data, sizeof data,
                           CODEC_HEADER_SEALED | CODEC_HEADER_COMPRESSED, 1);
    CHECK(harness_decode_from(buf, len, 4096, true, &out, &outlen, &err) != 0 &&
          err.status == WEIR_EXIT_INTEGRITY && strstr(err.msg, "malformed weir header"),
          "sealed and compressed: '%s'", err.msg);
}

/* ---- holes (version 2) ------------------------------------------------------ */

/* A layout: data everywhere but where zero runs are cut in, at offsets and
 * lengths that fall on and across 4 KiB grains. */
static void sparse_round_trip(size_t size, const size_t (*zeros)[2], int nzeros, size_t block,
                              int level, size_t chunk, const char *label)
{
    uint8_t *data = malloc(size + 1);
    fill(data, size, 2);
    for (int i = 0; i < nzeros; i++)
        memset(data + zeros[i][0], 0, zeros[i][1]);
    size_t len, outlen;
    uint8_t *enc = harness_encode_sparse(data, size, block, level, &len), *out;
    struct weir_error err;
    CHECK(enc, "%s: encode", label);
    CHECK(harness_decode(enc, len, chunk, &out, &outlen, &err) == 0, "%s: decode: %s", label,
          err.msg);
    CHECK(outlen == size && (size == 0 || memcmp(out, data, size) == 0), "%s: round trip",
          label);
    free(out);
    free(enc);
    free(data);
}

static void sparse_layouts(void)
{
    static const size_t start[][2] = {{0, 8192}};
    static const size_t middle[][2] = {{4096, 4096}, {20000, 9000}};
    static const size_t end[][2] = {{12288, 20000 - 12288}};
    static const size_t all[][2] = {{0, 50000}};
    static const size_t small[][2] = {{100, 50}, {4090, 12}, {8000, 300}};
    static const size_t straddle[][2] = {{4000, 8300}, {16383, 4098}};
    for (int level = 0; level <= 1; level++) {
        for (size_t chunk = 7; chunk < 100000; chunk *= 31) {
            sparse_round_trip(20000, start, 1, 1024, level, chunk, "hole at the start");
            sparse_round_trip(40000, middle, 2, 4096, level, chunk, "holes in the middle");
            sparse_round_trip(20000, end, 1, 65536, level, chunk, "hole at the end");
            sparse_round_trip(50000, all, 1, 4096, level, chunk, "all hole");
            sparse_round_trip(10000, small, 3, 1000, level, chunk, "runs under a grain");
            sparse_round_trip(30000, straddle, 2, 3000, level, chunk, "runs across grains");
            sparse_round_trip(4097, end, 0, 64, level, chunk, "no hole");
        }
    }
}

/* A stream with holes: one in the middle and one at the end. */
static uint8_t *holey_stream(uint8_t *data, size_t size, size_t *len)
{
    fill(data, size, 2);
    memset(data + 4096, 0, 8192);
    memset(data + size - 4096, 0, 4096);
    return harness_encode_sparse(data, size, 2000, 1, len);
}

static void sparse_cuts_and_flips(void)
{
    uint8_t data[20480];
    size_t len;
    uint8_t *enc = holey_stream(data, sizeof data, &len);
    for (size_t cut = 0; cut < len; cut++) {
        uint8_t *out;
        size_t outlen;
        struct weir_error err;
        int rc = harness_decode(enc, cut, 11, &out, &outlen, &err);
        if (rc == 0)
            free(out);
        CHECK(rc != 0 && err.status == WEIR_EXIT_INTEGRITY,
              "a stream with holes cut at %zu of %zu bytes: %s", cut, len,
              rc ? err.msg : "accepted");
    }
    every_flip_refused(enc, len, "a stream with holes");
    free(enc);
}

static void sparse_refusals(void)
{
    uint8_t data[20480];
    size_t len;
    uint8_t *enc = holey_stream(data, sizeof data, &len);
    /* the first hole follows block 0 (2000 bytes), block 1 (2000) and 96
     * bytes (block 2): its record is the first 'Z' */
    size_t at = 0;
    for (size_t i = 0; i + 9 <= len; i++)
        if (codec_get32(enc + i) == CODEC_WEIR_MAGIC && enc[i + 8] == 'Z') {
            at = i;
            break;
        }
    CHECK(at > 0, "the stream has a hole record");
    uint8_t *copy = malloc(len);
    memcpy(copy, enc, len);
    copy[13] = 1;   /* the header says version 1: a hole cannot be there */
    expect_weir_error(copy, len, "hole in version 1", "hole record in a version 1 weir stream");
    /* hole records rewritten with a valid checksum, so only the meaning is wrong */
    memcpy(copy, enc, len);
    uint64_t seq = codec_get64(copy + at + 24);
    codec_hole(copy + at, seq + 1, 8192);
    expect_weir_error(copy, len, "hole out of order", "arrived where block");
    memcpy(copy, enc, len);
    codec_hole(copy + at, seq, 4096);
    expect_weir_error(copy, len, "hole of another length", "trailer does not match");
    memcpy(copy, enc, len);
    codec_hole(copy + at, seq, 0);
    expect_weir_error(copy, len, "empty hole", "malformed weir hole record");
    memcpy(copy, enc, len);
    codec_hole(copy + at, seq, (uint64_t)1 << 63);
    expect_weir_error(copy, len, "hole past every file offset", "malformed weir hole record");
    memcpy(copy, enc, len);
    codec_hole(copy + at, seq, CODEC_TOTAL_MAX);
    expect_weir_error(copy, len, "hole that ends past every file offset",
                      "beyond the largest file offset");
    memcpy(copy, enc, len);
    copy[at + 10] = 1;
    codec_put64(copy + at + 32, XXH3_64bits(copy + at, 32));
    expect_weir_error(copy, len, "hole with a reserved byte set", "malformed weir hole record");
    free(copy);
    /* version 2 with no hole reads as version 1 does; one chain serves both */
    uint8_t h1[CODEC_HEADER_SIZE], h2[CODEC_HEADER_SIZE];
    codec_header(h1, 4096, 0, 1);
    codec_header(h2, 4096, 0, 2);
    CHECK(codec_chain_start(h1) == codec_chain_start(h2), "one chain start for both versions");
    h2[13] = 3;
    struct codec_record r;
    char why[96];
    CHECK(codec_parse_record(h2, CODEC_HEADER_SIZE, &r, why, sizeof why) != 0 &&
          strstr(why, "unsupported weir stream version 3"), "version 3 refused: %s", why);
    free(enc);
}

int main(void)
{
    size_t sizes[] = {0, 1, 63, 64, 65, 4095, 4096, 4097, 100000};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        for (int kind = 0; kind < 3; kind++)
            for (int level = 0; level <= 9; level += 9) {
                round_trip(sizes[i], 64, level, kind, 5);
                round_trip(sizes[i], 4096, level == 9 ? 1 : 0, kind, 100000);
            }
    round_trip(5000000, CODEC_BLOCK_MAX, 1, 2, 1 << 20);
    round_trip(3000000, 65536, 1, 0, 70000);
    every_truncation();
    every_flip(0);
    every_flip(1);
    junk_and_concatenation();
    one_meaning_per_bit();
    sealed_streams();
    lz4_round_trips();
    lz4_truncations();
    lz4_flips();
    lz4_lies();
    frame_round_trips();
    frame_cuts_and_flips();
    legacy();
    sparse_layouts();
    sparse_cuts_and_flips();
    sparse_refusals();
    CHECK_DONE();
}
