/*
 * Values and position tables built straight from libyaml's events, for the common manifest.
 *
 * The loader in Python (gpupolicy/loading/documents.py, construct_with_positions) walks the node
 * graph that PyYAML's Cython composer makes: a Python node object and two marks per node, made and
 * then dropped. Here libyaml's events become the same values and the same position table
 * (gpupolicy/loading/positions.py) in one pass, with no node in between.
 *
 * Only what most manifests are made of is read here: mappings with string keys, sequences, and
 * scalars with no tag, typed as YAML 1.1 types them (PyYAML's implicit resolvers: the booleans
 * yes/no/on/off, nulls, octal, base 60...). A scalar that only PyYAML's resolvers can type (one
 * starting with a digit, a sign or a dot, such as `0755`, `1:30` or `1e3`) is typed by the Python
 * callable the reader is given. Anything else raises Unsupported and the caller reads the text
 * again with the Python loader, which gives its problem or its value: an anchor or an alias, a
 * tag, a merge key, a key that is not a string, a key written twice, a syntax error, nesting
 * deeper than the limit. The two loaders give the same values and tables (tests compare them
 * object by object on every example and on the real corpus).
 *
 * A place is a libyaml mark's index; a span is start << bits | end (positions.span), where `bits`
 * is that of the text's LineStarts, and a block collection's end that libyaml moved past the last
 * line of a text without a final line break is `end + 1` (LineStarts.moved_end).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <yaml.h>

#ifndef SOURCE_DIGEST
#define SOURCE_DIGEST "" /* hatch_build.py defines it: the SHA-256 of this file when it was built */
#endif

/* Deeper than this, the Python loader reads the text: C recursion stays far from the stack's end. */
#define DEPTH_CEILING 1000

static PyObject *Unsupported;

typedef struct {
    PyObject_HEAD
    yaml_parser_t parser;
    yaml_event_t event;
    int parser_ready;
    int has_event;
    int started;
    int finished;
    PyObject *text;    /* the str whose UTF-8 buffer libyaml reads: kept alive while it does */
    PyObject *resolve; /* callable(str) -> value: a plain scalar only PyYAML's resolvers can type */
    int bits;
    unsigned long long end;       /* LineStarts.end */
    unsigned long long last_line; /* LineStarts.last_line */
    int max_depth;
} Reader;

static int unsupported(const char *why) {
    PyErr_SetString(Unsupported, why);
    return -1;
}

static int next_event(Reader *r) {
    if (r->has_event) {
        yaml_event_delete(&r->event);
        r->has_event = 0;
    }
    if (!yaml_parser_parse(&r->parser, &r->event)) {
        return unsupported("libyaml stopped at a syntax error");
    }
    r->has_event = 1;
    return 0;
}

static PyObject *span(Reader *r, unsigned long long start, unsigned long long end) {
    return PyLong_FromUnsignedLongLong(start << r->bits | end);
}

static unsigned long long moved_end(Reader *r, yaml_mark_t mark) {
    unsigned long long index = mark.index;
    return (index == r->end && mark.line > r->last_line) ? index + 1 : index;
}

static int is_block(yaml_event_t *event) {
    yaml_scalar_style_t style = event->data.scalar.style;
    return style == YAML_LITERAL_SCALAR_STYLE || style == YAML_FOLDED_SCALAR_STYLE;
}

/* The YAML 1.1 words PyYAML's bool and null resolvers match (whole scalar), or NULL. */
static PyObject *word_value(const char *s, size_t n) {
    static const char *const truths[] = {"yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"};
    static const char *const falsities[] = {"no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"};
    static const char *const nulls[] = {"null", "Null", "NULL", "~"};
    size_t i;
    if (n > 5) {
        return NULL;
    }
    for (i = 0; i < sizeof truths / sizeof *truths; i++) {
        if (strlen(truths[i]) == n && memcmp(truths[i], s, n) == 0) {
            return Py_True;
        }
    }
    for (i = 0; i < sizeof falsities / sizeof *falsities; i++) {
        if (strlen(falsities[i]) == n && memcmp(falsities[i], s, n) == 0) {
            return Py_False;
        }
    }
    for (i = 0; i < sizeof nulls / sizeof *nulls; i++) {
        if (strlen(nulls[i]) == n && memcmp(nulls[i], s, n) == 0) {
            return Py_None;
        }
    }
    return NULL;
}

static PyObject *text_of(const char *s, size_t n, int is_key) {
    PyObject *text = PyUnicode_DecodeUTF8(s, (Py_ssize_t)n, "strict");
    if (text != NULL && is_key) {
        PyUnicode_InternInPlace(&text); /* keys recur in every object: one str each */
    }
    return text;
}

/* A decimal integer with no sign, underscore or leading zero, short enough for a C long long. */
static int plain_decimal(const char *s, size_t n, long long *number) {
    size_t i;
    long long value = 0;
    if (n == 0 || n > 18 || (s[0] == '0' && n > 1)) {
        return 0;
    }
    for (i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return 0;
        }
        value = value * 10 + (s[i] - '0');
    }
    *number = value;
    return 1;
}

/* The value of a scalar event with no tag and no anchor, as construct_with_positions gives it. A
 * key must be a string: a key typed otherwise (`1:`, `on:`, `~:`) or a merge key is Unsupported. */
static PyObject *scalar_value(Reader *r, yaml_event_t *event, int is_key) {
    const char *s = (const char *)event->data.scalar.value;
    size_t n = event->data.scalar.length;
    PyObject *word, *text, *value;
    long long number;
    if (event->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) {
        return text_of(s, n, is_key); /* quoted and block scalars are strings */
    }
    if (n == 0) {
        if (is_key) {
            unsupported("an empty key");
            return NULL;
        }
        Py_RETURN_NONE; /* the null resolver's empty scalar */
    }
    switch (s[0]) {
    case 'y': case 'Y': case 'n': case 'N': case 't': case 'T':
    case 'f': case 'F': case 'o': case 'O': case '~':
        word = word_value(s, n);
        if (word == NULL) {
            return text_of(s, n, is_key);
        }
        if (is_key) {
            unsupported("a key that is a boolean or null");
            return NULL;
        }
        return Py_NewRef(word);
    case '<':
        if (is_key && n == 2 && s[1] == '<') {
            unsupported("a merge key");
            return NULL;
        }
        return text_of(s, n, is_key); /* `<<` as a value: its text (documents._scalar_value) */
    case '+': case '-':
        /* int and float both need a digit or a dot after the sign */
        if (n == 1 || !((s[1] >= '0' && s[1] <= '9') || s[1] == '.')) {
            return text_of(s, n, is_key);
        }
        break;
    case '.':
    case '0': case '1': case '2': case '3': case '4':
    case '5': case '6': case '7': case '8': case '9':
        if (plain_decimal(s, n, &number)) {
            if (is_key) {
                unsupported("an integer key");
                return NULL;
            }
            return PyLong_FromLongLong(number);
        }
        break;
    default:
        return text_of(s, n, is_key); /* no implicit resolver starts with this character */
    }
    text = PyUnicode_DecodeUTF8(s, (Py_ssize_t)n, "strict");
    if (text == NULL) {
        return NULL;
    }
    value = PyObject_CallOneArg(r->resolve, text);
    Py_DECREF(text);
    if (value != NULL && is_key && !PyUnicode_CheckExact(value)) {
        Py_DECREF(value);
        unsupported("a key that is not a string");
        return NULL;
    }
    return value;
}

static int scalar_only(Reader *r) {
    yaml_event_t *event = &r->event;
    if (event->type == YAML_ALIAS_EVENT) {
        return unsupported("an alias");
    }
    if (event->type == YAML_SCALAR_EVENT) {
        if (event->data.scalar.anchor != NULL || event->data.scalar.tag != NULL) {
            return unsupported("an anchor or a tag");
        }
    }
    return 0;
}

static int collection_plain(Reader *r, int depth) {
    yaml_event_t *event = &r->event;
    yaml_char_t *anchor, *tag;
    if (event->type == YAML_SEQUENCE_START_EVENT) {
        anchor = event->data.sequence_start.anchor;
        tag = event->data.sequence_start.tag;
    } else {
        anchor = event->data.mapping_start.anchor;
        tag = event->data.mapping_start.tag;
    }
    if (anchor != NULL || tag != NULL) {
        return unsupported("an anchor or a tag");
    }
    if (depth > r->max_depth || depth > DEPTH_CEILING) {
        return unsupported("nesting deeper than the limit");
    }
    return 0;
}

static int collection(Reader *r, int depth, PyObject **value, PyObject **table);

/* The current event starts a node: its value and its entry's child (a table, a block scalar's
 * start, or None), with the current event its last one (the scalar, or the collection's end). */
static int node(Reader *r, int depth, PyObject **value, PyObject **child) {
    if (scalar_only(r) < 0) {
        return -1;
    }
    if (r->event.type == YAML_SCALAR_EVENT) {
        *value = scalar_value(r, &r->event, 0);
        if (*value == NULL) {
            return -1;
        }
        if (is_block(&r->event)) {
            *child = PyLong_FromUnsignedLongLong(r->event.start_mark.index);
            if (*child == NULL) {
                Py_CLEAR(*value);
                return -1;
            }
        } else {
            *child = Py_NewRef(Py_None);
        }
        return 0;
    }
    return collection(r, depth, value, child);
}

static PyObject *pair(PyObject *where, PyObject *child) {
    PyObject *entry = PyTuple_Pack(2, where, child);
    return entry;
}

static int sequence(Reader *r, int depth, PyObject *items, PyObject *table) {
    for (;;) {
        PyObject *value = NULL, *child = NULL, *where = NULL, *entry = NULL;
        yaml_mark_t start;
        if (next_event(r) < 0) {
            return -1;
        }
        if (r->event.type == YAML_SEQUENCE_END_EVENT) {
            return 0;
        }
        start = r->event.start_mark;
        if (node(r, depth + 1, &value, &child) < 0) {
            return -1;
        }
        if (r->event.type == YAML_SCALAR_EVENT) {
            where = span(r, start.index, r->event.end_mark.index);
            entry = where == NULL ? NULL : (child == Py_None ? Py_NewRef(where) : pair(where, child));
        } else {
            where = span(r, start.index, moved_end(r, r->event.end_mark));
            entry = where == NULL ? NULL : pair(where, child);
        }
        Py_XDECREF(where);
        Py_DECREF(child);
        if (entry == NULL || PyList_Append(items, value) < 0 || PyList_Append(table, entry) < 0) {
            Py_XDECREF(entry);
            Py_DECREF(value);
            return -1;
        }
        Py_DECREF(entry);
        Py_DECREF(value);
    }
}

static int mapping(Reader *r, int depth, PyObject *result, PyObject *table) {
    for (;;) {
        PyObject *key, *value = NULL, *child = NULL, *where, *entry;
        Py_ssize_t before;
        int status;
        if (next_event(r) < 0) {
            return -1;
        }
        if (r->event.type == YAML_MAPPING_END_EVENT) {
            return 0;
        }
        if (scalar_only(r) < 0) {
            return -1;
        }
        if (r->event.type != YAML_SCALAR_EVENT) {
            return unsupported("a collection as a key");
        }
        key = scalar_value(r, &r->event, 1);
        if (key == NULL) {
            return -1;
        }
        where = span(r, r->event.start_mark.index, r->event.end_mark.index);
        if (where == NULL || next_event(r) < 0 || node(r, depth + 1, &value, &child) < 0) {
            Py_XDECREF(where);
            Py_DECREF(key);
            return -1;
        }
        entry = child == Py_None ? Py_NewRef(where) : pair(where, child);
        Py_DECREF(where);
        Py_DECREF(child);
        if (entry == NULL) {
            Py_DECREF(key);
            Py_DECREF(value);
            return -1;
        }
        before = PyDict_GET_SIZE(result);
        status = PyDict_SetItem(result, key, value);
        if (status == 0 && PyDict_GET_SIZE(result) == before) {
            status = unsupported("a key written twice"); /* the Python loader reports it (GP002) */
        }
        if (status < 0 || PyDict_SetItem(table, key, entry) < 0) {
            Py_DECREF(entry);
            Py_DECREF(key);
            Py_DECREF(value);
            return -1;
        }
        Py_DECREF(entry);
        Py_DECREF(key);
        Py_DECREF(value);
    }
}

static int collection(Reader *r, int depth, PyObject **value, PyObject **table) {
    int sequence_start = r->event.type == YAML_SEQUENCE_START_EVENT;
    int status;
    if (collection_plain(r, depth) < 0) {
        return -1;
    }
    *value = sequence_start ? PyList_New(0) : PyDict_New();
    *table = sequence_start ? PyList_New(0) : PyDict_New();
    if (*value == NULL || *table == NULL) {
        status = -1;
    } else {
        status = sequence_start ? sequence(r, depth, *value, *table) : mapping(r, depth, *value, *table);
    }
    if (status < 0) {
        Py_CLEAR(*value);
        Py_CLEAR(*table);
    }
    return status;
}

/* The next document: (value, root entry, start, end), start and end the root node's marks' indexes
 * (the end not moved). StopIteration at the end of the stream. */
static PyObject *reader_next(Reader *r) {
    PyObject *value = NULL, *child = NULL, *where = NULL, *entry = NULL, *result;
    yaml_mark_t start, end;
    if (r->finished) {
        return NULL;
    }
    if (!r->started) {
        r->started = 1;
        if (next_event(r) < 0 || next_event(r) < 0) { /* STREAM-START, then the first document's */
            r->finished = 1;
            return NULL;
        }
    }
    if (r->event.type == YAML_STREAM_END_EVENT) {
        r->finished = 1;
        return NULL;
    }
    if (next_event(r) < 0) { /* past DOCUMENT-START: the root node */
        r->finished = 1;
        return NULL;
    }
    start = r->event.start_mark;
    if (node(r, 1, &value, &child) < 0) {
        r->finished = 1;
        return NULL;
    }
    end = r->event.end_mark;
    where = span(r, start.index, moved_end(r, end));
    if (where != NULL) {
        entry = child == Py_None ? Py_NewRef(where) : pair(where, child);
    }
    Py_XDECREF(where);
    Py_DECREF(child);
    /* DOCUMENT-END, then what follows it: the next DOCUMENT-START or STREAM-END */
    if (entry == NULL || next_event(r) < 0 || next_event(r) < 0) {
        r->finished = 1;
        Py_XDECREF(entry);
        Py_DECREF(value);
        return NULL;
    }
    result = Py_BuildValue("(NNKK)", value, entry, (unsigned long long)start.index,
                           (unsigned long long)end.index);
    return result;
}

static void reader_dealloc(Reader *r) {
    if (r->has_event) {
        yaml_event_delete(&r->event);
    }
    if (r->parser_ready) {
        yaml_parser_delete(&r->parser);
    }
    Py_XDECREF(r->text);
    Py_XDECREF(r->resolve);
    Py_TYPE(r)->tp_free((PyObject *)r);
}

static PyTypeObject ReaderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gpupolicy.loading._direct.Reader",
    .tp_basicsize = sizeof(Reader),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The documents of a text: (value, root entry, start, end) each.",
    .tp_dealloc = (destructor)reader_dealloc,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)reader_next,
};

static PyObject *documents(PyObject *module, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"text", "resolve", "bits", "end", "last_line", "max_depth", NULL};
    PyObject *text, *resolve;
    int bits, max_depth;
    unsigned long long end, last_line;
    const char *utf8;
    Py_ssize_t size;
    Reader *r;
    (void)module;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "UOiKKi", keywords, &text, &resolve, &bits, &end,
                                     &last_line, &max_depth)) {
        return NULL;
    }
    if (bits < 1 || 2 * bits > 64) {
        unsupported("a text too long for spans in 64 bits");
        return NULL;
    }
    utf8 = PyUnicode_AsUTF8AndSize(text, &size); /* kept in the str: it lives as long as `text` */
    if (utf8 == NULL) {
        PyErr_Clear();
        unsupported("a text that is not UTF-8 (a lone surrogate)");
        return NULL;
    }
    r = PyObject_New(Reader, &ReaderType);
    if (r == NULL) {
        return NULL;
    }
    r->parser_ready = r->has_event = r->started = r->finished = 0;
    r->text = Py_NewRef(text);
    r->resolve = Py_NewRef(resolve);
    r->bits = bits;
    r->end = end;
    r->last_line = last_line;
    r->max_depth = max_depth;
    if (!yaml_parser_initialize(&r->parser)) {
        Py_DECREF(r);
        return PyErr_NoMemory();
    }
    r->parser_ready = 1;
    /* As PyYAML's CParser reads a str: its UTF-8 bytes, the encoding left for libyaml to find
     * (which skips a leading BOM, as the marks' indexes then do). */
    yaml_parser_set_input_string(&r->parser, (const unsigned char *)utf8, (size_t)size);
    return (PyObject *)r;
}

static PyMethodDef methods[] = {
    {"documents", (PyCFunction)(void (*)(void))documents, METH_VARARGS | METH_KEYWORDS,
     "documents(text, resolve, bits, end, last_line, max_depth): a reader of text's documents."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "gpupolicy.loading._direct",
    "Values and position tables built straight from libyaml's events.", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__direct(void) {
    PyObject *module;
    if (PyType_Ready(&ReaderType) < 0) {
        return NULL;
    }
    module = PyModule_Create(&module_def);
    if (module == NULL) {
        return NULL;
    }
    Unsupported = PyErr_NewException("gpupolicy.loading._direct.Unsupported", PyExc_Exception, NULL);
    if (Unsupported == NULL || PyModule_AddObjectRef(module, "Unsupported", Unsupported) < 0 ||
        PyModule_AddStringConstant(module, "SOURCE_DIGEST", SOURCE_DIGEST) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
