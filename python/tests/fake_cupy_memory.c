/* fake_cupy_memory.c — the module _fake_cupy_memory, for the tests of crmm._fastalloc's CuPy
 * allocator on a machine without CuPy: types laid out as Cython lays out CuPy's
 * cupy.cuda.memory.BaseMemory and MemoryPointer (C fields after the object header, read and set
 * through attributes), and two that hide their fields, so that the allocator's layout probe must
 * find the first and refuse the others.
 *
 *  - BaseMemory: ptr, size and device_id, settable; subclassable, no GC, no __dict__.
 *  - ScrambledMemory: the same attributes, but ptr is kept inverted in the instance (the probe
 *    cannot find it).
 *  - MemoryPointer(mem, offset): ptr = mem.ptr + offset, device_id = mem.device_id and mem, read
 *    only, after a slot as Cython's vtable pointer; made by tp_new with mem None, then __init__.
 *  - ObjectDevicePointer(mem, offset): the same, but device_id is kept as an int object (as a
 *    CuPy that kept a Device object would), so its layout is not the one expected. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <structmember.h>

typedef struct {
    PyObject_HEAD
    intptr_t ptr;
    Py_ssize_t size;
    int device_id;
} memory_object;

static PyMemberDef memory_members[] = {
    {"ptr", T_PYSSIZET, offsetof(memory_object, ptr), 0, "pointer"},
    {"size", T_PYSSIZET, offsetof(memory_object, size), 0, "bytes"},
    {"device_id", T_INT, offsetof(memory_object, device_id), 0, "device"},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot memory_slots[] = {
    {Py_tp_members, memory_members},
    {Py_tp_new, PyType_GenericNew},
    {0, NULL},
};

static PyType_Spec memory_spec = {"_fake_cupy_memory.BaseMemory", sizeof(memory_object), 0,
                                  Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, memory_slots};

static PyObject *scrambled_get_ptr(PyObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromSsize_t(~((memory_object *)self)->ptr);
}

static int scrambled_set_ptr(PyObject *self, PyObject *value, void *closure)
{
    (void)closure;
    Py_ssize_t v = value ? PyLong_AsSsize_t(value) : -1;
    if (v == -1 && PyErr_Occurred())
        return -1;
    ((memory_object *)self)->ptr = ~v;
    return 0;
}

static PyGetSetDef scrambled_getset[] = {
    {"ptr", scrambled_get_ptr, scrambled_set_ptr, "pointer, kept inverted", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef scrambled_members[] = {
    {"size", T_PYSSIZET, offsetof(memory_object, size), 0, "bytes"},
    {"device_id", T_INT, offsetof(memory_object, device_id), 0, "device"},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot scrambled_slots[] = {
    {Py_tp_members, scrambled_members},
    {Py_tp_getset, scrambled_getset},
    {Py_tp_new, PyType_GenericNew},
    {0, NULL},
};

static PyType_Spec scrambled_spec = {"_fake_cupy_memory.ScrambledMemory", sizeof(memory_object), 0,
                                     Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, scrambled_slots};

/* MemoryPointer and ObjectDevicePointer share one struct; `device` is set for the latter. */
typedef struct {
    PyObject_HEAD
    void *vtab; /* where Cython keeps a cdef class's method table */
    intptr_t ptr;
    int device_id;
    PyObject *device; /* ObjectDevicePointer's device (NULL in MemoryPointer) */
    PyObject *mem;
} pointer_object;

static PyObject *pointer_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    (void)args, (void)kwds;
    pointer_object *o = (pointer_object *)type->tp_alloc(type, 0);
    if (o) {
        o->vtab = (void *)&pointer_new;
        Py_INCREF(Py_None);
        o->mem = Py_None;
    }
    return (PyObject *)o;
}

static int pointer_fill(pointer_object *self, PyObject *args, int device_as_object)
{
    PyObject *mem;
    Py_ssize_t offset;
    if (!PyArg_ParseTuple(args, "On", &mem, &offset))
        return -1;
    PyObject *ptr = PyObject_GetAttrString(mem, "ptr");
    PyObject *device = ptr ? PyObject_GetAttrString(mem, "device_id") : NULL;
    Py_ssize_t p = ptr ? PyLong_AsSsize_t(ptr) : -1;
    long d = device ? PyLong_AsLong(device) : -1;
    Py_XDECREF(ptr);
    if (PyErr_Occurred()) {
        Py_XDECREF(device);
        return -1;
    }
    self->ptr = p + offset;
    if (device_as_object) {
        Py_XSETREF(self->device, device);
    } else {
        self->device_id = (int)d;
        Py_DECREF(device);
    }
    Py_INCREF(mem);
    Py_XSETREF(self->mem, mem);
    return 0;
}

static int pointer_init(PyObject *self, PyObject *args, PyObject *kwds)
{
    (void)kwds;
    return pointer_fill((pointer_object *)self, args, 0);
}

static int object_device_init(PyObject *self, PyObject *args, PyObject *kwds)
{
    (void)kwds;
    return pointer_fill((pointer_object *)self, args, 1);
}

static int pointer_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(((pointer_object *)self)->mem);
    Py_VISIT(((pointer_object *)self)->device);
    return 0;
}

static int pointer_clear(PyObject *self)
{
    Py_CLEAR(((pointer_object *)self)->mem);
    Py_CLEAR(((pointer_object *)self)->device);
    return 0;
}

static void pointer_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    pointer_clear(self);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *object_device_get(PyObject *self, void *closure)
{
    (void)closure;
    PyObject *d = ((pointer_object *)self)->device;
    return Py_NewRef(d ? d : Py_None);
}

static PyMemberDef pointer_members[] = {
    {"ptr", T_PYSSIZET, offsetof(pointer_object, ptr), READONLY, "pointer"},
    {"device_id", T_INT, offsetof(pointer_object, device_id), READONLY, "device"},
    {"mem", T_OBJECT, offsetof(pointer_object, mem), READONLY, "memory"},
    {NULL, 0, 0, 0, NULL},
};

static PyMemberDef object_device_members[] = {
    {"ptr", T_PYSSIZET, offsetof(pointer_object, ptr), READONLY, "pointer"},
    {"mem", T_OBJECT, offsetof(pointer_object, mem), READONLY, "memory"},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef object_device_getset[] = {
    {"device_id", object_device_get, NULL, "device, kept as an object", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot pointer_slots[] = {
    {Py_tp_members, pointer_members},   {Py_tp_new, pointer_new},         {Py_tp_init, pointer_init},
    {Py_tp_traverse, pointer_traverse}, {Py_tp_clear, pointer_clear},     {Py_tp_dealloc, pointer_dealloc},
    {0, NULL},
};

static PyType_Slot object_device_slots[] = {
    {Py_tp_members, object_device_members}, {Py_tp_getset, object_device_getset},
    {Py_tp_new, pointer_new},               {Py_tp_init, object_device_init},
    {Py_tp_traverse, pointer_traverse},     {Py_tp_clear, pointer_clear},
    {Py_tp_dealloc, pointer_dealloc},       {0, NULL},
};

static PyType_Spec pointer_spec = {"_fake_cupy_memory.MemoryPointer", sizeof(pointer_object), 0,
                                   Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, pointer_slots};
static PyType_Spec object_device_spec = {"_fake_cupy_memory.ObjectDevicePointer", sizeof(pointer_object), 0,
                                         Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, object_device_slots};

static struct PyModuleDef fake_module = {
    PyModuleDef_HEAD_INIT, "_fake_cupy_memory", "CuPy's memory layout, for crmm's tests.", -1, NULL,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__fake_cupy_memory(void);
PyMODINIT_FUNC PyInit__fake_cupy_memory(void)
{
    PyObject *m = PyModule_Create(&fake_module);
    static PyType_Spec *const specs[] = {&memory_spec, &scrambled_spec, &pointer_spec, &object_device_spec};
    static const char *const names[] = {"BaseMemory", "ScrambledMemory", "MemoryPointer", "ObjectDevicePointer"};
    for (size_t i = 0; m && i < sizeof specs / sizeof specs[0]; i++) {
        PyObject *t = PyType_FromSpec(specs[i]);
        if (!t || PyModule_AddObject(m, names[i], t) < 0) {
            Py_XDECREF(t);
            Py_CLEAR(m);
        }
    }
    return m;
}
