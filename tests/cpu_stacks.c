/* cpu_stacks.c — the CPU stacks the fault-injection and malloc-failure loops run: every plugin
 * that needs no GPU above the bottom resource, and a few deeper combinations. */
#include "build_config.h"
#include "cpu_stacks.h"

const cpu_stack cpu_stacks[] = {
    {"pool", {{"pool", "initial_size=1MiB maximum_size=8MiB"}}},
    {"pool(expanding)", {{"pool", "initial_size=256KiB"}}},
    {"arena", {{"arena", "arena_size=8MiB superblock_size=256KiB"}}},
    {"fixed_size", {{"fixed_size", "block_size=4KiB blocks_to_preallocate=4"}}},
    {"binning", {{"binning", "bins=256:4KiB:64KiB blocks_to_preallocate=2"}}},
    {"aligned", {{"aligned", "alignment=4096"}}},
    {"statistics", {{"statistics", ""}}},
    {"tracking", {{"tracking", ""}}},
    {"limiting", {{"limiting", "allocation_limit=2MiB"}}},
    {"logging", {{"logging", "file=/dev/null"}}},
    {"failure_callback", {{"failure_callback", ""}}},
    {"statistics(binning(pool))", {{"pool", "initial_size=1MiB"}, {"binning", "bins=256:4KiB"}, {"statistics", ""}}},
    {"tracking(aligned(arena))", {{"arena", "arena_size=4MiB superblock_size=256KiB"}, {"aligned", "alignment=1024"}, {"tracking", ""}}},
    {"limiting(fixed_size(statistics))", {{"statistics", ""}, {"fixed_size", "block_size=64KiB blocks_to_preallocate=2"}, {"limiting", "allocation_limit=1MiB"}}},
};
const size_t cpu_stack_count = sizeof cpu_stacks / sizeof cpu_stacks[0];

crmm_resource *cpu_stack_build(size_t s, crmm_resource *bottom, crmm_resource *layers[CPU_STACK_LAYERS])
{
    crmm_resource *top = bottom;
    for (int i = 0; i < CPU_STACK_LAYERS; i++)
        layers[i] = NULL;
    for (int i = 0; i < CPU_STACK_LAYERS && cpu_stacks[s].layers[i][0]; i++) {
        if (crmm_resource_create(cpu_stacks[s].layers[i][0], cpu_stacks[s].layers[i][1], top, &layers[i]) != CRMM_OK) {
            layers[i] = NULL;
            return NULL;
        }
        top = layers[i];
    }
    return top;
}

void cpu_stack_release(crmm_resource *layers[CPU_STACK_LAYERS])
{
    for (int i = CPU_STACK_LAYERS - 1; i >= 0; i--)
        if (layers[i]) {
            crmm_resource_release(layers[i]);
            layers[i] = NULL;
        }
}
