// crmm's hooks for PyTorch's CUDA graph pools, tensor.record_stream and allocation
// (python/crmm/_torch_graph_hooks.cpp), without PyTorch or a GPU: the hooks are compiled here
// against stand-ins of the three PyTorch headers they use (tests/torch_standin), installed on a
// stand-in pluggable allocator, and called as PyTorch's CUDAGraph and torch.cuda.use_mem_pool call
// them. crmm's graph-owner functions are scripted: they record each call and keep the claims
// function and its context while the owner is open, as libcrmm does. Checks what PyTorch relies on:
// each graph capture is one owner, begun on the capturing device's current stream and claimed by
// PyTorch's filter; a pool's owners are released when its last graph is; use_mem_pool contexts
// reach crmm not at all; a failure anywhere leaves crmm with no open owner whose filter is gone; a
// forked child can use the hooks whatever the parent's threads were doing; record_stream reaches
// crmm with its pointer and stream, and crmm's refusal reaches PyTorch as an exception with crmm's
// message; an allocation that fails reaches PyTorch as its out-of-memory exception (another
// failure as c10::Error), with crmm's message.
#include <new>

// operator new is replaced below (to fail on request) with malloc, and operator delete with free
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

#include "../python/crmm/_torch_graph_hooks.cpp"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace {

int checks, failures;

#define CHECK(cond)                                                                                                    \
    do {                                                                                                               \
        checks++;                                                                                                      \
        if (!(cond)) {                                                                                                 \
            failures++;                                                                                                \
            std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                             \
        }                                                                                                              \
    } while (0)

// ---- global operator new, failing on request ---------------------------------------------------
std::atomic<bool> fail_next_new{false};

// ---- scripted crmm -------------------------------------------------------------------------------
struct Open {
    crmm_graph_owner_claims_fn claims;
    void *ctx;
};
struct Script {
    bool refuse_begin = false;
    bool fail_new_after_begin = false;
    std::map<uint64_t, Open> open; // owners begun and not ended
    std::vector<uint64_t> begun, ended, released;
    std::vector<int> devices;
    std::vector<cudaStream_t> streams;
};
Script script;

crmm_status scripted_begin(uint64_t owner, int device, crmm_cuda_stream_t stream, crmm_graph_owner_claims_fn claims,
                           void *ctx)
{
    script.begun.push_back(owner);
    script.devices.push_back(device);
    script.streams.push_back(stream);
    if (script.refuse_begin)
        return CRMM_ERROR_OUT_OF_MEMORY;
    script.open[owner] = Open{claims, ctx};
    if (script.fail_new_after_begin)
        fail_next_new = true;
    return CRMM_OK;
}

crmm_status scripted_end(uint64_t owner)
{
    script.ended.push_back(owner);
    auto it = script.open.find(owner);
    if (it == script.open.end())
        return CRMM_ERROR_INVALID_ARGUMENT;
    // libcrmm may call the filter until end returns: it must still be alive here
    it->second.claims(it->second.ctx, cudaStreamLegacy);
    script.open.erase(it);
    return CRMM_OK;
}

crmm_status scripted_release(uint64_t owner)
{
    script.released.push_back(owner);
    return CRMM_OK;
}

bool claims_of(uint64_t owner, cudaStream_t stream)
{
    Open &o = script.open.at(owner);
    return o.claims(o.ctx, stream);
}

// ---- stand-in PyTorch ----------------------------------------------------------------------------
cudaStream_t stream_of(int device)
{
    return reinterpret_cast<cudaStream_t>(static_cast<uintptr_t>(0x1000 + 0x100 * device));
}

std::shared_ptr<c10::cuda::CUDACachingAllocator::CUDAAllocator> current_allocator;
torch::cuda::CUDAPluggableAllocator::CUDAPluggableAllocator *pluggable;

// PyTorch's CUDAGraph filter: the capture's own stream, never the legacy stream
std::function<bool(cudaStream_t)> graph_filter(cudaStream_t captured)
{
    return [captured](cudaStream_t s) { return s == captured; };
}

// torch.cuda.use_mem_pool's filter: every stream of its thread
std::function<bool(cudaStream_t)> context_filter()
{
    return [](cudaStream_t) { return true; };
}

const c10::cuda::MempoolId_t pool_a{1, 0}, pool_b{2, 0};

void reset()
{
    script = Script{};
}

size_t pools_recorded()
{
    std::lock_guard<std::mutex> g(lock);
    return pools.size();
}

int install()
{
    char message[256] = "";
    return crmm_torch_install_graph_hooks(reinterpret_cast<void *>(scripted_begin),
                                          reinterpret_cast<void *>(scripted_end),
                                          reinterpret_cast<void *>(scripted_release), message, sizeof message);
}

// ---- the checks ----------------------------------------------------------------------------------
void install_needs_a_pluggable_allocator_and_every_function()
{
    char message[256] = "";
    current_allocator = std::make_shared<c10::cuda::CUDACachingAllocator::CUDAAllocator>();
    CHECK(install() == -1);
    CHECK(crmm_torch_install_graph_hooks(nullptr, nullptr, nullptr, message, sizeof message) == -1);
    CHECK(std::strstr(message, "missing") != nullptr);

    auto p = std::make_shared<torch::cuda::CUDAPluggableAllocator::CUDAPluggableAllocator>();
    pluggable = p.get();
    current_allocator = p;
    CHECK(crmm_torch_install_graph_hooks(reinterpret_cast<void *>(scripted_begin), nullptr,
                                         reinterpret_cast<void *>(scripted_release), message, sizeof message) == -1);
    CHECK(!pluggable->begin && !pluggable->end && !pluggable->release); // nothing half set
    CHECK(install() == 0);
    CHECK(pluggable->begin && pluggable->end && pluggable->release);
}

void a_capture_is_one_owner_on_its_devices_stream()
{
    reset();
    pluggable->begin(1, pool_a, graph_filter(stream_of(1)));
    CHECK(script.begun.size() == 1 && script.devices.at(0) == 1 && script.streams.at(0) == stream_of(1));
    uint64_t owner = script.begun.at(0);
    CHECK(claims_of(owner, stream_of(1)));
    CHECK(!claims_of(owner, stream_of(0)));
    pluggable->end(1, pool_a);
    CHECK(script.ended == std::vector<uint64_t>{owner});
    CHECK(script.released.empty()); // the graph still runs
    pluggable->release(1, pool_a);
    CHECK(script.released == std::vector<uint64_t>{owner});
    CHECK(pools_recorded() == 0);
}

void the_same_pool_id_on_two_devices_is_two_pools()
{
    reset();
    pluggable->begin(0, pool_a, graph_filter(stream_of(0)));
    pluggable->end(0, pool_a);
    pluggable->begin(1, pool_a, graph_filter(stream_of(1)));
    pluggable->end(1, pool_a);
    CHECK(script.streams == (std::vector<cudaStream_t>{stream_of(0), stream_of(1)}));
    pluggable->release(1, pool_a);
    CHECK(script.released == std::vector<uint64_t>{script.begun.at(1)});
    pluggable->release(0, pool_a);
    CHECK(script.released.size() == 2 && script.released.at(1) == script.begun.at(0));
    CHECK(pools_recorded() == 0);
}

void a_shared_pool_is_released_with_its_last_graph()
{
    reset();
    for (int i = 0; i < 2; i++) { // torch.cuda.graph(g2, pool=g1.pool())
        pluggable->begin(0, pool_a, graph_filter(stream_of(0)));
        pluggable->end(0, pool_a);
    }
    CHECK(script.begun.size() == 2 && script.begun.at(0) != script.begun.at(1));
    pluggable->release(0, pool_a); // the first graph's reset
    CHECK(script.released.empty());
    pluggable->release(0, pool_a);
    CHECK(script.released == script.begun);
    CHECK(pools_recorded() == 0);
}

void use_mem_pool_contexts_never_reach_crmm()
{
    reset();
    pluggable->begin(0, pool_b, graph_filter(stream_of(0))); // a graph captured into the pool
    pluggable->end(0, pool_b);
    pluggable->begin(0, pool_b, context_filter()); // then `with torch.cuda.use_mem_pool(pool)`
    pluggable->end(0, pool_b);
    pluggable->release(0, pool_b); // the context's release, right after its end
    CHECK(script.begun.size() == 1 && script.ended.size() == 1);
    CHECK(script.released.empty()); // the graph still holds the pool
    pluggable->release(0, pool_b);  // the graph's reset
    CHECK(script.released == script.begun);
    CHECK(pools_recorded() == 0);
}

void nested_captures_end_newest_first()
{
    reset();
    pluggable->begin(0, pool_a, graph_filter(stream_of(0)));
    pluggable->begin(0, pool_a, graph_filter(stream_of(0)));
    pluggable->end(0, pool_a);
    pluggable->end(0, pool_a);
    CHECK(script.ended.size() == 2 && script.ended.at(0) == script.begun.at(1) &&
          script.ended.at(1) == script.begun.at(0));
    pluggable->release(0, pool_a);
    pluggable->release(0, pool_a);
    CHECK(script.released.size() == 2 && pools_recorded() == 0);
}

void a_refused_owner_is_neither_ended_nor_released()
{
    reset();
    script.refuse_begin = true;
    pluggable->begin(0, pool_a, graph_filter(stream_of(0)));
    pluggable->end(0, pool_a);
    pluggable->release(0, pool_a);
    CHECK(script.begun.size() == 1 && script.ended.empty() && script.released.empty());
    CHECK(pools_recorded() == 0);
}

void ends_and_releases_of_unknown_pools_are_ignored()
{
    reset();
    pluggable->end(0, pool_a);
    pluggable->release(0, pool_b);
    CHECK(script.ended.empty() && script.released.empty() && pools_recorded() == 0);
}

void a_filter_that_throws_claims_nothing()
{
    reset();
    bool probing = true; // PyTorch's first call is the hooks' probe of the legacy stream
    pluggable->begin(0, pool_a, [&probing](cudaStream_t s) -> bool {
        if (probing) {
            probing = false;
            return s != cudaStreamLegacy;
        }
        throw std::runtime_error("CUDA error");
    });
    uint64_t owner = script.begun.at(0);
    CHECK(!claims_of(owner, stream_of(0)));
    pluggable->end(0, pool_a);
    pluggable->release(0, pool_a);
    CHECK(script.released.size() == 1 && pools_recorded() == 0);
}

void no_memory_after_crmm_took_the_owner_lets_it_go()
{
    reset();
    script.fail_new_after_begin = true;
    bool threw = false;
    try {
        pluggable->begin(0, pool_a, graph_filter(stream_of(0)));
    } catch (const std::bad_alloc &) {
        threw = true; // PyTorch's capture_begin fails with it
    }
    fail_next_new = false;
    CHECK(threw);
    CHECK(script.begun.size() == 1 && script.open.empty()); // ended while its filter was alive
    CHECK(script.released == script.begun);
    // and the hooks go on working
    script.fail_new_after_begin = false;
    pluggable->begin(0, pool_a, graph_filter(stream_of(0)));
    pluggable->end(0, pool_a);
    pluggable->release(0, pool_a);
    CHECK(script.begun.size() == 2 && script.released.size() == 2 && pools_recorded() == 0);
}

// A parent thread uses the hooks without pause while the main thread forks; each child uses them
// too. A lock held by the parent's thread at the fork would hang the child (killed by its alarm).
void a_forked_child_can_use_the_hooks()
{
    reset();
    std::atomic<bool> stop{false};
    std::thread busy([&stop] {
        const c10::cuda::MempoolId_t own{99, 0};
        while (!stop.load()) {
            pluggable->begin(0, own, context_filter());
            pluggable->end(0, own);
            pluggable->release(0, own);
        }
    });
    int hung = 0;
    for (int i = 0; i < 200 && !hung; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            alarm(5);
            const c10::cuda::MempoolId_t mine{7, 0};
            pluggable->begin(0, mine, context_filter());
            pluggable->end(0, mine);
            pluggable->release(0, mine);
            _exit(0);
        }
        int status = 0;
        if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
            hung++;
    }
    stop = true;
    busy.join();
    CHECK(hung == 0);
}

// ---- tensor.record_stream ------------------------------------------------------------------------
std::vector<std::pair<void *, crmm_cuda_stream_t>> recorded;
bool refuse_record;

crmm_status scripted_record(void *ptr, crmm_cuda_stream_t stream)
{
    if (refuse_record)
        return CRMM_ERROR_OUT_OF_MEMORY;
    recorded.emplace_back(ptr, stream);
    return CRMM_OK;
}

const char *scripted_last_error()
{
    return "out of memory: no host memory for the record";
}

void record_stream_reaches_crmm_and_its_refusal_reaches_pytorch()
{
    char message[256] = "";
    CHECK(crmm_torch_install_record_stream(nullptr, reinterpret_cast<void *>(scripted_last_error), message,
                                           sizeof message) == -1);
    CHECK(std::strstr(message, "missing") != nullptr);
    auto saved = current_allocator;
    current_allocator = std::make_shared<c10::cuda::CUDACachingAllocator::CUDAAllocator>();
    CHECK(crmm_torch_install_record_stream(reinterpret_cast<void *>(scripted_record),
                                           reinterpret_cast<void *>(scripted_last_error), message, sizeof message) == -1);
    CHECK(std::strstr(message, "not a pluggable one") != nullptr);
    current_allocator = saved;
    CHECK(!pluggable->record_stream); // nothing set by the refusals
    CHECK(crmm_torch_install_record_stream(reinterpret_cast<void *>(scripted_record),
                                           reinterpret_cast<void *>(scripted_last_error), message, sizeof message) == 0);
    CHECK(pluggable->record_stream);
    int block;
    pluggable->record_stream(&block, stream_of(1));
    CHECK(recorded.size() == 1 && recorded.at(0).first == &block && recorded.at(0).second == stream_of(1));
    refuse_record = true;
    bool thrown = false;
    try {
        pluggable->record_stream(&block, stream_of(0));
    } catch (const std::runtime_error &e) {
        thrown = std::strstr(e.what(), "record_stream") && std::strstr(e.what(), "no host memory for the record");
    }
    CHECK(thrown);
    CHECK(recorded.size() == 1);
    refuse_record = false;
}

// ---- allocation --------------------------------------------------------------------------------
crmm_status allocate_answer = CRMM_OK;
int allocate_calls, deallocate_calls;
ssize_t last_size, last_free_size;
int last_device;
crmm_cuda_stream_t last_stream;
char the_block[64];

crmm_status scripted_allocate(ssize_t size, int device, crmm_cuda_stream_t stream, void **ptr)
{
    allocate_calls++;
    last_size = size;
    last_device = device;
    last_stream = stream;
    *ptr = allocate_answer == CRMM_OK ? the_block : nullptr;
    return allocate_answer;
}

void scripted_deallocate(void *ptr, ssize_t size, int device, crmm_cuda_stream_t stream)
{
    deallocate_calls += ptr == the_block && device == 1 && stream == stream_of(1);
    last_free_size = size;
}

const char *scripted_allocate_error()
{
    return "out of memory: pool 'main': failed to allocate 20.0 MiB (maximum pool size 16.0 MiB)";
}

// What PyTorch's pluggable allocator gets from crmm_torch_hooks_allocate, as a kind of exception.
enum class Thrown { nothing, out_of_memory, error };
Thrown allocate_through_hooks(ssize_t size, std::string *what)
{
    try {
        void *p = crmm_torch_hooks_allocate(size, 1, reinterpret_cast<cudaStream_t>(stream_of(1)));
        *what = p == the_block ? "the block" : "another pointer";
        return Thrown::nothing;
    } catch (const c10::OutOfMemoryError &e) {
        *what = e.what();
        return Thrown::out_of_memory;
    } catch (const c10::Error &e) {
        *what = e.what();
        return Thrown::error;
    }
}

void allocation_failures_reach_pytorch_as_its_exceptions()
{
    std::string what;
    CHECK(allocate_through_hooks(64, &what) == Thrown::error); // not installed yet: no call through NULL
    CHECK(what.find("use_crmm") != std::string::npos);
    char message[256] = "";
    CHECK(crmm_torch_install_allocator(reinterpret_cast<void *>(scripted_allocate), nullptr,
                                       reinterpret_cast<void *>(scripted_allocate_error), message, sizeof message) == -1);
    CHECK(std::strstr(message, "missing") != nullptr);
    CHECK(crmm_torch_install_allocator(reinterpret_cast<void *>(scripted_allocate),
                                       reinterpret_cast<void *>(scripted_deallocate),
                                       reinterpret_cast<void *>(scripted_allocate_error), message, sizeof message) == 0);
    CHECK(allocate_through_hooks(4096, &what) == Thrown::nothing && what == "the block");
    CHECK(last_size == 4096 && last_device == 1 && last_stream == stream_of(1));
    crmm_torch_hooks_deallocate(the_block, 4096, 1, reinterpret_cast<cudaStream_t>(stream_of(1)));
    CHECK(deallocate_calls == 1 && last_free_size == 4096);

    allocate_answer = CRMM_ERROR_OUT_OF_MEMORY;
    CHECK(allocate_through_hooks(20 << 20, &what) == Thrown::out_of_memory);
    CHECK(what.rfind("CUDA out of memory. Tried to allocate 20.00 MiB on device 1", 0) == 0); // what recovery code looks for
    CHECK(what.find("maximum pool size 16.0 MiB") != std::string::npos);
    CHECK(allocate_through_hooks(100, &what) == Thrown::out_of_memory && what.find("100 bytes") != std::string::npos);
    allocate_answer = CRMM_ERROR_CONFIG;
    CHECK(allocate_through_hooks(64, &what) == Thrown::error); // not out of memory: RuntimeError
    CHECK(what.find("crmm: ") == 0 && what.find("out of memory") != std::string::npos);
    allocate_answer = CRMM_OK;
    CHECK(allocate_calls == 4);
}

} // namespace

// the stand-ins' functions, defined by the test
c10::cuda::CUDAStream c10::cuda::getCurrentCUDAStream(c10::DeviceIndex device)
{
    return CUDAStream{stream_of(device)};
}

std::shared_ptr<c10::cuda::CUDACachingAllocator::CUDAAllocator> torch::cuda::CUDAPluggableAllocator::getCurrentAllocator()
{
    return current_allocator;
}

void *operator new(std::size_t size)
{
    if (fail_next_new.exchange(false))
        throw std::bad_alloc();
    if (void *p = std::malloc(size ? size : 1))
        return p;
    throw std::bad_alloc();
}

void operator delete(void *p) noexcept
{
    std::free(p);
}

void operator delete(void *p, std::size_t) noexcept
{
    std::free(p);
}

int main()
{
    install_needs_a_pluggable_allocator_and_every_function();
    if (!pluggable || !pluggable->begin) {
        std::fprintf(stderr, "the hooks were not installed\n");
        return 1;
    }
    a_capture_is_one_owner_on_its_devices_stream();
    the_same_pool_id_on_two_devices_is_two_pools();
    a_shared_pool_is_released_with_its_last_graph();
    use_mem_pool_contexts_never_reach_crmm();
    nested_captures_end_newest_first();
    a_refused_owner_is_neither_ended_nor_released();
    ends_and_releases_of_unknown_pools_are_ignored();
    a_filter_that_throws_claims_nothing();
    no_memory_after_crmm_took_the_owner_lets_it_go();
    a_forked_child_can_use_the_hooks();
    record_stream_reaches_crmm_and_its_refusal_reaches_pytorch();
    allocation_failures_reach_pytorch_as_its_exceptions();
    std::printf("%d%%: Checks: %d, Failures: %d, Errors: 0\n", checks ? 100 * (checks - failures) / checks : 0, checks,
                failures);
    return failures ? 1 : 0;
}
