/*
 * sim_platform: SimGrid start-up (the settings every simulation starts
 * from, sim_default_cfg) and the platform a simulation runs on: its GPU
 * hosts, the loong_spec it was generated from (NCCL's collective model
 * applies where the spec asks for it and its node size is the hosts'),
 * and its perturbations. A platform file is XML (written by `loong topo`
 * or by hand); a GPU host is a host with the properties loong_gpu (kind,
 * e.g. h100), loong_node (its NVLink domain: a node, or a rack of compute
 * trays) and loong_slot (GPU index in it). Rank r runs on the GPU with
 * node placement_node(r) and slot placement_gpu(r) (core/placement.h):
 * the hosts sorted by (node, slot) are indexed by rank.
 *
 * SimGrid aborts the process on a malformed platform, so the file is first
 * loaded in a child process whose stderr is captured: a bad file becomes a
 * one-line error instead of a crash.
 */
#include <errno.h>
#include <fcntl.h>
#include <simgrid/engine.h>
#include <simgrid/host.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sim_internal.h"
#include "core/infile.h"
#include "core/xalloc.h"

XBT_LOG_NEW_CATEGORY(loong, "loong: plan, simulate and execute 2D head-context parallel attention");
XBT_LOG_NEW_DEFAULT_SUBCATEGORY(loong_sim_platform, loong, "loong sim: SimGrid start-up and GPU hosts");

const char *const sim_default_cfg[] = {
    "--cfg=network/model:CM02",      /* the LV08 default multiplies latency by 13.01 and bandwidth by 0.97 (TCP) */
    "--cfg=network/crosstraffic:0",  /* no reverse ACK traffic: NVLink and InfiniBand are full duplex */
    "--cfg=network/TCP-gamma:0",     /* no TCP window bound (4 MiB / 2 RTT would cap NVLink near 200 GB/s) */
    "--cfg=contexts/stack-size:512", /* KiB per actor: thousands of shallow actors */
    "--log=xbt_cfg.thres:warning",   /* no "Configuration change" chatter; --log= overrides */
    NULL,
};

struct sim_platform {
    char *path;
    sg_host_t *gpus; /* sorted by (node, slot) */
    int ngpus, gpn;
    char kind[32];
    platform_spec spec;
    bool nccl;    /* spec read and spec.nccl */
    bool one_gpu; /* sim_platform_share_one_gpu */
    sim_faults faults;
};

/* argv for simgrid_init: program name, loong's defaults, the user's args. */
static char **init_argv(int nargs, char **args, int *argc)
{
    int nd = 0;
    while (sim_default_cfg[nd])
        nd++;
    char **av = xcalloc((size_t)(nd + nargs + 2), sizeof *av, "SimGrid's arguments");
    av[0] = (char *)"loong";
    for (int i = 0; i < nd; i++)
        av[1 + i] = (char *)sim_default_cfg[i];
    for (int i = 0; i < nargs; i++)
        av[1 + nd + i] = args[i];
    *argc = 1 + nd + nargs;
    return av;
}

/* The most useful line of SimGrid's complaint, without its log prefix. */
static void last_error_line(char *buf, char *out, size_t len)
{
    char *best = NULL;
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
        if (strstr(line, "Exiting now") || strncmp(line, "  ->", 4) == 0 || strstr(line, "backtrace")) continue;
        if (!best || strstr(line, "rror") || strstr(line, "CRITICAL")) best = line;
        if (strstr(line, "Parse error")) break;
    }
    if (!best) best = (char *)"SimGrid aborted while loading it";
    char *msg = strstr(best, "] ");
    while (msg && strstr(msg + 2, "] "))
        msg = strstr(msg + 2, "] ");
    snprintf(out, len, "%s", msg ? msg + 2 : best);
}

/* Load the platform in a child; 0 if SimGrid accepted it. */
static int probe(const char *path, int argc, char **argv, char err[LOONG_ERRLEN])
{
    int fd[2];
    if (pipe(fd) < 0) return 0; /* cannot probe: let the real load speak */
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        dup2(fd[1], 2);
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) dup2(null, 1);
        simgrid_init(&argc, argv);
        simgrid_load_platform(path);
        _exit(0);
    }
    close(fd[1]);
    char buf[8192];
    size_t n = 0;
    ssize_t got;
    while ((got = read(fd[0], buf + n, sizeof buf - 1 - n)) > 0 && n + (size_t)got < sizeof buf - 1)
        n += (size_t)got;
    while (got > 0) /* drain the rest so the child never blocks */
        got = read(fd[0], (char[256]){0}, 256);
    buf[n] = '\0';
    close(fd[0]);
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) < 0) return 0;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return 0;
    char line[200];
    last_error_line(buf, line, sizeof line);
    snprintf(err, LOONG_ERRLEN, "platform '%s' is not a valid SimGrid platform: %s", path, line);
    return -1;
}

static int prop_int(sg_host_t h, const char *key)
{
    const char *v = sg_host_get_property_value(h, key);
    return v ? atoi(v) : -1;
}

static int by_node_slot(const void *a, const void *b)
{
    sg_host_t x = *(const sg_host_t *)a, y = *(const sg_host_t *)b;
    int nx = prop_int(x, "loong_node"), ny = prop_int(y, "loong_node");
    if (nx != ny) return nx < ny ? -1 : 1;
    int sx = prop_int(x, "loong_slot"), sy = prop_int(y, "loong_slot");
    return (sx > sy) - (sx < sy);
}

/* Collect and check the GPU hosts. */
static int find_gpus(sim_platform *pf, char err[LOONG_ERRLEN])
{
    size_t nh = sg_host_count();
    sg_host_t *all = sg_host_list();
    pf->gpus = xmalloc_array(nh, sizeof *pf->gpus, "the platform's GPU hosts");
    for (size_t i = 0; i < nh; i++) {
        const char *kind = sg_host_get_property_value(all[i], "loong_gpu");
        if (!kind) continue;
        if (!pf->kind[0]) snprintf(pf->kind, sizeof pf->kind, "%s", kind);
        if (strcmp(kind, pf->kind)) {
            snprintf(err, LOONG_ERRLEN, "platform '%s' mixes GPU kinds %s and %s: loong sim models one kind", pf->path,
                     pf->kind, kind);
            free(all);
            return -1;
        }
        pf->gpus[pf->ngpus++] = all[i];
    }
    free(all);
    if (!pf->ngpus) {
        snprintf(err, LOONG_ERRLEN,
                 "platform '%s' has no GPU hosts (hosts with property loong_gpu): generate one with loong topo",
                 pf->path);
        return -1;
    }
    qsort(pf->gpus, (size_t)pf->ngpus, sizeof *pf->gpus, by_node_slot);
    int n0 = prop_int(pf->gpus[0], "loong_node");
    while (pf->gpn < pf->ngpus && prop_int(pf->gpus[pf->gpn], "loong_node") == n0)
        pf->gpn++;
    placement pl = placement_make(pf->gpn, 1, 0);
    for (int i = 0; i < pf->ngpus; i++)
        if (prop_int(pf->gpus[i], "loong_node") != n0 + placement_node(&pl, i) ||
            prop_int(pf->gpus[i], "loong_slot") != placement_gpu(&pl, i)) {
            snprintf(err, LOONG_ERRLEN,
                     "platform '%s': GPU host %s breaks the layout of %d GPUs per node numbered from node %d slot 0",
                     pf->path, sg_host_get_name(pf->gpus[i]), pf->gpn, n0);
            return -1;
        }
    return 0;
}

sim_platform *sim_platform_open(const char *path, int nargs, char **args, char err[LOONG_ERRLEN])
{
    /* loong's own checks first (a directory, the size, a broken loong_spec),
     * then SimGrid's; a platform without loong_spec runs plain rings */
    char *text = infile_read(path, "platform", INFILE_PLATFORM_MAX, NULL, err);
    if (!text) return NULL;
    platform_spec spec;
    bool has_spec = strstr(text, "loong_spec") != NULL;
    int bad = has_spec && platform_spec_parse(text, path, &spec, err) < 0;
    free(text);
    if (bad) return NULL;
    int argc;
    char **argv = init_argv(nargs, args, &argc);
    sim_platform *pf = xcalloc(1, sizeof *pf, "the platform");
    pf->path = xstrdup(path, "the platform");
    int child_argc = argc;
    if (probe(path, child_argc, argv, err) < 0) {
        free(argv);
        free(pf->path);
        free(pf);
        return NULL;
    }
    simgrid_init(&argc, argv);
    simgrid_load_platform(path);
    free(argv);
    if (find_gpus(pf, err) < 0) {
        free(pf->gpus);
        free(pf->path);
        free(pf);
        return NULL;
    }
    if (has_spec) pf->spec = spec;
    pf->nccl = has_spec && pf->spec.nccl && pf->spec.gpus_per_node == pf->gpn;
    XBT_VERB("platform %s: %d %s GPUs, %d per node, %s collectives", path, pf->ngpus, pf->kind, pf->gpn,
             pf->nccl ? "NCCL's" : "plain ring");
    return pf;
}

int sim_platform_gpus(const sim_platform *pf) { return pf->ngpus; }
const char *sim_platform_kind(const sim_platform *pf) { return pf->kind; }
int sim_platform_gpus_per_node(const sim_platform *pf) { return pf->gpn; }

placement sim_platform_placement(const sim_platform *pf)
{
    bool spec = pf->spec.gpus_per_node == pf->gpn && pf->spec.nics_per_node > 0;
    return placement_make(pf->gpn, spec ? pf->spec.nics_per_node : pf->gpn, (pf->ngpus + pf->gpn - 1) / pf->gpn);
}

const platform_spec *sim_platform_nccl_spec(const sim_platform *pf) { return pf->nccl ? &pf->spec : NULL; }

/* For sim_actor.c: the host of each rank. */
sg_host_t *sim_platform_hosts(sim_platform *pf) { return pf->gpus; }
const char *sim_platform_path(const sim_platform *pf) { return pf->path; }
sim_faults *sim_platform_faults(sim_platform *pf) { return &pf->faults; }
void sim_platform_share_one_gpu(sim_platform *pf) { pf->one_gpu = true; }
bool sim_platform_one_gpu(const sim_platform *pf) { return pf->one_gpu; }

void sim_platform_free(sim_platform *pf)
{
    if (!pf) return;
    sim_faults_free(&pf->faults);
    free(pf->gpus);
    free(pf->path);
    free(pf);
}
