/* fake_capture.c — scripted stream capture (fake_capture.h). */
#include "build_config.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <check.h>
#include "fake_capture.h"

#define MAX_CAPTURES 8
#define MAX_OBJECTS 64

typedef struct fake_user_object {
    void *ptr;
    cudaHostFn_t destroy;
    unsigned refs;
} fake_user_object;

struct fake_graph {
    int live;
    fake_user_object *objects[MAX_OBJECTS]; /* one reference each */
    int object_count;
};

static struct {
    cudaStream_t stream;
    unsigned long long id;
    fake_graph *graph;
    enum cudaStreamCaptureMode mode;
    int invalidated;
} captures[MAX_CAPTURES];

static unsigned long long next_capture_id = 1000;
static int forbidden, objects_live, queries;
static char last_forbidden[64];
static _Thread_local enum cudaStreamCaptureMode thread_mode = cudaStreamCaptureModeGlobal;

static int capture_of(cudaStream_t s)
{
    for (int i = 0; i < MAX_CAPTURES; i++)
        if (captures[i].graph && captures[i].stream == s)
            return i;
    return -1;
}

static int any_capture(void)
{
    for (int i = 0; i < MAX_CAPTURES; i++)
        if (captures[i].graph)
            return 1;
    return 0;
}

fake_graph *fake_capture_begin(cudaStream_t s, enum cudaStreamCaptureMode mode)
{
    ck_assert_int_lt(capture_of(s), 0);
    for (int i = 0; i < MAX_CAPTURES; i++)
        if (!captures[i].graph) {
            fake_graph *g = calloc(1, sizeof *g);
            ck_assert_ptr_nonnull(g);
            g->live = 1;
            captures[i].stream = s;
            captures[i].id = next_capture_id++;
            captures[i].graph = g;
            captures[i].mode = mode;
            captures[i].invalidated = 0; /* the slot may be an invalidated capture's */
            return g;
        }
    ck_abort_msg("too many captures");
    return NULL;
}

void fake_capture_join(cudaStream_t s2, cudaStream_t s)
{
    int i = capture_of(s);
    ck_assert_int_ge(i, 0);
    ck_assert_int_lt(capture_of(s2), 0);
    for (int j = 0; j < MAX_CAPTURES; j++)
        if (!captures[j].graph) {
            captures[j] = captures[i];
            captures[j].stream = s2;
            return;
        }
    ck_abort_msg("too many captures");
}

void fake_capture_invalidate(cudaStream_t s)
{
    int i = capture_of(s);
    ck_assert_int_ge(i, 0);
    for (int j = 0; j < MAX_CAPTURES; j++)
        if (captures[j].graph && captures[j].id == captures[i].id)
            captures[j].invalidated = 1;
}

void fake_capture_end(cudaStream_t s)
{
    int i = capture_of(s);
    ck_assert_int_ge(i, 0);
    captures[i].graph = NULL;
}

/* User objects and graphs' lists of them: threads that capture at once tie objects at once, as
 * CUDA lets them. */
static pthread_mutex_t objects_lock = PTHREAD_MUTEX_INITIALIZER;

/* Under objects_lock. */
static void release(fake_user_object *o, unsigned count)
{
    ck_assert_uint_ge(o->refs, count);
    o->refs -= count;
    if (!o->refs) {
        o->destroy(o->ptr);
        free(o);
        objects_live--;
    }
}

void fake_graph_destroy(fake_graph *g)
{
    for (int i = 0; i < MAX_CAPTURES; i++)
        ck_assert_msg(captures[i].graph != g, "destroying a graph still under capture");
    pthread_mutex_lock(&objects_lock);
    for (int i = 0; i < g->object_count; i++)
        release(g->objects[i], 1);
    pthread_mutex_unlock(&objects_lock);
    free(g);
}

int fake_graph_user_objects(const fake_graph *g) { return g->object_count; }

int fake_user_objects_live(void)
{
    pthread_mutex_lock(&objects_lock);
    int n = objects_live;
    pthread_mutex_unlock(&objects_lock);
    return n;
}

cudaError_t fake_capture_call(const char *call, fake_call_kind kind, cudaStream_t s)
{
    int bad;
    switch (kind) {
    case FAKE_CALL_WAIT: bad = any_capture(); break;
    case FAKE_CALL_UNSAFE: bad = any_capture() && thread_mode != cudaStreamCaptureModeRelaxed; break;
    default: bad = s && capture_of(s) >= 0; break;
    }
    if (!bad)
        return cudaSuccess;
    __atomic_add_fetch(&forbidden, 1, __ATOMIC_SEQ_CST);
    strncpy(last_forbidden, call, sizeof last_forbidden - 1);
    return cudaErrorStreamCaptureUnsupported;
}

int fake_capture_forbidden(void) { return forbidden; }

int fake_capture_queries(void) { return queries; }

const char *fake_capture_last_forbidden(void) { return last_forbidden; }

void fake_capture_reset(void)
{
    memset(captures, 0, sizeof captures);
    forbidden = 0;
    queries = 0;
    last_forbidden[0] = 0;
    thread_mode = cudaStreamCaptureModeGlobal;
}

/* ---- the CUDA calls ------------------------------------------------------------------------ */

cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream, enum cudaStreamCaptureStatus *status, unsigned long long *id,
                                     cudaGraph_t *graph, const cudaGraphNode_t **deps, const cudaGraphEdgeData **edges,
                                     size_t *count)
{
    __atomic_add_fetch(&queries, 1, __ATOMIC_RELAXED);
    int i = capture_of(stream);
    *status = i < 0 ? cudaStreamCaptureStatusNone
              : captures[i].invalidated ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive;
    if (id)
        *id = i >= 0 ? captures[i].id : 0;
    if (graph)
        *graph = i >= 0 ? (cudaGraph_t)captures[i].graph : NULL;
    if (deps)
        *deps = NULL;
    if (edges)
        *edges = NULL;
    if (count)
        *count = 0;
    return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus *status)
{
    __atomic_add_fetch(&queries, 1, __ATOMIC_RELAXED);
    int i = capture_of(stream);
    *status = i < 0 ? cudaStreamCaptureStatusNone
              : captures[i].invalidated ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive;
    return cudaSuccess;
}

cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode)
{
    enum cudaStreamCaptureMode old = thread_mode;
    thread_mode = *mode;
    *mode = old;
    return cudaSuccess;
}

cudaError_t cudaUserObjectCreate(cudaUserObject_t *out, void *ptr, cudaHostFn_t destroy, unsigned int refs,
                                 unsigned int flags)
{
    ck_assert_msg(flags == cudaUserObjectNoDestructorSync, "CUDA requires cudaUserObjectNoDestructorSync");
    fake_user_object *o = calloc(1, sizeof *o);
    ck_assert_ptr_nonnull(o);
    *o = (fake_user_object){.ptr = ptr, .destroy = destroy, .refs = refs};
    pthread_mutex_lock(&objects_lock);
    objects_live++;
    pthread_mutex_unlock(&objects_lock);
    *out = (cudaUserObject_t)o;
    return cudaSuccess;
}

cudaError_t cudaUserObjectRelease(cudaUserObject_t object, unsigned int count)
{
    pthread_mutex_lock(&objects_lock);
    release((fake_user_object *)object, count);
    pthread_mutex_unlock(&objects_lock);
    return cudaSuccess;
}

cudaError_t cudaGraphRetainUserObject(cudaGraph_t graph, cudaUserObject_t object, unsigned int count, unsigned int flags)
{
    fake_graph *g = (fake_graph *)graph;
    fake_user_object *o = (fake_user_object *)object;
    ck_assert_msg(g && g->live, "cudaGraphRetainUserObject: not a graph");
    pthread_mutex_lock(&objects_lock);
    for (unsigned i = 0; i < count; i++) {
        ck_assert_int_lt(g->object_count, MAX_OBJECTS);
        g->objects[g->object_count++] = o;
    }
    if (!(flags & cudaGraphUserObjectMove))
        o->refs += count;
    pthread_mutex_unlock(&objects_lock);
    return cudaSuccess;
}
