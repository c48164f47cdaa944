/* plan: enumerate, filter, score and rank layouts. See plan.h. */
#include "plan.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dag.h"
#include "core/docs.h"
#include "core/pipeline.h"
#include "core/recompute.h"
#include "core/stats.h"
#include "core/strategy.h"
#include "core/xalloc.h"

/* ---- enumeration ---- */

typedef struct vec {
    plan_layout *v;
    int n, cap;
} vec;

static plan_layout *vec_push(vec *a)
{
    if (a->n == a->cap) {
        a->cap = a->cap ? 2 * a->cap : 64;
        a->v = xrealloc_array(a->v, (size_t)a->cap, sizeof *a->v, "the plan's layouts");
    }
    plan_layout *l = &a->v[a->n++];
    memset(l, 0, sizeof *l);
    l->sim_step = -1;
    for (int k = 0; k < PLAN_PERT_COUNT; k++)
        l->robust[k] = -1;
    return l;
}

static void add_layout(vec *a, const plan_request *req, const config *c) { plan_layout_init(vec_push(a), req, c); }

/* Partition x ring mode x window for one (placement, replication) mesh. */
static void add_rings(vec *a, const plan_request *req, config c)
{
    if (c.p_seq == 1) {
        c.partition = PART_ZIGZAG;
        c.ring = RING_SINGLE;
        c.window = 1;
        add_layout(a, req, &c);
        return;
    }
    /* the packed-document partitions only differ from these with documents */
    static const partition_kind parts[] = {PART_CONTIGUOUS, PART_ZIGZAG, PART_DOC_CONTIGUOUS, PART_DOC_ZIGZAG,
                                           PART_BALANCED};
    int nparts = c.docs ? 5 : 2;
    for (int part = 0; part < nparts; part++) {
        c.partition = parts[part];
        c.ring = RING_SINGLE;
        c.window = c.p_seq;
        add_layout(a, req, &c);
        if (config_parts(&c) == 2) {
            c.ring = RING_DUAL;
            add_layout(a, req, &c);
        }
        c.ring = RING_ALLGATHER;
        add_layout(a, req, &c);
        c.ring = RING_DOUBLE; /* w = 1 (every step an outer one) is the single ring: left out */
        for (int w = 2; w < c.p_seq; w++)
            if (c.p_seq % w == 0) {
                c.window = w;
                add_layout(a, req, &c);
            }
    }
}

/* The layouts of one mesh at every ZeRO stage, recompute policy,
 * placement and KV replication (add_rings for each). */
static void add_knobs(vec *a, const plan_request *req, config c);

/* The micro-batches a layout of dp replicas runs for the request's global
 * batch: every schedule (pipeline.h) that applies at c.pp, one layout each;
 * a global batch that dp x batch does not divide removes the layout. */
static void add_pipeline(vec *a, const plan_request *req, config c)
{
    int per = c.dp * c.batch;
    c.micro_batches = req->global_batch ? (req->global_batch % per ? 1 : req->global_batch / per) : c.micro_batches;
    if (req->global_batch && req->global_batch % per) {
        plan_layout *l = vec_push(a);
        l->c = c;
        config_layout_name(&c, l->name, sizeof l->name);
        l->removed = true;
        snprintf(l->reason, sizeof l->reason,
                 "--global-batch %d samples do not split over dp %d x --batch %d: no whole number of micro-batches",
                 req->global_batch, c.dp, c.batch);
        return;
    }
    if (c.pp == 1 || !req->search_schedule) {
        if (c.pp == 1) c.schedule = SCHED_1F1B, c.vpp = 1;
        add_knobs(a, req, c);
        return;
    }
    c.schedule = SCHED_1F1B;
    c.vpp = 1;
    add_knobs(a, req, c);
    if (c.model.layers % (2 * c.pp) || c.micro_batches % c.pp) return; /* interleaving needs both */
    c.schedule = SCHED_INTERLEAVED;
    c.vpp = 2;
    add_knobs(a, req, c);
}

/* pp stages of L layers that do not split evenly: Llama 3 405B's way
 * (126 layers over 16 stages, 7 on the first and last, Dubey et al. 2024,
 * section 3.3.2), ceil(L/pp) on the middle stages and the rest halved
 * over the first and last, which also hold the embedding and the LM head.
 * Returns false when that leaves them fewer than one layer each. */
static bool uneven_split(int L, int pp, int *first, int *last)
{
    if (pp < 3) return false;
    int mid = (L + pp - 1) / pp, rest = L - (pp - 2) * mid;
    *first = rest / 2;
    *last = rest - *first;
    return *first >= 1;
}

/* A mixture of experts' EP degrees at one expert TP (build_ep.c's groups:
 * ep divides the experts and either divides the span, (tp / etp) P
 * ranks, or is the span times a divisor of dp, EP across replicas; a
 * given one that is neither is removed by config_validate, with its
 * reason). */
static void add_ep(vec *a, const plan_request *req, config c)
{
    int span = config_ep_span(&c), most = span * c.dp;
    for (int ep = 1; ep <= (req->ep > most ? req->ep : most); ep++) {
        bool grouped = span % ep == 0 || (ep % span == 0 && c.dp % (ep / span) == 0);
        if (req->ep ? ep != req->ep : !grouped || c.model.experts % ep) continue;
        c.ep = ep;
        add_pipeline(a, req, c);
    }
}

/* A mixture of experts: each expert TP the request takes, every divisor
 * of tp unless given (Megatron's --expert-tensor-parallel-size; at tp
 * itself the config leaves it unset, as before it was searched). */
static void add_experts(vec *a, const plan_request *req, config c)
{
    if (!config_moe(&c)) {
        add_pipeline(a, req, c);
        return;
    }
    for (int etp = 1; etp <= (req->etp > c.tp ? req->etp : c.tp); etp++) {
        if (req->etp ? etp != req->etp : c.tp % etp) continue;
        c.etp = etp == c.tp ? 0 : etp;
        add_ep(a, req, c);
    }
}

static void add_mesh(vec *a, const plan_request *req, const int degree[MESH_NDIMS])
{
    config c = req->base;
    c.p_head = degree[MESH_HEAD];
    c.p_seq = degree[MESH_SEQ];
    c.dp = degree[MESH_DP];
    c.tp = degree[MESH_TP];
    c.pp = degree[MESH_PP];
    if (c.model.layers % c.pp && !c.pp_first && !c.pp_last && !c.pp_embed_slot && !c.pp_loss_slot)
        uneven_split(c.model.layers, c.pp, &c.pp_first, &c.pp_last);
    add_experts(a, req, c);
}

/* The recompute policies the plan searches (recompute.h), NSEARCHED_RC of
 * them: none; Megatron's selective of core_attn, and of core_attn and mlp;
 * LoongTrain's Selective Checkpoint++; full, uniform over every block; and
 * full, block method over the first half of each chunk's blocks (between
 * none and full in memory and time). Sets policy i on c; false when it
 * repeats another (a chunk of one block has no half). */
#define NSEARCHED_RC 6
static bool searched_recompute(config *c, int i)
{
    static const recompute_kind kind[NSEARCHED_RC] = {RECOMPUTE_NONE, RECOMPUTE_SELECTIVE, RECOMPUTE_SELECTIVE,
                                                      RECOMPUTE_SCPP, RECOMPUTE_FULL,      RECOMPUTE_FULL};
    c->recompute = kind[i];
    c->recompute_modules = i == 2 ? RECOMPUTE_MOD_CORE_ATTN | RECOMPUTE_MOD_MLP : RECOMPUTE_MOD_CORE_ATTN;
    c->recompute_method = i == 5 ? RECOMPUTE_BLOCK : RECOMPUTE_UNIFORM;
    c->recompute_layers = i == 5 ? pipe_chunk_layers(c, 0) / 2 : 1;
    return c->recompute_layers >= 1;
}

static void add_knobs(vec *a, const plan_request *req, config c)
{
    if (c.tp == 1) { /* --sequence-parallel off and --tp-overlap apply to tp > 1 */
        c.sequence_parallel = true;
        c.tp_overlap = false;
    }
    int ph = c.p_head, ps = c.p_seq;
    c.scope = SCOPE_STEP;
    int nplace = ph > 1 && ps > 1 ? 2 : 1;
    int nrepl = c.model.kv_heads % c.tp == 0 && ph > c.model.kv_heads / c.tp ? 2 : 1;
    int z0 = req->search_zero ? 0 : c.zero, z1 = req->search_zero ? 3 : c.zero;
    if (req->search_zero && (c.pp > 1 || c.micro_batches > 1)) z1 = 1; /* ZeRO-2/3 accumulate nothing (config.c) */
    int nrc = req->search_recompute ? NSEARCHED_RC : 1;
    int prefetch = c.prefetch; /* --prefetch applies to the ZeRO-3 layouts */
    for (int z = z0; z <= z1; z++)
        for (int r = 0; r < nrc; r++)
            for (int pl = 0; pl < nplace; pl++)
                for (int rp = 0; rp < nrepl; rp++) {
                    c.zero = z;
                    c.prefetch = z == 3 ? prefetch : 1;
                    if (req->search_recompute && !searched_recompute(&c, r)) continue;
                    config_set_placement(&c, pl ? PLACE_CONTEXT_FIRST : PLACE_HEAD_FIRST);
                    c.kv_replication = rp == 0;
                    add_rings(a, req, c);
                }
}

/* Whether degree (one factorisation of the GPUs) is one the request
 * takes: each dimension at its fixed degree, or a searched one's degree
 * among those it can take (plan_request.degree). */
static bool request_takes(const plan_request *req, const int degree[MESH_NDIMS])
{
    int gpn = req->base.gpus_per_node, L = req->base.model.layers, first, last;
    for (int d = 0; d < MESH_NDIMS; d++) {
        int k = degree[d];
        if (req->degree[d] != PLAN_SEARCHED && k != req->degree[d]) return false;
        if (req->degree[d] != PLAN_SEARCHED) continue;
        /* TP stays inside a node (NVLink): tp among the divisors of its GPUs */
        if (d == MESH_TP && gpn % k) return false;
        /* stages of equal layers, or Llama 3's uneven split (uneven_split) */
        if (d == MESH_PP && L % k && !uneven_split(L, k, &first, &last)) return false;
    }
    return true;
}

plan_layout *plan_enumerate(const plan_request *req, int *n)
{
    vec a = {0};
    static const mesh_dim searched[] = {MESH_DP, MESH_PP, MESH_TP, MESH_HEAD, MESH_SEQ};
    int nf = mesh_factorisations(req->gpus, searched, 5, NULL);
    int(*f)[MESH_NDIMS] = xmalloc_array((size_t)nf, sizeof *f, "the plan's meshes");
    mesh_factorisations(req->gpus, searched, 5, f);
    for (int i = 0; i < nf; i++)
        if (request_takes(req, f[i])) add_mesh(&a, req, f[i]);
    free(f);
    *n = a.n;
    return a.v;
}

/* ---- scoring ---- */

double plan_mem_limit(const plan_request *req) { return req->gpu_mem * (1 - req->margin); }

bool plan_mem_fits(plan_layout *l, const plan_request *req)
{
    memory_estimate_config(&l->c, &l->mem);
    if (req->alloc_factor > 0)
        memory_reserve_factor(&l->mem, req->alloc_factor);
    else
        memory_reserve(&l->mem, req->allocator);
    return l->mem.reserved <= plan_mem_limit(req);
}

void plan_score(plan_layout *ls, int from, int to, const plan_request *req, const calib *cb, const platform_spec *net)
{
    for (int i = from; i < to; i++) {
        plan_layout *l = &ls[i];
        if (l->removed) continue;
        if (!plan_mem_fits(l, req)) {
            l->removed = true;
            snprintf(l->reason, sizeof l->reason,
                     "predicted OOM: reserved %.1f GB (allocated %.1f GB) over %.1f GB, %.1f GB per GPU less the %g %% "
                     "margin",
                     l->mem.reserved / 1e9, l->mem.peak / 1e9, plan_mem_limit(req) / 1e9, req->gpu_mem / 1e9,
                     100 * req->margin);
            continue;
        }
        analytic_step(&l->c, cb, net, &l->an);
        l->step_lo = l->step_hi = l->an.step;
    }
}

/* An all-to-all task's extra work units: PLAN_SIM_A2A_PEER_UNITS for each
 * other member of its group, every replica's it spans included (dag.h). */
static double a2a_units(const dag *g, const dag_task *t)
{
    int n, stride, count;
    dag_group(g, t->group, &n);
    dag_group_replicas(g, t->group, &stride, &count);
    return PLAN_SIM_A2A_PEER_UNITS * (double)(n * count - 1);
}

/* Tasks and work units of c with `per` layers in each stage chunk and `m`
 * micro-batches (NAN in both when it cannot be built). Every block keeps
 * the model's experts: a dense block (first_k_dense_replace's, which would
 * not fit in so few layers, or one between the expert blocks) has fewer
 * tasks, so the estimate errs high. */
static plan_sim_size size_of(const config *c, int per, int m, mesh_dims folded)
{
    config s = *c;
    s.model.layers = per * c->pp * c->vpp;
    s.model.dense_layers = s.model.moe_freq = s.model.moe_phase = 0;
    s.pp_first = s.pp_last = 0;
    s.pp_embed_slot = s.pp_loss_slot = false;
    s.micro_batches = m;
    recompute_clamp_layers(&s);
    char err[LOONG_ERRLEN];
    dag *g = config_validate(&s, err) == 0 ? dag_build_folded(&s, folded, err) : NULL;
    if (!g) return (plan_sim_size){NAN, NAN};
    plan_sim_size z = {dag_ntasks(g), dag_ntasks(g)};
    for (uint32_t i = 0; i < dag_ntasks(g); i++) {
        const dag_task *t = dag_task_get(g, i);
        if (t->kind == TASK_ALLTOALL) z.units += a2a_units(g, t);
    }
    dag_free(g);
    return z;
}

/* n(l, m) = a l m + b m + c l + d at l layers per chunk and m micro-batch
 * units beyond the first (n11 .. n22: at 1 or 2 layers, 1 or 2 units). */
static double bilinear(double n11, double n21, double n12, double n22, double l, double m)
{
    return n11 + l * (n21 - n11) + m * (n12 - n11) + l * m * (n22 - n21 - n12 + n11);
}

plan_sim_size plan_sim_estimate(const config *c, int layers, bool full_dp, mesh_dims folded)
{
    folded &= DAG_FOLDABLE; /* the replicas are never in a DAG */
    int m0 = c->schedule == SCHED_INTERLEAVED ? c->pp : 1, chunks = c->pp * c->vpp;
    bool mb = c->micro_batches > m0; /* else the micro-batch terms are not needed (and ZeRO-2/3 refuse them) */
    plan_sim_size n11 = size_of(c, 1, m0, folded), n21 = size_of(c, 2, m0, folded),
                  n12 = mb ? size_of(c, 1, 2 * m0, folded) : n11, n22 = mb ? size_of(c, 2, 2 * m0, folded) : n21;
    if (isnan(n11.tasks + n21.tasks + n12.tasks + n22.tasks)) return (plan_sim_size){INFINITY, INFINITY};
    double l = (double)(layers > 0 ? layers : c->model.layers) / chunks - 1, m = (double)c->micro_batches / m0 - 1;
    double reps = full_dp ? c->dp : 1;
    return (plan_sim_size){reps * bilinear(n11.tasks, n21.tasks, n12.tasks, n22.tasks, l, m),
                           reps * bilinear(n11.units, n21.units, n12.units, n22.units, l, m)};
}

double plan_task_estimate(const config *c, int layers, bool full_dp)
{
    return plan_sim_estimate(c, layers, full_dp, 0).tasks;
}

double plan_step(const plan_layout *l) { return l->sim_step >= 0 ? l->sim_step : l->an.step; }

/* Samples one step processes over all replicas: dp x m micro-batches x B. */
static double step_samples(const config *c) { return (double)c->dp * c->micro_batches * c->batch; }

double plan_per_sample(const plan_layout *l, double step) { return step * config_world(&l->c) / step_samples(&l->c); }

double plan_gpu_seconds(const plan_layout *l) { return plan_per_sample(l, plan_step(l)); }

bool plan_picked(const plan_layout *l) { return l->sim_step >= 0 || l->unsimulated[0]; }

const char *plan_by(const plan_layout *l) { return l->sim_step >= 0 ? "sim" : l->unsimulated[0] ? "model*" : "model"; }

static int by_rank(const void *x, const void *y, void *arg)
{
    int i = *(const int *)x, j = *(const int *)y;
    const plan_layout *ls = arg, *a = &ls[i], *b = &ls[j];
    bool sa = plan_picked(a), sb = plan_picked(b);
    if (sa != sb) return sa ? -1 : 1;
    double ta = plan_gpu_seconds(a), tb = plan_gpu_seconds(b);
    if (ta != tb) return ta < tb ? -1 : 1;
    return (i > j) - (i < j);
}

int plan_rank(const plan_layout *ls, int n, int *idx)
{
    int m = 0;
    for (int i = 0; i < n; i++)
        if (!ls[i].removed) idx[m++] = i;
    qsort_r(idx, (size_t)m, sizeof *idx, by_rank, (void *)ls);
    return m;
}

static int best_where(const plan_layout *ls, int n, bool ring)
{
    int best = -1;
    for (int i = 0; i < n; i++) {
        const config *c = &ls[i].c;
        if (ls[i].removed) continue;
        /* Megatron-CP packs documents in TransformerEngine's THD layout: doc-zigzag */
        partition_kind megatron = c->docs ? PART_DOC_ZIGZAG : PART_ZIGZAG;
        bool pure =
            ring ? c->p_head == 1 && c->p_seq > 1 && c->partition == megatron && c->ring == RING_SINGLE : c->p_seq == 1;
        if (pure && (best < 0 || plan_gpu_seconds(&ls[i]) < plan_gpu_seconds(&ls[best]))) best = i;
    }
    return best;
}

int plan_best_ring(const plan_layout *ls, int n) { return best_where(ls, n, true); }
int plan_best_ulysses(const plan_layout *ls, int n) { return best_where(ls, n, false); }
