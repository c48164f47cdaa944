/*
 * world: the handful of collectives the executor's host side needs between
 * ranks (agreement, barriers, gathers for --check and the trace), over
 * either MPI (one process per rank: world_mpi) or threads of one process
 * (world_local: all P ranks in one process, for the CUDA device's
 * --transport local). The CPU device and mpirun keep using world_mpi.
 *
 * Every rank calls every function collectively, in the same order.
 * Root-only outputs may be NULL on other ranks.
 *
 * Layer: exec (uses core; MPI and CBLAS only in the CPU device).
 */
#ifndef LOONG_EXEC_WORLD_H
#define LOONG_EXEC_WORLD_H

#include <stdbool.h>
#include <stddef.h>

typedef struct world world;
struct world {
    int rank, size;
    int same_clock; /* every rank reads the same host clock (one process) */
    void *impl;
    void (*barrier)(const world *w);
    int (*max_int)(const world *w, int v);                                    /* all get the max */
    void (*max_double)(const world *w, double *v, int n);                     /* in place */
    void (*sum_double)(const world *w, const double *in, double *out, int n); /* to rank 0 */
    void (*gather)(const world *w, const void *in, size_t bytes, void *out);  /* equal sizes, to rank 0 */
    void (*allgather)(const world *w, const void *in, size_t bytes, void *out);
    void (*bcast)(const world *w, void *buf, size_t bytes); /* from rank 0 */
    /* Clock offset of this rank from rank 0's (seconds to subtract), by
     * ping-pong with now(); 0 with same_clock. */
    double (*clock_offset)(const world *w, double (*now)(void *), void *arg);
    void (*abort)(const world *w, int code); /* end every rank, now */
};

/* MPI_COMM_WORLD (MPI already initialised). */
world world_mpi(void);

/* Whether mpirun started more ranks on this node than it has online cores
 * (OMPI_COMM_WORLD_LOCAL_SIZE, which mpirun sets before MPI_Init): then
 * waiting ranks must leave the cores to the computing ones. */
bool world_oversubscribed(void);

/* P ranks as threads of this process: world_local_new makes the shared
 * part, world_local_rank each rank's handle; free after every rank ends. */
typedef struct world_local_shared world_local_shared;
world_local_shared *world_local_new(int size);
world world_local_rank(world_local_shared *sh, int rank);
void world_local_free(world_local_shared *sh);

#endif
