/*
 * fuzz_docs: document lists (core/docs.h): `--docs-file FILE` (one length
 * per line), `--doc-dist FILE` (a "LENGTH WEIGHT" histogram drawn into a
 * packing) and `--docs LIST` (a comma list on the command line).
 *
 * The first input byte picks the reader (mod 3), the rest is the text; the
 * sequence is 1M tokens, 64K for a draw: a histogram of 1-token documents
 * draws one document per token, and at 1M each such input would take
 * milliseconds and intern 8 MB. Contract under test: each returns a layout whose
 * documents are non-empty and add up to at most the sequence, or NULL with a
 * one-line message; never reading out of bounds, overflowing or leaking.
 * Layouts are interned for the life of the process (docs.h), so memory grows
 * with the distinct layouts seen: expected, not a leak.
 */
#include <stdio.h>

#include "core/docs.h"
#include "fuzz_text.h"

#define SEQ      ((uint64_t)1 << 20)
#define DRAW_SEQ ((uint64_t)1 << 16)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    char *text = fuzz_text(data + 1, size - 1);
    if (!text) return 0;
    char err[LOONG_ERRLEN] = "";
    const doc_layout *d;
    uint64_t seq = data[0] % 3 == 1 ? DRAW_SEQ : SEQ;
    switch (data[0] % 3) {
    case 0: d = docs_parse_lines(text, "fuzz.docs", seq, err); break;
    case 1: d = docs_draw_text(text, "fuzz.dist", seq, 42, err); break;
    default: d = docs_parse_list(text, seq, "--docs", err); break;
    }
    free(text);
    if (!d) {
        if (!err[0] || strnlen(err, LOONG_ERRLEN) == LOONG_ERRLEN) abort();
        return 0;
    }
    int n = docs_count(d);
    if (n < 1 || docs_tokens(d) > seq) abort();
    for (int i = 0; i < n; i++)
        if (docs_length(d, i) < 1) abort();
    (void)docs_pairs(d, seq, 0, seq, 0, seq);
    return 0;
}
