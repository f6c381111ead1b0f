/* fake_streams.c — see fake_streams.h. A fixed table of slots; a handle is the address of its slot. */
#include "build_config.h"
#include <stdint.h>
#include <check.h>
#include "fake_streams.h"

typedef struct fake_stream { int live; int uses; unsigned long long id; } fake_stream;

static fake_stream streams[FAKE_STREAMS];
static unsigned long long next_id = 100;

cudaStream_t fake_stream_new(int i)
{
    streams[i].live = 1;
    streams[i].uses = 0;
    streams[i].id = next_id++;
    return (cudaStream_t)&streams[i];
}

void fake_stream_destroy(cudaStream_t s) { ((fake_stream *)s)->live = 0; }

int fake_stream_is_fake(cudaStream_t s)
{
    return (uintptr_t)s >= (uintptr_t)&streams[0] && (uintptr_t)s < (uintptr_t)&streams[FAKE_STREAMS];
}

int fake_stream_is_live(cudaStream_t s) { return fake_stream_is_fake(s) && ((fake_stream *)s)->live; }

unsigned long long fake_stream_id(cudaStream_t s) { return ((fake_stream *)s)->id; }

void fake_stream_use(cudaStream_t s, const char *call)
{
    if (!fake_stream_is_fake(s))
        return;
    fake_stream *f = (fake_stream *)s;
    ck_assert_msg(f->live, "%s was passed the handle of a destroyed stream", call);
    __atomic_add_fetch(&f->uses, 1, __ATOMIC_RELAXED);
}

int fake_stream_uses(cudaStream_t s) { return __atomic_load_n(&((fake_stream *)s)->uses, __ATOMIC_RELAXED); }

void fake_streams_reset_uses(void)
{
    for (int i = 0; i < FAKE_STREAMS; i++)
        streams[i].uses = 0;
}
