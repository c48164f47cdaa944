/*
 * knobs_internal: the rows of the knob table (knobs.c) as its two readers
 * see them, the command-line text (knobs.c) and the JSON (config_json.c).
 * Nothing outside src/core/ includes this file: knobs.h is the interface.
 *
 * Layer: core (libc only).
 */
#ifndef LOONG_KNOBS_INTERNAL_H
#define LOONG_KNOBS_INTERNAL_H

#include <stddef.h>

#include "knobs.h"

/* How a value is spelled on the command line and in JSON, and in the short
 * layout names of `loong plan`. */
typedef struct spelling {
    const char *name, *abbrev;
} spelling;

/* How a knob's value is stored in a config and spelled. */
typedef enum {
    KT_MODEL,
    KT_COUNT,
    KT_INT,
    KT_NONNEG, /* an int that may be 0 */
    KT_STAGE,
    KT_MESH,
    KT_ORDER,
    KT_STRING,
    KT_ENUM,
    KT_BOOL,
    KT_DTYPE,
    KT_DOCS,
    KT_MODULES, /* --recompute-modules' list */
    KT_PROB,    /* a probability in [0, 1) (a double) */
    KT_ROUTING, /* --routing: balanced or zipf:S (a double, 0: balanced) */
    KT_CAPACITY /* --capacity-factor: none or C (a double, 0: none) */
} knob_type;

typedef struct knob_row {
    config_knob_info info;
    knob_type type;
    size_t off;            /* the field in config (not for MODEL, MESH, DTYPE) */
    const spelling *names; /* ENUM and BOOL */
    int nnames;
} knob_row;

/* The table, indexed by config_knob, in the order of the configuration JSON. */
extern const knob_row knob_rows[KNOB_COUNT];

/* Whether knob k of c says nothing at its default (one document, every KV
 * head in one gather, ...): the JSON and the command lines leave it out,
 * so configs that do not use it read and hash as before it existed. */
bool knob_unset(const config *c, config_knob k);

/* Whether the JSON reader may miss knob k (one that knob_unset may leave
 * out): config_from_json sets its default first. */
bool knob_optional(config_knob k);

/* The field of row r in c, by its type. */
static inline int *knob_int(config *c, const knob_row *r) { return (int *)((char *)c + r->off); }
static inline int knob_int_value(const config *c, const knob_row *r)
{
    return *(const int *)((const char *)c + r->off);
}
static inline double *knob_prob(config *c, const knob_row *r) { return (double *)((char *)c + r->off); }
static inline double knob_prob_value(const config *c, const knob_row *r)
{
    return *(const double *)((const char *)c + r->off);
}
/* The index of c's activation dtype among KNOB_DTYPE's spellings (bf16, fp32). */
static inline int knob_dtype_index(const config *c) { return c->act_bytes == 4; }

#endif
