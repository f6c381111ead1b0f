/* malloc_fail_family.h — malloc and its family replaced, for malloc_fail.c (linked into test
 * programs) and malloc_fail_shim.c (preloaded into the crmm program). The file that includes it
 * defines, before the include, fail_now() (true: this call fails, errno is ENOMEM) and
 * counted(p, d) (adds d to the blocks live when p is not NULL, returns p). Include it once. */
#ifndef CRMM_TESTS_MALLOC_FAIL_FAMILY_H
#define CRMM_TESTS_MALLOC_FAIL_FAMILY_H

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);
extern void *__libc_memalign(size_t align, size_t n);
extern void __libc_free(void *p);
void *memalign(size_t align, size_t n);
void *valloc(size_t n);
void *pvalloc(size_t n);

void *malloc(size_t n) { return fail_now() ? NULL : counted(__libc_malloc(n), 1); }
void *calloc(size_t n, size_t size) { return fail_now() ? NULL : counted(__libc_calloc(n, size), 1); }
void *realloc(void *p, size_t n)
{
    if (fail_now())
        return NULL;
    void *q = __libc_realloc(p, n);
    if (!p)
        counted(q, 1);
    else if (!n && !q)
        counted(p, -1); /* glibc: realloc(p, 0) frees p */
    return q;
}
void free(void *p) { __libc_free(counted(p, -1)); }
void *memalign(size_t align, size_t n) { return fail_now() ? NULL : counted(__libc_memalign(align, n), 1); }
void *aligned_alloc(size_t align, size_t n) { return fail_now() ? NULL : counted(__libc_memalign(align, n), 1); }
void *valloc(size_t n) { return fail_now() ? NULL : counted(__libc_memalign((size_t)getpagesize(), n), 1); }
void *pvalloc(size_t n)
{
    size_t page = (size_t)getpagesize();
    return fail_now() ? NULL : counted(__libc_memalign(page, (n + page - 1) / page * page), 1);
}
int posix_memalign(void **out, size_t align, size_t n)
{
    if (fail_now())
        return ENOMEM;
    void *p = counted(__libc_memalign(align, n), 1);
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}

#endif
