/* api_error.h — an error as an OpenAI client sees it: the HTTP status and the error object, and its
 * JSON body. No engine, no FastCGI here. */
#ifndef CLGEMMA_FCGI_API_ERROR_H
#define CLGEMMA_FCGI_API_ERROR_H

typedef struct api_error {
    int  status;          /* 400, 404, ... */
    char type[32];        /* invalid_request_error, server_error, ... */
    char code[48];        /* "" -> null */
    char param[64];       /* "" -> null */
    char message[320];
} api_error;

/* Fills e and returns -1 (so handlers can `return api_fail(...)`). */
int api_fail(api_error *e, int status, const char *type, const char *code, const char *param,
             const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* {"error":{"message","type","param","code"}}: malloc'd NUL-terminated JSON text, or NULL on OOM */
char *api_error_body(const api_error *e);

#endif
