/*
 * whatif: the perturbations a simulation can run under — a straggler GPU,
 * a slow or a failed link, jitter on every kernel — as given on the command
 * line (`--straggler RANK[:F]`, `--slow-link NAME[:F]`, `--fail-link NAME`,
 * `--jitter PCT` with `--seed N`). This module only parses, checks and
 * describes them; the SimGrid backend applies them to its hosts and links
 * (src/sim/sim_whatif.c), where link names can be resolved.
 *
 * A perturbed run says so everywhere it reports: the summary's header
 * (whatif_describe) and the trace's "loong" object (whatif_to_json).
 *
 * Layer: model (uses core only).
 */
#ifndef LOONG_WHATIF_H
#define LOONG_WHATIF_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core/mesh.h"
#include "core/units.h"

/* Perturbations of each kind one run takes. */
#define WHATIF_MAX  64
#define WHATIF_NAME 96

#define WHATIF_STRAGGLER_DEFAULT 1.25 /* the "throttled GPU" */
#define WHATIF_SLOW_LINK_DEFAULT 2.0  /* a NIC trained at half speed */

typedef struct whatif_straggler {
    int rank;
    double factor; /* kernels take factor x their calibrated time */
} whatif_straggler;

typedef struct whatif_link {
    char name[WHATIF_NAME]; /* a link of the platform (loong topo --list-links) */
    double factor;          /* bandwidth / factor; 0 for a failed link */
} whatif_link;

typedef struct whatif {
    whatif_straggler strag[WHATIF_MAX];
    whatif_link slow[WHATIF_MAX], fail[WHATIF_MAX];
    int nstrag, nslow, nfail;
    double jitter; /* coefficient of variation of every kernel's time (0.05 = 5 %); 0: none */
    uint64_t seed; /* of the jitter's draws */
} whatif;

/* Add one perturbation from its option's argument: "RANK[:F]" for
 * --straggler, "NAME[:F]" for --slow-link, "NAME" for --fail-link.
 * Returns 0, or -1 with a message naming the option. */
int whatif_add_straggler(whatif *w, const char *arg, char err[LOONG_ERRLEN]);
int whatif_add_slow_link(whatif *w, const char *arg, char err[LOONG_ERRLEN]);
int whatif_add_fail_link(whatif *w, const char *arg, char err[LOONG_ERRLEN]);
/* --jitter PCT: a percentage in [0, 100). */
int whatif_set_jitter(whatif *w, const char *arg, char err[LOONG_ERRLEN]);

/* True when w perturbs anything (jitter 0 does not). */
bool whatif_any(const whatif *w);

/* Every straggler a rank of the `nranks` of the run (every replica's):
 * -1 with a message. */
int whatif_check_ranks(const whatif *w, int nranks, char err[LOONG_ERRLEN]);

/* Whether w breaks the fold of dimension d of mesh m: a backend that runs
 * d's ranks by symmetry (one representative per d-group, mesh_fold) is
 * exact only while every member of a group runs the same program on the
 * same hardware. A straggler breaks it unless every member of its group
 * straggles by the same factor; a slow or failed link always does (a link
 * belongs to one GPU, node or switch, which the members do not all cross
 * alike); jitter always does (every rank and replica draws its own). False
 * when d has degree 1. When true, why (len bytes) gets the reason, e.g.
 * "--straggler 200 slows a GPU of data-parallel replica 1 and not the same
 * GPU of the others". Never fails. */
bool whatif_breaks_fold(const whatif *w, const mesh *m, mesh_dim d, char *why, size_t len);

/* One line: "straggler rank 3 x1.25; slow link node0-nic0 x2; failed link
 * leaf-r0-0-up; jitter 5 % (lognormal, seed 1)". */
void whatif_describe(const whatif *w, char *buf, size_t len);

/* "# PERTURBED (what-if): <whatif_describe>" and a newline, when w
 * perturbs anything: the header line of every report of a perturbed run. */
void whatif_write_header(FILE *f, const whatif *w);

/* {"stragglers":[{"rank":3,"factor":1.25}], "slow_links":[...],
 * "failed_links":[...], "jitter":0.05, "seed":1}, only the kinds present. */
json_t *whatif_to_json(const whatif *w);

/* The options that give w to another loong command ("--straggler=3:1.25",
 * ...): at most whatif_argc(w) malloc'd strings into out; returns their
 * count. Free each with free(). */
int whatif_argc(const whatif *w);
int whatif_argv(const whatif *w, char **out);

/* The jitter's distribution: a kernel's time is multiplied by a lognormal
 * draw of mean 1 and coefficient of variation cv: sigma^2 = ln(1 + cv^2),
 * mu = -sigma^2 / 2. */
void whatif_lognormal_params(double cv, double *mu, double *sigma);

#endif
