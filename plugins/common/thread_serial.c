/* thread_serial.c — see thread_serial.h. */
#include "build_config.h"
#include "thread_serial.h"

static uint64_t next_serial;
static _Thread_local uint64_t this_serial;

uint64_t thread_serial(void)
{
    if (!this_serial)
        this_serial = __atomic_add_fetch(&next_serial, 1, __ATOMIC_RELAXED);
    return this_serial;
}
