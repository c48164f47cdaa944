/* config_describe: a configuration in one line, for table headers and
 * `loong plan`'s layout names. See config.h. */
#include "config.h"

#include <stdio.h>
#include <string.h>

void config_describe(const config *c, char *buf, size_t len)
{
    char seq[32];
    units_fmt_count(c->seq, seq, sizeof seq);
    char dp[192] = "", place[64];
    mesh m = config_mesh(c);
    static const mesh_dim outer[] = {MESH_DP, MESH_TP, MESH_PP}; /* the dimensions beside P_h x P_s */
    for (size_t i = 0; i < sizeof outer / sizeof *outer; i++) {
        mesh_dim d = outer[i];
        if (!mesh_on(&m, d)) continue;
        snprintf(dp + strlen(dp), sizeof dp - strlen(dp), " %s %d", mesh_dim_name(d), m.degree[d]);
        if (d == MESH_TP)
            snprintf(dp + strlen(dp), sizeof dp - strlen(dp), "%s%s", c->sequence_parallel ? " sp" : "",
                     c->tp_overlap ? " overlapped" : "");
        if (d == MESH_PP)
            snprintf(dp + strlen(dp), sizeof dp - strlen(dp), " %s%s", schedule_name(c->schedule),
                     c->vpp > 1 ? " v" : "");
    }
    if (c->vpp > 1) snprintf(dp + strlen(dp), sizeof dp - strlen(dp), "%d", c->vpp);
    if (c->micro_batches > 1) snprintf(dp + strlen(dp), sizeof dp - strlen(dp), " m %d", c->micro_batches);
    if (c->ep > 1) snprintf(dp + strlen(dp), sizeof dp - strlen(dp), " ep %d", c->ep);
    if (config_ep_spans_tp(c)) snprintf(dp + strlen(dp), sizeof dp - strlen(dp), " etp %d", config_etp(c));
    if (c->dispatcher == DISPATCH_ALLGATHER) snprintf(dp + strlen(dp), sizeof dp - strlen(dp), " allgather-dispatch");
    if (c->shared_overlap) snprintf(dp + strlen(dp), sizeof dp - strlen(dp), " shared-overlap");
    if (c->routing_zipf > 0) snprintf(dp + strlen(dp), sizeof dp - strlen(dp), " zipf:%g", c->routing_zipf);
    if (c->routing_hist) snprintf(dp + strlen(dp), sizeof dp - strlen(dp), " hist:%d", config_routing_hist_experts(c));
    config_placement_text(c, place, sizeof place);
    snprintf(buf, len, "%s S=%s B=%d mesh %dx%d%s %s (%s, %s, ring %s w=%d, kv-repl %s) scope %s, %d GPUs/node",
             c->model.name, seq, c->batch, c->p_head, c->p_seq, dp, c->strategy, place, partition_name(c->partition),
             ring_name(c->ring), c->window, c->kv_replication ? "on" : "off", scope_name(c->scope), c->gpus_per_node);
    size_t n = strlen(buf);
    if (c->docs && n < len)
        snprintf(buf + n, len - n, ", %d docs (%016llx)", docs_count(c->docs), (unsigned long long)docs_hash(c->docs));
}

void config_layout_name(const config *c, char *buf, size_t len)
{
    char dpx[48], ring[40];
    mesh m = config_mesh(c);
    mesh_describe(&m, MESH_DIMS_ALL & ~MESH_DIMS_CP, "%s%d*", dpx, sizeof dpx);           /* "dp2*pp2*tp2*" */
    if (c->ep > 1) snprintf(dpx + strlen(dpx), sizeof dpx - strlen(dpx), "ep%d*", c->ep); /* EP inside P: "ep4*" */
    if (config_ep_spans_tp(c)) snprintf(dpx + strlen(dpx), sizeof dpx - strlen(dpx), "etp%d*", config_etp(c));
    const char *part = partition_abbrev(c->partition);
    if (c->p_seq == 1)
        snprintf(ring, sizeof ring, "no ring");
    else if (c->ring == RING_DOUBLE)
        snprintf(ring, sizeof ring, "%s %s w=%d", part, ring_abbrev(c->ring), c->window);
    else
        snprintf(ring, sizeof ring, "%s %s", part, ring_abbrev(c->ring));
    char place[8] = "";
    if (c->p_head > 1 && c->p_seq > 1) snprintf(place, sizeof place, " %s", placement_abbrev(config_placement(c)));
    bool needs_repl = c->p_head > config_tp_kv_heads(c) || c->tp > c->model.kv_heads;
    const char *repl = needs_repl ? (c->kv_replication ? " kv-repl" : " no-repl") : "";
    const char *sp = c->tp == 1 ? "" : c->tp_overlap ? " tp-ovl" : c->sequence_parallel ? "" : " no-sp";
    snprintf(buf, len, "%s%dx%d%s %s%s%s", dpx, c->p_head, c->p_seq, place, ring, repl, sp);
}
