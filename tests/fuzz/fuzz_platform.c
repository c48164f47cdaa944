/*
 * fuzz_platform: the platform spec reader (`--platform FILE` without
 * SimGrid: the planner, `loong coll`, `loong calibrate`;
 * model/platform_spec.h).
 *
 * Contract under test: platform_spec_parse() on any text returns 0 with a
 * spec that platform_spec_validate() accepts, or -1 with a one-line
 * message, never reading out of bounds, overflowing or leaking. For a small
 * accepted spec (at most 16 GPUs, so that the XML stays short) the platform
 * platform_spec_write() writes reads back to the same spec (the loong_spec
 * property is exact).
 */
#include <stddef.h>
#include <stdio.h>

#include "model/platform_spec.h"
#include "fuzz_text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_text(data, size);
    if (!text) return 0;
    platform_spec sp;
    char err[LOONG_ERRLEN] = "";
    int rc = platform_spec_parse(text, "fuzz.xml", &sp, err);
    free(text);
    if (rc < 0) {
        if (!err[0] || strnlen(err, LOONG_ERRLEN) == LOONG_ERRLEN) abort();
        return 0;
    }
    if (platform_spec_validate(&sp, err) < 0) abort();
    if ((long long)sp.nodes * sp.gpus_per_node > 16) return 0;
    char *xml = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&xml, &len);
    if (!f || platform_spec_write(f, &sp, "fuzz") < 0) abort();
    fclose(f);
    platform_spec back;
    if (platform_spec_parse(xml, "written.xml", &back, err) < 0) {
        fprintf(stderr, "platform_spec_write wrote a platform platform_spec_parse refuses: %s\n", err);
        abort();
    }
    /* gpu is compared as a string: a second gpu= entry leaves bytes after its NUL */
    if (strcmp(sp.gpu, back.gpu) || memcmp(&sp.nodes, &back.nodes, sizeof sp - offsetof(platform_spec, nodes))) {
        fprintf(stderr, "the platform's loong_spec does not read back to the same spec\n");
        abort();
    }
    free(xml);
    return 0;
}
