/* placement: rank -> node, GPU and NIC (placement.h). */
#include "placement.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "xalloc.h"

placement placement_make(int gpus_per_node, int nics_per_node, int nodes)
{
    return (placement){.nodes = nodes, .gpus_per_node = gpus_per_node, .nics_per_node = nics_per_node};
}

int placement_validate(const placement *p, char err[LOONG_ERRLEN])
{
    const char *bad = NULL;
    if (p->gpus_per_node < 1)
        bad = "a node needs at least one GPU";
    else if (p->nics_per_node < 1 || p->gpus_per_node % p->nics_per_node)
        bad = "the NICs of a node must divide its GPUs (each NIC serves the same number of GPUs)";
    else if (p->nodes < 0)
        bad = "the node count must be at least 0 (0: unbounded)";
    else if ((long long)p->nodes * p->gpus_per_node > INT_MAX)
        bad = "nodes x GPUs per node does not fit an int";
    if (!bad) return 0;
    snprintf(err, LOONG_ERRLEN, "placement of %d nodes of %d GPUs and %d NICs: %s", p->nodes, p->gpus_per_node,
             p->nics_per_node, bad);
    return -1;
}

int placement_gpus(const placement *p) { return p->nodes * p->gpus_per_node; }

int placement_node(const placement *p, int rank) { return rank / p->gpus_per_node; }

int placement_gpu(const placement *p, int rank) { return rank % p->gpus_per_node; }

int placement_nic(const placement *p, int rank)
{
    return placement_gpu(p, rank) / (p->gpus_per_node / p->nics_per_node);
}

int placement_rank(const placement *p, int node, int gpu) { return node * p->gpus_per_node + gpu; }

bool placement_same_domain(const placement *p, int a, int b) { return placement_node(p, a) == placement_node(p, b); }

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int placement_group_nodes(const placement *p, const int *ranks, int n)
{
    /* Groups are usually sorted (mesh groups, NCCL's ring order): one pass
     * counts the node changes; only an unsorted group pays for a sort. */
    bool sorted = true;
    for (int i = 1; i < n && sorted; i++)
        sorted = ranks[i - 1] <= ranks[i];
    if (sorted) {
        int nodes = 0;
        for (int i = 0; i < n; i++)
            nodes += i == 0 || placement_node(p, ranks[i]) != placement_node(p, ranks[i - 1]);
        return nodes;
    }
    int *node = xmalloc_array((size_t)n, sizeof *node, "a group's nodes");
    for (int i = 0; i < n; i++)
        node[i] = placement_node(p, ranks[i]);
    qsort(node, (size_t)n, sizeof *node, cmp_int);
    int nodes = 0;
    for (int i = 0; i < n; i++)
        nodes += i == 0 || node[i] != node[i - 1];
    free(node);
    return nodes;
}

int placement_strided_nodes(const placement *p, int start, int stride, int n)
{
    /* start + i x stride may pass INT_MAX (a trace's arguments): the node
     * is taken in long long, node-major as placement_node takes it. */
    int nodes = 0;
    long long last = -1;
    for (int i = 0; i < n; i++) {
        long long node = ((long long)start + (long long)i * stride) / p->gpus_per_node;
        if (node != last) nodes++, last = node;
    }
    return nodes;
}
