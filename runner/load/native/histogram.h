/*
 * Latency histograms for the native engine, in HdrHistogram's own counts layout (lowest
 * value 1, 3 significant digits), so Python's LatencyHistogram takes the counts array as
 * it is (LatencyHistogram.from_counts) instead of recording every value again.
 *
 * runner/stats/histogram.py's slot(): values below 2048 have a slot each; above, bucket b
 * holds 1024 slots 2**b wide. Exact count, min, max, sum and sum of squares are kept beside
 * the counts, as LatencyHistogram keeps them; the sums in 128 bits, which no run overflows.
 */
#ifndef SOAK_HISTOGRAM_H
#define SOAK_HISTOGRAM_H

#include <stdint.h>
#include <stdlib.h>

#define SOAK_HIGHEST_NS 3600000000000LL /* runner.stats.histogram.HIGHEST_NS: an hour */

__extension__ typedef unsigned __int128 soak_u128;

typedef struct soak_hist {
    uint64_t *counts; /* `len` slots, NULL until allocated; calloc'd from mmap (runner.run.memory's
                       * steady_heap pins glibc's threshold), so untouched pages cost nothing */
    uint32_t len;     /* hdrh's counts_len for `highest` */
    int64_t highest;  /* values above are recorded as this, as LatencyHistogram clamps them */
    uint64_t count;
    int64_t min, max; /* exact; 0 while empty */
    soak_u128 sum, sum_sq;
} soak_hist;

/* histogram.slot(): the index of a value's count. */
static inline uint32_t soak_slot(int64_t value)
{
    int bucket = 64 - __builtin_clzll((uint64_t)value | 2047u) - 11;
    return (uint32_t)((((int64_t)bucket + 1) << 10) + (value >> bucket) - 1024);
}

/* hdrh's counts_len for values 1 .. highest at 3 digits (its get_bucket_count). */
static inline uint32_t soak_counts_len(int64_t highest)
{
    int64_t smallest_untrackable = 2048;
    uint32_t buckets = 1;
    while (smallest_untrackable <= highest) {
        if (smallest_untrackable > INT64_MAX / 2) {
            buckets++;
            break;
        }
        smallest_untrackable <<= 1;
        buckets++;
    }
    return (buckets + 1) * 1024;
}

/* Make `h` an empty histogram of values up to `highest`, its counts allocated; 0, or -1 if
 * there was no memory (h is then empty and has no counts). */
static inline int soak_hist_init(soak_hist *h, int64_t highest)
{
    h->len = soak_counts_len(highest);
    h->highest = highest;
    h->count = 0;
    h->min = h->max = 0;
    h->sum = h->sum_sq = 0;
    h->counts = calloc(h->len, sizeof *h->counts);
    return h->counts != NULL ? 0 : -1;
}

static inline void soak_hist_free(soak_hist *h)
{
    free(h->counts);
    h->counts = NULL;
}

/* LatencyHistogram.record(value). */
static inline void soak_hist_record(soak_hist *h, int64_t value)
{
    if (value < 0)
        value = 0;
    else if (value > h->highest)
        value = h->highest;
    h->counts[soak_slot(value)]++;
    if (h->count == 0 || value < h->min)
        h->min = value;
    if (value > h->max)
        h->max = value;
    h->count++;
    soak_u128 v = (uint64_t)value; /* not negative here */
    h->sum += v;
    h->sum_sq += v * v;
}

#endif /* SOAK_HISTOGRAM_H */
