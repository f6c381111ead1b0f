/* replay_torch_snapshot.c — `crmm replay LOG --torch-snapshot FILE.pickle`: the log replayed
 * against a resource, written as the memory snapshot PyTorch's caching allocator dumps
 * (torch.cuda.memory._dump_snapshot), so that torch.cuda._memory_viz (trace_plot,
 * segment_plot) and the pytorch.org/memory_viz page show a crmm resource as they show torch's.
 *
 * The snapshot is one dict, pickled (protocol 2; a writer of only dicts, lists, str, int, bool
 * and None is here):
 *   segments:      what the resource holds from its upstream at the end of the log, each with
 *                  the blocks that tile it (the log's live allocations "active_allocated", the
 *                  gaps "inactive");
 *   device_traces: a list per device up to the resource's; the resource's holds, in order,
 *                  alloc / free_requested + free_completed for every logged call,
 *                  segment_alloc / segment_free for every upstream call they caused, and oom
 *                  for a logged failure or an allocation the resource refused;
 *   allocator_settings: an empty dict.
 * Every entry carries addr (the replayed pointer), size (as logged), stream (as logged),
 * time_us (the event's index in the log: the viewer orders by it) and frames = [].
 *
 * Segments are the upstream's allocations, seen through a recording resource put between the
 * config's resource and its upstream (the resource is built again from its config section over
 * it). A resource with no upstream (cuda, host, async, a raw reference), or one that cannot be
 * built again that way, cannot say what it reserved: then each allocation is its own segment.
 * Any live block outside every segment gets a segment of its own, so segments always cover
 * the live blocks. An allocation outside every upstream allocation the recorder holds (the
 * expandable pool maps its own pages) is a segment of its own too, allocated and freed with it. */
#include "build_config.h"
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <crmm/config.h>
#include <crmm/cuda_support.h>
#include <crmm/plugin.h>
#include "replay.h"

/* ---- a pickle writer (protocol 2) --------------------------------------------------------- */

static void pk_byte(FILE *f, int b) { fputc(b, f); }

static void pk_str(FILE *f, const char *s)
{
    size_t n = strlen(s);
    unsigned char len[4] = {(unsigned char)n, (unsigned char)(n >> 8), (unsigned char)(n >> 16),
                            (unsigned char)(n >> 24)};
    pk_byte(f, 'X'); /* BINUNICODE: 4-byte little-endian length, UTF-8 */
    fwrite(len, 1, 4, f);
    fwrite(s, 1, n, f);
}

/* An integer of 65 bits at most: `magnitude` with `negative`. */
static void pk_int_parts(FILE *f, uint64_t magnitude, int negative)
{
    if (!negative && magnitude < 256) {
        pk_byte(f, 'K'); /* BININT1 */
        pk_byte(f, (int)magnitude);
        return;
    }
    if ((!negative && magnitude <= 0x7fffffffu) || (negative && magnitude <= 0x80000000u)) {
        uint32_t v = negative ? (uint32_t)(0u - (uint32_t)magnitude) : (uint32_t)magnitude;
        pk_byte(f, 'J'); /* BININT: 4-byte little-endian signed */
        for (int i = 0; i < 4; i++)
            pk_byte(f, (int)((v >> (8 * i)) & 0xff));
        return;
    }
    /* LONG1: little-endian two's complement in as few bytes as hold the value and its sign, as
     * Python's pickler writes it. torch's memory viewer (MemoryViz.js) reads a LONG1 of more than
     * 8 bytes as a JavaScript BigInt, and its address arithmetic then throws: a fixed 9-byte form
     * broke the viewer on every address above 2^31. */
    uint64_t low = negative ? 0u - magnitude : magnitude;
    int high = negative ? 0xff : 0x00;
    int n = 8;
    while (n > 1 && ((low >> (8 * (n - 1))) & 0xff) == (uint64_t)high &&
           (((low >> (8 * (n - 2))) & 0x80) != 0) == (high != 0))
        n--;
    /* a value whose top bit does not match its sign needs a ninth byte (2^63 and above) */
    int ninth = (((low >> 56) & 0x80) != 0) != (high != 0);
    if (ninth)
        n = 9;
    pk_byte(f, 0x8a);
    pk_byte(f, n);
    for (int i = 0; i < n && i < 8; i++)
        pk_byte(f, (int)((low >> (8 * i)) & 0xff));
    if (n == 9)
        pk_byte(f, high);
}

static void pk_uint(FILE *f, uint64_t v) { pk_int_parts(f, v, 0); }
static void pk_int(FILE *f, int64_t v) { pk_int_parts(f, v < 0 ? 0u - (uint64_t)v : (uint64_t)v, v < 0); }
static void pk_bool(FILE *f, int v) { pk_byte(f, v ? 0x88 : 0x89); } /* NEWTRUE, NEWFALSE */
static void pk_dict(FILE *f) { pk_byte(f, '}'); }                     /* EMPTY_DICT */
static void pk_list(FILE *f) { pk_byte(f, ']'); }                     /* EMPTY_LIST */
static void pk_setitem(FILE *f) { pk_byte(f, 's'); }                  /* dict[key] = value */
static void pk_append(FILE *f) { pk_byte(f, 'a'); }                   /* list.append(value) */

static void pk_key_str(FILE *f, const char *k, const char *v) { pk_str(f, k); pk_str(f, v); pk_setitem(f); }
static void pk_key_uint(FILE *f, const char *k, uint64_t v) { pk_str(f, k); pk_uint(f, v); pk_setitem(f); }
static void pk_key_int(FILE *f, const char *k, int64_t v) { pk_str(f, k); pk_int(f, v); pk_setitem(f); }
static void pk_key_bool(FILE *f, const char *k, int v) { pk_str(f, k); pk_bool(f, v); pk_setitem(f); }
static void pk_key_empty_list(FILE *f, const char *k) { pk_str(f, k); pk_list(f); pk_setitem(f); }

/* ---- the trace ------------------------------------------------------------------------------ */

typedef enum trace_action {
    TRACE_ALLOC, TRACE_FREE_REQUESTED, TRACE_FREE_COMPLETED, TRACE_SEGMENT_ALLOC, TRACE_SEGMENT_FREE, TRACE_OOM
} trace_action;

static const char *const trace_action_names[] = {
    "alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "oom"};

typedef struct trace_entry {
    uint64_t addr, size, stream, time;
    trace_action action;
} trace_entry;

typedef struct trace {
    trace_entry *entries;
    size_t count, cap;
    bool out_of_memory;
} trace;

static void trace_add(trace *t, trace_action action, uint64_t addr, uint64_t size, uint64_t stream, uint64_t time)
{
    if (t->count == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 1024;
        trace_entry *e = realloc(t->entries, cap * sizeof *e);
        if (!e) {
            t->out_of_memory = true;
            return;
        }
        t->entries = e;
        t->cap = cap;
    }
    t->entries[t->count++] = (trace_entry){addr, size, stream, time, action};
}

/* ---- the recording upstream ----------------------------------------------------------------- */

/* Passes every call to `upstream` and adds segment_alloc / segment_free to the trace; the
 * replay sets `stream` and `time` before each call it makes. */
struct replay_recorder {
    crmm_resource base;
    crmm_resource *upstream;
    pthread_mutex_t lock;
    trace trace;             /* from the resource's creation on */
    uint64_t stream, time;
    struct { uint64_t addr, size; } *live; /* the upstream allocations not yet freed */
    size_t nlive, cap_live;
};
typedef replay_recorder recorder;

static crmm_status rec_allocate(crmm_resource *self, size_t bytes, crmm_cuda_stream_t stream, void **ptr)
{
    recorder *r = (recorder *)self;
    crmm_status st = crmm_resource_allocate(r->upstream, bytes, stream, ptr);
    if (st == CRMM_OK) {
        pthread_mutex_lock(&r->lock);
        trace_add(&r->trace, TRACE_SEGMENT_ALLOC, (uint64_t)(uintptr_t)*ptr, bytes, r->stream, r->time);
        if (r->nlive == r->cap_live) {
            size_t cap = r->cap_live ? 2 * r->cap_live : 64;
            void *grown = realloc(r->live, cap * sizeof *r->live);
            if (grown) {
                r->live = grown;
                r->cap_live = cap;
            }
        }
        if (r->nlive < r->cap_live) {
            r->live[r->nlive].addr = (uint64_t)(uintptr_t)*ptr;
            r->live[r->nlive++].size = bytes;
        } else {
            r->trace.out_of_memory = true;
        }
        pthread_mutex_unlock(&r->lock);
    }
    return st;
}

static crmm_status rec_deallocate(crmm_resource *self, void *ptr, size_t bytes, crmm_cuda_stream_t stream)
{
    recorder *r = (recorder *)self;
    pthread_mutex_lock(&r->lock);
    trace_add(&r->trace, TRACE_SEGMENT_FREE, (uint64_t)(uintptr_t)ptr, bytes, r->stream, r->time);
    for (size_t i = 0; i < r->nlive; i++)
        if (r->live[i].addr == (uint64_t)(uintptr_t)ptr) {
            r->live[i] = r->live[--r->nlive];
            break;
        }
    pthread_mutex_unlock(&r->lock);
    return crmm_resource_deallocate(r->upstream, ptr, bytes, stream);
}

static void rec_destroy(crmm_resource *self)
{
    recorder *r = (recorder *)self;
    pthread_mutex_destroy(&r->lock);
    crmm_resource_release(r->upstream);
    free(r->trace.entries);
    free(r->live);
    free(r);
}

static const crmm_resource_ops recorder_ops = {
    .allocate = rec_allocate, .deallocate = rec_deallocate, .destroy = rec_destroy};

/* The file of plugin `name` in a plugin path, the first found, as a config's resources find it. */
struct plugin_file {
    const char *name;
    char path[4096];
};

static void find_plugin_file(const char *path, const crmm_plugin *plugin, crmm_status st, const char *error, void *arg)
{
    (void)st;
    (void)error;
    struct plugin_file *f = arg;
    if (plugin && !f->path[0] && strcmp(plugin->name, f->name) == 0 && strlen(path) < sizeof f->path)
        strcpy(f->path, path);
}

crmm_status replay_torch_build(crmm_config *cfg, const char *name, crmm_resource **out, replay_recorder **rec_out)
{
    long i = crmm_config_find_resource(cfg, name);
    if (i < 0)
        return crmm_set_error(CRMM_ERROR_NOT_FOUND, "%s has no resource '%s'", crmm_config_origin(cfg), name);
    const char *upstream_name = crmm_config_resource_upstream(cfg, (size_t)i);
    if (!upstream_name)
        return crmm_set_error(CRMM_ERROR_UNSUPPORTED, "%s has no upstream", name);
    int devices = 0;
    if (!crmm_config_resource_is_host(cfg, (size_t)i) && crmm_cuda_device_count(&devices) != CRMM_OK)
        return crmm_last_status();
    char params[4096];
    size_t n = 0;
    params[0] = '\0';
    for (size_t j = 0; j < crmm_config_resource_param_count(cfg, (size_t)i); j++) {
        const char *k = crmm_config_resource_param_key(cfg, (size_t)i, j);
        const char *v = crmm_config_resource_param_value(cfg, (size_t)i, j);
        /* as crmm_resource_create reads them: a value with a blank or comma in double quotes */
        bool quote = strpbrk(v, " ,\t\n") || v[0] == '"';
        if (n + strlen(k) + 2 * strlen(v) + 5 >= sizeof params)
            return crmm_set_error(CRMM_ERROR_UNSUPPORTED, "%s's parameters are too long to pass again", name);
        n += (size_t)snprintf(params + n, sizeof params - n, "%s%s=%s", n ? " " : "", k, quote ? "\"" : "");
        for (const char *c = v; *c; c++) {
            if (quote && (*c == '"' || *c == '\\'))
                params[n++] = '\\';
            params[n++] = *c;
        }
        if (quote)
            params[n++] = '"';
        params[n] = '\0';
    }
    crmm_resource *upstream = NULL;
    crmm_status st = crmm_config_create_resource(cfg, upstream_name, -1, &upstream);
    if (st != CRMM_OK)
        return st;
    recorder *r = calloc(1, sizeof *r);
    if (!r) {
        crmm_resource_release(upstream);
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "out of memory");
    }
    pthread_mutex_init(&r->lock, NULL);
    /* The recorder holds its upstream's reference itself and shows none in its base: to the
     * resource over it, it is a base resource of the upstream's memory, as the upstream was
     * (the expandable pool maps its own pages only over a base resource). */
    r->upstream = upstream;
    crmm_resource_init(&r->base, &recorder_ops, "recording", upstream->flags, upstream->device, NULL);
    crmm_resource *top = NULL;
    /* the plugin the config's own resource was made of: searched in the config's plugin_path first */
    struct plugin_file file = {crmm_config_resource_plugin(cfg, (size_t)i), ""};
    crmm_plugin_foreach(crmm_config_plugin_path(cfg), find_plugin_file, &file);
    st = crmm_resource_create(file.path[0] ? file.path : file.name, params, &r->base, &top);
    crmm_resource_release(&r->base); /* top holds it now, or it goes */
    if (st != CRMM_OK)
        return st;
    *out = top;
    *rec_out = r;
    return CRMM_OK;
}

/* ---- the replay ----------------------------------------------------------------------------- */

/* True when [addr, addr + size) lies in an upstream allocation the recorder holds: false for
 * memory the resource got elsewhere (the expandable pool maps its own pages). */
static bool rec_covers(recorder *r, uint64_t addr, uint64_t size)
{
    bool found = false;
    pthread_mutex_lock(&r->lock);
    for (size_t i = 0; i < r->nlive && !found; i++)
        found = addr >= r->live[i].addr && addr - r->live[i].addr + size <= r->live[i].size;
    pthread_mutex_unlock(&r->lock);
    return found;
}

/* trace_add under the recorder's lock when there is one (the resource may call its upstream
 * from another thread). */
static void note(recorder *rec, trace *t, trace_action action, uint64_t addr, uint64_t size, uint64_t stream,
                 uint64_t time)
{
    if (rec)
        pthread_mutex_lock(&rec->lock);
    trace_add(t, action, addr, size, stream, time);
    if (rec)
        pthread_mutex_unlock(&rec->lock);
}

/* Replay the log on the calling thread into t: per allocation its pointer in ptrs. An
 * allocation outside every upstream allocation the recorder holds (all of them with rec NULL)
 * is its own segment (own[i] set), allocated and freed with it. */
static void replay_into(const replay_log *log, crmm_resource *mr, recorder *rec, trace *t, void **ptrs,
                        unsigned char *own)
{
    for (size_t i = 0; i < log->count; i++) {
        const replay_event *ev = &log->events[i];
        if (rec) {
            rec->stream = ev->stream;
            rec->time = i;
        }
        if (ev->action == REPLAY_ALLOCATE_FAILURE) {
            note(rec, t, TRACE_OOM, 0, ev->size, ev->stream, i);
        } else if (ev->action == REPLAY_ALLOCATE && ev->size) {
            void *p = NULL;
            if (crmm_resource_allocate(mr, (size_t)ev->size, NULL, &p) != CRMM_OK) {
                note(rec, t, TRACE_OOM, 0, ev->size, ev->stream, i);
                continue;
            }
            ptrs[i] = p;
            own[i] = !rec || !rec_covers(rec, (uint64_t)(uintptr_t)p, ev->size);
            if (own[i])
                note(rec, t, TRACE_SEGMENT_ALLOC, (uint64_t)(uintptr_t)p, ev->size, ev->stream, i);
            note(rec, t, TRACE_ALLOC, (uint64_t)(uintptr_t)p, ev->size, ev->stream, i);
        } else if (ev->action == REPLAY_FREE && ev->pair >= 0 && ptrs[ev->pair]) {
            void *p = ptrs[ev->pair];
            uint64_t size = log->events[ev->pair].size;
            ptrs[ev->pair] = NULL;
            note(rec, t, TRACE_FREE_REQUESTED, (uint64_t)(uintptr_t)p, size, ev->stream, i);
            note(rec, t, TRACE_FREE_COMPLETED, (uint64_t)(uintptr_t)p, size, ev->stream, i);
            crmm_resource_deallocate(mr, p, (size_t)size, NULL);
            if (own[ev->pair])
                note(rec, t, TRACE_SEGMENT_FREE, (uint64_t)(uintptr_t)p, size, ev->stream, i);
        }
    }
}

/* ---- the state at the end ------------------------------------------------------------------- */

typedef struct span {
    uint64_t addr, size, stream;
    size_t order; /* index in the trace */
    bool alloc;
} span;

static int span_by_addr_then_order(const void *a, const void *b)
{
    const span *x = a, *y = b;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* The spans live at the end of the trace of actions `alloc` / `free`, sorted by address, into
 * *out (count in *n). Returns false when out of memory. */
static bool live_at_end(const trace *t, trace_action alloc, trace_action free_action, span **out, size_t *n)
{
    size_t m = 0;
    span *s = malloc((t->count + 1) * sizeof *s);
    if (!s)
        return false;
    for (size_t i = 0; i < t->count; i++) {
        const trace_entry *e = &t->entries[i];
        if (e->action == alloc || e->action == free_action)
            s[m++] = (span){e->addr, e->size, e->stream, i, e->action == alloc};
    }
    qsort(s, m, sizeof *s, span_by_addr_then_order);
    size_t k = 0;
    for (size_t i = 0; i < m; i++) /* the last action at each address decides */
        if ((i + 1 == m || s[i + 1].addr != s[i].addr) && s[i].alloc)
            s[k++] = s[i];
    *out = s;
    *n = k;
    return true;
}

static void write_block(FILE *f, uint64_t addr, uint64_t size, bool allocated)
{
    pk_dict(f);
    pk_key_uint(f, "address", addr);
    pk_key_uint(f, "size", size);
    pk_key_uint(f, "requested_size", allocated ? size : 0);
    pk_key_str(f, "state", allocated ? "active_allocated" : "inactive");
    pk_key_empty_list(f, "frames");
    pk_append(f);
}

/* One segment [addr, addr+size) with the live blocks b[0..nb) that lie in it (sorted). */
static void write_segment(FILE *f, int device, const span *seg, const span *b, size_t nb)
{
    uint64_t used = 0;
    for (size_t i = 0; i < nb; i++)
        used += b[i].size;
    pk_dict(f);
    pk_key_int(f, "device", device);
    pk_key_uint(f, "address", seg->addr);
    pk_key_uint(f, "total_size", seg->size);
    pk_key_uint(f, "allocated_size", used);
    pk_key_uint(f, "active_size", used);
    pk_key_uint(f, "requested_size", used);
    pk_key_uint(f, "stream", seg->stream);
    pk_key_str(f, "segment_type", seg->size > (1u << 20) ? "large" : "small");
    pk_key_bool(f, "is_expandable", 0);
    pk_key_empty_list(f, "frames");
    pk_str(f, "blocks");
    pk_list(f);
    uint64_t at = seg->addr, end = seg->addr + seg->size;
    for (size_t i = 0; i < nb; i++) {
        if (b[i].addr > at)
            write_block(f, at, b[i].addr - at, false);
        write_block(f, b[i].addr, b[i].size, true);
        at = b[i].addr + b[i].size;
    }
    if (end > at)
        write_block(f, at, end - at, false);
    pk_setitem(f);
    pk_append(f);
}

static void write_segments(FILE *f, int device, const span *segs, size_t ns, const span *blocks, size_t nb)
{
    size_t bi = 0;
    for (size_t si = 0; si <= ns; si++) {
        uint64_t start = si < ns ? segs[si].addr : UINT64_MAX;
        /* live blocks below this segment and past the last one: a segment each */
        for (; bi < nb && blocks[bi].addr < start; bi++)
            write_segment(f, device, &blocks[bi], &blocks[bi], 1);
        if (si == ns)
            break;
        size_t first = bi;
        uint64_t end = segs[si].addr + segs[si].size;
        while (bi < nb && blocks[bi].addr + blocks[bi].size <= end)
            bi++;
        write_segment(f, device, &segs[si], blocks + first, bi - first);
    }
}

static void write_trace(FILE *f, const trace *t, size_t count)
{
    pk_list(f);
    for (size_t i = 0; i < count; i++) {
        const trace_entry *e = &t->entries[i];
        pk_dict(f);
        pk_key_str(f, "action", trace_action_names[e->action]);
        if (e->action == TRACE_OOM)
            pk_key_uint(f, "device_free", 0);
        else
            pk_key_uint(f, "addr", e->addr);
        pk_key_uint(f, "size", e->size);
        pk_key_uint(f, "stream", e->stream);
        pk_key_uint(f, "time_us", e->time);
        pk_key_empty_list(f, "frames");
        pk_append(f);
    }
}

/* replay.h: a pipe or a character device at `path`, or a symbolic link (which
 * crmm_output_file_open follows only to such a stream), is written as it is (tmp ""); otherwise
 * a new file beside it, so that a failed write leaves what was there and no reader sees half a
 * file. A file already at path must be one crmm would write (the caller's own regular file with
 * one link): opened to append, which checks that and changes nothing; the new file takes its
 * permissions. */
crmm_status replay_output_open(const char *path, char *tmp, size_t tmp_size, int *fd)
{
    struct stat sb;
    tmp[0] = '\0';
    bool exists = lstat(path, &sb) == 0;
    if (exists && (S_ISFIFO(sb.st_mode) || S_ISCHR(sb.st_mode) || S_ISLNK(sb.st_mode)))
        return crmm_output_file_open(path, 0, fd);
    if (exists) {
        int check;
        if (crmm_output_file_open(path, CRMM_OUTPUT_APPEND, &check) != CRMM_OK)
            return crmm_last_status();
        close(check);
    }
    if ((size_t)snprintf(tmp, tmp_size, "%s.%ld.tmp", path, (long)getpid()) >= tmp_size) {
        tmp[0] = '\0';
        return crmm_set_error(CRMM_ERROR_IO, "cannot write %s: %s", path, strerror(ENAMETOOLONG));
    }
    crmm_status st = crmm_output_file_open(tmp, 0, fd);
    if (st == CRMM_OK && exists && fchmod(*fd, sb.st_mode & 07777) != 0) { /* the replaced file's mode */
        int err = errno;
        close(*fd);
        unlink(tmp);
        st = crmm_set_error(CRMM_ERROR_IO, "cannot write %s: %s", tmp, strerror(err));
    }
    if (st != CRMM_OK) { /* named by the path asked for: "cannot write PATH: why" */
        char want[4300];
        snprintf(want, sizeof want, "cannot write %s: ", tmp);
        char why[1024];
        const char *detail = crmm_last_error_detail();
        if (strncmp(detail, want, strlen(want)) == 0) {
            snprintf(why, sizeof why, "%s", detail + strlen(want)); /* out of the buffer set_error writes */
            st = crmm_set_error(st, "cannot write %s: %s", path, why);
        }
        tmp[0] = '\0';
    }
    return st;
}

crmm_status replay_output_fopen(const char *path, const char *mode, char *tmp, size_t tmp_size, FILE **f)
{
    int fd;
    *f = NULL;
    if (replay_output_open(path, tmp, tmp_size, &fd) != CRMM_OK)
        return crmm_last_status();
    if ((*f = fdopen(fd, mode)))
        return CRMM_OK;
    int err = errno;
    close(fd);
    if (tmp[0])
        unlink(tmp);
    return crmm_set_error(CRMM_ERROR_IO, "cannot write %s: %s", path, strerror(err));
}

crmm_status replay_output_close(FILE *f, const char *tmp, const char *path, const char *what)
{
    int write_error = ferror(f) ? (errno ? errno : EIO) : 0;
    if (fclose(f) != 0 && !write_error)
        write_error = errno ? errno : EIO;
    if (tmp[0] && !write_error && rename(tmp, path) != 0)
        write_error = errno;
    if (!write_error)
        return CRMM_OK;
    if (tmp[0])
        unlink(tmp); /* what was at path stays */
    return crmm_set_error(CRMM_ERROR_IO, "%scannot write %s: %s", what, path, strerror(write_error));
}

crmm_status replay_torch_snapshot(const char *path, const replay_log *log, crmm_resource *top, replay_recorder *rec)
{
    trace own_trace = {0};
    crmm_status st = CRMM_ERROR_OUT_OF_MEMORY;
    void **ptrs = calloc(log->count + 1, sizeof *ptrs);
    unsigned char *own = calloc(log->count + 1, 1);
    span *segs = NULL, *blocks = NULL;
    size_t ns = 0, nb = 0;
    int device = top->device < 0 ? 0 : top->device;
    crmm_device_guard guard;
    bool entered = false;
    if (!ptrs || !own) {
        free(ptrs);
        free(own);
        return crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "--torch-snapshot: out of memory");
    }
    if (top->device >= 0) {
        if ((st = crmm_cuda_device_enter(top->device, &guard)) != CRMM_OK) {
            free(ptrs);
            free(own);
            return st;
        }
        entered = true;
    }
    /* with a recorder, its trace: what the resource reserved when it was made comes first */
    trace *t = rec ? &rec->trace : &own_trace;
    replay_into(log, top, rec, t, ptrs, own);
    if (rec)
        pthread_mutex_lock(&rec->lock);
    bool ok = !t->out_of_memory && live_at_end(t, TRACE_SEGMENT_ALLOC, TRACE_SEGMENT_FREE, &segs, &ns) &&
              live_at_end(t, TRACE_ALLOC, TRACE_FREE_COMPLETED, &blocks, &nb);
    size_t traced = t->count; /* what the replay's cleanup adds below is not part of it */
    if (rec)
        pthread_mutex_unlock(&rec->lock);
    /* the state is taken; what the log leaves allocated goes back now */
    for (size_t i = 0; i < log->count; i++)
        if (ptrs[i])
            crmm_resource_deallocate(top, ptrs[i], (size_t)log->events[i].size, NULL);
    if (entered)
        crmm_cuda_device_restore(&guard);
    if (!ok) {
        st = crmm_set_error(CRMM_ERROR_OUT_OF_MEMORY, "--torch-snapshot: out of memory");
        goto out;
    }
    char tmp[4200];
    FILE *f;
    if (replay_output_fopen(path, "wb", tmp, sizeof tmp, &f) != CRMM_OK) {
        st = crmm_error_add_context("--torch-snapshot");
        goto out;
    }
    pk_byte(f, 0x80); /* PROTO 2 */
    pk_byte(f, 2);
    pk_dict(f);
    pk_str(f, "segments");
    pk_list(f);
    write_segments(f, device, segs, ns, blocks, nb);
    pk_setitem(f);
    pk_str(f, "device_traces");
    pk_list(f);
    for (int d = 0; d < device; d++) {
        pk_list(f);
        pk_append(f);
    }
    write_trace(f, t, traced);
    pk_append(f);
    pk_setitem(f);
    pk_str(f, "allocator_settings");
    pk_dict(f);
    pk_setitem(f);
    pk_byte(f, '.'); /* STOP */
    st = replay_output_close(f, tmp, path, "--torch-snapshot: ");
out:
    free(segs);
    free(blocks);
    free(ptrs);
    free(own);
    free(own_trace.entries);
    return st;
}
