/*
 * runner.load.native._engine: the native engine (core.c) seen from Python.
 *
 * One Engine runs one process's clients of a run for HTTP/1.1 (over TLS too, where it was
 * built with OpenSSL: the module's TLS is 1) in a thread of its own,
 * with the GIL released the whole time: no Python runs per request. Python configures it,
 * starts it, takes each interval's aggregates as the interval closes, stops it, and reads
 * the run-wide figures at the end. runner/load/native/engine.py and runner/stats/native.py
 * are the Python side; this is the whole contract between them.
 *
 *   Engine(config: Config)    everything, in plain ints, floats, bytes and tuples (each field's
 *                             type is in records.py):
 *     targets        [(request bytes, last request bytes (with Connection: close), is_head,
 *                      body_bytes_out, origin)], index = URL index (send n goes to
 *                      targets[n % len]); origin: targets of one origin share connections
 *     origins        [[(family, sockaddr as connect() takes it, address_text), ...]], index =
 *                      origin: its addresses in the resolver's order; new connections rotate
 *                      through them as transport.in_turn does, trying the next on failure
 *     max_requests, max_age_ns   transport.Lifetime (0: no limit), decided at each send
 *     model          "closed" | "open" | "bench"
 *     clients, max_in_flight (open), total_requests (0: no limit)
 *     start_ns, qps, end_ns (None: no end), stride, offset   runner.load.schedule.Schedule
 *     dues           None (a constant qps), or a ramp's due times in ns from start_ns, as
 *                      Ramp.due_times makes them: a buffer of native int64 (array("q"))
 *     grid_start_ns, interval_ns                             runner.load.schedule.Grid
 *     timeout_ns, timeout_text (format_duration's), keep_alive, corrected (latency from
 *     the due time), unit_ns (0: no in-unit histogram)
 *     late_ns, probe_ns, gap_ns, max_head, error_groups, group_urls, other_lengths: the
 *     Python constants (probe_ns, gap_ns: the loop lag's, runner.stats.client)
 *     metrics        None, or (slot_of tuple, slots, edges_ns tuple): MetricsTally's counts
 *     backend_header "" or a header name (a token, at most 64 bytes): each response's value
 *                      of it counted in the tallies' backends
 *     wheel          None, or a tuple of URL indices: send n goes to targets[wheel[n % len]]
 *                      (runner.config.targets.Targets.wheel) instead of targets[n % len]
 *     url_slots      None, or (slot_of tuple, slots): a tally per slot for the run (Recorder.per_url)
 *     hash_sample_rate, hash_value   each send's body hashed (FNV-1a 64) when random() <
 *                      hash_sample_rate (0: none), each hashed response counted in the tallies'
 *                      hash_checked, and in hash_mismatches when its hash is not hash_value
 *     inflate, inflate_step, max_inflated   a hashed body that says gzip is inflated first
 *                      (compress), inflate_step bytes at a time, failing past max_inflated
 *                      (runner.load.bodyhash's bounds)
 *     body_texts     what a hashed body's failures are called (runner.load.bodyhash.BODY_TEXTS):
 *                      (text before zlib's reason, after it, inflates too far, ends too early)
 *     tls            None (no https origin), or the run's TLS client (tls.h), a TlsClient:
 *                      ca_file, cert_file, key_file ("": none), insecure, ciphers (TLS 1.2's
 *                      list), verify_failed (what a failed certificate check's text begins
 *                      with), reasons [(lib, reason, text)]: OpenSSL's codes and the failure
 *                      text each is named by
 *     origins_tls    [None (plain HTTP) or an OriginTls (host, numeric, mismatch)] per origin:
 *                      the name checked (and sent as SNI unless numeric), and the text of a
 *                      certificate that does not cover it
 *   start()                   start the thread (once)
 *   fileno() -> int           an eventfd that becomes readable when the thread has ended
 *   step_fileno() -> int      an eventfd that becomes readable when done reaches step_at's n
 *   step_at(n) -> bool        tell through step_fileno() once done reaches n (a step told before
 *                             forgotten); True if it already has (then it may be told too)
 *   stop(at_ns)               send nothing more; the first stop's time counts (Engine.stop)
 *   cancel()                  every request in flight ends as `cancelled` (Engine.cancel_in_flight)
 *   drain_from(t_ns)          results ending at or after t_ns are the drain (Recorder.drain_from)
 *   set_addresses(origin, addresses, failure="")   the origin's addresses from now on (any
 *                             thread); with none ([]), `failure` instead: the text of the
 *                             `dns` failure each new connection to it then ends as
 *   take(k, final=False, until_ns=None) -> Taken
 *                             interval k (the next untaken one) as Recorder.close files it,
 *                             open clients' skips due before until_ns (default: its end)
 *                             counted in it first; with final, the later intervals', the
 *                             drain and each URL slot's tally for the run too
 *   figures() -> RunFigures   run-wide, copied (live or after the end)
 *   metrics() -> MetricsCounts | None   MetricsTally's counts, read while the thread runs
 *   join()                    wait for the thread to end
 *   sent, done, next_index, stopped_sending_ns   properties (done: sends ended and counted;
 *                             stopped_sending_ns: None, or as Engine's)
 *
 * For tests: counts_len(highest) (hdrh's counts_len) and schedule(..., dues=None) (schedule.h's
 * answers, a ramp's with its due times, to hold to runner/load/schedule.py's on any input).
 *
 * The records (Config in, Taken, RunFigures, MetricsCounts and what they hold out) are the
 * Record classes of runner/load/native/records.py (tuples with named fields), each the table
 * of its fields below (RECORDS), checked against it as the module loads. A histogram is a
 * HistogramCounts: its counts a Counts object (a writable buffer of hdrhistogram's counts
 * array, owned by it, handed over without a copy) or None when empty;
 * LatencyHistogram.from_counts takes it as it is.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "core.h"

/* --- the records: one table of fields each, the Record classes of records.py --------- */

#define CONFIG_FIELDS(F)                                                                                   \
    F(targets) F(model) F(clients) F(max_in_flight) F(total_requests) F(start_ns) F(qps) F(end_ns) F(stride)  \
    F(offset) F(dues) F(grid_start_ns) F(interval_ns) F(timeout_ns) F(timeout_text) F(keep_alive) F(corrected)       \
    F(unit_ns) F(late_ns) F(probe_ns) F(gap_ns) F(max_head) F(error_groups) F(group_urls) F(other_lengths)   \
    F(metrics) F(backend_header) F(wheel) F(url_slots) F(origins) F(max_requests) F(max_age_ns)                 \
    F(hash_sample_rate) F(hash_value) F(inflate) F(inflate_step) F(max_inflated) F(body_texts)   \
    F(tls) F(origins_tls)
#define TLS_FIELDS(F) F(ca_file) F(cert_file) F(key_file) F(insecure) F(ciphers) F(verify_failed) F(reasons)
#define ORIGIN_TLS_FIELDS(F) F(host) F(numeric) F(mismatch)
#define HIST_FIELDS(F) F(counts) F(total) F(min) F(max) F(sum) F(sum_sq)
#define GROUP_FIELDS(F) F(kind) F(pattern) F(total) F(text) F(url) F(urls) F(more_urls) F(varied)
#define TALLY_FIELDS(F)                                                                                    \
    F(good) F(bad) F(failed) F(skipped) F(skipped_at_end) F(late) F(late_max_ns) F(delayed_max_ns)         \
    F(kernel_clocked) F(bytes_in) F(bytes_out) F(statuses) F(errors) F(groups) F(latency) F(phases)        \
    F(backends) F(other_backends) F(opened) F(closed)         \
    F(hash_checked) F(hash_mismatches)
#define TAKEN_FIELDS(F)                                                                                    \
    F(tally) F(later) F(drain) F(drain_end_ns) F(loop_lag) F(stalls) F(next_tick_ns) F(opened) F(closed)    \
    F(per_url)
#define BENCH_FIELDS(F)                                                                                    \
    F(waiting) F(total_reused) F(connect_new) F(processing_new) F(total_new) F(document_length)             \
    F(length_mismatches) F(kept_alive) F(header_bytes) F(server) F(last_end_ns) F(first_response_ns)       \
    F(server_ns) F(other_lengths)
#define FIGURES_FIELDS(F)                                                                                  \
    F(sent) F(stopped_sending_ns) F(send_lag) F(lateness) F(uncorrected) F(in_unit) F(connections)          \
    F(tls_connections) F(opened) F(closed) F(finished) F(fatal) F(bench)
#define METRICS_FIELDS(F)                                                                                  \
    F(skipped) F(late) F(opened) F(closed) F(statuses) F(failures) F(good) F(bad) F(good_ns) F(bad_ns)

#define FIELD_NAME(name) #name,
#define CONFIG_INDEX(name) CONFIG_##name,
#define TLS_INDEX(name) TLS_##name,
#define ORIGIN_TLS_INDEX(name) ORIGIN_TLS_##name,
#define HIST_INDEX(name) HIST_##name,
#define GROUP_INDEX(name) GROUP_##name,
#define TALLY_INDEX(name) TALLY_##name,
#define TAKEN_INDEX(name) TAKEN_##name,
#define BENCH_INDEX(name) BENCH_##name,
#define FIGURES_INDEX(name) FIGURES_##name,
#define METRICS_INDEX(name) METRICS_##name,
enum { CONFIG_FIELDS(CONFIG_INDEX) CONFIG_N };
enum { TLS_FIELDS(TLS_INDEX) TLS_N };
enum { ORIGIN_TLS_FIELDS(ORIGIN_TLS_INDEX) ORIGIN_TLS_N };
enum { HIST_FIELDS(HIST_INDEX) HIST_N };
enum { GROUP_FIELDS(GROUP_INDEX) GROUP_N };
enum { TALLY_FIELDS(TALLY_INDEX) TALLY_N };
enum { TAKEN_FIELDS(TAKEN_INDEX) TAKEN_N };
enum { BENCH_FIELDS(BENCH_INDEX) BENCH_N };
enum { FIGURES_FIELDS(FIGURES_INDEX) FIGURES_N };
enum { METRICS_FIELDS(METRICS_INDEX) METRICS_N };

static const char *const CONFIG_NAMES[] = {CONFIG_FIELDS(FIELD_NAME)};
static const char *const TLS_NAMES[] = {TLS_FIELDS(FIELD_NAME)};
static const char *const ORIGIN_TLS_NAMES[] = {ORIGIN_TLS_FIELDS(FIELD_NAME)};
static const char *const HIST_NAMES[] = {HIST_FIELDS(FIELD_NAME)};
static const char *const GROUP_NAMES[] = {GROUP_FIELDS(FIELD_NAME)};
static const char *const TALLY_NAMES[] = {TALLY_FIELDS(FIELD_NAME)};
static const char *const TAKEN_NAMES[] = {TAKEN_FIELDS(FIELD_NAME)};
static const char *const BENCH_NAMES[] = {BENCH_FIELDS(FIELD_NAME)};
static const char *const FIGURES_NAMES[] = {FIGURES_FIELDS(FIELD_NAME)};
static const char *const METRICS_NAMES[] = {METRICS_FIELDS(FIELD_NAME)};

typedef struct {
    const char *name;          /* its class in records.py */
    const char *const *fields; /* its table */
    Py_ssize_t n;
    PyTypeObject *type;        /* the class, once loaded (records_load) */
} record_kind;

enum { R_CONFIG, R_TLS, R_ORIGIN_TLS, R_HIST, R_GROUP, R_TALLY, R_TAKEN, R_BENCH, R_FIGURES, R_METRICS, R_KINDS };
static record_kind RECORDS[R_KINDS] = {
    {"Config", CONFIG_NAMES, CONFIG_N, NULL},      {"TlsClient", TLS_NAMES, TLS_N, NULL},
    {"OriginTls", ORIGIN_TLS_NAMES, ORIGIN_TLS_N, NULL},
    {"HistogramCounts", HIST_NAMES, HIST_N, NULL},
    {"GroupCounts", GROUP_NAMES, GROUP_N, NULL},   {"TallyCounts", TALLY_NAMES, TALLY_N, NULL},
    {"Taken", TAKEN_NAMES, TAKEN_N, NULL},         {"BenchCounts", BENCH_NAMES, BENCH_N, NULL},
    {"RunFigures", FIGURES_NAMES, FIGURES_N, NULL}, {"MetricsCounts", METRICS_NAMES, METRICS_N, NULL},
};

/* Each record's class from runner.load.native.records, checked against its table: 0, or -1 with
 * a TypeError naming the first field that differs (not an ImportError: an engine and records that
 * disagree are a broken build, never taken for an engine that is not there). */
static int records_load(void)
{
    PyObject *module = PyImport_ImportModule("runner.load.native.records");
    if (module == NULL)
        return -1;
    for (int r = 0; r < R_KINDS; r++) {
        record_kind *kind = &RECORDS[r];
        PyObject *cls = PyObject_GetAttrString(module, kind->name);
        PyObject *fields = cls != NULL ? PyObject_GetAttrString(cls, "_fields") : NULL;
        int ok = fields != NULL && PyType_Check(cls) && PyType_IsSubtype((PyTypeObject *)cls, &PyTuple_Type) &&
                 PyTuple_Check(fields);
        for (Py_ssize_t i = 0; ok && i < kind->n; i++) {
            const char *have = i < PyTuple_GET_SIZE(fields) ? PyUnicode_AsUTF8(PyTuple_GET_ITEM(fields, i)) : "";
            if (have == NULL || strcmp(have, kind->fields[i]) != 0) {
                PyErr_Clear();
                PyErr_Format(PyExc_TypeError, "records.%s: field %zd is %s in the engine's table, %s here",
                             kind->name, i, kind->fields[i], have != NULL && *have ? have : "missing");
                ok = 0;
            }
        }
        if (ok && PyTuple_GET_SIZE(fields) != kind->n) {
            PyErr_Format(PyExc_TypeError, "records.%s: %zd fields here, %zd in the engine's table", kind->name,
                         PyTuple_GET_SIZE(fields), kind->n);
            ok = 0;
        }
        if (!ok && !PyErr_Occurred())
            PyErr_Format(PyExc_TypeError, "records.%s is not a tuple with _fields", kind->name);
        Py_XDECREF(fields);
        if (!ok) {
            Py_XDECREF(cls);
            Py_DECREF(module);
            return -1;
        }
        Py_XSETREF(kind->type, (PyTypeObject *)cls);
    }
    Py_DECREF(module);
    return 0;
}

/* A new record of kind `r`, its fields still empty: each is set once (record_set). */
static PyObject *record_new(int r)
{
    PyTypeObject *type = RECORDS[r].type;
    return type->tp_alloc(type, RECORDS[r].n);
}

/* Set field `i` of a new record to `value` (a new reference, or NULL after an error); 0, or -1. */
static int record_set(PyObject *record, Py_ssize_t i, PyObject *value)
{
    if (value == NULL)
        return -1;
    PyTuple_SET_ITEM(record, i, value);
    return 0;
}

static PyObject *u64(uint64_t value) { return PyLong_FromUnsignedLongLong(value); }

static PyObject *i64(int64_t value) { return PyLong_FromLongLong(value); }

/* An int, or None for SOAK_NONE. */
static PyObject *i64_or_none(int64_t value) { return value == SOAK_NONE ? Py_NewRef(Py_None) : i64(value); }

/* --- Counts: a histogram's counts array, as a buffer ---------------------------------- */

typedef struct {
    PyObject_HEAD
    uint64_t *counts;
    Py_ssize_t len;
} CountsObject;

static void counts_dealloc(CountsObject *self)
{
    free(self->counts);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int counts_getbuffer(CountsObject *self, Py_buffer *view, int flags)
{
    return PyBuffer_FillInfo(view, (PyObject *)self, self->counts, self->len * (Py_ssize_t)sizeof(uint64_t), 0,
                             flags);
}

static Py_ssize_t counts_length(CountsObject *self) { return self->len; }

static PyBufferProcs counts_buffer = {(getbufferproc)counts_getbuffer, NULL};
static PySequenceMethods counts_sequence = {.sq_length = (lenfunc)counts_length};

static PyTypeObject CountsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "runner.load.native._engine.Counts",
    .tp_basicsize = sizeof(CountsObject),
    .tp_dealloc = (destructor)counts_dealloc,
    .tp_as_buffer = &counts_buffer,
    .tp_as_sequence = &counts_sequence,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A histogram's counts (hdrhistogram's layout, 64-bit), as a writable buffer.",
};

/* --- small conversions ---------------------------------------------------------------- */

static PyObject *u128(soak_u128 v)
{
    if ((v >> 64) == 0)
        return PyLong_FromUnsignedLongLong((unsigned long long)v);
    PyObject *high = PyLong_FromUnsignedLongLong((unsigned long long)(v >> 64));
    PyObject *low = PyLong_FromUnsignedLongLong((unsigned long long)v);
    PyObject *shift = PyLong_FromLong(64);
    PyObject *shifted = high && shift ? PyNumber_Lshift(high, shift) : NULL;
    PyObject *whole = shifted && low ? PyNumber_Or(shifted, low) : NULL;
    Py_XDECREF(high);
    Py_XDECREF(low);
    Py_XDECREF(shift);
    Py_XDECREF(shifted);
    return whole;
}

/* A HistogramCounts, taking the counts over (h has none after). */
static PyObject *histogram(soak_hist *h)
{
    PyObject *counts;
    if (h->count == 0 || h->counts == NULL) {
        soak_hist_free(h);
        counts = Py_NewRef(Py_None);
    } else {
        CountsObject *c = PyObject_New(CountsObject, &CountsType);
        if (c == NULL)
            return NULL;
        c->counts = h->counts;
        c->len = h->len;
        h->counts = NULL;
        counts = (PyObject *)c;
    }
    PyObject *record = counts != NULL ? record_new(R_HIST) : NULL;
    if (record == NULL) {
        Py_XDECREF(counts);
        return NULL;
    }
    if (record_set(record, HIST_counts, counts) || record_set(record, HIST_total, u64(h->count)) ||
        record_set(record, HIST_min, PyLong_FromLongLong(h->min)) ||
        record_set(record, HIST_max, PyLong_FromLongLong(h->max)) || record_set(record, HIST_sum, u128(h->sum)) ||
        record_set(record, HIST_sum_sq, u128(h->sum_sq)))
        Py_CLEAR(record);
    return record;
}

/* A histogram the engine keeps only in some runs: None where it was not kept. */
static PyObject *kept_histogram(soak_hist *h)
{
    if (h->len == 0)
        Py_RETURN_NONE;
    return histogram(h);
}

static PyObject *group_record(const soak_group *g)
{
    PyObject *urls = PyTuple_New(g->nurls);
    if (urls == NULL)
        return NULL;
    for (uint32_t i = 0; i < g->nurls; i++) {
        PyObject *url = PyLong_FromUnsignedLong(g->urls[i]);
        if (url == NULL) {
            Py_DECREF(urls);
            return NULL;
        }
        PyTuple_SET_ITEM(urls, i, url);
    }
    PyObject *record = record_new(R_GROUP);
    if (record == NULL) {
        Py_DECREF(urls);
        return NULL;
    }
    if (record_set(record, GROUP_urls, urls) || record_set(record, GROUP_kind, PyUnicode_FromString(soak_kind_names[g->kind])) ||
        record_set(record, GROUP_pattern, PyUnicode_FromString(g->pattern)) || record_set(record, GROUP_total, u64(g->count)) ||
        record_set(record, GROUP_text, PyUnicode_FromString(g->text)) ||
        record_set(record, GROUP_url, PyLong_FromUnsignedLong(g->url)) ||
        record_set(record, GROUP_more_urls, PyBool_FromLong(g->more_urls)) ||
        record_set(record, GROUP_varied, PyBool_FromLong(g->varied)))
        Py_CLEAR(record);
    return record;
}

/* A tally's phases (PhaseTally's parts): (connect_new, tls_new, ttfb, body, reused), histograms taken over. */
static PyObject *phases_tuple(soak_tally *t)
{
    PyObject *connect = histogram(&t->phase_connect), *tls = histogram(&t->phase_tls),
             *ttfb = histogram(&t->phase_ttfb), *body = histogram(&t->phase_body);
    if (connect == NULL || tls == NULL || ttfb == NULL || body == NULL) {
        Py_XDECREF(connect);
        Py_XDECREF(tls);
        Py_XDECREF(ttfb);
        Py_XDECREF(body);
        return NULL;
    }
    return Py_BuildValue("(NNNNK)", connect, tls, ttfb, body, (unsigned long long)t->phase_reused);
}

/* A tally's backends as [(value bytes, count)], in the order met. */
static PyObject *backends_list(const soak_backends *b)
{
    PyObject *list = PyList_New(0);
    for (uint32_t i = 0; list != NULL && b != NULL && i < b->n; i++) {
        PyObject *one = Py_BuildValue("(y#K)", b->kept[i].name, (Py_ssize_t)b->kept[i].len,
                                      (unsigned long long)b->kept[i].count);
        if (one == NULL || PyList_Append(list, one) < 0) {
            Py_XDECREF(one);
            Py_CLEAR(list);
            break;
        }
        Py_DECREF(one);
    }
    return list;
}

/* {code: n} of the statuses seen. */
static PyObject *statuses_dict(const soak_tally *t)
{
    PyObject *statuses = PyDict_New();
    for (int code = 0; statuses != NULL && code < SOAK_STATUSES; code++) {
        if (!t->statuses[code])
            continue;
        PyObject *key = PyLong_FromLong(code), *n = u64(t->statuses[code]);
        if (key == NULL || n == NULL || PyDict_SetItem(statuses, key, n) < 0)
            Py_CLEAR(statuses);
        Py_XDECREF(key);
        Py_XDECREF(n);
    }
    return statuses;
}

/* {kind: n} of the failures seen. */
static PyObject *errors_dict(const soak_tally *t)
{
    PyObject *errors = PyDict_New();
    for (int kind = 0; errors != NULL && kind < SOAK_KINDS; kind++) {
        if (!t->errors[kind])
            continue;
        PyObject *n = u64(t->errors[kind]);
        if (n == NULL || PyDict_SetItemString(errors, soak_kind_names[kind], n) < 0)
            Py_CLEAR(errors);
        Py_XDECREF(n);
    }
    return errors;
}

static PyObject *groups_list(const soak_tally *t)
{
    PyObject *groups = PyList_New(t->ngroups);
    for (uint32_t i = 0; groups != NULL && i < t->ngroups; i++) {
        PyObject *g = group_record(&t->groups[i]);
        if (g == NULL)
            Py_CLEAR(groups);
        else
            PyList_SET_ITEM(groups, i, g);
    }
    return groups;
}

/* A TallyCounts, its histograms taken over; None for an interval nothing landed in (t NULL). */
static PyObject *tally_record(soak_tally *t)
{
    if (t == NULL)
        Py_RETURN_NONE;
    PyObject *record = record_new(R_TALLY);
    if (record == NULL)
        return NULL;
    if (record_set(record, TALLY_good, u64(t->good)) || record_set(record, TALLY_bad, u64(t->bad)) ||
        record_set(record, TALLY_failed, u64(t->failed)) || record_set(record, TALLY_skipped, u64(t->skipped)) ||
        record_set(record, TALLY_skipped_at_end, u64(t->skipped_at_end)) ||
        record_set(record, TALLY_late, u64(t->late)) || record_set(record, TALLY_late_max_ns, i64(t->late_max_ns)) ||
        record_set(record, TALLY_delayed_max_ns, i64(t->delayed_max_ns)) ||
        record_set(record, TALLY_kernel_clocked, u64(t->kernel_clocked)) ||
        record_set(record, TALLY_bytes_in, u64(t->bytes_in)) || record_set(record, TALLY_bytes_out, u64(t->bytes_out)) ||
        record_set(record, TALLY_statuses, statuses_dict(t)) || record_set(record, TALLY_errors, errors_dict(t)) ||
        record_set(record, TALLY_groups, groups_list(t)) || record_set(record, TALLY_latency, histogram(&t->latency)) ||
        record_set(record, TALLY_phases, phases_tuple(t)) ||
        record_set(record, TALLY_backends, backends_list(t->backends)) ||
        record_set(record, TALLY_other_backends, u64(t->backends != NULL ? t->backends->other : 0)) ||
        record_set(record, TALLY_opened, u64(t->opened)) || record_set(record, TALLY_closed, u64(t->closed)) ||
        record_set(record, TALLY_hash_checked, u64(t->hash_checked)) ||
        record_set(record, TALLY_hash_mismatches, u64(t->hash_mismatches)))
        Py_CLEAR(record);
    return record;
}

/* --- reading the config --------------------------------------------------------------- */

/* Field `field` of a record (borrowed); the caller has checked it is one (read_config, is_record). */
static PyObject *item(PyObject *config, int field) { return PyTuple_GET_ITEM(config, field); }

static int get_i64(PyObject *config, int field, int64_t *out)
{
    PyObject *value = item(config, field);
    long long v = PyLong_AsLongLong(value);
    if (v == -1 && PyErr_Occurred())
        return -1;
    *out = v;
    return 0;
}

static int get_u32(PyObject *config, int field, uint32_t *out)
{
    int64_t v;
    if (get_i64(config, field, &v) < 0)
        return -1;
    if (v < 0 || v > UINT32_MAX) {
        PyErr_Format(PyExc_ValueError, "native engine config: %s out of range", CONFIG_NAMES[field]);
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

static int get_bool(PyObject *config, int field, int *out)
{
    PyObject *value = item(config, field);
    int v = PyObject_IsTrue(value);
    if (v < 0)
        return -1;
    *out = v;
    return 0;
}

/* One address tuple (family, sockaddr as connect() takes it, text) into `a`. */
static int read_address(PyObject *tuple, soak_address *a)
{
    int family;
    PyObject *address;
    const char *text;
    Py_ssize_t text_len;
    if (!PyArg_ParseTuple(tuple, "iO!s#;an address is (family, sockaddr, text)", &family, &PyTuple_Type, &address,
                          &text, &text_len))
        return -1;
    const char *host;
    int port;
    unsigned int flow = 0, scope = 0;
    if (!PyArg_ParseTuple(address, "si|II;a sockaddr is (host, port[, flowinfo, scope_id])", &host, &port, &flow,
                          &scope))
        return -1;
    memset(a, 0, sizeof *a);
    if (family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)&a->addr;
        in->sin_family = AF_INET;
        in->sin_port = htons((uint16_t)port);
        a->addr_len = sizeof *in;
        if (inet_pton(AF_INET, host, &in->sin_addr) != 1)
            goto bad;
    } else if (family == AF_INET6) {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&a->addr;
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        in6->sin6_flowinfo = htonl(flow);
        in6->sin6_scope_id = scope;
        a->addr_len = sizeof *in6;
        if (inet_pton(AF_INET6, host, &in6->sin6_addr) != 1)
            goto bad;
    } else {
        goto bad;
    }
    if (port < 0 || port > 65535 || (size_t)text_len >= sizeof a->text)
        goto bad;
    a->family = family;
    memcpy(a->text, text, (size_t)text_len);
    a->text[text_len] = '\0';
    return 0;
bad:
    PyErr_Format(PyExc_ValueError, "native engine config: the address %R is not a numeric IPv4/IPv6 one", address);
    return -1;
}

/* A list of address tuples into a new array (n >= 1), or NULL with an exception. */
static soak_address *read_addresses(PyObject *list, uint32_t *n)
{
    PyObject *seq = PySequence_Fast(list, "native engine config: an origin's addresses must be a list");
    if (seq == NULL)
        return NULL;
    Py_ssize_t len = PySequence_Fast_GET_SIZE(seq);
    if (len < 1 || len > 65536) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "native engine config: an origin needs 1 to 65536 addresses");
        return NULL;
    }
    soak_address *addrs = calloc((size_t)len, sizeof *addrs);
    if (addrs == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        if (read_address(PySequence_Fast_GET_ITEM(seq, i), &addrs[i]) < 0) {
            free(addrs);
            Py_DECREF(seq);
            return NULL;
        }
    }
    Py_DECREF(seq);
    *n = (uint32_t)len;
    return addrs;
}

static int read_origins(PyObject *config, soak_config *cfg)
{
    PyObject *list = item(config, CONFIG_origins);
    PyObject *seq = PySequence_Fast(list, "native engine config: origins must be a list");
    if (seq == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if ((uint32_t)n != cfg->norigins) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "native engine config: origins needs one address list per origin");
        return -1;
    }
    cfg->origins = calloc(n ? (size_t)n : 1, sizeof *cfg->origins);
    if (cfg->origins == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        soak_origin *o = &cfg->origins[i];
        o->addrs = read_addresses(PySequence_Fast_GET_ITEM(seq, i), &o->naddrs);
        if (o->addrs == NULL) {
            Py_DECREF(seq);
            return -1;
        }
        o->nown = soak_addresses_order(o->addrs, o->naddrs);
    }
    Py_DECREF(seq);
    return 0;
}

static unsigned char *copied(const char *data, Py_ssize_t len)
{
    unsigned char *copy = malloc((size_t)len);
    if (copy == NULL)
        PyErr_NoMemory();
    else
        memcpy(copy, data, (size_t)len);
    return copy;
}

/* One target tuple into `t` (its request bytes copied). */
static int read_target(PyObject *tuple, soak_target *t)
{
    int is_head;
    const char *request, *last;
    Py_ssize_t request_len, last_len;
    unsigned long long body_out;
    unsigned int origin;
    if (!PyArg_ParseTuple(tuple, "y#y#pKI;a target is (request, last_request, is_head, body_out, origin)",
                          &request, &request_len, &last, &last_len, &is_head, &body_out, &origin))
        return -1;
    if (request_len == 0 || last_len == 0) {
        PyErr_SetString(PyExc_ValueError, "native engine config: a target's request is empty");
        return -1;
    }
    t->origin = origin;
    t->is_head = is_head;
    t->body_bytes_out = body_out;
    t->request = copied(request, request_len);
    t->last_request = copied(last, last_len);
    if (t->request == NULL || t->last_request == NULL)
        return -1;
    t->request_len = (size_t)request_len;
    t->last_request_len = (size_t)last_len;
    return 0;
}

static int read_targets(PyObject *config, soak_config *cfg)
{
    PyObject *list = item(config, CONFIG_targets);
    PyObject *seq = PySequence_Fast(list, "native engine config: targets must be a list");
    if (seq == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    cfg->targets = calloc(n ? (size_t)n : 1, sizeof *cfg->targets);
    if (cfg->targets == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        cfg->ntargets = (uint32_t)i + 1; /* freed with the config from here on */
        if (read_target(PySequence_Fast_GET_ITEM(seq, i), &cfg->targets[i]) < 0) {
            Py_DECREF(seq);
            return -1;
        }
        if (cfg->targets[i].origin >= cfg->norigins)
            cfg->norigins = cfg->targets[i].origin + 1;
    }
    Py_DECREF(seq);
    return read_origins(config, cfg);
}

/* A tuple of ints into a new array of `n` of them. */
static int64_t *int_array(PyObject *tuple, const char *what, uint32_t *n)
{
    PyObject *seq = PySequence_Fast(tuple, what);
    if (seq == NULL)
        return NULL;
    Py_ssize_t len = PySequence_Fast_GET_SIZE(seq);
    int64_t *values = malloc((len ? (size_t)len : 1) * sizeof *values);
    if (values == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        values[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
        if (values[i] == -1 && PyErr_Occurred()) {
            free(values);
            Py_DECREF(seq);
            return NULL;
        }
    }
    *n = (uint32_t)len;
    Py_DECREF(seq);
    return values;
}

static int read_metrics(PyObject *config, soak_config *cfg)
{
    PyObject *metrics = item(config, CONFIG_metrics);
    if (metrics == Py_None)
        return 0;
    PyObject *slot_of, *edges;
    unsigned int slots;
    if (!PyArg_ParseTuple(metrics, "OIO;metrics is (slot_of, slots, edges_ns)", &slot_of, &slots, &edges))
        return -1;
    uint32_t nslot_of;
    int64_t *slot_values = int_array(slot_of, "metrics: slot_of must be a tuple of ints", &nslot_of);
    if (slot_values == NULL)
        return -1;
    cfg->slot_of = malloc((nslot_of ? nslot_of : 1) * sizeof *cfg->slot_of);
    if (cfg->slot_of == NULL) {
        free(slot_values);
        PyErr_NoMemory();
        return -1;
    }
    for (uint32_t i = 0; i < nslot_of; i++)
        cfg->slot_of[i] = slot_values[i] < 0 ? UINT32_MAX : (uint32_t)slot_values[i];
    free(slot_values);
    cfg->edges = int_array(edges, "metrics: edges_ns must be a tuple of ints", &cfg->nedges);
    if (cfg->edges == NULL)
        return -1;
    if (nslot_of != cfg->ntargets || slots == 0) {
        PyErr_SetString(PyExc_ValueError, "native engine config: metrics slot_of needs a slot per target");
        return -1;
    }
    cfg->nslots = slots;
    return 0;
}

/* A tuple of URL indices (or slots), each below `below`, into a new array; NULL with an error. */
static uint32_t *index_array(PyObject *tuple, const char *what, uint32_t below, uint32_t *n)
{
    int64_t *values = int_array(tuple, what, n);
    if (values == NULL)
        return NULL;
    uint32_t *indices = malloc((*n ? *n : 1) * sizeof *indices);
    if (indices == NULL)
        PyErr_NoMemory();
    for (uint32_t i = 0; indices != NULL && i < *n; i++) {
        if (values[i] < 0 || values[i] >= below) {
            PyErr_Format(PyExc_ValueError, "native engine config: %s out of range", what);
            free(indices);
            indices = NULL;
            break;
        }
        indices[i] = (uint32_t)values[i];
    }
    free(values);
    return indices;
}

/* dues: a ramp's due times (schedule.h), copied from the buffer Ramp.due_times made. */
static int read_dues(PyObject *config, soak_config *cfg)
{
    PyObject *dues = item(config, CONFIG_dues);
    if (dues == Py_None)
        return 0;
    Py_buffer view;
    if (PyObject_GetBuffer(dues, &view, PyBUF_FORMAT) < 0)
        return -1;
    int ok = view.itemsize == 8 && view.format != NULL && strchr("qlQL", view.format[0]) != NULL && view.len >= 16;
    if (ok)
        cfg->schedule.dues = malloc((size_t)view.len);
    if (cfg->schedule.dues != NULL) {
        memcpy(cfg->schedule.dues, view.buf, (size_t)view.len);
        cfg->schedule.ndues = view.len / 8;
    }
    PyBuffer_Release(&view);
    if (!ok)
        PyErr_SetString(PyExc_TypeError, "native engine config: dues must be an array('q') of at least 2");
    else if (cfg->schedule.dues == NULL)
        PyErr_NoMemory();
    return cfg->schedule.dues != NULL ? 0 : -1;
}

/* backend_header, wheel and url_slots: what counting backends and URLs apart needs. */
static int read_counting(PyObject *config, soak_config *cfg)
{
    PyObject *header = item(config, CONFIG_backend_header), *wheel = item(config, CONFIG_wheel);
    PyObject *slots = item(config, CONFIG_url_slots);
    Py_ssize_t len;
    const char *name = PyUnicode_Check(header) ? PyUnicode_AsUTF8AndSize(header, &len) : NULL;
    if (name == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "native engine config: backend_header must be a str");
        return -1;
    }
    if (len > SOAK_BACKEND_MAX) {
        PyErr_SetString(PyExc_ValueError, "native engine config: backend_header is longer than 64");
        return -1;
    }
    for (Py_ssize_t i = 0; i < len; i++)
        cfg->backend[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] | 0x20 : name[i]);
    cfg->backend_len = (uint8_t)len;
    cfg->nwheel = cfg->ntargets; /* no wheel: send n goes to n % ntargets */
    if (wheel != Py_None) {
        cfg->wheel = index_array(wheel, "wheel", cfg->ntargets, &cfg->nwheel);
        if (cfg->wheel == NULL)
            return -1;
    }
    if (slots == Py_None)
        return 0;
    PyObject *slot_of;
    unsigned int nslots;
    if (!PyArg_ParseTuple(slots, "OI;url_slots is (slot_of, slots)", &slot_of, &nslots))
        return -1;
    uint32_t n;
    cfg->url_slot = index_array(slot_of, "url_slots", nslots, &n);
    if (cfg->url_slot == NULL)
        return -1;
    if (n != cfg->ntargets) {
        PyErr_SetString(PyExc_ValueError, "native engine config: url_slots needs a slot per target");
        return -1;
    }
    cfg->nurl_slots = nslots;
    return 0;
}

/* hash_sample_rate to body_texts: what hashing a body needs. */
static int read_hashing(PyObject *config, soak_config *cfg)
{
    int64_t step, most;
    PyObject *rate = item(config, CONFIG_hash_sample_rate), *value = item(config, CONFIG_hash_value);
    PyObject *texts = item(config, CONFIG_body_texts);
    cfg->hash_rate = PyFloat_AsDouble(rate);
    if (cfg->hash_rate == -1.0 && PyErr_Occurred())
        return -1;
    cfg->hash_value = PyLong_AsUnsignedLongLong(value);
    if (cfg->hash_value == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    if (get_bool(config, CONFIG_inflate, &cfg->inflate) || get_i64(config, CONFIG_inflate_step, &step) ||
        get_i64(config, CONFIG_max_inflated, &most))
        return -1;
    if (step < 0 || step > UINT32_MAX || most < 0) {
        PyErr_SetString(PyExc_ValueError, "native engine config: inflate_step or max_inflated out of range");
        return -1;
    }
    cfg->inflate_step = (uint32_t)step;
    cfg->max_inflated = (uint64_t)most;
    if (!PyTuple_Check(texts) || PyTuple_GET_SIZE(texts) != SOAK_BODY_TEXTS) {
        PyErr_SetString(PyExc_TypeError, "native engine config: body_texts must be a tuple of 4 str");
        return -1;
    }
    for (Py_ssize_t i = 0; i < SOAK_BODY_TEXTS; i++) {
        const char *text = PyUnicode_AsUTF8(PyTuple_GET_ITEM(texts, i));
        if (text == NULL)
            return -1;
        snprintf(cfg->body_texts[i], sizeof cfg->body_texts[i], "%s", text);
    }
    return 0;
}

/* Whether `value` is a record of kind `r` (records.py's class, its fields all there); if not, a
 * TypeError naming `what`. */
static int is_record(PyObject *value, int r, const char *what)
{
    if (PyObject_TypeCheck(value, RECORDS[r].type) && PyTuple_GET_SIZE(value) == RECORDS[r].n)
        return 1;
    PyErr_Format(PyExc_TypeError, "native engine config: %s must be a records.%s", what, RECORDS[r].name);
    return 0;
}

/* Field `field` of a record, a str, as UTF-8 (borrowed from it); NULL with an error. */
static const char *get_str(PyObject *record, int field)
{
    PyObject *value = item(record, field);
    if (!PyUnicode_Check(value)) {
        PyErr_SetString(PyExc_TypeError, "native engine config: a TLS field must be a str");
        return NULL;
    }
    return PyUnicode_AsUTF8(value);
}

static char *copied_str(const char *text)
{
    size_t len = strlen(text) + 1;
    char *copy = malloc(len);
    if (copy == NULL)
        PyErr_NoMemory();
    else
        memcpy(copy, text, len);
    return copy;
}

/* The run's TLS client (a records.TlsClient): its context, and its table of failure texts. */
static int read_tls_client(PyObject *tls, soak_config *cfg)
{
    if (!is_record(tls, R_TLS, "tls"))
        return -1;
    const char *ca = get_str(tls, TLS_ca_file), *cert = ca ? get_str(tls, TLS_cert_file) : NULL;
    const char *key = cert ? get_str(tls, TLS_key_file) : NULL, *ciphers = key ? get_str(tls, TLS_ciphers) : NULL;
    const char *verify_failed = ciphers ? get_str(tls, TLS_verify_failed) : NULL;
    int insecure;
    if (verify_failed == NULL || get_bool(tls, TLS_insecure, &insecure) < 0)
        return -1;
    char err[256];
    cfg->tls = soak_tls_ctx_new(ca, cert, key, insecure, ciphers, verify_failed, err, sizeof err);
    if (cfg->tls == NULL) {
        PyErr_Format(PyExc_ValueError, "native engine config: tls: %s", err);
        return -1;
    }
    PyObject *seq = PySequence_Fast(item(tls, TLS_reasons), "native engine config: tls reasons must be a list");
    if (seq == NULL)
        return -1;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        int lib, reason;
        const char *text;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "iis", &lib, &reason, &text) ||
            soak_tls_ctx_name(cfg->tls, lib, reason, text) < 0) {
            if (!PyErr_Occurred())
                PyErr_NoMemory();
            Py_DECREF(seq);
            return -1;
        }
    }
    Py_DECREF(seq);
    return 0;
}

/* tls (the run's TLS client, if any origin is https) and origins_tls (each origin's records.OriginTls, or None). */
static int read_tls(PyObject *config, soak_config *cfg)
{
    PyObject *tls = item(config, CONFIG_tls);
    if (tls != Py_None && read_tls_client(tls, cfg) < 0)
        return -1;
    PyObject *seq = PySequence_Fast(item(config, CONFIG_origins_tls), "native engine config: origins_tls must be a list");
    if (seq == NULL)
        return -1;
    if ((uint32_t)PySequence_Fast_GET_SIZE(seq) != cfg->norigins) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "native engine config: origins_tls needs one entry per origin");
        return -1;
    }
    for (uint32_t i = 0; i < cfg->norigins; i++) {
        PyObject *entry = PySequence_Fast_GET_ITEM(seq, i);
        if (entry == Py_None)
            continue;
        soak_origin *o = &cfg->origins[i];
        const char *host = NULL, *mismatch = NULL;
        if (!is_record(entry, R_ORIGIN_TLS, "an origins_tls entry") || cfg->tls == NULL ||
            (host = get_str(entry, ORIGIN_TLS_host)) == NULL || (mismatch = get_str(entry, ORIGIN_TLS_mismatch)) == NULL ||
            get_bool(entry, ORIGIN_TLS_numeric, &o->tls_numeric) < 0 || (o->tls_host = copied_str(host)) == NULL ||
            (o->tls_mismatch = copied_str(mismatch)) == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "native engine config: an https origin needs tls");
            Py_DECREF(seq);
            return -1;
        }
    }
    Py_DECREF(seq);
    return 0;
}

static int read_config(PyObject *config, soak_config *cfg)
{
    int64_t v;
    if (!PyObject_TypeCheck(config, RECORDS[R_CONFIG].type) || PyTuple_GET_SIZE(config) != CONFIG_N) {
        PyErr_SetString(PyExc_TypeError, "the native engine's config must be a records.Config");
        return -1;
    }
    if (read_targets(config, cfg) < 0)
        return -1;
    PyObject *model = item(config, CONFIG_model);
    const char *name = PyUnicode_Check(model) ? PyUnicode_AsUTF8(model) : "";
    if (name == NULL)
        return -1;
    if (strcmp(name, "closed") == 0)
        cfg->model = SOAK_CLOSED;
    else if (strcmp(name, "open") == 0)
        cfg->model = SOAK_OPEN;
    else if (strcmp(name, "bench") == 0)
        cfg->model = SOAK_BENCH;
    else {
        PyErr_Format(PyExc_ValueError, "native engine config: model %R is not closed, open or bench", model);
        return -1;
    }
    PyObject *end = item(config, CONFIG_end_ns), *qps = item(config, CONFIG_qps), *text = item(config, CONFIG_timeout_text);
    if (end == Py_None) {
        cfg->schedule.end_ns = SOAK_NO_END;
    } else {
        cfg->schedule.end_ns = PyLong_AsLongLong(end);
        if (cfg->schedule.end_ns == -1 && PyErr_Occurred())
            return -1;
    }
    cfg->schedule.qps = PyFloat_AsDouble(qps);
    if (cfg->schedule.qps == -1.0 && PyErr_Occurred())
        return -1;
    const char *within = PyUnicode_AsUTF8(text);
    if (within == NULL)
        return -1;
    snprintf(cfg->timeout_text, sizeof cfg->timeout_text, "%s", within);
    if (get_i64(config, CONFIG_clients, &cfg->clients) || get_i64(config, CONFIG_max_in_flight, &cfg->max_in_flight) ||
        get_i64(config, CONFIG_total_requests, &cfg->total_requests) ||
        get_i64(config, CONFIG_start_ns, &cfg->schedule.start_ns) || get_i64(config, CONFIG_stride, &cfg->schedule.stride) ||
        get_i64(config, CONFIG_offset, &cfg->schedule.offset) || get_i64(config, CONFIG_grid_start_ns, &cfg->grid.start_ns) ||
        get_i64(config, CONFIG_interval_ns, &cfg->grid.interval_ns) || get_i64(config, CONFIG_timeout_ns, &cfg->timeout_ns) ||
        get_bool(config, CONFIG_keep_alive, &cfg->keep_alive) || get_bool(config, CONFIG_corrected, &cfg->corrected) ||
        get_i64(config, CONFIG_unit_ns, &cfg->unit_ns) || get_i64(config, CONFIG_late_ns, &v) ||
        get_i64(config, CONFIG_probe_ns, &cfg->probe_ns) || get_i64(config, CONFIG_gap_ns, &cfg->gap_ns) ||
        get_u32(config, CONFIG_max_head, &cfg->max_head) || get_u32(config, CONFIG_error_groups, &cfg->error_groups) ||
        get_u32(config, CONFIG_group_urls, &cfg->group_urls) || get_u32(config, CONFIG_other_lengths, &cfg->other_lengths) ||
        get_u32(config, CONFIG_max_requests, &cfg->max_requests) || get_i64(config, CONFIG_max_age_ns, &cfg->max_age_ns))
        return -1;
    if (cfg->max_age_ns < 0) {
        PyErr_SetString(PyExc_ValueError, "native engine config: max_age_ns must be >= 0");
        return -1;
    }
    cfg->late_ns = v;
    cfg->schedule.clients = cfg->clients;
    if (read_counting(config, cfg) < 0 || read_hashing(config, cfg) < 0 || read_dues(config, cfg) < 0 ||
        read_tls(config, cfg) < 0)
        return -1;
    return read_metrics(config, cfg);
}

/* --- the Engine type ------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    soak_engine *engine;
    PyObject *heir;            /* a warm-up's: the run's Engine its connections go on to (give_to), kept alive */
} EngineObject;

static PyTypeObject EngineType;

static int engine_init(EngineObject *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"config", NULL};
    PyObject *config;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O", keywords, &config))
        return -1;
    if (self->engine != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "an Engine is configured once");
        return -1;
    }
    soak_config cfg;
    memset(&cfg, 0, sizeof cfg);
    char err[256];
    if (read_config(config, &cfg) < 0) {
        soak_config_free(&cfg);
        return -1;
    }
    self->engine = soak_engine_new(&cfg, err, sizeof err);
    if (self->engine == NULL) {
        PyErr_Format(PyExc_ValueError, "native engine config: %s", err);
        return -1;
    }
    return 0;
}

static void engine_dealloc(EngineObject *self)
{
    if (self->engine != NULL) {
        Py_BEGIN_ALLOW_THREADS
        soak_engine_free(self->engine);
        Py_END_ALLOW_THREADS
    }
    Py_XDECREF(self->heir); /* after this engine's thread, which may hand connections to it, has ended */
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static soak_engine *configured(EngineObject *self)
{
    if (self->engine == NULL)
        PyErr_SetString(PyExc_RuntimeError, "the Engine was not configured");
    return self->engine;
}

static PyObject *engine_start(EngineObject *self, PyObject *unused)
{
    (void)unused;
    soak_engine *e = configured(self);
    if (e == NULL)
        return NULL;
    int err = soak_engine_start(e);
    if (err != 0) {
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    Py_RETURN_NONE;
}

static PyObject *engine_fileno(EngineObject *self, PyObject *unused)
{
    (void)unused;
    soak_engine *e = configured(self);
    return e == NULL ? NULL : PyLong_FromLong(soak_engine_done_fd(e));
}

static PyObject *engine_step_fileno(EngineObject *self, PyObject *unused)
{
    (void)unused;
    soak_engine *e = configured(self);
    return e == NULL ? NULL : PyLong_FromLong(soak_engine_step_fd(e));
}

static PyObject *engine_step_at(EngineObject *self, PyObject *arg)
{
    soak_engine *e = configured(self);
    unsigned long long at = PyLong_AsUnsignedLongLong(arg);
    if (e == NULL || (at == (unsigned long long)-1 && PyErr_Occurred()))
        return NULL;
    return PyBool_FromLong(soak_engine_step_at(e, at));
}

static PyObject *engine_stop(EngineObject *self, PyObject *arg)
{
    soak_engine *e = configured(self);
    long long at = PyLong_AsLongLong(arg);
    if (e == NULL || (at == -1 && PyErr_Occurred()))
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    soak_engine_stop(e, at);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *engine_give_to(EngineObject *self, PyObject *arg)
{
    soak_engine *e = configured(self);
    if (e == NULL)
        return NULL;
    if (!PyObject_TypeCheck(arg, &EngineType) || configured((EngineObject *)arg) == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "give_to takes an Engine");
        return NULL;
    }
    if (self->heir != NULL || soak_engine_give_to(e, ((EngineObject *)arg)->engine) < 0) {
        PyErr_SetString(PyExc_ValueError, "give_to: both engines unstarted, made alike (clients, origins, "
                                          "model: not a bench), and each given once");
        return NULL;
    }
    self->heir = Py_NewRef(arg);
    Py_RETURN_NONE;
}

static PyObject *engine_cancel(EngineObject *self, PyObject *unused)
{
    (void)unused;
    soak_engine *e = configured(self);
    if (e == NULL)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    soak_engine_cancel(e);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *engine_drain_from(EngineObject *self, PyObject *arg)
{
    soak_engine *e = configured(self);
    long long t = PyLong_AsLongLong(arg);
    if (e == NULL || (t == -1 && PyErr_Occurred()))
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    soak_engine_drain_from(e, t);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *engine_set_addresses(EngineObject *self, PyObject *args)
{
    soak_engine *e = configured(self);
    unsigned int origin;
    PyObject *list;
    const char *failure = "";
    Py_ssize_t failure_len = 0;
    if (e == NULL || !PyArg_ParseTuple(args, "IO|s#:set_addresses", &origin, &list, &failure, &failure_len))
        return NULL;
    uint32_t n = 0;
    soak_address *addrs = NULL;
    Py_ssize_t given = PyObject_Length(list);
    if (given < 0)
        return NULL;
    if (given == 0 && (failure_len == 0 || failure_len >= SOAK_TEXT_MAX)) {
        PyErr_SetString(PyExc_ValueError, "set_addresses: no addresses needs the failure's text (under 256 bytes)");
        return NULL;
    }
    if (given > 0 && (addrs = read_addresses(list, &n)) == NULL)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = soak_engine_set_addresses(e, origin, addrs, n, failure);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        free(addrs);
        PyErr_Format(PyExc_ValueError, "set_addresses: no origin %u", origin);
        return NULL;
    }
    Py_RETURN_NONE;
}

/* Stalls as [(due, ran)] in order: an interval's (taken_record), or the test hook's (module_stalls). */
static PyObject *stalls_list(const soak_stall *stalls, uint32_t n)
{
    PyObject *list = PyList_New(n);
    for (uint32_t i = 0; list != NULL && i < n; i++) {
        PyObject *one = Py_BuildValue("(LL)", (long long)stalls[i].due, (long long)stalls[i].ran);
        if (one == NULL) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, one);
    }
    return list;
}

/* Tallies as a list of TallyCounts (None for one that is NULL). */
static PyObject *tallies_list(soak_tally **tallies, uint32_t n)
{
    PyObject *list = PyList_New(n);
    for (uint32_t i = 0; list != NULL && i < n; i++) {
        PyObject *one = tally_record(tallies[i]);
        if (one == NULL)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, i, one);
    }
    return list;
}

/* A Taken: one interval's TallyCounts and what came with it. */
static PyObject *taken_record(soak_taken *t)
{
    PyObject *record = record_new(R_TAKEN);
    if (record == NULL)
        return NULL;
    if (record_set(record, TAKEN_tally, tally_record(t->tally)) ||
        record_set(record, TAKEN_later, tallies_list(t->later, t->nlater)) ||
        record_set(record, TAKEN_drain, tally_record(t->drain)) ||
        record_set(record, TAKEN_drain_end_ns, i64(t->drain_end_ns)) ||
        record_set(record, TAKEN_loop_lag, histogram(&t->loop_lag)) ||
        record_set(record, TAKEN_stalls, stalls_list(t->stalls, t->nstalls)) ||
        record_set(record, TAKEN_next_tick_ns, i64_or_none(t->next_tick_ns)) ||
        record_set(record, TAKEN_opened, u64(t->opened)) || record_set(record, TAKEN_closed, u64(t->closed)) ||
        record_set(record, TAKEN_per_url,
                   t->per_url != NULL ? tallies_list(t->per_url, t->nper_url) : Py_NewRef(Py_None)))
        Py_CLEAR(record);
    return record;
}

static PyObject *engine_take(EngineObject *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"k", "final", "until_ns", NULL};
    long long k;
    int final = 0;
    PyObject *until = Py_None;
    soak_engine *e = configured(self);
    if (e == NULL || !PyArg_ParseTupleAndKeywords(args, kwargs, "L|pO", keywords, &k, &final, &until))
        return NULL;
    int64_t until_ns = SOAK_NONE;
    if (until != Py_None) {
        until_ns = PyLong_AsLongLong(until);
        if (until_ns == -1 && PyErr_Occurred())
            return NULL;
    }
    soak_taken taken;
    int done;
    Py_BEGIN_ALLOW_THREADS
    done = soak_engine_take(e, k, final, until_ns, &taken);
    Py_END_ALLOW_THREADS
    if (done == -1)
        return PyErr_Format(PyExc_ValueError, "interval %lld is not the next one to take (%lld is)", k,
                            (long long)soak_engine_next_index(e));
    if (done < 0)
        return PyErr_NoMemory();
    PyObject *record = taken_record(&taken);
    soak_taken_free(&taken);
    return record;
}

/* {length: n} of the other document lengths seen. */
static PyObject *other_lengths_dict(const soak_bench *b)
{
    PyObject *others = PyDict_New();
    for (uint32_t i = 0; others != NULL && i < b->nother; i++) {
        PyObject *key = u64(b->other_length[i]), *n = u64(b->other_count[i]);
        if (key == NULL || n == NULL || PyDict_SetItem(others, key, n) < 0)
            Py_CLEAR(others);
        Py_XDECREF(key);
        Py_XDECREF(n);
    }
    return others;
}

/* A BenchCounts, its histograms taken over. */
static PyObject *bench_record(soak_bench *b)
{
    PyObject *record = record_new(R_BENCH);
    if (record == NULL)
        return NULL;
    if (record_set(record, BENCH_waiting, histogram(&b->waiting)) ||
        record_set(record, BENCH_total_reused, histogram(&b->total_reused)) ||
        record_set(record, BENCH_connect_new, histogram(&b->connect_new)) ||
        record_set(record, BENCH_processing_new, histogram(&b->processing_new)) ||
        record_set(record, BENCH_total_new, histogram(&b->total_new)) ||
        record_set(record, BENCH_document_length, b->has_document ? u64(b->document_length) : Py_NewRef(Py_None)) ||
        record_set(record, BENCH_length_mismatches, u64(b->length_mismatches)) ||
        record_set(record, BENCH_kept_alive, u64(b->kept_alive)) ||
        record_set(record, BENCH_header_bytes, u64(b->header_bytes)) ||
        record_set(record, BENCH_server,
                   b->has_server ? PyUnicode_DecodeLatin1(b->server, b->server_len, NULL) : Py_NewRef(Py_None)) ||
        record_set(record, BENCH_last_end_ns, i64(b->last_end_ns)) ||
        record_set(record, BENCH_first_response_ns, i64(b->first_response_ns)) ||
        record_set(record, BENCH_server_ns, i64(b->server_ns)) ||
        record_set(record, BENCH_other_lengths, other_lengths_dict(b)))
        Py_CLEAR(record);
    return record;
}

/* {version: n} of the connections over TLS, the versions met only. */
static PyObject *tls_connections(const soak_figures *f)
{
    PyObject *d = PyDict_New();
    for (int i = 0; d != NULL && i < SOAK_TLS_VERSIONS; i++) {
        if (!f->tls_connections[i])
            continue;
        PyObject *n = u64(f->tls_connections[i]);
        if (n == NULL || PyDict_SetItemString(d, soak_tls_versions[i], n) < 0)
            Py_CLEAR(d);
        Py_XDECREF(n);
    }
    return d;
}

static PyObject *engine_figures(EngineObject *self, PyObject *unused)
{
    (void)unused;
    soak_engine *e = configured(self);
    if (e == NULL)
        return NULL;
    soak_figures f;
    int failed;
    Py_BEGIN_ALLOW_THREADS
    failed = soak_engine_figures(e, &f);
    Py_END_ALLOW_THREADS
    if (failed)
        return PyErr_NoMemory();
    PyObject *record = record_new(R_FIGURES);
    if (record != NULL &&
        (record_set(record, FIGURES_sent, u64(f.sent)) ||
         record_set(record, FIGURES_stopped_sending_ns, i64_or_none(f.stopped_sending_ns)) ||
         record_set(record, FIGURES_send_lag, kept_histogram(&f.send_lag)) ||
         record_set(record, FIGURES_lateness, kept_histogram(&f.lateness)) ||
         record_set(record, FIGURES_uncorrected, kept_histogram(&f.uncorrected)) ||
         record_set(record, FIGURES_in_unit, kept_histogram(&f.in_unit)) ||
         record_set(record, FIGURES_connections, u64(f.connections)) ||
         record_set(record, FIGURES_tls_connections, tls_connections(&f)) || record_set(record, FIGURES_opened, u64(f.opened)) ||
         record_set(record, FIGURES_closed, u64(f.closed)) || record_set(record, FIGURES_finished, PyBool_FromLong(f.finished)) ||
         record_set(record, FIGURES_fatal, PyLong_FromLong(f.fatal)) ||
         record_set(record, FIGURES_bench, f.has_bench ? bench_record(&f.bench) : Py_NewRef(Py_None))))
        Py_CLEAR(record);
    soak_figures_free(&f);
    return record;
}

/* A list of `n` counters read with relaxed atomic loads. */
static PyObject *counters(const uint64_t *values, size_t n)
{
    PyObject *list = PyList_New((Py_ssize_t)n);
    if (list == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        PyObject *v = PyLong_FromUnsignedLongLong(SOAK_LOAD(values[i]));
        if (v == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, v);
    }
    return list;
}

/* Per slot, a list of `width` counters each. */
static PyObject *per_slot(const uint64_t *values, uint32_t slots, size_t width)
{
    PyObject *list = PyList_New(slots);
    if (list == NULL)
        return NULL;
    for (uint32_t s = 0; s < slots; s++) {
        PyObject *row = counters(values + s * width, width);
        if (row == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, s, row);
    }
    return list;
}

static PyObject *metrics_record(const soak_metrics *m)
{
    PyObject *failures = PyDict_New();
    if (failures == NULL)
        return NULL;
    for (uint32_t s = 0; s < m->slots; s++) {
        for (int kind = 0; kind < SOAK_KINDS; kind++) {
            uint64_t n = SOAK_LOAD(m->failures[s * SOAK_KINDS + (uint32_t)kind]);
            if (!n)
                continue;
            PyObject *key = Py_BuildValue("(Is)", (unsigned int)s, soak_kind_names[kind]);
            PyObject *value = PyLong_FromUnsignedLongLong(n);
            int failed = key == NULL || value == NULL || PyDict_SetItem(failures, key, value) < 0;
            Py_XDECREF(key);
            Py_XDECREF(value);
            if (failed) {
                Py_DECREF(failures);
                return NULL;
            }
        }
    }
    PyObject *record = record_new(R_METRICS);
    if (record == NULL) {
        Py_DECREF(failures);
        return NULL;
    }
    if (record_set(record, METRICS_failures, failures) || record_set(record, METRICS_skipped, u64(SOAK_LOAD(m->skipped))) ||
        record_set(record, METRICS_late, u64(SOAK_LOAD(m->late))) ||
        record_set(record, METRICS_opened, u64(SOAK_LOAD(m->opened))) ||
        record_set(record, METRICS_closed, u64(SOAK_LOAD(m->closed))) ||
        record_set(record, METRICS_statuses, per_slot(m->statuses, m->slots, SOAK_STATUSES)) ||
        record_set(record, METRICS_good, per_slot(m->good, m->slots, m->places)) ||
        record_set(record, METRICS_bad, per_slot(m->bad, m->slots, m->places)) ||
        record_set(record, METRICS_good_ns, counters(m->good_ns, m->slots)) ||
        record_set(record, METRICS_bad_ns, counters(m->bad_ns, m->slots)))
        Py_CLEAR(record);
    return record;
}

/* The metrics as of one moment (soak_engine_metrics_copy), so that a scrape's series agree. */
static PyObject *engine_metrics(EngineObject *self, PyObject *unused)
{
    (void)unused;
    soak_engine *e = configured(self);
    if (e == NULL)
        return NULL;
    if (!soak_engine_metrics(e)->slots)
        Py_RETURN_NONE;
    soak_metrics copy;
    int failed;
    Py_BEGIN_ALLOW_THREADS
    failed = soak_engine_metrics_copy(e, &copy);
    Py_END_ALLOW_THREADS
    if (failed)
        return PyErr_NoMemory();
    PyObject *record = metrics_record(&copy);
    soak_metrics_free(&copy);
    return record;
}

static PyObject *engine_join(EngineObject *self, PyObject *unused)
{
    (void)unused;
    soak_engine *e = configured(self);
    if (e == NULL)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    soak_engine_join(e);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *engine_sent(EngineObject *self, void *closure)
{
    (void)closure;
    soak_engine *e = configured(self);
    return e == NULL ? NULL : PyLong_FromUnsignedLongLong(soak_engine_sent(e));
}

static PyObject *engine_done(EngineObject *self, void *closure)
{
    (void)closure;
    soak_engine *e = configured(self);
    return e == NULL ? NULL : PyLong_FromUnsignedLongLong(soak_engine_done(e));
}

static PyObject *engine_next_index(EngineObject *self, void *closure)
{
    (void)closure;
    soak_engine *e = configured(self);
    if (e == NULL)
        return NULL;
    int64_t next;
    Py_BEGIN_ALLOW_THREADS
    next = soak_engine_next_index(e);
    Py_END_ALLOW_THREADS
    return PyLong_FromLongLong(next);
}

static PyMethodDef ENGINE_METHODS[] = {
    {"start", (PyCFunction)engine_start, METH_NOARGS, "Start the engine's thread."},
    {"fileno", (PyCFunction)engine_fileno, METH_NOARGS, "An eventfd, readable once the thread has ended."},
    {"step_fileno", (PyCFunction)engine_step_fileno, METH_NOARGS,
     "An eventfd, readable once the sends ended reach the step asked for (step_at)."},
    {"step_at", (PyCFunction)engine_step_at, METH_O,
     "step_at(n) -> bool: make step_fileno() readable once done reaches n; True if it has already."},
    {"stop", (PyCFunction)engine_stop, METH_O, "stop(at_ns): send nothing more; the first stop's time counts."},
    {"give_to", (PyCFunction)engine_give_to, METH_O,
     "give_to(run): a warm-up's clients hand their connections on to the run's, which wait for them."},
    {"cancel", (PyCFunction)engine_cancel, METH_NOARGS, "Abandon every request in flight (each `cancelled`)."},
    {"drain_from", (PyCFunction)engine_drain_from, METH_O, "drain_from(t_ns): results ending later are the drain."},
    {"set_addresses", (PyCFunction)engine_set_addresses, METH_VARARGS,
     "set_addresses(origin, [(family, sockaddr, text), ...], failure=''): where the origin's new connections go "
     "from now on; with no address, the text of the dns failure each then ends as."},
    {"take", (PyCFunction)(void (*)(void))engine_take, METH_VARARGS | METH_KEYWORDS,
     "take(k, final=False, until_ns=None) -> Taken: interval k's aggregates (k: the next untaken one)."},
    {"figures", (PyCFunction)engine_figures, METH_NOARGS, "figures() -> RunFigures: the run-wide figures, copied."},
    {"metrics", (PyCFunction)engine_metrics, METH_NOARGS, "metrics() -> MetricsCounts | None: MetricsTally's counts now."},
    {"join", (PyCFunction)engine_join, METH_NOARGS, "Wait for the engine's thread to end."},
    {NULL, NULL, 0, NULL},
};

static PyObject *engine_stopped_sending(EngineObject *self, void *closure)
{
    (void)closure;
    soak_engine *e = configured(self);
    if (e == NULL)
        return NULL;
    int64_t stopped;
    Py_BEGIN_ALLOW_THREADS
    stopped = soak_engine_stopped_sending(e);
    Py_END_ALLOW_THREADS
    if (stopped == SOAK_NONE)
        Py_RETURN_NONE;
    return PyLong_FromLongLong(stopped);
}

static PyGetSetDef ENGINE_GETSET[] = {
    {"sent", (getter)engine_sent, NULL, "Requests sent so far.", NULL},
    {"done", (getter)engine_done, NULL, "Requests ended so far, each counted (a response or a failure).", NULL},
    {"next_index", (getter)engine_next_index, NULL, "The next interval to take.", NULL},
    {"stopped_sending_ns", (getter)engine_stopped_sending, NULL,
     "When sending stopped early (Engine.stopped_sending_ns), or None.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject EngineType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "runner.load.native._engine.Engine",
    .tp_basicsize = sizeof(EngineObject),
    .tp_dealloc = (destructor)engine_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Engine(config): one process's clients for HTTP/1.1, in a thread of their own.",
    .tp_methods = ENGINE_METHODS,
    .tp_getset = ENGINE_GETSET,
    .tp_init = (initproc)engine_init,
    .tp_new = PyType_GenericNew,
};

/* --- the module ----------------------------------------------------------------------- */

static PyObject *module_counts_len(PyObject *module, PyObject *arg)
{
    (void)module;
    long long highest = PyLong_AsLongLong(arg);
    if (highest == -1 && PyErr_Occurred())
        return NULL;
    return PyLong_FromUnsignedLong(soak_counts_len(highest));
}

/* schedule.h's answers for one schedule, client and moment, for tests to hold to schedule.py's. */
static PyObject *module_schedule(PyObject *module, PyObject *args)
{
    (void)module;
    soak_schedule s = {0};
    PyObject *end, *dues = Py_None;
    long long client, k, free_ns, now_ns;
    if (!PyArg_ParseTuple(args, "LdLOLLLLLL|O", &s.start_ns, &s.qps, &s.clients, &end, &s.stride, &s.offset, &client,
                          &k, &free_ns, &now_ns, &dues))
        return NULL;
    s.end_ns = end == Py_None ? SOAK_NO_END : PyLong_AsLongLong(end);
    if (s.end_ns == -1 && PyErr_Occurred())
        return NULL;
    if (!(s.qps > 0 || dues != Py_None) || s.clients < 1 || s.stride < 1 || client < 0 || client >= s.clients || k < 0) {
        PyErr_SetString(PyExc_ValueError, "a schedule needs qps > 0, clients and stride >= 1, 0 <= client < clients");
        return NULL;
    }
    Py_buffer view = {0};
    if (dues != Py_None) { /* a ramp's due times, looked at where they are (Ramp.due_times's array) */
        if (PyObject_GetBuffer(dues, &view, PyBUF_SIMPLE) < 0)
            return NULL;
        s.dues = view.buf;
        s.ndues = view.len / 8;
    }
    int64_t end_k = soak_end_k(&s, client), skipped;
    int64_t next = soak_catch_up(&s, client, end_k, k, free_ns, now_ns, &skipped);
    int64_t n = soak_send_number(&s, client, k);
    PyObject *answers = Py_BuildValue(
        "{sLsLsLsLsLsisisLsLsL}", "send_number", (long long)n, "due_ns", (long long)soak_due(&s, n), "last_due_by",
        (long long)soak_last_due_by(&s, client, now_ns), "last_send_by", (long long)soak_last_send_by(&s, now_ns),
        "last_in_run", (long long)soak_last_in_run(&s, client, end_k, k, now_ns), "in_run", soak_in_run(&s, n),
        "before_end", soak_before_end(&s, now_ns), "catch_up_k", (long long)next, "catch_up_skipped", (long long)skipped,
        "slot_end", (long long)soak_slot_end(&s, n));
    if (dues != Py_None)
        PyBuffer_Release(&view);
    return answers;
}

/* soak_keep_stall over `stalls` [(due, ran)], as loop_tick meets them in one interval: (the
 * stalls kept, in order; the latenesses that went to the loop-lag histogram instead). For tests. */
static PyObject *module_stalls(PyObject *module, PyObject *arg)
{
    (void)module;
    PyObject *seq = PySequence_Fast(arg, "stalls() takes a sequence of (due_ns, ran_ns)");
    if (seq == NULL)
        return NULL;
    soak_stall kept[SOAK_STALLS];
    uint32_t n = 0;
    PyObject *instead = PyList_New(0);
    for (Py_ssize_t i = 0; instead != NULL && i < PySequence_Fast_GET_SIZE(seq); i++) {
        long long due, ran;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "LL", &due, &ran)) {
            Py_CLEAR(instead);
            break;
        }
        int64_t lag = soak_keep_stall(kept, &n, (soak_stall){due, ran});
        if (lag < 0)
            continue;
        PyObject *value = PyLong_FromLongLong(lag);
        if (value == NULL || PyList_Append(instead, value) < 0)
            Py_CLEAR(instead);
        Py_XDECREF(value);
    }
    Py_DECREF(seq);
    if (instead == NULL)
        return NULL;
    return Py_BuildValue("(NN)", stalls_list(kept, n), instead);
}

static PyMethodDef MODULE_METHODS[] = {
    {"counts_len", module_counts_len, METH_O, "counts_len(highest): hdrh's counts_len for 1 .. highest, 3 digits."},
    {"schedule", module_schedule, METH_VARARGS,
     "schedule(start_ns, qps, clients, end_ns, stride, offset, client, k, free_ns, now_ns) -> dict: schedule.h's "
     "answers (send k of the client, and the searches at now_ns), for tests."},
    {"stalls", module_stalls, METH_O,
     "stalls([(due_ns, ran_ns), ...]) -> (kept, to_loop_lag): one interval's stalls as the engine keeps them, for "
     "tests."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {
    PyModuleDef_HEAD_INIT, "_engine", "The native engine: HTTP/1.1 load (TLS where TLS is 1) in a thread of its own.", -1,
    MODULE_METHODS, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__engine(void)
{
    if (PyType_Ready(&CountsType) < 0 || PyType_Ready(&EngineType) < 0 || records_load() < 0)
        return NULL;
    PyObject *m = PyModule_Create(&MODULE);
    if (m == NULL)
        return NULL;
    PyObject *kinds = PyTuple_New(SOAK_KINDS);
    for (int i = 0; kinds != NULL && i < SOAK_KINDS; i++)
        PyTuple_SET_ITEM(kinds, i, PyUnicode_FromString(soak_kind_names[i]));
    if (kinds == NULL || PyModule_AddObject(m, "KINDS", kinds) < 0 ||
        PyModule_AddObject(m, "Engine", Py_NewRef((PyObject *)&EngineType)) < 0 ||
        PyModule_AddObject(m, "Counts", Py_NewRef((PyObject *)&CountsType)) < 0 ||
        PyModule_AddIntConstant(m, "TLS", SOAK_TLS_BUILT) < 0) {
        Py_XDECREF(kinds);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
