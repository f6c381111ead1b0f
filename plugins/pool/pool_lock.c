/* pool_lock.c — the waiting half of the pool's spin lock (pool_resource.h has the fast half).
 *
 * Spin on a plain load (no cache-line ping-pong while the holder works) with the processor's
 * pause hint; after a few hundred spins yield the processor, so that a holder doing a slow
 * CUDA call (growth, a device synchronize) is not starved of a core by its waiters. */
#include "config.h"
#include <sched.h>
#include "pool_resource.h"

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

void pool_lock_contended(pool_resource *p)
{
    unsigned spins = 0;
    for (;;) {
        while (__atomic_load_n(&p->lock, __ATOMIC_RELAXED)) {
            if (++spins < 256)
                cpu_relax();
            else
                sched_yield();
        }
        if (!__atomic_exchange_n(&p->lock, 1, __ATOMIC_ACQUIRE))
            return;
    }
}
