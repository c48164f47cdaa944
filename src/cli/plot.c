/* plot: gnuplot driven through a pipe; data and script go to temporary
 * files, the PNG to a temporary beside the target, renamed on success. */
#include "plot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/xalloc.h"

static int have_gnuplot(char err[LOONG_ERRLEN])
{
    if (system("command -v gnuplot >/dev/null 2>&1") == 0) return 0;
    snprintf(err, LOONG_ERRLEN, "gnuplot not found: install the Debian package gnuplot-nox to draw PNG charts");
    return -1;
}

/* Run the script in `script` (a file) and move png.tmp onto png. */
static int run_gnuplot(const char *script, const char *png, char err[LOONG_ERRLEN])
{
    char cmd[4096], tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", png);
    snprintf(cmd, sizeof cmd, "gnuplot '%s' 2>&1", script);
    FILE *p = popen(cmd, "r");
    char line[512] = "";
    if (p)
        while (fgets(line, sizeof line, p)) {
        }
    int st = p ? pclose(p) : -1;
    if (st != 0 || rename(tmp, png) != 0) {
        unlink(tmp);
        line[strcspn(line, "\n")] = '\0';
        snprintf(err, LOONG_ERRLEN, "gnuplot could not draw '%s': %.150s", png, line[0] ? line : "failed");
        return -1;
    }
    return 0;
}

static FILE *temp_file(char *path, size_t len, const char *tag)
{
    snprintf(path, len, "/tmp/loong-%s-XXXXXX", tag);
    int fd = mkstemp(path);
    return fd < 0 ? NULL : fdopen(fd, "w");
}

/* gnuplot's data and script temporaries, /tmp/loong-TAG-data-* and
 * /tmp/loong-TAG-gp-*: both, or neither and err says so. */
static int open_temps(const char *tag, char dpath[64], char spath[64], FILE **d, FILE **s, char err[LOONG_ERRLEN])
{
    char dt[32], st[32];
    snprintf(dt, sizeof dt, "%s-data", tag);
    snprintf(st, sizeof st, "%s-gp", tag);
    *d = temp_file(dpath, 64, dt);
    *s = temp_file(spath, 64, st);
    if (*d && *s) return 0;
    if (*d) fclose(*d), unlink(dpath);
    if (*s) fclose(*s), unlink(spath);
    snprintf(err, LOONG_ERRLEN, "cannot create temporary files for gnuplot");
    return -1;
}

/* Rows: (rank, stream) pairs with tasks, in order. */
static int row_of(const dag *g, int rank, int stream, int *rows)
{
    (void)g;
    return rows[rank * STREAM_COUNT + stream];
}

int plot_gantt(const char *png, const dag *g, const trace *const *traces, const char *const *titles, int n,
               char err[LOONG_ERRLEN])
{
    if (have_gnuplot(err) < 0) return -1;
    int ranks = config_ranks(dag_config(g)), nrows = 0;
    int *rows = xmalloc_array((size_t)ranks * STREAM_COUNT, sizeof *rows, "the Gantt rows");
    char dpath[64], spath[64];
    FILE *d, *s;
    if (open_temps("gantt", dpath, spath, &d, &s, err) < 0) {
        free(rows);
        return -1;
    }
    for (int r = 0; r < ranks; r++)
        for (int st = 0; st < STREAM_COUNT; st++) {
            uint32_t k;
            dag_stream_tasks(g, r, st, &k);
            rows[r * STREAM_COUNT + st] = k ? nrows++ : -1;
        }
    double xmax = 0, tmax[8] = {0};
    for (int t = 0; t < n && t < 8; t++) {
        tmax[t] = trace_makespan(traces[t]) / 1e3;
        if (tmax[t] > xmax) xmax = tmax[t];
    }
    for (int t = 0; t < n; t++) {
        for (size_t i = 0; i < traces[t]->n; i++) {
            const trace_ev *e = &traces[t]->ev[i];
            fprintf(d, "%d %.6f %.6f %d\n", row_of(g, e->rank, e->stream, rows), e->ts / 1e3, (e->ts + e->dur) / 1e3,
                    e->kind + 1);
        }
        fprintf(d, "\n\n");
    }
    fclose(d);
    int height = 120 + n * (60 + 14 * nrows);
    fprintf(s, "set terminal pngcairo size 1400,%d font ',9'\nset output '%s.tmp'\n", height > 4000 ? 4000 : height,
            png);
    fprintf(
        s,
        "set multiplot layout %d,1\nset xlabel 'time (ms)'\nset ylabel 'rank / stream'\nset yrange [-1:%d] reverse\n"
        "set key outside right\nset style fill solid 0.9 noborder\nset termoption noenhanced\n",
        n, nrows);
    fprintf(s, "set ytics (");
    for (int r = 0, first = 1; r < ranks; r++)
        for (int st = 0; st < STREAM_COUNT; st++)
            if (rows[r * STREAM_COUNT + st] >= 0 && (nrows <= 48 || st == STREAM_COMP)) {
                fprintf(s, "%s'r%d %s' %d", first ? "" : ", ", r, stream_name(st), rows[r * STREAM_COUNT + st]);
                first = 0;
            }
    fprintf(s, ")\n");
    for (int k = 0; k < TASK_KIND_COUNT; k++)
        fprintf(s, "set linetype %d lc rgb '%s'\n", k + 1,
                (const char *[TASK_KIND_COUNT]){"#1f77b4", "#d62728", "#ff7f0e", "#9467bd", "#8c564b",
                                                "#aec7e8", "#ffbb78", "#c5b0d5", "#c49c94", "#f7b6d2",
                                                "#dbdb8d", "#9edae5", "#ff9896", "#c7c7c7", "#2ca02c",
                                                "#98df8a", "#17becf", "#e377c2", "#bcbd22", "#7f7f7f"}[k]);
    for (int t = 0; t < n; t++) {
        /* one time axis when the makespans are comparable, else each its own */
        double x = t < 8 && tmax[t] * 3 < xmax ? tmax[t] : xmax;
        fprintf(s, "set xrange [0:%g]\n", x > 0 ? x * 1.01 : 1);
        fprintf(s,
                "set title '%s%s'\nplot '%s' index %d using (($2+$3)/2):1:(($3-$2)/2):(0.4):4 with boxxyerror lc "
                "variable notitle",
                titles[t], x < xmax ? " (own time axis)" : "", dpath, t);
        for (int k = 0; k < TASK_KIND_COUNT; k++)
            fprintf(s, ", keyentry with boxes lt %d title '%s'", k + 1, task_kind_name(k));
        fprintf(s, "\n");
    }
    fprintf(s, "unset multiplot\n");
    fclose(s);
    int rc = run_gnuplot(spath, png, err);
    unlink(dpath);
    unlink(spath);
    free(rows);
    return rc;
}

int plot_error_bars(const char *png, const cmp_summary *sm, cmp_by by, char err[LOONG_ERRLEN])
{
    if (have_gnuplot(err) < 0) return -1;
    char dpath[64], spath[64];
    FILE *d, *s;
    if (open_temps("err", dpath, spath, &d, &s, err) < 0) return -1;
    for (int k = 0; k < sm->ngroups; k++) {
        const cmp_group *gr = &sm->groups[k];
        if (by == CMP_BY_KIND)
            fprintf(d, "%s %.4f %.4f\n", task_kind_name(gr->key), gr->median_ape, gr->mean_ape);
        else
            fprintf(d, "%d %.4f %.4f\n", gr->key, gr->median_ape, gr->mean_ape);
    }
    fclose(d);
    static const char *by_names[] = {"task kind", "rank", "layer"};
    fprintf(s,
            "set terminal pngcairo size 1000,500 font ',10'\nset output '%s.tmp'\nset style data histograms\n"
            "set style histogram clustered gap 1\nset style fill solid 0.85 border -1\nset ylabel 'absolute error of "
            "task durations (%%)'\n"
            "set xlabel '%s'\nset title 'prediction vs measurement: step time error %+.2f %%'\nset xtics rotate by "
            "-30\nset yrange [0:*]\nset termoption noenhanced\n" /* kind names hold '_': no subscripts */
            "plot '%s' using 2:xtic(1) title 'median', '' using 3 title 'mean'\n",
            png, by_names[by], sm->step_err_pct, dpath);
    fclose(s);
    int rc = run_gnuplot(spath, png, err);
    unlink(dpath);
    unlink(spath);
    return rc;
}

int plot_pair_bars(const char *png, const char *const *names, const double *pred_ms, const double *meas_ms, int n,
                   const char *title, char err[LOONG_ERRLEN])
{
    if (have_gnuplot(err) < 0) return -1;
    char dpath[64], spath[64];
    FILE *d, *s;
    if (open_temps("bars", dpath, spath, &d, &s, err) < 0) return -1;
    for (int k = 0; k < n; k++)
        fprintf(d, "%s %.6f %.6f\n", names[k], pred_ms[k], meas_ms[k]);
    fclose(d);
    fprintf(s,
            "set terminal pngcairo size 1000,500 font ',10'\nset output '%s.tmp'\nset style data histograms\n"
            "set style histogram clustered gap 1\nset style fill solid 0.85 border -1\nset ylabel 'time per rank "
            "and step (ms)'\nset title '%s'\nset xtics rotate by -30\nset yrange [0:*]\nset termoption noenhanced\n"
            "plot '%s' using 2:xtic(1) title 'predicted', '' using 3 title 'measured'\n",
            png, title, dpath);
    fclose(s);
    int rc = run_gnuplot(spath, png, err);
    unlink(dpath);
    unlink(spath);
    return rc;
}

/* A layout's family for the plan's colours: its strategy. */
static int family_of(const char *strategy, const char **names, int *n)
{
    for (int i = 0; i < *n; i++)
        if (!strcmp(names[i], strategy)) return i;
    names[*n] = strategy;
    return (*n)++;
}

int plot_plan(const char *png, const plan_layout *ls, int n, int pick, double gpu_mem, double peak,
              char err[LOONG_ERRLEN])
{
    if (have_gnuplot(err) < 0) return -1;
    char dpath[64], spath[64];
    FILE *d, *s;
    if (open_temps("plan", dpath, spath, &d, &s, err) < 0) return -1;
    const char *fam[16];
    int nfam = 0, points = 0;
    for (int sim = 1; sim >= 0; sim--) { /* index 0: simulated, 1: analytical */
        for (int i = 0; i < n; i++) {
            const plan_layout *l = &ls[i];
            if (l->removed || (l->sim_step >= 0) != sim) continue;
            const config *c = &l->c;
            double step = plan_step(l), tps = config_step_tokens(c) / (step * config_ranks(c));
            int f = nfam < 16 ? family_of(c->strategy, fam, &nfam) : 15;
            fprintf(d, "%.6f %.6f %d\n", l->mem.peak / 1e9, tps, f + 1);
            points++;
        }
        fprintf(d, "\n\n");
    }
    const plan_layout *p = &ls[pick];
    double step = plan_step(p), tps = config_step_tokens(&p->c) / (step * config_ranks(&p->c));
    fprintf(d, "%.6f %.6f\n\n\n", p->mem.peak / 1e9, tps); /* index 2: the pick */
    /* index 3: the pick's split, the analytical model's shares of its step */
    const analytic_result *a = &p->an;
    double scale = a->step > 0 ? step / a->step : 1, other = a->exposed - a->a2a - a->ring_wait - a->dp_tail;
    const char *part[] = {"compute", "all-to-all", "ring wait", "data-parallel tail", "other exposed"};
    double val[] = {a->busy, a->a2a, a->ring_wait, a->dp_tail, other > 0 ? other : 0};
    for (int k = 0; k < 5; k++)
        fprintf(d, "\"%s\" %.6f\n", part[k], val[k] * scale);
    fclose(d);
    fprintf(s,
            "set terminal pngcairo size 1500,600 font ',10'\nset output '%s.tmp'\nset termoption noenhanced\n"
            "set multiplot layout 1,2\nset key outside bottom center horizontal\nset grid\n"
            "set xlabel 'peak memory per GPU (GB)'\nset ylabel 'tokens/s/GPU'\n"
            "set title 'every feasible layout: filled simulated, open analytical (%.0f TFLOP/s peak)'\n"
            "set arrow 1 from %.3f, graph 0 to %.3f, graph 1 nohead lc rgb 'red' dt 2\n"
            "set label 1 'GPU memory %.1f GB' at %.3f, graph 0.95 right tc rgb 'red' offset -0.5,0\n",
            png, peak / 1e12, gpu_mem / 1e9, gpu_mem / 1e9, gpu_mem / 1e9, gpu_mem / 1e9);
    fprintf(s, "set label 2 'pick: %s' at %.3f, %.3f offset 1.5,-0.8\n", p->name, p->mem.peak / 1e9, tps);
    fprintf(s, "set xrange [0:%.3f]\nplot ", gpu_mem / 1e9 * 1.05);
    for (int f = 0; f < nfam; f++)
        fprintf(s,
                "'%s' index 0 using 1:($3==%d?$2:1/0) with points pt 7 ps 1.2 lc %d title '%s', "
                "'%s' index 1 using 1:($3==%d?$2:1/0) with points pt 6 ps 1 lc %d notitle, ",
                dpath, f + 1, f + 1, fam[f], dpath, f + 1, f + 1);
    fprintf(s, "'%s' index 2 using 1:2 with points pt 3 ps 3 lw 2 lc rgb 'black' title 'pick'\n", dpath);
    fprintf(s,
            "unset arrow 1\nunset label 1\nunset label 2\nset autoscale x\nunset xrange\nset style data histograms\n"
            "set style fill solid 0.85 border -1\nset xlabel ''\nset ylabel 'seconds of the step'\nset yrange [0:*]\n"
            "set title 'the pick, %s: its %.3f s step (the analytical split, scaled)'\nset xtics rotate by -20\n"
            "plot '%s' index 3 using 2:xtic(1) notitle lc rgb '#1f77b4'\nunset multiplot\n",
            p->name, step, dpath);
    fclose(s);
    int rc = run_gnuplot(spath, png, err);
    unlink(dpath);
    unlink(spath);
    return rc < 0 ? -1 : points;
}
