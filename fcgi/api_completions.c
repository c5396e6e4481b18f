/* api_completions.c — POST /v1/completions: a raw prompt, no chat template. The prompt is the
 * caller's own text end to end, so special-token text in it (e.g. a hand-written Gemma turn) is
 * recognised, as in llama-server and vLLM; BOS is added. */
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "api_respond.h"
#include "json_io.h"

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
    const tokenizer *t = engine_tokenizer(c->eng);
    int n = tokenizer_encode(t, req.prompt, req.prompt_len, 1, 1, NULL, 0);
    int32_t *ids = n > 0 ? malloc((size_t)n * sizeof *ids) : NULL;
    int rc;
    if (!ids || tokenizer_encode(t, req.prompt, req.prompt_len, 1, 1, ids, n) != n)
        rc = api_reply_error(r, (api_fail(&e, n == 0 ? 400 : 500, n == 0 ? "invalid_request_error" : "server_error",
                                          NULL, n == 0 ? "prompt" : NULL,
                                          n == 0 ? "the prompt is empty" : "tokenization failed"), &e));
    else
        rc = api_generate(c, r, &shape, &req.gen, ids, n);
    free(ids);
    api_completion_request_free(&req);
    return rc;
}
