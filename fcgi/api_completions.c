/* api_completions.c — POST /v1/completions: raw prompts, no chat template. A text prompt is the
 * caller's own text end to end, so special-token text in it (e.g. a hand-written Gemma turn) is
 * recognised, as in llama-server and vLLM; BOS is added. Token-id prompts go to the model as they
 * are, each id checked against the vocabulary. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "api_respond.h"
#include "json_io.h"

/* prompt i as tokens into *out (text: tokenized; ids: checked); 0, or -1 with e */
static int prompt_tokens(const api_ctx *c, const api_completion_request *req, int i, gen_prompt *out, api_error *e)
{
    const tokenizer *t = engine_tokenizer(c->eng);
    const api_prompt *p = &req->prompts[i];
    char where[48];
    if (!p->text) {
        uint32_t n_vocab = tokenizer_n_vocab(t);
        for (int k = 0; k < p->n_ids; k++) {
            if ((uint32_t)p->ids[k] < n_vocab) continue;
            if (req->n_prompts > 1) snprintf(where, sizeof where, "prompt[%d][%d]", i, k);
            else snprintf(where, sizeof where, "prompt[%d]", k);
            return api_fail(e, 400, "invalid_request_error", NULL, where,
                            "'%s' is token %d; this model's vocabulary has %u tokens", where, p->ids[k], n_vocab);
        }
        *out = (gen_prompt){ .ids = p->ids, .n = p->n_ids };
        return 0;
    }
    int n = tokenizer_encode(t, p->text, p->len, 1, 1, NULL, 0);
    int32_t *ids = n > 0 ? malloc((size_t)n * sizeof *ids) : NULL;
    if (!ids || tokenizer_encode(t, p->text, p->len, 1, 1, ids, n) != n) {
        free(ids);
        if (n == 0) return api_fail(e, 400, "invalid_request_error", NULL, "prompt", "the prompt is empty");
        return api_fail(e, 500, "server_error", NULL, NULL, "tokenization failed");
    }
    *out = (gen_prompt){ .ids = ids, .n = n, .text = p->text, .len = p->len };
    return 0;
}

int api_completions(const api_ctx *c, http_req *r)
{
    static const api_shape shape = { "text_completion", "text_completion", "cmpl-", 0 };
    api_error e;
    char *body = NULL;
    size_t len;
    api_completion_request req;
    memset(&req, 0, sizeof req);
    if (api_require_ready(c, &e) || http_read_body(r, c->cfg->max_body, &body, &len, &e) ||
        json_parse_completion(body, len, &req, &e) || api_check_model(c, req.model, &e)) {
        free(body);
        api_completion_request_free(&req);
        return api_reply_error(r, &e);
    }
    free(body);
    gen_prompt *prompts = calloc((size_t)req.n_prompts, sizeof *prompts);
    int rc = prompts ? 0 : api_fail(&e, 500, "server_error", NULL, NULL, "out of memory"), made = 0;
    for (; !rc && made < req.n_prompts; made++) rc = prompt_tokens(c, &req, made, &prompts[made], &e);
    if (rc) rc = api_reply_error(r, &e);
    else rc = api_generate_prompts(c, r, &shape, &req.gen, prompts, req.n_prompts, "prompt");
    for (int i = 0; i < made; i++)
        if (prompts[i].text) free((void *)prompts[i].ids); /* tokenized here; id prompts are the request's */
    free(prompts);
    api_completion_request_free(&req);
    return rc;
}
