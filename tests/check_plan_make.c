/* check_plan_make.c — `crmm plan`'s planner (tools/plan_place.c): every plan it makes keeps
 * allocations whose lifetimes overlap apart, spans the live peak where greedy by size can, finds
 * the loop of a log that ends in repeating steps and none where nothing repeats; the command writes
 * the format the pool reads and refuses what it cannot plan. */
#include "build_config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <check.h>
#include "replay_logs.h"
#include "test_support.h"
#include "../tools/plan.h"
#include "../tools/replay.h"

/* In a test: `crmm plan ARGS...` (NULL-terminated) run in-process. */
static crmm_test_output run_plan(const char **args)
{
    char *argv[8] = {"plan"};
    for (int i = 0; i < 6 && args[i]; i++)
        argv[i + 1] = (char *)args[i];
    return crmm_test_run_main(crmm_plan_main, argv);
}

/* A growing log text. */
typedef struct text { char *s; size_t n, room; } text;

static void add(text *t, const char *action, unsigned long long ptr, unsigned long long size)
{
    if (t->n + 128 > t->room) {
        t->room = t->room ? 2 * t->room : 4096;
        t->s = realloc(t->s, t->room);
        ck_assert_ptr_nonnull(t->s);
        if (!t->n)
            t->n = (size_t)snprintf(t->s, t->room, "%s", HEADER);
    }
    t->n += (size_t)snprintf(t->s + t->n, t->room - t->n, "1,10:00:00.000001,%s,0x%llx,%llu,0\n", action, ptr, size);
}

/* Plan the log `t`; the log stays readable in *log. */
static void plan_text(text *t, replay_log *log, plan *pl)
{
    ck_assert_crmm_ok(replay_log_read(crmm_test_write_file("plan.csv", t->s), log));
    ck_assert_crmm_ok(plan_make(log, pl));
}

/* No two allocations whose lifetimes overlap overlap in the plan, and each lies in the extent. */
static void assert_valid(const replay_log *log, const plan *pl)
{
    size_t n = pl->count, k = 0;
    size_t *start = malloc(n * sizeof *start), *end = malloc(n * sizeof *end);
    for (size_t e = 0; e < log->count; e++)
        if (log->events[e].action == REPLAY_ALLOCATE) {
            start[k] = e;
            end[k++] = log->events[e].pair >= 0 ? (size_t)log->events[e].pair : log->count;
        }
    ck_assert_uint_eq(k, n);
    for (size_t i = 0; i < n; i++) {
        ck_assert_uint_le(pl->offset[i] + pl->size[i], pl->extent);
        for (size_t j = i + 1; j < n; j++)
            if (start[i] < end[j] && start[j] < end[i])
                ck_assert_msg(pl->offset[i] + pl->size[i] <= pl->offset[j] || pl->offset[j] + pl->size[j] <= pl->offset[i],
                              "allocations %zu and %zu live together and overlap", i, j);
    }
    free(start);
    free(end);
}

CRMM_TEST(a_freed_place_is_reused_and_the_plan_spans_the_peak)
{
    text t = {0};
    add(&t, "allocate", 0x1000, 1 << 20);
    add(&t, "allocate", 0x2000, 1 << 20);
    add(&t, "free", 0x1000, 1 << 20);
    add(&t, "allocate", 0x3000, 1000); /* rounded up to 1024 */
    add(&t, "free", 0x2000, 1 << 20);
    add(&t, "free", 0x3000, 1000);
    replay_log log;
    plan pl;
    plan_text(&t, &log, &pl);
    ck_assert_uint_eq(pl.count, 3);
    ck_assert_uint_eq(pl.size[2], 1024);
    ck_assert_uint_eq(pl.peak_live, 2 << 20);
    ck_assert_uint_eq(pl.extent, 2 << 20);
    ck_assert(pl.offset[2] == pl.offset[0]); /* in the first block's place */
    assert_valid(&log, &pl);
    plan_free(&pl);
    replay_log_free(&log);
    free(t.s);
}

/* Where online first fit strands a hole, greedy by size does not: small blocks first, then a
 * large one that online placement puts above them. */
CRMM_TEST(greedy_by_size_places_the_large_block_first)
{
    text t = {0};
    add(&t, "allocate", 0x1, 1 << 20); /* a: lives to the end */
    add(&t, "allocate", 0x2, 1 << 20); /* b */
    add(&t, "free", 0x1, 1 << 20);
    add(&t, "allocate", 0x3, 2 << 20); /* c: online first fit has only a's hole of 1 MiB below b */
    add(&t, "free", 0x2, 1 << 20);
    add(&t, "free", 0x3, 2 << 20);
    replay_log log;
    plan pl;
    plan_text(&t, &log, &pl);
    ck_assert_uint_eq(pl.peak_live, 3 << 20);
    ck_assert_uint_eq(pl.extent, 3 << 20);
    assert_valid(&log, &pl);
    plan_free(&pl);
    replay_log_free(&log);
    free(t.s);
}

CRMM_TEST(random_lifetimes_give_a_valid_plan)
{
    text t = {0};
    unsigned long long live[64] = {0}, size[64] = {0}, next = 1;
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < 3000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        unsigned slot = (unsigned)(x % 64);
        if (live[slot]) {
            add(&t, "free", live[slot], size[slot]);
            live[slot] = 0;
        } else {
            live[slot] = next++ * 0x1000;
            size[slot] = 256 + (x >> 20) % (4u << 20);
            add(&t, "allocate", live[slot], size[slot]);
        }
    }
    replay_log log;
    plan pl;
    plan_text(&t, &log, &pl);
    assert_valid(&log, &pl);
    ck_assert_uint_ge(pl.extent, pl.peak_live);
    ck_assert_uint_eq(pl.loop, PLAN_NO_LOOP); /* random sizes do not repeat */
    plan_free(&pl);
    replay_log_free(&log);
    free(t.s);
}

/* A persistent block, then five steps of the same three requests: the loop is a whole number of
 * steps that starts at a step's first request, and serving it again keeps blocks apart. */
CRMM_TEST(repeating_steps_give_a_loop)
{
    text t = {0};
    add(&t, "allocate", 0x100, 3 << 20);
    unsigned long long ptr = 0x1000;
    for (int step = 0; step < 5; step++, ptr += 0x1000) {
        add(&t, "allocate", ptr + 1, 1 << 20);
        add(&t, "allocate", ptr + 2, 2 << 20);
        add(&t, "free", ptr + 1, 1 << 20);
        add(&t, "allocate", ptr + 3, 512);
        add(&t, "free", ptr + 2, 2 << 20);
        add(&t, "free", ptr + 3, 512);
    }
    replay_log log;
    plan pl;
    plan_text(&t, &log, &pl);
    ck_assert_uint_eq(pl.count, 16);
    ck_assert_uint_ne(pl.loop, PLAN_NO_LOOP);
    ck_assert_uint_ge(pl.loop, 1);
    ck_assert_uint_eq((pl.loop - 1) % 3, 0); /* a step's first request */
    ck_assert_uint_eq((pl.count - pl.loop) % 3, 0);
    ck_assert_uint_eq(pl.size[pl.loop], 1 << 20);
    ck_assert_uint_eq(pl.extent, pl.peak_live);
    assert_valid(&log, &pl);
    plan_free(&pl);
    replay_log_free(&log);
    free(t.s);
}

/* A step whose block lives into the next step: going back must not put the new one over it. */
CRMM_TEST(a_loop_that_would_overlap_a_live_block_is_not_taken)
{
    text t = {0};
    unsigned long long prev = 0;
    for (int step = 0; step < 6; step++) {
        unsigned long long ptr = 0x1000 * (unsigned long long)(step + 1);
        add(&t, "allocate", ptr, 1 << 20); /* lives until the next step's is allocated */
        if (prev)
            add(&t, "free", prev, 1 << 20);
        prev = ptr;
    }
    replay_log log;
    plan pl;
    plan_text(&t, &log, &pl);
    assert_valid(&log, &pl);
    /* consecutive blocks alternate between two places; a loop of one step would reuse the place
     * of the block still live, so the loop found (if any) is a whole number of pairs */
    if (pl.loop != PLAN_NO_LOOP) {
        uint64_t period = pl.count - pl.loop;
        ck_assert_uint_eq(period % 2, 0);
        ck_assert_uint_eq(pl.offset[pl.count - 1], pl.offset[pl.loop - 1]);
    }
    plan_free(&pl);
    replay_log_free(&log);
    free(t.s);
}

/* Training steps: a forward pass keeps four activations of 1-4 MiB; the backward pass, last layer
 * first, makes each one's gradient and frees both. The log stops after `steps` steps and, when
 * `cut`, after the forward pass of one more (a recording stopped mid-step). Pointers are unique. */
static void training_steps(text *t, int steps, bool cut)
{
    unsigned long long ptr = 0x10000;
    add(t, "allocate", 0x100, 4 << 20); /* the weights, never freed */
    for (int step = 0; step < steps + cut; step++) {
        unsigned long long act[4];
        for (int l = 0; l < 4; l++, ptr += 16)
            add(t, "allocate", act[l] = ptr, (unsigned long long)(l + 1) << 20);
        if (step == steps)
            break;
        for (int l = 3; l >= 0; l--, ptr += 16) {
            add(t, "allocate", ptr, (unsigned long long)(l + 1) << 20);
            add(t, "free", act[l], (unsigned long long)(l + 1) << 20);
            add(t, "free", ptr, (unsigned long long)(l + 1) << 20);
        }
    }
}

/* Serve `run` as the pool follows plan pl when every request is the next entry (going back to the
 * loop after the last): how many requests find their planned place overlapping a block still live
 * (or find the plan ended, or the entry of another size). */
static size_t busy_when_serving(const plan *pl, const replay_log *run)
{
    uint64_t *at = calloc(run->count, sizeof *at);
    bool *placed = calloc(run->count, sizeof *placed);
    size_t busy = 0;
    uint64_t k = 0;
    for (size_t e = 0; e < run->count; e++) {
        const replay_event *ev = &run->events[e];
        if (ev->action == REPLAY_FREE && ev->pair >= 0) {
            placed[ev->pair] = false;
            continue;
        }
        if (ev->action != REPLAY_ALLOCATE)
            continue;
        if (k == pl->count || pl->size[k] != ((ev->size + 255) & ~(uint64_t)255)) {
            busy++;
            continue;
        }
        uint64_t lo = pl->offset[k], hi = lo + pl->size[k];
        bool overlaps = false;
        for (size_t f = 0; f < e && !overlaps; f++)
            overlaps = placed[f] && at[f] < hi && lo < at[f] + run->events[f].size;
        if (overlaps)
            busy++;
        else
            placed[e] = true, at[e] = lo;
        k = k + 1 < pl->count ? k + 1 : pl->loop == PLAN_NO_LOOP ? pl->count : pl->loop;
    }
    free(at);
    free(placed);
    return busy;
}

/* Plan the recording `t` (which must get a loop), check the plan, and serve the run `longer` as
 * the pool would follow it: returns the requests that found their place busy; *pl stays for more
 * checks (the caller frees it). Both texts are freed. */
static size_t plan_and_serve_longer(text *t, text *longer, plan *pl)
{
    replay_log log, run;
    plan_text(t, &log, pl);
    assert_valid(&log, pl);
    ck_assert_uint_ne(pl->loop, PLAN_NO_LOOP);
    ck_assert_crmm_ok(replay_log_read(crmm_test_write_file("longer.csv", longer->s), &run));
    size_t busy = busy_when_serving(pl, &run);
    replay_log_free(&log);
    replay_log_free(&run);
    free(t->s);
    free(longer->s);
    return busy;
}

/* A recording stopped in the middle of a step: no run at its end can be served again as placed (a
 * step's activations would land where the last step's still live), so the planner places the
 * last steps periodically. The plan then serves a run twice as long with no place busy, and spans
 * the live peak all the same. */
CRMM_TEST(a_recording_cut_mid_step_gets_a_loop_that_serves_a_longer_run)
{
    text t = {0}, longer = {0};
    training_steps(&t, 5, true);
    training_steps(&longer, 10, false);
    plan pl;
    ck_assert_uint_eq(plan_and_serve_longer(&t, &longer, &pl), 0);
    ck_assert_uint_eq(pl.extent, pl.peak_live);
    ck_assert_uint_eq(pl.loop_busy, 0);
    plan_free(&pl);
}

/* A server's log: 60 requests of sizes that do not repeat, then the last request's tokens, whose
 * two blocks repeat three times. That repetition covers 6 of 66 allocations: no loop (a run that
 * goes on leaves it at the next request). */
CRMM_TEST(a_repetition_over_a_small_part_of_the_log_is_no_loop)
{
    text t = {0};
    unsigned long long ptr = 0x10000;
    for (int i = 0; i < 60; i++, ptr += 16) {
        add(&t, "allocate", ptr, (unsigned long long)(i + 1) * 8192);
        add(&t, "free", ptr, (unsigned long long)(i + 1) * 8192);
    }
    for (int token = 0; token < 3; token++, ptr += 32) {
        add(&t, "allocate", ptr, 1 << 20);
        add(&t, "allocate", ptr + 16, 2 << 20);
        add(&t, "free", ptr, 1 << 20);
        add(&t, "free", ptr + 16, 2 << 20);
    }
    replay_log log;
    plan pl;
    plan_text(&t, &log, &pl);
    assert_valid(&log, &pl);
    ck_assert_uint_eq(pl.loop, PLAN_NO_LOOP);
    plan_free(&pl);
    replay_log_free(&log);
    free(t.s);
}

/* Drop the last `lines` lines of log text t (a recording that stopped before them). */
static void drop_lines(text *t, int lines)
{
    for (; lines > 0 && t->n; lines--) {
        t->n--; /* the line's newline */
        while (t->n && t->s[t->n - 1] != '\n')
            t->n--;
    }
    t->s[t->n] = '\0';
}

/* A recording stopped between a step's last allocation and its last frees: the blocks those frees
 * would free are live at the log's end, where their counterparts of the step before were freed
 * before the last step began. They are taken as freed at the end, so the steps still loop with no
 * place busy and the plan spans the live peak. */
CRMM_TEST(a_recording_cut_among_a_steps_last_frees_still_loops)
{
    text t = {0}, longer = {0};
    training_steps(&t, 5, false);
    drop_lines(&t, 2);
    training_steps(&longer, 10, false);
    plan pl;
    ck_assert_uint_eq(plan_and_serve_longer(&t, &longer, &pl), 0);
    ck_assert_uint_eq(pl.loop_busy, 0);
    ck_assert_uint_eq(pl.extent, pl.peak_live);
    plan_free(&pl);
}

/* Steps of a model whose layers repeat: an input of 8 MiB lives through the step, and a block of
 * 5 MiB made at its start lives to the end of the next step's forward pass (freed a step late, so
 * that a loop placed as the log was finds it busy once a step); the forward pass keeps one
 * activation of 3 MiB per layer; the backward pass, per layer, makes two gradients of 2 and 1 MiB
 * and frees them with the layer's activation. With `cut`, the log stops inside the backward pass
 * of one more step, after `cut` layers (a recording stopped mid-step). */
#define LAYERS 6
#define LAYERED_STEP (2 + 3 * LAYERS) /* allocations a step */
static void layered_steps(text *t, int steps, int cut)
{
    unsigned long long ptr = 0x10000, late = 0;
    add(t, "allocate", 0x100, 16 << 20); /* the weights, never freed */
    for (int step = 0; step < steps + (cut > 0); step++) {
        unsigned long long input = ptr, act[LAYERS];
        add(t, "allocate", input, 8 << 20);
        add(t, "allocate", ptr + 16, 5 << 20);
        ptr += 32;
        for (int l = 0; l < LAYERS; l++, ptr += 16)
            add(t, "allocate", act[l] = ptr, 3 << 20);
        if (late)
            add(t, "free", late, 5 << 20);
        late = input + 16;
        for (int l = LAYERS - 1; l >= 0; l--, ptr += 32) {
            if (step == steps && LAYERS - 1 - l == cut)
                return;
            add(t, "allocate", ptr, 2 << 20);
            add(t, "allocate", ptr + 16, 1 << 20);
            add(t, "free", ptr, 2 << 20);
            add(t, "free", act[l], 3 << 20);
            add(t, "free", ptr + 16, 1 << 20);
        }
        add(t, "free", input, 8 << 20);
    }
}

/* A recording stopped inside the backward pass ends in layers whose gradients repeat, and a loop
 * over the last layer finds no place busy, where one over whole steps placed as the log was finds
 * the late block's place busy; but the run goes on to the next step, which the layers' loop does
 * not know. The loop is over whole steps, and serves a run twice as long. */
CRMM_TEST(a_recording_cut_among_repeating_layers_loops_over_steps)
{
    text t = {0}, longer = {0};
    layered_steps(&t, 3, 2);
    layered_steps(&longer, 8, 0);
    plan pl;
    ck_assert_uint_le(plan_and_serve_longer(&t, &longer, &pl), 8); /* at most the late block, once a step */
    ck_assert_uint_eq((pl.count - pl.loop) % LAYERED_STEP, 0);
    ck_assert_uint_le(pl.extent, pl.peak_live + pl.peak_live / 100);
    plan_free(&pl);
}

CRMM_TEST(the_command_writes_the_plan_and_refuses_what_it_cannot_plan)
{
    const char *log = crmm_test_write_file("steps.csv", FIVE_THREADS_UP_TO_THE_PEAK);
    const char *out = crmm_test_tmp_path("steps.plan");
    crmm_test_output r = run_plan((const char *[]){log, "--output", out, NULL});
    ck_assert_msg(r.status == 0, "%s", r.err);
    ck_assert_ptr_nonnull(strstr(r.err, "4 allocations"));
    crmm_test_output_free(&r);
    char *written = crmm_test_read_file(out);
    ck_assert_ptr_nonnull(written);
    ck_assert_msg(strncmp(written, "crmm-plan 1\nextent 1280\nloop none\ncount 4\n", 42) == 0, "%s", written);
    free(written);
    /* a log with no allocation, and no log */
    const char *empty = crmm_test_write_file("empty.csv", HEADER);
    r = run_plan((const char *[]){empty, NULL});
    ck_assert_int_eq(r.status, 1);
    ck_assert_ptr_nonnull(strstr(r.err, "no allocation"));
    crmm_test_output_free(&r);
    r = run_plan((const char *[]){"/nonexistent/log.csv", NULL});
    ck_assert_int_eq(r.status, 1);
    ck_assert_ptr_nonnull(strstr(r.err, "/nonexistent/log.csv"));
    crmm_test_output_free(&r);
    r = run_plan((const char *[]){NULL});
    ck_assert_int_eq(r.status, 2);
    crmm_test_output_free(&r);
    r = run_plan((const char *[]){log, "--output", log, NULL}); /* the log itself: refused, the log kept */
    ck_assert_int_eq(r.status, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "would replace"));
    crmm_test_output_free(&r);
    char *kept = crmm_test_read_file(log);
    ck_assert_str_eq(kept, FIVE_THREADS_UP_TO_THE_PEAK);
    free(kept);
}

/* A log whose plan the pool would refuse is refused here, naming why: every allocation of 0
 * bytes (nothing to place: a plan spans more than 0), an allocation larger than a plan may span,
 * and allocations that together would place a block past that limit (no offset wraps). */
CRMM_TEST(a_log_the_pool_could_not_follow_is_refused)
{
    static const struct { unsigned long long sizes[3]; const char *says; } cases[] = {
        {{0, 0, 0}, "every allocation of the log is of 0 bytes"},
        {{256, (1ull << 50) + 1, 0}, "line 3: an allocation of 1125899906842625 bytes, more than a plan may span"},
        {{1ull << 50, 1ull << 50, 0}, "spans 2.0 PiB, more than a plan may span"},
        {{1ull << 50, 1ull << 50, 1ull << 50}, "spans 3.0 PiB"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        text t = {0};
        for (int i = 0; i < 3; i++)
            if (cases[c].sizes[i] || i == 0)
                add(&t, "allocate", 0x1000000ull * (unsigned)(i + 1), cases[c].sizes[i]);
        replay_log log;
        plan pl;
        ck_assert_crmm_ok(replay_log_read(crmm_test_write_file("plan.csv", t.s), &log));
        ck_assert_int_eq(plan_make(&log, &pl), CRMM_ERROR_INVALID_ARGUMENT);
        ck_assert_msg(strstr(crmm_last_error(), cases[c].says), "%s", crmm_last_error());
        replay_log_free(&log);
        free(t.s);
    }
}

/* A log cut mid-step whose best placement spans 19 units of 2^50 / 20 bytes, within the limit,
 * and whose loop needs a periodic placement of 21: refused too (the limit holds for the plan
 * written, loop and all). */
CRMM_TEST(a_loop_whose_placement_passes_the_limit_is_refused)
{
    static const struct { char action; unsigned ptr, units; } calls[] = {
        {'a', 0x100, 1},   {'a', 0x10000, 2}, {'a', 0x10010, 6}, {'a', 0x10020, 6}, {'a', 0x10030, 2},
        {'f', 0x10020, 6}, {'a', 0x10040, 2}, {'f', 0x10010, 6}, {'f', 0x10000, 2}, {'a', 0x10050, 6},
        {'a', 0x10060, 6}, {'a', 0x10070, 2}, {'f', 0x10060, 6}, {'f', 0x10030, 2}, {'a', 0x10080, 2},
        {'f', 0x10050, 6}, {'f', 0x10040, 2}, {'a', 0x10090, 6}, {'a', 0x100a0, 6}, {'a', 0x100b0, 2},
        {'f', 0x100a0, 6}, {'f', 0x10070, 2}, {'a', 0x100c0, 2}, {'f', 0x10090, 6}, {'f', 0x10080, 2},
        {'a', 0x100d0, 6}, {'a', 0x100e0, 6}, {'a', 0x100f0, 2}, {'f', 0x100e0, 6}, {'f', 0x100b0, 2},
        {'a', 0x10100, 2}, {'f', 0x100d0, 6}, {'f', 0x100c0, 2}, {'a', 0x10110, 6}, {'a', 0x10120, 6},
        {'a', 0x10130, 2},
    };
    const unsigned long long unit = (1ull << 50) / 20 / 256 * 256;
    text t = {0};
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++)
        add(&t, calls[i].action == 'a' ? "allocate" : "free", calls[i].ptr, calls[i].units * unit);
    replay_log log;
    plan pl;
    ck_assert_crmm_ok(replay_log_read(crmm_test_write_file("plan.csv", t.s), &log));
    ck_assert_int_eq(plan_make(&log, &pl), CRMM_ERROR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(crmm_last_error(), "more than a plan may span"), "%s", crmm_last_error());
    replay_log_free(&log);
    free(t.s);
}

int main(void) { return crmm_test_main("plan_make", 60); }
