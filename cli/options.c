/* options.c — the command and option tables of clgemma, their parser and --help (see options.h). */
#include "options.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct { const char *name, *synopsis, *help; } COMMANDS[CMD_COUNT] = {
    [CMD_DEVICES] = { "devices", "", "the OpenCL platforms and devices (what --device P:D names)" },
    [CMD_GENERATE] = { "generate", "-m FILE -p TEXT",
                       "continue a prompt (with --chat: answer it), printing the text as it comes" },
    [CMD_BATCH] = { "batch", "-m FILE -p TEXT [-p TEXT ...]",
                    "several prompts decoded together; one line of output each" },
    [CMD_TOKENIZE] = { "tokenize", "-m FILE -p TEXT",
                       "the prompt's token ids (without --chat only the file's vocabulary is read)" },
    [CMD_LOGITS] = { "logits", "-m FILE -p TEXT -o OUT.f32", "the last position's logits as raw float32" },
    [CMD_BENCH] = { "bench", "-m FILE | --synthetic MODEL", "prompt and decode speed: one JSON line on stdout" },
    [CMD_SYNTH] = { "synth", "MODEL -o OUT.gguf",
                    "a Gemma 4 or Qwen 3.6 GGUF with random weights, laid out as llama.cpp's converter and "
                    "llama-quantize lay it out (names, keys, type mix, the real vocabulary); MODEL: gemma4-e2b, "
                    "gemma4-e4b, gemma4-26b-a4b, gemma4-31b, qwen35-27b, qwen35-35b-a3b (real shapes), gemma4-tiny, "
                    "gemma4-tiny-moe, gemma4-tiny-e, qwen35-tiny, qwen35-tiny-moe (tests); or a vision "
                    "projector (mmproj) as convert_hf_to_gguf --mmproj writes it, projecting to the width of the text "
                    "MODEL of the same name: gemma4v-e2b, gemma4v-e4b, gemma4v-26b-a4b, gemma4v-31b (reported tower "
                    "shapes), gemma4v-tiny, gemma4v-tiny-e (tests)" },
    [CMD_INFO] = { "info", "-m FILE [--ctx N] [--seqs N] [--kv-type T]",
                   "how the model fits the device: weights, KV bytes per token by kind of layer, the tokens and "
                   "sequences the memory left holds, recommended --ctx and --max-seqs (the file's metadata only: "
                   "it answers where the model does not fit, exit status 1 then)" },
    [CMD_VBENCH] = { "vbench", "-m FILE --mmproj FILE",
                     "image speed: encode time per image alone and 8 at once, time to first token of a 1-image "
                     "prompt (fresh and cached), 8 such prompts in one step; medians of -r repetitions, a table "
                     "on stdout (-o FILE: JSON lines too), images made in memory at each budget's exact size" },
};

enum kind { K_FLAG, K_STR, K_INT, K_SEED, K_FLOAT, K_PROMPT, K_SET, K_HELP };

typedef struct cli_option {
    const char *flag, *alt; /* "-m", "--model"; alt NULL for one spelling */
    const char *arg;        /* the value's name; NULL: a flag */
    unsigned cmds;          /* the commands that take it: bits 1 << CMD_x */
    enum kind kind;
    size_t off;             /* its field in cli_args */
    double lo, hi;          /* K_INT, K_FLOAT: the accepted range */
    const char *help;
} cli_option;

#define B(c) (1u << CMD_##c)
#define SAMPLING (B(GENERATE) | B(BATCH))
#define LOADING (SAMPLING | B(LOGITS) | B(BENCH)) /* load a model (tokenize does with --chat) */
#define SIZING (LOADING | B(INFO))                  /* options that size the engine */
#define F(field) offsetof(cli_args, field)

/* a flag listed twice is read by the first row that takes the command */
static const cli_option OPTIONS[] = {
    { "-m", "--model", "FILE", SIZING | B(TOKENIZE) | B(VBENCH), K_STR, F(model), 0, 0, "GGUF model file" },
    { "-p", "--prompt", "TEXT", SAMPLING | B(TOKENIZE) | B(LOGITS), K_PROMPT, F(prompts), 0, 0,
      "the prompt (batch: once per sequence)" },
    { "-p", "--prompt", "N", B(BENCH), K_INT, F(n_prompt_bench), 1, 1 << 20, "prompt tokens (default 512)" },
    { "-n", NULL, "N", SAMPLING | B(BENCH), K_INT, F(n_predict), 0, 1 << 20,
      "tokens to generate (default 128; batch 32)" },
    { "--chat", NULL, NULL, SAMPLING | B(TOKENIZE) | B(LOGITS), K_FLAG, F(chat), 0, 0,
      "the prompt as one user message through the model's chat template" },
    { "--ids", NULL, NULL, SAMPLING, K_FLAG, F(ids), 0, 0, "print token ids, not text" },
    { "--plain", NULL, NULL, B(DEVICES), K_FLAG, F(plain), 0, 0,
      "one line a device, \"P:D TYPE MEMORY_BYTES NAME\" (TYPE GPU, CPU or other), for scripts" },
    { "--draft-max", NULL, "K", B(GENERATE), K_INT, F(draft_max), 0, 16,
      "speculative decoding: drafts of up to K tokens looked up in the prompt and output so far, verified in one "
      "step; sampled output keeps plain sampling's distribution (default 0: off; 4 with --draft)" },
    { "--draft", NULL, "FILE", B(GENERATE), K_STR, F(draft_path), 0, 0,
      "draft with this MTP drafter (a gemma4-assistant GGUF beside a Gemma 4 -m) instead of prompt lookup" },
    { "-o", NULL, "FILE", B(LOGITS) | B(SYNTH) | B(VBENCH), K_STR, F(out_path), 0, 0,
      "output file (vbench: the figures as JSON lines, one per budget)" },
    { "--temp", NULL, "T", SAMPLING, K_FLOAT, F(sp.temperature), 0, 100, "temperature (default 0: greedy)" },
    { "--top-k", NULL, "K", SAMPLING, K_INT, F(sp.top_k), 0, 1 << 20, "keep the K most likely (default 0: off)" },
    { "--top-p", NULL, "P", SAMPLING, K_FLOAT, F(sp.top_p), 0, 1, "nucleus sampling (default 1: off)" },
    { "--min-p", NULL, "P", SAMPLING, K_FLOAT, F(sp.min_p), 0, 1, "drop tokens below P x the best (default 0: off)" },
    { "--repeat-penalty", NULL, "R", SAMPLING, K_FLOAT, F(sp.repetition_penalty), 0.01, 100,
      "llama.cpp's repetition penalty over the last 64 tokens, prompt included (default 1: off)" },
    { "--frequency-penalty", NULL, "F", SAMPLING, K_FLOAT, F(sp.frequency_penalty), -2, 2,
      "OpenAI's frequency penalty (default 0)" },
    { "--presence-penalty", NULL, "P", SAMPLING, K_FLOAT, F(sp.presence_penalty), -2, 2,
      "OpenAI's presence penalty (default 0)" },
    { "--seed", NULL, "S", SAMPLING | B(SYNTH), K_SEED, F(sp.seed), 0, 0, "random seed (default 0)" },
    { "--ctx", NULL, "N", SIZING | B(VBENCH), K_INT, F(ctx), 16, 1 << 20,
      "context tokens per sequence (default: the model's, at most 8192; bench: what the run needs)" },
    { "--max-batch", NULL, "N", SIZING | B(VBENCH), K_INT, F(max_batch), 1, 65536,
      "tokens per forward chunk (default 2048 on a GPU with 16 GiB to spare after the weights, else 512)" },
    { "--device", NULL, "P:D", SIZING | B(TOKENIZE) | B(VBENCH), K_STR, F(device), 0, 0,
      "OpenCL platform:device (default: env CLGEMMA_DEVICE, else the first GPU, else the first device)" },
    { "--kv-type", NULL, "T", SIZING | B(VBENCH), K_STR, F(kv_type), 0, 0,
      "the KV cache's type: f16 (default), q8_0 (1.9x the tokens), q4 (3.6x; llama.cpp's q4_0)" },
    { "--seqs", NULL, "N", B(INFO), K_INT, F(seqs), 1, 256,
      "sequences at once (default: as the server sizes them, from the memory left)" },
    { "--kv-tokens", NULL, "N", B(INFO), K_INT, F(kv_tokens), 16, 1 << 30,
      "tokens of the KV cache's full-attention layers, all sequences together (default: from the memory left)" },
    { "-r", NULL, "N", B(BENCH) | B(VBENCH), K_INT, F(reps), 1, 1000, "repetitions; medians are reported (default 3)" },
    { "-b", NULL, "N", B(BENCH), K_INT, F(batch), 1, 256, "sequences decoded together (default 1)" },
    { "-b", NULL, "N", B(VBENCH), K_INT, F(batch), 1, 64, "images encoded at once and prompts in one step (default 8)" },
    { "--draft", NULL, "K[,K...]", B(BENCH), K_STR, F(bench_drafts), 0, 0,
      "each decode step also verifies K (0..16) draft tokens per sequence and rolls them back: speculation's "
      "cost; a list gives a line per K from one load (default 0)" },
    { "--drafter", NULL, "FILE", B(BENCH), K_STR, F(draft_path), 0, 0,
      "with --draft K: also time K steps of this MTP drafter (gemma4-assistant GGUF) for every sequence" },
    { "--profile", NULL, NULL, B(BENCH) | B(VBENCH), K_FLAG, F(profile), 0, 0,
      "per-kernel times of the last repetition (vbench: of one more 1-image encode per budget)" },
    { "--hold", NULL, NULL, B(BENCH), K_FLAG, F(hold), 0, 0,
      "each step's launches wait until all are enqueued: device_ms_per_step is the device's time alone (steps "
      "then cost enqueue plus device time)" },
    { "--set", NULL, "NAME=VALUE", B(BENCH) | B(VBENCH) | B(LOGITS), K_SET, F(settings), 0, 0,
      "a measurement setting: an ops policy threshold (docs/PERF.md); repeatable" },
    { "--synthetic", NULL, "MODEL", B(BENCH), K_STR, F(synthetic), 0, 0,
      "random weights of a real shape made on the device, no file: gemma4-26b-a4b, gemma4-31b, gemma4-e4b, "
      "gemma4-e2b" },
    { "--type", NULL, "T", B(BENCH), K_STR, F(synth_type), 0, 0, "--synthetic's weights: q4_k (default), q8_0, bf16" },
    { "--layers", NULL, "N", B(BENCH) | B(SYNTH), K_INT, F(synth_layers), 1, 1024,
      "only the shape's first N layers (tests)" },
    { "--mix", NULL, "MIX", B(SYNTH), K_STR, F(mix), 0, 0,
      "weight types as llama-quantize gives them (q4_k_m, the default; q8_0; q4_k = --pure Q4_K_S) or "
      "convert_hf_to_gguf (bf16, f32); a vision projector: f16 (the default), bf16, f32" },
    { "--vocab", NULL, "FILE", B(SYNTH), K_STR, F(vocab), 0, 0,
      "GGUF whose tokenizer.* keys are copied (default " SYNTH_VOCAB ", qwen35-*: " SYNTH_VOCAB_QWEN35 ", from sh "
      "deploy/fetch_llama_ref.sh)" },
    { "--sparse", NULL, NULL, B(SYNTH), K_FLAG, F(sparse), 0, 0, "leave the data a hole (type checks)" },
    { "--mmproj", NULL, "FILE", B(VBENCH), K_STR, F(mmproj), 0, 0, "the vision projector (mmproj GGUF) beside -m" },
    { "--image-tokens", NULL, "T[,T...]", B(VBENCH), K_STR, F(image_budgets), 0, 0,
      "soft-token budgets to measure, each 70, 140, 280, 560 or 1120 (default 70,280,1120); each image is made "
      "at a size of exactly T tokens" },
    { "--save-images", NULL, "DIR", B(VBENCH), K_STR, F(save_images), 0, 0,
      "write the images of the 8-at-once set as DIR/vbench-T-K.png (K from 0), the bytes the bench encodes; "
      "without -m only that" },
    { "-h", "--help", NULL, ~0u, K_HELP, 0, 0, 0, "this text; after a command, that command's" },
};

#define N_OPTIONS (sizeof OPTIONS / sizeof OPTIONS[0])
#define WIDTH 110  /* help lines wrap before this column */
#define HELP_COL 28

void cli_die(const char *fmt, const char *a)
{
    fprintf(stderr, "clgemma: ");
    fprintf(stderr, fmt, a);
    fprintf(stderr, "\n");
    exit(1);
}

/* text starting at column col, wrapped before WIDTH with continuation lines at column indent */
static void wrap(const char *text, int col, int indent)
{
    int first = 1;
    for (const char *p = text; *p;) {
        while (*p == ' ') p++;
        int n = (int)strcspn(p, " ");
        if (!n) break;
        if (!first && col + 1 + n > WIDTH) col = fprintf(stderr, "\n%*s", indent, "") - 1;
        else if (!first) col += fprintf(stderr, " ");
        col += fprintf(stderr, "%.*s", n, p);
        p += n;
        first = 0;
    }
    fputc('\n', stderr);
}

/* "generate, batch, bench": the commands in cmds */
static void cmd_list(unsigned cmds, char *out, size_t cap)
{
    size_t o = 0;
    out[0] = 0;
    for (int c = 0; c < CMD_COUNT && o + 1 < cap; c++)
        if (cmds & (1u << c)) o += (size_t)snprintf(out + o, cap - o, "%s%s", o ? ", " : "", COMMANDS[c].name);
}

/* one: a command, or -1 for every command (each option then says which take it) */
static void usage(int one)
{
    if (one >= 0) {
        fprintf(stderr, "usage: clgemma %s %s [options]\n  ", COMMANDS[one].name, COMMANDS[one].synopsis);
        wrap(COMMANDS[one].help, 2, 2);
    } else {
        fprintf(stderr, "usage: clgemma COMMAND [options]   (clgemma COMMAND --help: that command's options)\n");
        for (int c = 0; c < CMD_COUNT; c++) {
            int col = fprintf(stderr, "  %s %s", COMMANDS[c].name, COMMANDS[c].synopsis);
            fprintf(stderr, "%*s", col < 40 ? 40 - col : 1, "");
            wrap(COMMANDS[c].help, col < 40 ? 40 : col + 1, 40);
        }
    }
    fprintf(stderr, "options:\n");
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const cli_option *o = &OPTIONS[i];
        if (one >= 0 && !(o->cmds & (1u << one))) continue;
        int col = fprintf(stderr, "  %s%s%s%s%s", o->flag, o->alt ? ", " : "", o->alt ? o->alt : "", o->arg ? " " : "",
                          o->arg ? o->arg : "");
        if (col >= HELP_COL) col = fprintf(stderr, "\n%*s", HELP_COL, "") - 1;
        else col += fprintf(stderr, "%*s", HELP_COL - col, "");
        char help[512], cmds[96];
        cmd_list(o->cmds, cmds, sizeof cmds);
        if (one < 0 && o->cmds != ~0u) snprintf(help, sizeof help, "%s [%s]", o->help, cmds);
        else snprintf(help, sizeof help, "%s", o->help);
        wrap(help, col, HELP_COL);
    }
    fprintf(stderr, "Errors: one line on stderr, exit status 1. CLGEMMA_VERBOSE=1: loading progress on stderr.\n");
}

static long parse_int(const char *flag, const char *v, long lo, long hi)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || end == v || x < lo || x > hi) {
        fprintf(stderr, "clgemma: %s expects an integer in [%ld, %ld], got '%s'\n", flag, lo, hi, v);
        exit(1);
    }
    return x;
}

static float parse_float(const char *flag, const char *v, float lo, float hi)
{
    char *end;
    errno = 0;
    float x = strtof(v, &end);
    if (errno || *end || end == v || !(x >= lo && x <= hi)) {
        fprintf(stderr, "clgemma: %s expects a number in [%g, %g], got '%s'\n", flag, lo, hi, v);
        exit(1);
    }
    return x;
}

/* the row of flag f for the command; when only other commands take f, says so and exits */
static const cli_option *find_option(const cli_args *a, const char *f)
{
    unsigned others = 0;
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const cli_option *o = &OPTIONS[i];
        if (strcmp(f, o->flag) && (!o->alt || strcmp(f, o->alt))) continue;
        if (o->cmds & (1u << a->command)) return o;
        others |= o->cmds;
    }
    if (!others) return NULL;
    char list[96], msg[192];
    cmd_list(others, list, sizeof list);
    snprintf(msg, sizeof msg, "%s: %s is only for %s", a->cmd, f, list);
    cli_die("%s", msg);
}

static void set_value(cli_args *a, const cli_option *o, const char *f, const char *v)
{
    char *field = (char *)a + o->off;
    switch (o->kind) {
    case K_FLAG: *(int *)field = 1; break;
    case K_STR: *(const char **)field = v; break;
    case K_INT: *(int *)field = (int)parse_int(f, v, (long)o->lo, (long)o->hi); break;
    case K_SEED: *(uint64_t *)field = (uint64_t)parse_int(f, v, 0, LONG_MAX); break;
    case K_FLOAT: *(float *)field = parse_float(f, v, (float)o->lo, (float)o->hi); break;
    case K_PROMPT:
        if (a->n_prompts == MAX_PROMPTS) cli_die("too many prompts (max %s)", "64");
        a->prompts[a->n_prompts++] = v;
        break;
    case K_SET:
        if (!strchr(v, '=') || v[0] == '=') cli_die("--set wants NAME=VALUE, got '%s'", v);
        if (a->n_settings == ENGINE_MAX_SETTINGS) cli_die("too many --set (at most %s)", "32");
        a->settings[a->n_settings++] = v;
        break;
    case K_HELP: usage((int)a->command); exit(0);
    }
}

void cli_parse(cli_args *a, int argc, char **argv)
{
    memset(a, 0, sizeof *a);
    sampler_params_default(&a->sp);
    a->n_predict = -1;
    a->n_prompt_bench = 512;
    a->reps = 3;
    a->batch = 1;
    if (argc < 2) { usage(-1); exit(1); }
    a->cmd = argv[1];
    if (!strcmp(a->cmd, "-h") || !strcmp(a->cmd, "--help") || !strcmp(a->cmd, "help")) { usage(-1); exit(0); }
    int c = 0;
    while (c < CMD_COUNT && strcmp(a->cmd, COMMANDS[c].name)) c++;
    if (c == CMD_COUNT) cli_die("unknown command '%s' (see clgemma --help)", a->cmd);
    a->command = (cli_cmd)c;
    if (a->command == CMD_VBENCH) a->batch = 8; /* images at once: llama.cpp's 8 slots of the issue's table */
    for (int i = 2; i < argc; i++) {
        const char *f = argv[i];
        const cli_option *o = find_option(a, f);
        if (!o && a->command == CMD_SYNTH && f[0] != '-') {
            if (a->synth_model) cli_die("synth takes one MODEL, got '%s' too", f);
            a->synth_model = f;
            continue;
        }
        if (!o) cli_die("unknown option '%s' (see clgemma --help)", f);
        if (o->arg && i + 1 == argc) cli_die("%s needs a value", f);
        set_value(a, o, f, o->arg ? argv[++i] : NULL);
    }
}
