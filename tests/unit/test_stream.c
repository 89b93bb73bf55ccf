/*
 * test_stream.c - the weir stream survives round trips at awkward sizes, and
 * every truncation and every flipped byte of a stream is rejected.
 */
#include <stdint.h>
#include <string.h>

#include "../fuzz/harness.h"
#include "check.h"
#include "weir/codec.h"

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

/* Flipping any bit of any byte must be caught. */
static void every_flip(int level)
{
    uint8_t data[2500];
    fill(data, sizeof data, 2);
    fill(data + 1200, 600, 0);
    size_t len;
    uint8_t *enc = harness_encode(data, sizeof data, 1000, level, &len);
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
            CHECK(rc != 0, "flipping bit %d of byte %zu of %zu (level %d) went unnoticed",
                  bit, at, len, level);
        }
    }
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
    CHECK(harness_decode(two, 0, 13, &out, &outlen, &err) != 0, "empty input accepted");
    CHECK(strstr(err.msg, "empty input") != NULL, "empty message: %s", err.msg);
    free(two);
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
    CHECK_DONE();
}
