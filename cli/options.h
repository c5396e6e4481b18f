/* options.h — clgemma's command line: one table of commands and one of options (flag, argument, help,
 * the commands that take it) drive both the parsing and `clgemma --help`, so the usage cannot drift
 * from what is parsed. Errors: one line on stderr, exit 1. */
#ifndef CLGEMMA_CLI_OPTIONS_H
#define CLGEMMA_CLI_OPTIONS_H

#include "engine.h"

/* fetched by deploy/fetch_llama_ref.sh: the real Gemma 4 vocabulary */
#define SYNTH_VOCAB ".cache/llama.cpp/models/ggml-vocab-gemma-4.gguf"
#define SYNTH_VOCAB_QWEN35 ".cache/llama.cpp/models/ggml-vocab-qwen35.gguf"

#define MAX_PROMPTS 64

typedef enum cli_cmd {
    CMD_DEVICES, CMD_GENERATE, CMD_BATCH, CMD_TOKENIZE, CMD_LOGITS, CMD_BENCH, CMD_SYNTH, CMD_INFO, CMD_VBENCH,
    CMD_COUNT
} cli_cmd;

typedef struct cli_args {
    cli_cmd command;
    const char *cmd;      /* its name */
    const char *model, *device, *out_path;
    const char *synthetic, *synth_type;
    int synth_layers;     /* --layers N: the first N layers (bench --synthetic, synth) */
    const char *synth_model, *mix, *vocab; /* synth MODEL, --mix, --vocab */
    int sparse;           /* synth --sparse: the data left a hole (type checks) */
    const char *prompts[MAX_PROMPTS];
    int n_prompts;
    int n_predict;        /* -n; -1: the command's default */
    int n_prompt_bench, reps, batch, ctx, max_batch;
    const char *kv_type;  /* --kv-type: NULL = f16 */
    int seqs, kv_tokens;  /* info --seqs, --kv-tokens: 0 = sized as the server sizes them */
    int chat, ids, profile, hold;
    int plain;            /* devices --plain: one "P:D TYPE BYTES NAME" line a device */
    int draft_max;        /* generate --draft-max K: drafts of up to K tokens (0: off; 4 with --draft) */
    const char *draft_path; /* generate --draft FILE / bench --drafter FILE: an MTP drafter beside -m */
    const char *bench_drafts; /* bench --draft K[,K...]: draft tokens each decode step verifies and rolls back */
    const char *mmproj;   /* vbench --mmproj FILE: the vision projector beside -m */
    const char *image_budgets; /* vbench --image-tokens T[,T...]: soft-token budgets measured */
    const char *save_images;   /* vbench --save-images DIR: the bench's images as PNG files (for llama.cpp) */
    const char *settings[ENGINE_MAX_SETTINGS]; /* bench --set NAME=VALUE (measurement settings) */
    int n_settings;
    sampler_params sp;
} cli_args;

/* Fills a from argv. --help prints the usage (of one command after its name) and exits 0. */
void cli_parse(cli_args *a, int argc, char **argv);
/* "clgemma: " + fmt with a + newline on stderr, exit 1 */
void cli_die(const char *fmt, const char *a) __attribute__((noreturn));

#endif
