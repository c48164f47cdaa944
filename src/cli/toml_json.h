/*
 * toml_json: read a TOML document (toml++, C++17) into a jansson object for
 * the C readers of src/cli. Declared C-callable; includes only jansson and
 * units.h so that the C++ side needs no C-only header.
 *
 * Layer: cli.
 */
#ifndef LOONG_TOML_JSON_H
#define LOONG_TOML_JSON_H

#include <jansson.h>

#include "core/units.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Parse text (NUL-terminated TOML) into a new object of its tables (the
 * caller decrefs it). what names the input in messages. NULL with a
 * one-line message "WHAT: line N: not TOML: ..." for bad TOML, or one
 * naming the key of a date or time (refused). Never exits. */
json_t *cli_toml_parse(const char *text, const char *what, char err[LOONG_ERRLEN]);

#ifdef __cplusplus
}
#endif

#endif
