/*
 * knobs: the knob table, one description of a configuration.
 *
 * Every knob of a config, in the order of the configuration JSON. A knob's
 * name is its JSON key and, with '-' for '_', its command-line option;
 * its value is spelled the same way in both (config_knob_text). The JSON
 * writer and reader, the `loong sim` command lines that plan and compose
 * build, the CLI's options and their --help, and the knobs `loong plan`
 * searches all come from this one table (knobs.c), and so does the order
 * in which the CLI parses them (config_knob_phase): a knob is a row, and a
 * row cannot be left out of any of them.
 *
 * Layer: core (libc only).
 */
#ifndef LOONG_KNOBS_H
#define LOONG_KNOBS_H

#include "config.h"

typedef enum {
    KNOB_MODEL,
    KNOB_SEQ,
    KNOB_BATCH,
    KNOB_TP,
    KNOB_SEQUENCE_PARALLEL,
    KNOB_TP_OVERLAP,
    KNOB_MESH,
    KNOB_DP,
    KNOB_PP,
    KNOB_EP,
    KNOB_EXPERT_TP,
    KNOB_SHARED_EXPERT_OVERLAP,
    KNOB_DISPATCHER,
    KNOB_ROUTING,
    KNOB_CAPACITY,
    KNOB_MICRO_BATCHES,
    KNOB_SCHEDULE,
    KNOB_VPP,
    KNOB_PP_FIRST_LAYERS,
    KNOB_PP_LAST_LAYERS,
    KNOB_PP_EMBED_SLOT,
    KNOB_PP_LOSS_SLOT,
    KNOB_STRATEGY,
    KNOB_PLACEMENT,
    KNOB_PARTITION,
    KNOB_RING,
    KNOB_WINDOW,
    KNOB_KV_STRIDE,
    KNOB_KV_REPLICATION,
    KNOB_SCOPE,
    KNOB_GPUS_PER_NODE,
    KNOB_RECOMPUTE,
    KNOB_RECOMPUTE_MODULES,
    KNOB_RECOMPUTE_METHOD,
    KNOB_RECOMPUTE_NUM_LAYERS,
    KNOB_ZERO,
    KNOB_PREFETCH,
    KNOB_DTYPE,
    KNOB_FUSIONS,
    KNOB_GRAD_REDUCE,
    KNOB_CROSS_ENTROPY,
    KNOB_ATTENTION,
    KNOB_ATTENTION_DROPOUT,
    KNOB_HIDDEN_DROPOUT,
    KNOB_PRECISION,
    KNOB_DOCS,
    KNOB_NCCL_ALGO,
    KNOB_NCCL_PROTO,
    KNOB_COUNT
} config_knob;

/* When cli_config_finish parses a knob given on the command line: the
 * phases in this order, a phase's knobs in the table's order. A phase is
 * needed where one knob's meaning depends on another's value: the strategy
 * preset reads the FIRST knobs and sets defaults that the OVERRIDE knobs
 * override; a new ring mode takes its own default window, which --window
 * (LAST) overrides in turn. */
typedef enum {
    KNOB_PHASE_FIRST,    /* what the strategy preset reads: model, sizes, TP, the placement */
    KNOB_PHASE_PRESET,   /* read by the CLI itself, not by iterating the table: the preset's
                          * --mesh and --strategy (strategy_apply), and --docs with
                          * --docs-file and --doc-dist (one layout, after --seq) */
    KNOB_PHASE_OVERRIDE, /* overrides of the preset: partition, ring, scope, recompute */
    KNOB_PHASE_LAST      /* the rest, after a new ring mode's default window */
} config_knob_phase;

typedef struct config_knob_info {
    const char *key;         /* JSON key, e.g. "kv_replication" */
    const char *option;      /* command-line option without "--", e.g. "kv-replication" */
    const char *arg;         /* the value in --help, e.g. "on|off" */
    const char *help;        /* one line of --help, with the default in brackets */
    bool searched;           /* a layout knob that `loong plan` searches itself (mesh .. scope) */
    config_knob_phase phase; /* when the command line's value is parsed */
} config_knob_info;

/* The row of knob k (0 <= k < KNOB_COUNT). */
const config_knob_info *config_knob_get(config_knob k);

/* Knob k of c spelled as the command line takes it ("8x8", "on", "131072",
 * "bf16", "4096,4096"); KNOB_MODEL gives the model's name. Malloc'd; NULL
 * for a knob at its unset default (KNOB_DOCS of one document), which the
 * JSON and command lines leave out. */
char *config_knob_text(const config *c, config_knob k);

/* Set knob k of c from its command-line spelling. Enumerations, on|off,
 * ZeRO stages and dtypes are checked here; sizes with units_parse_*;
 * KNOB_MODEL resolves a preset or model file; KNOB_MESH and
 * KNOB_STRATEGY are the CLI's (they interact). Returns 0 or -1 with a
 * message naming the option. */
int config_knob_parse(config *c, config_knob k, const char *text, char err[LOONG_ERRLEN]);

#endif
