/* qwen35_drift — the engine's side of the recurrent-state drift test (tests/qwen35_drift_check.py,
 * docs/design-qwen35.md 6.3): a prompt prefilled in one step, then N greedy tokens generated one per
 * step (the decode path: delta_step updating the FP32 state in place), each step's logits kept.
 *   build/tools/qwen35_drift MODEL.gguf N PROMPT_IDS OUT
 * PROMPT_IDS: comma-separated token ids. OUT (little-endian): int32 n_tok, int32 n_vocab, int32 n_prompt,
 * int32 tokens[n_tok] (the prompt, then the generated ones), float32 logits[n_tok - n_prompt + 1][n_vocab]
 * (the prompt's last position, then each generated token's, the last one fed too). Greedy ties go to the
 * lowest id, as numpy's argmax. Exit 1 on any engine error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

static int argmax(const float *row, uint32_t n)
{
    uint32_t best = 0;
    for (uint32_t i = 1; i < n; i++)
        if (row[i] > row[best]) best = i;
    return (int)best;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: qwen35_drift MODEL.gguf N PROMPT_IDS OUT\n");
        return 2;
    }
    int n_gen = atoi(argv[2]), n_prompt = 0;
    int32_t prompt[256];
    for (char *p = argv[3]; *p && n_prompt < 256; n_prompt++) {
        prompt[n_prompt] = (int32_t)strtol(p, &p, 10);
        if (*p == ',') p++;
    }
    if (n_gen < 1 || n_prompt < 1) {
        fprintf(stderr, "qwen35_drift: N and the prompt must not be empty\n");
        return 2;
    }
    int n_tok = n_prompt + n_gen;
    char err[1024];
    engine_opts opts = { .n_ctx = n_tok, .max_seqs = 1 };
    engine *e = NULL;
    if (engine_load(&e, argv[1], &opts, err, sizeof err)) {
        fprintf(stderr, "qwen35_drift: %s\n", err);
        return 1;
    }
    uint32_t V = engine_get_info(e)->n_vocab;
    int32_t *tok = malloc(sizeof *tok * (size_t)n_tok);
    float *rows = malloc(sizeof *rows * (size_t)(n_gen + 1) * V);
    if (!tok || !rows) {
        fprintf(stderr, "qwen35_drift: out of memory\n");
        return 1;
    }
    memcpy(tok, prompt, sizeof *tok * (size_t)n_prompt);
    int seq = engine_seq_new(e), rc = 0;
    engine_item it = { .seq = seq, .tokens = tok, .n_tokens = n_prompt, .logits = rows };
    for (int i = 0; !rc && i <= n_gen; i++) {
        if (i > 0) it = (engine_item){ .seq = seq, .tokens = tok + n_prompt + i - 1, .n_tokens = 1,
                                       .logits = rows + (size_t)i * V };
        if ((rc = engine_step(e, &it, 1, err, sizeof err))) break;
        if (i < n_gen) tok[n_prompt + i] = argmax(rows + (size_t)i * V, V);
    }
    if (rc) fprintf(stderr, "qwen35_drift: step: %s\n", err);
    FILE *f = rc ? NULL : fopen(argv[4], "wb");
    int32_t head[3] = { n_tok, (int32_t)V, n_prompt };
    if (!rc && (!f || fwrite(head, sizeof head, 1, f) != 1 || fwrite(tok, sizeof *tok, (size_t)n_tok, f) != (size_t)n_tok ||
                fwrite(rows, sizeof *rows * V, (size_t)n_gen + 1, f) != (size_t)n_gen + 1)) {
        fprintf(stderr, "qwen35_drift: writing %s failed\n", argv[4]);
        rc = 1;
    }
    if (f && fclose(f)) rc = 1;
    free(tok);
    free(rows);
    engine_destroy(e);
    return rc ? 1 : 0;
}
