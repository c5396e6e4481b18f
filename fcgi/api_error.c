/* api_error.c — OpenAI error objects (see api_error.h). */
#include "api_error.h"

#include <json-c/json.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int api_fail(api_error *e, int status, const char *type, const char *code, const char *param,
             const char *fmt, ...)
{
    e->status = status;
    snprintf(e->type, sizeof e->type, "%s", type ? type : "invalid_request_error");
    snprintf(e->code, sizeof e->code, "%s", code ? code : "");
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return -1;
}

char *api_error_body(const api_error *e)
{
    json_object *root = json_object_new_object(), *o = json_object_new_object();
    if (!root || !o) { json_object_put(root); json_object_put(o); return NULL; }
    json_object_object_add(o, "message", json_object_new_string(e->message));
    json_object_object_add(o, "type", json_object_new_string(e->type));
    json_object_object_add(o, "param", e->param[0] ? json_object_new_string(e->param) : NULL);
    json_object_object_add(o, "code", e->code[0] ? json_object_new_string(e->code) : NULL);
    json_object_object_add(root, "error", o);
    const char *s = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
    char *copy = s ? strdup(s) : NULL;
    json_object_put(root);
    return copy;
}
