/*
 * libFuzzer harness for a hashed response body (runner/load/native/body.c, zlib underneath) as
 * the native engine feeds it: response.c's body sink, then a step at a time while one is
 * pending, as core.c's read_response and step_bodies do. Built with ASan and UBSan
 * (tests/integration/test_native_fuzz.py):
 *
 *     clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -I runner/load/native \
 *         tests/fuzz/fuzz_body.c runner/load/native/body.c runner/load/native/response.c -lz -o fuzz_body
 *
 * An input is two control bytes, then the bytes a server sends for a GET:
 *     byte 0: bit 0 gzip bodies are inflated (compress), bit 1 small bounds (a step of 64
 *             bytes, 4 KiB at most inflated) so that short inputs reach them
 *     byte 1: where the bytes are cut into reads (0: one read; else a seed for the cuts)
 * Each input is read twice, in those reads and in one read; every step is checked (at most
 * `step` bytes, the total never past the bound plus a step), and the two answers must agree:
 * the same hash, or the same failure (but where one read reached the bound in the step in
 * which zlib refuses what follows, which the other reached in two: as Python's steps do).
 * A body hashed whole is checked against zlib inflating it in one call.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "body.h"
#include "response.h"

#define REQUIRE(cond)                                                                     \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "fuzz_body.c:%d: broken: %s\n", __LINE__, #cond);             \
            abort();                                                                      \
        }                                                                                 \
    } while (0)

static unsigned char out[65536];

struct read_body {
    soak_response r;
    soak_body b;
    unsigned char *plain; /* the body's bytes as they came, for the oracle */
    size_t plain_len;
};

static void sink(void *ctx, const unsigned char *data, size_t len)
{
    struct read_body *rb = ctx;
    REQUIRE(len > 0);
    if (!rb->b.begun)
        soak_body_begin(&rb->b, rb->r.gzip);
    memcpy(rb->plain + rb->plain_len, data, len);
    rb->plain_len += len;
    soak_body_feed(&rb->b, data, len);
}

static void steps(soak_body *b)
{
    while (soak_body_pending(b)) {
        uint64_t before = b->inflated;
        soak_body_step(b);
        if (b->error == SOAK_BODY_OK || b->error == SOAK_BODY_TOO_LARGE)
            REQUIRE(b->inflated - before <= b->step);
        REQUIRE(b->inflated <= b->max_inflated + b->step);
    }
}

static uint32_t next_cut(uint32_t *seed)
{
    *seed ^= *seed << 13, *seed ^= *seed >> 17, *seed ^= *seed << 5;
    return *seed;
}

/* Read `data` in the reads `seed` cuts it into (0: one); the body's error, its hash in *hash. */
static int read_all(const uint8_t *data, size_t size, int inflate, int small, uint32_t seed, struct read_body *rb)
{
    soak_body_setup(&rb->b, small ? 4096 : 16u << 20, small ? 64 : sizeof out, out, inflate);
    soak_response_init(&rb->r, 0, 100 * 1024);
    rb->r.body_sink = sink;
    rb->r.body_ctx = rb;
    rb->plain_len = 0;
    size_t at = 0;
    while (at < size && rb->r.outcome == SOAK_PENDING && rb->b.error == SOAK_BODY_OK) {
        size_t n = seed ? 1 + next_cut(&seed) % (size - at) : size - at;
        soak_response_feed(&rb->r, data + at, n);
        at += n;
        steps(&rb->b); /* core.c reads no more while a body is pending */
    }
    if (rb->r.outcome == SOAK_PENDING && rb->b.error == SOAK_BODY_OK)
        soak_response_eof(&rb->r);
    if (rb->r.outcome == SOAK_DONE && rb->b.error == SOAK_BODY_OK)
        soak_body_end(&rb->b);
    return rb->r.outcome == SOAK_FAILED ? -1 : rb->b.error;
}

/* The hash of the whole body inflated at once (zlib's one call), within the bound; -1 if it is no
 * whole gzip stream within it. */
static int oracle(const struct read_body *rb, uint64_t *hash)
{
    static unsigned char all[(16u << 20) + 1];
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
        return -1;
    z.next_in = rb->plain;
    z.avail_in = (uInt)rb->plain_len;
    z.next_out = all;
    z.avail_out = (uInt)(rb->b.max_inflated + 1);
    int rc = inflate(&z, Z_FINISH);
    size_t n = (size_t)(rb->b.max_inflated + 1) - z.avail_out;
    inflateEnd(&z);
    if (rc != Z_STREAM_END || n > rb->b.max_inflated)
        return -1;
    *hash = soak_fnv1a64(SOAK_FNV_OFFSET, all, n);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct read_body cut, whole;
    if (size < 2)
        return 0;
    int inflate = data[0] & 1, small = (data[0] >> 1) & 1;
    uint32_t seed = data[1];
    data += 2, size -= 2;
    cut.plain = realloc(cut.plain, size + 1);
    whole.plain = realloc(whole.plain, size + 1);
    int a = read_all(data, size, inflate, small, seed ? seed * 2654435761u : 0, &cut);
    int b = read_all(data, size, inflate, small, 0, &whole);
    if (a >= 0 && b >= 0) {
        int bound_or_refused = (a == SOAK_BODY_TOO_LARGE && b == SOAK_BODY_NOT_GZIP) ||
                               (b == SOAK_BODY_TOO_LARGE && a == SOAK_BODY_NOT_GZIP);
        REQUIRE(a == b || bound_or_refused);
        if (a == SOAK_BODY_OK && whole.r.outcome == SOAK_DONE && cut.r.outcome == SOAK_DONE) {
            REQUIRE(cut.b.hash == whole.b.hash);
            uint64_t expected = SOAK_FNV_OFFSET;
            if (whole.b.gzip) {
                REQUIRE(oracle(&whole, &expected) == 0);
            } else {
                expected = soak_fnv1a64(expected, whole.plain, whole.plain_len);
            }
            REQUIRE(whole.b.hash == expected);
        }
    }
    soak_body_free(&cut.b);
    soak_body_free(&whole.b);
    return 0;
}
