/*
 * plan_runner: the planner's child runner (plan_search.h's plan_runner)
 * for `loong plan`. A simulation is a `loong sim` child process
 * (sim_child.h: SimGrid initialises once per process), and under mpirun
 * the processes are MPI ranks that split the scoring and the simulations
 * and exchange their parts, so that rank 0 prints what a serial run does.
 * Progress and notes go to stderr, on rank 0 only.
 *
 * Layer: cli (may use every library).
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/xalloc.h"
#include "autoconf.h"
#include "plan_cli.h"
#include "sim/sim.h"
#include "sim_child.h"

#ifdef HAVE_MPI
#include <mpi.h>
#endif

/* ---- MPI: the split and the gathers (one rank of one without MPI) ---- */

static bool under_mpirun(void) { return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK"); }

void plan_cli_mpi_start(int *argc, char ***argv, plan_ctx *x)
{
    x->rank = 0;
    x->size = 1;
#ifdef HAVE_MPI
    if (!under_mpirun()) return;
    int provided;
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &x->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &x->size);
    cli_quiet = x->rank != 0;
#else
    (void)argc;
    (void)argv;
#endif
}

int plan_cli_mpi_finish(const plan_ctx *x, int rc)
{
#ifdef HAVE_MPI
    if (x->size > 1 || under_mpirun()) {
        fflush(stdout);
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Finalize();
    }
#endif
    (void)x;
    return rc;
}

/* The runner's state: the command's options and context, and the children
 * running now. */
typedef struct child {
    int id;
    sim_child ch;
    const char *name; /* its layout's, for its error message */
} child;

typedef struct runner {
    const plan_args *a;
    const plan_ctx *x;
    child *kids;
    int nkids, cap;
} runner;

static void gather_layouts(void *user, plan_layout *ls, int n)
{
    const plan_ctx *x = ((runner *)user)->x;
#ifdef HAVE_MPI
    if (x->size == 1) return;
    int *counts = xmalloc_array((size_t)x->size, sizeof *counts, "the MPI gather");
    int *displs = xmalloc_array((size_t)x->size, sizeof *displs, "the MPI gather");
    for (int r = 0; r < x->size; r++) {
        int lo = plan_search_block(n, r, x->size), hi = plan_search_block(n, r + 1, x->size);
        displs[r] = lo * (int)sizeof *ls;
        counts[r] = (hi - lo) * (int)sizeof *ls;
    }
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ls, counts, displs, MPI_BYTE, MPI_COMM_WORLD);
    free(counts);
    free(displs);
#else
    (void)x;
    (void)ls;
    (void)n;
#endif
}

static void max_over_ranks(void *user, double *v, int n)
{
    const plan_ctx *x = ((runner *)user)->x;
#ifdef HAVE_MPI
    if (x->size > 1) MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
#endif
    (void)x;
    (void)v;
    (void)n;
}

static double now(void *user)
{
    (void)user;
    return cli_now();
}

/* ---- progress on stderr ---- */

#define PROGRESS_EVERY_S 5.0

/* A bar on a terminal; elsewhere (a log, CI) a line every PROGRESS_EVERY_S
 * seconds with what is done, left and an ETA. */
static void progress(void *user, const char *what, int done, int total, double eta)
{
    const runner *u = user;
    static const char *phase;
    static double start, last;
    static int before;
    if (u->a->quiet || u->x->rank != 0 || total == 0) return;
    double now = cli_now();
    if (what != phase || done < before) phase = what, start = last = now; /* a new phase */
    before = done;
    if (isatty(2)) {
        int width = 30, fill = done * width / total;
        fprintf(stderr, "\r%s [%.*s%*s] %d/%d", what, fill, "==============================", width - fill, "", done,
                total);
        if (done == total) fputc('\n', stderr);
    } else if (now - last >= PROGRESS_EVERY_S && done < total) {
        last = now;
        if (eta < 0) eta = done > 0 ? (now - start) / done * (total - done) : -1;
        fprintf(stderr, "loong plan: %s: %d of %d done, %d left, %.0f s so far%s", what, done, total, total - done,
                now - start, eta >= 0 ? "" : "\n");
        if (eta >= 0) fprintf(stderr, ", about %.0f s to go\n", eta);
    }
    fflush(stderr);
}

/* Long work on a terminal: say so at once (a log gets the lines every 5 s,
 * and a run that fails at once keeps its error on one line). */
static void begin(void *user, int runs, double tasks, double eta, int jobs)
{
    const runner *u = user;
    if (!u->a->quiet && u->x->rank == 0 && eta >= PROGRESS_EVERY_S && isatty(2))
        fprintf(stderr, "loong plan: simulating: %d run(s) of about %.3g tasks in all, about %.0f s at %d at once\n",
                runs, tasks, eta, jobs);
}

static void note(void *user, const char *line)
{
    const runner *u = user;
    if (!u->a->quiet && u->x->rank == 0) fprintf(stderr, "loong plan: %s\n", line);
}

/* ---- simulations: `loong sim` children ---- */

/* The loong sim command line of sim (sim_child_argv_free it). */
static char **sim_argv(const plan_args *a, const plan_sim *sim)
{
    const sim_child_spec sp = {a->platform, a->calib, a->cc.val[KNOB_MODEL], sim->layers};
    char *wv[WHATIF_MAX * 3 + 2], fold[48] = "--fold=";
    const config *c = &sim->l->c;
    int ne = 1, nw = whatif_argv(sim->w, wv);
    const char *extra[WHATIF_MAX * 3 + 5] = {"--links=0"};
    /* the dimensions run by symmetry (plan_fold), said whenever dp or tp
     * is on, so that the command shows how the replicas were simulated */
    mesh_dims folded = plan_fold(c, a->foldable, nw > 0);
    if (c->dp > 1 || folded) {
        sim_fold_text(folded, fold + strlen(fold), sizeof fold - strlen(fold));
        extra[ne++] = fold;
    }
    if (sim->compose) extra[ne++] = "--compose";
    for (int i = 0; i < nw; i++)
        extra[ne++] = wv[i];
    char **v = sim_child_argv(c, &sp, extra, ne);
    for (int i = 0; i < nw; i++)
        free(wv[i]);
    return v;
}

char *plan_cli_command(const plan_args *a, const plan_layout *l)
{
    /* ZeRO-1's 1- and 2-layer composition is what loong sim --compose does there */
    plan_sim sim = {.l = l, .compose = plan_compose_mode(&l->c, a->full_layers) != PLAN_EVERY_LAYER, .w = &a->w};
    char **v = sim_argv(a, &sim);
    char *cmd = sim_child_command(v);
    sim_child_argv_free(v);
    return cmd;
}

static int start(void *user, int id, const plan_sim *sim, char err[LOONG_ERRLEN])
{
    runner *u = user;
    if (u->nkids == u->cap) {
        u->cap = u->cap ? 2 * u->cap : 8;
        u->kids = xrealloc_array(u->kids, (size_t)u->cap, sizeof *u->kids, "the plan's simulations");
    }
    child *k = &u->kids[u->nkids];
    *k = (child){.id = id, .ch = {0, -1, -1}, .name = sim->l->name};
    char **v = sim_argv(u->a, sim);
    int rc = sim_child_start(&k->ch, v, err);
    sim_child_argv_free(v);
    if (rc == 0) u->nkids++;
    return rc;
}

static void stop(void *user, int id)
{
    runner *u = user;
    for (int i = 0; i < u->nkids; i++)
        if (u->kids[i].id == id) kill(u->kids[i].ch.pid, SIGKILL); /* its own children die with it (sim_child_guard) */
}

/* A child's summary (a file: sim_child.h) is read after the child exits. */
static int wait_one(void *user, int *id, int *rc, double *step, double *exposed, char why[LOONG_ERRLEN])
{
    runner *u = user;
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid == 0) {
            nanosleep(&(struct timespec){0, 100000000}, NULL);
            return 0;
        }
        if (pid < 0 && errno == EINTR) continue;
        if (pid < 0) return -1;
        for (int i = 0; i < u->nkids; i++) {
            child *k = &u->kids[i];
            if (k->ch.pid != pid) continue;
            sim_child_result res = {0};
            *id = k->id;
            *rc = sim_child_finish(&k->ch, status, k->name, &res, why);
            *step = res.step;
            *exposed = res.exposed;
            u->kids[i] = u->kids[--u->nkids];
            return 1;
        }
    }
}

int plan_cli_search(const plan_args *a, plan_ctx *x, plan_search_out *out, char err[LOONG_ERRLEN])
{
    runner u = {.a = a, .x = x};
    const plan_runner r = {.user = &u,
                           .rank = x->rank,
                           .size = x->size,
                           .start = start,
                           .wait = wait_one,
                           .stop = stop,
                           .now = now,
                           .gather_layouts = gather_layouts,
                           .max = max_over_ranks,
                           .progress = progress,
                           .begin = begin,
                           .note = note};
    uint64_t seed = 0;
    if (a->cc.doc_dist && cli_config_seed(&a->cc, &seed, err) < 0) return -1;
    const plan_search_opts o = {.top = a->top,
                                .exact = a->exact,
                                .full_layers = a->full_layers,
                                .robust = a->robust,
                                .jobs = a->jobs,
                                .sim_timeout = a->sim_timeout,
                                .draws = a->draws,
                                .doc_dist = a->cc.doc_dist,
                                .seed = seed,
                                .w = &a->w,
                                .foldable = a->foldable,
                                .user = a->layout ? &x->user : NULL,
                                .cb = x->cb,
                                .spec = &x->spec};
    int rc = plan_search(&x->req, &o, &r, out, err);
    free(u.kids);
    return rc;
}
