/* fuzz_request.c — libFuzzer harness for the request parser (fcgi/json_io.c) and the stop-string
 * filter (fcgi/stop.c). The first byte picks the target:
 *   0: chat body, 1: completions body — parsing never crashes or leaks; a request that parses
 *      satisfies every promise of the typed struct, an error has a status and a JSON body;
 *   2: stop filter — the text released equals the input up to the earliest stop string. */
#include <json-c/json.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json_io.h"
#include "stop.h"

#define ASSERT(c) do { if (!(c)) { __builtin_trap(); } } while (0)

static void check_gen(const api_gen *g)
{
    ASSERT(g->max_tokens == -1 || g->max_tokens >= 1);
    ASSERT(g->n >= 1 && g->n <= API_MAX_N);
    ASSERT(g->sampling.temperature >= 0 && g->sampling.temperature <= 2);
    ASSERT(g->sampling.top_p >= 0 && g->sampling.top_p <= 1);
    ASSERT(g->sampling.top_k >= 0);
    ASSERT(g->sampling.min_p >= 0 && g->sampling.min_p <= 1);
    ASSERT(g->sampling.repetition_penalty > 0);
    ASSERT(g->n_stop >= 0 && g->n_stop <= API_MAX_STOP);
    for (int i = 0; i < g->n_stop; i++) ASSERT(g->stop[i] && g->stop_len[i] > 0 && strlen(g->stop[i]) == g->stop_len[i]);
    ASSERT(g->stream == 0 || g->stream == 1);
    ASSERT(!g->include_usage || g->stream);
}

static void check_error(const api_error *e)
{
    ASSERT(e->status == 400 || e->status == 413 || e->status == 500);
    ASSERT(e->message[0]);
    char *body = api_error_body(e);
    ASSERT(body);
    json_object *o = json_tokener_parse(body), *err, *msg;
    ASSERT(o && json_object_object_get_ex(o, "error", &err) && json_object_object_get_ex(err, "message", &msg));
    json_object_put(o);
    free(body);
}

static void fuzz_parse(int chat, const char *d, size_t n)
{
    api_error e;
    memset(&e, 0, sizeof e);
    if (chat) {
        api_chat_request r;
        if (json_parse_chat(d, n, &r, &e) == 0) {
            ASSERT(r.model && r.n_msgs >= 1 && r.msgs);
            for (int i = 0; i < r.n_msgs; i++) {
                ASSERT(r.msgs[i].role <= ROLE_TOOL);
                ASSERT(r.msgs[i].content ? strlen(r.msgs[i].content) == r.msgs[i].len
                                         : r.msgs[i].role == ROLE_ASSISTANT && r.msgs[i].tool_calls);
                ASSERT(!r.msgs[i].tool_call_id == (r.msgs[i].role != ROLE_TOOL));
            }
            check_gen(&r.gen);
            api_chat_request_free(&r);
        } else {
            check_error(&e);
        }
    } else {
        api_completion_request r;
        if (json_parse_completion(d, n, &r, &e) == 0) {
            ASSERT(r.model && r.prompts && r.n_prompts >= 1 && r.n_prompts <= API_MAX_PROMPTS);
            for (int i = 0; i < r.n_prompts; i++) {
                const api_prompt *p = &r.prompts[i];
                ASSERT(p->text ? strlen(p->text) == p->len && !p->ids : p->ids && p->n_ids >= 1);
                for (int k = 0; !p->text && k < p->n_ids; k++) ASSERT(p->ids[k] >= 0);
            }
            check_gen(&r.gen);
            api_completion_request_free(&r);
        } else {
            check_error(&e);
        }
    }
}

/* input: stops separated by '\x01' up to '\x02', then pieces separated by '\x01' */
static void fuzz_stops(const char *d, size_t n)
{
    const char *sep = memchr(d, 2, n);
    if (!sep) return;
    const char *stops[STOP_MAX];
    size_t lens[STOP_MAX];
    int ns = 0;
    for (const char *p = d; p < sep && ns < STOP_MAX;) {
        const char *q = memchr(p, 1, (size_t)(sep - p));
        if (!q) q = sep;
        if (q > p) { stops[ns] = p; lens[ns] = (size_t)(q - p); ns++; }
        p = q + 1;
    }
    stop_filter f;
    ASSERT(stop_filter_init(&f, stops, lens, ns) == 0);
    const char *text = sep + 1;
    size_t tn = n - (size_t)(text - d);
    char *whole = malloc(tn + 1), *out = malloc(tn + 1);
    size_t wn = 0, on = 0;
    int stopped = 0;
    for (const char *p = text; p < text + tn && !stopped;) {
        const char *q = memchr(p, 1, (size_t)(text + tn - p));
        if (!q) q = text + tn;
        memcpy(whole + wn, p, (size_t)(q - p));
        wn += (size_t)(q - p);
        const char *o;
        size_t ol;
        int r = stop_filter_push(&f, p, (size_t)(q - p), &o, &ol);
        ASSERT(r == 0 || r == 1);
        memcpy(out + on, o, ol);
        on += ol;
        stopped = r;
        p = q + 1;
    }
    if (!stopped) {
        const char *o;
        size_t ol;
        stop_filter_finish(&f, &o, &ol);
        memcpy(out + on, o, ol);
        on += ol;
    }
    /* reference: the earliest occurrence of any stop string in what was fed */
    size_t cut = wn;
    for (int i = 0; i < ns; i++) {
        const char *m = memmem(whole, wn, stops[i], lens[i]);
        if (m && (size_t)(m - whole) < cut) cut = (size_t)(m - whole);
    }
    ASSERT(stopped == (cut < wn));
    ASSERT(on == cut && !memcmp(out, whole, on));
    free(whole);
    free(out);
    stop_filter_free(&f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    const char *d = (const char *)data + 1;
    switch (data[0] % 3) {
    case 0: fuzz_parse(1, d, size - 1); break;
    case 1: fuzz_parse(0, d, size - 1); break;
    default: fuzz_stops(d, size - 1); break;
    }
    return 0;
}
