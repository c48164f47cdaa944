/* config_tp: tensor parallelism's geometry, Megatron's (Shoeybi et al.
 * 2019; Korthikanti et al. 2022 for sequence parallelism): which TP rank a
 * rank is, where its group runs, and what one shard of each layer holds.
 * Every walker asks here for a shard's width instead of dividing by tp. See
 * config.h, "tensor parallelism". */
#include "config.h"

#include <stdlib.h>

#include "xalloc.h"

int config_tp_rank(const config *c, int rank)
{
    mesh m = config_mesh(c);
    int co[MESH_NDIMS];
    mesh_coords(&m, rank, co);
    return co[MESH_TP];
}

int config_tp_nodes(const config *c)
{
    mesh m = config_mesh(c);
    int n = mesh_group_size(&m, CONFIG_TP_DIMS), *mem = xmalloc_array((size_t)n, sizeof *mem, "the TP group");
    mesh_group_members(&m, CONFIG_TP_DIMS, 0, mem);
    for (int i = 0; i < n; i++)
        mem[i] = config_gpu_of(c, mem[i]);
    placement pl = config_hw_placement(c);
    int nodes = placement_group_nodes(&pl, mem, n);
    free(mem);
    return nodes;
}

int config_tp_heads(const config *c) { return c->model.heads / c->tp; }
int config_tp_kv_heads(const config *c) { return model_tp_kv_heads(&c->model, c->tp); }
int config_tp_kv_repl(const config *c) { return c->tp > c->model.kv_heads ? c->tp / c->model.kv_heads : 1; }
int config_tp_kv_head0(const config *c, int t) { return (int)((int64_t)t * c->model.kv_heads / c->tp); }

bool config_sp(const config *c) { return c->tp > 1 && c->sequence_parallel; }

uint64_t config_sp_rows(const config *c, uint64_t T) { return config_sp(c) ? T / (uint64_t)c->tp : T; }

uint64_t config_tp_ffn(const config *c) { return (uint64_t)c->model.ffn / (uint64_t)c->tp; }

uint64_t config_tp_attn_width(const config *c)
{
    return (uint64_t)c->model.heads * (uint64_t)model_v_dim(&c->model) / (uint64_t)c->tp;
}

uint64_t config_tp_vocab(const config *c) { return ((uint64_t)c->model.vocab + (uint64_t)c->tp - 1) / (uint64_t)c->tp; }
