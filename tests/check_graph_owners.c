/* check_graph_owners.c — captures whose graphs a framework owns (crmm/graph_owner.h), on the CPU
 * against the scripted CUDA of graphs_test.h: a capture an owner claims gets no CUDA user object,
 * its memory stays the graph's after the graph is destroyed until the owner's last release, which
 * synchronizes the device once and hands it back (after the end of any owner's capture open
 * then); a capture no owner claims keeps its user object; a release that cannot synchronize keeps
 * the memory and a later one hands it back; bad calls are refused. For the pool in its three forms, arena and fixed_size. */
#include "build_config.h"
#include <crmm/graph_owner.h>
#include <unistd.h>
#include "graphs_test.h"

/* The resources under test: the pool's three forms, then arena and fixed_size over cuda. */
#define RESOURCES (FORMS + 2)

static crmm_resource *resource(int i)
{
    if (i < FORMS)
        return pool_in_form(i, "initial_size=4MiB");
    fake_vmm_reset(PAGE, DEVICE_MEMORY);
    crmm_resource *cuda = crmm_test_create("cuda", "", NULL);
    crmm_resource *r = i == FORMS ? crmm_test_create("arena", "arena_size=8MiB", cuda)
                                  : crmm_test_create("fixed_size", "block_size=1MiB blocks_to_preallocate=4", cuda);
    crmm_resource_release(cuda);
    return r;
}

static const char *resource_name(int i) { return i < FORMS ? form_names[i] : i == FORMS ? "arena" : "fixed_size"; }

/* What r holds for graphs, once the program has freed everything: arena and fixed_size take a
 * destroyed graph's blocks back at their next allocation outside a capture, so one is made, on
 * the stream the tests capture (whose free memory an arena's capture may take without a wait). */
static uint64_t held_for_graphs(crmm_resource *r, cudaStream_t s)
{
    free_on(r, alloc_on(r, MiB, s), MiB, s);
    return q(r, CRMM_QUERY_BYTES_RESERVED) - q(r, CRMM_QUERY_BYTES_FREE);
}

/* claims: the capture is the owner's when it runs on the stream the test named */
static bool on_stream(void *ctx, crmm_cuda_stream_t stream) { return stream == ctx; }
static bool never(void *ctx, crmm_cuda_stream_t stream) { (void)ctx, (void)stream; return false; }

/* One capture on s of `owner` (claims on_stream(s) or never): a block allocated and freed in it. */
static fake_graph *capture_one_block(crmm_resource *r, uint64_t owner, cudaStream_t s, bool claimed)
{
    ck_assert_crmm_ok(crmm_graph_owner_begin(owner, 0, (crmm_cuda_stream_t)s, claimed ? on_stream : never, (void *)s));
    fake_graph *g = fake_capture_begin(s, cudaStreamCaptureModeGlobal);
    void *a = alloc_on(r, MiB, s);
    free_on(r, a, MiB, s);
    fake_capture_end(s);
    ck_assert_crmm_ok(crmm_graph_owner_end(owner));
    return g;
}

/* A capture of `owner` on s whose graph is destroyed at once: what r held for graphs before it
 * (the owner holds the capture's block until its release). */
static uint64_t owned_graph_gone(crmm_resource *r, uint64_t owner, cudaStream_t s)
{
    uint64_t held_before = held_for_graphs(r, s);
    fake_graph_destroy(capture_one_block(r, owner, s, true));
    return held_before;
}

CRMM_LOOP_TEST_IN("owners", an_owned_capture_is_held_until_the_owners_last_release, RESOURCES)
{
    crmm_resource *r = resource(_i);
    cudaStream_t s = stream_n(1);
    uint64_t held_before = held_for_graphs(r, s), adopted = crmm_graph_owner_adopted_total();
    fake_graph *g = capture_one_block(r, 7, s, true);
    ck_assert_msg(fake_graph_user_objects(g) == 0, "%s: a user object on an owned graph", resource_name(_i));
    ck_assert_uint_eq(crmm_graph_owner_adopted_total(), adopted + 1);
    ck_assert_msg(fake_capture_forbidden() == 0, "%s: %s under capture", resource_name(_i), fake_capture_last_forbidden());
    fake_graph_destroy(g); /* the owner, not the graph, says when the memory is free */
    ck_assert_uint_eq(held_for_graphs(r, s), held_before + MiB);

    /* a second graph of the same owner (PyTorch: a pool shared by two graphs) */
    ck_assert_crmm_ok(crmm_graph_owner_begin(7, 0, (crmm_cuda_stream_t)s, on_stream, (void *)s));
    ck_assert_crmm_ok(crmm_graph_owner_end(7));
    int syncs = fake_vmm.device_syncs;
    ck_assert_crmm_ok(crmm_graph_owner_release(7));
    ck_assert_int_eq(fake_vmm.device_syncs, syncs); /* one graph of the owner lives on */
    ck_assert_uint_eq(held_for_graphs(r, s), held_before + MiB);
    ck_assert_crmm_ok(crmm_graph_owner_release(7));
    ck_assert_int_eq(fake_vmm.device_syncs, syncs + 1); /* the graphs' launches may still run */
    ck_assert_msg(held_for_graphs(r, s) == held_before, "%s: the owner's memory did not come back",
                  resource_name(_i));
    ck_assert_crmm(crmm_graph_owner_release(7), CRMM_ERROR_INVALID_ARGUMENT); /* forgotten */
    crmm_resource_release(r);
}

CRMM_LOOP_TEST_IN("owners", a_capture_no_owner_claims_keeps_its_user_object, RESOURCES)
{
    crmm_resource *r = resource(_i);
    cudaStream_t s = stream_n(1);
    uint64_t held_before = held_for_graphs(r, s), adopted = crmm_graph_owner_adopted_total();
    fake_graph *g = capture_one_block(r, 8, s, false);
    ck_assert_int_eq(fake_graph_user_objects(g), 1);
    ck_assert_uint_eq(crmm_graph_owner_adopted_total(), adopted);
    int syncs = fake_vmm.device_syncs;
    ck_assert_crmm_ok(crmm_graph_owner_release(8)); /* it took nothing: no synchronization */
    ck_assert_int_eq(fake_vmm.device_syncs, syncs);
    ck_assert_uint_eq(held_for_graphs(r, s), held_before + MiB);
    fake_graph_destroy(g);
    ck_assert_uint_eq(held_for_graphs(r, s), held_before);
    crmm_resource_release(r);
}

CRMM_LOOP_TEST_IN("owners", a_release_that_cannot_synchronize_keeps_the_memory_for_a_later_one, RESOURCES)
{
    crmm_resource *r = resource(_i);
    cudaStream_t s = stream_n(1), t = stream_n(3);
    uint64_t held_before = owned_graph_gone(r, 9, s);
    fake_graph *elsewhere = fake_capture_begin(t, cudaStreamCaptureModeGlobal); /* the device cannot wait now */
    ck_assert_crmm(crmm_graph_owner_release(9), CRMM_ERROR_CUDA);
    ck_assert_msg(strstr(crmm_last_error(), "device 0") && strstr(crmm_last_error(), "stays held"), "%s",
                  crmm_last_error());
    fake_capture_end(t);
    fake_graph_destroy(elsewhere);
    fake_capture_reset(); /* the refused synchronization counted as a forbidden call */
    ck_assert_uint_eq(held_for_graphs(r, s), held_before + MiB);
    /* the next release, of any owner, synchronizes and hands it back */
    ck_assert_crmm_ok(crmm_graph_owner_begin(10, 0, NULL, never, NULL));
    ck_assert_crmm_ok(crmm_graph_owner_end(10));
    ck_assert_crmm_ok(crmm_graph_owner_release(10));
    ck_assert_uint_eq(held_for_graphs(r, s), held_before);
    crmm_resource_release(r);
}

/* A release while some owner's capture is open does not synchronize (that would synchronize the
 * captured stream and invalidate the capture): the memory comes back when the capture ends. */
CRMM_LOOP_TEST_IN("owners", a_release_during_an_owners_capture_waits_for_its_end, RESOURCES)
{
    crmm_resource *r = resource(_i);
    cudaStream_t s = stream_n(1), t = stream_n(3);
    uint64_t held_before = owned_graph_gone(r, 13, s);
    ck_assert_crmm_ok(crmm_graph_owner_begin(14, 0, (crmm_cuda_stream_t)t, on_stream, (void *)t));
    fake_graph *g = fake_capture_begin(t, cudaStreamCaptureModeGlobal);
    int syncs = fake_vmm.device_syncs;
    ck_assert_crmm_ok(crmm_graph_owner_release(13));
    ck_assert_int_eq(fake_vmm.device_syncs, syncs);
    fake_capture_end(t);
    ck_assert_int_eq(fake_capture_forbidden(), 0);
    ck_assert_uint_eq(held_for_graphs(r, s), held_before + MiB);
    ck_assert_crmm_ok(crmm_graph_owner_end(14));
    ck_assert_int_eq(fake_vmm.device_syncs, syncs + 1);
    ck_assert_uint_eq(held_for_graphs(r, s), held_before);
    fake_graph_destroy(g);
    ck_assert_crmm_ok(crmm_graph_owner_release(14));
    crmm_resource_release(r);
}

/* A resource destroyed before its owner's release: the record is detached, and the release frees
 * it without touching the resource. */
CRMM_LOOP_TEST_IN("owners", a_resource_destroyed_before_the_release, RESOURCES)
{
    crmm_resource *r = resource(_i);
    owned_graph_gone(r, 11, stream_n(1));
    crmm_resource_release(r);
    ck_assert_crmm_ok(crmm_graph_owner_release(11));
}

/* A capture an owner adopted that ends without crmm_graph_owner_end (PyTorch's capture_end throws
 * when the capture was invalidated) is closed once seen over: its claims function is not called
 * again, it holds back no one else's hand-back, and its own release still hands its memory back. */
static int claims_calls;
static bool counting_on_stream(void *ctx, crmm_cuda_stream_t stream)
{
    claims_calls++;
    return on_stream(ctx, stream);
}

CRMM_LOOP_TEST_IN("owners", a_capture_that_ends_without_its_end_is_closed, RESOURCES)
{
    crmm_resource *r = resource(_i);
    cudaStream_t s = stream_n(1), t = stream_n(3);
    uint64_t held_before = owned_graph_gone(r, 15, s);
    free_on(r, alloc_on(r, MiB, t), MiB, t); /* memory of t's own for its captures (the arena's rule) */
    ck_assert_crmm_ok(crmm_graph_owner_begin(16, 0, (crmm_cuda_stream_t)t, counting_on_stream, (void *)t));
    fake_graph *g = fake_capture_begin(t, cudaStreamCaptureModeGlobal);
    claims_calls = 0;
    free_on(r, alloc_on(r, MiB, t), MiB, t);
    ck_assert_int_eq(claims_calls, 1);
    fake_capture_invalidate(t);
    fake_capture_end(t); /* no crmm_graph_owner_end(16) */
    fake_graph_destroy(g);
    ck_assert_crmm_ok(crmm_graph_owner_release(15)); /* 16 is seen over: nothing waits for it */
    ck_assert_uint_eq(held_for_graphs(r, s), held_before + MiB);
    fake_graph *h = fake_capture_begin(t, cudaStreamCaptureModeGlobal); /* a new capture on its stream */
    free_on(r, alloc_on(r, MiB, t), MiB, t);
    fake_capture_end(t);
    ck_assert_int_eq(claims_calls, 1); /* 16's claims function was not asked again */
    fake_graph_destroy(h);
    ck_assert_crmm(crmm_graph_owner_end(16), CRMM_ERROR_INVALID_ARGUMENT); /* closed already */
    ck_assert_crmm_ok(crmm_graph_owner_release(16));
    ck_assert_uint_eq(held_for_graphs(r, s), held_before);
    crmm_resource_release(r);
}

/* A begin while a release synchronizes the device waits for the synchronization's end: a capture
 * begun during it would be invalidated by it. The scripted synchronization stops at a gate the
 * test opens; the beginning thread notes whether the synchronization had ended when its begin
 * returned. (The pause before the gate opens decides only how likely a begin that does not wait
 * is to be caught.) */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool syncing, open, synced;
} gate = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false, false};

static void device_sync_at_the_gate(int what, cudaStream_t s)
{
    (void)s;
    if (what != FAKE_ORDER_DEVICE_SYNC)
        return;
    pthread_mutex_lock(&gate.lock);
    gate.syncing = true;
    pthread_cond_broadcast(&gate.cond);
    while (!gate.open)
        pthread_cond_wait(&gate.cond, &gate.lock);
    gate.synced = true;
    pthread_mutex_unlock(&gate.lock);
}

static void *release_21(void *unused)
{
    (void)unused;
    return (void *)(uintptr_t)crmm_graph_owner_release(21);
}

static void *begin_22(void *synced_at_begin)
{
    crmm_status st = crmm_graph_owner_begin(22, 0, NULL, never, NULL);
    pthread_mutex_lock(&gate.lock);
    *(bool *)synced_at_begin = gate.synced;
    pthread_mutex_unlock(&gate.lock);
    if (st == CRMM_OK && (st = crmm_graph_owner_end(22)) == CRMM_OK)
        st = crmm_graph_owner_release(22);
    return (void *)(uintptr_t)st;
}

CRMM_TEST_IN("owners", a_begin_waits_while_a_release_synchronizes_the_device)
{
    crmm_resource *r = resource(0);
    cudaStream_t s = stream_n(1);
    uint64_t held_before = owned_graph_gone(r, 21, s);
    fake_vmm_order_hook = device_sync_at_the_gate;
    pthread_t releasing, beginning;
    bool synced_at_begin = false;
    ck_assert_int_eq(pthread_create(&releasing, NULL, release_21, NULL), 0);
    pthread_mutex_lock(&gate.lock);
    while (!gate.syncing)
        pthread_cond_wait(&gate.cond, &gate.lock);
    pthread_mutex_unlock(&gate.lock);
    ck_assert_int_eq(pthread_create(&beginning, NULL, begin_22, &synced_at_begin), 0);
    usleep(50 * 1000);
    pthread_mutex_lock(&gate.lock);
    gate.open = true;
    pthread_cond_broadcast(&gate.cond);
    pthread_mutex_unlock(&gate.lock);
    void *released, *begun;
    pthread_join(releasing, &released);
    pthread_join(beginning, &begun);
    fake_vmm_order_hook = NULL;
    ck_assert_int_eq((crmm_status)(uintptr_t)released, CRMM_OK);
    ck_assert_int_eq((crmm_status)(uintptr_t)begun, CRMM_OK);
    ck_assert_msg(synced_at_begin, "a begin returned while the device was being synchronized");
    ck_assert_uint_eq(held_for_graphs(r, s), held_before);
    crmm_resource_release(r);
}

CRMM_TEST_IN("owners", bad_calls_are_refused)
{
    ck_assert_crmm(crmm_graph_owner_begin(0, 0, NULL, never, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_graph_owner_begin(12, 0, NULL, NULL, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_graph_owner_begin(12, -1, NULL, never, NULL), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_graph_owner_end(12), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_graph_owner_release(12), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(crmm_last_error(), "owner 12 is not known"), "%s", crmm_last_error());
    ck_assert_crmm_ok(crmm_graph_owner_begin(12, 0, NULL, never, NULL));
    ck_assert_crmm(crmm_graph_owner_begin(12, 0, NULL, never, NULL), CRMM_ERROR_INVALID_ARGUMENT); /* open */
    ck_assert_crmm(crmm_graph_owner_release(12), CRMM_ERROR_INVALID_ARGUMENT);                     /* still open */
    ck_assert_msg(strstr(crmm_last_error(), "open"), "%s", crmm_last_error());
    ck_assert_crmm_ok(crmm_graph_owner_end(12));
    ck_assert_crmm(crmm_graph_owner_end(12), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_crmm(crmm_graph_owner_begin(12, 1, NULL, never, NULL), CRMM_ERROR_INVALID_ARGUMENT); /* device */
    ck_assert_msg(strstr(crmm_last_error(), "another device"), "%s", crmm_last_error());
    ck_assert_crmm_ok(crmm_graph_owner_release(12));
    ck_assert(!crmm_graph_owner_adopt(NULL, 1, NULL, NULL)); /* no capture open: nothing claims */
}

int main(void)
{
    crmm_graph_capture_enable(true); /* as a program that captures says (no CUDA call: safe before the forks) */
    return CRMM_TEST_MAIN_CASES("graph_owners", {"owners", 0});
}
