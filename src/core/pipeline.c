/* pipeline: stages, chunks and the schedules' order. See pipeline.h. */
#include "pipeline.h"

#include <stdlib.h>

#include "xalloc.h"

int pipe_nops(const config *c) { return 2 * c->micro_batches * c->vpp; }

int pipe_stage(const config *c, int rank)
{
    mesh m = config_mesh(c);
    int co[MESH_NDIMS];
    mesh_coords(&m, rank, co);
    return co[MESH_PP];
}

static bool uneven(const config *c) { return c->pp_first || c->pp_last; }

/* The layers of an uneven split's stages that the split does not name
 * (Megatron's "middle" stages), each. */
static int middle_layers(const config *c)
{
    int k = c->pp - (c->pp_first > 0) - (c->pp_last > 0);
    return k ? (c->model.layers - c->pp_first - c->pp_last) / k : 0;
}

/* Layers of the whole stage, over its v chunks. */
static int stage_layers(const config *c, int stage)
{
    if (!uneven(c)) return c->model.layers / c->pp;
    if (stage == 0 && c->pp_first) return c->pp_first;
    if (stage == c->pp - 1 && c->pp_last) return c->pp_last;
    return middle_layers(c);
}

/* With the embedding's or the loss's slot: the layers of a full chunk,
 * (L + slots) / (pp v). */
static bool slots(const config *c) { return c->pp_embed_slot || c->pp_loss_slot; }
static int slot_chunk(const config *c)
{
    return (c->model.layers + c->pp_embed_slot + c->pp_loss_slot) / (c->pp * c->vpp);
}

/* Each chunk of a stage holds 1/v of the stage's layers
 * (get_num_layers_to_build, megatron/core/transformer/transformer_block.py). */
int pipe_chunk_layers(const config *c, int stage) { return slots(c) ? slot_chunk(c) : stage_layers(c, stage) / c->vpp; }

/* get_num_layers_to_build: a slot takes one layer from virtual stage 0's
 * chunk (the embedding's) or the last one's (the loss's). */
int pipe_layers(const config *c, int stage, int chunk)
{
    return pipe_chunk_layers(c, stage) - (c->pp_embed_slot && pipe_is_first(c, stage, chunk)) -
           (c->pp_loss_slot && pipe_is_last(c, stage, chunk));
}

int pipe_stage_layers(const config *c, int stage)
{
    int n = 0;
    for (int j = 0; j < c->vpp; j++)
        n += pipe_layers(c, stage, j);
    return n;
}

/* get_transformer_layer_offset with the slots: chunk j of stage s starts
 * at j (L + slots)/v + s (L + slots)/(pp v), less the embedding's slot
 * after virtual stage 0. */
static int slot_first_layer(const config *c, int stage, int chunk)
{
    int n = slot_chunk(c), u = chunk * c->pp + stage;
    return u * n - (c->pp_embed_slot && u > 0);
}

/* get_transformer_layer_offset (megatron/core/transformer/
 * transformer_layer.py): chunk j of every stage comes after chunks
 * 0 .. j-1 of all stages, L/v layers a round; within round j the stages
 * run in order, first (pp_first/v), the middle ones (middle/v each), the
 * last. With an even split this is (j pp + s) L/(pp v). */
int pipe_first_layer(const config *c, int stage, int chunk)
{
    if (slots(c)) return slot_first_layer(c, stage, chunk);
    int round = chunk * (c->model.layers / c->vpp);
    if (stage == 0) return round;
    int middle_rank = stage - (c->pp_first > 0); /* the stages before this one that hold middle/v each */
    int middle = (uneven(c) ? middle_layers(c) : c->model.layers / c->pp) / c->vpp;
    return round + c->pp_first / c->vpp + middle_rank * middle;
}

bool pipe_is_first(const config *c, int stage, int chunk)
{
    (void)c;
    return stage == 0 && chunk == 0;
}

bool pipe_is_last(const config *c, int stage, int chunk) { return stage == c->pp - 1 && chunk == c->vpp - 1; }

bool pipe_holds(const config *c, int stage, int l)
{
    if (c->pp == 1) return true;
    if (l == c->model.layers) return stage == 0 || stage == c->pp - 1;
    for (int j = 0; j < c->vpp; j++) {
        int first = pipe_first_layer(c, stage, j);
        if (l >= first && l < first + pipe_layers(c, stage, j)) return true;
    }
    return false;
}

uint64_t pipe_head_params(const config *c, int stage)
{
    uint64_t emb = model_embed_params_tp(&c->model, c->tp);
    if (c->pp == 1) return model_head_params_tp(&c->model, c->tp);
    /* the LM head and final norm on the last stage; tied, Megatron keeps
     * the embedding's copy there (its embedding group all-reduces the two) */
    return stage == 0 ? emb : stage == c->pp - 1 ? emb + (uint64_t)c->model.hidden : 0;
}

uint64_t pipe_stage_block_params(const config *c, int stage)
{
    if (c->model.dense_layers == 0 && !model_moe_interleaved(&c->model)) /* every block alike */
        return (uint64_t)pipe_stage_layers(c, stage) * model_layer_params_tp(&c->model, c->tp);
    uint64_t n = 0;
    for (int l = 0; l < c->model.layers; l++)
        n += pipe_holds(c, stage, l) ? model_block_params_tp(&c->model, c->tp, l) : 0;
    return n;
}

uint64_t pipe_stage_params(const config *c, int stage)
{
    return pipe_stage_block_params(c, stage) + pipe_head_params(c, stage);
}

int pipe_stage_moe_blocks(const config *c, int stage)
{
    int n = 0;
    for (int l = c->model.dense_layers; model_moe(&c->model) && l < c->model.layers; l++)
        n += model_block_moe(&c->model, l) && pipe_holds(c, stage, l);
    return n;
}

/* Megatron's virtual micro-batch k of the interleaved schedule. */
static pipe_op interleaved_op(const config *c, int k, bool bwd)
{
    int group = c->pp * c->vpp, chunk = k % group / c->pp;
    pipe_op op = {bwd, bwd ? c->vpp - 1 - chunk : chunk, k / group * c->pp + k % c->pp};
    return op;
}

/* Warm-up forwards of stage: the passes before its first backward. */
static int warmup(const config *c, int stage, int total)
{
    int w;
    if (c->schedule == SCHED_GPIPE) return total;
    if (c->schedule == SCHED_INTERLEAVED) {
        if (c->micro_batches == c->pp) return total; /* Megatron's all_warmup_microbatches */
        w = (c->pp - stage - 1) * 2 + (c->vpp - 1) * c->pp;
    } else {
        w = c->pp - stage - 1;
    }
    return w < total ? w : total;
}

static pipe_op op_at(const config *c, int k, bool bwd)
{
    if (c->schedule == SCHED_INTERLEAVED) return interleaved_op(c, k, bwd);
    pipe_op op = {bwd, 0, k};
    return op;
}

void pipe_ops(const config *c, int stage, pipe_op *out)
{
    int total = c->micro_batches * c->vpp, w = warmup(c, stage, total), n = 0;
    for (int k = 0; k < w; k++)
        out[n++] = op_at(c, k, false);
    for (int k = 0; k < total - w; k++) { /* steady state: one forward, one backward */
        out[n++] = op_at(c, w + k, false);
        out[n++] = op_at(c, k, true);
    }
    for (int k = total - w; k < total; k++)
        out[n++] = op_at(c, k, true);
}

/* The most of stage's forward passes alive at once, each weighing 1 or
 * (by_layers) its chunk's layers. */
static int peak_alive(const config *c, int stage, bool by_layers)
{
    int n = pipe_nops(c), live = 0, peak = 0;
    pipe_op *v = xmalloc_array((size_t)n, sizeof *v, "a pipeline schedule");
    pipe_ops(c, stage, v);
    for (int i = 0; i < n; i++) {
        int w = by_layers ? pipe_layers(c, stage, v[i].chunk) : 1;
        live += v[i].bwd ? -w : w;
        if (live > peak) peak = live;
    }
    free(v);
    return peak;
}

int pipe_peak_in_flight(const config *c, int stage) { return peak_alive(c, stage, false); }

int pipe_peak_layers_in_flight(const config *c, int stage) { return peak_alive(c, stage, true); }

void pipe_mb_lattice(const config *c, int *first, int *stride)
{
    *first = c->pp;
    *stride = c->pp > 1 && c->schedule == SCHED_INTERLEAVED ? c->pp : 1;
}

int pipe_mb_search_cost(const config *c)
{
    int first, stride;
    pipe_mb_lattice(c, &first, &stride);
    return 4 * first + 7 * stride; /* first + (first + s) + (first + 2 s) + (first + 4 s) */
}
