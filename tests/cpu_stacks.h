/* cpu_stacks.h — stacks of plugins that run without a GPU, built over a bottom resource the
 * test chooses: for the loops that fail one allocation at a time (check_fault_injection,
 * check_malloc_failure). */
#ifndef CRMM_TESTS_CPU_STACKS_H
#define CRMM_TESTS_CPU_STACKS_H

#include <stddef.h>
#include <crmm/resource.h>

#define CPU_STACK_LAYERS 3

typedef struct cpu_stack {
    const char *name;
    const char *layers[CPU_STACK_LAYERS][2]; /* bottom first: plugin, parameters; unused: NULL */
} cpu_stack;

extern const cpu_stack cpu_stacks[];
extern const size_t cpu_stack_count;

/* Build stack `s` over `bottom`, its layers into layers[] (bottom first, NULL past the last
 * built). Returns the top, or NULL when a layer could not be created (an error, not a test
 * failure: creation may be what fails). */
crmm_resource *cpu_stack_build(size_t s, crmm_resource *bottom, crmm_resource *layers[CPU_STACK_LAYERS]);
/* Release what cpu_stack_build built, top first. */
void cpu_stack_release(crmm_resource *layers[CPU_STACK_LAYERS]);

#endif
