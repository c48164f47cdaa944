/*
 * devq: the host side that every device shares. Each stream is a worker
 * thread draining a FIFO of ops, event records and event waits, so streams
 * run concurrently and in order, like CUDA streams; events are host flags
 * under one mutex; the first error is kept, releases every waiter and
 * skips what is still queued; and an op marked `fail` ends the process
 * (fault injection). A device (device_cpu.c, src/cuda) supplies only what
 * runs: its kernels, memory and transfers, through devq_hooks; it never
 * sees the queue. The executor launches, records and waits through
 * devq_launch/devq_record/devq_wait on the device's queue (dev_ops.queue).
 *
 * Layer: exec (no MPI, no CUDA: C and pthreads only).
 */
#ifndef LOONG_EXEC_DEVQ_H
#define LOONG_EXEC_DEVQ_H

#include "device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct devq_hooks {
    void *ctx; /* the device, passed back to every hook */
    /* On each worker thread before its first item (CUDA: the current GPU
     * is per thread). May be NULL. */
    void (*thread_start)(void *ctx, int stream);
    /* Run op on stream, or issue it (CUDA). A failure is reported with
     * devq_fail(); the op returns normally. */
    void (*run)(void *ctx, int stream, const dev_op *op);
    /* Before the host flag of `event` is raised on stream (CUDA records a
     * cudaEvent there). May be NULL. */
    void (*record)(void *ctx, int stream, int event);
    /* After the host flag of `event` was seen, before the stream goes on
     * (CUDA makes the stream wait for the cudaEvent). May be NULL. */
    void (*wait)(void *ctx, int stream, int event);
    /* Free a device allocation still owned at devq_close(). */
    void (*release)(void *ctx, void *p);
} devq_hooks;

/* Start `nstreams` workers for `rank` with `nevents` event flags. Returns
 * the queue, or NULL with a message (out of memory or threads). */
devq *devq_open(int rank, int nstreams, int nevents, const devq_hooks *h, char err[LOONG_ERRLEN]);

/* Stop and join every worker (what is queued runs first), then release
 * every allocation still owned. Safe on NULL. */
void devq_close(devq *q);

/* Queue an op, an event record or an event wait on `stream`. Returns DEV_OK,
 * DEV_ERR_ARG for a bad stream or event, DEV_ERR_MEM when the queue cannot
 * grow. */
dev_result devq_launch(devq *q, int stream, const dev_op *op);
dev_result devq_record(devq *q, int stream, int event);
dev_result devq_wait(devq *q, int stream, int event);

/* Lower every event flag (between iterations, with the streams idle). */
void devq_reset_events(devq *q);

/* Block until every queued item has run. Returns DEV_OK or the first
 * error, with its message in err. */
dev_result devq_drain(devq *q, char err[LOONG_ERRLEN]);

/* Record the first error of the device: `code`, and "rank R: MSG at
 * file:line" as its message; release every waiter; later items are
 * skipped. Callable from any thread. */
void devq_fail(devq *q, dev_result code, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
#define DEVQ_FAIL(q, code, ...) devq_fail((q), (code), __FILE__, __LINE__, __VA_ARGS__)

/* Whether an error was recorded (for loops that wait on other threads). */
bool devq_failed(devq *q);

/* Device memory the queue releases at close (with hooks.release), unless
 * disowned first. devq_own returns p, or NULL (and releases p) when the
 * list cannot grow. */
void *devq_own(devq *q, void *p);
void devq_disown(devq *q, void *p);

#ifdef __cplusplus
}
#endif

#endif
