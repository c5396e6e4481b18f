/* json_fields.h — every request field the API knows and what the server does with it, so that
 * nothing a client sends is silently ignored: an unknown field, or a known one this server does
 * not support (with a value other than its neutral one), is a 400 that names it. */
#ifndef CLGEMMA_FCGI_JSON_FIELDS_H
#define CLGEMMA_FCGI_JSON_FIELDS_H

#include "api_error.h"

struct json_object;

enum api_body { BODY_CHAT, BODY_COMPLETION, BODY_MESSAGE };

/* Checks the keys of obj (a request body, or one chat message with param "messages[i]").
 * Returns 0, or -1 with e (400). */
int json_check_fields(struct json_object *obj, enum api_body body, const char *param, api_error *e);

#endif
