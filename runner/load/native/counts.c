/*
 * runner.load.native._counts: a histogram's counts summed slot by slot, in C.
 *
 * runner.stats.histogram finds every percentile of a histogram in the running totals of its
 * counts (hdrhistogram's layout, 64-bit): the first slot whose total reaches the percentile's
 * share of the count. Summing the few thousand slots a latency spans in Python made a Python
 * int per slot, millions of instructions at every interval close; here it is one loop.
 * Everything that decides (which share, which slot, which value) stays in Python, which sums
 * with itertools.accumulate where this is not built (the extension is optional: setup.py).
 *
 *   running_totals(counts, start, stop) -> bytes
 *       counts: a buffer of 64-bit counts; the totals of counts[start:stop] from counts[start]
 *       on, as the bytes of an array of uint64 (memoryview(...).cast("Q") reads them).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static PyObject *running_totals(PyObject *module, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t start, stop;
    (void)module;
    if (!PyArg_ParseTuple(args, "y*nn:running_totals", &view, &start, &stop))
        return NULL;
    Py_ssize_t slots = view.len / (Py_ssize_t)sizeof(uint64_t);
    if (start < 0 || stop < start || stop > slots) {
        PyErr_Format(PyExc_IndexError, "slots %zd to %zd of %zd", start, stop, slots);
        PyBuffer_Release(&view);
        return NULL;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, (stop - start) * (Py_ssize_t)sizeof(uint64_t));
    if (out != NULL) {
        const char *counts = (const char *)view.buf + start * (Py_ssize_t)sizeof(uint64_t);
        char *totals = PyBytes_AS_STRING(out);
        uint64_t total = 0;
        for (Py_ssize_t i = 0; i < stop - start; i++) {
            uint64_t count;
            memcpy(&count, counts + i * (Py_ssize_t)sizeof count, sizeof count); /* any alignment */
            total += count;
            memcpy(totals + i * (Py_ssize_t)sizeof total, &total, sizeof total);
        }
    }
    PyBuffer_Release(&view);
    return out;
}

static PyMethodDef methods[] = {
    {"running_totals", running_totals, METH_VARARGS,
     "running_totals(counts, start, stop) -> bytes: counts[start:stop] summed slot by slot, as uint64s."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_counts", "A histogram's counts summed slot by slot (runner.stats.histogram).", 0,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__counts(void)
{
    return PyModule_Create(&module);
}
