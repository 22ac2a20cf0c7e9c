/* The hash of a sampled response body (see body.h): bodyhash.BodyHash in C. */
#include "body.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define GZIP_ONLY (16 + MAX_WBITS) /* bodyhash._GZIP_ONLY: a gzip header and trailer, nothing else */

uint64_t soak_fnv1a64(uint64_t h, const unsigned char *data, size_t len)
{
    for (size_t i = 0; i < len; i++)
        h = (h ^ data[i]) * SOAK_FNV_PRIME;
    return h;
}

void soak_body_setup(soak_body *b, uint64_t max_inflated, uint32_t step, unsigned char *out, int inflate)
{
    memset(b, 0, sizeof *b);
    b->inflate = inflate != 0;
    b->max_inflated = max_inflated;
    b->step = step;
    b->out = out;
    soak_body_reset(b);
}

void soak_body_reset(soak_body *b)
{
    b->hash = SOAK_FNV_OFFSET;
    b->inflated = 0;
    b->begun = b->gzip = b->eof = b->full = 0;
    b->empty = 1;
    b->error = SOAK_BODY_OK;
    b->reason = NULL;
    b->kept_len = 0;
}

int soak_body_begin(soak_body *b, int gzip)
{
    b->begun = 1;
    if (!gzip || !b->inflate)
        return SOAK_BODY_OK;
    z_stream *z = b->z;
    if (z == NULL) {
        z = calloc(1, sizeof *z);
        if (z == NULL || inflateInit2(z, GZIP_ONLY) != Z_OK) {
            free(z);
            return b->error = SOAK_BODY_NO_MEMORY;
        }
        b->z = z;
    } else if (inflateReset(z) != Z_OK) {
        return b->error = SOAK_BODY_NO_MEMORY;
    }
    z->avail_in = 0;
    b->gzip = 1;
    return SOAK_BODY_OK;
}

int soak_body_feed(soak_body *b, const unsigned char *data, size_t len)
{
    if (b->error != SOAK_BODY_OK || len == 0)
        return b->error;
    if (!b->gzip) {
        b->hash = soak_fnv1a64(b->hash, data, len);
        return SOAK_BODY_OK;
    }
    if (b->eof)
        return SOAK_BODY_OK;
    b->empty = 0;
    z_stream *z = b->z;
    size_t left = z->avail_in; /* what zlib has not taken in yet, at the end of the kept bytes */
    if (left + len > b->kept_cap || left + len > UINT32_MAX) {
        size_t cap = left + len > 65536 ? left + len : 65536;
        unsigned char *grown = cap <= UINT32_MAX ? malloc(cap) : NULL;
        if (grown == NULL)
            return b->error = SOAK_BODY_NO_MEMORY;
        if (left)
            memcpy(grown, z->next_in, left);
        free(b->kept);
        b->kept = grown;
        b->kept_cap = cap;
    } else if (left && z->next_in != b->kept) {
        memmove(b->kept, z->next_in, left);
    }
    memcpy(b->kept + left, data, len);
    b->kept_len = left + len;
    z->next_in = b->kept;
    z->avail_in = (uInt)b->kept_len;
    return SOAK_BODY_OK;
}

int soak_body_pending(const soak_body *b)
{
    return b->gzip && !b->eof && b->error == SOAK_BODY_OK && (((z_stream *)b->z)->avail_in > 0 || b->full);
}

int soak_body_step(soak_body *b)
{
    z_stream *z = b->z;
    if (!soak_body_pending(b))
        return b->error;
    z->next_out = b->out;
    z->avail_out = b->step;
    uInt before = z->avail_in;
    int rc = inflate(z, Z_SYNC_FLUSH);
    if (rc == Z_MEM_ERROR)
        return b->error = SOAK_BODY_NO_MEMORY;
    if (rc == Z_BUF_ERROR && z->avail_out == b->step && z->avail_in == before && before > 0)
        rc = Z_STREAM_ERROR; /* no progress with input and room for output: never, but never loop on it */
    if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) { /* Python's zlib_error() wording */
        b->reason = z->msg != NULL ? z->msg : rc == Z_DATA_ERROR ? "invalid input data" : "inconsistent stream state";
        return b->error = SOAK_BODY_NOT_GZIP;
    }
    size_t out = b->step - z->avail_out;
    b->full = z->avail_out == 0;
    b->inflated += out;
    if (b->inflated > b->max_inflated)
        return b->error = SOAK_BODY_TOO_LARGE;
    b->hash = soak_fnv1a64(b->hash, b->out, out);
    if (rc == Z_STREAM_END) {
        b->eof = 1; /* anything after the gzip stream is ignored */
        z->avail_in = 0;
    }
    return SOAK_BODY_OK;
}

int soak_body_end(soak_body *b)
{
    if (b->error == SOAK_BODY_OK && b->gzip && !b->eof && !b->empty)
        b->error = SOAK_BODY_CUT;
    return b->error;
}

void soak_body_free(soak_body *b)
{
    if (b->z != NULL) {
        inflateEnd(b->z);
        free(b->z);
        b->z = NULL;
    }
    free(b->kept);
    b->kept = NULL;
    b->kept_cap = 0;
}
