/* runtime.h — OpenCL device choice, context and queue, program build with an on-disk binary
 * cache, and small helpers for buffers and launches. One runtime per engine. */
#ifndef CLGEMMA_RUNTIME_H
#define CLGEMMA_RUNTIME_H

#define CL_TARGET_OPENCL_VERSION 120
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>
#include <stddef.h>
#include <stdint.h>

#define RT_MAX_SETTINGS 32

typedef struct cl_runtime {
    cl_platform_id platform;
    cl_device_id device;
    cl_context ctx;
    cl_command_queue q;
    cl_program prog;
    cl_program prog_capped;  /* NVIDIA: the tile products, built with a register cap (runtime.c) */
    char device_name[256];
    char platform_name[128];
    char driver[128];
    int is_gpu, is_nvidia, is_cpu;
    uint64_t global_mem;
    uint64_t max_alloc;
    size_t max_wg;
    int profiling;
    double build_seconds;
    int cache_hit;
    /* measurement settings NAME=VALUE (engine_opts.settings, from clgemma bench --set), borrowed
     * while the engine loads */
    const char *const *settings;
    int n_settings;
} cl_runtime;

/* Lists platforms and devices on stdout (clgemma devices). Returns the number of devices. */
int  rt_list_devices(void);
/* spec: "P:D", or NULL (env CLGEMMA_DEVICE, else first GPU, else first device) */
int  rt_create(cl_runtime *rt, const char *spec, int profiling, char *err, size_t errlen);
/* Builds the embedded kernel sources with options (plus device-derived -D flags), using the
 * program-binary cache in cache_dir (NULL: default location). */
int  rt_build(cl_runtime *rt, const char *options, const char *cache_dir, char *err, size_t errlen);
void rt_destroy(cl_runtime *rt);

/* The value of measurement setting name (e.g. "CL_DEFS"), or NULL when it is not set. */
const char *rt_setting(cl_runtime *rt, const char *name);
/* int value of a setting, or def when it is not set or below min */
int  rt_setting_int(cl_runtime *rt, const char *name, int min, int def);
/* 1 when setting ("NAME=VALUE") is one the runtime or the engine reads itself (CL_DEFS, MAX_BATCH);
 * the others belong to the ops policy (ops_policy_apply) */
int  rt_setting_known(const char *setting);

cl_kernel rt_kernel(cl_runtime *rt, const char *name, char *err, size_t errlen);
cl_mem    rt_alloc(cl_runtime *rt, size_t bytes, const void *host, char *err, size_t errlen);

const char *rt_errstr(cl_int e);
/* concatenated embedded kernel sources (caller frees) */
char *rt_kernel_source(void);

#endif
