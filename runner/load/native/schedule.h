/*
 * When each send is due, and which interval a moment falls in: runner/load/schedule.py's
 * Schedule and Grid, the same arithmetic in C11 for the native engine (pure, no clock).
 *
 * Send n is due at start + round(n * 1e9 / qps), rounded half to even as Python's round()
 * does, from n * 1e9 converted to a double as Python converts an int (to nearest). Client
 * c owns sends offset + stride * (c + k * clients), k = 0, 1, 2, ... Every answer that
 * starts from a floating-point estimate is settled exactly against due() afterwards, as
 * schedule.py settles it, so both give the same integers whatever the rounding.
 *
 * A ramp (stages) is not worked out here: Python hands its due times over as data
 * (schedule.Ramp.due_times: send n's at dues[n], the last entry the due time of every later
 * send), so send n's due time is looked up and the sends due by a moment are found by a
 * binary search. Every answer below then follows from those two, as schedule.py's do from
 * Ramp.due_ns and Ramp.last_send_by: the ramp's arithmetic has one definition, in Python.
 */
#ifndef SOAK_SCHEDULE_H
#define SOAK_SCHEDULE_H

#include <math.h>
#include <stdint.h>

#define SOAK_NS_PER_S 1000000000LL
#define SOAK_NO_END INT64_MAX /* end_ns of a schedule without an end */

typedef struct soak_schedule {
    int64_t start_ns;
    double qps;      /* the whole run's rate, all shards together */
    int64_t clients; /* this shard's clients */
    int64_t end_ns;  /* sends due at or after this are not sent; SOAK_NO_END: none */
    int64_t stride;  /* shards in the run */
    int64_t offset;  /* this shard's index */
    int64_t *dues;   /* a ramp's due times from start_ns (Ramp.due_times), ndues of them; NULL: qps */
    int64_t ndues;
} soak_schedule;

typedef struct soak_grid {
    int64_t start_ns;
    int64_t interval_ns;
} soak_grid;

/* Python's a // b for b > 0 (rounds towards minus infinity). */
static inline int64_t soak_floordiv(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

/* Schedule.due_ns */
static inline int64_t soak_due(const soak_schedule *s, int64_t n)
{
    if (s->dues != NULL)
        return s->start_ns + s->dues[n <= 0 ? 0 : n < s->ndues ? n : s->ndues - 1];
    double ns;
    if (n > -9000000000LL && n < 9000000000LL) {
        ns = (double)(n * SOAK_NS_PER_S); /* exact in 64 bits; to the nearest double, as float(int) */
    } else {
        __extension__ __int128 wide = (__int128)n * SOAK_NS_PER_S;
        ns = (double)wide;
    }
    return s->start_ns + (int64_t)nearbyint(ns / s->qps); /* nearbyint: half to even, as round() */
}

/* Schedule.send_number */
static inline int64_t soak_send_number(const soak_schedule *s, int64_t client, int64_t k)
{
    return s->offset + s->stride * (client + k * s->clients);
}

/* Schedule.in_run */
static inline int soak_in_run(const soak_schedule *s, int64_t n)
{
    return s->end_ns == SOAK_NO_END || soak_due(s, n) < s->end_ns;
}

/* Schedule.before_end */
static inline int soak_before_end(const soak_schedule *s, int64_t t_ns)
{
    return s->end_ns == SOAK_NO_END || t_ns < s->end_ns;
}

/* Schedule.slot_end_ns: a ramp's last send's slot ends with the run (it may make no send n + 1 due). */
static inline int64_t soak_slot_end(const soak_schedule *s, int64_t n)
{
    int64_t next = soak_due(s, n + 1);
    return s->dues != NULL && s->end_ns != SOAK_NO_END && s->end_ns < next ? s->end_ns : next;
}

/* The estimate both searches below start from: floor((t - start) * qps / 1e9); with a ramp,
 * exact (Ramp.last_send_by): its highest n due by t, found among its due times. */
static inline int64_t soak_estimate(const soak_schedule *s, int64_t t_ns)
{
    if (s->dues != NULL) {
        int64_t lo = -1, hi = s->ndues - 1; /* dues[lo] <= t < dues[hi] (dues[-1]: minus infinity) */
        if (t_ns - s->start_ns >= s->dues[hi])
            return hi - 1; /* as Ramp.last_send_by past its end (the last entry is beyond any run's end) */
        while (hi - lo > 1) {
            int64_t mid = lo + (hi - lo) / 2;
            if (s->dues[mid] <= t_ns - s->start_ns)
                lo = mid;
            else
                hi = mid;
        }
        return lo;
    }
    return (int64_t)floor((double)(t_ns - s->start_ns) * s->qps / (double)SOAK_NS_PER_S);
}

/* Schedule.last_send_by: the run's highest send number due at or before t (-1 if none). */
static inline int64_t soak_last_send_by(const soak_schedule *s, int64_t t_ns)
{
    int64_t n = soak_estimate(s, t_ns);
    while (n >= 0 && soak_due(s, n) > t_ns)
        n--;
    while (soak_due(s, n + 1) <= t_ns)
        n++;
    return n > -1 ? n : -1;
}

/* Schedule.last_due_by: the client's highest k due at or before now (-1 if none). */
static inline int64_t soak_last_due_by(const soak_schedule *s, int64_t client, int64_t now_ns)
{
    int64_t n = soak_estimate(s, now_ns);
    int64_t k = soak_floordiv(soak_floordiv(n - s->offset, s->stride) - client, s->clients);
    while (k >= 0 && soak_due(s, soak_send_number(s, client, k)) > now_ns)
        k--;
    while (soak_due(s, soak_send_number(s, client, k + 1)) <= now_ns)
        k++;
    return k > -1 ? k : -1;
}

/* Schedule.end_k: the client's first k not in the run; INT64_MAX without an end. */
static inline int64_t soak_end_k(const soak_schedule *s, int64_t client)
{
    if (s->end_ns == SOAK_NO_END)
        return INT64_MAX;
    return soak_last_due_by(s, client, s->end_ns - 1) + 1;
}

/* Schedule.last_in_run, given the client's end_k: its highest k from `k` on that is due
 * by t and in the run (k - 1 if none). */
static inline int64_t soak_last_in_run(const soak_schedule *s, int64_t client, int64_t end_k, int64_t k,
                                       int64_t t_ns)
{
    int64_t last = soak_last_due_by(s, client, t_ns);
    if (last > end_k - 1)
        last = end_k - 1;
    return last > k - 1 ? last : k - 1;
}

/* Schedule.catch_up: which k a closed-loop client sends next (returned) and how many it
 * skips (*skipped), after its previous request ended at free_ns and it got round to it at now. */
static inline int64_t soak_catch_up(const soak_schedule *s, int64_t client, int64_t end_k, int64_t k,
                                    int64_t free_ns, int64_t now_ns, int64_t *skipped)
{
    int64_t last;
    if (!soak_before_end(s, now_ns)) {
        last = soak_last_in_run(s, client, end_k, k, now_ns);
        *skipped = last < k ? 0 : last + 1 - k;
        return last < k ? k : last + 1;
    }
    last = soak_last_in_run(s, client, end_k, k, free_ns < now_ns ? free_ns : now_ns);
    *skipped = last < k ? 0 : last - k;
    return last < k ? k : last;
}

/* Grid.end_of */
static inline int64_t soak_grid_end(const soak_grid *g, int64_t k)
{
    return g->start_ns + (k + 1) * g->interval_ns;
}

/* Grid.index: moments before the start count in interval 0. */
static inline int64_t soak_grid_index(const soak_grid *g, int64_t t_ns)
{
    int64_t k = soak_floordiv(t_ns - g->start_ns, g->interval_ns);
    return k > 0 ? k : 0;
}

#endif /* SOAK_SCHEDULE_H */
