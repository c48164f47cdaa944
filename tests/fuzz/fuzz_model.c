/*
 * fuzz_model: model files (`--model FILE`, core/model.h).
 *
 * Contract under test: model_parse() on any text returns 0 with a model that
 * model_validate() accepts, or -1 with a NUL-terminated one-line message;
 * it never reads out of bounds, overflows or leaks. The file name
 * "fuzz.model" gives the default name.
 */
#include <stdio.h>

#include "core/model.h"
#include "fuzz_text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_text(data, size);
    if (!text) return 0;
    model m;
    char err[LOONG_ERRLEN] = "";
    if (model_parse(text, "fuzz.model", &m, err) == 0) {
        char again[LOONG_ERRLEN];
        if (model_validate(&m, again) < 0) {
            fprintf(stderr, "model_parse accepted a model that model_validate refuses: %s\n", again);
            abort();
        }
        (void)model_params(&m);
    } else if (strnlen(err, LOONG_ERRLEN) == LOONG_ERRLEN || !err[0]) {
        fprintf(stderr, "model_parse failed without a message\n");
        abort();
    }
    free(text);
    return 0;
}
