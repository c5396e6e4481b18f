/* api_chat.c — POST /v1/chat/completions.
 *
 * The messages go to the engine as a JSON conversation; the model's chat template is rendered natively
 * (opencl/io/chat.h) and tokenized so that message text can never become control tokens: only the control
 * tokens the template itself writes are parsed as such. A user who writes "<end_of_turn>" gets the
 * characters, not the turn boundary. A conversation the template refuses (as jinja2 would raise) is a 400. */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "api_respond.h"
#include "json_io.h"

static const char *role_name(enum api_role r)
{
    return r == ROLE_SYSTEM ? "system" : r == ROLE_USER ? "user" : "assistant";
}

static int build_prompt(const engine *e, const api_message *msgs, int n, int32_t **ids, int *n_ids, api_error *err)
{
    json_object *arr = json_object_new_array();
    int oom = !arr;
    for (int i = 0; !oom && i < n; i++) {
        json_object *m = json_object_new_object();
        if (!m || json_object_array_add(arr, m)) { json_object_put(m); oom = 1; break; }
        json_object *role = json_object_new_string(role_name(msgs[i].role)),
                    *content = json_object_new_string_len(msgs[i].content, (int)msgs[i].len);
        oom = !role || !content;
        json_object_object_add(m, "role", role);
        json_object_object_add(m, "content", content);
    }
    if (oom) {
        json_object_put(arr);
        return api_fail(err, 500, "server_error", NULL, NULL, "out of memory");
    }
    engine_chat_opts o = { 1, 0 };
    char why[512];
    int k = engine_chat_encode(e, arr, NULL, &o, ids, why, sizeof why);
    json_object_put(arr);
    if (k == -1) return api_fail(err, 400, "invalid_request_error", NULL, "messages", "%s", why);
    if (k < 0) return api_fail(err, 500, "server_error", NULL, NULL, "%s", why);
    *n_ids = k;
    return 0;
}

int api_chat(const api_ctx *c, http_req *r)
{
    static const api_shape shape = { "chat.completion", "chat.completion.chunk", "chatcmpl-", 1 };
    api_error e;
    char *body = NULL;
    size_t len;
    api_chat_request req;
    memset(&req, 0, sizeof req);
    if (api_require_ready(c, &e) || http_read_body(r, c->cfg->max_body, &body, &len, &e) ||
        json_parse_chat(body, len, &req, &e) || api_check_model(c, req.model, &e)) {
        free(body);
        api_chat_request_free(&req);
        return api_reply_error(r, &e);
    }
    free(body);
    int32_t *ids = NULL;
    int n_ids = 0, rc;
    if (build_prompt(c->eng, req.msgs, req.n_msgs, &ids, &n_ids, &e)) rc = api_reply_error(r, &e);
    else rc = api_generate(c, r, &shape, &req.gen, ids, n_ids);
    free(ids);
    api_chat_request_free(&req);
    return rc;
}
