/*
 * nccl: how NCCL runs a collective on a loong platform, as one model that
 * the simulator, the analytical model, `loong coll` and the nccl-tests
 * calibration all use.
 *
 * For a group of ranks on a platform it chooses the algorithm (ring, double
 * binary tree, NVLink SHARP) and protocol (Simple, LL, LL128) per message
 * size the way NCCL's tuner does, by the smallest predicted time, unless
 * one is forced (--nccl-algo / --nccl-proto, NCCL_ALGO / NCCL_PROTO). Its
 * time is alpha + bytes x bus factor / bus bandwidth:
 *
 *   alpha      NCCL's latency model (src/graph/tuning.cc): a protocol base
 *              plus one hop latency per step, NVLink hops and network hops
 *              counted apart; the Simple hops come from the platform's link
 *              latencies, LL and LL128 scale NCCL's own hop ratios.
 *   bus bw     the bandwidth the algorithm's flows get on an idle platform
 *              (raw), times the protocol's efficiency (NCCL's factors).
 *
 * The flows (nccl_member_flows) are the link loads of NCCL's channels:
 * a ring's channels leave each node through every rail NIC its members
 * sit on, so one member sends its ring share over NVLink to the next member
 * of its node and 1/ppn of it over its own rail to the member at the same
 * position in the next node; a tree adds the intra-node chain both ways
 * and, per tree, half the data to the parent and the children; NVLS sends
 * the buffer once up to the switch and once down. Wire bytes are inflated
 * by raw / effective bandwidth so that an idle platform reproduces the
 * model's time and a busy one slows it by contention.
 *
 * Layer: model (uses core only).
 */
#ifndef LOONG_NCCL_H
#define LOONG_NCCL_H

#include <stdbool.h>

#include "model/platform_spec.h"

typedef enum {
    COLL_ALL_REDUCE,
    COLL_ALL_GATHER,
    COLL_REDUCE_SCATTER,
    COLL_ALLTOALL,
    COLL_SENDRECV,
    COLL_BROADCAST,
    COLL_OP_COUNT
} coll_op;
typedef enum { NCCL_RING, NCCL_TREE, NCCL_NVLS, NCCL_ALGO_COUNT } nccl_algo;
typedef enum { NCCL_SIMPLE, NCCL_LL, NCCL_LL128, NCCL_PROTO_COUNT } nccl_proto;
#define NCCL_AUTO (-1)

/* nccl-tests' names (all_reduce, ...), NCCL's (Ring, LL128, ...). */
const char *coll_op_name(coll_op op);
int coll_op_parse(const char *s, coll_op *out);
const char *nccl_algo_name(int algo);
const char *nccl_proto_name(int proto);
/* "ring" | "tree" | "nvls" | "auto" and "simple" | "ll" | "ll128" | "auto",
 * case-insensitive (NCCL's spellings work too); NCCL_AUTO for auto.
 * Return 0 or -1. */
int nccl_algo_parse(const char *s, int *out);
int nccl_proto_parse(const char *s, int *out);

/* nccl-tests' bus bandwidth factor busbw / algbw for n ranks (REFERENCE.md):
 * 2(n-1)/n all-reduce, (n-1)/n all-gather, reduce-scatter, all-to-all, 1
 * send/recv and broadcast. */
double coll_bus_factor(coll_op op, int n);

/* A group's shape: its members in NCCL's ring order (nodes in order of
 * first appearance, members of a node in rank order), where each sits. */
typedef struct nccl_group {
    int n;           /* members */
    int nnodes;      /* nodes that hold members */
    int ppn;         /* most members on one node */
    int per_nic;     /* most members of one node behind one NIC */
    int rails;       /* distinct rails the members of a node use (fewest over nodes) */
    int *rank;       /* [n] member -> rank, in ring order */
    int *node;       /* [n] member -> node index among the group's nodes */
    int *pos;        /* [n] member -> position among its node's members */
    int *node_first; /* [nnodes + 1] first member of each node */
} nccl_group;

/* Shape of the group of `n` ranks (any order; rank r sits on GPU r of the
 * platform: node r / gpus_per_node, slot r % gpus_per_node). Returns 0, or
 * -1 when a rank is off the platform. Free with nccl_group_free. */
int nccl_group_init(nccl_group *g, const platform_spec *sp, const int *ranks, int n);
void nccl_group_free(nccl_group *g);

/* sp with nodes enough for `nodes` nodes or `gpus` GPUs, whichever needs
 * more: groups larger than the platform (data parallelism by symmetry, a
 * log of a bigger cluster) are shaped on it. */
platform_spec nccl_spec_holding(const platform_spec *sp, int gpus, int nodes);

/* A uniform group: `n` ranks over `nnodes` nodes, n / nnodes on each, the
 * first GPUs of each node (what nccl-tests runs). */
int nccl_group_uniform(nccl_group *g, const platform_spec *sp, int n, int nnodes);

/* One predicted collective. */
typedef struct nccl_plan {
    int algo, proto;
    double alpha;      /* seconds */
    double busbw;      /* effective bus bandwidth, bytes/s */
    double raw_busbw;  /* the flows' bus bandwidth on an idle platform */
    double bus_factor; /* busbw / algbw */
    double seconds;    /* alpha + bytes x bus_factor / busbw */
} nccl_plan;

/* Plan collective `op` of `bytes` (nccl-tests' size: the buffer per rank;
 * all-to-all: everything a rank sends, its own share included) on group g.
 * algo/proto: NCCL_AUTO or forced. All-to-all and send/recv are p2p
 * (Simple, whatever is forced, as in NCCL). Returns 0, or -1 with a
 * message when the forced choice cannot run this collective here (tree:
 * all-reduce across nodes; NVLS: all-reduce inside one node of a platform
 * with NVLink SHARP, Simple only). A group of one rank plans to 0 s. */
int nccl_plan_coll(const platform_spec *sp, const nccl_group *g, coll_op op, double bytes, int algo, int proto,
                   nccl_plan *out, char err[LOONG_ERRLEN]);

/* The same, where a forced choice that cannot run falls back to the
 * tuner's, as NCCL_ALGO does for the collectives it does not cover (a
 * step's reduce-scatters under --nccl-algo tree). */
void nccl_plan_lenient(const platform_spec *sp, const nccl_group *g, coll_op op, double bytes, int algo, int proto,
                       nccl_plan *out);

/* The collective a DAG task runs, and its nccl-tests size from the bytes
 * one member sends (dag.h): bytes / bus factor. */
coll_op nccl_op_of_task(int task_kind);
double nccl_size_of_task(int task_kind, double member_bytes, int n);

/* One flow of a member: to or from member `peer`, `bytes` on the wire. */
typedef struct nccl_flow {
    int peer;
    double bytes;
} nccl_flow;

/* The flows member i sends (out) and receives (in) for plan p of `bytes`
 * on g, at most nccl_max_flows(g, op) each; returns the counts in *nout,
 * *nin. Every flow one member sends is received by its peer. symmetric:
 * the pattern is invariant under shifting nodes (a tree's network share
 * goes as a ring's, each node sending the most any node of the double tree
 * sends), so that a simulator may fold identical replicas onto one. */
int nccl_max_flows(const nccl_group *g, coll_op op);
void nccl_member_flows(const nccl_group *g, const nccl_plan *p, coll_op op, double bytes, int i, bool symmetric,
                       nccl_flow *out, int *nout, nccl_flow *in, int *nin);

/* An nccl-tests sweep: one collective per size on `gpus` GPUs spread over
 * `nodes` nodes, forced or tuned algorithm and protocol (NCCL_AUTO);
 * `loong coll` runs it on the analytical model or in the simulator. */
typedef struct nccl_sweep {
    coll_op op;
    int gpus, nodes;
    const double *sizes; /* bytes, nccl-tests' size */
    int nsizes;
    int algo, proto;
} nccl_sweep;

/* The path latency a flow of the plan sees on an idle platform (the
 * network path when the group spans nodes): the simulator sleeps
 * alpha minus this before the flows. */
double nccl_flow_latency(const platform_spec *sp, const nccl_group *g);

#endif
