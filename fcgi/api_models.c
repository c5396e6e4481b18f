/* api_models.c — GET /v1/models and GET /v1/models/{id}: the loaded model and its context. */
#include <json-c/json.h>
#include <string.h>

#include "api.h"
#include "api_respond.h"

static json_object *model_object(const api_ctx *c)
{
    const engine_info *info = engine_get_info(c->eng);
    json_object *m = json_object_new_object();
    json_object_object_add(m, "id", json_object_new_string(c->cfg->model_id));
    json_object_object_add(m, "object", json_object_new_string("model"));
    json_object_object_add(m, "created", json_object_new_int64(c->created));
    json_object_object_add(m, "owned_by", json_object_new_string("clgemma"));
    json_object_object_add(m, "context_length", json_object_new_int64(info->n_ctx));
    json_object_object_add(m, "max_model_len", json_object_new_int64(info->n_ctx));
    json_object_object_add(m, "architecture", json_object_new_string(info->arch));
    json_object_object_add(m, "name", json_object_new_string(info->name));
    return m;
}

int api_models(const api_ctx *c, http_req *r)
{
    api_error e;
    if (api_require_ready(c, &e)) return api_reply_error(r, &e);
    json_object *o;
    const char *id = r->path + strlen("/v1/models");
    if (*id == '/' && id[1]) {
        if (api_check_model(c, id + 1, &e)) return api_reply_error(r, &e);
        o = model_object(c);
    } else {
        o = json_object_new_object();
        json_object *data = json_object_new_array();
        json_object_array_add(data, model_object(c));
        json_object_object_add(o, "object", json_object_new_string("list"));
        json_object_object_add(o, "data", data);
    }
    int rc = http_send_json(r, 200, json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(o);
    return rc;
}
