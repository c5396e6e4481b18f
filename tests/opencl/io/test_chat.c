/* Chat templates beyond Gemma 4's corpus (tests/opencl/io/test_chat_gemma4.c):
 * - Gemma 3: every conversation of tests/golden/chat_gemma3.json renders byte-identical to jinja2's
 *   rendering of google/gemma-3-*-it's template (tools/gen_chat_corpus.py), or is refused where it raised;
 * - the structural check agrees with jinja2 on whether each text of tests/golden/chat_checks.json parses;
 * - choosing a renderer: the known texts (also without their trailing newline) pick theirs silently, no
 *   template picks the family's silently, an unknown or broken one picks the family's with one note naming
 *   tokenizer.chat_template;
 * - tokenization: on the real Gemma 3 vocabulary (models/gemma-3-270m-q4_k_m.gguf), the ids of each
 *   rendering equal the tokenizer's encoding of the whole text with special-token parsing (llama.cpp's way;
 *   the tokenizer itself is checked against llama.cpp in test_tokenizer) when no message holds control-token
 *   text, and message text holding "<end_of_turn>" never yields that control token.
 * Tolerance: none (byte and id identity). */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "check.h"
#include "gguf.h"
#include "tokenizer_gguf.h"

static json_object *gemma3_doc;

static void test_gemma3_corpus(void)
{
    json_object *cases = json_object_object_get(gemma3_doc, "cases");
    CHECK(json_object_array_length(cases) >= 40, "only %zu conversations", json_object_array_length(cases));
    int passed = 0, refused = 0;
    for (size_t i = 0; i < json_object_array_length(cases); i++) {
        json_object *c = json_object_array_get_idx(cases, i), *opts = json_object_object_get(c, "options"), *v, *exp;
        const char *name = json_object_get_string(json_object_object_get(c, "name"));
        chat_opts o = { 0, 0, "<bos>" };
        if (json_object_object_get_ex(opts, "add_generation_prompt", &v)) o.add_generation_prompt = json_object_get_boolean(v);
        json_object *want = json_object_object_get(json_object_object_get(c, "render"), "gemma3");
        chat_text t;
        char err[256];
        int rc = chat_render(CHAT_TPL_GEMMA3, json_object_object_get(c, "messages"), json_object_object_get(c, "tools"),
                             &o, &t, err, sizeof err);
        if (!json_object_object_get_ex(want, "expected", &exp)) {
            CHECK(rc == -1 && err[0], "%s: jinja2 raised (%s), the renderer returned %d",
                  name, json_object_get_string(json_object_object_get(want, "error")), rc);
            refused += rc == -1;
        } else {
            CHECK(rc == 0, "%s: refused: %s", name, err);
            if (rc == 0) {
                int same = t.len == (size_t)json_object_get_string_len(exp) && !memcmp(t.text, json_object_get_string(exp), t.len);
                CHECK(same, "%s: got '%s' want '%s'", name, t.text, json_object_get_string(exp));
                passed += same;
            }
        }
        if (rc == 0) chat_text_free(&t);
    }
    printf("  gemma3: %d identical, %d refused as jinja2 did\n", passed, refused);
}

static void test_structural_check(void)
{
    json_object *doc = json_object_from_file("tests/golden/chat_checks.json");
    CHECK(doc, "cannot read tests/golden/chat_checks.json");
    if (!doc) return;
    json_object *checks = json_object_object_get(doc, "checks");
    for (size_t i = 0; i < json_object_array_length(checks); i++) {
        json_object *c = json_object_array_get_idx(checks, i), *t = json_object_object_get(c, "text");
        int parses = json_object_get_boolean(json_object_object_get(c, "parses"));
        char err[200] = "";
        int rc = chat_template_check(json_object_get_string(t), (size_t)json_object_get_string_len(t), err, sizeof err);
        CHECK((rc == 0) == parses, "'%s': jinja2 %s, the check says %s", json_object_get_string(t),
              parses ? "parses it" : "does not", rc ? err : "fine");
        CHECK(rc == 0 || !strncmp(err, "line ", 5), "'%s': message '%s'", json_object_get_string(t), err);
    }
    json_object_put(doc);
}

static void test_pick(void)
{
    const char *files[] = { "tests/golden/chat_gemma4.json", "tests/golden/chat_gemma3.json" };
    char note[512];
    for (int f = 0; f < 2; f++) {
        json_object *doc = f ? json_object_get(gemma3_doc) : json_object_from_file(files[f]);
        CHECK(doc, "cannot read %s", files[f]);
        if (!doc) continue;
        json_object_object_foreach(json_object_object_get(doc, "templates"), name, tpl) {
            json_object *tx = json_object_object_get(tpl, "text");
            const char *s = json_object_get_string(tx);
            size_t n = (size_t)json_object_get_string_len(tx);
            /* all real templates pass the structural check */
            char err[200];
            CHECK(chat_template_check(s, n, err, sizeof err) == 0, "%s: %s", name, err);
            for (int cut = 0; cut < 2; cut++) {
                chat_kind k = chat_pick(f ? CHAT_GEMMA3 : CHAT_GEMMA4, s, n - (size_t)cut, note, sizeof note);
                CHECK(!strcmp(chat_kind_name(k), name) && !note[0], "%s (less %d bytes): %s %s", name, cut,
                      chat_kind_name(k), note);
            }
            /* one byte more (a space before it): unknown, the family's template, one note */
            char *m = malloc(n + 2);
            m[0] = ' ';
            memcpy(m + 1, s, n + 1);
            chat_kind k = chat_pick(f ? CHAT_GEMMA3 : CHAT_GEMMA4, m, n + 1, note, sizeof note);
            CHECK(k == (f ? CHAT_TPL_GEMMA3 : CHAT_TPL_GEMMA4_31B) && strstr(note, "tokenizer.chat_template") &&
                  strstr(note, "not a template clgemma knows") && !strchr(note, '\n'), "%s changed: %s '%s'", name,
                  chat_kind_name(k), note);
            free(m);
        }
        json_object_put(doc);
    }
    CHECK(chat_pick(CHAT_GEMMA4, NULL, 0, note, sizeof note) == CHAT_TPL_GEMMA4_31B && !note[0], "gemma4 without: %s", note);
    CHECK(chat_pick(CHAT_GEMMA3, NULL, 0, note, sizeof note) == CHAT_TPL_GEMMA3 && !note[0], "gemma3 without: %s", note);
    const char *broken = "{{ bos_token }}\n{% for m in messages %}{{ m['content'] }}\n{% if x %}";
    chat_kind k = chat_pick(CHAT_GEMMA4, broken, strlen(broken), note, sizeof note);
    CHECK(k == CHAT_TPL_GEMMA4_31B && strstr(note, "tokenizer.chat_template does not parse") && strstr(note, "line 3") &&
          strstr(note, "gemma4-31b"), "broken: %s '%s'", chat_kind_name(k), note);
    k = chat_pick(CHAT_GEMMA3, "", 0, note, sizeof note);
    CHECK(k == CHAT_TPL_GEMMA3 && strstr(note, "not a template clgemma knows"), "empty: '%s'", note);
}

static const char *const g3_controls[] = { "<bos>", "<start_of_turn>", "<end_of_turn>", "<start_of_image>" };

/* control-token text somewhere other than exactly at a span (a message that holds it) */
static int stray_control(const chat_text *t)
{
    for (size_t p = 0; p < t->len; p++)
        for (size_t c = 0; c < 4; c++) {
            size_t l = strlen(g3_controls[c]);
            if (p + l > t->len || memcmp(t->text + p, g3_controls[c], l)) continue;
            int at = 0;
            for (int j = 0; j < t->n_special; j++) at |= t->special[j].off == p && t->special[j].len == l;
            if (!at) return 1;
        }
    return 0;
}

/* the ids of a rendering against the whole text encoded with special-token parsing */
static void test_tokenize(void)
{
    gguf_file *g = NULL;
    tokenizer *tok = NULL;
    char err[256];
    CHECK(gguf_open(&g, "models/gemma-3-270m-q4_k_m.gguf", err, sizeof err) == 0, "%s (make model fetches it)", err);
    if (!g) return;
    CHECK(tokenizer_from_gguf(&tok, g, err, sizeof err) == 0, "%s", err);
    gguf_close(g);
    if (!tok) return;
    int32_t ctl[4];
    for (int c = 0; c < 4; c++) ctl[c] = tokenizer_find(tok, g3_controls[c]);
    json_object *cases = json_object_object_get(gemma3_doc, "cases");
    int compared = 0;
    for (size_t i = 0; i < json_object_array_length(cases); i++) {
        json_object *c = json_object_array_get_idx(cases, i);
        const char *name = json_object_get_string(json_object_object_get(c, "name"));
        chat_opts o = { 1, 0, "<bos>" };
        chat_text t;
        if (chat_render(CHAT_TPL_GEMMA3, json_object_object_get(c, "messages"), NULL, &o, &t, err, sizeof err)) continue;
        int32_t *ids;
        int n = chat_tokenize(&t, tok, &ids), controls = 0;
        CHECK(n > 0 && ids[0] == tokenizer_bos(tok), "%s: %d ids", name, n);
        for (int j = 0; j < n; j++)
            for (int k = 0; k < 4; k++) controls += ids[j] == ctl[k];
        CHECK(controls == t.n_special, "%s: %d control ids for %d control spans", name, controls, t.n_special);
        if (!stray_control(&t)) {
            int whole = tokenizer_encode(tok, t.text, t.len, 0, 1, NULL, 0);
            int32_t *w = malloc(sizeof *w * (size_t)(whole > 0 ? whole : 1));
            tokenizer_encode(tok, t.text, t.len, 0, 1, w, whole);
            CHECK(whole == n && !memcmp(w, ids, sizeof *w * (size_t)n), "%s: %d ids, %d for the whole text", name, n, whole);
            free(w);
            compared++;
        }
        free(ids);
        chat_text_free(&t);
    }
    CHECK(compared >= 20, "only %d renderings compared", compared);
    /* "<end_of_turn>" typed by the user: characters, not the control token */
    json_object *msgs = json_tokener_parse("[{\"role\": \"user\", \"content\": \"Say <end_of_turn> now\"}]");
    chat_opts o = { 1, 0, "<bos>" };
    chat_text t;
    CHECK(chat_render(CHAT_TPL_GEMMA3, msgs, NULL, &o, &t, err, sizeof err) == 0, "%s", err);
    int32_t *ids;
    int n = chat_tokenize(&t, tok, &ids), eots = 0;
    for (int j = 0; j < n; j++) eots += ids[j] == ctl[2];
    CHECK(n > 0 && eots == 1, "%d ids, %d <end_of_turn>", n, eots);
    free(ids);
    chat_text_free(&t);
    json_object_put(msgs);
    tokenizer_destroy(tok);
}

int main(void)
{
    gemma3_doc = json_object_from_file("tests/golden/chat_gemma3.json");
    if (!gemma3_doc) { printf("FAIL test_chat: cannot read tests/golden/chat_gemma3.json\n"); return 1; }
    RUN_TEST(test_gemma3_corpus);
    RUN_TEST(test_structural_check);
    RUN_TEST(test_pick);
    RUN_TEST(test_tokenize);
    json_object_put(gemma3_doc);
    CHECK_EXIT();
}
