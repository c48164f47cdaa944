/* cli_config: the configuration options shared by the commands. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "core/strategy.h"
#include "cli.h"

/* Megatron-LM's spellings of knobs (megatron/training/arguments.py), taken
 * as they are so that a published run's flags paste in: a value, or a
 * flag (on: no argument, the knob set to it). */
static const struct {
    const char *name;
    config_knob knob;
    const char *on;
} aliases[] = {{"decoder-first-pipeline-num-layers", KNOB_PP_FIRST_LAYERS, NULL},
               {"decoder-last-pipeline-num-layers", KNOB_PP_LAST_LAYERS, NULL},
               {"num-virtual-stages-per-pipeline-rank", KNOB_VPP, NULL},
               {"account-for-embedding-in-pipeline-split", KNOB_PP_EMBED_SLOT, "on"},
               {"account-for-loss-in-pipeline-split", KNOB_PP_LOSS_SLOT, "on"}};
#define NALIASES ((int)(sizeof aliases / sizeof *aliases))

const char *cli_config_help(void)
{
    static char buf[8192];
    if (buf[0]) return buf;
    size_t n = (size_t)snprintf(buf, sizeof buf, "Configuration (shared by dag, sim, exec and plan):\n");
    for (int k = 0; k < KNOB_COUNT && n < sizeof buf; k++) {
        const config_knob_info *ki = config_knob_get((config_knob)k);
        char opt[48];
        snprintf(opt, sizeof opt, "--%s %s", ki->option, ki->arg);
        n += (size_t)snprintf(buf + n, sizeof buf - n, "  %-21s %s", opt, strlen(opt) > 21 ? " " : "");
        for (const char *p = ki->help; *p && n + 30 < sizeof buf; p++) { /* indent continuation lines */
            buf[n++] = *p;
            if (*p == '\n') n += (size_t)snprintf(buf + n, sizeof buf - n, "%24s", "");
        }
        n += (size_t)snprintf(buf + n, sizeof buf - n, "\n");
    }
    for (int i = 0; i < NALIASES && n < sizeof buf; i++) {
        const config_knob_info *ki = config_knob_get(aliases[i].knob);
        n += (size_t)snprintf(buf + n, sizeof buf - n, "  --%s%s%s\n%24s= --%s %s (Megatron-LM's spelling)\n",
                              aliases[i].name, aliases[i].on ? "" : " ", aliases[i].on ? "" : ki->arg, "", ki->option,
                              aliases[i].on ? aliases[i].on : ki->arg);
    }
    if (n < sizeof buf)
        n += (size_t)snprintf(buf + n, sizeof buf - n,
                              "  --docs-file FILE      document lengths, one per line\n"
                              "  --doc-dist FILE       draw a packing from a histogram of 'LENGTH WEIGHT' lines\n"
                              "  --seed N              seed of the draw (and of exec's inputs)          [1]\n"
                              "  --megatron-args FILE|-  a pretrain_gpt.py launch's arguments as the configuration\n"
                              "                        (options given here override them; docs/frameworks.md)\n"
                              "  --torchtitan-toml FILE|-  a torchtitan job TOML (its job.config_file) as the\n"
                              "                        configuration (likewise)\n"
                              "Models: %s\nStrategies:\n%s",
                              model_preset_names(), strategy_help());
    return buf;
}

const struct option *cli_options(const struct option *own)
{
    static struct option all[KNOB_COUNT + NALIASES + 5 + 49];
    int n = 0;
    for (int k = 0; k < KNOB_COUNT; k++)
        all[n++] = (struct option){config_knob_get((config_knob)k)->option, required_argument, 0, CLI_OPT_BASE + k};
    for (int i = 0; i < NALIASES; i++)
        all[n++] = aliases[i].on
                       ? (struct option){aliases[i].name, no_argument, 0, CLI_OPT_FLAGS + i}
                       : (struct option){aliases[i].name, required_argument, 0, CLI_OPT_BASE + (int)aliases[i].knob};
    all[n++] = (struct option){"docs-file", required_argument, 0, CLI_OPT_DOCS_FILE};
    all[n++] = (struct option){"doc-dist", required_argument, 0, CLI_OPT_DOC_DIST};
    all[n++] = (struct option){"seed", required_argument, 0, CLI_OPT_SEED};
    all[n++] = (struct option){"megatron-args", required_argument, 0, CLI_OPT_MEGATRON};
    all[n++] = (struct option){"torchtitan-toml", required_argument, 0, CLI_OPT_TORCHTITAN};
    for (int i = 0; own[i].name && i < 48; i++)
        all[n++] = own[i];
    all[n] = (struct option){0, 0, 0, 0};
    return all;
}

int cli_config_knob(int opt)
{
    int k = opt - CLI_OPT_BASE, f = opt - CLI_OPT_FLAGS;
    if (f >= 0 && f < NALIASES) return (int)aliases[f].knob;
    return k >= 0 && k < KNOB_COUNT ? k : -1;
}

bool cli_config_option(cli_config *cc, int opt, const char *arg)
{
    int k = cli_config_knob(opt), f = opt - CLI_OPT_FLAGS;
    if (k >= 0) cc->val[k] = f >= 0 && f < NALIASES ? aliases[f].on : arg;
    if (opt == CLI_OPT_DOCS_FILE) cc->docs_file = arg;
    if (opt == CLI_OPT_DOC_DIST) cc->doc_dist = arg;
    if (opt == CLI_OPT_SEED) cc->seed = arg;
    if (opt == CLI_OPT_MEGATRON) cc->megatron = arg;
    if (opt == CLI_OPT_TORCHTITAN) cc->torchtitan = arg;
    return k >= 0 || opt == CLI_OPT_DOCS_FILE || opt == CLI_OPT_DOC_DIST || opt == CLI_OPT_SEED ||
           opt == CLI_OPT_MEGATRON || opt == CLI_OPT_TORCHTITAN;
}

int cli_config_seed(const cli_config *cc, uint64_t *seed, char err[LOONG_ERRLEN])
{
    *seed = 1;
    if (!cc->seed || !strcmp(cc->seed, "0")) {
        if (cc->seed) *seed = 0;
        return 0;
    }
    return units_parse_count(cc->seed, "--seed", seed, err);
}

/* --docs, --docs-file or --doc-dist: one layout, after --seq. */
static int parse_docs(const cli_config *cc, config *c, char err[LOONG_ERRLEN])
{
    int given = (cc->val[KNOB_DOCS] != NULL) + (cc->docs_file != NULL) + (cc->doc_dist != NULL);
    if (given > 1) {
        snprintf(err, LOONG_ERRLEN, "--docs, --docs-file and --doc-dist are three ways to give one layout: give one");
        return -1;
    }
    uint64_t seed;
    if (cli_config_seed(cc, &seed, err) < 0) return -1;
    if (cc->val[KNOB_DOCS]) return config_knob_parse(c, KNOB_DOCS, cc->val[KNOB_DOCS], err);
    if (cc->docs_file) c->docs = docs_load_file(cc->docs_file, c->seq, err);
    if (cc->doc_dist) c->docs = docs_draw(cc->doc_dist, c->seq, seed, err);
    return given && !c->docs ? -1 : 0;
}

bool cli_quiet;

/* cli_getopt_long's diagnosis of the last option, for cli_fail; "" when none. */
static char option_error[LOONG_ERRLEN];

int cli_fail(const char *cmd, const char *fmt, ...)
{
    if (cli_quiet) return 2;
    if (option_error[0]) {
        fprintf(stderr, "loong %s: error: %s: see loong %s --help\n", cmd, option_error, cmd);
        option_error[0] = 0;
        return 2;
    }
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "loong %s: error: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 2;
}

/* The long options that `typed` (without "--" and "=...") is a prefix
 * of, or that are a prefix of it, as "--a, --b or --c" into buf (at most
 * 6); 0 when none. */
static int related_options(const char *typed, size_t len, const struct option *o, char *buf, size_t cap)
{
    const char *names[6];
    int n = 0;
    for (; o->name && n < 6; o++) {
        size_t l = strlen(o->name);
        if ((l > len && !strncmp(o->name, typed, len)) || (l < len && !strncmp(o->name, typed, l)))
            names[n++] = o->name;
    }
    size_t w = 0;
    buf[0] = 0;
    for (int i = 0; i < n && w < cap; i++)
        w += (size_t)snprintf(buf + w, cap - w, "%s--%s", i == 0 ? "" : i == n - 1 ? " or " : ", ", names[i]);
    return n;
}

/* The argv element of the long option getopt_long just returned: the
 * last one consumed, or the one before when its argument came apart. */
static int long_option_at(char *const argv[], const struct option *o)
{
    int at = optind - 1;
    if (o->has_arg == required_argument && optarg == argv[at] && at > 0) at--;
    return at;
}

int cli_getopt_long(int argc, char *const argv[], const char *shortopts, const struct option *longopts, int *longindex)
{
    option_error[0] = 0;
    int idx = -1, opt = (getopt_long)(argc, argv, shortopts, longopts, &idx);
    if (longindex) *longindex = idx;
    /* a long option taken, or one getopt found unknown or ambiguous
     * (optopt 0; not a short option's argument that starts with "--") */
    if (idx < 0 && !(opt == '?' && optopt == 0)) return opt;
    int at = idx >= 0 ? long_option_at(argv, &longopts[idx]) : optind - 1;
    if (at < 1 || at >= argc || strncmp(argv[at], "--", 2) || !argv[at][2]) return opt;
    const char *typed = argv[at] + 2, *eq = strchr(typed, '=');
    size_t len = eq ? (size_t)(eq - typed) : strlen(typed);
    if (idx >= 0 && strlen(longopts[idx].name) == len) return opt; /* typed in full */
    for (const struct option *o = longopts; idx < 0 && o->name; o++)
        if (strlen(o->name) == len && !strncmp(o->name, typed, len)) return opt; /* in full, its argument missing */
    char near[400];
    int n = related_options(typed, len, longopts, near, sizeof near);
    if (idx < 0 && !n) return opt; /* unknown and like no option: the command's own message */
    snprintf(option_error, sizeof option_error, "unknown option '--%.*s'%s%s%s", (int)len, typed,
             n ? " (did you mean " : "", near, n ? "?)" : "");
    optind = at + 1;
    optarg = NULL;
    return '?';
}

/* --mesh: PhxPs, or a total rank count that the strategy splits. */
static int parse_mesh(const char *s, int *ph, int *ps, int *p, char err[LOONG_ERRLEN])
{
    *ph = *ps = *p = 0;
    if (!strchr(s, 'x')) return units_parse_int(s, "--mesh", p, err);
    config m;
    if (config_knob_parse(&m, KNOB_MESH, s, err) < 0) return -1;
    *ph = m.p_head;
    *ps = m.p_seq;
    return 0;
}

/* The one stderr line that names what the model file said and loong does
 * not model: its unmodelled keys, and a sliding window shorter than the
 * sequence (attention is costed as full causal; a window of S or more is
 * exact). Nothing when there is neither. */
static void model_note(const model *m, uint64_t seq)
{
    char win[96] = "";
    if (m->window > 0 && (uint64_t)m->window < seq)
        snprintf(win, sizeof win, "%ssliding_window (%d < --seq %llu: costed as full causal attention)",
                 m->unmodelled[0] ? ", " : "", m->window, (unsigned long long)seq);
    if (m->unmodelled[0] || win[0])
        fprintf(stderr, "loong: model '%s': read, not modelled: %s%s\n", m->name, m->unmodelled, win);
}

/* Parse the given knobs of one phase (knobs.h), in the table's order. */
static int parse_phase(const cli_config *cc, config *c, config_knob_phase phase, char err[LOONG_ERRLEN])
{
    for (int k = 0; k < KNOB_COUNT; k++)
        if (config_knob_get((config_knob)k)->phase == phase && cc->val[k] &&
            config_knob_parse(c, (config_knob)k, cc->val[k], err) < 0)
            return -1;
    return 0;
}

/* --megatron-args or --torchtitan-toml: its knobs under those of the command line (which win),
 * into *merged; its model into *m. */
static int merge_megatron(const cli_config *cc, cli_config *merged, model *m, bool *has_model, char err[LOONG_ERRLEN])
{
    *merged = *cc;
    *has_model = false;
    if (cc->megatron && cc->torchtitan) {
        snprintf(err, LOONG_ERRLEN, "--megatron-args and --torchtitan-toml are two configurations: give one");
        return -1;
    }
    if (cc->torchtitan) {
        cli_config tt;
        if (cli_torchtitan_read(cc->torchtitan, cc, &tt, err) < 0) return -1;
        for (int k = 0; k < KNOB_COUNT; k++)
            if (!merged->val[k]) merged->val[k] = tt.val[k];
        snprintf(merged->torchtitan_note, sizeof merged->torchtitan_note, "%s", tt.torchtitan_note);
        return 0;
    }
    if (!cc->megatron) return 0;
    cli_config mg;
    if (cli_megatron_read(cc->megatron, cc, &mg, m, has_model, err) < 0) return -1;
    for (int k = 0; k < KNOB_COUNT; k++)
        if (!merged->val[k]) merged->val[k] = mg.val[k];
    snprintf(merged->megatron_note, sizeof merged->megatron_note, "%s", mg.megatron_note);
    if (cc->val[KNOB_MODEL]) *has_model = false;
    return 0;
}

int cli_config_finish(const cli_config *given, config *c, char err[LOONG_ERRLEN])
{
    cli_config merged;
    const cli_config *cc = &merged;
    model mg_model;
    bool mg_has_model;
    if (merge_megatron(given, &merged, &mg_model, &mg_has_model, err) < 0) return -1;
    config_defaults(c);
    if (parse_phase(cc, c, KNOB_PHASE_FIRST, err) < 0) return -1;
    if (mg_has_model) c->model = mg_model;
    /* KNOB_PHASE_PRESET: the documents, then the preset from --mesh and --strategy */
    if (parse_docs(cc, c, err) < 0) return -1;
    int ph, ps, p;
    if (parse_mesh(cc->val[KNOB_MESH] ? cc->val[KNOB_MESH] : "64", &ph, &ps, &p, err) < 0) return -1;
    const char *strategy = cc->val[KNOB_STRATEGY] ? cc->val[KNOB_STRATEGY] : "loongtrain";
    if (strategy_apply(strategy, ph, ps, p, c, err) < 0) return -1;
    if (parse_phase(cc, c, KNOB_PHASE_OVERRIDE, err) < 0) return -1;
    /* a new ring mode takes its own default window */
    if (cc->val[KNOB_RING]) c->window = c->ring == RING_DOUBLE ? strategy_default_window(c) : c->p_seq;
    if (parse_phase(cc, c, KNOB_PHASE_LAST, err) < 0) return -1;
    if (config_validate(c, err) < 0) return -1;
    model_note(&c->model, c->seq);
    if (cc->megatron_note[0]) fprintf(stderr, "loong: --megatron-args: read, not modelled: %s\n", cc->megatron_note);
    if (cc->torchtitan_note[0])
        fprintf(stderr, "loong: --torchtitan-toml: read, not modelled: %s\n", cc->torchtitan_note);
    int nodes = c->tp > 1 ? config_tp_nodes(c) : 1;
    if (nodes > 1)
        fprintf(stderr,
                "loong: warning: the TP group spans %d nodes (--tp %d, %d GPUs per node, placement %s): its "
                "collectives, two or more per GEMM pair, cross the network\n",
                nodes, c->tp, c->gpus_per_node, cc->val[KNOB_PLACEMENT] ? cc->val[KNOB_PLACEMENT] : "head-first");
    if (c->pp > 1 && c->micro_batches < c->pp)
        fprintf(stderr,
                "loong: warning: --micro-batches %d < --pp %d: at most %d of the %d stages compute at once, and the "
                "pipeline bubble dominates the step; use %d or more micro-batches\n",
                c->micro_batches, c->pp, c->micro_batches, c->pp, 4 * c->pp);
    return 0;
}

double cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double cli_peak_rss_mb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}
