/*
 * mesh: the device mesh, the one home of rank layout. A mesh has named
 * dimensions (tp, head, seq, pp, dp), each with a degree (1 = absent), and
 * an order, fastest-varying first: ranks that differ only in the first
 * dimension are adjacent, so the first dimensions share a node. Every
 * group of ranks (a communicator) is "the ranks that share every
 * coordinate outside some dimensions", so groups are data computed here,
 * never loops written per backend (Megatron-Core's RankGenerator with its
 * order string, PyTorch's DeviceMesh, torchtitan's ParallelDims).
 *
 * The configuration's P_h x P_s is the head and seq dimensions of a mesh
 * whose order is (tp, head, seq, pp, dp) under head-first placement and
 * (tp, seq, head, pp, dp) under context-first: config_rank_of and
 * config_coords agree with mesh_rank and mesh_coords there (check_mesh).
 *
 * Pure functions on a small value; a mesh passed to any function but
 * mesh_validate must be valid.
 *
 * Layer: core (libc only).
 */
#ifndef LOONG_MESH_H
#define LOONG_MESH_H

#include <stdbool.h>
#include <stddef.h>

#include "units.h"

typedef enum { MESH_TP, MESH_HEAD, MESH_SEQ, MESH_PP, MESH_DP, MESH_NDIMS } mesh_dim;

/* A set of dimensions: bit 1u << d for each dimension d. */
typedef unsigned mesh_dims;
#define MESH_BIT(d) (1u << (d))

/* The sets the code forms groups over, named once (as torchtitan's
 * ParallelDims names its flattened dp_shard_cp): a group is the ranks that
 * share every coordinate outside its set (mesh_group_members). */
/* Tensor parallelism: the shards of one layer's weights. */
#define MESH_DIMS_TP MESH_BIT(MESH_TP)
/* The head all-to-all's group (Ulysses). */
#define MESH_DIMS_HEAD MESH_BIT(MESH_HEAD)
/* The ring's group: the sequence dimension (ring attention, --ring allgather). */
#define MESH_DIMS_SEQ MESH_BIT(MESH_SEQ)
/* Context parallelism, the ranks a sample's tokens are shared over
 * (P = P_h x P_s; Megatron's cp). */
#define MESH_DIMS_CP (MESH_BIT(MESH_HEAD) | MESH_BIT(MESH_SEQ))
/* The ranks that hold the same parameters: the gradients are reduced and
 * ZeRO shards over them (torchtitan's dp_shard_cp; not tp's or pp's,
 * which hold different parameters). */
#define MESH_DIMS_GRAD (MESH_DIMS_CP | MESH_BIT(MESH_DP))
/* The data-parallel replicas: a DAG holds one of them, and a backend may
 * fold the others by symmetry. */
#define MESH_DIMS_DP MESH_BIT(MESH_DP)
/* Every dimension. */
#define MESH_DIMS_ALL (MESH_BIT(MESH_NDIMS) - 1u)

typedef struct mesh {
    int degree[MESH_NDIMS];     /* by dimension; 1: absent */
    mesh_dim order[MESH_NDIMS]; /* fastest-varying first: a permutation of the dimensions */
} mesh;

/* "tp", "head", "seq", "pp", "dp". */
const char *mesh_dim_name(mesh_dim d);

/* Whether dimension d is on: its degree is more than 1. */
static inline bool mesh_on(const mesh *m, mesh_dim d) { return m->degree[d] > 1; }

/* The dimensions of `dims` that are on, slowest first in the seed order
 * (dp, pp, seq, head, tp), each written with fmt taking its name then its
 * degree ("%s%d*" gives "dp2*tp4*"), into buf (always terminated;
 * truncated at len). Nothing when none is on. */
void mesh_describe(const mesh *m, mesh_dims dims, const char *fmt, char *buf, size_t len);

/* A mesh of these degrees (by dimension) in the seed's order, tp, head,
 * seq, pp, dp. */
mesh mesh_make(const int degree[MESH_NDIMS]);

/* Set m's order from a string naming every dimension once, fastest first,
 * separated by '-' or ',' ("tp-head-seq-pp-dp"). Megatron-Core's names
 * are taken too: "cp" is head then seq, "ep" (expert parallelism, degree 1
 * here) is skipped, so its default "tp-cp-ep-dp-pp" reads. Returns 0, or
 * -1 with a message naming the unknown, repeated or missing dimension (m
 * unchanged). */
int mesh_set_order(mesh *m, const char *order, char err[LOONG_ERRLEN]);

/* The order as mesh_set_order reads it ("tp-head-seq-pp-dp"). */
void mesh_order_text(const mesh *m, char *buf, size_t len);

/* Degrees of at least 1 whose product fits an int, and an order that is a
 * permutation. Returns 0, or -1 with a message naming the problem. */
int mesh_validate(const mesh *m, char err[LOONG_ERRLEN]);

/* Ranks of the mesh: the product of the degrees. */
int mesh_size(const mesh *m);

/* How far apart ranks one step along d are: the product of the degrees of
 * the dimensions before d in the order (1 for the first). */
int mesh_stride(const mesh *m, mesh_dim d);

/* The coordinates of rank (by dimension), and the rank of coordinates. */
void mesh_coords(const mesh *m, int rank, int coord[MESH_NDIMS]);
int mesh_rank(const mesh *m, const int coord[MESH_NDIMS]);

/* The rank whose coordinate along d is rank's plus k (modulo the degree;
 * k may be negative) and whose other coordinates are rank's: the next
 * ring rank is mesh_shift(m, r, MESH_SEQ, 1). */
int mesh_shift(const mesh *m, int rank, mesh_dim d, int k);

/* ---- groups: the ranks that share every coordinate outside `dims` ---- */

/* Members of one group (the product of the degrees in dims), and groups. */
int mesh_group_size(const mesh *m, mesh_dims dims);
int mesh_group_count(const mesh *m, mesh_dims dims);
/* Which group rank is in, 0 .. count-1 (groups numbered by their smallest
 * rank's order), and its index inside, 0 .. size-1: the members are ordered
 * by their coordinates in dims, the first dimension of the mesh's order
 * fastest. */
int mesh_group_id(const mesh *m, mesh_dims dims, int rank);
int mesh_group_index(const mesh *m, mesh_dims dims, int rank);
/* The size members of group `id`, by index, into out. */
void mesh_group_members(const mesh *m, mesh_dims dims, int id, int *out);

/* Every way of writing n as a product of degrees of the dimensions dims[0
 * .. ndims-1] (each degree a divisor; the other dimensions 1), the first
 * dimension's degree slowest-growing, the last's the quotient left: for
 * n = 4 over (dp, head, seq), (1,1,4) (1,2,2) (1,4,1) (2,1,2) ... Writes
 * them to out (when not NULL) and returns how many there are. */
int mesh_factorisations(int n, const mesh_dim *dims, int ndims, int (*out)[MESH_NDIMS]);

/* ---- symmetry: ranks that run identical programs ----
 * A backend that simulates the dimensions `folded` by symmetry runs only
 * the ranks whose coordinates in them are 0 (the representatives, ordered
 * as the ranks of the mesh without those dimensions), and maps each of its
 * results back to every replica. */

/* The representative of rank: its coordinates in folded set to 0. */
int mesh_fold(const mesh *m, mesh_dims folded, int rank);
/* The rank of replica `replica` (0 .. group_size(folded)-1, the index in
 * its folded group) of representative rep. mesh_unfold(m, f,
 * mesh_fold(m, f, r), mesh_group_index(m, f, r)) == r. */
int mesh_unfold(const mesh *m, mesh_dims folded, int rep, int replica);

#endif
