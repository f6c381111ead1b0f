/* _fastalloc.c — crmm._fastalloc: the calls a DeviceBuffer makes on every allocation and free,
 * as a C extension over Python's stable ABI, because through ctypes each call costs more than the
 * pool's whole allocation.
 *
 * create() returns a Buffer: a small object that owns one crmm_device_buffer and destroys it when
 * it goes away (so a DeviceBuffer needs no __del__, whose call costs more than the free). Its
 * methods ptr, size and device read the buffer; ctypes takes a Buffer wherever libcrmm wants the
 * crmm_device_buffer * (its _as_parameter_), so the rest of DeviceBuffer's methods stay in
 * Python. adopt() wraps a buffer another libcrmm call made (any other address is undefined: the
 * module is private to crmm/_alloc.py).
 *
 * The module does not link libcrmm: crmm/_alloc.py hands it the addresses of libcrmm's functions
 * from the libcrmm that ctypes loaded (bind), so that both paths call one copy of the library.
 * A failed create calls the `check` function given to bind with the crmm_status, which raises
 * the package's exception for it. A create or destroy is first tried with libcrmm's calls that
 * finish only where nothing waits (bind_nowait), with the GIL held; the GIL is released around
 * every other libcrmm call that may allocate or free: a resource may wait on the device (and a
 * host function queued on a stream may need the GIL to finish) or call back into Python. */
#define Py_LIMITED_API 0x030A0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef int (*create_fn)(size_t size, void *stream, void *mr, void **out);
typedef void (*destroy_fn)(void *buf);
typedef _Bool (*try_create_fn)(size_t size, void *stream, void *mr, void **out);
typedef _Bool (*try_destroy_fn)(void *buf);
typedef void *(*ptr_fn)(const void *buf);
typedef size_t (*size_fn)(const void *buf);
typedef int (*device_fn)(const void *buf);
/* crmm_device_guard (crmm/cuda_support.h): the pip build has no crmm headers, so it is mirrored */
typedef struct { int previous; int changed; } device_guard;
typedef int (*enter_fn)(int device, device_guard *guard);
typedef void (*restore_fn)(device_guard *guard);
typedef int (*memset_fn)(void *ptr, int value, size_t count, void *cuda_stream);
typedef int (*sync_fn)(void *stream);

/* libcrmm's functions, set once by bind (NULL before) */
static create_fn buffer_create;
static destroy_fn buffer_destroy;
static ptr_fn buffer_ptr;
static size_fn buffer_size;
static device_fn buffer_device;
static PyObject *check_status; /* one reference, held for the life of the process */
/* the calls that finish only where they need not wait, set by bind_nowait (NULL before: every
 * create and destroy releases the GIL) */
static try_create_fn buffer_try_create;
static try_destroy_fn buffer_try_destroy;
/* the zero-fill's functions, set by bind_zero (NULL before: create_zeroed refuses) */
static enter_fn device_enter;
static restore_fn device_restore;
static memset_fn cuda_memset;
static sync_fn stream_sync;
static PyObject *memset_failed; /* raises for a cudaError_t; one reference, for the process */

/* An address argument: an int (0 allowed only when `null_ok`), or None when `null_ok`. */
static int address_arg(PyObject *o, const char *what, int null_ok, void **out)
{
    if (o == Py_None && null_ok) {
        *out = NULL;
        return 0;
    }
    if (!PyLong_Check(o) || PyBool_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int address%s", what, null_ok ? " or None" : "");
        return -1;
    }
    unsigned long long v = PyLong_AsUnsignedLongLong(o);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_OverflowError, "%s is not an address (outside [0, 2**64))", what);
        return -1;
    }
    if (v > UINTPTR_MAX) {
        PyErr_Format(PyExc_OverflowError, "%s is not an address of this process", what);
        return -1;
    }
    if (!v && !null_ok) {
        PyErr_Format(PyExc_ValueError, "%s must not be 0", what);
        return -1;
    }
    *out = (void *)(uintptr_t)v;
    return 0;
}

/* A byte count: an int in [0, SIZE_MAX] (TypeError, ValueError for a negative one, OverflowError
 * past size_t), as crmm/_host.py's size_arg refuses them. */
static int size_arg(PyObject *o, size_t *out)
{
    if (!PyLong_Check(o) || PyBool_Check(o)) {
        PyErr_SetString(PyExc_TypeError, "size must be an int");
        return -1;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (overflow < 0 || (!overflow && v < 0)) {
        PyErr_Format(PyExc_ValueError, "size must not be negative (got %S)", o);
        return -1;
    }
    if (!overflow) {
        *out = (size_t)v;
        return 0;
    }
    unsigned long long u = PyLong_AsUnsignedLongLong(o);
    if ((u == (unsigned long long)-1 && PyErr_Occurred()) || u > SIZE_MAX) {
        PyErr_Clear();
        PyErr_Format(PyExc_OverflowError, "size %S does not fit in size_t", o);
        return -1;
    }
    *out = (size_t)u;
    return 0;
}

static int bound(void)
{
    if (buffer_create)
        return 1;
    PyErr_SetString(PyExc_RuntimeError, "crmm._fastalloc is not bound to libcrmm (crmm._alloc binds it)");
    return 0;
}

/* bind(create, destroy, ptr, size, device, check): the addresses of crmm_device_buffer_create,
 * _destroy, _ptr, _size and _device, and the function that raises for a crmm_status. Binding
 * again to the same create does nothing; to another library it is refused (buffers made
 * through the first would otherwise be freed through the second). */
static PyObject *fa_bind(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "bind takes 6 arguments (create, destroy, ptr, size, device, check)");
        return NULL;
    }
    static const char *const names[] = {"create", "destroy", "ptr", "size", "device"};
    void *fn[5];
    for (int i = 0; i < 5; i++)
        if (address_arg(args[i], names[i], 0, &fn[i]) < 0)
            return NULL;
    if (!PyCallable_Check(args[5])) {
        PyErr_SetString(PyExc_TypeError, "check must be callable");
        return NULL;
    }
    if (buffer_create) {
        if ((void *)buffer_create == fn[0])
            Py_RETURN_NONE;
        PyErr_SetString(PyExc_RuntimeError, "crmm._fastalloc is already bound to another libcrmm");
        return NULL;
    }
    /* function pointers from data pointers: the addresses are libcrmm's functions (POSIX) */
    buffer_create = (create_fn)(uintptr_t)fn[0];
    buffer_destroy = (destroy_fn)(uintptr_t)fn[1];
    buffer_ptr = (ptr_fn)(uintptr_t)fn[2];
    buffer_size = (size_fn)(uintptr_t)fn[3];
    buffer_device = (device_fn)(uintptr_t)fn[4];
    Py_INCREF(args[5]);
    check_status = args[5];
    Py_RETURN_NONE;
}

/* bind_nowait(try_create, try_destroy): the addresses of crmm_device_buffer_try_create and
 * _try_destroy. Then a create or destroy is first tried with the GIL held, which libcrmm does
 * only where nothing waits (a free pool block of the current device's resource, the pool's lock
 * free); the GIL is released only for what the try leaves. As bind: again with the same
 * functions does nothing, with others is refused. */
static PyObject *fa_bind_nowait(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "bind_nowait takes 2 arguments (try_create, try_destroy)");
        return NULL;
    }
    void *fn[2];
    if (address_arg(args[0], "try_create", 0, &fn[0]) < 0 || address_arg(args[1], "try_destroy", 0, &fn[1]) < 0)
        return NULL;
    if (buffer_try_create) {
        if ((void *)buffer_try_create == fn[0] && (void *)buffer_try_destroy == fn[1])
            Py_RETURN_NONE;
        PyErr_SetString(PyExc_RuntimeError, "crmm._fastalloc's calls without waiting are already bound to another libcrmm");
        return NULL;
    }
    buffer_try_destroy = (try_destroy_fn)(uintptr_t)fn[1];
    buffer_try_create = (try_create_fn)(uintptr_t)fn[0];
    Py_RETURN_NONE;
}

/* bind_zero(enter, restore, memset, sync, memset_failed): the addresses of
 * crmm_cuda_device_enter, crmm_cuda_device_restore, cudaMemsetAsync (of the CUDA runtime libcrmm
 * uses) and crmm_stream_synchronize, and the function that raises for a failed cudaMemsetAsync's
 * cudaError_t. As bind: again with the same memset does nothing, with another is refused. */
static PyObject *fa_bind_zero(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "bind_zero takes 5 arguments (enter, restore, memset, sync, memset_failed)");
        return NULL;
    }
    static const char *const names[] = {"enter", "restore", "memset", "sync"};
    void *fn[4];
    for (int i = 0; i < 4; i++)
        if (address_arg(args[i], names[i], 0, &fn[i]) < 0)
            return NULL;
    if (!PyCallable_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError, "memset_failed must be callable");
        return NULL;
    }
    if (cuda_memset) {
        if ((void *)cuda_memset == fn[2])
            Py_RETURN_NONE;
        PyErr_SetString(PyExc_RuntimeError, "crmm._fastalloc's zero-fill is already bound to another cudaMemsetAsync");
        return NULL;
    }
    device_enter = (enter_fn)(uintptr_t)fn[0];
    device_restore = (restore_fn)(uintptr_t)fn[1];
    cuda_memset = (memset_fn)(uintptr_t)fn[2];
    stream_sync = (sync_fn)(uintptr_t)fn[3];
    Py_INCREF(args[4]);
    memset_failed = args[4];
    Py_RETURN_NONE;
}

/* A Buffer: one crmm_device_buffer, destroyed with the object (or by free()). */
typedef struct {
    PyObject_HEAD
    void *buf; /* NULL once freed */
} buffer_object;

static PyObject *buffer_type; /* set at module init */

/* crmm_device_buffer_destroy(buf): at once with the GIL held where libcrmm can do it without
 * waiting, else with the GIL released (a free may wait on the device, or call back into Python). */
static void destroy_buffer(void *buf)
{
    if (buffer_try_destroy && buffer_try_destroy(buf))
        return;
    Py_BEGIN_ALLOW_THREADS
    buffer_destroy(buf);
    Py_END_ALLOW_THREADS
}

/* Destroy `buf` while an exception is set: the exception is set aside while the buffer goes
 * (with the GIL released), whose free may call back into Python. */
static void destroy_keeping_error(void *buf)
{
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    destroy_buffer(buf);
    PyErr_Restore(type, value, traceback);
}

/* A deallocator may run while an exception propagates (the Buffer dropped as the stack unwinds):
 * the exception is set aside for the free, which may call back into Python. */
static void buffer_dealloc(PyObject *self)
{
    void *buf = ((buffer_object *)self)->buf;
    if (buf) {
        destroy_keeping_error(buf);
    }
    PyObject *tp = (PyObject *)Py_TYPE(self);
    PyObject_Free(self);
    Py_DECREF(tp);
}

static PyObject *buffer_wrap(void *buf)
{
    buffer_object *b = PyObject_New(buffer_object, (PyTypeObject *)buffer_type);
    if (!b) { /* MemoryError */
        destroy_keeping_error(buf);
        return NULL;
    }
    b->buf = buf;
    return (PyObject *)b;
}

/* Drop a reference while an exception is set: the exception is set aside while the object
 * goes, whose free may call back into Python. */
static void drop_keeping_error(PyObject *o)
{
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    Py_XDECREF(o);
    PyErr_Restore(type, value, traceback);
}

/* The crmm_device_buffer of a live Buffer (ValueError once freed). */
static void *buffer_of(PyObject *o)
{
    void *buf = ((buffer_object *)o)->buf;
    if (!buf)
        PyErr_SetString(PyExc_ValueError, "this Buffer was freed");
    return buf;
}

/* Buffer.free(): destroy the buffer now (again: nothing). */
static PyObject *buffer_free(PyObject *self, PyObject *unused)
{
    (void)unused;
    void *buf = ((buffer_object *)self)->buf;
    ((buffer_object *)self)->buf = NULL;
    if (buf) {
        destroy_buffer(buf);
    }
    Py_RETURN_NONE;
}

/* Buffer.ptr(), .size(), .device(): the buffer's device address (0 for size 0), size in bytes,
 * and device (-1 for none); ValueError once freed. */
static PyObject *buffer_ptr_method(PyObject *self, PyObject *unused)
{
    (void)unused;
    void *buf = buffer_of(self);
    return buf ? PyLong_FromVoidPtr(buffer_ptr(buf)) : NULL;
}

static PyObject *buffer_size_method(PyObject *self, PyObject *unused)
{
    (void)unused;
    void *buf = buffer_of(self);
    return buf ? PyLong_FromSize_t(buffer_size(buf)) : NULL;
}

static PyObject *buffer_device_method(PyObject *self, PyObject *unused)
{
    (void)unused;
    void *buf = buffer_of(self);
    return buf ? PyLong_FromLong(buffer_device(buf)) : NULL;
}

/* Buffer._as_parameter_: the address as an int, for ctypes (0 once freed). */
static PyObject *buffer_address(PyObject *self, void *closure)
{
    (void)closure;
    return PyLong_FromVoidPtr(((buffer_object *)self)->buf);
}

static PyMethodDef buffer_methods[] = {
    {"ptr", buffer_ptr_method, METH_NOARGS, "ptr() -> the device address (0 for size 0)"},
    {"size", buffer_size_method, METH_NOARGS, "size() -> the size in bytes"},
    {"device", buffer_device_method, METH_NOARGS, "device() -> the device (-1 for none)"},
    {"free", buffer_free, METH_NOARGS, "free(): destroy the crmm_device_buffer now (a second call does nothing)"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef buffer_getset[] = {
    {"_as_parameter_", buffer_address, NULL, "the crmm_device_buffer * as an int, for ctypes (0 once freed)", NULL},
    {"address", buffer_address, NULL, "the crmm_device_buffer * as an int (0 once freed)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot buffer_slots[] = {
    {Py_tp_dealloc, (void *)buffer_dealloc},
    {Py_tp_methods, buffer_methods},
    {Py_tp_getset, buffer_getset},
    {Py_tp_doc, (void *)"One crmm_device_buffer, destroyed with this object (made by create or adopt)."},
    {0, NULL},
};

static PyType_Spec buffer_spec = {
    "crmm._fastalloc.Buffer", sizeof(buffer_object), 0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION, buffer_slots,
};

/* crmm_device_buffer_create(size, stream, mr) from create's three arguments: the buffer, or NULL
 * with the exception set (what check(status) raises for libcrmm's failure). */
static void *create_buffer(PyObject *const *args)
{
    size_t size;
    void *stream, *mr, *buf = NULL;
    if (size_arg(args[0], &size) < 0 || address_arg(args[1], "stream", 1, &stream) < 0 ||
        address_arg(args[2], "mr", 1, &mr) < 0 || !bound())
        return NULL;
    if (buffer_try_create && buffer_try_create(size, stream, mr, &buf))
        return buf;
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = buffer_create(size, stream, mr, &buf);
    Py_END_ALLOW_THREADS
    if (status == 0)
        return buf;
    PyObject *r = PyObject_CallFunction(check_status, "i", status);
    if (r) {
        Py_DECREF(r);
        PyErr_Format(PyExc_SystemError, "crmm_device_buffer_create failed with status %d and check did not raise", status);
    }
    return NULL;
}

/* create(size, stream, mr) -> Buffer: crmm_device_buffer_create(size, stream, mr); stream and mr
 * are a crmm_stream * and a crmm_resource * as ints, or None (the default stream, the current
 * device's resource). On failure raises what check(status) raises. */
static PyObject *fa_create(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "create takes 3 arguments (size, stream, mr)");
        return NULL;
    }
    void *buf = create_buffer(args);
    return buf ? buffer_wrap(buf) : NULL;
}

/* Raise what `raiser(code)` raises (a SystemError if it returns). */
static void raise_for(PyObject *raiser, int code, const char *what)
{
    PyObject *r = PyObject_CallFunction(raiser, "i", code);
    if (r) {
        Py_DECREF(r);
        PyErr_Format(PyExc_SystemError, "%s failed with %d and its error function did not raise", what, code);
    }
}

/* create_zeroed(size, stream, mr, cuda_stream, sync) -> Buffer: create, then fill the memory with
 * zeros on cuda_stream (the cudaStream_t of `stream`, an int or None) with the buffer's device
 * current, then, when `sync` is true, synchronize `stream`. What DeviceBuffer(size=n) does, in
 * one call. On a failure the buffer is freed and the exception raised: check's for libcrmm's
 * status, memset_failed's for cudaMemsetAsync's error. */
static PyObject *fa_create_zeroed(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "create_zeroed takes 5 arguments (size, stream, mr, cuda_stream, sync)");
        return NULL;
    }
    size_t size;
    void *stream, *mr, *cuda_stream, *buf = NULL;
    if (size_arg(args[0], &size) < 0 || address_arg(args[1], "stream", 1, &stream) < 0 ||
        address_arg(args[2], "mr", 1, &mr) < 0 || address_arg(args[3], "cuda_stream", 1, &cuda_stream) < 0 ||
        !bound())
        return NULL;
    int sync = PyObject_IsTrue(args[4]);
    if (sync < 0)
        return NULL;
    if (!cuda_memset) {
        PyErr_SetString(PyExc_RuntimeError, "crmm._fastalloc's zero-fill is not bound (crmm._alloc binds it)");
        return NULL;
    }
    int status, err = 0;
    Py_BEGIN_ALLOW_THREADS
    status = buffer_create(size, stream, mr, &buf);
    if (status == 0 && size) {
        device_guard guard = {-1, 0};
        status = device_enter(buffer_device(buf), &guard);
        if (status == 0) {
            err = cuda_memset(buffer_ptr(buf), 0, size, cuda_stream);
            device_restore(&guard);
            if (err == 0 && sync)
                status = stream_sync(stream);
        }
    }
    Py_END_ALLOW_THREADS
    if (status == 0 && err == 0)
        return buffer_wrap(buf);
    /* the exception first (it reads the thread's last error, which freeing could change), set
     * aside while the buffer is freed: the free may call back into Python */
    if (err)
        raise_for(memset_failed, err, "cudaMemsetAsync");
    else
        raise_for(check_status, status, "libcrmm");
    if (buf)
        destroy_keeping_error(buf);
    return NULL;
}

/* Whether o may be an owner_type: a class whose instances object.__new__ makes (make_owner makes
 * them so, without the type's own __new__); else TypeError naming `fn`. */
static bool owner_type_arg(PyObject *o, const char *fn)
{
    if (!PyType_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s: owner_type must be a type", fn);
        return false;
    }
    if (PyType_GetSlot((PyTypeObject *)o, Py_tp_new) != PyType_GetSlot(&PyBaseObject_Type, Py_tp_new)) {
        PyErr_Format(PyExc_TypeError, "%s: owner_type must be a class whose instances object.__new__ makes", fn);
        return false;
    }
    return true;
}

/* An owner_type made as its __new__ makes it, with _buf = buffer, _stream = stream_obj and
 * _mr = None: a DeviceBuffer around a Buffer, as RMM's allocators make it. NULL with the
 * exception set when anything raises (the buffer is then still the caller's). */
static PyObject *make_owner(PyObject *owner_type, PyObject *buffer, PyObject *stream_obj)
{
    static PyObject *buf_name, *stream_name, *mr_name;
    if (!buf_name && (!(buf_name = PyUnicode_InternFromString("_buf")) ||
                      !(stream_name = PyUnicode_InternFromString("_stream")) ||
                      !(mr_name = PyUnicode_InternFromString("_mr")))) {
        Py_CLEAR(buf_name);
        Py_CLEAR(stream_name);
        return NULL;
    }
    PyObject *owner = PyType_GenericNew((PyTypeObject *)owner_type, NULL, NULL);
    if (owner && (PyObject_SetAttr(owner, buf_name, buffer) < 0 || PyObject_SetAttr(owner, stream_name, stream_obj) < 0 ||
                  PyObject_SetAttr(owner, mr_name, Py_None) < 0))
        Py_CLEAR(owner);
    return owner;
}

/* pointer(mem, 0), called. */
static PyObject *call_pointer(PyObject *pointer, PyObject *mem)
{
    PyObject *zero = PyLong_FromLong(0);
    PyObject *result = zero ? PyObject_CallFunctionObjArgs(pointer, mem, zero, NULL) : NULL;
    Py_XDECREF(zero);
    return result;
}

/* pointer(memory(ptr, size, owner, device), 0) around a new Buffer (a reference this takes),
 * the owner made by make_owner. When anything raises, the buffer is freed and the exception
 * passed on. */
static PyObject *wrap_buffer(PyObject *buffer, PyObject *size, PyObject *memory, PyObject *pointer,
                             PyObject *owner_type, PyObject *stream_obj)
{
    if (!buffer)
        return NULL;
    void *buf = ((buffer_object *)buffer)->buf;
    PyObject *owner = make_owner(owner_type, buffer, stream_obj);
    drop_keeping_error(buffer); /* the owner holds it now; without an owner this frees the buffer */
    if (!owner)
        return NULL;
    PyObject *ptr = PyLong_FromVoidPtr(buffer_ptr(buf));
    PyObject *device = ptr ? PyLong_FromLong(buffer_device(buf)) : NULL;
    PyObject *mem = device ? PyObject_CallFunctionObjArgs(memory, ptr, size, owner, device, NULL) : NULL;
    Py_XDECREF(ptr);
    Py_XDECREF(device);
    drop_keeping_error(owner); /* mem holds it now; without mem this frees the buffer */
    if (!mem)
        return NULL;
    PyObject *result = call_pointer(pointer, mem);
    drop_keeping_error(mem);
    return result;
}

/* CuPy's memory for the C allocator: a subclass of cupy.cuda.memory.BaseMemory made at run time
 * (cupy_memory_type), whose instance owns the crmm_device_buffer itself. It saves what an
 * UnownedMemory around a DeviceBuffer costs on every allocation (three objects made and freed,
 * not one). Its `_owner` (and `owner`, CuPy 13's name) is the DeviceBuffer RMM's allocator hands
 * CuPy, made on first read: the buffer moves into it then, and the memory keeps it. Fields sit
 * after the base's instance at `cupy_memory_offset`; the base must hold no object (no GC, no
 * __dict__, no __weakref__), so that freeing an instance needs nothing of the base's dealloc. */
typedef struct {
    void *buf;         /* the crmm_device_buffer, owned; NULL once it moved into `owner` */
    PyObject *owner;   /* the DeviceBuffer made on first read of _owner, or NULL */
    PyObject *stream;  /* the Stream the buffer was allocated on (the owner's _stream) */
} cupy_memory_fields;

static PyObject *cupy_memory;            /* the type, once made */
static PyObject *cupy_memory_owner_type; /* the owner's type (DeviceBuffer) */
static Py_ssize_t cupy_memory_offset;

static cupy_memory_fields *memory_fields(PyObject *self)
{
    return (cupy_memory_fields *)((char *)self + cupy_memory_offset);
}

static void cupy_memory_dealloc(PyObject *self)
{
    cupy_memory_fields *f = memory_fields(self);
    void *buf = f->buf;
    f->buf = NULL;
    if (buf) {
        destroy_keeping_error(buf); /* as buffer_dealloc: it may run while an exception propagates */
    }
    Py_CLEAR(f->owner);
    Py_CLEAR(f->stream);
    PyTypeObject *tp = Py_TYPE(self);
    freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    tp_free(self);
    Py_DECREF(tp);
}

/* _owner: the DeviceBuffer that owns the memory (the same object on every read). */
static PyObject *cupy_memory_get_owner(PyObject *self, void *closure)
{
    (void)closure;
    cupy_memory_fields *f = memory_fields(self);
    if (!f->owner) {
        if (!f->buf)
            Py_RETURN_NONE;
        buffer_object *b = PyObject_New(buffer_object, (PyTypeObject *)buffer_type);
        if (!b)
            return NULL;
        b->buf = f->buf;
        PyObject *owner = make_owner(cupy_memory_owner_type, (PyObject *)b, f->stream);
        /* making the owner may run Python (a collection's finalizers, another thread), which may
         * have read _owner meanwhile and made the owner first: then this one lets go */
        bool first = owner && !f->owner && f->buf == b->buf;
        if (!first)
            b->buf = NULL; /* the memory, or the owner made first, keeps the buffer */
        drop_keeping_error((PyObject *)b);
        if (!owner)
            return NULL;
        if (first) {
            f->buf = NULL;
            f->owner = owner;
        } else {
            Py_DECREF(owner);
            if (!f->owner)
                Py_RETURN_NONE;
        }
    }
    Py_INCREF(f->owner);
    return f->owner;
}

static PyGetSetDef cupy_memory_getset[] = {
    {"_owner", cupy_memory_get_owner, NULL, "the DeviceBuffer that owns this memory", NULL},
    {"owner", cupy_memory_get_owner, NULL, "the DeviceBuffer that owns this memory (CuPy 13's name)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

/* Where CuPy keeps its fields. BaseMemory's ptr, size and device_id and MemoryPointer's ptr,
 * device_id and mem are C fields of the instances (Cython's cdef attributes); setting them through
 * their Python properties, and making a MemoryPointer through a Python call, costs more than the
 * rest of an allocation. So the layout is found at run time: distinct values are set through the
 * public attributes (or a MemoryPointer is made the public way), the one place in the instance
 * that holds each value is its field, a second set of values must land in the same places, and
 * values then written there directly must read back through the attributes. Any doubt leaves
 * the public way in use; nothing is assumed of CuPy's version. */
typedef struct { Py_ssize_t ptr, size, device; } memory_layout;      /* offsets; ptr < 0: unknown */
typedef struct { Py_ssize_t ptr, device, mem; } pointer_layout;      /* offsets; ptr < 0: unknown */
static memory_layout memory_at = {-1, -1, -1};
static PyObject *pointer_probed;    /* the pointer type probed (a reference), or NULL */
static pointer_layout pointer_at = {-1, -1, -1};
static PyObject *empty_tuple;

/* The one offset in [sizeof(PyObject), end), a multiple of `width`, where `o` holds the `width`
 * bytes at `value`; -1 when there is none or more than one. */
static Py_ssize_t find_field(PyObject *o, Py_ssize_t end, const void *value, size_t width)
{
    Py_ssize_t at = -1;
    for (Py_ssize_t off = (Py_ssize_t)sizeof(PyObject); off + (Py_ssize_t)width <= end; off += (Py_ssize_t)width)
        if (memcmp((char *)o + off, value, width) == 0) {
            if (at >= 0)
                return -1;
            at = off;
        }
    return at;
}

#define FIELD(o, at, type) (*(type *)((char *)(o) + (at)))

/* The int attribute `name` of o equals v (errors cleared: false). */
static int attr_is(PyObject *o, const char *name, long long v)
{
    PyObject *a = PyObject_GetAttrString(o, name);
    long long got = a ? PyLong_AsLongLong(a) : -1;
    Py_XDECREF(a);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return got == v;
}

/* Three sets of probe values, distinct from each other and from anything an instance holds: two
 * found where the public way puts them, the third written directly and read back. */
static const intptr_t probe_ptr[3] = {(intptr_t)0x7e5a00001234a500LL, (intptr_t)0x1c0ffee0005a5a00LL,
                                      (intptr_t)0x2b7e00000c0de100LL};
static const Py_ssize_t probe_size[3] = {(Py_ssize_t)0x5eed0000100100LL, (Py_ssize_t)0x777700abcd0000LL,
                                         (Py_ssize_t)0x3c3c0000f00d00LL};
static const int probe_device[3] = {0x2bad5, 0x15eed, 0x3a5c1};

/* Set a memory's fields through its attributes (0 on success; the error cleared on failure). */
static int set_memory_attrs(PyObject *mem, int r)
{
    PyObject *ptr = PyLong_FromLongLong((long long)probe_ptr[r]);
    PyObject *size = PyLong_FromSsize_t(probe_size[r]);
    PyObject *dev = PyLong_FromLong(probe_device[r]);
    int st = ptr && size && dev && PyObject_SetAttrString(mem, "ptr", ptr) == 0 &&
                     PyObject_SetAttrString(mem, "size", size) == 0 &&
                     PyObject_SetAttrString(mem, "device_id", dev) == 0
                 ? 0
                 : -1;
    Py_XDECREF(ptr);
    Py_XDECREF(size);
    Py_XDECREF(dev);
    if (st < 0)
        PyErr_Clear();
    return st;
}

/* Find where instances of `type` (cupy_memory, over a base of `end` bytes) keep ptr, size and
 * device_id; memory_at stays unknown when anything is in doubt. */
static void probe_memory_layout(PyObject *type, Py_ssize_t end)
{
    PyObject *mem = PyType_GenericAlloc((PyTypeObject *)type, 0);
    if (!mem) {
        PyErr_Clear();
        return;
    }
    memory_layout at = {-1, -1, -1};
    int ok = 1;
    for (int r = 0; ok && r < 2; r++) {
        ok = set_memory_attrs(mem, r) == 0;
        memory_layout found = {find_field(mem, end, &probe_ptr[r], sizeof(intptr_t)),
                               find_field(mem, end, &probe_size[r], sizeof(Py_ssize_t)),
                               find_field(mem, end, &probe_device[r], sizeof(int))};
        ok = ok && found.ptr >= 0 && found.size >= 0 && found.device >= 0 &&
             (r == 0 || (found.ptr == at.ptr && found.size == at.size && found.device == at.device));
        at = found;
    }
    if (ok) {
        FIELD(mem, at.ptr, intptr_t) = probe_ptr[2];
        FIELD(mem, at.size, Py_ssize_t) = probe_size[2];
        FIELD(mem, at.device, int) = probe_device[2];
        ok = attr_is(mem, "ptr", (long long)probe_ptr[2]) && attr_is(mem, "size", (long long)probe_size[2]) &&
             attr_is(mem, "device_id", probe_device[2]);
    }
    Py_DECREF(mem);
    if (ok)
        memory_at = at;
}

/* A new instance of `pointer` made by its tp_new alone (fields as its type initializes them). */
static PyObject *bare_pointer(PyObject *pointer)
{
    newfunc tp_new = (newfunc)PyType_GetSlot((PyTypeObject *)pointer, Py_tp_new);
    if (!tp_new) {
        PyErr_SetString(PyExc_TypeError, "the pointer type has no tp_new");
        return NULL;
    }
    return tp_new((PyTypeObject *)pointer, empty_tuple, NULL);
}

/* A pointer instance around `mem` (a reference taken) made without calling the type, at the
 * offsets probe_pointer_layout found. NULL with the error set. */
static PyObject *pointer_direct(PyObject *pointer, const pointer_layout *at, PyObject *mem, intptr_t ptr, int device)
{
    PyObject *o = bare_pointer(pointer);
    if (!o)
        return NULL;
    if (Py_TYPE(o) != (PyTypeObject *)pointer) { /* a __new__ that made something else: not ours to fill */
        Py_DECREF(o);
        return call_pointer(pointer, mem);
    }
    PyObject *old = FIELD(o, at->mem, PyObject *);
    Py_INCREF(mem);
    FIELD(o, at->mem, PyObject *) = mem;
    Py_XDECREF(old);
    FIELD(o, at->ptr, intptr_t) = ptr;
    FIELD(o, at->device, int) = device;
    return o;
}

/* Find where instances of `pointer` (MemoryPointer, made as pointer(mem, 0)) keep ptr, device_id
 * and mem, from instances made the public way around cupy_memory instances; then check that one
 * made by pointer_direct reads back the same. pointer_at stays unknown when anything is in
 * doubt; a type probed once is not probed again. */
static void probe_pointer_layout(PyObject *pointer)
{
    if (pointer == pointer_probed || memory_at.ptr < 0)
        return;
    PyObject *basic = PyObject_GetAttrString(pointer, "__basicsize__");
    Py_ssize_t end = basic ? PyLong_AsSsize_t(basic) : -1;
    Py_XDECREF(basic);
    PyObject *mems[3] = {NULL, NULL, NULL}, *made = NULL;
    pointer_layout at = {-1, -1, -1};
    int ok = end > 0;
    for (int r = 0; ok && r < 3; r++) {
        ok = (mems[r] = PyType_GenericAlloc((PyTypeObject *)cupy_memory, 0)) != NULL;
        if (ok) {
            FIELD(mems[r], memory_at.ptr, intptr_t) = probe_ptr[r];
            FIELD(mems[r], memory_at.size, Py_ssize_t) = probe_size[r];
            FIELD(mems[r], memory_at.device, int) = probe_device[r];
        }
    }
    for (int r = 0; ok && r < 2; r++) {
        PyObject *o = call_pointer(pointer, mems[r]);
        int own = o && Py_TYPE(o) == (PyTypeObject *)pointer; /* else `end` is not its size */
        pointer_layout found = {own ? find_field(o, end, &probe_ptr[r], sizeof(intptr_t)) : -1,
                                own ? find_field(o, end, &probe_device[r], sizeof(int)) : -1,
                                own ? find_field(o, end, &mems[r], sizeof(PyObject *)) : -1};
        Py_XDECREF(o);
        ok = found.ptr >= 0 && found.device >= 0 && found.mem >= 0 &&
             (r == 0 || (found.ptr == at.ptr && found.device == at.device && found.mem == at.mem));
        at = found;
    }
    if (ok) {
        made = pointer_direct(pointer, &at, mems[2], probe_ptr[2], probe_device[2]);
        PyObject *mem = made ? PyObject_GetAttrString(made, "mem") : NULL;
        ok = mem == mems[2] && Py_TYPE(made) == (PyTypeObject *)pointer && attr_is(made, "ptr", (long long)probe_ptr[2]) &&
             attr_is(made, "device_id", probe_device[2]);
        Py_XDECREF(mem);
    }
    Py_XDECREF(made);
    for (int r = 0; r < 3; r++)
        Py_XDECREF(mems[r]);
    PyErr_Clear();
    /* published at once, with the GIL held, for make_pointer */
    PyObject *previous = pointer_probed;
    Py_INCREF(pointer);
    pointer_probed = pointer;
    Py_XDECREF(previous);
    pointer_at = ok ? at : (pointer_layout){-1, -1, -1};
}

/* pointer(mem, 0): made directly where pointer's layout is known (probe_pointer_layout), else
 * by calling it. */
static PyObject *make_pointer(PyObject *pointer, PyObject *mem, intptr_t ptr, int device)
{
    /* a copy: making the instance may run Python that probes another pointer type */
    pointer_layout at = pointer_at;
    if (pointer == pointer_probed && at.ptr >= 0)
        return pointer_direct(pointer, &at, mem, ptr, device);
    return call_pointer(pointer, mem);
}

/* An instance of cupy_memory around `buf` (which this takes: freed on failure), with the base's
 * ptr, size and device_id set. */
static PyObject *cupy_memory_new(void *buf, PyObject *size, PyObject *stream_obj)
{
    static PyObject *ptr_name, *size_name, *device_name;
    if (!ptr_name && (!(ptr_name = PyUnicode_InternFromString("ptr")) || !(size_name = PyUnicode_InternFromString("size")) ||
                      !(device_name = PyUnicode_InternFromString("device_id")))) {
        Py_CLEAR(ptr_name);
        Py_CLEAR(size_name);
    }
    PyObject *mem = ptr_name ? PyType_GenericAlloc((PyTypeObject *)cupy_memory, 0) : NULL;
    if (!mem) {
        destroy_keeping_error(buf);
        return NULL;
    }
    cupy_memory_fields *f = memory_fields(mem);
    f->buf = buf; /* from here the memory frees it */
    Py_INCREF(stream_obj);
    f->stream = stream_obj;
    int device = buffer_device(buf);
    if (memory_at.ptr >= 0) {
        FIELD(mem, memory_at.ptr, intptr_t) = (intptr_t)buffer_ptr(buf);
        FIELD(mem, memory_at.size, Py_ssize_t) = (Py_ssize_t)buffer_size(buf);
        FIELD(mem, memory_at.device, int) = device;
        return mem;
    }
    PyObject *ptr = PyLong_FromVoidPtr(buffer_ptr(buf));
    PyObject *dev = ptr && device ? PyLong_FromLong(device) : NULL;
    if (!ptr || (device && !dev) || PyObject_SetAttr(mem, ptr_name, ptr) < 0 || PyObject_SetAttr(mem, size_name, size) < 0 ||
        (device && PyObject_SetAttr(mem, device_name, dev) < 0)) {
        drop_keeping_error(mem);
        mem = NULL;
    }
    Py_XDECREF(ptr);
    Py_XDECREF(dev);
    return mem;
}

/* cupy_memory_type(base, owner_type) -> the memory type for cupy_allocator: a subclass of `base`
 * (cupy.cuda.memory.BaseMemory) whose instances own a crmm buffer, with `_owner` an owner_type
 * (DeviceBuffer) made on first read. Made once per process; again with the same base it is
 * returned, with another refused. TypeError for a base whose instances hold objects. */
static PyObject *fa_cupy_memory_type(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 2 || !PyType_Check(args[0]) || !PyType_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "cupy_memory_type takes 2 types (base, owner_type)");
        return NULL;
    }
    if (!owner_type_arg(args[1], "cupy_memory_type"))
        return NULL;
    PyObject *base = args[0];
    if (cupy_memory) {
        if (PyType_IsSubtype((PyTypeObject *)cupy_memory, (PyTypeObject *)base) && cupy_memory_owner_type == args[1]) {
            Py_INCREF(cupy_memory);
            return cupy_memory;
        }
        PyErr_SetString(PyExc_RuntimeError, "crmm._fastalloc's CuPy memory type is already made over another base");
        return NULL;
    }
    unsigned long flags = PyType_GetFlags((PyTypeObject *)base);
    if (!(flags & Py_TPFLAGS_BASETYPE) || (flags & Py_TPFLAGS_HAVE_GC)) {
        PyErr_SetString(PyExc_TypeError, "cupy_memory_type: the base must be subclassable and hold no objects (no GC)");
        return NULL;
    }
    static const char *const layout[] = {"__basicsize__", "__itemsize__", "__dictoffset__", "__weakrefoffset__"};
    Py_ssize_t v[4];
    for (int i = 0; i < 4; i++) {
        PyObject *o = PyObject_GetAttrString(base, layout[i]);
        v[i] = o ? PyLong_AsSsize_t(o) : -1;
        Py_XDECREF(o);
        if (v[i] == -1 && PyErr_Occurred())
            return NULL;
    }
    if (v[0] <= 0 || v[1] || v[2] || v[3]) {
        PyErr_SetString(PyExc_TypeError, "cupy_memory_type: the base must be of fixed size, without __dict__ or __weakref__");
        return NULL;
    }
    Py_ssize_t align = (Py_ssize_t)sizeof(void *);
    Py_ssize_t offset = (v[0] + align - 1) / align * align;
    PyType_Slot slots[] = {
        {Py_tp_dealloc, (void *)cupy_memory_dealloc},
        {Py_tp_getset, cupy_memory_getset},
        {Py_tp_doc, (void *)"CuPy memory that owns a crmm buffer (made by rmm_cupy_allocator)."},
        {0, NULL},
    };
    PyType_Spec spec = {"crmm._fastalloc.CupyMemory", (int)(offset + (Py_ssize_t)sizeof(cupy_memory_fields)), 0,
                        Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION, slots};
    PyObject *bases = PyTuple_Pack(1, base);
    PyObject *type = bases ? PyType_FromSpecWithBases(&spec, bases) : NULL;
    Py_XDECREF(bases);
    if (!type)
        return NULL;
    cupy_memory_offset = offset;
    Py_INCREF(args[1]);
    cupy_memory_owner_type = args[1];
    cupy_memory = type; /* one reference, for the process */
    probe_memory_layout(type, v[0]);
    Py_INCREF(type);
    return type;
}

/* create_wrapped(size, stream, mr, memory, pointer, owner_type, stream_obj)
 *   -> pointer(memory(ptr, size, owner, device), 0)
 * create() a buffer and hand it to a foreign memory class that keeps its owner alive
 * (wrap_buffer). With memory = cupy.cuda.UnownedMemory and pointer = cupy.cuda.MemoryPointer
 * this is a whole CuPy allocation in one call. */
static PyObject *fa_create_wrapped(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError,
                        "create_wrapped takes 7 arguments (size, stream, mr, memory, pointer, owner_type, stream_obj)");
        return NULL;
    }
    if (!owner_type_arg(args[5], "create_wrapped"))
        return NULL;
    return wrap_buffer(fa_create(self, args, 3), args[0], args[3], args[4], args[5], args[6]);
}

/* The allocator cupy_allocator makes: its context, a tuple in this order. */
enum { CA_GET_STREAM, CA_STREAMS, CA_MEMORY, CA_POINTER, CA_OWNER_TYPE, CA_MR, CA_LIB, CA_FALLBACK, CA_COUNT };
static int lib_initialized; /* crmm._lib.initialized was seen true (it stays true) */

/* Whether libcrmm has a config (lib.initialized, remembered once true): 1 or 0, -1 with the
 * error set. */
static int lib_ready(PyObject *lib)
{
    static PyObject *initialized_name;
    if (lib_initialized)
        return 1;
    if (!initialized_name && !(initialized_name = PyUnicode_InternFromString("initialized")))
        return -1;
    PyObject *v = PyObject_GetAttr(lib, initialized_name);
    int yes = v ? PyObject_IsTrue(v) : -1;
    Py_XDECREF(v);
    if (yes > 0)
        lib_initialized = 1;
    return yes;
}

/* rmm_cupy_allocator(nbytes): a positive int on a stream `streams` knows (get_stream().ptr ->
 * (stream_obj, crmm_stream address)) once libcrmm has a config: create_wrapped on that stream in
 * this one C call; anything else (another stream, 0, a non-int, before the config) goes to the
 * fallback, the Python allocator that handles every case. */
static PyObject *ca_call(PyObject *ctx, PyObject *nbytes)
{
    static PyObject *ptr_name;
    PyObject *fallback = PyTuple_GetItem(ctx, CA_FALLBACK);
    if (!fallback)
        return NULL;
    if (!ptr_name && !(ptr_name = PyUnicode_InternFromString("ptr")))
        return NULL;
    int positive = 0;
    if (PyLong_CheckExact(nbytes)) {
        size_t n = PyLong_AsSize_t(nbytes);
        if (n == (size_t)-1 && PyErr_Occurred())
            PyErr_Clear(); /* negative or too large: the fallback names it */
        else
            positive = n > 0;
    }
    int ready = positive ? lib_ready(PyTuple_GetItem(ctx, CA_LIB)) : 0;
    if (ready < 0)
        return NULL;
    if (!ready || !buffer_create)
        return PyObject_CallFunctionObjArgs(fallback, nbytes, NULL);
    PyObject *stream = PyObject_CallNoArgs(PyTuple_GetItem(ctx, CA_GET_STREAM));
    PyObject *ptr = stream ? PyObject_GetAttr(stream, ptr_name) : NULL;
    Py_XDECREF(stream);
    if (!ptr)
        return NULL;
    PyObject *entry = PyDict_GetItemWithError(PyTuple_GetItem(ctx, CA_STREAMS), ptr); /* borrowed */
    Py_DECREF(ptr);
    if (!entry)
        return PyErr_Occurred() ? NULL : PyObject_CallFunctionObjArgs(fallback, nbytes, NULL);
    if (!PyTuple_Check(entry) || PyTuple_Size(entry) != 2) {
        PyErr_SetString(PyExc_TypeError, "cupy_allocator: streams maps a stream's ptr to (stream, crmm_stream address)");
        return NULL;
    }
    Py_INCREF(entry); /* held across the create, which releases the GIL */
    PyObject *create_args[3] = {nbytes, PyTuple_GetItem(entry, 1), PyTuple_GetItem(ctx, CA_MR)};
    PyObject *memory = PyTuple_GetItem(ctx, CA_MEMORY), *pointer = PyTuple_GetItem(ctx, CA_POINTER), *result;
    if (memory == cupy_memory && cupy_memory) {
        void *buf = create_buffer(create_args);
        PyObject *mem = buf ? cupy_memory_new(buf, nbytes, PyTuple_GetItem(entry, 0)) : NULL;
        result = mem ? make_pointer(pointer, mem, (intptr_t)buffer_ptr(buf), buffer_device(buf)) : NULL;
        drop_keeping_error(mem);
    } else {
        result = wrap_buffer(fa_create(NULL, create_args, 3), nbytes, memory, pointer, PyTuple_GetItem(ctx, CA_OWNER_TYPE),
                             PyTuple_GetItem(entry, 0));
    }
    Py_DECREF(entry);
    return result;
}

/* A builtin function of `module` over def whose self is the tuple of args[0..n) (the
 * allocators' context). */
static PyObject *bound_builtin(PyMethodDef *def, PyObject *const *args, int n, const char *module_name)
{
    PyObject *ctx = PyTuple_New(n);
    if (!ctx)
        return NULL;
    for (int i = 0; i < n; i++) {
        Py_INCREF(args[i]);
        PyTuple_SetItem(ctx, i, args[i]);
    }
    PyObject *module = PyUnicode_FromString(module_name);
    PyObject *fn = module ? PyCFunction_NewEx(def, ctx, module) : NULL;
    Py_XDECREF(module);
    Py_DECREF(ctx);
    return fn;
}

static PyMethodDef ca_def = {
    "rmm_cupy_allocator", ca_call, METH_O,
    "rmm_cupy_allocator(nbytes) -> cupy.cuda.MemoryPointer to nbytes of crmm memory (a DeviceBuffer owns it), "
    "allocated on CuPy's current stream from the current device's resource"};

/* cupy_allocator(get_stream, streams, memory, pointer, owner_type, mr, lib, fallback)
 *   -> rmm_cupy_allocator(nbytes) (ca_call), a builtin function for cupy.cuda.set_allocator.
 * get_stream: cupy.cuda.get_current_stream; streams: {ptr: (stream_obj, crmm_stream address)}
 * for the streams served in C; memory, pointer: CuPy's UnownedMemory (called as memory(ptr,
 * size, owner, device)) or the type cupy_memory_type made (its instance owns the buffer), and
 * MemoryPointer; owner_type: DeviceBuffer; mr: a crmm_resource * as an int or None (the current device's);
 * lib: the module whose `initialized` says libcrmm has a config; fallback: the allocator for
 * every other call. */
static PyObject *fa_cupy_allocator(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    void *mr;
    if (nargs != CA_COUNT) {
        PyErr_SetString(PyExc_TypeError,
                        "cupy_allocator takes 8 arguments (get_stream, streams, memory, pointer, owner_type, mr, lib, fallback)");
        return NULL;
    }
    if (!PyCallable_Check(args[CA_GET_STREAM]) || !PyCallable_Check(args[CA_MEMORY]) ||
        !PyCallable_Check(args[CA_POINTER]) || !PyCallable_Check(args[CA_FALLBACK])) {
        PyErr_SetString(PyExc_TypeError, "cupy_allocator: get_stream, memory, pointer and fallback must be callable");
        return NULL;
    }
    if (!PyDict_Check(args[CA_STREAMS]) || !PyType_Check(args[CA_OWNER_TYPE])) {
        PyErr_SetString(PyExc_TypeError, "cupy_allocator: streams must be a dict and owner_type a type");
        return NULL;
    }
    if (!owner_type_arg(args[CA_OWNER_TYPE], "cupy_allocator"))
        return NULL;
    if (address_arg(args[CA_MR], "mr", 1, &mr) < 0)
        return NULL;
    if (args[CA_MEMORY] == cupy_memory && cupy_memory && PyType_Check(args[CA_POINTER]))
        probe_pointer_layout(args[CA_POINTER]);
    return bound_builtin(&ca_def, args, CA_COUNT, "crmm.allocators.cupy");
}

/* Numba's allocator: the context numba_allocator makes, a tuple in this order. */
enum { NA_POINTER, NA_DEVICE_POINTER, NA_CONTEXT, NA_STREAM, NA_MR, NA_LIB, NA_FALLBACK, NA_COUNT };

/* memalloc(size): a positive int that fits in size_t, once libcrmm has a config: a buffer on the
 * given stream from mr, and the pointer type's instance around it made as its __init__ would
 * (context, device_pointer = handle = device_pointer(address), size = _cuda_memsize_ = size,
 * _crmm_buffer = the Buffer), without calling it; anything else goes to the fallback. */
static PyObject *na_call(PyObject *ctx, PyObject *size)
{
    static PyObject *names[6];
    static const char *const spelled[6] = {"context", "device_pointer", "handle", "size", "_cuda_memsize_",
                                           "_crmm_buffer"};
    PyObject *fallback = PyTuple_GetItem(ctx, NA_FALLBACK);
    if (!fallback)
        return NULL;
    for (int i = 0; i < 6; i++)
        if (!names[i] && !(names[i] = PyUnicode_InternFromString(spelled[i])))
            return NULL;
    size_t n = 0;
    if (PyLong_CheckExact(size)) {
        n = PyLong_AsSize_t(size);
        if (n == (size_t)-1 && PyErr_Occurred()) {
            PyErr_Clear(); /* negative or too large: the fallback names it */
            n = 0;
        }
    }
    int ready = n ? lib_ready(PyTuple_GetItem(ctx, NA_LIB)) : 0;
    if (ready < 0)
        return NULL;
    if (!ready || !buffer_create)
        return PyObject_CallFunctionObjArgs(fallback, size, NULL);
    PyObject *create_args[3] = {size, PyTuple_GetItem(ctx, NA_STREAM), PyTuple_GetItem(ctx, NA_MR)};
    void *buf = create_buffer(create_args);
    PyObject *buffer = buf ? buffer_wrap(buf) : NULL; /* frees buf when it cannot be made */
    if (!buffer)
        return NULL;
    PyObject *address = PyLong_FromVoidPtr(buffer_ptr(buf));
    PyObject *dptr = address ? PyObject_CallFunctionObjArgs(PyTuple_GetItem(ctx, NA_DEVICE_POINTER), address, NULL) : NULL;
    Py_XDECREF(address);
    PyObject *pointer = PyTuple_GetItem(ctx, NA_POINTER);
    newfunc object_new = (newfunc)PyType_GetSlot((PyTypeObject *)pointer, Py_tp_new); /* object's (numba_allocator) */
    PyObject *p = dptr ? object_new((PyTypeObject *)pointer, empty_tuple, NULL) : NULL;
    PyObject *values[6] = {PyTuple_GetItem(ctx, NA_CONTEXT), dptr, dptr, size, size, buffer};
    for (int i = 0; p && i < 6; i++)
        if (PyObject_SetAttr(p, names[i], values[i]) < 0)
            Py_CLEAR(p);
    Py_XDECREF(dptr);
    drop_keeping_error(buffer); /* the pointer holds it now; without one this frees the buffer */
    return p;
}

static PyMethodDef na_def = {"memalloc", na_call, METH_O,
                             "memalloc(size) -> the Numba pointer to size bytes of crmm memory it owns"};

/* numba_allocator(pointer, device_pointer, context, stream, mr, lib, fallback) -> memalloc(size)
 * (na_call), a builtin function for a Numba memory manager's memalloc. pointer: the
 * MemoryPointer subclass whose instances hold their crmm Buffer (made without calling it);
 * device_pointer: the binding's pointer type, called with the address; context: Numba's context;
 * stream, mr: a crmm_stream * and a crmm_resource * as ints or None (the default stream, the
 * current device's resource); lib: the module whose `initialized` says libcrmm has a config;
 * fallback: the memalloc for every other call (size 0, not an int, before the config). */
static PyObject *fa_numba_allocator(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    void *address;
    if (nargs != NA_COUNT) {
        PyErr_SetString(PyExc_TypeError,
                        "numba_allocator takes 7 arguments (pointer, device_pointer, context, stream, mr, lib, fallback)");
        return NULL;
    }
    if (!PyType_Check(args[NA_POINTER]) || !PyCallable_Check(args[NA_DEVICE_POINTER]) ||
        !PyCallable_Check(args[NA_FALLBACK])) {
        PyErr_SetString(PyExc_TypeError, "numba_allocator: pointer must be a type, device_pointer and fallback callable");
        return NULL;
    }
    if (PyType_GetSlot((PyTypeObject *)args[NA_POINTER], Py_tp_new) != PyType_GetSlot(&PyBaseObject_Type, Py_tp_new)) {
        /* na_call makes instances with object.__new__: only a type that makes them so */
        PyErr_SetString(PyExc_TypeError, "numba_allocator: pointer must be a class whose instances object.__new__ makes");
        return NULL;
    }
    if (address_arg(args[NA_STREAM], "stream", 1, &address) < 0 || address_arg(args[NA_MR], "mr", 1, &address) < 0)
        return NULL;
    return bound_builtin(&na_def, args, NA_COUNT, "crmm.allocators.numba");
}

/* adopt(address) -> Buffer: take ownership of a crmm_device_buffer * another call made (not 0). */
static PyObject *fa_adopt(PyObject *self, PyObject *arg)
{
    (void)self;
    void *buf;
    if (address_arg(arg, "buf", 0, &buf) < 0 || !bound())
        return NULL;
    return buffer_wrap(buf);
}

/* cupy_layout() -> (memory, pointer): whether CuPy's memory fields are written directly and its
 * MemoryPointer made without a call (the layouts probe_memory_layout and probe_pointer_layout
 * found), for the tests and the benchmark. */
static PyObject *fa_cupy_layout(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    return Py_BuildValue("(OO)", memory_at.ptr >= 0 ? Py_True : Py_False,
                         pointer_probed && pointer_at.ptr >= 0 ? Py_True : Py_False);
}

static PyMethodDef fa_methods[] = {
    {"bind", (PyCFunction)(void (*)(void))fa_bind, METH_FASTCALL, "bind(create, destroy, ptr, size, device, check)"},
    {"create", (PyCFunction)(void (*)(void))fa_create, METH_FASTCALL, "create(size, stream, mr) -> Buffer"},
    {"bind_nowait", (PyCFunction)(void (*)(void))fa_bind_nowait, METH_FASTCALL, "bind_nowait(try_create, try_destroy)"},
    {"bind_zero", (PyCFunction)(void (*)(void))fa_bind_zero, METH_FASTCALL,
     "bind_zero(enter, restore, memset, sync, memset_failed)"},
    {"create_zeroed", (PyCFunction)(void (*)(void))fa_create_zeroed, METH_FASTCALL,
     "create_zeroed(size, stream, mr, cuda_stream, sync) -> Buffer of zeros"},
    {"create_wrapped", (PyCFunction)(void (*)(void))fa_create_wrapped, METH_FASTCALL,
     "create_wrapped(size, stream, mr, memory, pointer, owner_type, stream_obj) -> pointer(memory(ptr, size, owner, device), 0)"},
    {"cupy_allocator", (PyCFunction)(void (*)(void))fa_cupy_allocator, METH_FASTCALL,
     "cupy_allocator(get_stream, streams, memory, pointer, owner_type, mr, lib, fallback) -> rmm_cupy_allocator"},
    {"cupy_memory_type", (PyCFunction)(void (*)(void))fa_cupy_memory_type, METH_FASTCALL,
     "cupy_memory_type(base, owner_type) -> the CuPy memory type whose instances own a crmm buffer"},
    {"adopt", fa_adopt, METH_O, "adopt(address) -> Buffer owning that crmm_device_buffer *"},
    {"numba_allocator", (PyCFunction)(void (*)(void))fa_numba_allocator, METH_FASTCALL,
     "numba_allocator(pointer, device_pointer, context, stream, mr, lib, fallback) -> memalloc"},
    {"cupy_layout", fa_cupy_layout, METH_NOARGS,
     "cupy_layout() -> (memory fields written directly, MemoryPointer made directly)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef fa_module = {
    PyModuleDef_HEAD_INIT, "_fastalloc",
    "DeviceBuffer's allocate and free calls into libcrmm (see crmm/_alloc.py).", -1, fa_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__fastalloc(void);
PyMODINIT_FUNC PyInit__fastalloc(void)
{
    PyObject *m = PyModule_Create(&fa_module);
    if (!m)
        return NULL;
    if ((!empty_tuple && !(empty_tuple = PyTuple_New(0))) ||
        (!buffer_type && !(buffer_type = PyType_FromSpec(&buffer_spec)))) {
        Py_DECREF(m);
        return NULL;
    }
    /* the interface crmm/_alloc.py checks (EXTENSION_ABI) before it binds */
    if (PyModule_AddIntConstant(m, "ABI", 7) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(buffer_type);
    if (PyModule_AddObject(m, "Buffer", buffer_type) < 0) {
        Py_DECREF(buffer_type);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
