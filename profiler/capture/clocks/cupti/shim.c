/* CUPTI's activity buffers handed over without Python: pinprof's buffer callbacks, in C.
 *
 * Why: CUPTI calls its buffer-completed callback with its own lock held (inside cuptiActivityFlushAll,
 * or on its worker thread). A callback written in Python must then take the GIL, while another thread
 * may hold the GIL and wait in a CUDA call for that same lock: on the H200 a resnet50 loop with 12
 * loader workers hung so (the journal's thread inside cuptiActivityFlushAll, the pin thread in
 * pin_memory). These callbacks take only this file's mutex, held for a few instructions and never
 * around a call out, so no lock order exists to invert. Python takes the completed buffers with
 * pinprof_cupti_take and gives each back with pinprof_cupti_give, off CUPTI's locks.
 *
 * Memory is bounded: at most max_live buffers of buf_bytes exist; when none is free, the requested
 * callback hands CUPTI no buffer and CUPTI counts the records it drops. The queue holds QUEUE_CAP
 * entries, more than max_live may be, so a completed buffer always has a place.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#define QUEUE_CAP 1024
#define FREE_CAP 1024

typedef void (*requested_fn)(uint8_t **buffer, size_t *size, size_t *max_records);
typedef void (*completed_fn)(void *context, uint32_t stream, uint8_t *buffer, size_t size, size_t valid);
typedef int (*register_fn)(requested_fn, completed_fn);

typedef struct {
    uint8_t *buffer;
    size_t valid;
    void *context;
    uint32_t stream;
} done_t;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static done_t queue[QUEUE_CAP];
static size_t head, count;
static uint8_t *free_list[FREE_CAP];
static size_t n_free;
static size_t buf_bytes = 1 << 20;
static size_t max_live = 64;
static size_t live;
static uint64_t refused;  /* requests answered with no buffer: all were in use */

static void requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    uint8_t *b = NULL;
    pthread_mutex_lock(&mu);
    if (n_free) {
        b = free_list[--n_free];
    } else if (live < max_live) {
        live++;
        pthread_mutex_unlock(&mu);
        b = aligned_alloc(8, buf_bytes);  /* CUPTI wants 8-byte alignment */
        pthread_mutex_lock(&mu);
        if (!b) live--;
    }
    if (!b) refused++;
    pthread_mutex_unlock(&mu);
    *buffer = b;
    *size = b ? buf_bytes : 0;
    *max_records = 0;
}

static void completed(void *context, uint32_t stream, uint8_t *buffer, size_t size, size_t valid) {
    (void)size;
    if (!buffer) return;
    pthread_mutex_lock(&mu);
    queue[(head + count) % QUEUE_CAP] = (done_t){buffer, valid, context, stream};
    count++;
    pthread_mutex_unlock(&mu);
}

/* Register the callbacks through CUPTI's cuptiActivityRegisterCallbacks (its address: the shim does
 * not link libcupti, so it loads whichever library Python found). Returns CUPTI's result. */
int pinprof_cupti_register(register_fn reg, size_t bytes, size_t most) {
    pthread_mutex_lock(&mu);
    buf_bytes = bytes;
    max_live = most < QUEUE_CAP ? most : QUEUE_CAP;
    pthread_mutex_unlock(&mu);
    return reg(requested, completed);
}

/* The oldest completed buffer: 1 and its fields, or 0 when none waits. */
int pinprof_cupti_take(uint8_t **buffer, size_t *valid, void **context, uint32_t *stream) {
    int got = 0;
    pthread_mutex_lock(&mu);
    if (count) {
        done_t d = queue[head];
        head = (head + 1) % QUEUE_CAP;
        count--;
        *buffer = d.buffer;
        *valid = d.valid;
        *context = d.context;
        *stream = d.stream;
        got = 1;
    }
    pthread_mutex_unlock(&mu);
    return got;
}

/* A buffer read: back to the free list (freed past FREE_CAP, which max_live never reaches). */
void pinprof_cupti_give(uint8_t *buffer) {
    if (!buffer) return;
    pthread_mutex_lock(&mu);
    if (n_free < FREE_CAP) {
        free_list[n_free++] = buffer;
        buffer = NULL;
    }
    pthread_mutex_unlock(&mu);
    free(buffer);
}

/* Buffers in existence, and requests refused for want of one. */
void pinprof_cupti_counts(uint64_t *n_live, uint64_t *n_refused) {
    pthread_mutex_lock(&mu);
    *n_live = live;
    *n_refused = refused;
    pthread_mutex_unlock(&mu);
}

/* CUPTI's clock between two readings of the host's (CLOCK_MONOTONIC: Python's perf_counter_ns on
 * Linux), taken back to back. Read from Python, the GIL is released around each ctypes call and taken
 * again after it, so a wait for it (up to the switch interval, 5 ms, while the loop's thread runs
 * Python) can fall between two readings, and the pair mapping CUPTI's clock onto the host's is off by
 * as much. `now` is cuptiGetTimestamp. Returns its result code. */
typedef int (*timestamp_fn)(uint64_t *timestamp);

int pinprof_clock_reads(timestamp_fn now, int64_t *before, uint64_t *cupti, int64_t *after) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    int code = now(cupti);
    clock_gettime(CLOCK_MONOTONIC, &b);
    *before = (int64_t)a.tv_sec * 1000000000 + a.tv_nsec;
    *after = (int64_t)b.tv_sec * 1000000000 + b.tv_nsec;
    return code;
}

/* Markers (marker.py): a tiny copy or an empty kernel at a step window's edge. Issued here so the
 * loop's thread pays one ctypes call of two ints, and the host time is read right after the CUDA call
 * returns: read in Python, it came after the GIL was taken back, which another thread can hold for up
 * to the switch interval. A slot holds one marker's CUDA function (cudaMemcpyAsync, or cuLaunchKernel)
 * and its arguments; MARKER_SLOTS of them, one a Marker object (a process makes one or two). */
#define MARKER_SLOTS 8

typedef int (*memcpy_fn)(void *dst, const void *src, size_t n, int kind, void *stream);
typedef int (*launch_fn)(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                         unsigned shared, void *stream, void **params, void **extra);

typedef struct {
    int kernel;   /* 1: call is cuLaunchKernel and target the CUfunction; 0: cudaMemcpyAsync to target */
    void *call;
    void *target;
    void *src;
    void *stream;
} marker_t;

static marker_t markers[MARKER_SLOTS];
static int n_markers;

/* A new slot for a marker: its index, or -1 when all are taken. */
int pinprof_marker_new(int kernel, void *call, void *target, void *src, void *stream) {
    int slot = -1;
    pthread_mutex_lock(&mu);
    if (n_markers < MARKER_SLOTS) {
        slot = n_markers++;
        markers[slot] = (marker_t){kernel, call, target, src, stream};
    }
    pthread_mutex_unlock(&mu);
    return slot;
}

/* Issue slot's marker of size n (bytes copied, or threads): the host ns (CLOCK_MONOTONIC, as Python's
 * perf_counter_ns) just after the call, or minus the CUDA error code when it failed (-1 for a slot
 * never made). */
int64_t pinprof_mark(int slot, unsigned n) {
    if (slot < 0 || slot >= MARKER_SLOTS || !markers[slot].call) return -1; /* cudaErrorInvalidValue */
    const marker_t *m = &markers[slot];
    int code = m->kernel ? ((launch_fn)m->call)(m->target, 1, 1, 1, n, 1, 1, 0, m->stream, NULL, NULL)
                         : ((memcpy_fn)m->call)(m->target, m->src, n, 1 /* cudaMemcpyHostToDevice */, m->stream);
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    if (code) return -(int64_t)code;
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}
