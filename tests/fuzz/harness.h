/*
 * harness.h - decode a whole weir stream or LZ4 data held in memory with the
 * engine's own decoder (decode.c, the loops the reader runs), through a sink
 * that decodes and verifies each block inline where the engine hands it to
 * its workers.  Shared by the unit tests, the libFuzzer target and the
 * corpus replay driver.
 */
#ifndef WEIR_TEST_HARNESS_H
#define WEIR_TEST_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "weir/error.h"

/* Returns 0 and the decoded bytes in *out (malloc'd, caller frees), or -1
 * with *err.  chunk: the most bytes one read of the source returns.  Holes
 * come out as zeros, as long as everything fits in HARNESS_OUT_MAX bytes
 * (a larger output is an error, not a crash). */
#define HARNESS_OUT_MAX (64u << 20)
int harness_decode(const uint8_t *data, size_t size, size_t chunk, uint8_t **out,
                   size_t *outlen, struct weir_error *err);
/* The same, as if the bytes came out of sealed records (sealed): only then
 * may a stream leave its blocks' checksums out (CODEC_HEADER_SEALED). */
int harness_decode_from(const uint8_t *data, size_t size, size_t chunk, bool sealed,
                        uint8_t **out, size_t *outlen, struct weir_error *err);

/* Build a weir stream of data in memory: blocks of block bytes (at most
 * CODEC_BLOCK_MAX), LZ4 level (0 stores raw).  Returns a malloc'd buffer
 * and its size in *len. */
uint8_t *harness_encode(const uint8_t *data, size_t size, size_t block, int level,
                        size_t *len);
/* A version 2 weir stream of data with holes: every run of zero grains
 * (sparse.h, as --sparse finds them) is a hole record, the rest is in
 * blocks of at most block bytes, cut where the holes are. */
uint8_t *harness_encode_sparse(const uint8_t *data, size_t size, size_t block, int level,
                               size_t *len);
/* The same data as one LZ4 frame, as weir -z writes files: from the same
 * pieces, with the content size in its header when sized. */
uint8_t *harness_encode_lz4(const uint8_t *data, size_t size, size_t block, int level,
                            bool sized, size_t *len);

#endif
