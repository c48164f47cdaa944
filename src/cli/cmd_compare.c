/* loong compare: a predicted trace against a measured one, task by task. */
#include <math.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/compare.h"
#include "core/afile.h"
#include "cli.h"
#include "cli_opts.h"
#include "plot.h"

static void compare_usage(FILE *f)
{
    fprintf(f, "usage: loong compare PREDICTED.json MEASURED.json [--by kind|rank|layer] [--top N]\n"
               "                     [--plot GANTT.png] [--error-plot ERRORS.png] [--max-error PCT]\n"
               "       loong compare --kineto TRACE|DIR ... (--predicted PRED.json | --platform FILE ...)\n"
               "                     PyTorch profiler traces: see loong compare --kineto --help\n"
               "\n"
               "Match the tasks of two traces of the same configuration by id (typically\n"
               "loong sim's and loong exec's) and print, with units: the step time of both\n"
               "and the signed error; per group (task kind by default) the count and the\n"
               "median and mean absolute percentage error of task durations; each rank's\n"
               "makespan error; exposed communication of both; the N tasks with the largest\n"
               "absolute error. Exits 0 and leaves judging to you, unless --max-error is\n"
               "given: then exits 1 when |step time error| exceeds PCT percent.\n"
               "\n"
               "  --by G            group the error table by kind, rank or layer      [kind]\n"
               "  --top N           how many worst tasks to list                        [10]\n"
               "  --plot FILE       predicted and measured Gantt charts, stacked (PNG, gnuplot)\n"
               "  --error-plot FILE bars of the error per group (PNG, gnuplot)\n"
               "  --max-error PCT   exit 1 above this step-time error\n"
               "  -h, --help        this text\n");
}

typedef struct cmp_cli {
    const char *plot, *error_plot;
    cmp_by by;
    int top;
    double max_error;
} cmp_cli;

static int parse(int argc, char **argv, cmp_cli *o)
{
    static const struct option opts[] = {
        {"by", required_argument, 0, 'b'},
        {"top", required_argument, 0, 't'},
        {"plot", required_argument, 0, 'p'},
        {"error-plot", required_argument, 0, 'e'},
        {"max-error", required_argument, 0, 'm'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    int opt;
    char *end;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (opt) {
        case 'b':
            if (!strcmp(optarg, "kind"))
                o->by = CMP_BY_KIND;
            else if (!strcmp(optarg, "rank"))
                o->by = CMP_BY_RANK;
            else if (!strcmp(optarg, "layer"))
                o->by = CMP_BY_LAYER;
            else
                return cli_fail("compare", "--by '%s' is not one of: kind, rank, layer", optarg);
            break;
        case 't':
            if (cli_opt_count("compare", "--top", optarg, false, INT_MAX, &o->top)) return 2;
            break;
        case 'p': o->plot = optarg; break;
        case 'e': o->error_plot = optarg; break;
        case 'm':
            o->max_error = strtod(optarg, &end);
            if (*end || end == optarg || !(o->max_error >= 0))
                return cli_fail("compare", "--max-error '%s' is not a non-negative percentage", optarg);
            break;
        case 'h':
        default: return cli_opt_tail("compare", "loong compare", opt, argv, compare_usage, -1);
        }
    }
    if (argc - optind != 2) return cli_fail("compare", "give two traces: loong compare PREDICTED.json MEASURED.json");
    return 0;
}

/* Both traces against the DAG of their (equal) configuration. */
static int check_both(const trace *p, const char *pn, const trace *m, const char *mn, const dag *g,
                      char err[LOONG_ERRLEN])
{
    const trace *t[2] = {p, m};
    const char *name[2] = {pn, mn};
    for (int i = 0; i < 2; i++)
        if (trace_check_dag(t[i], g, err) < 0) {
            char pre[300];
            snprintf(pre, sizeof pre, "%.280s: ", name[i]);
            loong_err_prefix(err, pre);
            return -1;
        }
    return 0;
}

int cmd_compare(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--kineto")) return cmd_compare_kineto(argc, argv);
    cmp_cli o = {NULL, NULL, CMP_BY_KIND, 10, -1};
    int rc = parse(argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;
    const char *pn = argv[optind], *mn = argv[optind + 1];
    char err[LOONG_ERRLEN];
    if ((o.plot && afile_check(o.plot, err) < 0) || (o.error_plot && afile_check(o.error_plot, err) < 0))
        return cli_fail("compare", "%s", err);
    trace p, m;
    if (trace_read(pn, &p, err) < 0) return cli_fail("compare", "%s", err);
    if (trace_read(mn, &m, err) < 0) {
        trace_free(&p);
        return cli_fail("compare", "%s", err);
    }
    /* an executor's trace leaves out the kernels it does not run: so must
     * the prediction it is held against (its step still includes them) */
    if (!strncmp(m.backend, "exec-", 5) && strncmp(p.backend, "exec-", 5)) {
        double busy_us;
        size_t gone = trace_drop_kinds(&p, TRACE_EXEC_SKIPS, &busy_us);
        if (gone)
            printf("# %s runs no elementwise kernels: %zu predicted ones (%.3f ms, all ranks) left out of the "
                   "matching; the predicted step still includes them\n",
                   m.backend, gone, busy_us / 1e3);
    }
    dag *g = NULL;
    if (compare_check(&p, pn, &m, mn, err) < 0 || !(g = dag_build(&p.cfg, err)) ||
        check_both(&p, pn, &m, mn, g, err) < 0) {
        rc = cli_fail("compare", "%s", err);
    } else {
        compare_print(stdout, g, &p, &m, o.by, o.top);
        const trace *ts[2] = {&p, &m};
        char tp[300], tm[300];
        snprintf(tp, sizeof tp, "predicted (%s): %s", p.backend, pn);
        snprintf(tm, sizeof tm, "measured (%s): %s", m.backend, mn);
        const char *titles[2] = {tp, tm};
        cmp_summary s;
        compare_summarize(g, &p, &m, o.by, &s);
        if (o.plot && plot_gantt(o.plot, g, ts, titles, 2, err) < 0) rc = cli_fail("compare", "%s", err);
        if (!rc && o.error_plot && plot_error_bars(o.error_plot, &s, o.by, err) < 0)
            rc = cli_fail("compare", "%s", err);
        if (!rc && o.max_error >= 0 && fabs(s.step_err_pct) > o.max_error) {
            printf("# step time error %+.2f %% exceeds --max-error %g %%\n", s.step_err_pct, o.max_error);
            rc = 1;
        }
        free(s.groups);
    }
    dag_free(g);
    trace_free(&p);
    trace_free(&m);
    return rc;
}
