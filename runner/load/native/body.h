/*
 * The hash of a sampled response body for the native engine: runner/load/bodyhash.py's
 * BodyHash in C (pure C11 and zlib, no CPython).
 *
 * FNV-1a 64 of the body as its application sees it: a body whose final head says
 * `Content-Encoding: gzip` (or x-gzip), on a run with `compress`, is inflated first, so the
 * hash does not depend on whether the server compressed that response. Inflating is held to
 * the bounds bodyhash.py holds it to, given by the caller as data (its INFLATE_STEP and
 * MAX_INFLATED_BYTES), the same three ways: soak_body_feed hashes a plain piece at once but
 * only keeps a gzip one; soak_body_step inflates at most `step` bytes of what is kept into
 * the caller's buffer and hashes them, and the caller takes one step at a time, doing its
 * other work in between (a 64 KiB read of a gzip bomb inflates to 64 MiB: hundreds of
 * milliseconds of a blocked loop at once, about half a millisecond a step); and a body that
 * inflates past `max_inflated` fails (SOAK_BODY_TOO_LARGE) at the step that crosses it. What a
 * failure is called (its text) is the caller's, from Python; this says only which failure it
 * was, and zlib's reason for SOAK_BODY_NOT_GZIP.
 *
 * One soak_body per connection: soak_body_setup once, soak_body_reset for each body,
 * soak_body_feed with each piece of it as the response parser hands it over, soak_body_step
 * while soak_body_pending, soak_body_end when the response is whole. zlib's stream and the
 * buffer of kept bytes are made at the first gzip body and kept for the next ones
 * (inflateReset): nothing is allocated per request. What is kept is at most one read: the
 * caller reads no more while a body is pending.
 */
#ifndef SOAK_BODY_H
#define SOAK_BODY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SOAK_FNV_OFFSET 0xcbf29ce484222325u /* runner.load.fnv.OFFSET_BASIS */
#define SOAK_FNV_PRIME 0x100000001b3u       /* ... PRIME */

/* Why a body could not be read as its headers say (bodyhash.BodyError's cases). */
enum soak_body_error {
    SOAK_BODY_OK = 0,
    SOAK_BODY_NOT_GZIP,  /* zlib refused it: `reason` is zlib's own words */
    SOAK_BODY_TOO_LARGE, /* it inflates past max_inflated */
    SOAK_BODY_CUT,       /* the body ended before its gzip stream did */
    SOAK_BODY_NO_MEMORY  /* zlib could not have its state */
};

typedef struct soak_body {
    uint64_t hash;          /* FNV-1a 64 of what was hashed so far */
    uint64_t inflated;      /* bytes inflated so far */
    uint64_t max_inflated;  /* bodyhash.MAX_INFLATED_BYTES */
    uint32_t step;          /* bodyhash.INFLATE_STEP: the size of `out` */
    uint8_t inflate;        /* a body that says gzip is inflated (the run's `compress`) */
    uint8_t begun;          /* soak_body_begin was called for this body */
    uint8_t gzip;           /* this body is inflated */
    uint8_t eof;            /* its gzip stream has ended (what follows is ignored) */
    uint8_t empty;          /* no byte of it came yet */
    uint8_t full;           /* the last step filled its output: zlib may hold more of it */
    uint8_t error;          /* enum soak_body_error; once set, nothing more is done */
    const char *reason;     /* zlib's reason, for SOAK_BODY_NOT_GZIP */
    unsigned char *out;     /* the caller's buffer of `step` bytes */
    void *z;                /* zlib's z_stream, made at the first gzip body (NULL before) */
    unsigned char *kept;    /* compressed bytes not inflated yet: zlib's input (bodyhash's _tail) */
    size_t kept_len, kept_cap;
} soak_body;

/* FNV-1a 64 of `len` bytes, going on from `h` (SOAK_FNV_OFFSET for a fresh hash). */
uint64_t soak_fnv1a64(uint64_t h, const unsigned char *data, size_t len);

/* Ready `b` once, with the bounds and a buffer of `step` bytes (shared by every soak_body of
 * one thread: a body is inflated into it and hashed before the call returns); `inflate`: gzip
 * bodies are inflated (compress), else every body is hashed as it came. */
void soak_body_setup(soak_body *b, uint64_t max_inflated, uint32_t step, unsigned char *out, int inflate);

/* Ready `b` for a new body (soak_body_begin comes with its first piece, or never). */
void soak_body_reset(soak_body *b);

/* The body's first piece is here: inflate it if its head said gzip (`gzip`, bodyhash.is_gzip)
 * and `b` inflates, else hash it as it is. SOAK_BODY_OK, or SOAK_BODY_NO_MEMORY (also kept in
 * b->error). */
int soak_body_begin(soak_body *b, int gzip);

/* The next piece of the body, as it came on the wire: hashed now if plain, kept for
 * soak_body_step if gzip; after a failure, or after the end of its gzip stream, ignored.
 * Returns b->error (SOAK_BODY_NO_MEMORY if it could not be kept). */
int soak_body_feed(soak_body *b, const unsigned char *data, size_t len);

/* Whether soak_body_step has work left: kept bytes not yet inflated and hashed (BodyHash.pending). */
int soak_body_pending(const soak_body *b);

/* Inflate and hash at most `step` bytes of what was kept (BodyHash.step). Returns b->error. */
int soak_body_step(soak_body *b);

/* The body is whole and nothing is pending: its hash is b->hash, unless this returns a failure
 * (one met before, or SOAK_BODY_CUT: a gzip body that ended before its stream did; no body at
 * all is an empty body, whatever the headers say). */
int soak_body_end(soak_body *b);

/* Free what `b` holds (zlib's state). */
void soak_body_free(soak_body *b);

#ifdef __cplusplus
}
#endif

#endif /* SOAK_BODY_H */
