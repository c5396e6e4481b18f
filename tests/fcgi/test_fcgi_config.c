/* test_fcgi_config.c — clgemma-fcgi options (fcgi/config.c): the command line, the config file, the
 * command line winning over the file, range errors that name the option, derived values (the
 * sizes a worker takes once its engine says how many sequences its KV cache holds). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "config.h"
#include "engine.h"
#include "spec_step.h"

/* parses a NULL-terminated argument list after the program name */
static int parse(server_config *c, char *err, size_t errlen, ...)
{
    char *argv[32] = { "clgemma-fcgi" };
    int argc = 1;
    va_list ap;
    va_start(ap, errlen);
    for (char *a; argc < 31 && (a = va_arg(ap, char *));) argv[argc++] = a;
    va_end(ap);
    config_defaults(c);
    err[0] = 0;
    return config_parse_args(c, argc, argv, err, errlen);
}

static void test_defaults_and_derived_values(void)
{
    server_config c;
    char err[256];
    CHECK(parse(&c, err, sizeof err, "-m", "/x/models/gemma-3-270m.gguf", NULL) == 0, "parse: %s", err);
    CHECK(config_finish(&c, err, sizeof err) == 0, "finish: %s", err);
    CHECK(!strcmp(c.model_id, "gemma-3-270m"), "model id '%s'", c.model_id);
    CHECK(c.max_seqs == 0 && c.max_queue == -1 && c.max_batch == 0 && c.threads == 0, "defaults %d %d %d %d",
          c.max_seqs, c.max_queue, c.max_batch, c.threads);
    CHECK(c.queue_timeout == 30 && c.kv_tokens == 0, "queue timeout %d, kv tokens %d", c.queue_timeout, c.kv_tokens);
    /* sized at load: the engine's sequences, 4 queue places each (at most 512), both + 4 threads */
    worker_sizes ws;
    CHECK(config_sizes(&c, 7, &ws, err, sizeof err) == 0 && ws.max_seqs == 7 && ws.max_queue == 28 &&
          ws.threads == 39, "sizes for 7: %d %d %d", ws.max_seqs, ws.max_queue, ws.threads);
    CHECK(config_sizes(&c, 256, &ws, err, sizeof err) == 0 && ws.max_seqs == 256 && ws.max_queue == 512 &&
          ws.threads == 772, "sizes for 256: %d %d %d", ws.max_seqs, ws.max_queue, ws.threads);
    /* given: finish derives the rest, the engine's count no longer matters */
    CHECK(parse(&c, err, sizeof err, "-m", "m", "--max-seqs", "4", NULL) == 0 && config_finish(&c, err, sizeof err) == 0,
          "finish: %s", err);
    CHECK(c.max_queue == 16 && c.threads == 24, "derived from --max-seqs 4: %d %d", c.max_queue, c.threads);
    CHECK(config_sizes(&c, 100, &ws, err, sizeof err) == 0 && ws.max_seqs == 4 && ws.max_queue == 16 &&
          ws.threads == 24, "sizes with --max-seqs 4: %d %d %d", ws.max_seqs, ws.max_queue, ws.threads);
    CHECK(parse(&c, err, sizeof err, "-m", "m", "--queue-timeout", "5", "--kv-tokens", "4096", "--max-queue", "0", NULL) == 0 &&
          c.queue_timeout == 5 && c.kv_tokens == 4096 && c.max_queue == 0, "parse: %s", err);
    CHECK(c.n_workers == 1 && c.n_listen == 0, "one worker on fd 0");
    CHECK(c.default_max_tokens == 1024 && c.request_timeout == 300, "bounds %d %d", c.default_max_tokens,
          c.request_timeout);
}

static void test_options_both_spellings(void)
{
    server_config c;
    char err[256];
    CHECK(parse(&c, err, sizeof err, "-m", "m.gguf", "--max-batch", "64", "--ctx=2048", "--devices", "0:0,0:1",
                "--listen", "unix:/a,unix:/b", "--socket-mode", "0600", "-v", "-v", "--default-max-tokens", "0", "--request-timeout=5",
                "--stats-dir", "/run/pool", "--step-tokens", "96", NULL) == 0,
          "parse: %s", err);
    CHECK(!strcmp(c.stats_dir, "/run/pool"), "stats-dir '%s'", c.stats_dir);
    CHECK(c.default_max_tokens == 0 && c.request_timeout == 5, "bounds %d %d", c.default_max_tokens, c.request_timeout);
    CHECK(c.max_batch == 64 && c.step_tokens == 96, "max-batch %d, step-tokens %d", c.max_batch, c.step_tokens);
    CHECK(c.ctx == 2048, "ctx %d", c.ctx);
    CHECK(c.n_workers == 2 && !strcmp(c.devices[1], "0:1"), "devices %d '%s'", c.n_workers, c.devices[1]);
    CHECK(c.n_listen == 2 && !strcmp(c.listen[0], "unix:/a"), "listen %d", c.n_listen);
    CHECK(c.socket_mode == 0600, "socket mode %o", c.socket_mode);
    CHECK(c.verbose == 2, "verbose %d", c.verbose);
    CHECK(config_finish(&c, err, sizeof err) == 0, "finish: %s", err);
}

/* each bad value fails with one message that names the option */
static void test_bad_values_name_the_option(void)
{
    static const struct { const char *opt, *val, *word; } cases[] = {
        { "--step-tokens", "-5", "--step-tokens" }, { "--step-tokens", "64k", "--step-tokens" },
        { "--max-batch", "-1", "--max-batch" },     { "--max-batch", "65537", "--max-batch" },
        { "--max-batch", "lots", "--max-batch" },   { "--max-seqs", "0", "--max-seqs" },
        { "--ctx", "4k", "--ctx" },                 { "--socket-mode", "0999", "--socket-mode" },
        { "--devices", "0:0,", "--devices" },       { "--listen", ",", "--listen" },
        { "--bogus", "1", "unknown option" },       { "--max-batch", NULL, "needs a value" },
        { "--queue-timeout", "-1", "--queue-timeout" }, { "--kv-tokens", "many", "--kv-tokens" },
        { "--kv-type", "q5", "--kv-type" },         { "--kv-type", "F16", "--kv-type" },
        { "--spec", "eagle", "--spec" },            { "--spec", "", "--spec" },
        { "--draft-max", "0", "--draft-max" },      { "--draft-max", "17", "--draft-max" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        server_config c;
        char err[256];
        int rc = cases[i].val ? parse(&c, err, sizeof err, "-m", "m", cases[i].opt, cases[i].val, NULL)
                              : parse(&c, err, sizeof err, "-m", "m", cases[i].opt, NULL);
        CHECK(rc == -1, "%s %s accepted", cases[i].opt, cases[i].val ? cases[i].val : "");
        CHECK(strstr(err, cases[i].word), "%s %s: '%s' lacks '%s'", cases[i].opt, cases[i].val ? cases[i].val : "",
              err, cases[i].word);
    }
}

static void test_kv_type(void)
{
    static const struct { const char *val; int type; } cases[] = {
        { "f16", ENGINE_KV_F16 }, { "q8_0", ENGINE_KV_Q8_0 }, { "q4", ENGINE_KV_Q4_0 }, { "q4_0", ENGINE_KV_Q4_0 },
    };
    server_config c;
    char err[256];
    CHECK(parse(&c, err, sizeof err, "-m", "m", NULL) == 0 && c.kv_type == ENGINE_KV_F16, "default: %d", c.kv_type);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK(parse(&c, err, sizeof err, "-m", "m", "--kv-type", cases[i].val, NULL) == 0 && c.kv_type == cases[i].type,
              "--kv-type %s: %d (%s)", cases[i].val, c.kv_type, err);
}

static void test_spec(void)
{
    server_config c;
    char err[256];
    CHECK(parse(&c, err, sizeof err, "-m", "m", NULL) == 0 && c.spec == SPEC_MODE_DEFAULT &&
          c.draft_max == SPEC_DRAFT_DEFAULT, "defaults: %d %d", c.spec, c.draft_max);
    CHECK(parse(&c, err, sizeof err, "-m", "m", "--spec", "ngram", "--draft-max=16", NULL) == 0 && c.spec == SPEC_NGRAM &&
          c.draft_max == 16, "ngram 16: %d %d (%s)", c.spec, c.draft_max, err);
    CHECK(parse(&c, err, sizeof err, "-m", "m", "--spec", "off", "--draft-max", "1", NULL) == 0 && c.spec == SPEC_OFF &&
          c.draft_max == 1, "off 1: %d %d (%s)", c.spec, c.draft_max, err);
    CHECK(parse(&c, err, sizeof err, "-m", "m", "--spec", "auto", NULL) == 0 && c.spec == SPEC_AUTO, "auto: %d (%s)",
          c.spec, err);
    CHECK(parse(&c, err, sizeof err, "-m", "m", "--spec", "eagle", NULL) != 0 && strstr(err, "ngram, mtp, off or auto"),
          "unknown mode: '%s'", err);
    CHECK(parse(&c, err, sizeof err, "-m", "m", "--spec", "mtp", "--draft", "d.gguf", NULL) == 0 && c.spec == SPEC_MTP &&
          !strcmp(c.draft, "d.gguf"), "mtp: %d '%s' (%s)", c.spec, c.draft, err);
    CHECK(config_finish(&c, err, sizeof err) == 0, "mtp with a drafter: '%s'", err);
    CHECK(parse(&c, err, sizeof err, "-m", "m", "--spec", "mtp", NULL) == 0 && config_finish(&c, err, sizeof err) != 0 &&
          strstr(err, "--spec mtp needs --draft"), "mtp without a drafter: '%s'", err);
    engine_info gpu = { .draft_rows = ENGINE_DECODE_ROWS }, cpu = { .draft_rows = 0 }, mtp = { .draft_arch = "gemma4-assistant" };
    CHECK(spec_mode_effective(SPEC_AUTO, &gpu) == SPEC_NGRAM && spec_mode_effective(SPEC_AUTO, &cpu) == SPEC_OFF &&
          spec_mode_effective(SPEC_OFF, &gpu) == SPEC_OFF && spec_mode_effective(SPEC_NGRAM, &cpu) == SPEC_NGRAM &&
          spec_mode_effective(SPEC_AUTO, &mtp) == SPEC_MTP, "auto resolved by the engine's drafter and draft_rows");
    /* a recurrent state (Qwen 3.5) rolls rejected drafts back from checkpoints: without them off whatever was asked */
    engine_info hybrid = { .draft_rows = ENGINE_DECODE_ROWS, .fit = { .state_seq_bytes = 823296 } };
    CHECK(spec_mode_effective(SPEC_NGRAM, &hybrid) == SPEC_OFF && spec_mode_effective(SPEC_AUTO, &hybrid) == SPEC_OFF,
          "speculative decoding on a model with a recurrent state and no checkpoints");
    hybrid.state_checkpoints = SPEC_STATE_CHECKPOINTS;
    CHECK(spec_mode_effective(SPEC_NGRAM, &hybrid) == SPEC_NGRAM &&
          spec_mode_effective(SPEC_AUTO, &hybrid) == SPEC_NGRAM,
          "no speculative decoding on a model with a recurrent state and checkpoints");
}

static void test_finish_checks(void)
{
    server_config c;
    char err[256];
    parse(&c, err, sizeof err, NULL);
    CHECK(config_finish(&c, err, sizeof err) == -1 && strstr(err, "no model"), "no model: '%s'", err);
    parse(&c, err, sizeof err, "-m", "m", "--devices", "0:0,0:1,0:2", "--listen", "unix:/a,unix:/b", NULL);
    CHECK(config_finish(&c, err, sizeof err) == -1 && strstr(err, "--listen"), "listen per worker: '%s'", err);
    parse(&c, err, sizeof err, "-m", "m", "--max-seqs", "2", "--threads", "3", NULL);
    CHECK(config_finish(&c, err, sizeof err) == -1 && strstr(err, "--threads"), "too few threads: '%s'", err);
    /* with the sequences sized at load, the same check comes then */
    parse(&c, err, sizeof err, "-m", "m", "--threads", "3", NULL);
    worker_sizes ws;
    CHECK(config_finish(&c, err, sizeof err) == 0, "finish: %s", err);
    CHECK(config_sizes(&c, 4, &ws, err, sizeof err) == -1 && strstr(err, "--threads"), "too few threads: '%s'", err);
}

static void test_protocol(void)
{
    server_config c;
    char err[256];
    CHECK(parse(&c, err, sizeof err, "-m", "m.gguf", NULL) == 0 && !strcmp(c.protocol, "http"), "default http");
    CHECK(parse(&c, err, sizeof err, "-m", "m.gguf", "--protocol", "fastcgi", NULL) == 0 &&
          !strcmp(c.protocol, "fastcgi"), "fastcgi: %s", err);
    CHECK(parse(&c, err, sizeof err, "-m", "m.gguf", "--protocol", "spdy", NULL) == -1 && strstr(err, "--protocol"),
          "unknown protocol: '%s'", err);
}

static void test_file_then_command_line(void)
{
    char path[] = "/tmp/clgemma-config-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd < 0) return;
    FILE *f = fdopen(fd, "w");
    fprintf(f, "# a comment\nmodel = from-file.gguf\nmax-batch = 128   # tokens per chunk\nmax-seqs 2\n\n");
    fclose(f);
    server_config c;
    char err[256];
    CHECK(parse(&c, err, sizeof err, "--max-batch", "32", "--config", path, NULL) == 0, "parse: %s", err);
    CHECK(!strcmp(c.model, "from-file.gguf"), "model from the file: '%s'", c.model);
    CHECK(c.max_seqs == 2, "max-seqs from the file: %d", c.max_seqs);
    CHECK(c.max_batch == 32, "the command line wins whatever the order: %d", c.max_batch);
    f = fopen(path, "w");
    fprintf(f, "model = m\nmax-batch = 0x10\n");
    fclose(f);
    CHECK(parse(&c, err, sizeof err, "--config", path, NULL) == -1 && strstr(err, ":2:") && strstr(err, "--max-batch"),
          "a bad value names the file's line and the option: '%s'", err);
    unlink(path);
}

int main(void)
{
    RUN_TEST(test_defaults_and_derived_values);
    RUN_TEST(test_options_both_spellings);
    RUN_TEST(test_bad_values_name_the_option);
    RUN_TEST(test_kv_type);
    RUN_TEST(test_spec);
    RUN_TEST(test_finish_checks);
    RUN_TEST(test_file_then_command_line);
    RUN_TEST(test_protocol);
    CHECK_EXIT();
}
