/* What the parser's test binding (_response) builds its dicts with. */
#ifndef SOAK_PYPUT_H
#define SOAK_PYPUT_H

#include <Python.h>

/* Put `value` (a new reference, or NULL after an error) in `dict`; 0, or -1 on error. */
static inline int put(PyObject *dict, const char *key, PyObject *value)
{
    if (value == NULL)
        return -1;
    int failed = PyDict_SetItemString(dict, key, value);
    Py_DECREF(value);
    return failed;
}

#endif
