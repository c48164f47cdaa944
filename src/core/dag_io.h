/*
 * dag_io: the machine-readable DAG (`loong dag --format json`, the schema of
 * DESIGN.md, stable for users' scripts) and a Graphviz view (--format dot).
 *
 * Layer: core (libc and jansson only: it knows no predictor, measurement or backend).
 */
#ifndef LOONG_DAG_IO_H
#define LOONG_DAG_IO_H

#include <stdio.h>

#include "dag.h"

/* {"config":{...}, "tasks":[{"id","rank","stream","kind","flops","bytes",
 * "peer","group","layer","deps", plus "op","phase","match","step","src",
 * "dims","sel","buf","buf2","flags"}]}. Streams the output; returns 0 or -1 on
 * a write error. */
int dag_write_json(FILE *f, const dag *g);

/* One cluster per rank, one node per task, solid edges for deps and stream
 * order, dashed for send -> recv. Meant for small DAGs. */
int dag_write_dot(FILE *f, const dag *g);

#endif
