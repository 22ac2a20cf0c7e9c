/*
 * libFuzzer harness for the native response parser (runner/load/native/response.c), built
 * with AddressSanitizer and UBSan (docs/development.md; tests/integration/test_native_fuzz.py):
 *
 *     clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
 *         -I runner/load/native tests/fuzz/fuzz_response.c runner/load/native/response.c -o fuzz_response
 *
 * An input is two control bytes, then the bytes a server sends:
 *     byte 0: bit 0 the request was HEAD, bit 1 the server closes after the bytes,
 *             bit 2 a small bound on heads (so that inputs this short reach it),
 *             bit 3 the value of the backendHeader X-Soak-Backend is kept (BACKEND)
 *     byte 1: where the bytes are cut into reads (0: one read; else a seed for the cuts)
 * Each input is parsed three times, in those reads, in one read, and a byte per read, and
 * every feed is checked against what the parser promises (see check_* below); the answer
 * must not depend on how the bytes were cut, except where a bound is checked per read.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "response.h"

#define SMALL_BOUND 64u
#define BIG_BOUND 100u * 1024u
static const char BACKEND[] = "x-soak-backend"; /* the pallet's backendHeader, in lower case */

/* A failed promise: say which, and crash, so that libFuzzer keeps the input. */
#define REQUIRE(cond)                                                                     \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "fuzz_response.c:%d: broken: %s\n", __LINE__, #cond);         \
            abort();                                                                      \
        }                                                                                 \
    } while (0)

/* What a parse ended with, to compare the parses of one input. */
struct answer {
    soak_response r;
    uint64_t head_at, end_at; /* offsets in the whole stream, UINT64_MAX: never */
    char text[512];
};

static uint32_t next_cut(uint32_t *seed)
{
    *seed ^= *seed << 13, *seed ^= *seed >> 17, *seed ^= *seed << 5; /* xorshift32 */
    return *seed;
}

/* The promises of one feed of `len` bytes that returned `used`, `before` being the state before it. */
static void check_feed(const soak_response *before, const soak_response *r, size_t len, size_t used, uint64_t fed)
{
    REQUIRE(used <= len);
    if (before->outcome != SOAK_PENDING) { /* an ended response takes nothing, changes nothing */
        REQUIRE(used == 0 && r->outcome == before->outcome && r->events == 0);
        REQUIRE(r->status == before->status && r->body_bytes == before->body_bytes &&
                r->wire_bytes == before->wire_bytes && r->header_bytes == before->header_bytes);
        return;
    }
    REQUIRE(r->wire_bytes == before->wire_bytes + used);
    REQUIRE(r->body_bytes >= before->body_bytes && r->body_bytes - before->body_bytes <= used);
    REQUIRE(r->wire_bytes <= fed && r->body_bytes <= r->wire_bytes);
    if (r->outcome == SOAK_PENDING)
        REQUIRE(used == len); /* a response not yet over takes every byte */
    if (r->events & SOAK_EVENT_HEAD)
        REQUIRE(!before->head_done && r->head_done && r->head_end <= used);
    else
        REQUIRE(r->head_done == before->head_done);
    if (r->events & SOAK_EVENT_DONE)
        REQUIRE(r->outcome == SOAK_DONE && r->message_end == used && r->head_done);
    if (r->head_done && (r->events & SOAK_EVENT_HEAD) && (r->events & SOAK_EVENT_DONE))
        REQUIRE(r->head_end <= r->message_end);
}

/* The promises of an ending, whichever way it came. */
static void check_end(const soak_response *r, int head_request)
{
    char text[512];
    int n = soak_response_error(r, text, sizeof text);
    REQUIRE(n >= 0 && (size_t)n < sizeof text);
    REQUIRE(r->server_len <= SOAK_SERVER_MAX && (r->server_cut == 0 || r->server_len == SOAK_SERVER_MAX));
    REQUIRE(r->backend_len <= SOAK_BACKEND_MAX && (r->backend_name_len || r->backend_len == 0));
    if (r->backend_len) /* trimmed at its start: no SP, HT, NEL or NBSP */
        REQUIRE(r->backend[0] != ' ' && r->backend[0] != '\t' && (unsigned char)r->backend[0] != 0x85 &&
                (unsigned char)r->backend[0] != 0xa0);
    switch (r->outcome) {
    case SOAK_DONE:
        REQUIRE(r->head_done && r->status >= 200 && r->status <= 999 && r->kind == SOAK_KIND_NONE && n == 0);
        REQUIRE(r->header_bytes <= r->wire_bytes);
        /* After HEAD all that was read counts as head (the response has no body, whatever its head
         * announced); else head and body add up. */
        REQUIRE(r->header_bytes + (head_request ? 0 : r->body_bytes) == r->wire_bytes);
        break;
    case SOAK_FAILED:
        REQUIRE(r->kind != SOAK_KIND_NONE && r->error != SOAK_ERR_NONE && n > 0);
        REQUIRE(r->error != SOAK_ERR_INVALID || r->reason != NULL);
        break;
    default:
        REQUIRE(r->outcome == SOAK_PENDING && r->kind == SOAK_KIND_NONE);
        if (r->head_done)
            REQUIRE(r->status >= 200);
    }
}

enum cuts { ONE_READ, BYTE_PER_READ, SEEDED };

/* Parse `data` cut into reads as `cuts` says (SEEDED: from `seed`). */
static void parse(const uint8_t *data, size_t size, int head_request, int eof, int backend, uint32_t bound,
                  enum cuts cuts, uint32_t seed, struct answer *a)
{
    soak_response *r = &a->r;
    size_t at = 0;
    a->head_at = a->end_at = UINT64_MAX;
    r->backend_name = NULL, r->backend_name_len = 0;
    if (backend)
        REQUIRE(soak_response_want_backend(r, BACKEND, sizeof BACKEND - 1) == 0);
    soak_response_init(r, head_request, bound);
    REQUIRE(r->backend_len == 0 && r->backend_name_len == (backend ? sizeof BACKEND - 1 : 0));
    while (at < size || (at == 0 && size == 0)) {
        size_t len = size - at;
        if (cuts == BYTE_PER_READ && len > 1) {
            len = 1;
        } else if (cuts == SEEDED) {
            size_t n = next_cut(&seed) % 64 + 1;
            len = n < len ? n : len;
        }
        soak_response before = *r;
        /* Each read from its own allocation, exactly as long, so ASan sees any read past it. */
        unsigned char *piece = malloc(len ? len : 1);
        REQUIRE(piece != NULL);
        memcpy(piece, data + at, len);
        size_t used = soak_response_feed(r, piece, len);
        free(piece);
        check_feed(&before, r, len, used, at + len);
        if (r->events & SOAK_EVENT_HEAD)
            a->head_at = at + r->head_end;
        if (r->events & SOAK_EVENT_DONE)
            a->end_at = at + r->message_end;
        at += len;
        if (len == 0)
            break;
    }
    if (eof) {
        soak_response before = *r;
        soak_response_eof(r);
        REQUIRE(r->outcome != SOAK_PENDING && r->wire_bytes == before.wire_bytes);
        if (before.outcome != SOAK_PENDING) /* the close changes nothing after an ending */
            REQUIRE(r->outcome == before.outcome && r->error == before.error && r->events == 0 &&
                    r->header_bytes == before.header_bytes && r->keep_alive == before.keep_alive);
        if (r->events & SOAK_EVENT_DONE)
            a->end_at = size;
    }
    check_end(r, head_request);
    soak_response_error(r, a->text, sizeof a->text);
}

/* Two parses of the same bytes must agree on everything the caller reads. */
static void check_same(const struct answer *x, const struct answer *y)
{
    REQUIRE(x->r.outcome == y->r.outcome && x->r.kind == y->r.kind && x->r.error == y->r.error);
    REQUIRE(strcmp(x->text, y->text) == 0);
    REQUIRE(x->r.status == y->r.status && x->r.head_done == y->r.head_done);
    REQUIRE(x->r.body_bytes == y->r.body_bytes && x->r.wire_bytes == y->r.wire_bytes);
    REQUIRE(x->r.header_bytes == y->r.header_bytes && x->r.keep_alive == y->r.keep_alive);
    REQUIRE(x->r.head_done == 0 || x->r.content_length == y->r.content_length);
    REQUIRE(x->r.gzip == y->r.gzip && x->r.server_len == y->r.server_len && x->r.server_cut == y->r.server_cut);
    REQUIRE(memcmp(x->r.server, y->r.server, x->r.server_len) == 0);
    REQUIRE(x->r.backend_len == y->r.backend_len && memcmp(x->r.backend, y->r.backend, x->r.backend_len) == 0);
    REQUIRE(x->head_at == y->head_at && x->end_at == y->end_at);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct answer cut, whole, bytewise;
    if (size < 2)
        return 0;
    int head_request = data[0] & 1, eof = data[0] >> 1 & 1, backend = data[0] >> 3 & 1;
    uint32_t bound = data[0] & 4 ? SMALL_BOUND : BIG_BOUND;
    enum cuts cuts = data[1] == 0 ? ONE_READ : data[1] == 1 ? BYTE_PER_READ : SEEDED;
    uint32_t seed = data[1] * 2654435761u;
    data += 2, size -= 2;
    parse(data, size, head_request, eof, backend, bound, cuts, seed, &cut);
    /* With a bound no input reaches, how the bytes were cut cannot matter. */
    if (size < BIG_BOUND) {
        parse(data, size, head_request, eof, backend, UINT32_MAX, cuts, seed, &cut);
        parse(data, size, head_request, eof, backend, UINT32_MAX, ONE_READ, 0, &whole);
        parse(data, size, head_request, eof, backend, UINT32_MAX, BYTE_PER_READ, 0, &bytewise);
        check_same(&cut, &whole);
        check_same(&whole, &bytewise);
    }
    /* The parser takes any header name, the ones it reads itself too, and refuses anything that
     * is not one (lower case, as Python hands it over). */
    if (size == 0) {
        soak_response probe;
        REQUIRE(soak_response_want_backend(&probe, "server", 6) == 0);
        REQUIRE(soak_response_want_backend(&probe, "content-length", 14) == 0);
        REQUIRE(soak_response_want_backend(&probe, "x soak", 6) < 0);
        REQUIRE(soak_response_want_backend(&probe, "X-Soak", 6) < 0);
    }
    return 0;
}
