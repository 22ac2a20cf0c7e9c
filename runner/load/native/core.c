/*
 * The native engine's loop (see core.h): runner/load/engine.py's clients, the HTTP/1.1
 * connections they send on (dialing, writing, reading, keep-alive, deadlines) and the
 * recorder's filing (runner/stats/recorder.py), in one thread with no Python in it.
 *
 * The thread holds e->lock while it handles a batch (what one epoll_wait returned, then
 * the clients whose turn it is to send) and lets go of it while it waits, so other
 * threads stop it, cancel it and take intervals between two batches. Everything that
 * changes the engine's state happens under that lock, whichever thread does it.
 *
 * Order within a batch, as wrk does it: every read first, then the writes of the clients
 * whose next send is due, so one wake-up answers many responses.
 */
#define _GNU_SOURCE
#include "core.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

const char *const soak_kind_names[SOAK_KINDS] = {
    "dns", "refused", "connect", "timeout", "reset", "closed", "protocol", "tls", "cancelled", "other",
};
const char *const soak_tls_versions[SOAK_TLS_VERSIONS] = {"TLSv1.2", "TLSv1.3"};

#define READ_SIZE 65536        /* most bytes one read takes: a big body in few syscalls */
#define EVENTS 256             /* events taken per epoll_wait */
#define CLOCK_PAIR_NS 20000    /* two monotonic readings further apart: the wall one between is no use */
#define MESSAGE_CHARS 160      /* failures.MESSAGE_CHARS */
#define TIMER_TAG 0            /* epoll data of the timerfd ... */
#define WAKE_TAG 1             /* ... and of the eventfd other threads wake the loop with */

static const char CANCELLED_TEXT[] = "cancelled: still in flight when the run stopped";
static const char RESET_TEXT[] = "connection reset by peer";

enum conn_state { CONN_FREE, CONN_CONNECTING, CONN_HANDSHAKE, CONN_BUSY, CONN_IDLE };
/* CL_TAKING: a run's client waiting for its warm-up's client to hand its connections on (give) */
enum client_state { CL_WAIT, CL_READY, CL_BUSY, CL_ROOM, CL_DONE, CL_TAKING };

/* A connection slot; while it carries a request, the request's state too. */
typedef struct conn {
    int fd;
    uint8_t state;          /* enum conn_state */
    uint8_t out_watched;    /* EPOLLOUT asked for (a request not yet all written) */
    uint8_t kernel_clock;   /* Result.kernel_clock */
    uint8_t new_conn;       /* the request opened this connection (Result.connected_ns set) */
    uint8_t last;           /* the connection's last request (Lifetime.last): written with Connection: close */
    uint8_t made;           /* it is ready (connected, and over TLS shaken hands): counted opened, and closed when
                             * it is (Tally.connections_*) */
    uint8_t tls_over;       /* its TLS failed, or the server ended it (no close_notify is sent) */
    uint32_t client, target, origin;
    uint32_t served;        /* requests it has carried (maxRequestsPerConnection counts them) */
    uint32_t dial_turn, tries; /* the dial's turn at its origin's addresses, and addresses tried */
    int first_err;          /* the dial's first failure: named if no address connects */
    int64_t opened;         /* when it was made (maxConnectionAge counts from it) */
    int64_t n, due, free_ns, start, tcp, connected, written, headers, deadline; /* tcp: TCP connected before TLS */
    int64_t stamp;          /* kernel receive time (CLOCK_REALTIME) of the last read that had one */
    uint64_t wire;          /* bytes read for this response */
    size_t write_off;
    struct conn *prev, *next; /* the deadline list while busy, an idle list while idle, the free list */
    soak_address addr;      /* the address it is connected (or connecting) to */
    soak_tls *tls;          /* its TLS (an https origin's), NULL for plain HTTP */
    soak_response r;
    uint8_t hashing;        /* the request's body is hashed (sampled: Engine._send's draw) */
    uint8_t stepping;       /* ... and a gzip body's kept bytes are being inflated: no read until done */
    uint8_t leftover;       /* ... and bytes came after the response in its last read (parsed's) */
    soak_body body;         /* ... its hash, inflated as bodyhash.py does (set up at the slot's first use) */
} conn;

typedef struct client {
    int64_t k;              /* its next send */
    int64_t free_ns;        /* closed model: when its previous request ended */
    int64_t end_k;          /* its first k not in the run */
    int64_t due;            /* when its next send is due, while it waits for it */
    uint32_t busy;          /* its requests in flight */
    uint8_t state;          /* enum client_state */
    uint8_t given;          /* a warm-up's client: its connections went on to the run's (give) */
} clientrec;

/* One send made, as the recorder and the tallies see it (runner.load.result.Result). */
typedef struct result {
    int64_t n, due, free_ns, start, tcp, connected, written, headers, end;
    uint64_t bytes_in, bytes_out, header_bytes;
    uint32_t url;
    uint16_t status;
    int kind;               /* SOAK_K_*, or -1 for a response */
    uint8_t kernel_clock, kept_alive;
    uint8_t protocol;       /* a new connection that carried a response: 1 plain, 2 + its soak_tls_versions index */
    uint8_t hashed;         /* Result.body_hash is set: body_hash */
    uint64_t body_hash;
    const char *text;
    const soak_response *r; /* the response's parser (its Server header), NULL for a cancelled send */
} result;

struct soak_engine {
    soak_config cfg;
    int ep, timer_fd, wake_fd, done_fd, step_fd;
    pthread_t thread;
    int started, joined;
    pthread_mutex_t lock;

    /* --- sending (engine.py's Engine) --- */
    int stopping, cancelled, finished, fatal;
    int64_t stopped_ns, last_claimed, count_end_ns;
    uint64_t sent;          /* read by other threads without the lock */
    uint64_t done;          /* sends ended (a response or a failure, counted): likewise */
    uint64_t step_at;       /* done reaching it makes step_fd readable (soak_engine_step_at) */
    int64_t in_flight;
    uint32_t live_clients;  /* clients not done */
    int64_t current;        /* the client being stepped: a stop its own claim makes leaves it be */
    clientrec *clients;
    uint32_t *heap, heap_len;           /* clients waiting for a due time, by due time */
    uint32_t *ready, ready_head, ready_len; /* clients whose turn it is (a ring) */
    uint32_t *room, room_len;           /* open model: clients waiting for room in flight */
    /* --- a warm-up and its run (engine.Handoff): two engines, one connection pool --- */
    struct soak_engine *give;           /* a warm-up's: the run each client's connections go on to */
    int taking;                         /* a run's: its clients begin with their warm-up's connections */
    uint32_t awaited;                   /* ... clients still waiting for them (CL_TAKING) */

    /* --- connections --- */
    conn *conns;
    uint32_t nconns, unused;            /* slots; the first never used (calloc's pages stay untouched) */
    conn *free_conns;
    conn **idle;                        /* per client and origin: its idle connections, newest first */
    uint64_t idle_count;
    conn *dl_head, *dl_tail;            /* requests in flight, oldest (earliest deadline) first */
    int64_t armed_ns;                   /* when the timer is set to fire; 0: not armed */
    int64_t tick_ns;                    /* when its last firing ran (the loop's lag, soak_taken) */
    soak_stall stalls[SOAK_STALLS];     /* since the previous take */
    uint32_t nstalls;
    int64_t wall_offset;                /* realtime - monotonic; SOAK_NONE: the last measure was unusable */
    int64_t offset_at;                  /* when it was measured (0: never) */
    unsigned char *buf;
    unsigned char *inflated;            /* a gzip body's step of inflated bytes (cfg.inflate_step), hashed at once */
    uint64_t draw;                      /* the state of the body hash's draws (splitmix64) */
    uint32_t stepping;                  /* connections whose body is being inflated a step a turn */
    unsigned char *plain;               /* what TLS makes of a read (NULL in a run without https) */
    _Alignas(size_t) char control[CMSG_SPACE(sizeof(struct timespec))]; /* as cmsghdr is aligned */

    /* --- recording (recorder.py's Recorder) --- */
    int64_t next;                       /* the first interval not taken */
    int64_t current_end;                /* results ending before this land in interval `next` */
    int64_t drain_from;                 /* SOAK_NONE: no drain */
    soak_tally **open;                  /* open[i]: interval next + i (NULL: nothing in it yet) */
    uint32_t open_cap;
    soak_tally *drain;
    int64_t drain_end_ns;
    soak_hist send_lag, lateness, uncorrected, in_unit, loop_lag;
    soak_bench *bench;
    uint64_t connections, opened, closed;
    uint64_t tls_connections[SOAK_TLS_VERSIONS];
    uint64_t opened_since, closed_since; /* since the previous take */
    soak_metrics metrics;
    soak_tally **per_url;               /* [cfg.nurl_slots] for the run, each made at its first result */
    int apart;                          /* backends or URLs counted apart (count_apart) */
};

/* TLS over a connection (below, beside reading). */
static void tls_release(conn *c);
static unsigned tls_version(const soak_tls *t);
static void tcp_done(soak_engine *e, conn *c);
static void tls_write(soak_engine *e, conn *c, const unsigned char *data, size_t len);
static int tls_flush(soak_engine *e, conn *c);

/* --- the three calls of every request --------------------------------------------------- */

/* The engine's thread is never cancelled, so its three calls per request go to the kernel
 * without glibc's cancellation-point bookkeeping around each (two calls, about 60
 * instructions a request); errno as ever. */
static ssize_t sys_send(int fd, const void *data, size_t len)
{
    return syscall(SYS_sendto, fd, data, len, MSG_NOSIGNAL, NULL, 0);
}

static ssize_t sys_recvmsg(int fd, struct msghdr *msg)
{
    return syscall(SYS_recvmsg, fd, msg, 0);
}

/* arm64 (and every architecture newer than x86-64) has no epoll_wait system call, only
 * epoll_pwait, which with no signal mask is the same call (glibc's epoll_wait makes it so). */
static int sys_epoll_wait(int ep, struct epoll_event *events, int max, int timeout)
{
#ifdef SYS_epoll_wait
    return (int)syscall(SYS_epoll_wait, ep, events, max, timeout);
#else
    return (int)syscall(SYS_epoll_pwait, ep, events, max, timeout, NULL, (size_t)0);
#endif
}

/* --- clocks ----------------------------------------------------------------------------- */

static inline int64_t clock_ns(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return (int64_t)t.tv_sec * SOAK_NS_PER_S + t.tv_nsec;
}

static inline int64_t mono(void) { return clock_ns(CLOCK_MONOTONIC); }

/* How long a measured offset between the wall clock and the monotonic one is used. */
#define OFFSET_NS 1000000

/* The offset between the wall clock and the monotonic one, for arrived(); out of line, for
 * arrived() runs twice a response and is small without it. */
__attribute__((noinline)) static void measure_offset(soak_engine *e)
{
    int64_t before = mono(), wall = clock_ns(CLOCK_REALTIME), after = mono();
    e->wall_offset = after - before < CLOCK_PAIR_NS ? wall - (before + after) / 2 : SOAK_NONE;
    e->offset_at = after;
}

/* When the bytes being parsed arrived, on the monotonic clock (a latency ends when its bytes
 * came, not when the loop got to them). The kernel's stamp is on CLOCK_REALTIME; the offset
 * between the clocks is measured afresh (a wall reading between two monotonic ones, close
 * together: CLOCK_PAIR_NS) for
 * the first response of any millisecond, not for each: at tens of thousands a second the
 * three readings cost as much as parsing the response (they are slow in a VM), and a step
 * of the wall clock then misleads the stamps of one millisecond. A stamp from before the
 * request started, or after now, is not used. */
static inline int64_t arrived(soak_engine *e, conn *c, int64_t now)
{
    if (c->stamp == 0)
        return now;
    if (now - e->offset_at >= OFFSET_NS || e->offset_at == 0)
        measure_offset(e);
    if (e->wall_offset == SOAK_NONE)
        return now;
    int64_t at = c->stamp - e->wall_offset;
    if (c->start <= at && at <= now) {
        c->kernel_clock = 1;
        return at;
    }
    return now;
}

/* --- tallies ---------------------------------------------------------------------------- */

static void fatal(soak_engine *e, int err)
{
    if (!e->fatal)
        e->fatal = err;
}

/* The phase histograms of a new tally; 0, or -1 without memory. */
static int phases_init(soak_tally *t, int tls)
{
    if (soak_hist_init(&t->phase_connect, SOAK_HIGHEST_NS) < 0 || soak_hist_init(&t->phase_ttfb, SOAK_HIGHEST_NS) < 0)
        return -1;
    if (tls && soak_hist_init(&t->phase_tls, SOAK_HIGHEST_NS) < 0)
        return -1;
    return soak_hist_init(&t->phase_body, SOAK_HIGHEST_NS);
}

/* PhaseTally.add: one response's phases (runner.stats.phases), ttfb as bench_add's waiting. */
static void phases_add(soak_tally *t, const result *r)
{
    if (r->connected && r->tcp) {
        soak_hist_record(&t->phase_connect, r->tcp - r->start);
        soak_hist_record(&t->phase_tls, r->connected - r->tcp);
    } else if (r->connected) {
        soak_hist_record(&t->phase_connect, r->connected - r->start);
    } else {
        t->phase_reused++;
    }
    soak_hist_record(&t->phase_ttfb, r->headers - (r->written ? r->written : r->start));
    soak_hist_record(&t->phase_body, r->end - r->headers);
}

static soak_tally *tally_new(soak_engine *e)
{
    soak_tally *t = calloc(1, sizeof *t);
    if (t == NULL || soak_hist_init(&t->latency, SOAK_HIGHEST_NS) < 0 || phases_init(t, e->cfg.tls != NULL) < 0) {
        soak_tally_free(t);
        fatal(e, ENOMEM);
        return NULL;
    }
    return t;
}

void soak_tally_free(soak_tally *t)
{
    if (t == NULL)
        return;
    soak_hist_free(&t->phase_connect);
    soak_hist_free(&t->phase_tls);
    soak_hist_free(&t->phase_ttfb);
    soak_hist_free(&t->phase_body);
    soak_hist_free(&t->latency);
    free(t->groups);
    free(t->backends);
    free(t);
}

/* Interval k's tally (k >= next), made if it is the first result there; NULL without memory. */
static soak_tally *open_tally(soak_engine *e, int64_t k)
{
    uint64_t i = (uint64_t)(k - e->next);
    if (i >= e->open_cap) {
        uint32_t cap = e->open_cap;
        while (cap <= i)
            cap *= 2;
        soak_tally **grown = realloc(e->open, cap * sizeof *grown);
        if (grown == NULL) {
            fatal(e, ENOMEM);
            return NULL;
        }
        memset(grown + e->open_cap, 0, (cap - e->open_cap) * sizeof *grown);
        e->open = grown;
        e->open_cap = cap;
    }
    if (e->open[i] == NULL)
        e->open[i] = tally_new(e);
    return e->open[i];
}

/* Recorder.record's choice of tally for a result that ended at `end`. */
static soak_tally *tally_for(soak_engine *e, int64_t end)
{
    if (end < e->current_end)
        return open_tally(e, e->next);
    if (e->drain_from != SOAK_NONE && end >= e->drain_from) {
        if (e->drain == NULL)
            e->drain = tally_new(e);
        if (end > e->drain_end_ns)
            e->drain_end_ns = end;
        return e->drain;
    }
    int64_t k = soak_grid_index(&e->cfg.grid, end);
    return open_tally(e, k > e->next ? k : e->next);
}

static uint64_t fnv(uint64_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

/* ErrorGroup.add: one more failure in a group. */
static void group_add(const soak_config *cfg, soak_group *g, uint32_t url, const char *text)
{
    g->count++;
    uint32_t i = 0;
    while (i < g->nurls && g->urls[i] != url)
        i++;
    if (i == g->nurls) {
        if (g->nurls < cfg->group_urls)
            g->urls[g->nurls++] = url;
        else
            g->more_urls = 1;
    }
    if (!g->varied && strcmp(text, g->text) != 0)
        g->varied = 1;
}

/* Tally._group: count a failure in the group of its kind and pattern (recorder.error_pattern:
 * runs of digits as '#'), or its kind's overflow group once ERROR_GROUPS groups are kept. */
static void count_failure(soak_engine *e, soak_tally *t, int kind, uint32_t url, const char *text)
{
    const soak_config *cfg = &e->cfg;
    char pattern[SOAK_TEXT_MAX];
    size_t j = 0;
    for (const char *s = text; *s && j + 1 < sizeof pattern; s++) {
        if (*s >= '0' && *s <= '9') {
            pattern[j++] = '#';
            while (s[1] >= '0' && s[1] <= '9')
                s++;
        } else {
            pattern[j++] = *s;
        }
    }
    pattern[j] = '\0';
    if (t->groups == NULL) {
        t->groups = calloc(cfg->error_groups + SOAK_KINDS, sizeof *t->groups);
        if (t->groups == NULL) {
            fatal(e, ENOMEM);
            return;
        }
    }
    uint64_t hash = fnv(14695981039346656037u ^ (uint64_t)kind, pattern);
    for (uint32_t i = 0; i < t->ngroups; i++) {
        soak_group *g = &t->groups[i];
        if (g->hash == hash && g->kind == kind && !g->overflow && strcmp(g->pattern, pattern) == 0) {
            group_add(cfg, g, url, text);
            return;
        }
    }
    int overflow = t->ngroups >= cfg->error_groups;
    if (overflow) {
        for (uint32_t i = 0; i < t->ngroups; i++) {
            soak_group *g = &t->groups[i];
            if (g->overflow && g->kind == kind) {
                group_add(cfg, g, url, text);
                return;
            }
        }
    }
    soak_group *g = &t->groups[t->ngroups++];
    memset(g, 0, offsetof(soak_group, pattern));
    g->hash = hash;
    g->kind = (uint8_t)kind;
    g->overflow = (uint8_t)overflow;
    g->count = 1;
    g->url = url;
    g->urls[0] = url;
    g->nurls = 1;
    snprintf(g->pattern, sizeof g->pattern, "%s", overflow ? "*" : pattern);
    snprintf(g->text, sizeof g->text, "%s", text);
}

/* Skipped sends of client c, its k-th from `first` up to `end`, in the intervals they were
 * due in (recorder._skip over schedule.Skips.by_interval): one step per interval spanned,
 * whatever the count; `at_end`: it got to them only once sending was over (Skips.at_end), counted
 * apart too. Returns end. */
static int64_t skip_as(soak_engine *e, uint32_t c, int64_t first, int64_t end, int at_end)
{
    const soak_schedule *s = &e->cfg.schedule;
    if (end <= first)
        return end;
    if (e->metrics.slots)
        SOAK_ADD(e->metrics.skipped, (uint64_t)(end - first));
    for (int64_t k = first; k < end;) {
        int64_t index = soak_grid_index(&e->cfg.grid, soak_due(s, soak_send_number(s, c, k)));
        int64_t upto = soak_last_due_by(s, c, soak_grid_end(&e->cfg.grid, index) - 1) + 1;
        if (upto > end)
            upto = end;
        if (upto <= k) /* cannot happen (send k is due before its interval's end); never loop */
            upto = k + 1;
        soak_tally *t = open_tally(e, index > e->next ? index : e->next);
        if (t != NULL) {
            t->skipped += (uint64_t)(upto - k);
            if (at_end)
                t->skipped_at_end += (uint64_t)(upto - k);
        }
        k = upto;
    }
    return end;
}

static int64_t skip(soak_engine *e, uint32_t c, int64_t first, int64_t end)
{
    return skip_as(e, c, first, end, 0);
}

/* BenchTally.add */
static void bench_add(soak_bench *b, const soak_config *cfg, const result *r)
{
    if (r->end > b->last_end_ns)
        b->last_end_ns = r->end;
    b->header_bytes += r->header_bytes;
    if (!b->has_server && r->status && r->r != NULL) {
        b->has_server = 1;
        b->server_len = r->r->server_len;
        memcpy(b->server, r->r->server, r->r->server_len);
        b->server_ns = r->end;
    }
    if (r->kind >= 0)
        return;
    int64_t total = r->end - r->start;
    if (r->connected) {
        int64_t connect = r->connected - r->start;
        soak_hist_record(&b->connect_new, connect);
        soak_hist_record(&b->processing_new, total - connect);
        soak_hist_record(&b->total_new, total);
    } else {
        soak_hist_record(&b->total_reused, total);
    }
    soak_hist_record(&b->waiting, r->headers - (r->written ? r->written : r->start));
    b->kept_alive += r->kept_alive;
    if (!b->has_document) {
        b->has_document = 1;
        b->document_length = r->bytes_in;
        b->first_response_ns = r->end;
    } else if (r->bytes_in != b->document_length) {
        b->length_mismatches++;
        uint32_t i = 0;
        while (i < b->nother && b->other_length[i] != r->bytes_in)
            i++;
        if (i < b->nother) {
            b->other_count[i]++;
        } else if (b->nother < cfg->other_lengths) {
            b->other_length[b->nother] = r->bytes_in;
            b->other_count[b->nother++] = 1;
        }
    }
}

/* Tally.count_backend: one response more of the backend `name` (len bytes), in t. */
static void count_backend(soak_engine *e, soak_tally *t, const char *name, uint8_t len)
{
    soak_backends *b = t->backends;
    if (b == NULL) {
        b = t->backends = malloc(sizeof *b);
        if (b == NULL) {
            fatal(e, ENOMEM);
            return;
        }
        b->n = 0;
        b->none = 0;
        b->other = 0;
    }
    for (uint32_t i = 0; i < b->n; i++) {
        soak_backend *k = &b->kept[i];
        if (k->len == len && memcmp(k->name, name, len) == 0) {
            k->count++;
            return;
        }
    }
    if (len == 0) {
        b->none = 1;
    } else if (b->n - b->none == SOAK_BACKENDS_KEPT) {
        b->other++;
        return;
    }
    soak_backend *k = &b->kept[b->n++];
    k->count = 1;
    k->len = len;
    memcpy(k->name, name, len);
}

/* URL slot s's tally for the run (Recorder.per_url[s]); NULL without memory. */
static soak_tally *url_tally(soak_engine *e, uint32_t s)
{
    if (e->per_url == NULL)
        return NULL;
    if (e->per_url[s] == NULL)
        e->per_url[s] = tally_new(e);
    return e->per_url[s];
}

/* Tally.add: one send made, in `t` (the interval's or its URL's): its bytes, and its failure or
 * its response (`latency`: Result.latency_in). 0 for a failure, 1 for a response. */
static int tally_add(soak_engine *e, soak_tally *t, const result *r, int64_t latency)
{
    t->bytes_out += r->bytes_out;
    t->bytes_in += r->bytes_in;
    if (r->kind >= 0) {
        t->failed++;
        t->errors[r->kind]++;
        count_failure(e, t, r->kind, r->url, r->text);
        return 0;
    }
    if (r->status >= 200 && r->status < 500)
        t->good++;
    else
        t->bad++;
    t->statuses[r->status < SOAK_STATUSES ? r->status : 0]++;
    t->kernel_clocked += r->kernel_clock;
    if (r->hashed) {
        t->hash_checked++;
        t->hash_mismatches += r->body_hash != e->cfg.hash_value;
    }
    soak_hist_record(&t->latency, latency);
    return 1;
}

/* Recorder.record's second count: the send in its URL's tally too (no skips or lateness there). */
static void url_add(soak_engine *e, const result *r, int64_t latency)
{
    soak_tally *u = url_tally(e, e->cfg.url_slot[r->url]);
    if (u != NULL && tally_add(e, u, r, latency) && e->cfg.backend_len)
        count_backend(e, u, r->r->backend, r->r->backend_len);
}

/* What a run counts apart, beside the interval's counts: backends (in the interval's tally and
 * the URL's) and each URL's tally. */
static void count_apart(soak_engine *e, soak_tally *t, const result *r, int64_t latency)
{
    if (e->cfg.backend_len && r->kind < 0)
        count_backend(e, t, r->r->backend, r->r->backend_len);
    if (e->cfg.nurl_slots)
        url_add(e, r, latency);
}

/* A connection made or closed, counted in the tally of the URL whose send made it or sent last on it. */
static void url_connection(soak_engine *e, const conn *c, int opened)
{
    soak_tally *u = url_tally(e, e->cfg.url_slot[c->target]);
    if (u != NULL)
        *(opened ? &u->opened : &u->closed) += 1;
}

/* bisect_left(edges, latency) */
static uint32_t place_of(const soak_config *cfg, int64_t latency)
{
    uint32_t lo = 0, hi = cfg->nedges;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (cfg->edges[mid] < latency)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* MetricsTally.record */
static void metrics_add(soak_engine *e, const result *r, int late, int64_t latency)
{
    soak_metrics *m = &e->metrics;
    uint32_t slot = e->cfg.slot_of[r->url];
    if (late)
        SOAK_ADD(m->late, 1);
    if (r->kind >= 0) {
        SOAK_ADD(m->failures[slot * SOAK_KINDS + (uint32_t)r->kind], 1);
        return;
    }
    SOAK_ADD(m->statuses[slot * SOAK_STATUSES + (r->status < SOAK_STATUSES ? r->status : 0)], 1);
    uint32_t place = place_of(&e->cfg, latency);
    if (r->status >= 200 && r->status < 500) {
        SOAK_ADD(m->good[slot * m->places + place], 1);
        SOAK_ADD(m->good_ns[slot], (uint64_t)latency);
    } else {
        SOAK_ADD(m->bad[slot * m->places + place], 1);
        SOAK_ADD(m->bad_ns[slot], (uint64_t)latency);
    }
}

/* Recorder.record (and the metrics tally after it): count one send that was made. */
static void record(soak_engine *e, const result *r)
{
    const soak_config *cfg = &e->cfg;
    SOAK_ADD(e->done, 1);
    soak_tally *t = tally_for(e, r->end);
    if (t == NULL)
        return;
    if (e->bench != NULL)
        bench_add(e->bench, cfg, r);
    if (r->protocol) {
        e->connections++;
        if (r->protocol > 1)
            e->tls_connections[r->protocol - 2]++;
    }
    int late = 0;
    if (r->start && r->kind != SOAK_K_CANCELLED) {
        int64_t lag = r->start - (r->due > r->free_ns ? r->due : r->free_ns); /* Result.client_lag_ns */
        late = lag >= cfg->late_ns;  /* stats.client.is_late */
        if (cfg->model != SOAK_BENCH) {
            soak_hist_record(&e->send_lag, r->start - r->due);
            soak_hist_record(&e->lateness, lag);
            if (late) {
                t->late++;
                if (lag > t->late_max_ns)
                    t->late_max_ns = lag;
            }
        }
    }
    int64_t from = cfg->corrected && r->due < r->start ? r->due : r->start; /* Result.latency_in */
    int64_t latency = r->kind >= 0 ? 0 : r->headers - from;
    if (tally_add(e, t, r, latency)) {
        /* stats.client.holds_delay: timed by the loop, a connection opened, or sent late and timed from its due time */
        if ((!r->kernel_clock || r->connected || (cfg->corrected && late)) && latency > t->delayed_max_ns)
            t->delayed_max_ns = latency;
        phases_add(t, r);
        if (e->uncorrected.counts != NULL)
            soak_hist_record(&e->uncorrected, r->headers - r->start);
        if (e->in_unit.counts != NULL)
            soak_hist_record(&e->in_unit, soak_floordiv(latency, cfg->unit_ns));
    }
    if (e->apart) /* one test for both, so that a run with neither pays one */
        count_apart(e, t, r, latency);
    if (e->metrics.slots)
        metrics_add(e, r, late, latency);
}

/* --- the schedule's side: claiming, skipping, stopping ---------------------------------- */

static void give(soak_engine *e, uint32_t c);
static void wake(soak_engine *e);

static void client_done(soak_engine *e, uint32_t c)
{
    if (e->clients[c].state != CL_DONE) {
        if (e->clients[c].state == CL_TAKING)
            e->awaited--;
        e->clients[c].state = CL_DONE;
        e->live_clients--;
    }
    give(e, c);
}

/* Engine._skip_missed: the client's sends from its k-th that fell due before the stop (one due at it
 * is not the run's). */
static void skip_missed(soak_engine *e, uint32_t c)
{
    clientrec *cl = &e->clients[c];
    if (e->cfg.model == SOAK_BENCH)
        return;
    cl->k = skip(e, c, cl->k,
                 soak_last_in_run(&e->cfg.schedule, c, cl->end_k, cl->k, e->stopped_ns - 1) + 1);
}

/* Engine.stop: send nothing more; what fell due before `at` and was not sent is skipped by
 * each client as it finishes (at once for those not waiting on a request). A stop another
 * thread asked for at `at` waited for the lock while this one went on sending: it takes effect
 * after the last send made, so that nothing sent is due at or after the stop (requests +
 * skipped = the sends due before it; in the Python engine a stop runs between two sends). */
static void begin_stop(soak_engine *e, int64_t at)
{
    if (e->last_claimed >= 0 && e->cfg.model != SOAK_BENCH) {
        int64_t after_last = soak_due(&e->cfg.schedule, e->last_claimed) + 1;
        if (at < after_last)
            at = after_last;
    }
    if (e->stopped_ns == SOAK_NONE)
        e->stopped_ns = at;
    if (e->stopping)
        return;
    e->stopping = 1;
    for (uint32_t c = 0; c < e->cfg.clients; c++) {
        uint8_t state = e->clients[c].state;
        if ((int64_t)c == e->current || state == CL_DONE || state == CL_BUSY)
            continue;
        skip_missed(e, c);
        client_done(e, c);
    }
    e->heap_len = 0;
    e->room_len = 0;
}

/* Engine._claim: take one send from the totalRequests budget (n < 0: a bench send). */
static int claim(soak_engine *e, int64_t n)
{
    int64_t limit = e->cfg.total_requests;
    if (limit && e->sent >= (uint64_t)limit)
        return 0;
    SOAK_ADD(e->sent, 1);
    if (n >= 0 && n > e->last_claimed)
        e->last_claimed = n;
    if (limit && e->sent == (uint64_t)limit) {
        begin_stop(e, mono());
        if (n >= 0) {
            int64_t last = soak_last_send_by(&e->cfg.schedule, e->stopped_ns);
            e->count_end_ns = soak_slot_end(&e->cfg.schedule, last > e->last_claimed ? last : e->last_claimed);
        }
    }
    return 1;
}

/* --- the clients' queues ---------------------------------------------------------------- */

static void heap_push(soak_engine *e, uint32_t c, int64_t due)
{
    e->clients[c].state = CL_WAIT;
    e->clients[c].due = due;
    uint32_t i = e->heap_len++;
    while (i > 0) {
        uint32_t parent = (i - 1) / 2;
        if (e->clients[e->heap[parent]].due <= due)
            break;
        e->heap[i] = e->heap[parent];
        i = parent;
    }
    e->heap[i] = c;
}

static uint32_t heap_pop(soak_engine *e)
{
    uint32_t top = e->heap[0], last = e->heap[--e->heap_len], i = 0;
    int64_t due = e->clients[last].due;
    for (;;) {
        uint32_t child = 2 * i + 1;
        if (child >= e->heap_len)
            break;
        if (child + 1 < e->heap_len && e->clients[e->heap[child + 1]].due < e->clients[e->heap[child]].due)
            child++;
        if (e->clients[e->heap[child]].due >= due)
            break;
        e->heap[i] = e->heap[child];
        i = child;
    }
    if (e->heap_len)
        e->heap[i] = last;
    return top;
}

static void make_ready(soak_engine *e, uint32_t c)
{
    if (e->clients[c].state == CL_READY || e->clients[c].state == CL_DONE)
        return;
    e->clients[c].state = CL_READY;
    e->ready[(e->ready_head + e->ready_len++) % (uint32_t)e->cfg.clients] = c;
}

/* Open model: room in flight again. Every client that waited for it skips what fell due
 * meanwhile (the engine's _open_client after _wait_for_room) and waits for its next send. */
static void release_room(soak_engine *e)
{
    int64_t now = mono();
    for (uint32_t i = 0; i < e->room_len; i++) {
        uint32_t c = e->room[i];
        clientrec *cl = &e->clients[c];
        cl->k = skip(e, c, cl->k, soak_last_in_run(&e->cfg.schedule, c, cl->end_k, cl->k, now) + 1);
        cl->state = CL_WAIT; /* make_ready takes it from here */
        make_ready(e, c);
    }
    e->room_len = 0;
}

/* --- connections ------------------------------------------------------------------------ */

static void dl_append(soak_engine *e, conn *c)
{
    c->next = NULL;
    c->prev = e->dl_tail;
    if (e->dl_tail)
        e->dl_tail->next = c;
    else
        e->dl_head = c;
    e->dl_tail = c;
}

static void dl_remove(soak_engine *e, conn *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        e->dl_head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        e->dl_tail = c->prev;
    c->prev = c->next = NULL;
}

static conn **idle_list(soak_engine *e, uint32_t client, uint32_t origin)
{
    return &e->idle[(size_t)client * e->cfg.norigins + origin];
}

static void idle_push(soak_engine *e, conn *c)
{
    conn **head = idle_list(e, c->client, c->origin);
    c->state = CONN_IDLE;
    c->prev = NULL;
    c->next = *head;
    if (*head)
        (*head)->prev = c;
    *head = c;
    e->idle_count++;
}

static void idle_remove(soak_engine *e, conn *c)
{
    conn **head = idle_list(e, c->client, c->origin);
    if (c->prev)
        c->prev->next = c->next;
    else
        *head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
    e->idle_count--;
}

/* Close a connection that carries no request (any more) and free its slot. */
static void conn_release(soak_engine *e, conn *c)
{
    if (c->state == CONN_IDLE)
        idle_remove(e, c);
    if (c->tls != NULL)
        tls_release(c);
    if (c->fd >= 0) {
        close(c->fd); /* which takes it out of the epoll set */
        if (c->made) {
            e->closed++;
            e->closed_since++;
            SOAK_ADD(e->metrics.closed, 1);
            if (e->cfg.nurl_slots)
                url_connection(e, c, 0);
        }
    }
    c->made = 0;
    c->fd = -1;
    c->state = CONN_FREE;
    c->next = e->free_conns;
    e->free_conns = c;
}

/* A free slot: a never-used one, a freed one, or else the slot of some idle connection. */
static conn *conn_slot(soak_engine *e)
{
    conn *c = e->free_conns;
    if (c != NULL) {
        e->free_conns = c->next;
        return c;
    }
    if (e->unused < e->nconns) {
        c = &e->conns[e->unused++];
        c->fd = -1;
        soak_body_setup(&c->body, e->cfg.max_inflated, e->cfg.inflate_step, e->inflated, e->cfg.inflate);
        if (e->cfg.backend_len) /* kept across soak_response_init */
            soak_response_want_backend(&c->r, e->cfg.backend, e->cfg.backend_len);
        return c;
    }
    size_t lists = (size_t)e->cfg.clients * e->cfg.norigins;
    for (size_t i = 0; i < lists; i++) {
        if (e->idle[i] != NULL) {
            conn_release(e, e->idle[i]);
            c = e->free_conns;
            e->free_conns = c->next;
            return c;
        }
    }
    return NULL; /* cannot happen: there are more slots than requests in flight */
}

/* A watch for reading alone is edge-triggered: a level-triggered one is put back on epoll's
 * ready list after every report and polled again at the next epoll_wait, one more tcp_poll per
 * response for nothing (1-3% of a keep-alive request's CPU, measured). So a read that may have
 * left something behind re-arms the watch (rewatch), and the next epoll_wait reports the rest,
 * as a level-triggered watch would have: bytes, when the read filled the buffer; the end, when
 * the report said the server had closed (EPOLLRDHUP) and the read returned bytes before it.
 * One read per connection per wake-up, so a server that never stops sending cannot keep the
 * loop from its timer. Writing waits level-triggered, as before (rare: a request larger than
 * the socket's buffer), and only while a request is being written: a connection is kept for
 * the next one only once its request was all written (parsed), so an idle one, whose socket
 * is writable, never wakes the loop for it. */
static int watch(soak_engine *e, conn *c, int op, uint32_t events)
{
    struct epoll_event ev = {.events = events == EPOLLIN ? EPOLLIN | EPOLLRDHUP | EPOLLET : events,
                             .data.ptr = c};
    return epoll_ctl(e->ep, op, c->fd, &ev);
}

/* The connection's watch as it stands, armed again: epoll checks the socket at once. */
static int rewatch(soak_engine *e, conn *c)
{
    return watch(e, c, EPOLL_CTL_MOD, c->out_watched ? EPOLLIN | EPOLLOUT : EPOLLIN);
}

/* --- a warm-up's connections, handed on to its run (engine.Handoff) -------------------- *
 *
 * A warm-up runs on an engine of its own (its schedule, grid, recorder and counts are its own,
 * as runner/run/warmup.py has them), and so does its run; what the two share is the
 * connections. Each client of the warm-up, once it is done (no send left, its last request
 * ended), hands its idle connections to the same client of the run, which waits for them
 * (CL_TAKING) and only then begins, catching up from when the warm-up's last request ended,
 * as the Python engine's run client does after Handoff.take. The run counts them as opened
 * when it takes them (Recorder.took_over), the warm-up not as closed. */

/* Connection `from` of engine e, idle, goes on as an idle connection of `to` (e's lock and to's
 * held): its socket leaves e's epoll set for to's, its TLS reads to's context. 0 if `to` had no
 * room or could not watch it: it is then closed, uncounted. */
static int take_over(soak_engine *e, conn *from, soak_engine *to)
{
    idle_remove(e, from);
    from->state = CONN_BUSY; /* out of the idle list already */
    epoll_ctl(e->ep, EPOLL_CTL_DEL, from->fd, NULL);
    conn *into = conn_slot(to);
    if (into == NULL) {
        from->made = 0;
        conn_release(e, from);
        return 0;
    }
    into->fd = from->fd;
    into->tls = from->tls;
    into->addr = from->addr;
    into->client = from->client;
    into->target = from->target;
    into->origin = from->origin;
    into->served = from->served;
    into->dial_turn = from->dial_turn;
    into->tries = from->tries;
    into->opened = from->opened;
    into->tls_over = from->tls_over;
    into->out_watched = into->stepping = into->hashing = 0;
    into->made = 1;
    if (into->tls != NULL)
        soak_tls_adopt(into->tls, to->cfg.tls);
    from->fd = -1;
    from->tls = NULL;
    from->made = 0;
    conn_release(e, from); /* the slot alone */
    if (watch(to, into, EPOLL_CTL_ADD, EPOLLIN) < 0) { /* epoll reports at once what came meanwhile */
        into->state = CONN_BUSY;
        into->made = 0;
        conn_release(to, into);
        return 0;
    }
    idle_push(to, into);
    to->opened++;
    to->opened_since++;
    SOAK_ADD(to->metrics.opened, 1);
    to->connections++;
    if (into->tls != NULL)
        to->tls_connections[tls_version(into->tls)]++;
    return 1;
}

/* Client c of the run `e` has its warm-up's connections: it begins, its first send caught up
 * from `free_ns`, when the warm-up's last request ended (0: it sent none), as the Python closed
 * client does; the loop's lag is counted from the first client's beginning. */
static void client_taken(soak_engine *e, uint32_t c, int64_t free_ns)
{
    clientrec *cl = &e->clients[c];
    int64_t now = mono();
    if (e->awaited == e->live_clients)
        e->tick_ns = now;
    e->awaited--;
    cl->state = CL_WAIT;
    if (e->cfg.model == SOAK_CLOSED && free_ns) {
        int64_t skipped;
        int64_t k = soak_catch_up(&e->cfg.schedule, c, cl->end_k, cl->k, free_ns, now, &skipped);
        skip(e, c, k - skipped, k);
        cl->k = k;
        cl->free_ns = free_ns;
    }
    make_ready(e, c);
}

/* Engine.Handoff.give: client c of a warm-up, done and with no request in flight, hands its
 * connections on to client c of the run (e->give), and the run's client begins. One whose run
 * client no longer waits (the run stopped first) closes them, uncounted, as FastSession.aclose
 * does. The run's lock is taken inside the warm-up's, never the other way round. */
static void give(soak_engine *e, uint32_t c)
{
    clientrec *cl = &e->clients[c];
    soak_engine *to = e->give;
    if (to == NULL || cl->given || cl->state != CL_DONE || cl->busy)
        return;
    cl->given = 1;
    pthread_mutex_lock(&to->lock);
    int taking = !to->finished && to->clients[c].state == CL_TAKING;
    for (uint32_t o = 0; o < e->cfg.norigins; o++) {
        conn **idle = idle_list(e, c, o);
        while (*idle != NULL) {
            if (taking) {
                take_over(e, *idle, to);
            } else {
                (*idle)->made = 0;
                conn_release(e, *idle);
            }
        }
    }
    if (taking) {
        client_taken(to, c, e->cfg.model == SOAK_CLOSED ? cl->free_ns : 0);
        wake(to);
    }
    pthread_mutex_unlock(&to->lock);
}

/* --- a body's hash (runner.load.bodyhash) ------------------------------------------------ */

/* random.random() of Engine._send's draw: 53 random bits as a double in [0, 1) (splitmix64). */
static double draw(soak_engine *e)
{
    uint64_t z = (e->draw += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return (double)((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
}

/* The parser's body_sink: the next run of body bytes, to the hash (inflated if its head said gzip). */
static void body_piece(void *ctx, const unsigned char *data, size_t len)
{
    conn *c = ctx;
    if (!c->body.begun)
        soak_body_begin(&c->body, c->r.gzip);
    soak_body_feed(&c->body, data, len);
}

/* The request on `c` has its body hashed. */
static void hash_body(conn *c)
{
    c->hashing = 1;
    soak_body_reset(&c->body);
    c->r.body_sink = body_piece;
    c->r.body_ctx = c;
}

/* The request on `c` is over: its body, if it was being inflated, is no more. */
static void unstep(soak_engine *e, conn *c)
{
    if (c->stepping) {
        c->stepping = 0;
        e->stepping--;
    }
}

/* Whether the hashed body of `c` failed (an inflate error, a bomb past its limits, a stream cut):
 * its kind, with the text in `text` (the texts are Python's: cfg.body_texts); -1 if it did not. A
 * whole response is checked for a gzip stream that ended early too. */
static int body_failed(soak_engine *e, conn *c, char *text, size_t size)
{
    const soak_config *cfg = &e->cfg;
    int error = c->r.outcome == SOAK_DONE ? soak_body_end(&c->body) : c->body.error;
    switch (error) {
    case SOAK_BODY_OK:
        return -1;
    case SOAK_BODY_NOT_GZIP:
        if (snprintf(text, size, "%s%s%s", cfg->body_texts[SOAK_NOT_GZIP_BEFORE], c->body.reason,
                     cfg->body_texts[SOAK_NOT_GZIP_AFTER]) >= (int)size)
            text[size - 1] = '\0'; /* cut to size, as every failure text is (it is shorter) */
        return SOAK_K_PROTOCOL;
    case SOAK_BODY_TOO_LARGE:
        snprintf(text, size, "%s", cfg->body_texts[SOAK_TOO_LARGE_TEXT]);
        return SOAK_K_PROTOCOL;
    case SOAK_BODY_CUT:
        snprintf(text, size, "%s", cfg->body_texts[SOAK_CUT_TEXT]);
        return SOAK_K_PROTOCOL;
    default: /* zlib had no memory for its state: as Engine._send names a MemoryError (_crashed) */
        snprintf(text, size, "other: MemoryError");
        return SOAK_K_OTHER;
    }
}

/* --- ending a request ------------------------------------------------------------------- */

static void request_done(soak_engine *e, uint32_t client, int64_t end);

/* The request on `c` is over: count it, then keep or close the connection and let its
 * client go on. kind < 0: a response. `keep`: the connection may carry the next request. */
static void finish(soak_engine *e, conn *c, int kind, const char *text, int keep, int64_t end)
{
    const soak_config *cfg = &e->cfg;
    const soak_target *t = &cfg->targets[c->target];
    char late_text[SOAK_TEXT_MAX];
    result r = {
        .n = c->n, .due = c->due, .free_ns = c->free_ns, .start = c->start, .tcp = c->tcp, .connected = c->connected,
        .written = c->written, .headers = c->headers, .end = end,
        .bytes_in = c->r.body_bytes, .bytes_out = t->body_bytes_out, .url = c->target,
        .status = c->headers ? c->r.status : 0, .kind = kind, .kernel_clock = c->kernel_clock, .text = text,
        .r = &c->r,
    };
    if (c->r.outcome == SOAK_DONE) {
        r.hashed = c->hashing && kind < 0; /* a body that failed to hash failed the response (body_failed) */
        r.body_hash = c->body.hash;
        /* whole reads: the rest of the read that ended the response counts too (bytes read, as
         * ab's Total transferred counts them), though no response owns it */
        r.header_bytes = c->wire - (t->is_head ? 0 : c->r.body_bytes);
        r.kept_alive = t->is_head ? 0 : c->r.keep_alive;
    }
    /* what ends after its deadline is a timeout, whatever it was (the run promised to wait no
     * longer); a head that came after it too is forgotten. (A failure to connect is no response.) */
    if (kind != SOAK_K_TIMEOUT && c->state == CONN_BUSY && end > c->deadline) {
        if (r.headers > c->deadline)
            r.headers = r.status = 0;
        snprintf(late_text, sizeof late_text, r.headers ? "timeout: no complete body within %s"
                                                        : "timeout: no response headers within %s",
                 cfg->timeout_text);
        r.kind = SOAK_K_TIMEOUT;
        r.text = late_text;
        keep = 0;
    }
    r.protocol = c->new_conn && r.status && r.kind != SOAK_K_TIMEOUT;
    if (r.protocol && c->tls != NULL)
        r.protocol = (uint8_t)(2 + tls_version(c->tls));
    record(e, &r);
    unstep(e, c);
    dl_remove(e, c);
    uint32_t client = c->client;
    if (keep && cfg->keep_alive && !c->last) /* a last request's connection closes, whatever the server said */
        idle_push(e, c);
    else
        conn_release(e, c);
    e->in_flight--;
    e->clients[client].busy--;
    request_done(e, client, end);
    give(e, client); /* an open client done sending hands its connections on once its last request ends */
}

/* A failure before any response byte could time it: it ends now. */
static void fail_now(soak_engine *e, conn *c, int kind, const char *text)
{
    finish(e, c, kind, text, 0, mono());
}

/* Whether the request on `c` has all been written (over TLS: taken, and its records sent). */
static int request_written(const soak_engine *e, const conn *c)
{
    const soak_target *t = &e->cfg.targets[c->target];
    return !c->out_watched && c->write_off == (c->last ? t->last_request_len : t->request_len);
}

/* The response's parser ended it (done or failed), or its body failed to hash (body_failed). */
static void parsed(soak_engine *e, conn *c, int leftover, int64_t now)
{
    int64_t end = c->headers ? arrived(e, c, now) : now;
    char failure[SOAK_TEXT_MAX];
    int kind = c->hashing && c->r.outcome != SOAK_FAILED ? body_failed(e, c, failure, sizeof failure) : -1;
    if (kind >= 0) {
        finish(e, c, kind, failure, 0, end);
        return;
    }
    if (c->r.outcome == SOAK_DONE) {
        /* bytes after the response belong to no request: the connection is out of step; so is
         * one whose request the server answered before it was all written (a large body): the
         * server reads the rest, or not, before the next request, and we cannot tell which */
        int keep = c->r.keep_alive && !leftover && request_written(e, c) && !e->cfg.targets[c->target].is_head;
        finish(e, c, -1, NULL, keep, end);
        return;
    }
    char text[SOAK_TEXT_MAX];
    soak_response_error(&c->r, text, sizeof text);
    finish(e, c, c->r.kind == SOAK_KIND_PROTOCOL ? SOAK_K_PROTOCOL : SOAK_K_CLOSED, text, 0, end);
}

/* The connection was lost with `err`: a reset is named as one; anything else ends the response
 * as a close would, except that it ends no body that runs to the close (soak_response_lost). */
static void lost(soak_engine *e, conn *c, int err)
{
    if (err == ECONNRESET) {
        int64_t now = mono();
        finish(e, c, SOAK_K_RESET, RESET_TEXT, 0, c->headers ? arrived(e, c, now) : now);
        return;
    }
    soak_response_lost(&c->r);
    parsed(e, c, 0, mono());
}

/* wire.classify_connect_error for an errno (OSError's subclasses by errno). */
static void dial_next(soak_engine *e, conn *c);

static void connect_failed(soak_engine *e, conn *c, int err)
{
    char text[SOAK_TEXT_MAX], reason[256];
    const soak_origin *o = &e->cfg.origins[c->origin];
    /* the next of the name's addresses, else the first address's error */
    if (c->first_err == 0)
        c->first_err = err;
    if (c->tries + 1 < o->naddrs) {
        c->tries++;
        if (c->fd >= 0) {
            close(c->fd); /* a dial that failed: never made, never counted */
            c->fd = -1;
        }
        dial_next(e, c);
        return;
    }
    err = c->first_err;
    if (err == ECONNREFUSED) {
        fail_now(e, c, SOAK_K_REFUSED, "connection refused");
    } else if (err == ECONNRESET) {
        fail_now(e, c, SOAK_K_RESET, RESET_TEXT);
    } else if (err == ETIMEDOUT) { /* TimeoutError: the connect phase's timeout */
        snprintf(text, sizeof text, "timeout: connect to %s not made within %s", c->addr.text,
                 e->cfg.timeout_text);
        fail_now(e, c, SOAK_K_TIMEOUT, text);
    } else {
        const char *message = strerror_r(err, reason, sizeof reason);
        snprintf(text, sizeof text, "connect: %.*s%s", strlen(message) <= MESSAGE_CHARS ? MESSAGE_CHARS
                 : MESSAGE_CHARS - 3, message, strlen(message) <= MESSAGE_CHARS ? "" : "...");
        fail_now(e, c, SOAK_K_CONNECT, text);
    }
}

/* The timer check: a request past its deadline times out. */
static void time_out(soak_engine *e, conn *c, int64_t now)
{
    char text[SOAK_TEXT_MAX];
    if (c->state == CONN_CONNECTING)
        snprintf(text, sizeof text, "timeout: connect to %s not made within %s", c->addr.text,
                 e->cfg.timeout_text);
    else if (c->state == CONN_HANDSHAKE)
        snprintf(text, sizeof text, "timeout: TLS handshake with %s not finished within %s", c->addr.text,
                 e->cfg.timeout_text);
    else
        snprintf(text, sizeof text, c->headers ? "timeout: no complete body within %s"
                                               : "timeout: no response headers within %s", e->cfg.timeout_text);
    finish(e, c, SOAK_K_TIMEOUT, text, 0, now);
}

/* Engine._send's CancelledError: a fresh Result, timed from its due time at the latest. */
static void cancel_request(soak_engine *e, conn *c, int64_t now)
{
    result r = {
        .n = c->n, .due = c->due, .start = c->due < now ? c->due : now, .end = now, .url = c->target,
        .kind = SOAK_K_CANCELLED, .text = CANCELLED_TEXT,
    };
    record(e, &r);
    unstep(e, c);
    uint32_t client = c->client;
    dl_remove(e, c);
    conn_release(e, c);
    e->in_flight--;
    e->clients[client].busy--;
    give(e, client);
}

/* --- making a request ------------------------------------------------------------------- */

/* transport.Lifetime.last, decided at the send, as FastSession.send does: the request is the
 * connection's last if it is the max_requests-th on it, or the connection is max_age_ns old
 * by now. An idle connection is never closed for its age: the next request retires it. */
static int lifetime_last(const soak_config *cfg, uint32_t served, int64_t opened, int64_t now)
{
    if (!cfg->keep_alive) /* every request already says Connection: close */
        return 0;
    if (cfg->max_requests && (uint64_t)served + 1 >= cfg->max_requests)
        return 1;
    return cfg->max_age_ns && now - opened >= cfg->max_age_ns;
}

/* The request on `c` is about to be written at `now`: last or not, and one more served. */
static void begin_lifetime_request(soak_engine *e, conn *c, int64_t now)
{
    c->last = (uint8_t)lifetime_last(&e->cfg, c->served, c->opened, now);
    c->served++;
}

/* The k-th address a dial on `turn` tries (transport.in_turn): the first family's, rotated
 * by the turn, then the others in the resolver's order. */
static const soak_address *address_at(const soak_origin *o, uint32_t turn, uint32_t k)
{
    if (k < o->nown)
        return &o->addrs[(turn + k) % o->nown];
    return &o->addrs[k < o->naddrs ? k : o->naddrs - 1];
}

static void write_request(soak_engine *e, conn *c)
{
    const soak_target *t = &e->cfg.targets[c->target];
    const unsigned char *data = c->last ? t->last_request : t->request;
    size_t len = c->last ? t->last_request_len : t->request_len;
    if (c->written == 0) /* before the send: the server may read it, and start on it, before send() returns */
        c->written = mono();
    if (c->tls != NULL) {
        tls_write(e, c, data, len);
        return;
    }
    ssize_t n = sys_send(c->fd, data + c->write_off, len - c->write_off);
    if (n < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            lost(e, c, errno);
            return;
        }
        n = 0;
    }
    c->write_off += (size_t)n;
    int want_out = c->write_off < len;
    if (want_out != c->out_watched) {
        c->out_watched = (uint8_t)want_out;
        if (rewatch(e, c) < 0)
            lost(e, c, errno);
    }
}

/* The connection is made: its request goes out. */
static void connected(soak_engine *e, conn *c)
{
    c->opened = c->connected = mono();
    c->made = 1; /* counted as the Python transports count: a connection made, not a socket tried */
    e->opened++;
    e->opened_since++;
    SOAK_ADD(e->metrics.opened, 1);
    if (e->cfg.nurl_slots)
        url_connection(e, c, 1);
    c->state = CONN_BUSY;
    c->served = 0;
    begin_lifetime_request(e, c, c->connected);
    write_request(e, c);
}

/* A non-blocking connect, as ab does it: connect, then connect again to learn that it is
 * done (on loopback it nearly always is), else wait until the socket is writable. A dial
 * tries the origin's addresses in its turn's order until one connects. */
static void dial_next(soak_engine *e, conn *c)
{
    const soak_origin *o = &e->cfg.origins[c->origin];
    if (c->tries >= o->naddrs) /* the list was replaced by a shorter one meanwhile */
        c->tries = o->naddrs - 1;
    c->addr = *address_at(o, c->dial_turn, c->tries);
    int one = 1;
    c->fd = socket(c->addr.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
        connect_failed(e, c, errno);
        return;
    }
    c->state = CONN_CONNECTING;
    setsockopt(c->fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);
    if (e->cfg.keep_alive) /* a request written while an earlier one's ACK is pending must not wait */
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    const struct sockaddr *addr = (const struct sockaddr *)&c->addr.addr;
    int rc = connect(c->fd, addr, c->addr.addr_len);
    int err = rc == 0 ? 0 : errno;
    if (err == EINPROGRESS || err == EALREADY) {
        rc = connect(c->fd, addr, c->addr.addr_len);
        err = rc == 0 || errno == EISCONN ? 0 : errno;
    }
    if (err == EINPROGRESS || err == EALREADY) {
        if (watch(e, c, EPOLL_CTL_ADD, EPOLLOUT) < 0)
            connect_failed(e, c, errno);
        return;
    }
    if (err != 0) {
        connect_failed(e, c, err);
        return;
    }
    if (watch(e, c, EPOLL_CTL_ADD, EPOLLIN) < 0) {
        connect_failed(e, c, errno);
        return;
    }
    tcp_done(e, c);
}

/* A new connection for the request on `c`: the origin's next turn (Answers.next_turn), or
 * the failure of the name's last lookup, as the Python engine's dial fails after one. */
static void dial(soak_engine *e, conn *c)
{
    soak_origin *o = &e->cfg.origins[c->origin];
    if (o->naddrs == 0) {
        fail_now(e, c, SOAK_K_DNS, o->failure);
        return;
    }
    c->dial_turn = (uint32_t)(o->turn++ % o->nown);
    c->tries = 0;
    c->first_err = 0;
    dial_next(e, c);
}

/* FastSession.send: send n for `client` on an idle connection to its origin, or a new one. */
static void start_request(soak_engine *e, uint32_t client, int64_t n, int64_t due, int64_t free_ns)
{
    const soak_config *cfg = &e->cfg;
    uint32_t target = (uint32_t)(n % cfg->nwheel); /* nwheel: ntargets without a wheel */
    if (cfg->wheel != NULL)
        target = cfg->wheel[target];
    conn **idle = idle_list(e, client, cfg->targets[target].origin);
    conn *c = *idle;
    int64_t now = mono();
    if (c != NULL) {
        idle_remove(e, c);
    } else {
        c = conn_slot(e);
        if (c == NULL) { /* no slot at all: counted as the failure to connect it would be */
            fatal(e, EMFILE);
            return;
        }
        c->fd = -1;
    }
    c->client = client;
    c->target = target;
    c->origin = cfg->targets[target].origin;
    c->n = n;
    c->due = due < 0 ? now : due; /* a bench send is due when it is sent */
    c->free_ns = free_ns;
    c->start = now;
    c->deadline = now + cfg->timeout_ns;
    c->tcp = c->connected = c->written = c->headers = 0;
    c->last = 0;
    c->wire = 0;
    c->write_off = 0;
    c->kernel_clock = 0;
    c->out_watched = 0; /* so it is: a connection is kept only once its request was all written (parsed) */
    soak_response_init(&c->r, cfg->targets[target].is_head, cfg->max_head);
    c->hashing = 0;
    if (cfg->hash_rate > 0 && draw(e) < cfg->hash_rate && !cfg->targets[target].is_head)
        hash_body(c); /* a response to HEAD has no body to hash: it finishes unhashed */
    e->in_flight++;
    e->clients[client].busy++;
    dl_append(e, c);
    if (c->fd >= 0) {
        c->new_conn = 0;
        c->state = CONN_BUSY;
        begin_lifetime_request(e, c, now);
        write_request(e, c);
    } else {
        c->new_conn = 1;
        dial(e, c);
    }
}

/* --- TLS ------------------------------------------------------------------------------- */

/* An https connection is plain TCP until its handshake is done (CONN_HANDSHAKE), then carries
 * its requests as any connection does: the same reads (one recvmsg per wake-up, the kernel's
 * stamp), the same sends, with tls.c between them and the parser. What TLS has to send waits
 * in its memory until tls_flush sends it; whatever is left after a send that could not take
 * it all is written when the socket is writable (out_watched, as for a plain request). */

/* Its soak_tls_versions index (the last for any other). */
static unsigned tls_version(const soak_tls *t)
{
    const char *version = soak_tls_version(t);
    for (unsigned i = 0; i + 1 < SOAK_TLS_VERSIONS; i++)
        if (strcmp(version, soak_tls_versions[i]) == 0)
            return i;
    return SOAK_TLS_VERSIONS - 1;
}

/* A connection closed in order (its handshake done, its TLS whole) says so with close_notify, as
 * Python's transports close theirs, the idle ones at the run's end too: one send, whatever it takes. */
static void tls_release(conn *c)
{
    if (!c->tls_over && c->fd >= 0) { /* soak_tls_close_notify: nothing before the handshake is done */
        const unsigned char *data;
        soak_tls_close_notify(c->tls);
        size_t len = soak_tls_output(c->tls, &data);
        if (len > 0 && sys_send(c->fd, data, len) < 0) {
            /* the server has gone: nothing to tell it */
        }
    }
    soak_tls_free(c->tls);
    c->tls = NULL;
    c->tls_over = 0;
}

/* Send what TLS has waiting (as much as the socket takes), and watch for writability while
 * some is left; 0, or the errno that lost the connection. */
static int tls_flush(soak_engine *e, conn *c)
{
    const unsigned char *data;
    size_t len = soak_tls_output(c->tls, &data), sent = 0;
    int err = 0;
    while (sent < len) {
        ssize_t n = sys_send(c->fd, data + sent, len - sent);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                err = errno;
            break;
        }
        sent += (size_t)n;
    }
    if (sent > 0)
        soak_tls_sent(c->tls, sent);
    if (err)
        return err;
    uint8_t want_out = sent < len;
    if (want_out != c->out_watched) {
        c->out_watched = want_out;
        if (rewatch(e, c) < 0)
            return errno;
    }
    return 0;
}

/* The connection's TLS failed: its alert (if any) goes out, and the request fails as `tls`,
 * in failures.py's words (tls.c's table). */
static void tls_failed(soak_engine *e, conn *c)
{
    char text[SOAK_TEXT_MAX];
    soak_tls_failure(c->tls, text, sizeof text);
    (void)tls_flush(e, c); /* what TLS says of it, for the server's log; the connection ends anyway */
    c->tls_over = 1;
    fail_now(e, c, SOAK_K_TLS, text);
}

/* The request's plaintext to TLS (what is not yet taken: none is taken while a renegotiation
 * waits for the server), and its records to the socket. */
static void tls_write(soak_engine *e, conn *c, const unsigned char *data, size_t len)
{
    if (c->write_off < len) {
        long n = soak_tls_write(c->tls, data + c->write_off, len - c->write_off);
        if (n < 0) {
            tls_failed(e, c);
            return;
        }
        c->write_off += (size_t)n;
    }
    int err = tls_flush(e, c);
    if (err)
        lost(e, c, err);
}

/* One step of the handshake on what has come: done, the connection is made and its request
 * goes out; failed, the request fails as `tls`. */
static void tls_shake(soak_engine *e, conn *c)
{
    int status = soak_tls_handshake(c->tls);
    if (status == SOAK_TLS_FAILED) {
        tls_failed(e, c);
        return;
    }
    int err = tls_flush(e, c);
    if (err)
        lost(e, c, err);
    else if (status == SOAK_TLS_DONE)
        connected(e, c);
}

/* The TCP connection is made: a plain one is ready, an https one shakes hands first (its tls phase). */
static void tcp_done(soak_engine *e, conn *c)
{
    const soak_origin *o = &e->cfg.origins[c->origin];
    if (o->tls_host == NULL) {
        connected(e, c);
        return;
    }
    c->tcp = mono();
    c->state = CONN_HANDSHAKE;
    c->tls_over = 0;
    c->tls = soak_tls_new(e->cfg.tls, o->tls_host, o->tls_numeric, o->tls_mismatch);
    if (c->tls == NULL) {
        fatal(e, ENOMEM); /* the run ends, this request cancelled with the others */
        return;
    }
    tls_shake(e, c);
}

/* What TLS makes of the ciphertext just fed, to the response's parser, until it has no more
 * or the response has ended (as read_response does with a plain read). */
static void tls_deliver(soak_engine *e, conn *c)
{
    for (;;) {
        long n = soak_tls_read(c->tls, e->plain, READ_SIZE);
        if (n == 0)
            return;
        if (n == SOAK_TLS_READ_CLOSED) { /* close_notify: the end, as a TCP close is */
            c->tls_over = 1;
            soak_response_eof(&c->r);
            parsed(e, c, 0, mono());
            return;
        }
        if (n < 0) {
            tls_failed(e, c);
            return;
        }
        c->wire += (uint64_t)n;
        size_t used = soak_response_feed(&c->r, e->plain, (size_t)n);
        if (!(c->r.events & SOAK_EVENT_HEAD) && c->r.outcome == SOAK_PENDING)
            continue;
        int64_t now = mono();
        if (c->r.events & SOAK_EVENT_HEAD)
            c->headers = arrived(e, c, now);
        if (c->r.outcome == SOAK_PENDING)
            continue;
        int leftover = used < (size_t)n;
        if (!leftover && soak_tls_buffered(c->tls)) { /* a record after the response: data, or an ending */
            long more = soak_tls_read(c->tls, e->plain, READ_SIZE);
            leftover = more != 0;
            if (more > 0)
                c->wire += (uint64_t)more;
        }
        parsed(e, c, leftover, now);
        return;
    }
}

/* A read's ciphertext on an https connection (n > 0 bytes in e->buf), as read_response hands
 * over a plain read: the handshake's next step, the response's bytes, or on an idle connection
 * only what TLS itself sends (a session ticket, a key update): anything else ends it. */
static void tls_read(soak_engine *e, conn *c, size_t n)
{
    if (soak_tls_feed(c->tls, e->buf, n) < 0) {
        fatal(e, ENOMEM);
        return;
    }
    if (c->state == CONN_HANDSHAKE) {
        tls_shake(e, c);
        return;
    }
    if (c->state == CONN_IDLE) {
        long got = soak_tls_read(c->tls, e->plain, READ_SIZE);
        if (got != 0) {
            c->tls_over = got < 0;
            conn_release(e, c);
        } else if (tls_flush(e, c)) {
            conn_release(e, c);
        }
        return;
    }
    int err;
    tls_deliver(e, c);
    if (c->state != CONN_BUSY) /* it ended: kept idle (its output is sent at the next request) or closed */
        return;
    const soak_target *t = &e->cfg.targets[c->target];
    if (c->write_off < (c->last ? t->last_request_len : t->request_len))
        write_request(e, c); /* a renegotiation held the request back: it goes now, if it can */
    else if ((err = tls_flush(e, c)) != 0) /* TLS's own answer, if any: a renegotiation's, a key update's */
        lost(e, c, err);
}

/* --- reading ---------------------------------------------------------------------------- */

/* The connection failed with `err`: an idle one is let go, a busy one's request fails. */
static void broken(soak_engine *e, conn *c, int err)
{
    if (c->state == CONN_IDLE)
        conn_release(e, c);
    else
        lost(e, c, err);
}

/* One read, and what it made of the connection. Returns 1 when the socket may hold more (see
 * watch) and the connection is still open: `closed`, the report said the server had closed. */
static int read_response(soak_engine *e, conn *c, int closed)
{
    struct iovec iov = {.iov_base = e->buf, .iov_len = READ_SIZE};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = e->control,
                         .msg_controllen = sizeof e->control};
    if (c->stepping)
        return 0; /* no read until its body is hashed: step_bodies watches it again then */
    ssize_t n = sys_recvmsg(c->fd, &msg);
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return 0;
        if (errno == EINTR)
            return 1; /* nothing read: what is there is still there */
        broken(e, c, errno);
        return 0;
    }
    if (c->state == CONN_IDLE && (c->tls == NULL || n == 0)) { /* the server closed it, or sent what nobody asked for */
        conn_release(e, c);
        return 0;
    }
    if (n == 0 && c->state == CONN_HANDSHAKE) {
        /* as Python's TLS transport reports a close before the handshake is done: the connection lost */
        c->tls_over = 1;
        fail_now(e, c, SOAK_K_RESET, RESET_TEXT);
        return 0;
    }
    if (n == 0) {
        if (c->tls != NULL) /* without close_notify: the end all the same, as Python's TLS transport takes it */
            c->tls_over = 1;
        soak_response_eof(&c->r);
        parsed(e, c, 0, mono());
        return 0;
    }
    for (struct cmsghdr *m = CMSG_FIRSTHDR(&msg); m != NULL; m = CMSG_NXTHDR(&msg, m)) {
        if (m->cmsg_level == SOL_SOCKET && m->cmsg_type == SCM_TIMESTAMPNS) {
            struct timespec ts;
            memcpy(&ts, CMSG_DATA(m), sizeof ts);
            c->stamp = (int64_t)ts.tv_sec * SOAK_NS_PER_S + ts.tv_nsec;
        }
    }
    if (c->tls != NULL) {
        tls_read(e, c, (size_t)n);
        return (n == READ_SIZE || closed) && c->state != CONN_FREE;
    }
    c->wire += (uint64_t)n;
    size_t used = soak_response_feed(&c->r, e->buf, (size_t)n);
    if (c->hashing && c->r.outcome != SOAK_FAILED && soak_body_pending(&c->body)) {
        soak_body_step(&c->body); /* one step now: most gzip bodies need no other */
        if (soak_body_pending(&c->body)) {
            if (c->r.events & SOAK_EVENT_HEAD)
                c->headers = arrived(e, c, mono());
            c->leftover = used < (size_t)n;
            c->stepping = 1;
            e->stepping++;
            return 0;
        }
    }
    int ended = c->r.outcome != SOAK_PENDING || (c->hashing && c->body.error != SOAK_BODY_OK);
    if (c->r.events & SOAK_EVENT_HEAD || ended) {
        int64_t now = mono(); /* one reading for the head and the end, when one read held both */
        if (c->r.events & SOAK_EVENT_HEAD)
            c->headers = arrived(e, c, now);
        if (ended)
            parsed(e, c, used < (size_t)n, now);
    }
    return (n == READ_SIZE || closed) && c->state != CONN_FREE;
}

static void conn_event(soak_engine *e, conn *c, uint32_t events)
{
    if (c->state == CONN_FREE)
        return; /* closed earlier in this batch (slots are reused only after the batch's events) */
    if (c->state == CONN_CONNECTING) {
        int err = 0;
        socklen_t len = sizeof err;
        if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
            err = errno;
        if (err != 0) {
            connect_failed(e, c, err);
            return;
        }
        if (watch(e, c, EPOLL_CTL_MOD, EPOLLIN) < 0) {
            connect_failed(e, c, errno);
            return;
        }
        tcp_done(e, c);
        return;
    }
    if (c->state == CONN_HANDSHAKE && (events & EPOLLOUT) && c->out_watched) {
        int err = tls_flush(e, c);
        if (err) {
            lost(e, c, err);
            return;
        }
    }
    if (c->state == CONN_BUSY && (events & EPOLLOUT) && c->out_watched) {
        write_request(e, c);
        if (c->state != CONN_BUSY)
            return;
    }
    /* readable, hung up or an error: recvmsg says which */
    if ((events & ~(uint32_t)EPOLLOUT) && read_response(e, c, events & (EPOLLRDHUP | EPOLLHUP)) &&
        rewatch(e, c) < 0)
        broken(e, c, errno);
}

/* --- clients ---------------------------------------------------------------------------- */

/* One step of each body being inflated (bounded, so a bomb cannot hold the loop), between two batches of
 * events, as the Python engine takes one between its other callbacks: a gzip bomb costs the
 * loop about half a millisecond a turn, not the whole inflate at once. One whose body is done
 * ends its response if the parser had ended it (or its body failed), else is read again. */
static void step_bodies(soak_engine *e)
{
    for (uint32_t i = 0; e->stepping && i < e->unused; i++) {
        conn *c = &e->conns[i];
        if (!c->stepping)
            continue;
        soak_body_step(&c->body);
        if (soak_body_pending(&c->body))
            continue;
        unstep(e, c);
        if (c->r.outcome != SOAK_PENDING || c->body.error != SOAK_BODY_OK)
            parsed(e, c, c->leftover, mono());
        else if (rewatch(e, c) < 0) /* epoll looks at the socket again at once: what came meanwhile is read */
            broken(e, c, errno);
    }
}

/* A client's request ended at `end`: the engine's client loops, after `await self._send`. */
static void request_done(soak_engine *e, uint32_t c, int64_t end)
{
    clientrec *cl = &e->clients[c];
    const soak_schedule *s = &e->cfg.schedule;
    switch (e->cfg.model) {
    case SOAK_CLOSED:
        cl->free_ns = end;
        cl->k++;
        if (e->stopping) {
            skip_missed(e, c);
            client_done(e, c);
            return;
        }
        {
            int64_t skipped;
            int64_t k = soak_catch_up(s, c, cl->end_k, cl->k, end, mono(), &skipped);
            skip(e, c, k - skipped, k);
            cl->k = k;
        }
        cl->state = CL_WAIT;
        make_ready(e, c);
        return;
    case SOAK_BENCH:
        cl->state = CL_WAIT;
        make_ready(e, c);
        return;
    default: /* open: the client never waited for this request, but others may wait for room */
        if (e->room_len && e->in_flight < e->cfg.max_in_flight)
            release_room(e);
        return;
    }
}

static void step_closed(soak_engine *e, uint32_t c)
{
    clientrec *cl = &e->clients[c];
    const soak_schedule *s = &e->cfg.schedule;
    int64_t n = soak_send_number(s, c, cl->k);
    if (!soak_in_run(s, n)) {
        client_done(e, c);
        return;
    }
    int64_t due = soak_due(s, n);
    int64_t now = mono();
    if (due > now) {
        heap_push(e, c, due);
        return;
    }
    if (!soak_before_end(s, now)) { /* got to it once sending was over: skipped, never sent after the end */
        cl->k = skip_as(e, c, cl->k, soak_last_in_run(s, c, cl->end_k, cl->k, now) + 1, 1);
        client_done(e, c);
        return;
    }
    if (!claim(e, n)) {
        skip_missed(e, c);
        client_done(e, c);
        return;
    }
    cl->state = CL_BUSY;
    start_request(e, c, n, due, cl->free_ns);
}

static void step_open(soak_engine *e, uint32_t c)
{
    clientrec *cl = &e->clients[c];
    const soak_schedule *s = &e->cfg.schedule;
    for (;;) {
        if (e->stopping) {
            skip_missed(e, c);
            client_done(e, c);
            return;
        }
        int64_t n = soak_send_number(s, c, cl->k);
        if (!soak_in_run(s, n)) {
            client_done(e, c);
            return;
        }
        int64_t due = soak_due(s, n);
        int64_t now = mono();
        if (due > now) {
            heap_push(e, c, due);
            return;
        }
        if (e->in_flight >= e->cfg.max_in_flight) {
            cl->state = CL_ROOM;
            e->room[e->room_len++] = c;
            return;
        }
        if (!soak_before_end(s, now)) { /* never sent after the end: skipped */
            cl->k = skip_as(e, c, cl->k, soak_last_in_run(s, c, cl->end_k, cl->k, now) + 1, 1);
            continue;
        }
        if (!claim(e, n)) {
            skip_missed(e, c);
            client_done(e, c);
            return;
        }
        cl->k++;
        start_request(e, c, n, due, 0);
    }
}

static void step_bench(soak_engine *e, uint32_t c)
{
    const soak_schedule *s = &e->cfg.schedule;
    if (e->stopping || (s->end_ns != SOAK_NO_END && !soak_before_end(s, mono())) || !claim(e, -1)) {
        client_done(e, c);
        return;
    }
    e->clients[c].state = CL_BUSY;
    start_request(e, c, (int64_t)e->sent - 1, -1, 0);
}

/* A client whose turn it is: its next send is due (or it was just freed). */
static void step(soak_engine *e, uint32_t c)
{
    if (e->clients[c].state != CL_READY)
        return; /* done meanwhile (a stop) */
    if (e->stopping) {
        skip_missed(e, c);
        client_done(e, c);
        return;
    }
    e->current = c;
    if (e->cfg.model == SOAK_CLOSED)
        step_closed(e, c);
    else if (e->cfg.model == SOAK_OPEN)
        step_open(e, c);
    else
        step_bench(e, c);
    e->current = -1;
}

/* --- stop and cancel -------------------------------------------------------------------- */

static void wake(soak_engine *e)
{
    uint64_t one = 1;
    ssize_t done = write(e->wake_fd, &one, sizeof one);
    (void)done; /* a full counter already wakes it */
}

/* Engine.cancel_in_flight: every request in flight becomes a `cancelled` failure. */
static void cancel_all(soak_engine *e)
{
    int64_t now = mono();
    begin_stop(e, now);
    e->cancelled = 1;
    while (e->dl_head != NULL) {
        conn *c = e->dl_head;
        uint32_t client = c->client;
        cancel_request(e, c, now);
        if (e->cfg.model != SOAK_OPEN && e->clients[client].state != CL_DONE) {
            e->clients[client].k++; /* the closed client's `finally: k += 1` */
            skip_missed(e, client);
            client_done(e, client);
        }
    }
    for (uint32_t c = 0; c < e->cfg.clients; c++)
        client_done(e, c);
}

/* --- the loop --------------------------------------------------------------------------- */

static void arm(soak_engine *e, int64_t at)
{
    struct itimerspec spec = {.it_value = {.tv_sec = at / SOAK_NS_PER_S, .tv_nsec = at % SOAK_NS_PER_S}};
    if (timerfd_settime(e->timer_fd, TFD_TIMER_ABSTIME, &spec, NULL) == 0)
        e->armed_ns = at;
    else
        fatal(e, errno);
}

/* A firing due at `due` ran at `ran`: on time within probe_ns, a loop-lag reading; later, a stall
 * whose times are kept (the interval's longest SOAK_STALLS), so Python counts the ticks it
 * swallowed in the intervals they were due in (ClientMeter.tick), as for the Python engine. */
static void loop_tick(soak_engine *e, int64_t due, int64_t ran)
{
    int64_t lag = ran - due;
    e->tick_ns = ran;
    if (e->cfg.probe_ns <= 0 || lag <= e->cfg.probe_ns) {
        soak_hist_record(&e->loop_lag, lag);
        return;
    }
    int64_t instead = soak_keep_stall(e->stalls, &e->nstalls, (soak_stall){due, ran});
    if (instead >= 0) /* a stall past the interval's SOAK_STALLS keeps its reading, without its times */
        soak_hist_record(&e->loop_lag, instead);
}

/* One firing of the timer: how late it came is the loop's lag (the probe, folded in). */
static void timer_fired(soak_engine *e, int64_t now)
{
    uint64_t expiries;
    ssize_t done = read(e->timer_fd, &expiries, sizeof expiries);
    if (done == (ssize_t)sizeof expiries && e->armed_ns)
        loop_tick(e, e->armed_ns, now);
    e->armed_ns = 0;
}

/* What is due by now: requests past their deadline end, clients whose send is due get their turn. */
static void due_now(soak_engine *e, int64_t now)
{
    while (e->dl_head != NULL && e->dl_head->deadline <= now)
        time_out(e, e->dl_head, now);
    while (e->heap_len && e->clients[e->heap[0]].due <= now)
        make_ready(e, heap_pop(e));
}

/* Each client whose turn it is (those queued before this call), in the order they came. */
static void run_ready(soak_engine *e)
{
    uint32_t todo = e->ready_len;
    while (todo-- && e->ready_len) {
        uint32_t c = e->ready[e->ready_head];
        e->ready_head = (e->ready_head + 1) % (uint32_t)e->cfg.clients;
        e->ready_len--;
        step(e, c);
    }
}

/* Arm the timer for the earliest of the next due send, the oldest deadline and gap_ns after
 * its last firing (so a stall shows however little is due: the loop's lag, soak_taken), unless
 * it is armed for earlier already (it then fires early once, and is armed again). */
static void rearm(soak_engine *e)
{
    int64_t want = INT64_MAX;
    if (e->heap_len)
        want = e->clients[e->heap[0]].due;
    if (e->dl_head != NULL && e->dl_head->deadline < want)
        want = e->dl_head->deadline;
    /* no tick while every client waits for its warm-up's connections: the warm-up's loop is measured */
    if (e->cfg.gap_ns > 0 && e->tick_ns + e->cfg.gap_ns < want && !(e->awaited && e->awaited == e->live_clients))
        want = e->tick_ns + e->cfg.gap_ns;
    if (want != INT64_MAX && (e->armed_ns == 0 || want < e->armed_ns))
        arm(e, want > 0 ? want : 1);
}

static void start_clients(soak_engine *e)
{
    const soak_schedule *s = &e->cfg.schedule;
    if (e->taking)
        return; /* each client begins once its warm-up's client hands it on (take_over) */
    for (uint32_t c = 0; c < e->cfg.clients; c++) {
        if (e->clients[c].state == CL_DONE)
            continue; /* a stop or a cancel came before the start */
        if (e->cfg.model == SOAK_BENCH) {
            heap_push(e, c, soak_due(s, 0));
        } else if (soak_in_run(s, soak_send_number(s, c, 0))) {
            heap_push(e, c, soak_due(s, soak_send_number(s, c, 0)));
        } else {
            client_done(e, c);
        }
    }
}

/* Finished sends have reached the step Python asked to hear of (soak_engine_step_at): tell it
 * once, through step_fd, instead of Python waking to read the count ten times a second. */
static void step_reached(soak_engine *e)
{
    uint64_t at = SOAK_LOAD(e->step_at), one = 1;
    if (!__atomic_compare_exchange_n(&e->step_at, &at, UINT64_MAX, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
        return; /* Python asked for another step meanwhile: the next turn compares with it */
    ssize_t done = write(e->step_fd, &one, sizeof one);
    (void)done;
}

static void *engine_thread(void *arg)
{
    soak_engine *e = arg;
    struct epoll_event events[EVENTS];
    pthread_mutex_lock(&e->lock);
    start_clients(e);
    int64_t now = mono();
    e->tick_ns = now;
    for (;;) {
        if (e->fatal && !e->cancelled)
            cancel_all(e);
        due_now(e, now);
        run_ready(e);
        if (e->live_clients == 0 && e->in_flight == 0)
            break;
        if (e->done >= SOAK_LOAD(e->step_at))
            step_reached(e);
        rearm(e);
        int timeout = e->ready_len || e->stepping ? 0 : -1;
        pthread_mutex_unlock(&e->lock);
        int n = sys_epoll_wait(e->ep, events, EVENTS, timeout);
        int err = errno;
        pthread_mutex_lock(&e->lock);
        if (n < 0) {
            if (err != EINTR)
                fatal(e, err);
            now = mono();
            continue;
        }
        now = mono(); /* one reading per wake-up: the timer's lag, the deadlines, the clients due */
        for (int i = 0; i < n; i++) {
            if (events[i].data.u64 == TIMER_TAG) {
                timer_fired(e, now);
            } else if (events[i].data.u64 == WAKE_TAG) {
                uint64_t count;
                ssize_t done = read(e->wake_fd, &count, sizeof count);
                (void)done;
            } else {
                conn_event(e, events[i].data.ptr, events[i].events);
            }
        }
        if (e->stepping)
            step_bodies(e);
    }
    /* A firing that fell due and was never read: a stop and SIGCONT interrupt epoll_wait, and the
     * clients, all done once they see sending over, end the loop first. Late until now, as the
     * stall it was: else a stall across the end would show nowhere (ClientMeter.tick). */
    if (e->armed_ns && e->armed_ns <= now) {
        loop_tick(e, e->armed_ns, now);
        e->armed_ns = 0;
    }
    /* FastSession.aclose: the clients' idle connections, closed uncounted as it closes them:
     * connectionsClosed counts what ended during the run, not what was open at its end */
    for (uint32_t i = 0; i < e->unused; i++)
        if (e->conns[i].state == CONN_IDLE) {
            e->conns[i].made = 0;
            conn_release(e, &e->conns[i]);
        }
    e->finished = 1;
    pthread_mutex_unlock(&e->lock);
    uint64_t one = 1;
    ssize_t done = write(e->done_fd, &one, sizeof one);
    (void)done;
    return NULL;
}

/* --- the API ---------------------------------------------------------------------------- */

void soak_config_free(soak_config *cfg)
{
    for (uint32_t i = 0; cfg->targets != NULL && i < cfg->ntargets; i++) {
        free(cfg->targets[i].request);
        free(cfg->targets[i].last_request);
    }
    free(cfg->targets);
    for (uint32_t i = 0; cfg->origins != NULL && i < cfg->norigins; i++) {
        free(cfg->origins[i].addrs);
        free(cfg->origins[i].tls_host);
        free(cfg->origins[i].tls_mismatch);
    }
    soak_tls_ctx_free(cfg->tls);
    free(cfg->origins);
    free(cfg->slot_of);
    free(cfg->edges);
    free(cfg->wheel);
    free(cfg->url_slot);
    free(cfg->schedule.dues);
    memset(cfg, 0, sizeof *cfg);
}

static int metrics_init(soak_metrics *m, const soak_config *cfg)
{
    m->slots = cfg->nslots;
    m->places = cfg->nedges + 1;
    if (!m->slots)
        return 0;
    m->statuses = calloc((size_t)m->slots * SOAK_STATUSES, sizeof(uint64_t));
    m->failures = calloc((size_t)m->slots * SOAK_KINDS, sizeof(uint64_t));
    m->good = calloc((size_t)m->slots * m->places, sizeof(uint64_t));
    m->bad = calloc((size_t)m->slots * m->places, sizeof(uint64_t));
    m->good_ns = calloc(m->slots, sizeof(uint64_t));
    m->bad_ns = calloc(m->slots, sizeof(uint64_t));
    return m->statuses && m->failures && m->good && m->bad && m->good_ns && m->bad_ns ? 0 : -1;
}

static void metrics_free(soak_metrics *m)
{
    free(m->statuses);
    free(m->failures);
    free(m->good);
    free(m->bad);
    free(m->good_ns);
    free(m->bad_ns);
}

static int bench_init(soak_bench *b)
{
    memset(b, 0, sizeof *b);
    soak_hist *all[] = {&b->waiting, &b->total_reused, &b->connect_new, &b->processing_new, &b->total_new};
    int failed = 0;
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        failed |= soak_hist_init(all[i], SOAK_HIGHEST_NS);
    return failed;
}

static void bench_free(soak_bench *b)
{
    soak_hist_free(&b->waiting);
    soak_hist_free(&b->total_reused);
    soak_hist_free(&b->connect_new);
    soak_hist_free(&b->processing_new);
    soak_hist_free(&b->total_new);
}

static const char *check(const soak_config *cfg)
{
    if (cfg->ntargets == 0 || cfg->norigins == 0)
        return "no targets";
    for (uint32_t i = 0; i < cfg->ntargets; i++)
        if (cfg->targets[i].origin >= cfg->norigins)
            return "a target's origin is out of range";
    for (uint32_t i = 0; i < cfg->norigins; i++)
        if (cfg->origins == NULL || cfg->origins[i].naddrs == 0 || cfg->origins[i].nown == 0)
            return "an origin has no address";
        else if (cfg->origins[i].tls_host != NULL && cfg->tls == NULL)
            return "an https origin needs the TLS context";
    if (cfg->clients < 1 || cfg->clients > (1 << 24))
        return "clients must be 1 to 16777216";
    if (cfg->model == SOAK_OPEN && (cfg->max_in_flight < 1 || cfg->max_in_flight > (1 << 24)))
        return "max_in_flight must be 1 to 16777216";
    if (!(cfg->schedule.qps > 0 || cfg->schedule.dues != NULL) || cfg->schedule.stride < 1 ||
        cfg->schedule.offset < 0 || cfg->schedule.clients != cfg->clients)
        return "the schedule needs qps > 0, stride >= 1, offset >= 0 and this engine's clients";
    for (int64_t n = 0; cfg->schedule.dues != NULL && n < cfg->schedule.ndues; n++)
        if (cfg->schedule.ndues < 2 || cfg->schedule.dues[0] != 0 || (n && cfg->schedule.dues[n] < cfg->schedule.dues[n - 1]))
            return "a ramp's due times start at 0, never go back, and end with the one beyond its end";
    if (cfg->grid.interval_ns < 1 || cfg->timeout_ns < 1 || cfg->unit_ns < 0 || cfg->total_requests < 0)
        return "interval, timeout and unit must be positive";
    if (cfg->group_urls > SOAK_MAX_GROUP_URLS || cfg->other_lengths > SOAK_MAX_OTHER_LENGTHS)
        return "group_urls or other_lengths is beyond what the engine keeps";
    for (uint32_t i = 0; cfg->nslots && i < cfg->ntargets; i++)
        if (cfg->slot_of[i] >= cfg->nslots)
            return "a URL's metrics slot is out of range";
    for (uint32_t i = 0; cfg->wheel != NULL && i < cfg->nwheel; i++)
        if (cfg->wheel[i] >= cfg->ntargets)
            return "the wheel names a URL out of range";
    if (cfg->wheel != NULL && cfg->nwheel == 0)
        return "the wheel is empty";
    if (cfg->wheel == NULL && cfg->nwheel != cfg->ntargets)
        return "without a wheel, nwheel must be ntargets";
    for (uint32_t i = 0; cfg->nurl_slots && i < cfg->ntargets; i++)
        if (cfg->url_slot == NULL || cfg->url_slot[i] >= cfg->nurl_slots)
            return "a URL's slot is out of range";
    if (cfg->backend_len) {
        soak_response probe;
        if (soak_response_want_backend(&probe, cfg->backend, cfg->backend_len) < 0)
            return "the backend header is no name the parser keeps";
    }
    if (cfg->hash_rate > 0 && cfg->inflate && (cfg->inflate_step < 1 || cfg->max_inflated < 1))
        return "inflate_step and max_inflated must be positive";
    return NULL;
}

soak_engine *soak_engine_new(soak_config *config, char *err, size_t err_size)
{
    const char *bad = check(config);
    if (bad != NULL) {
        snprintf(err, err_size, "%s", bad);
        soak_config_free(config);
        return NULL;
    }
    soak_engine *e = calloc(1, sizeof *e);
    if (e == NULL) {
        snprintf(err, err_size, "out of memory");
        soak_config_free(config);
        return NULL;
    }
    e->cfg = *config;
    memset(config, 0, sizeof *config);
    soak_config *cfg = &e->cfg;
    int failed_body = 0;
    e->ep = e->timer_fd = e->wake_fd = e->done_fd = e->step_fd = -1;
    e->step_at = UINT64_MAX;
    e->stopped_ns = e->count_end_ns = e->drain_from = SOAK_NONE;
    e->last_claimed = -1;
    e->current = -1;
    e->live_clients = (uint32_t)cfg->clients;
    e->current_end = soak_grid_end(&cfg->grid, 0);
    pthread_mutex_init(&e->lock, NULL);
    e->nconns = (uint32_t)cfg->clients * cfg->norigins + (cfg->model == SOAK_OPEN ? (uint32_t)cfg->max_in_flight : 0);
    e->conns = calloc(e->nconns, sizeof *e->conns);
    e->clients = calloc((size_t)cfg->clients, sizeof *e->clients);
    e->heap = calloc((size_t)cfg->clients, sizeof *e->heap);
    e->ready = calloc((size_t)cfg->clients, sizeof *e->ready);
    e->room = calloc((size_t)cfg->clients, sizeof *e->room);
    e->idle = calloc((size_t)cfg->clients * cfg->norigins, sizeof *e->idle);
    e->buf = malloc(READ_SIZE);
    if (cfg->tls != NULL)
        e->plain = malloc(READ_SIZE);
    e->open_cap = 4;
    e->open = calloc(e->open_cap, sizeof *e->open);
    if (cfg->nurl_slots)
        e->per_url = calloc(cfg->nurl_slots, sizeof *e->per_url);
    e->apart = cfg->backend_len || cfg->nurl_slots;
    if (cfg->hash_rate > 0 && cfg->inflate) {
        e->inflated = malloc(cfg->inflate_step);
        failed_body = e->inflated == NULL;
    }
    if (cfg->hash_rate > 0 && getrandom(&e->draw, sizeof e->draw, 0) != sizeof e->draw) /* as random.Random() seeds */
        e->draw = (uint64_t)clock_ns(CLOCK_REALTIME) ^ (uint64_t)mono();
    int failed = failed_body || (cfg->nurl_slots && !e->per_url) || !e->conns || !e->clients || !e->heap || !e->ready || !e->room || !e->idle || !e->buf || !e->open ||
                 (cfg->tls != NULL && !e->plain);
    for (uint32_t c = 0; e->clients != NULL && c < cfg->clients; c++)
        e->clients[c].end_k = soak_end_k(&cfg->schedule, c); /* a stop before the start needs it too */
    if (cfg->model != SOAK_BENCH)
        failed |= soak_hist_init(&e->send_lag, SOAK_HIGHEST_NS) | soak_hist_init(&e->lateness, SOAK_HIGHEST_NS);
    if (cfg->model == SOAK_OPEN && cfg->corrected)
        failed |= soak_hist_init(&e->uncorrected, SOAK_HIGHEST_NS);
    if (cfg->unit_ns) {
        int64_t highest = SOAK_HIGHEST_NS / cfg->unit_ns; /* LatencyHistogram.for_unit */
        failed |= soak_hist_init(&e->in_unit, highest > 2 ? highest : 2);
    }
    failed |= soak_hist_init(&e->loop_lag, SOAK_HIGHEST_NS);
    if (cfg->model == SOAK_BENCH) {
        e->bench = malloc(sizeof *e->bench);
        failed |= e->bench == NULL || bench_init(e->bench);
    }
    failed |= metrics_init(&e->metrics, cfg);
    if (failed) {
        snprintf(err, err_size, "out of memory");
        soak_engine_free(e);
        return NULL;
    }
    e->ep = epoll_create1(EPOLL_CLOEXEC);
    e->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    e->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    e->done_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    e->step_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    struct epoll_event timer = {.events = EPOLLIN, .data.u64 = TIMER_TAG};
    struct epoll_event woken = {.events = EPOLLIN, .data.u64 = WAKE_TAG};
    if (e->ep < 0 || e->timer_fd < 0 || e->wake_fd < 0 || e->done_fd < 0 || e->step_fd < 0 ||
        epoll_ctl(e->ep, EPOLL_CTL_ADD, e->timer_fd, &timer) < 0 ||
        epoll_ctl(e->ep, EPOLL_CTL_ADD, e->wake_fd, &woken) < 0) {
        snprintf(err, err_size, "%s", strerror(errno));
        soak_engine_free(e);
        return NULL;
    }
    return e;
}

int soak_engine_start(soak_engine *e)
{
    sigset_t all, before;
    if (e->started)
        return EALREADY;
    /* the thread takes no signal: SIGINT and SIGTERM are Python's, on its main thread */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &before);
    int err = pthread_create(&e->thread, NULL, engine_thread, e);
    pthread_sigmask(SIG_SETMASK, &before, NULL);
    if (err == 0)
        e->started = 1;
    return err;
}

void soak_engine_join(soak_engine *e)
{
    if (e->started && !e->joined) {
        pthread_join(e->thread, NULL);
        e->joined = 1;
    }
}

void soak_engine_free(soak_engine *e)
{
    if (e == NULL)
        return;
    if (e->started && !e->joined) {
        soak_engine_cancel(e);
        soak_engine_join(e);
    }
    for (uint32_t i = 0; e->conns != NULL && i < e->unused; i++) {
        soak_tls_free(e->conns[i].tls);
        if (e->conns[i].fd >= 0)
            close(e->conns[i].fd);
        soak_body_free(&e->conns[i].body);
    }
    int fds[] = {e->ep, e->timer_fd, e->wake_fd, e->done_fd, e->step_fd};
    for (size_t i = 0; i < sizeof fds / sizeof *fds; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    for (uint32_t i = 0; e->open != NULL && i < e->open_cap; i++)
        soak_tally_free(e->open[i]);
    soak_tally_free(e->drain);
    for (uint32_t i = 0; e->per_url != NULL && i < e->cfg.nurl_slots; i++)
        soak_tally_free(e->per_url[i]);
    free(e->per_url);
    soak_hist *hists[] = {&e->send_lag, &e->lateness, &e->uncorrected, &e->in_unit, &e->loop_lag};
    for (size_t i = 0; i < sizeof hists / sizeof *hists; i++)
        soak_hist_free(hists[i]);
    if (e->bench != NULL)
        bench_free(e->bench);
    free(e->bench);
    metrics_free(&e->metrics);
    free(e->open);
    free(e->conns);
    free(e->clients);
    free(e->heap);
    free(e->ready);
    free(e->room);
    free(e->idle);
    free(e->buf);
    free(e->inflated);
    free(e->plain);
    soak_config_free(&e->cfg);
    pthread_mutex_destroy(&e->lock);
    free(e);
}

int soak_engine_give_to(soak_engine *e, soak_engine *to)
{
    const soak_config *a = &e->cfg, *b = &to->cfg;
    if (e == to || e->started || to->started || e->give != NULL || e->taking || to->taking || to->give != NULL ||
        a->clients != b->clients || a->norigins != b->norigins || a->model != b->model || a->model == SOAK_BENCH)
        return -1;
    pthread_mutex_lock(&to->lock);
    for (uint32_t c = 0; c < b->clients; c++)
        if (to->clients[c].state != CL_DONE) {
            to->clients[c].state = CL_TAKING;
            to->awaited++;
        }
    to->taking = 1;
    pthread_mutex_unlock(&to->lock);
    pthread_mutex_lock(&e->lock);
    e->give = to;
    pthread_mutex_unlock(&e->lock);
    return 0;
}

void soak_engine_stop(soak_engine *e, int64_t at_ns)
{
    pthread_mutex_lock(&e->lock);
    if (!e->finished)
        begin_stop(e, at_ns);
    else if (e->stopped_ns == SOAK_NONE)
        e->stopped_ns = at_ns;
    pthread_mutex_unlock(&e->lock);
    wake(e);
}

void soak_engine_cancel(soak_engine *e)
{
    pthread_mutex_lock(&e->lock);
    if (!e->finished) {
        cancel_all(e);
    } else if (e->stopped_ns == SOAK_NONE) {
        e->stopped_ns = mono();
    }
    pthread_mutex_unlock(&e->lock);
    wake(e);
}

uint32_t soak_addresses_order(soak_address *addrs, uint32_t n)
{
    /* a stable partition: the first family's addresses, then the others, each in order */
    int first = addrs[0].family;
    uint32_t nown = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (addrs[i].family != first)
            continue;
        if (i != nown) {
            soak_address moved = addrs[i];
            memmove(&addrs[nown + 1], &addrs[nown], (size_t)(i - nown) * sizeof *addrs);
            addrs[nown] = moved;
        }
        nown++;
    }
    return nown;
}

int soak_engine_set_addresses(soak_engine *e, uint32_t o, soak_address *addrs, uint32_t n, const char *failure)
{
    if (o >= e->cfg.norigins)
        return -1;
    uint32_t nown = n ? soak_addresses_order(addrs, n) : 0;
    pthread_mutex_lock(&e->lock);
    soak_origin *origin = &e->cfg.origins[o];
    soak_address *old = origin->addrs;
    origin->addrs = addrs;
    origin->naddrs = n;
    origin->nown = nown;
    if (n == 0)
        snprintf(origin->failure, sizeof origin->failure, "%s", failure);
    pthread_mutex_unlock(&e->lock);
    free(old);
    return 0;
}

void soak_engine_drain_from(soak_engine *e, int64_t t_ns)
{
    pthread_mutex_lock(&e->lock);
    if (e->drain_from == SOAK_NONE || t_ns < e->drain_from)
        e->drain_from = t_ns;
    if (e->drain_from < e->current_end)
        e->current_end = e->drain_from;
    pthread_mutex_unlock(&e->lock);
}

/* The engine's skip_due_before: open clients waiting for room skip what fell due before t,
 * so an interval holds its own skips even while no request ends. */
static void skip_due_before(soak_engine *e, int64_t t_ns)
{
    for (uint32_t i = 0; i < e->room_len; i++) {
        uint32_t c = e->room[i];
        clientrec *cl = &e->clients[c];
        cl->k = skip(e, c, cl->k, soak_last_in_run(&e->cfg.schedule, c, cl->end_k, cl->k, t_ns - 1) + 1);
    }
}

int soak_engine_take(soak_engine *e, int64_t k, int final, int64_t until_ns, soak_taken *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&e->lock);
    if (k != e->next) {
        pthread_mutex_unlock(&e->lock);
        return -1;
    }
    soak_hist lag;
    if (soak_hist_init(&lag, SOAK_HIGHEST_NS) < 0) {
        pthread_mutex_unlock(&e->lock);
        return -2;
    }
    skip_due_before(e, until_ns != SOAK_NONE ? until_ns : soak_grid_end(&e->cfg.grid, k));
    if (final) {
        /* the later intervals are taken below, beside this one; open[0] goes first */
        out->tally = e->open[0];
        e->open[0] = NULL;
    } else {
        out->tally = e->open[0];
        memmove(e->open, e->open + 1, (e->open_cap - 1) * sizeof *e->open);
        e->open[e->open_cap - 1] = NULL;
    }
    if (final) { /* Recorder.close(final=True): every later interval too, and the drain */
        out->later = calloc(e->open_cap, sizeof *out->later);
        if (out->later == NULL) {
            soak_hist_free(&lag);
            e->open[0] = out->tally; /* put back: nothing taken */
            out->tally = NULL;
            pthread_mutex_unlock(&e->lock);
            return -2;
        }
        for (uint32_t i = 0; i < e->open_cap; i++) {
            if (e->open[i] != NULL)
                out->later[out->nlater++] = e->open[i];
            e->open[i] = NULL;
        }
        out->drain = e->drain;
        out->drain_end_ns = e->drain_end_ns;
        e->drain = NULL;
        if (e->per_url != NULL) { /* the run's per-URL tallies, taken whole: later results count in new ones */
            out->per_url = e->per_url;
            out->nper_url = e->cfg.nurl_slots;
            e->per_url = calloc(e->cfg.nurl_slots, sizeof *e->per_url);
        }
    }
    out->loop_lag = e->loop_lag;
    e->loop_lag = lag;
    memcpy(out->stalls, e->stalls, e->nstalls * sizeof *e->stalls);
    out->nstalls = e->nstalls;
    e->nstalls = 0;
    out->next_tick_ns = e->finished || !e->armed_ns ? SOAK_NONE : e->armed_ns;
    out->opened = e->opened_since;
    out->closed = e->closed_since;
    e->opened_since = e->closed_since = 0;
    e->next++;
    e->current_end = soak_grid_end(&e->cfg.grid, e->next);
    if (e->drain_from != SOAK_NONE && e->drain_from < e->current_end)
        e->current_end = e->drain_from;
    pthread_mutex_unlock(&e->lock);
    return 0;
}

void soak_taken_free(soak_taken *t)
{
    for (uint32_t i = 0; i < t->nlater; i++)
        soak_tally_free(t->later[i]);
    free(t->later);
    for (uint32_t i = 0; t->per_url != NULL && i < t->nper_url; i++)
        soak_tally_free(t->per_url[i]);
    free(t->per_url);
    soak_tally_free(t->tally);
    soak_tally_free(t->drain);
    soak_hist_free(&t->loop_lag);
    memset(t, 0, sizeof *t);
}

/* A copy of `from` into `to`, its counts in a new array (none if `from` has none). */
static int hist_copy(soak_hist *to, const soak_hist *from)
{
    *to = *from;
    to->counts = NULL;
    if (from->counts == NULL)
        return 0;
    to->counts = calloc(from->len, sizeof *to->counts);
    if (to->counts == NULL)
        return -1;
    if (from->count) /* only the slots up to the max's hold anything */
        memcpy(to->counts, from->counts, (soak_slot(from->max) + 1) * sizeof *to->counts);
    return 0;
}

/* Engine.stopped_sending_ns: a spent count's sending ends with its last send's slot. */
static int64_t stopped_sending(const soak_engine *e)
{
    if (e->stopped_ns != SOAK_NONE && e->count_end_ns != SOAK_NONE && e->count_end_ns > e->stopped_ns)
        return e->count_end_ns;
    return e->stopped_ns;
}

int64_t soak_engine_stopped_sending(soak_engine *e)
{
    pthread_mutex_lock(&e->lock);
    int64_t stopped = stopped_sending(e);
    pthread_mutex_unlock(&e->lock);
    return stopped;
}

int soak_engine_figures(soak_engine *e, soak_figures *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&e->lock);
    out->sent = e->sent;
    out->stopped_sending_ns = stopped_sending(e);
    out->connections = e->connections;
    memcpy(out->tls_connections, e->tls_connections, sizeof out->tls_connections);
    out->opened = e->opened;
    out->closed = e->closed;
    out->finished = e->finished;
    out->fatal = e->fatal;
    int failed = hist_copy(&out->send_lag, &e->send_lag) | hist_copy(&out->lateness, &e->lateness) |
                 hist_copy(&out->uncorrected, &e->uncorrected) | hist_copy(&out->in_unit, &e->in_unit);
    if (e->bench != NULL) {
        soak_bench *b = &out->bench;
        out->has_bench = 1;
        *b = *e->bench;
        b->waiting.counts = b->total_reused.counts = b->connect_new.counts = NULL;
        b->processing_new.counts = b->total_new.counts = NULL;
        failed |= hist_copy(&b->waiting, &e->bench->waiting) | hist_copy(&b->total_reused, &e->bench->total_reused) |
                  hist_copy(&b->connect_new, &e->bench->connect_new) |
                  hist_copy(&b->processing_new, &e->bench->processing_new) |
                  hist_copy(&b->total_new, &e->bench->total_new);
    }
    pthread_mutex_unlock(&e->lock);
    if (failed) {
        soak_figures_free(out);
        return -1;
    }
    return 0;
}

void soak_figures_free(soak_figures *f)
{
    soak_hist_free(&f->send_lag);
    soak_hist_free(&f->lateness);
    soak_hist_free(&f->uncorrected);
    soak_hist_free(&f->in_unit);
    if (f->has_bench)
        bench_free(&f->bench);
    memset(f, 0, sizeof *f);
}

int soak_engine_done_fd(const soak_engine *e) { return e->done_fd; }

uint64_t soak_engine_sent(const soak_engine *e) { return SOAK_LOAD(e->sent); }

uint64_t soak_engine_done(const soak_engine *e) { return SOAK_LOAD(e->done); }

int soak_engine_step_fd(const soak_engine *e) { return e->step_fd; }

int soak_engine_step_at(soak_engine *e, uint64_t at)
{
    uint64_t count;
    ssize_t got = read(e->step_fd, &count, sizeof count); /* a step already told is not told again */
    (void)got;
    __atomic_store_n(&e->step_at, at, __ATOMIC_SEQ_CST);
    return SOAK_LOAD(e->done) >= at;
}

int64_t soak_engine_next_index(soak_engine *e)
{
    pthread_mutex_lock(&e->lock);
    int64_t next = e->next;
    pthread_mutex_unlock(&e->lock);
    return next;
}

const soak_metrics *soak_engine_metrics(const soak_engine *e) { return &e->metrics; }

int soak_engine_metrics_copy(soak_engine *e, soak_metrics *into)
{
    memset(into, 0, sizeof *into);
    if (metrics_init(into, &e->cfg) < 0) {
        metrics_free(into);
        return -1;
    }
    const soak_metrics *m = &e->metrics;
    size_t slots = m->slots;
    pthread_mutex_lock(&e->lock); /* the engine files a result whole while it holds it */
    into->skipped = m->skipped, into->late = m->late, into->opened = m->opened, into->closed = m->closed;
    if (slots) {
        memcpy(into->statuses, m->statuses, slots * SOAK_STATUSES * sizeof(uint64_t));
        memcpy(into->failures, m->failures, slots * SOAK_KINDS * sizeof(uint64_t));
        memcpy(into->good, m->good, slots * m->places * sizeof(uint64_t));
        memcpy(into->bad, m->bad, slots * m->places * sizeof(uint64_t));
        memcpy(into->good_ns, m->good_ns, slots * sizeof(uint64_t));
        memcpy(into->bad_ns, m->bad_ns, slots * sizeof(uint64_t));
    }
    pthread_mutex_unlock(&e->lock);
    return 0;
}

void soak_metrics_free(soak_metrics *m) { metrics_free(m); }
