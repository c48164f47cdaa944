/* dag_io: JSON and DOT writers. See dag_io.h. */
#include "dag_io.h"

#include <stdlib.h>

static void write_int_or_null(FILE *f, int64_t v)
{
    if (v < 0)
        fputs("null", f);
    else
        fprintf(f, "%lld", (long long)v);
}

static void write_task_json(FILE *f, const dag *g, const dag_task *t)
{
    fprintf(f,
            "{\"id\":%u,\"rank\":%d,\"stream\":\"%s\",\"kind\":\"%s\",\"flops\":%llu,\"bytes\":%llu,\"peer\":", t->id,
            t->rank, stream_name(t->stream), task_kind_name(t->kind), (unsigned long long)t->flops,
            (unsigned long long)t->bytes);
    write_int_or_null(f, t->peer);
    fputs(",\"group\":", f);
    if (t->group == DAG_NONE) {
        fputs("null", f);
    } else {
        int n;
        const int32_t *m = dag_group(g, t->group, &n);
        for (int k = 0; k < n; k++)
            fprintf(f, "%c%d", k ? ',' : '[', m[k]);
        fputc(']', f);
    }
    fprintf(f, ",\"layer\":%d,\"deps\":[", t->layer);
    const uint32_t *d = dag_deps(g, t);
    for (uint16_t k = 0; k < t->ndeps; k++)
        fprintf(f, "%s%u", k ? "," : "", d[k]);
    fprintf(f, "],\"op\":\"%s\",\"phase\":\"%s\",\"match\":", task_op_name(t->op), task_phase_name(t->phase));
    write_int_or_null(f, t->match == DAG_NONE ? -1 : (int64_t)t->match);
    fprintf(f, ",\"step\":%u,\"src\":", t->step);
    write_int_or_null(f, t->src);
    fprintf(f, ",\"dims\":[%u,%u,%u],\"sel\":%u,\"buf\":%u,\"buf2\":%u,\"flags\":%u", t->dim[0], t->dim[1], t->dim[2],
            t->sel, t->buf, t->buf2, t->flags);
    if (dag_config(g)->micro_batches > 1) fprintf(f, ",\"mb\":%u", t->mb); /* absent: one micro-batch, as before */
    fputc('}', f);
}

int dag_write_json(FILE *f, const dag *g)
{
    json_t *cfg = config_to_json(dag_config(g));
    char *cs = json_dumps(cfg, JSON_COMPACT);
    json_decref(cfg);
    if (!cs) return -1;
    fprintf(f, "{\"config\":%s,\n\"tasks\":[\n", cs);
    free(cs);
    for (uint32_t i = 0; i < dag_ntasks(g); i++) {
        write_task_json(f, g, dag_task_get(g, i));
        fputs(i + 1 < dag_ntasks(g) ? ",\n" : "\n", f);
    }
    fputs("]}\n", f);
    return ferror(f) ? -1 : 0;
}

int dag_write_dot(FILE *f, const dag *g)
{
    const config *c = dag_config(g);
    fputs("digraph loong {\n  rankdir=LR;\n  node [shape=box, fontsize=9];\n", f);
    char label[96];
    for (int r = 0; r < config_ranks(c); r++) {
        fprintf(f, "  subgraph cluster_r%d {\n    label=\"rank %d (node %d gpu %d)\";\n", r, r, config_node(c, r),
                config_gpu(c, r));
        for (int s = 0; s < STREAM_COUNT; s++) {
            uint32_t n;
            const uint32_t *ids = dag_stream_tasks(g, r, s, &n);
            for (uint32_t k = 0; k < n; k++) {
                dag_task_label(dag_task_get(g, ids[k]), label, sizeof label);
                fprintf(f, "    t%u [label=\"%u %s\\n%s\"];\n", ids[k], ids[k], label, stream_name(s));
                if (k) fprintf(f, "    t%u -> t%u;\n", ids[k - 1], ids[k]);
            }
        }
        fputs("  }\n", f);
    }
    for (uint32_t i = 0; i < dag_ntasks(g); i++) {
        const dag_task *t = dag_task_get(g, i);
        const uint32_t *d = dag_deps(g, t);
        for (uint16_t k = 0; k < t->ndeps; k++)
            fprintf(f, "  t%u -> t%u [color=blue];\n", d[k], i);
        if (t->kind == TASK_SEND) fprintf(f, "  t%u -> t%u [style=dashed, color=red];\n", i, t->match);
    }
    fputs("}\n", f);
    return ferror(f) ? -1 : 0;
}
